// kernels/cuda/conformance.cu: the conformance set's kernels (conformance.h): each runs one
// instruction form on inputs from global memory and writes what it produced, so that the
// emulator's answer and a GPU's can be compared bit for bit. Chapter 21 (Hopper).
// Read before: kernels/cuda/conformance.h. Read next: lab/conformance.cpp.
//
// Every kernel puts its inputs where the instruction expects them by the PTX ISA's layouts
// ("Matrix fragments for mma.m16n8k16", "ldmatrix", "Matrix Descriptor Format" and the
// swizzle modes, "Tensor copy"), written here once, from the document, as plain index
// arithmetic. On a GPU the instruction then reads them as the chip does; on the emulator as
// simt_tensor_cores.cpp and simt_hopper.cpp model it. If the two outputs differ, either this
// file's reading of the PTX ISA or the emulator's is wrong; the test of the emulator against
// a CPU reference of the same layouts (tests/emulator/test_conformance.cpp) tells which.
#include "kernels/cuda/conformance.h"

#include <cstdint>

#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "kernels/cuda/simt_tensor_cores.h"

#if !BRRR_EMULATOR
#include "kernels/cuda/check.h"  // BRRR_CUDA_CHECK
#include "kernels/cuda/hopper_device.h"
#endif

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

// ---------------------------------------------------------------------------------------------
// mma.sync m16n8k16 bf16: one warp. Lane 4 g + t holds, by the PTX ISA's fragment tables:
//   a[r]: row g + 8 (r % 2), columns 2 t + 8 (r / 2) and the next (the lower in the low half)
//   b[r]: rows (k) 2 t + 8 r and the next, column g
//   c[i], d[i]: row g + 8 (i / 2), column 2 t + i % 2

__global__ void mma_case(std::uint32_t* out, const std::uint32_t* in) {
  const std::uint32_t* a_words = in;  // A row major: A[row][col], A[row][col + 1] in one word
  const auto* b_values = reinterpret_cast<const std::uint16_t*>(in + 128);  // B[k][n] at k * 8 + n
  const float* c_values = reinterpret_cast<const float*>(in + 192);
  const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
  unsigned a[4], b[2];
  for (int r = 0; r < 4; ++r) a[r] = a_words[((g + 8 * (r % 2)) * 16 + 2 * t + 8 * (r / 2)) / 2];
  for (int r = 0; r < 2; ++r) {
    const int k = 2 * t + 8 * r;
    b[r] = static_cast<unsigned>(b_values[k * 8 + g]) | static_cast<unsigned>(b_values[(k + 1) * 8 + g]) << 16;
  }
  float c[4], d[4];
  for (int i = 0; i < 4; ++i) c[i] = c_values[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2];
  mma_m16n8k16_bf16(d, a, b, c);
  auto* d_values = reinterpret_cast<float*>(out);
  for (int i = 0; i < 4; ++i) d_values[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = d[i];
}

// ---------------------------------------------------------------------------------------------
// ldmatrix: four 8 x 8 matrices of 16-bit values in shared memory, 16 bytes a row; lane 8 j + i
// gives the address of row i of matrix j (x1 reads lanes 0-7's, x2 0-15's, x4 all).

template <int Count, bool Trans>
__global__ void ldmatrix_case(std::uint32_t* out, const std::uint32_t* in) {
  __shared__ int4 tile_rows[32];  // int4: 16-byte aligned, as ldmatrix's rows must be
  auto* tiles = reinterpret_cast<std::uint32_t*>(tile_rows);
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 128; i += 32) tiles[i] = in[i];
  __syncwarp();
  const void* row = tiles + 4 * lane;  // matrix lane / 8, row lane % 8
  unsigned r[Count];
  if constexpr (Count == 1 && !Trans) ldmatrix_x1(r, row);
  if constexpr (Count == 2 && !Trans) ldmatrix_x2(r, row);
  if constexpr (Count == 4 && !Trans) ldmatrix_x4(r, row);
  if constexpr (Count == 1 && Trans) ldmatrix_x1_trans(r, row);
  if constexpr (Count == 2 && Trans) ldmatrix_x2_trans(r, row);
  if constexpr (Count == 4 && Trans) ldmatrix_x4_trans(r, row);
  for (int j = 0; j < Count; ++j) out[lane * Count + j] = r[j];
}

