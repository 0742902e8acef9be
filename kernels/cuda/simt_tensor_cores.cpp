// kernels/cuda/simt_tensor_cores.cpp: the emulator's tensor-core instructions: mma.sync,
// ldmatrix and cp.async, lane by lane. Chapter 14 (tensor cores). Read before:
// kernels/cuda/simt_tensor_cores.h (their spellings, and what each does on the GPU).
// Read next: kernels/cuda/matmul/mma_sync.cu.
//
// mma.sync and ldmatrix are warp-collective: the 32 lanes meet (warp_exchange, a shuffle of
// several words), and each lane then computes its own registers of the result from everyone's
// registers. Where each value of a tile lives is the PTX ISA's "Matrix fragments" tables; with
// lane = 4 g + t (g = lane / 4 the group, t = lane % 4 the thread in the group):
//
//   m16n8k16, a (16 x 16, row major), register r holds two 16-bit values (lower index low):
//     row g + 8 (r % 2), columns 2 t + 8 (r / 2) and the next
//   m16n8k16, b (16 x 8, "col": k runs along a register), register r:
//     rows (k) 2 t + 8 r and the next, column (n) g
//   m16n8k8 tf32, a (16 x 8), register r:  row g + 8 (r % 2), column t + 4 (r / 2)
//   m16n8k8 tf32, b (8 x 8),  register r:  row (k) t + 4 r, column (n) g
//   c and d (16 x 8 float32), value i:     row g + 8 (i / 2), column 2 t + i % 2
//
// Products of bf16, f16 or tf32 values are exact. They are added to c the way tensor cores add,
// which is not float32's way (tensor_core_sum below): a block of products and the accumulator
// are aligned to the largest of them and summed with the bits below float32's 24 of that
// largest cut off, toward zero, and so is the result. Each cut is under one unit in the last
// place, like a rounding, but always in the same direction: an accumulator carried through
// thousands of mma instructions drifts toward zero, as it does on the GPU (the first H100 run
// of matmul variant 7 failed its accuracy check that way; chapter 14). tf32 operands are
// float32 bits of which the tensor core reads the top 19 (sign, exponent, 10 mantissa bits):
// the low 13 are ignored, so kernels round to tf32 first (float_to_tf32, cvt.rna: to nearest,
// ties away from zero).
//
// WMMA (nvcuda::wmma, simt_tensor_cores.h) runs on the same sums, with the emulator's own fragment layout.
//
// cp.async is a thread's own queue: the copy is noted at issue, the destination filled with
// 0xFF bytes (NaN) and marked in flight for the race detector, and copied when the issuing
// thread's cp_async_wait_group lets it complete. So a missing wait is never hidden by a copy
// that happened to arrive early: it reads NaN, and with the detector on it is an error naming
// both lines.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/simt_internal.h"
#include "kernels/cuda/simt_tensor_cores.h"

