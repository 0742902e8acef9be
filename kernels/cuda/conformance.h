// kernels/cuda/conformance.h: the conformance set's kernels, one per instruction form the
// emulator models (mma.sync, ldmatrix, cp.async, wgmma, TMA, mbarrier), each run on fixed
// inputs and writing what the instruction produced, as 32-bit words. The same source runs on
// the emulator and on a GPU: where the two differ bit for bit, the emulator is wrong and is
// fixed to match the chip. Chapter 21 (Hopper). Read before: kernels/cuda/
// simt_tensor_cores.h, kernels/cuda/simt_hopper.h. Read next: kernels/cuda/conformance.cu, then
// lab/conformance.cpp (the cases, their inputs, and `brrr conformance`).
//
// Compiled twice (see simt.h): brrr::kernels::emu runs on the emulator, brrr::kernels::cuda on a
// GPU (its Hopper cases need sm_90a; elsewhere they trap).
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

namespace brrr::kernels {

// What a case runs (lab/conformance.cpp holds the table of cases and their inputs).
enum class ConformanceKind : int { kMma, kLdmatrix, kCpAsync, kWgmma, kTmaLoad, kTmaStore, kMbarrier };

// One case's instruction form. The fields each kind reads:
//   kMma       rounding; in: A 16 x 16 bf16 row major, two a word; B 16 x 8 bf16, B[k][n] at
//              k * 8 + n; C 16 x 8 float32 -> D 16 x 8 float32, row major
//   kLdmatrix  count (1, 2, 4), trans; in: four 8 x 8 bf16 matrices, row major -> each lane's
//              `count` registers, lane by lane
//   kCpAsync   bytes (4, 8, 16), src_bytes (what is read; the rest zero-filled); in: 32 lanes'
//              sources, 16 bytes apart -> the 512 bytes of shared memory after the copies
//              (prefilled with 0x5A bytes: a copy of fewer than 16 bytes leaves the rest)
//   kWgmma     n (8 or 16), rounding, swizzle (simt::Swizzle's value), a_registers, b_mn_major; in: A
//              64 x 16 bf16 row major, B 16 x n bf16 (B[k][n]), C 64 x n float32 -> D 64 x n
//   kTmaLoad   swizzle (simt::TensorMapSwizzle's value), x, y: a float32 tensor of kTmaColumns x
//              kTmaRows in `in`, a box of (32 or the swizzle's span in floats) x 8 loaded at
//              (x, y) -> the box's shared memory as it lies, swizzled
//   kTmaStore  x, y: the same tensor in `in`, then the box's values; the box stored at (x, y)
//              -> the tensor after the store
//   kMbarrier  one block of 64 threads, 4 phases of an mbarrier of 64 arrivals and a fifth
//              that waits on a TMA load's bytes -> what each thread read after each phase
struct ConformanceCase {
  const char* name;
  ConformanceKind kind;
  int count, trans, bytes, src_bytes, n, swizzle, a_registers, b_mn_major, x, y;
  int rounding;      // kMma, kWgmma: inputs whose float32 sums round (else small integers: exact)
  const char* what;  // the form, and what its inputs expose
};

// The TMA cases' tensor: float32, kTmaColumns x kTmaRows (rows of 144 bytes, a multiple of 16).
constexpr int kTmaColumns = 36, kTmaRows = 20, kTmaBoxRows = 8;
// A TMA case's box: 8 rows of 32 floats, or of the swizzle's span (32, 64, 128 bytes).
inline int conformance_box_columns(const ConformanceCase& c) {
  return c.swizzle == 1 ? 8 : c.swizzle == 2 ? 16 : 32;  // TensorMapSwizzle: 1 32B, 2 64B, 3 128B
}
// The words of a case's input and output (lab/conformance.cpp sizes its buffers by them).
inline int conformance_in_words(const ConformanceCase& c) {
  const int tensor = kTmaColumns * kTmaRows, box = conformance_box_columns(c) * kTmaBoxRows;
  switch (c.kind) {
    case ConformanceKind::kMma: return 128 + 64 + 128;
    case ConformanceKind::kLdmatrix: return 128;
    case ConformanceKind::kCpAsync: return 128;
    case ConformanceKind::kWgmma: return 512 + 8 * c.n + 64 * c.n;
    case ConformanceKind::kTmaLoad: return tensor;
    case ConformanceKind::kTmaStore: return tensor + box;
    case ConformanceKind::kMbarrier: return 4 * 64 + tensor;
  }
  return 0;
}
inline int conformance_out_words(const ConformanceCase& c) {
  const int box = conformance_box_columns(c) * kTmaBoxRows;
  switch (c.kind) {
    case ConformanceKind::kMma: return 128;
    case ConformanceKind::kLdmatrix: return 32 * c.count;
    case ConformanceKind::kCpAsync: return 128;
    case ConformanceKind::kWgmma: return 64 * c.n;
    case ConformanceKind::kTmaLoad: return box;
    case ConformanceKind::kTmaStore: return kTmaColumns * kTmaRows;
    case ConformanceKind::kMbarrier: return 4 * 64 + 32 * kTmaBoxRows;
  }
  return 0;
}

namespace emu {
void run_conformance_case(const ConformanceCase& c, std::uint32_t* out, const std::uint32_t* in, Stream stream);
}  // namespace emu

namespace cuda {
void run_conformance_case(const ConformanceCase& c, std::uint32_t* out, const std::uint32_t* in, Stream stream);
}  // namespace cuda

}  // namespace brrr::kernels