// ---------------------------------------------------------------------------------------------
// cp.async: lane l copies Bytes from in + 16 l bytes to shared + 16 l bytes, reading src_bytes
// of them (the rest zero-filled); shared memory starts as 0x5A bytes.

template <int Bytes>
__global__ void cp_async_case(std::uint32_t* out, const std::uint32_t* in, int src_bytes) {
  __shared__ int4 slot_rows[32];  // int4: 16-byte aligned, as cp.async's destinations must be
  auto* slots = reinterpret_cast<std::uint32_t*>(slot_rows);
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 128; i += 32) slots[i] = 0x5A5A5A5Au;
  __syncwarp();
  cp_async<Bytes>(slots + 4 * lane, in + 4 * lane, src_bytes);
  cp_async_commit_group();
  cp_async_wait_group<0>();
  __syncwarp();
  for (int i = lane; i < 128; i += 32) out[i] = slots[i];
}

// ---------------------------------------------------------------------------------------------
// wgmma m64nNk16 bf16: one warpgroup. A (64 x 16) and B (N columns of 16 k) are placed in
// shared memory by the layouts of the PTX ISA's "Shared Memory Matrix Layout": without
// swizzle, 8 x 16-byte core matrices (leading offset 128 bytes between the two k halves,
// stride 256 between 8-row groups); with a swizzle of S bytes, rows of S bytes in patterns of
// 8 rows (stride 8 S), whose 16-byte chunk c of 128-byte line L sits at c ^ (L % 8 & (S / 16 - 1)).
// MN-major B: 8 k x 8 n core matrices unswizzled; swizzled, atoms of 8 k rows of S bytes (S / 2
// columns), the two k halves a pattern apart (stride), atoms along N two patterns apart (leading).

constexpr int kBOffset = 8192;  // B's bytes start here (a multiple of 1024; A takes at most 8 KiB)

__device__ __forceinline__ unsigned row_bytes_of(int swizzle) {
  return brrr::simt::swizzle_row_bytes(static_cast<brrr::simt::Swizzle>(swizzle));
}
__device__ __forceinline__ unsigned swizzled(unsigned at, unsigned row) {
  if (row == 16) return at;
  const unsigned line = at / 128 % 8, chunk = at / 16 % 8, mask = row / 16 - 1;
  return at - chunk * 16 + (chunk ^ (line & mask)) * 16;
}
// The byte of (r, k) in a K-major tile, and of (n, k) in an MN-major one.
__device__ __forceinline__ unsigned k_major_at(int r, int k, unsigned row) {
  const unsigned at = row == 16 ? (r / 8) * 256 + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2
                                : (r / 8) * 8 * row + (r % 8) * row + k * 2;
  return swizzled(at, row);
}
__device__ __forceinline__ unsigned mn_major_at(int n, int k, unsigned row) {
  const unsigned per_atom = row / 2;
  const unsigned at = row == 16 ? (n / 8) * 256 + (k / 8) * 128 + (k % 8) * 16 + (n % 8) * 2
                                : (n / per_atom) * 16 * row + (k / 8) * 8 * row + (k % 8) * row + (n % per_atom) * 2;
  return swizzled(at, row);
}

