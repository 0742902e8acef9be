// kernels/cuda/matmul/cuda_cores.cu: matmul on the GPU's float32 units (the CUDA cores), from one
// thread per output to warp tiles with double buffering: variants 1 to 6 and 8 of matmul's
// thirteen. Each one changes one thing about the one before it, says why that should be faster
// on an H100, and what still limits it.
// Chapter 14 (matmul from naive to tensor cores). Read before: kernels/cpu/matmul.cpp (the
// reference), kernels/cuda/examples.cu (a first CUDA file), kernels/cuda/matmul/matmul.h and
// gemm.h (what every variant shares). Read next: kernels/cuda/matmul/mma_sync.cu (the tensor
// cores: variants 7 and 9 to 13), then kernels/cuda/cublas.cu (the bar every variant is
// measured against).
//
// kernels/cuda/matmul/ holds matmul by generation of the hardware, one file a family: the CUDA
// cores (this file) and the warp-level tensor cores of Volta to Ampere (WMMA and mma.sync,
// mma_sync.cu). The variants keep their numbers, which say the order they were written in.
//
// The order follows Simon Boehm's "How to optimize a CUDA matmul kernel for cuBLAS-like
// performance": naive, coalesced, shared-memory tiles, 1-D then 2-D register blocking,
// vectorized loads; then (variant 7, in mma_sync.cu) tensor cores; and last, back on the
// float32 units, warp tiles and double buffering (variant 8, his kernels 10 and 11).
// `brrr kernel-lab matmul` checks and times them all. register_matmul_cuda_core_kernels, at the
// end, registers them.
//
// Measured on an H100 80GB HBM3, 2026-11-23, with `scripts/gpu.sh` (see docs/measurements.md):
// at 4096^3 in float32, as a share of cuBLAS's SGEMM (2.659 ms, 51.69 TFLOP/s, TF32 off), naive
// 1.0%, coalesced 6.1%, smem 10.1%, blocking1d 11.7%, blocking2d 24.8%, vectorized 52.7%,
// warptiling 85.4% (tensorcore, variant 7: 32.6%). Each variant's paragraph has its figure.
//
// All variants accumulate in the precision of T (float32 for float), as cuBLAS does; the CPU
// reference accumulates in double, so they differ by a few float32 roundings of the sum.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul/gemm.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// 1. naive: one thread per output, out[i, j] = sum over k of a[i, k] * b[k, j]
//
// The matmul as written on paper, and the CUDA kernel everyone writes first: a (32, 32) block
// of threads covers a (32, 32) tile of out, threadIdx.x picking the row. Each thread reads a
// row of a and a column of b from global memory: 2K loads for K multiply-adds.
// What limits it: the 32 threads of a warp have consecutive threadIdx.x, hence consecutive
// rows i and the same column j. Their loads of a[i, k] are K floats apart (32 separate memory
// transactions where one would do), their loads of b[k, j] all hit one address, and their
// stores are N floats apart. The L1 cache and L2 rescue some of it, but expect a percent or so
// of what the H100 can do. (A float32 load that serves one thread uses 4 bytes of a 32-byte
// sector.) Measured on the H100 at 4096^3: 273.513 ms, 0.50 TFLOP/s, 1.0% of cuBLAS.

// out[z, i, j] = row i of a[z] . column j of b[z], for every matrix z of the batch this
// block covers. Variants 1 and 2 share it: they differ only in which thread gets which (i, j).
template <class T>
__device__ void dot_each_matrix(const Gemm<T>& g, int i, int j) {
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const T* a = matrix(g.a, z);
    const T* b = matrix(g.b, z);
    T sum = 0;
    for (int k = 0; k < g.K; ++k)
      sum += a[i * g.a.row_stride + k * g.a.col_stride] * b[k * g.b.row_stride + j * g.b.col_stride];
    store_out(g, g.out + z * g.stride_out, i, j, sum);
  }
}

template <class T>
__global__ void matmul_naive_kernel(Gemm<T> g) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // a warp: 32 neighbouring rows
  const int j = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (i >= g.M || j >= g.N) return;
  dot_each_matrix(g, i, j);
}