namespace brrr::simt::detail {
namespace {

// A 16-bit IEEE half as float (exact).
float half_to_float(std::uint32_t h) {
  const std::uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float magnitude;
  if (exponent == 0) magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero, subnormal
  else if (exponent == 31) magnitude = mantissa ? NAN : INFINITY;
  else magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  return sign ? -magnitude : magnitude;
}

// One 16-bit operand of a register: half 0 is the low 16 bits.
float operand16(std::uint32_t word, int half, bool is_bf16) {
  const std::uint32_t bits = half ? word >> 16 : word & 0xFFFF;
  return is_bf16 ? std::bit_cast<float>(bits << 16) : half_to_float(bits);
}

float operand_tf32(std::uint32_t word) { return std::bit_cast<float>(word & 0xFFFFE000u); }

// x toward zero to float32 (the float nearest x is one step too far half of the time).
float float_toward_zero(double x) {
  float f = static_cast<float>(x);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

// c + the sum of `count` exact products, as a tensor core adds them. The model is the one that
// Fasi, Higham, Mikaitis and Pranesh measured on the V100, T4 and A100 ("Numerical behavior of
// NVIDIA tensor cores", PeerJ Computer Science 7:e330, 2021): the products are exact; they and
// c are aligned to the exponent of the largest in magnitude, and whatever falls below the 24
// significant bits of that one is dropped (no guard bits: truncation toward zero); the aligned
// values are summed exactly and the sum is cut to float32, again toward zero. The products
// enter in blocks (8 for 16-bit operands, 4 for tf32, the A100's widths), each block's sum
// becoming the accumulator of the next. Other GPUs (the H100 among them) differ in the widths
// and in the last bits; what they share, and what matters to a kernel, is the direction: every
// cut is toward zero. Infinities and NaN are summed as IEEE floats.
}  // namespace

float tensor_core_sum(float c, const double* products, int count, int block) {
  double accumulator = c;
  for (int first = 0; first < count; first += block) {
    const int last = std::min(count, first + block);
    double largest = std::fabs(accumulator), exact = accumulator;
    for (int k = first; k < last; ++k) {
      largest = std::max(largest, std::fabs(products[k]));
      exact += products[k];
    }
    if (!std::isfinite(exact) || largest == 0.0) {  // inf, NaN, or all zeros (keeps the sign rules)
      accumulator = static_cast<float>(exact);
      continue;
    }
    // The unit of the last of 24 bits of the largest; every addend cut to a multiple of it.
    const double unit = std::ldexp(1.0, std::ilogb(largest) - 23);
    double sum = std::trunc(accumulator / unit) * unit;  // exact: at most 24 + 5 bits in all
    for (int k = first; k < last; ++k) sum += std::trunc(products[k] / unit) * unit;
    accumulator = float_toward_zero(sum);
  }
  return static_cast<float>(accumulator);
}

namespace {

// The words of an mma in the warp's table: a[0..3], b[0..1], c[0..3].
constexpr int kA = 0, kB = 4, kC = 6;

struct Copy {
  std::byte* destination;
  const std::byte* source;
  int bytes, src_bytes;
  int group;  // the commit group it belongs to
  const void* pc;
};
struct ThreadCopies {
  std::vector<Copy> queue;  // in issue order
  int committed = 0;        // groups committed so far; copies issued now join group `committed`
};
std::vector<ThreadCopies>& copies() {
  static std::vector<ThreadCopies> per_thread;
  return per_thread;
}

}  // namespace

void mma(MmaShape shape, float* d, const unsigned* a, const unsigned* b, const float* c,
         const std::source_location& at) {
  std::uint32_t words[10];
  for (int i = 0; i < 4; ++i) words[kA + i] = a[i];
  for (int i = 0; i < 2; ++i) words[kB + i] = b[i];
  for (int i = 0; i < 4; ++i) words[kC + i] = std::bit_cast<std::uint32_t>(c[i]);
  const char* name = shape == MmaShape::kM16N8K8Tf32 ? "mma.sync.m16n8k8.tf32"
                     : shape == MmaShape::kM16N8K16Bf16 ? "mma.sync.m16n8k16.bf16"
                                                        : "mma.sync.m16n8k16.f16";
  const std::uint32_t* table = warp_exchange(name, words, 10, at);
  const auto word = [&](int lane, int index) { return table[lane * kExchangeWords + index]; };

  // Assemble a (16 x K) and b (K x 8) from every lane's registers.
  const int K = shape == MmaShape::kM16N8K8Tf32 ? 8 : 16, block = shape == MmaShape::kM16N8K8Tf32 ? 4 : 8;
  float A[16][16], B[16][8];
  for (int lane = 0; lane < warpSize; ++lane) {
    const int g = lane / 4, t = lane % 4;
    if (shape == MmaShape::kM16N8K8Tf32) {
      for (int r = 0; r < 4; ++r) A[g + 8 * (r % 2)][t + 4 * (r / 2)] = operand_tf32(word(lane, kA + r));
      for (int r = 0; r < 2; ++r) B[t + 4 * r][g] = operand_tf32(word(lane, kB + r));
    } else {
      const bool is_bf16 = shape == MmaShape::kM16N8K16Bf16;
      for (int r = 0; r < 4; ++r)
        for (int h = 0; h < 2; ++h)
          A[g + 8 * (r % 2)][2 * t + h + 8 * (r / 2)] = operand16(word(lane, kA + r), h, is_bf16);
      for (int r = 0; r < 2; ++r)
        for (int h = 0; h < 2; ++h) B[2 * t + h + 8 * r][g] = operand16(word(lane, kB + r), h, is_bf16);
    }
  }
  // This lane's four results.
  const int lane = lane_id(), g = lane / 4, t = lane % 4;
  if (counters::Recorder* r = counters::active; r && lane == 0) counters::mma(*r, 2ull * 16 * 8 * K);
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i / 2), column = 2 * t + i % 2;
    double products[16];
    for (int k = 0; k < K; ++k) products[k] = static_cast<double>(A[row][k]) * B[k][column];
    d[i] = tensor_core_sum(std::bit_cast<float>(word(lane, kC + i)), products, K, block);
  }
  compiler_barrier();
}