template <int N, bool TransB, bool Registers>
__global__ void __launch_bounds__(128) wgmma_case(std::uint32_t* out, const std::uint32_t* in, int swizzle) {
  BRRR_DYNAMIC_SHARED(unsigned char, raw);
  auto* shared = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  const auto* A = reinterpret_cast<const std::uint16_t*>(in);        // A[m][k] at m * 16 + k
  const auto* B = reinterpret_cast<const std::uint16_t*>(in + 512);  // B[k][n] at k * N + n
  const auto* C = reinterpret_cast<const float*>(in + 512 + 8 * N);  // C[m][n] at m * N + n
  const int thread = static_cast<int>(threadIdx.x);
  const unsigned row = row_bytes_of(swizzle);
  for (int i = thread; i < (kBOffset + 4096) / 4; i += 128) reinterpret_cast<std::uint32_t*>(shared)[i] = 0;
  __syncthreads();
  for (int i = thread; i < 64 * 16; i += 128)
    *reinterpret_cast<std::uint16_t*>(shared + k_major_at(i / 16, i % 16, row)) = A[i];
  for (int i = thread; i < 16 * N; i += 128) {
    const int k = i / N, n = i % N;
    *reinterpret_cast<std::uint16_t*>(shared + kBOffset + (TransB ? mn_major_at(n, k, row) : k_major_at(n, k, row))) = B[i];
  }
  fence_proxy_async_shared_cta();
  __syncthreads();
  // The accumulators: warp w of the group has rows 16 w .., each 8-column chunk j laid out as
  // mma.m16n8's c (value i: row q + 8 (i % 4 / 2), column 8 j + 2 t + i % 2).
  const int w = thread / 32, q = thread % 32 / 4, t = thread % 4;
  const auto d_at = [&](int i) { return (16 * w + q + 8 * (i % 4 / 2)) * N + 8 * (i / 4) + 2 * t + i % 2; };
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = C[d_at(i)];
  const auto s = static_cast<brrr::simt::Swizzle>(swizzle);
  const bool plain = row == 16;
  const std::uint64_t b = TransB ? wgmma_descriptor(shared + kBOffset, plain ? 128 : 16 * row, plain ? 256 : 8 * row, s)
                                 : wgmma_descriptor(shared + kBOffset, plain ? 128 : 16, plain ? 256 : 8 * row, s);
  // A from registers: mma.m16n8k16's A fragment, per warp of 16 rows. Written before the fence,
  // as d is: the PTX ISA wants a wgmma.fence between a thread's writes of a wgmma's registers
  // and the wgmma.
  unsigned a_fragment[4];
  for (int r = 0; r < 4; ++r) {
    const int m = 16 * w + q + 8 * (r % 2), k = 2 * t + 8 * (r / 2);
    a_fragment[r] = static_cast<unsigned>(A[m * 16 + k]) | static_cast<unsigned>(A[m * 16 + k + 1]) << 16;
  }
  wgmma_fence();
  if constexpr (Registers) {
    wgmma_m64nNk16_bf16<N, TransB>(d, a_fragment, b, 1);
  } else {
    const std::uint64_t a = wgmma_descriptor(shared, plain ? 128 : 16, plain ? 256 : 8 * row, s);
    wgmma_m64nNk16_bf16<N, false, TransB>(d, a, b, 1);
  }
  wgmma_commit_group();
  wgmma_wait_group<0>();
  auto* D = reinterpret_cast<float*>(out);
  for (int i = 0; i < N / 2; ++i) D[d_at(i)] = d[i];
}

// ---------------------------------------------------------------------------------------------
// TMA: a 2-D box of floats at (x, y) between the tensor and shared memory (1024-aligned, for
// the 128-byte swizzle's pattern); past the tensor's edges a load reads zeros and a store
// writes nothing.

constexpr int kBoxWordsMax = 32 * kTmaBoxRows;

__global__ void tma_load_case(const __grid_constant__ brrr::simt::TensorMap map, std::uint32_t* out, int x, int y,
                              int words) {
  BRRR_DYNAMIC_SHARED(unsigned char, raw);
  auto* box = reinterpret_cast<std::uint32_t*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  __shared__ std::uint64_t full;
  const int thread = static_cast<int>(threadIdx.x);
  if (thread == 0) {
    mbarrier_init(&full, 1);
    fence_proxy_async_shared_cta();
  }
  __syncthreads();
  if (thread == 0) {
    mbarrier_arrive_expect_tx(&full, static_cast<unsigned>(4 * words));
    cp_async_bulk_tensor_2d_global_to_shared(box, &map, x, y, &full);
  }
  mbarrier_wait_parity(&full, 0);
  for (int i = thread; i < words; i += 32) out[i] = box[i];
}