template <class T>
void matmul_naive(T* out, const T* a, const T* b, const MatmulShape& s, Stream stream) {
  const Gemm<T> g = describe("matmul naive", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul naive", ceil_div(g.M, 32), ceil_div(g.N, 32), g.batch);
  BRRR_LAUNCH((matmul_naive_kernel<T>), grid, dim3(32, 32), 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 2. coalesced: the same kernel with threadIdx.x picking the column
//
// Swapping the roles of threadIdx.x and threadIdx.y changes nothing in the arithmetic and
// everything in the memory traffic. A warp now covers 32 consecutive columns j of one row i:
// its 32 loads of b[k, j] are 32 consecutive floats (one 128-byte transaction: "coalesced"),
// its load of a[i, k] is one address for all (a broadcast), and its stores are consecutive.
// Expect several times the naive kernel's speed. Measured on the H100 at 4096^3: 43.526 ms,
// 3.16 TFLOP/s, 6.1% of cuBLAS, 6.3 times naive.
// What limits it: every thread still reads 2K values for K multiply-adds, and every value of
// a and b is read from L1/L2 by many blocks: the kernel is bound by memory bandwidth (L1 and
// L2), and its arithmetic intensity (FLOPs per byte moved) is far too low for an H100, which
// can do dozens of float32 FLOPs in the time it moves one float from DRAM.
// (When b is stored transposed, the coalescing is lost for b; variants 3 and up fix that in
// their tile loaders.)

template <class T>
__global__ void matmul_coalesced_kernel(Gemm<T> g) {
  const int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);  // a warp: 32 neighbouring columns
  const int i = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (i >= g.M || j >= g.N) return;
  dot_each_matrix(g, i, j);
}

template <class T>
void matmul_coalesced(T* out, const T* a, const T* b, const MatmulShape& s, Stream stream) {
  const Gemm<T> g = describe("matmul coalesced", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul coalesced", ceil_div(g.N, 32), ceil_div(g.M, 32), g.batch);
  BRRR_LAUNCH((matmul_coalesced_kernel<T>), grid, dim3(32, 32), 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 3. smem: tiles of a and b in shared memory
//
// A (32, 32) block computes a (32, 32) tile of out, which needs a (32, K) strip of a and a
// (K, 32) strip of b. The block walks K in steps of 32: its 1024 threads copy a (32, 32) tile
// of each into shared memory (one element each, coalesced), wait, and each thread adds the 32
// products of its row of the a tile and its column of the b tile. Every value loaded from
// global memory is now used 32 times, from shared memory, which is on the SM: ~30x less
// traffic to L2 and DRAM than variant 2.
// The tiles' rows are padded to 33 values: a transposed operand is written into the tile down
// its columns, and with rows of 32 all 32 writes of a warp would fall into one of shared
// memory's 32 banks and be served one after another.
// What limits it: shared memory itself. Each multiply-add needs two shared-memory loads (one a
// broadcast), and an SM can serve 32 banks per cycle while it could do 128 float32 FMAs per
// cycle; add two __syncthreads per step of 32. A big step for DRAM, not yet for the SM.
// Measured on the H100 at 4096^3: 26.246 ms, 5.24 TFLOP/s, 10.1% of cuBLAS, only 1.7 times
// variant 2: probably the caches were already serving much of variant 2's reuse, and shared
// memory is now the limit.

template <class T>
__global__ void __launch_bounds__(1024) matmul_smem_kernel(Gemm<T> g) {
  constexpr int kTile = 32, kPitch = kTile + 1;
  __shared__ T a_tile[kTile * kPitch];  // (32, 32): rows i0.., columns k0.. of a
  __shared__ T b_tile[kTile * kPitch];  // (32, 32): rows k0.., columns j0.. of b
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y), tid = ty * kTile + tx;
  const int i0 = static_cast<int>(blockIdx.y) * kTile, j0 = static_cast<int>(blockIdx.x) * kTile;
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const T* a = matrix(g.a, z);
    const T* b = matrix(g.b, z);
    T sum = 0;
    for (int k0 = 0; k0 < g.K; k0 += kTile) {
      load_tile<kTile, kTile, kTile * kTile>(a_tile, kPitch, a, g.a, i0, k0, tid);
      load_tile<kTile, kTile, kTile * kTile>(b_tile, kPitch, b, g.b, k0, j0, tid);
      __syncthreads();  // the tiles are complete
      for (int k = 0; k < kTile; ++k) sum += a_tile[ty * kPitch + k] * b_tile[k * kPitch + tx];
      __syncthreads();  // everyone is done with the tiles before they are overwritten
    }
    store_out(g, g.out + z * g.stride_out, i0 + ty, j0 + tx, sum);
  }
}

template <class T>
void matmul_smem(T* out, const T* a, const T* b, const MatmulShape& s, Stream stream) {
  const Gemm<T> g = describe("matmul smem", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul smem", ceil_div(g.N, 32), ceil_div(g.M, 32), g.batch);
  BRRR_LAUNCH((matmul_smem_kernel<T>), grid, dim3(32, 32), 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 4. blocking1d: each thread computes a column of 8 outputs
//
// To use shared memory less per FLOP, a thread must reuse what it loads. Here a block of 512
// threads computes a (64, 64) tile of out, each thread a column of kTM = 8 outputs
// out[i0 + 8r .. 8r + 7, j]. At each k it loads b[k, j] from shared memory once, keeps it in a
// register, and multiplies it by 8 values of a: 9 shared loads (8 of them broadcasts) for 8
// FMAs instead of 16 for 8. The k-steps are short (kBK = 8), so the two tiles (64, 8) and
// (8, 64) are small and each thread loads one value of each per step.
// Padding: the a tile's rows are 9 values (see variant 3); the b tile's rows are 68, which
// spreads the writes of a transposed b (8 rows by 4 columns per warp) over all 32 banks.
// What limits it: the 8 loads of a per k are still loads, and the accumulators are 8
// registers: most instructions are still loads. Variant 5 reuses in both directions.
// Measured on the H100 at 4096^3: 22.746 ms, 6.04 TFLOP/s, 11.7% of cuBLAS.

constexpr int k1dBM = 64, k1dBN = 64, k1dBK = 8, k1dTM = 8;
constexpr int k1dThreads = k1dBM * k1dBN / k1dTM;  // 512

__global__ void __launch_bounds__(k1dThreads) matmul_blocking1d_kernel(Gemm<float> g) {
  constexpr int kPitchA = k1dBK + 1, kPitchB = k1dBN + 4;
  __shared__ float a_tile[k1dBM * kPitchA];  // (64, 8): rows i0.., columns k0.. of a
  __shared__ float b_tile[k1dBK * kPitchB];  // (8, 64): rows k0.., columns j0.. of b
  const int tid = static_cast<int>(threadIdx.x);
  const int col = tid % k1dBN, row0 = (tid / k1dBN) * k1dTM;  // this thread: rows row0.., column col
  const int i0 = static_cast<int>(blockIdx.y) * k1dBM, j0 = static_cast<int>(blockIdx.x) * k1dBN;
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const float* a = matrix(g.a, z);
    const float* b = matrix(g.b, z);
    float sum[k1dTM] = {};
    for (int k0 = 0; k0 < g.K; k0 += k1dBK) {
      load_tile<k1dBM, k1dBK, k1dThreads>(a_tile, kPitchA, a, g.a, i0, k0, tid);
      load_tile<k1dBK, k1dBN, k1dThreads>(b_tile, kPitchB, b, g.b, k0, j0, tid);
      __syncthreads();
      for (int k = 0; k < k1dBK; ++k) {
        const float bk = b_tile[k * kPitchB + col];
        for (int r = 0; r < k1dTM; ++r) sum[r] += a_tile[(row0 + r) * kPitchA + k] * bk;
      }
      __syncthreads();
    }
    float* out = g.out + z * g.stride_out;
    for (int r = 0; r < k1dTM; ++r) store_out(g, out, i0 + row0 + r, j0 + col, sum[r]);
  }
}

void matmul_blocking1d(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  const Gemm<float> g = describe("matmul blocking1d", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul blocking1d", ceil_div(g.N, k1dBN), ceil_div(g.M, k1dBM), g.batch);
  BRRR_LAUNCH(matmul_blocking1d_kernel, grid, k1dThreads, 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 5. blocking2d: each thread computes an (8, 8) tile of outputs
//
// The outer-product form of the matmul: at each k, a thread loads 8 values of a (a column of
// its rows) and 8 of b (a row of its columns) into registers and adds all 64 products to its
// 64 accumulators: 16 shared loads for 64 FMAs, about 4x fewer per FMA than variant 4. A
// block of 256 threads now covers a (128, 128) tile of out, so every value loaded from global
// memory is used 128 times, and each k-step copies (128, 8) of a and (8, 128) of b, four
// values per thread. This is where a hand-written SIMT kernel starts to be worth having: on
// an H100 it should reach a good fraction of cuBLAS's float32 (non-tensor-core) speed at
// large sizes. Measured on the H100 at 4096^3: 10.699 ms, 12.85 TFLOP/s, 24.8% of cuBLAS,
// twice variant 4 but only a quarter of cuBLAS: "a good fraction" was optimistic, and the
// limits below are why.
// What limits it: the accumulators take 64 of a thread's registers (ptxas -v reports 140 in
// all for sm_90), so fewer warps fit on an SM to hide latency; the loads from shared memory
// are single floats; the b values of a warp's 16 column groups are 8 floats apart, so 4 of
// them share each bank (a 4-way bank conflict); and small matrices leave most of a 128-wide
// tile empty.

constexpr int k2dBM = 128, k2dBN = 128, k2dBK = 8, k2dTM = 8, k2dTN = 8;
constexpr int k2dThreads = (k2dBM / k2dTM) * (k2dBN / k2dTN);  // 256

__global__ void __launch_bounds__(k2dThreads) matmul_blocking2d_kernel(Gemm<float> g) {
  constexpr int kPitchA = k2dBK + 1, kPitchB = k2dBN + 4;
  __shared__ float a_tile[k2dBM * kPitchA];  // (128, 8)
  __shared__ float b_tile[k2dBK * kPitchB];  // (8, 128)
  const int tid = static_cast<int>(threadIdx.x);
  const int row0 = (tid / (k2dBN / k2dTN)) * k2dTM, col0 = (tid % (k2dBN / k2dTN)) * k2dTN;
  const int i0 = static_cast<int>(blockIdx.y) * k2dBM, j0 = static_cast<int>(blockIdx.x) * k2dBN;
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const float* a = matrix(g.a, z);
    const float* b = matrix(g.b, z);
    float sum[k2dTM][k2dTN] = {};
    for (int k0 = 0; k0 < g.K; k0 += k2dBK) {
      load_tile<k2dBM, k2dBK, k2dThreads>(a_tile, kPitchA, a, g.a, i0, k0, tid);
      load_tile<k2dBK, k2dBN, k2dThreads>(b_tile, kPitchB, b, g.b, k0, j0, tid);
      __syncthreads();
      for (int k = 0; k < k2dBK; ++k) {
        float a_col[k2dTM], b_row[k2dTN];
        for (int r = 0; r < k2dTM; ++r) a_col[r] = a_tile[(row0 + r) * kPitchA + k];
        for (int c = 0; c < k2dTN; ++c) b_row[c] = b_tile[k * kPitchB + col0 + c];
        for (int r = 0; r < k2dTM; ++r)
          for (int c = 0; c < k2dTN; ++c) sum[r][c] += a_col[r] * b_row[c];
      }
      __syncthreads();
    }
    float* out = g.out + z * g.stride_out;
    for (int r = 0; r < k2dTM; ++r)
      for (int c = 0; c < k2dTN; ++c) store_out(g, out, i0 + row0 + r, j0 + col0 + c, sum[r][c]);
  }
}

void matmul_blocking2d(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  const Gemm<float> g = describe("matmul blocking2d", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul blocking2d", ceil_div(g.N, k2dBN), ceil_div(g.M, k2dBM), g.batch);
  BRRR_LAUNCH(matmul_blocking2d_kernel, grid, k2dThreads, 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 6. vectorized: float4 loads from global and shared memory
//
// Variant 5 with every load four times as wide. A float4 load moves 16 bytes in one
// instruction: the tile copies take a quarter of the load instructions, and so do the reads
// from shared memory, if four values a thread needs are next to each other there. For b they
// already are (b_tile[k][c..c+3]). For a they are not: a thread needs a column of a_tile. So
// the a tile is stored transposed, a_tile[k][i], and a thread's 8 values of a at step k are
// two float4s. Two more details:
//   - a thread's 8 rows are two groups of 4, 64 rows apart (rows 4t.., 64 + 4t..), and the
//     same for its columns. Eight neighbouring threads then read 8 neighbouring float4s of
//     b_tile, 128 consecutive bytes, which shared memory serves without a bank conflict (with
//     8 contiguous columns per thread, as in variant 5, they would collide two by two). The
//     stores to out become rows of 64 consecutive floats per 16 threads.
//   - float4 accesses need 16-byte aligned addresses, so they are used only where the operand
//     allows (Operand::vec4: an aligned start, leading dimension and batch stride multiples
//     of 4) and the four values lie inside the matrix; the rest is loaded one value at a time,
//     zeros outside, so ragged edges and misaligned views still work, just slower.
// The loader reads four neighbours along the operand's contiguous dimension: along a row of
// a row-major operand, down a column of a transposed one (which it then writes into the tile
// as four scalars). The tiles' rows are padded to 132 floats, a multiple of 4 (for float4)
// that spreads those transposed writes over the banks.
// What limits it: a thread still waits for its tile copies (load, __syncthreads, compute,
// __syncthreads): there is no overlap of the next tile's loads with this tile's math (double
// buffering, cp.async); and at best this reaches the peak of the SMs' float32 units, a small
// fraction of what the same chip's tensor cores do. Variant 7 uses them.
// Measured on the H100 at 4096^3: 5.045 ms, 27.24 TFLOP/s, 52.7% of cuBLAS: twice variant 5.

constexpr int k4BM = 128, k4BN = 128, k4BK = 8;
constexpr int k4Threads = 256;  // (16, 16) threads, each (8, 8) outputs

// (load4, load_tile4 and store_out4, its loaders, are in gemm.h: variants 7 and 8 use them too.)

__global__ void __launch_bounds__(k4Threads) matmul_vectorized_kernel(Gemm<float> g) {
  constexpr int kPitchA = k4BM + 4, kPitchB = k4BN + 4;
  __align__(16) __shared__ float a_tile[k4BK * kPitchA];  // (8, 128): a transposed, a_tile[k][i]
  __align__(16) __shared__ float b_tile[k4BK * kPitchB];  // (8, 128): b_tile[k][j]
  const int tid = static_cast<int>(threadIdx.x);
  // This thread's rows: i0 + 4t + (0..3) and i0 + 64 + 4t + (0..3), t = tid / 16; its columns
  // likewise with t = tid % 16.
  const int row4 = 4 * (tid / 16), col4 = 4 * (tid % 16);
  const int i0 = static_cast<int>(blockIdx.y) * k4BM, j0 = static_cast<int>(blockIdx.x) * k4BN;
  const Operand<float> a_t = transposed(g.a);  // (K, M)
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const float* a = matrix(a_t, z);
    const float* b = matrix(g.b, z);
    float sum[8][8] = {};
    for (int k0 = 0; k0 < g.K; k0 += k4BK) {
      load_tile4<k4BK, k4BM, k4Threads>(a_tile, kPitchA, a, a_t, k0, i0, tid);
      load_tile4<k4BK, k4BN, k4Threads>(b_tile, kPitchB, b, g.b, k0, j0, tid);
      __syncthreads();
      for (int k = 0; k < k4BK; ++k) {
        const float4 a_lo = *reinterpret_cast<const float4*>(&a_tile[k * kPitchA + row4]);
        const float4 a_hi = *reinterpret_cast<const float4*>(&a_tile[k * kPitchA + 64 + row4]);
        const float4 b_lo = *reinterpret_cast<const float4*>(&b_tile[k * kPitchB + col4]);
        const float4 b_hi = *reinterpret_cast<const float4*>(&b_tile[k * kPitchB + 64 + col4]);
        const float a_col[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
        const float b_row[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
        for (int r = 0; r < 8; ++r)
          for (int c = 0; c < 8; ++c) sum[r][c] += a_col[r] * b_row[c];
      }
      __syncthreads();
    }
    float* out = g.out + z * g.stride_out;
    for (int r = 0; r < 8; ++r) {
      const int i = i0 + (r < 4 ? row4 + r : 64 + row4 + r - 4);
      store_out4(g, out, i, j0 + col4, make_float4(sum[r][0], sum[r][1], sum[r][2], sum[r][3]));
      store_out4(g, out, i, j0 + 64 + col4, make_float4(sum[r][4], sum[r][5], sum[r][6], sum[r][7]));
    }
  }
}

void matmul_vectorized(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  const Gemm<float> g = describe("matmul vectorized", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul vectorized", ceil_div(g.N, k4BN), ceil_div(g.M, k4BM), g.batch);
  BRRR_LAUNCH(matmul_vectorized_kernel, grid, k4Threads, 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 8. warptiling: warp tiles, conflict-free reads of shared memory, and the next tile's loads
//    in flight while this one is computed
//
// Back to the float32 units, and to variant 6, which is where a hand-written SIMT kernel
// stood at about half of cuBLAS's SGEMM. Three changes, after Simon Boehm's kernels 10 and 11
// and the SIMT GEMMs of CUTLASS; the block tile (128, 128), the 256 threads, the (8, 8)
// outputs per thread, the float4 tile copies and the transposed a tile stay as they were.
//   - warp tiles. Variant 6 deals out the block's outputs thread by thread, so a warp is two
//     rows of 16 threads, and at each k its lanes read 16 different float4s of b (256 bytes,
//     more than shared memory serves at once). Here the block tile is first cut into 8 warp
//     tiles of (64, 32), 2 warps down and 4 across, and a warp's lanes are laid out as 8 x 4
//     over a (32, 16) quarter of it, each lane a (4, 4) piece; a lane's (8, 8) outputs are its
//     (4, 4) piece in each of the four quarters (rows 32 apart, columns 16 apart). At each k a
//     warp now reads 8 different float4s of a (128 consecutive bytes, each a broadcast to 4
//     lanes) and 4 of b (64 bytes, each a broadcast to 8 lanes): no bank conflict, and less
//     of shared memory's bandwidth per FMA. The warp tile is also the unit that maps onto
//     the hardware: the same layout, with lanes replaced by tensor-core fragments, is how
//     CUTLASS and variant 7 organise their work.
//   - double buffering. Variant 6 loads a tile, waits for it, computes, and waits again, so
//     each SM's float32 units idle while a tile comes from L2. Here shared memory holds two
//     stages of tiles. While the block computes on one, each thread has already issued the
//     global loads of its share of the next k-tile (into registers: fetch), and only after its
//     FMAs does it write them into the other stage (stash). The loads' latency hides behind
//     1024 FMAs a thread, and one __syncthreads per k-tile suffices instead of two: the stage
//     written at step t was last read at step t - 1, before the barrier that ended it.
//   - longer k-tiles, kBK = 16: half as many barriers and loop overheads per FLOP, for tiles
//     of 2 x 2 x (16, 128) floats = 33 KiB of shared memory (two blocks still fit on an SM).
// __launch_bounds__(256, 2) asks the compiler to fit two blocks per SM, at most 128 registers
// a thread: 64 accumulators, 16 values of a and b, 16 for the next tile's loads, addresses.
// ptxas -v for sm_90 reports exactly 128 registers, no spills, 33792 bytes of shared memory.
// Edges, transposes and misaligned operands take the same path as variant 6 (its load4 and
// store_out4), so the whole MatmulShape contract holds. One cost remains from variant 6's
// loader: a row-major a (the common case) is read four k's at a time down a column of a^T and
// written into the tile as four scalars; with 16-deep tiles those writes collide two by two in
// the banks, once per k-tile.
// What limits it: the float32 units and the instruction issue: besides an FMA for every two
// flops there are the shared-memory loads, address arithmetic and the barrier, and cuBLAS's
// SGEMM, hand-scheduled in SASS (with the register-bank allocation nvcc does not let us
// control), issues fewer of them. Small matmuls leave SMs idle: 128 x 128 tiles cut
// (768, 3072) into 144 blocks for the 132 SMs of an H100, which hold 264.
// Measured on the H100 at 4096^3: 3.112 ms, 44.17 TFLOP/s, 85.4% of cuBLAS's SGEMM (51.69),
// from variant 6's 52.7%, with the same error (1.1e-5). What is left is what the paragraph
// above names. At GPT-2's smaller shapes it was not measured.

constexpr int kWtBM = 128, kWtBN = 128, kWtBK = 16;
constexpr int kWtThreads = 256;           // 8 warps: 2 (rows) x 4 (columns)
constexpr int kWtWM = 64, kWtWN = 32;     // a warp's tile of out
constexpr int kWtLaneRows = 8;            // a warp's 32 lanes as 8 x 4 over a (32, 16) quarter
constexpr int kWtLaneCols = 4;            // of its tile, each lane a (4, 4) piece

namespace {
// One thread's share of copying a (ROWS, COLS) tile from a matrix of m into shared memory,
// split in two: fetch issues the global loads into registers, stash writes the registers into
// the tile (tile[r * pitch + c], as load_tile4 does, with the same assignment of float4s to
// threads, so the loads coalesce the same way). In between the thread is free to compute.
template <int ROWS, int COLS, int THREADS>
struct TileCopy {
  static constexpr int kLoads = ROWS * COLS / 4 / THREADS;  // float4s per thread
  static_assert(ROWS * COLS % (4 * THREADS) == 0, "a tile is a whole number of float4s per thread");
  float4 v[kLoads];

  // Where float4 number e of the tile starts: along a row when m's rows are contiguous, down
  // a column when its columns are.
  __device__ static void position(int e, bool along_rows, int& r, int& c) {
    if (along_rows) {
      r = e / (COLS / 4);
      c = 4 * (e % (COLS / 4));
    } else {
      r = 4 * (e % (ROWS / 4));
      c = e / (ROWS / 4);
    }
  }

  __device__ void fetch(const float* base, const Operand<float>& m, int r0, int c0, int tid) {
    const bool along_rows = m.col_stride == 1;
    for (int l = 0; l < kLoads; ++l) {
      int r, c;
      position(tid + l * THREADS, along_rows, r, c);
      v[l] = load4(base, m, r0 + r, c0 + c, along_rows);
    }
  }

  __device__ void stash(float* tile, int pitch, bool along_rows, int tid) const {
    for (int l = 0; l < kLoads; ++l) {
      int r, c;
      position(tid + l * THREADS, along_rows, r, c);
      if (along_rows) {
        *reinterpret_cast<float4*>(&tile[r * pitch + c]) = v[l];
      } else {
        tile[r * pitch + c] = v[l].x;
        tile[(r + 1) * pitch + c] = v[l].y;
        tile[(r + 2) * pitch + c] = v[l].z;
        tile[(r + 3) * pitch + c] = v[l].w;
      }
    }
  }
};
}  // namespace

__global__ void __launch_bounds__(kWtThreads, 2) matmul_warptiling_kernel(Gemm<float> g) {
  constexpr int kPitchA = kWtBM + 4, kPitchB = kWtBN + 4;
  __align__(16) __shared__ float a_tile[2][kWtBK * kPitchA];  // two stages of (16, 128): a^T, a_tile[s][k][i]
  __align__(16) __shared__ float b_tile[2][kWtBK * kPitchB];  // two stages of (16, 128): b_tile[s][k][j]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  // This thread's outputs: rows i0 + warp_i + 32 m + lane_i + (0..3), columns
  // j0 + warp_j + 16 n + lane_j + (0..3), for m, n in {0, 1}.
  const int warp_i = (warp / (kWtBN / kWtWN)) * kWtWM, warp_j = (warp % (kWtBN / kWtWN)) * kWtWN;
  const int lane_i = 4 * (lane / kWtLaneCols), lane_j = 4 * (lane % kWtLaneCols);
  constexpr int kQuarterM = 4 * kWtLaneRows, kQuarterN = 4 * kWtLaneCols;  // (32, 16)
  const int i0 = static_cast<int>(blockIdx.y) * kWtBM, j0 = static_cast<int>(blockIdx.x) * kWtBN;
  const Operand<float> a_t = transposed(g.a);  // (K, M)
  const bool a_along_rows = a_t.col_stride == 1, b_along_rows = g.b.col_stride == 1;
  const int k_tiles = static_cast<int>(ceil_div(g.K, kWtBK));
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const float* a = matrix(a_t, z);
    const float* b = matrix(g.b, z);
    TileCopy<kWtBK, kWtBM, kWtThreads> a_copy;
    TileCopy<kWtBK, kWtBN, kWtThreads> b_copy;
    // The first k-tile into stage 0. (The barrier at the end of the previous matrix's last
    // step has made stage 0 free again.)
    a_copy.fetch(a, a_t, 0, i0, tid);
    b_copy.fetch(b, g.b, 0, j0, tid);
    a_copy.stash(a_tile[0], kPitchA, a_along_rows, tid);
    b_copy.stash(b_tile[0], kPitchB, b_along_rows, tid);
    __syncthreads();
    float sum[8][8] = {};
    for (int t = 0; t < k_tiles; ++t) {
      const int stage = t % 2;
      const bool next = t + 1 < k_tiles;
      if (next) {  // issue the loads of k-tile t + 1; they arrive while we compute
        a_copy.fetch(a, a_t, (t + 1) * kWtBK, i0, tid);
        b_copy.fetch(b, g.b, (t + 1) * kWtBK, j0, tid);
      }
      const float* a_k = &a_tile[stage][warp_i + lane_i];
      const float* b_k = &b_tile[stage][warp_j + lane_j];
      for (int k = 0; k < kWtBK; ++k, a_k += kPitchA, b_k += kPitchB) {
        const float4 a_lo = *reinterpret_cast<const float4*>(a_k);
        const float4 a_hi = *reinterpret_cast<const float4*>(a_k + kQuarterM);
        const float4 b_lo = *reinterpret_cast<const float4*>(b_k);
        const float4 b_hi = *reinterpret_cast<const float4*>(b_k + kQuarterN);
        const float a_col[8] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
        const float b_row[8] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
        for (int r = 0; r < 8; ++r)
          for (int c = 0; c < 8; ++c) sum[r][c] += a_col[r] * b_row[c];
      }
      if (next) {  // k-tile t + 1 into the other stage, last read at step t - 1
        a_copy.stash(a_tile[1 - stage], kPitchA, a_along_rows, tid);
        b_copy.stash(b_tile[1 - stage], kPitchB, b_along_rows, tid);
      }
      __syncthreads();  // stage 1 - stage is complete, and everyone is done reading this one
    }
    float* out = g.out + z * g.stride_out;
    for (int r = 0; r < 8; ++r) {
      const int i = i0 + warp_i + (r < 4 ? lane_i + r : kQuarterM + lane_i + r - 4);
      const int j = j0 + warp_j + lane_j;
      store_out4(g, out, i, j, make_float4(sum[r][0], sum[r][1], sum[r][2], sum[r][3]));
      store_out4(g, out, i, j + kQuarterN, make_float4(sum[r][4], sum[r][5], sum[r][6], sum[r][7]));
    }
  }
}

void matmul_warptiling(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  const Gemm<float> g = describe("matmul warptiling", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul warptiling", ceil_div(g.N, kWtBN), ceil_div(g.M, kWtBM), g.batch);
  BRRR_LAUNCH(matmul_warptiling_kernel, grid, kWtThreads, 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// Registration

template void matmul_naive<float>(float*, const float*, const float*, const MatmulShape&, Stream);
template void matmul_naive<double>(double*, const double*, const double*, const MatmulShape&, Stream);
template void matmul_coalesced<float>(float*, const float*, const float*, const MatmulShape&, Stream);
template void matmul_coalesced<double>(double*, const double*, const double*, const MatmulShape&, Stream);
template void matmul_smem<float>(float*, const float*, const float*, const MatmulShape&, Stream);
template void matmul_smem<double>(double*, const double*, const double*, const MatmulShape&, Stream);

// Priorities rise with speed, all below cuBLAS's 100 (cublas.cu), the default on a GPU:
// variant 8, the fastest on the float32 units (85.4% of cuBLAS on the H100), ranks above 6.
// In the emulator, which has no cuBLAS, "warptiling" is the default. (The tensor-core variants
// of mma_sync.cu change the numerics and rank below every one of these.)
void register_matmul_cuda_core_kernels() {
  const DeviceType cuda = DeviceType::CUDA;
  const VariantMeta naive = about("variant 1: one thread per output element, reads from global memory");
  const VariantMeta coalesced = about("variant 2: a warp's threads along a row of the output, so loads coalesce");
  const VariantMeta smem = about("variant 3: 32 x 32 tiles of a and b staged in shared memory");
  add(op::matmul<float>, cuda, "naive", &matmul_naive<float>, 10, naive);
  add(op::matmul<float>, cuda, "coalesced", &matmul_coalesced<float>, 20, coalesced);
  add(op::matmul<float>, cuda, "smem", &matmul_smem<float>, 30, smem);
  add(op::matmul<float>, cuda, "blocking1d", &matmul_blocking1d, 40,
      about("variant 4: each thread computes a column of 8 outputs from shared memory"));
  add(op::matmul<float>, cuda, "blocking2d", &matmul_blocking2d, 50,
      about("variant 5: each thread computes an 8 x 8 block of outputs in registers"));
  add(op::matmul<float>, cuda, "vectorized", &matmul_vectorized, 60,
      about("variant 6: variant 5 with float4 loads and a transposed a tile"));
  add(op::matmul<float>, cuda, "warptiling", &matmul_warptiling, 65,
      about("variant 8: warp tiles, two shared-memory stages (double buffering)"));
  // float64 (gradient checks on the device): the first three are templates.
  add(op::matmul<double>, cuda, "naive", &matmul_naive<double>, 10, naive);
  add(op::matmul<double>, cuda, "coalesced", &matmul_coalesced<double>, 20, coalesced);
  add(op::matmul<double>, cuda, "smem", &matmul_smem<double>, 30, smem);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