void wmma_collective(const char* name, const void* pointer, unsigned stride, int layout, int element_bytes,
                     const std::source_location& at) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  const std::uint32_t words[4] = {static_cast<std::uint32_t>(address), static_cast<std::uint32_t>(address >> 32),
                                  stride, static_cast<std::uint32_t>(layout)};
  const std::uint32_t* table = warp_exchange(name, words, 4, at);
  for (int lane = 0; lane < warpSize; ++lane)
    if (!std::equal(words, words + 4, table + lane * kExchangeWords))
      ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " is given another pointer, stride or layout by lane ",
                           lane, "; the warp loads or stores one matrix together, so all 32 lanes must give the same");
  if (address % 32 != 0)
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " pointer ", pointer,
                         " is not 32-byte aligned (WMMA needs a 256-bit aligned pointer; on a GPU, undefined)");
  if (stride * static_cast<unsigned>(element_bytes) % 16 != 0)
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " stride ", stride, " elements of ", element_bytes,
                         " bytes is not a multiple of 16 bytes (WMMA's rule for ldm; on a GPU, undefined)");
}

void wmma_mma_m16n16k8_tf32(float* d, const float* a_own, const float* b_own, const float* c,
                            const std::source_location& at) {
  // Element e of lane l is element l + 32 e of its tile, row major: a is 16 x 8, b 8 x 16.
  std::uint32_t words[8];
  for (int e = 0; e < 4; ++e) {
    words[e] = std::bit_cast<std::uint32_t>(a_own[e]);
    words[4 + e] = std::bit_cast<std::uint32_t>(b_own[e]);
  }
  const std::uint32_t* table = warp_exchange("wmma::mma_sync", words, 8, at);
  const auto element = [&](int operand, int index) {  // index in the tile, row major
    return operand_tf32(table[(index % 32) * kExchangeWords + 4 * operand + index / 32]);
  };
  const int lane = lane_id();
  if (counters::Recorder* r = counters::active; r && lane == 0) counters::mma(*r, 2ull * 16 * 16 * 8);
  float result[8];
  for (int e = 0; e < 8; ++e) {
    const int row = (lane + 32 * e) / 16, column = (lane + 32 * e) % 16;
    double products[8];
    for (int k = 0; k < 8; ++k) products[k] = static_cast<double>(element(0, row * 8 + k)) * element(1, k * 16 + column);
    result[e] = tensor_core_sum(c[e], products, 8, 4);
  }
  std::copy(result, result + 8, d);  // d may be c
  compiler_barrier();
}

unsigned ldmatrix_fragment(const std::uint32_t* table, int matrix, int lane, bool transposed) {
  // Matrix j's row i is the 16 bytes lane 8 j + i loaded: 4 words, value c in word c / 2.
  const auto value = [&](int row, int column) {
    const std::uint32_t word = table[(8 * matrix + row) * kExchangeWords + column / 2];
    return column % 2 ? word >> 16 : word & 0xFFFF;
  };
  const int g = lane / 4, t = lane % 4;
  if (!transposed) return value(g, 2 * t) | value(g, 2 * t + 1) << 16;
  return value(2 * t, g) | value(2 * t + 1, g) << 16;  // column g of the matrix, rows 2 t and 2 t + 1
}

void check_ldmatrix_row(const char* name, const void* row, const std::source_location& at) {
  if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0)
    ::brrr::detail::fail(where_in_kernel(&at), ": ", name, " row address ", row,
                         " is not 16-byte aligned (each row of an 8 x 8 matrix is 16 bytes at a multiple of 16; "
                         "on a GPU, a misaligned address error)");
}