__global__ void tma_store_case(const __grid_constant__ brrr::simt::TensorMap map, const std::uint32_t* values, int x,
                               int y, int words) {
  BRRR_DYNAMIC_SHARED(unsigned char, raw);
  auto* box = reinterpret_cast<std::uint32_t*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  const int thread = static_cast<int>(threadIdx.x);
  for (int i = thread; i < words; i += 32) box[i] = values[i];
  fence_proxy_async_shared_cta();  // these stores, then the async proxy's read of them
  __syncthreads();
  if (thread == 0) {
    cp_async_bulk_tensor_2d_shared_to_global(&map, x, y, box);
    cp_async_bulk_commit_group();
    cp_async_bulk_wait_group<0>();
  }
}

__global__ void copy_words(std::uint32_t* out, const std::uint32_t* in, int words) {
  for (int i = static_cast<int>(threadIdx.x); i < words; i += static_cast<int>(blockDim.x)) out[i] = in[i];
}

// ---------------------------------------------------------------------------------------------
// mbarrier phases: 64 threads and an mbarrier of 64 arrivals. In phase p each thread writes its
// value to slot p % 2, arrives, waits on parity p % 2, and reads its neighbour p + 1 places on;
// a sixth arrival phase (parity 0 again) also waits for a TMA load's bytes (expect_tx). Two
// slots suffice: a thread can write slot p % 2 again only in phase p + 2, which cannot begin
// before everyone has arrived in phase p + 1, after their reads of phase p.

__global__ void __launch_bounds__(64) mbarrier_case(const __grid_constant__ brrr::simt::TensorMap map,
                                                    std::uint32_t* out, const std::uint32_t* in) {
  BRRR_DYNAMIC_SHARED(unsigned char, raw);
  auto* box = reinterpret_cast<std::uint32_t*>((reinterpret_cast<std::uintptr_t>(raw) + 1023) & ~std::uintptr_t{1023});
  __shared__ std::uint32_t slots[2][64];
  __shared__ std::uint64_t bar;
  const int thread = static_cast<int>(threadIdx.x);
  if (thread == 0) {
    mbarrier_init(&bar, 64);
    fence_proxy_async_shared_cta();
  }
  __syncthreads();
  for (int p = 0; p < 4; ++p) {
    slots[p % 2][thread] = in[p * 64 + thread];
    mbarrier_arrive(&bar);
    mbarrier_wait_parity(&bar, static_cast<unsigned>(p % 2));
    out[p * 64 + thread] = slots[p % 2][(thread + p + 1) % 64];
  }
  if (thread == 0) {
    mbarrier_arrive_expect_tx(&bar, 4 * kBoxWordsMax);
    cp_async_bulk_tensor_2d_global_to_shared(box, &map, 2, 3, &bar);
  } else {
    mbarrier_arrive(&bar);
  }
  mbarrier_wait_parity(&bar, 0);  // phase 4
  for (int i = thread; i < kBoxWordsMax; i += 64) out[4 * 64 + i] = box[i];
}

constexpr int kBoxShared = 1024 + 4 * kBoxWordsMax;  // alignment slack and the largest box

brrr::simt::TensorMap tensor_map(const ConformanceCase& c, const void* tensor) {
  brrr::simt::TensorMap map;
  const auto swizzle = static_cast<brrr::simt::TensorMapSwizzle>(c.kind == ConformanceKind::kTmaLoad ? c.swizzle : 0);
  brrr::simt::make_tensor_map_2d(&map, brrr::simt::TensorMapType::kFloat32, tensor, kTmaColumns, kTmaRows,
                                 kTmaColumns * 4, static_cast<std::uint32_t>(conformance_box_columns(c)), kTmaBoxRows,
                                 swizzle);
  return map;
}

void launch_ldmatrix(const ConformanceCase& c, std::uint32_t* out, const std::uint32_t* in, Stream stream) {
  if (c.count == 1 && !c.trans) BRRR_LAUNCH((ldmatrix_case<1, false>), 1, 32, 0, stream, out, in);
  if (c.count == 2 && !c.trans) BRRR_LAUNCH((ldmatrix_case<2, false>), 1, 32, 0, stream, out, in);
  if (c.count == 4 && !c.trans) BRRR_LAUNCH((ldmatrix_case<4, false>), 1, 32, 0, stream, out, in);
  if (c.count == 1 && c.trans) BRRR_LAUNCH((ldmatrix_case<1, true>), 1, 32, 0, stream, out, in);
  if (c.count == 2 && c.trans) BRRR_LAUNCH((ldmatrix_case<2, true>), 1, 32, 0, stream, out, in);
  if (c.count == 4 && c.trans) BRRR_LAUNCH((ldmatrix_case<4, true>), 1, 32, 0, stream, out, in);
}

template <int N>
void launch_wgmma(const ConformanceCase& c, std::uint32_t* out, const std::uint32_t* in, Stream stream) {
  const int shared = 1024 + kBOffset + 4096;
  if (c.a_registers && c.b_mn_major) BRRR_LAUNCH((wgmma_case<N, true, true>), 1, 128, shared, stream, out, in, c.swizzle);
  if (c.a_registers && !c.b_mn_major) BRRR_LAUNCH((wgmma_case<N, false, true>), 1, 128, shared, stream, out, in, c.swizzle);
  if (!c.a_registers && c.b_mn_major) BRRR_LAUNCH((wgmma_case<N, true, false>), 1, 128, shared, stream, out, in, c.swizzle);
  if (!c.a_registers && !c.b_mn_major)
    BRRR_LAUNCH((wgmma_case<N, false, false>), 1, 128, shared, stream, out, in, c.swizzle);
}

// Hopper's cases run sm_90a code, which traps elsewhere (and a trap ends the process's CUDA
// context): refuse them first on another GPU.
void check_hopper(const ConformanceCase& c) {
#if !BRRR_EMULATOR
  const ComputeCapability cc = compute_capability();
  BRRR_CHECK(cc.is_sm90(), "conformance case '", c.name, "': needs a Hopper GPU (sm_90: H100, H200); ",
             "this device is sm_", cc.major, cc.minor);
#else
  (void)c;
#endif
}

}  // namespace

void run_conformance_case(const ConformanceCase& c, std::uint32_t* out, const std::uint32_t* in, Stream stream) {
  const int box_words = conformance_box_columns(c) * kTmaBoxRows;
  const bool hopper = c.kind == ConformanceKind::kWgmma || c.kind == ConformanceKind::kTmaLoad ||
                      c.kind == ConformanceKind::kTmaStore || c.kind == ConformanceKind::kMbarrier;
  if (hopper) check_hopper(c);
  switch (c.kind) {
    case ConformanceKind::kMma:
      BRRR_LAUNCH(mma_case, 1, 32, 0, stream, out, in);
      return;
    case ConformanceKind::kLdmatrix:
      launch_ldmatrix(c, out, in, stream);
      return;
    case ConformanceKind::kCpAsync:
      if (c.bytes == 4) BRRR_LAUNCH(cp_async_case<4>, 1, 32, 0, stream, out, in, c.src_bytes);
      if (c.bytes == 8) BRRR_LAUNCH(cp_async_case<8>, 1, 32, 0, stream, out, in, c.src_bytes);
      if (c.bytes == 16) BRRR_LAUNCH(cp_async_case<16>, 1, 32, 0, stream, out, in, c.src_bytes);
      return;
    case ConformanceKind::kWgmma:
      if (c.n == 8) launch_wgmma<8>(c, out, in, stream);
      if (c.n == 16) launch_wgmma<16>(c, out, in, stream);
      return;
    case ConformanceKind::kTmaLoad:
      BRRR_LAUNCH(tma_load_case, 1, 32, kBoxShared, stream, tensor_map(c, in), out, c.x, c.y, box_words);
      return;
    case ConformanceKind::kTmaStore:
      BRRR_LAUNCH(copy_words, 1, 256, 0, stream, out, in, kTmaColumns * kTmaRows);
      BRRR_LAUNCH(tma_store_case, 1, 32, kBoxShared, stream, tensor_map(c, out), in + kTmaColumns * kTmaRows, c.x, c.y,
                  box_words);
      return;
    case ConformanceKind::kMbarrier:
      BRRR_LAUNCH(mbarrier_case, 1, 64, kBoxShared, stream, tensor_map(c, in + 4 * 64), out, in);
      return;
  }
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