std::uint32_t float_to_tf32(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if ((bits & 0x7F800000u) == 0x7F800000u) return bits;  // infinity, NaN: as they are
  return (bits + 0x1000u) & 0xFFFFE000u;                   // to nearest, ties away from zero
}

void async_copies_begin_block(int threads) {
  auto& all = copies();
  if (static_cast<int>(all.size()) < threads) all.resize(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    all[static_cast<std::size_t>(i)].queue.clear();
    all[static_cast<std::size_t>(i)].committed = 0;
  }
}

void cp_async(void* destination, const void* source, int bytes, int src_bytes, const void* pc) {
  const auto where = [&] { return where_in_kernel(nullptr) + ": cp.async"; };
  const auto d = reinterpret_cast<std::uintptr_t>(destination), s = reinterpret_cast<std::uintptr_t>(source);
  // Both addresses, even for a copy of 0 source bytes (a zero fill): the PTX ISA requires them
  // aligned to the copy's size, and a GPU may fault on a misaligned source it never reads.
  if (d % static_cast<unsigned>(bytes) != 0 || s % static_cast<unsigned>(bytes) != 0)
    ::brrr::detail::fail(where(), " of ", bytes, " bytes from ", source, " to ", destination,
                         ": both addresses must be multiples of the copy's size (on a GPU, a misaligned address)");
  if (src_bytes < 0 || src_bytes > bytes)
    ::brrr::detail::fail(where(), " of ", bytes, " bytes reading ", src_bytes,
                         " source bytes; the source size must be 0 to the copy's size");
  // A partial copy (the zero-filling form) reads src_bytes by the PTX ISA, but on an H200
  // (2026-11-27) compute-sanitizer reported one that ended 6 bytes past its allocation as an
  // invalid read of all 16 bytes (memcheck), and one over freshly allocated bytes as a read of
  // uninitialized memory (initcheck). So the emulator holds the whole copy to its allocation,
  // and a kernel it passes also passes the GPU's tools. (A copy of 0 source bytes reads nothing.)
  memory::Allocation allocation;
  if (src_bytes > 0 && src_bytes < bytes && memory::find(source, allocation) &&
      s + static_cast<unsigned>(bytes) > allocation.begin + allocation.bytes)
    ::brrr::detail::fail(where(), " of ", bytes, " bytes reading ", src_bytes,
                         " source bytes (zero-filling the rest) ends past the source's allocation: ",
                         memory::describe(source), "; compute-sanitizer checks all ", bytes,
                         " bytes, so copy the last values of a row another way (plain loads)");
  ThreadCopies& mine = copies()[static_cast<std::size_t>(thread_in_block())];
  races::async_copy_issue(destination, static_cast<std::size_t>(bytes), pc);
  if (src_bytes > 0)
    if (counters::Recorder* r = counters::active)  // its global read, counted as ncu's LDGSTS
      counters::access(*r, s, static_cast<std::size_t>(src_bytes), false, reinterpret_cast<std::uintptr_t>(pc), true);
  std::memset(destination, 0xFF, static_cast<std::size_t>(bytes));  // in flight: garbage until the wait
  mine.queue.push_back({static_cast<std::byte*>(destination), static_cast<const std::byte*>(source), bytes, src_bytes,
                        mine.committed, pc});
}

void cp_async_commit_group() { ++copies()[static_cast<std::size_t>(thread_in_block())].committed; }

void cp_async_wait_group(int pending, const void* pc) {
  ThreadCopies& mine = copies()[static_cast<std::size_t>(thread_in_block())];
  // Complete every copy of the groups older than the newest `pending` committed ones.
  const int complete_below = mine.committed - pending;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < mine.queue.size(); ++i) {
    Copy& copy = mine.queue[i];
    if (copy.group < complete_below) {
      races::async_copy_complete(copy.destination, static_cast<std::size_t>(copy.bytes), copy.source,
                                 static_cast<std::size_t>(copy.src_bytes), copy.pc, pc);
      if (copy.src_bytes > 0) std::memcpy(copy.destination, copy.source, static_cast<std::size_t>(copy.src_bytes));
      std::memset(copy.destination + copy.src_bytes, 0, static_cast<std::size_t>(copy.bytes - copy.src_bytes));
    } else {
      mine.queue[kept++] = copy;
    }
  }
  mine.queue.resize(kept);
}

}  // namespace brrr::simt::detail
