// kernels/cuda/layernorm.cu: LayerNorm on the GPU: the forward (saving mean and rstd), the
// backward (dx, dweight and dbias), and the forward fused with the residual add before it.
// Chapter 13 (reductions: LayerNorm, softmax and cross-entropy). Read before:
// kernels/cpu/nn.cpp (the reference), kernels/cuda/gelu.cu (chapter 12).
// Read next: kernels/cuda/crossentropy.cu.
//
// LayerNorm over rows of (N, C): out = (x - mean) * rstd * weight + bias, rstd = 1 / sqrt(var
// + eps), with the biased variance. In GPT-2, C is 768 to 1600 and N = B * T is thousands of
// rows. Per element it does a handful of flops, so like GELU it is limited by memory traffic;
// unlike GELU each output depends on the whole row (the mean and variance), so the question
// is how a row's reduction is split across threads, and how many times the row is read.
//
// Backward (derived in the chapter), with norm = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - norm * mean(g * norm))     (per row: two row reductions)
//   dweight = sum over rows of dout * norm,  dbias = sum over rows of dout   (per column)
// dweight and dbias are overwritten, not accumulated, as in the CPU kernel.
//
// Measured on an H100 80GB HBM3, 2026-11-23, with `scripts/gpu.sh` (see docs/measurements.md),
// as a share of the lab's measured copy bandwidth (about 3000 GB/s). At (65536, 768), the
// float32 defaults: forward variant 3 0.1418 ms, 2843 GB/s, 94.8%; backward variant 3
// 0.2187 ms, 2764 GB/s, 92.2%. Each variant's paragraph has its own figures.
#include "kernels/cuda/layernorm.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cuda/column_sum.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// 1 / sqrt(v): rsqrtf is one instruction, within 2 ulp (the CPU kernel divides in double).
static __device__ __forceinline__ float rsqrt_of(float v) { return rsqrtf(v); }
static __device__ __forceinline__ double rsqrt_of(double v) { return rsqrt(v); }

constexpr int kBlockSize = 256;  // row kernels: a block is 8 warps, so 8 rows at a time

static int row_blocks(const char* op, std::int64_t rows, int rows_per_block) {
  BRRR_CHECK(ceil_div(rows, rows_per_block) <= INT_MAX, op, ": ", rows, " rows need more than 2^31 - 1 blocks");
  return grid_for(rows, rows_per_block);
}

// Every forward kernel below also serves the fused residual + LayerNorm: with `residual` set,
// it first forms sum = x + residual (writing it: the next block's residual stream needs it)
// and normalises that. With residual == nullptr (and sum == nullptr) it is plain LayerNorm.

// =============================================================================================
// Forward, variant 1: one thread per row.
//
// The CPU loop moved onto the GPU: thread n walks its row three times (mean, variance,
// output). It is correct and as wrong as it gets for memory: at any moment the 32 threads of
// a warp read 32 addresses C floats apart, so every load touches 32 different 128-byte lines
// and uses 4 bytes of each (the rest may survive in L1 until the next column, or may not).
// With N = 8192 rows there are only 8192 threads, a quarter of what an H100 keeps resident.
// Expect it an order of magnitude or more below the copy bandwidth. Measured on the H100: 8.4%
// of copy at (65536, 384) and at (65536, 768) (1.6019 ms, 251.7 GB/s), 1.5% at (4096, 768).

template <class T>
__global__ void layernorm_forward_kernel1(T* out, T* mean, T* rstd, T* sum, const T* x, const T* residual,
                                          const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps) {
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const T* row = x + n * C;
  if (residual) {
    T* s = sum + n * C;
    for (std::int64_t c = 0; c < C; ++c) s[c] = row[c] + residual[n * C + c];
    row = s;
  }
  T m = 0;
  for (std::int64_t c = 0; c < C; ++c) m += row[c];
  m = m / static_cast<T>(C);
  T var = 0;
  for (std::int64_t c = 0; c < C; ++c) var += (row[c] - m) * (row[c] - m);
  const T s = rsqrt_of(var / static_cast<T>(C) + eps);
  for (std::int64_t c = 0; c < C; ++c) out[n * C + c] = (row[c] - m) * s * weight[c] + (bias ? bias[c] : T(0));
  mean[n] = m;
  rstd[n] = s;
}

template <class T>
static void launch_forward1(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual, const T* weight,
                            const T* bias, std::int64_t N, std::int64_t C, T eps, Stream stream) {
  if (N == 0 || C == 0) return;
  BRRR_LAUNCH((layernorm_forward_kernel1<T>), row_blocks("layernorm_forward", N, kBlockSize), kBlockSize, 0, stream,
              out, mean, rstd, sum, x, residual, weight, bias, N, C, eps);
}

template <class T>
void layernorm_forward1(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t N,
                        std::int64_t C, T eps, Stream stream) {
  launch_forward1<T>(nullptr, out, mean, rstd, x, nullptr, weight, bias, N, C, eps, stream);
}

template <class T>
void residual_layernorm_forward1(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual, const T* weight,
                                 const T* bias, std::int64_t N, std::int64_t C, T eps, Stream stream) {
  launch_forward1<T>(sum, out, mean, rstd, x, residual, weight, bias, N, C, eps, stream);
}

// =============================================================================================
// Forward, variant 2: one warp per row.
//
// Lane l handles columns l, l + 32, l + 64, ...: at each step the warp reads 32 consecutive
// floats, one 128-byte line, fully used (coalesced). The row's sums become warp sums: five
// shuffles (common.h's warp_sum), no shared memory, no __syncthreads; a warp that has no row
// leaves as a whole, so the shuffles always see all 32 lanes. There are now 32 x as many
// threads in flight. It still reads the row three times (sum, squared deviations, output);
// the second and third reads mostly hit L1/L2, so DRAM traffic is near one read and one
// write, but each read still costs load instructions and L1 bandwidth.
// Measured on the H100: 81.5% of copy at (65536, 384), 64.7% at (65536, 768) (0.2077 ms,
// 1941 GB/s), 45.6% at (4096, 768): probably the re-reads, which cost more as the row grows.

template <class T>
__global__ void layernorm_forward_kernel2(T* out, T* mean, T* rstd, T* sum, const T* x, const T* residual,
                                          const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps) {
  const int lane = threadIdx.x % 32;
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (n >= N) return;  // the whole warp: n is the same in all its lanes
  const T* row = x + n * C;
  T s = 0;
  if (residual) {
    T* srow = sum + n * C;
    for (std::int64_t c = lane; c < C; c += 32) {
      const T v = row[c] + residual[n * C + c];
      srow[c] = v;  // each lane reads back only what it wrote itself
      s += v;
    }
    row = srow;
  } else {
    for (std::int64_t c = lane; c < C; c += 32) s += row[c];
  }
  const T m = warp_sum(s) / static_cast<T>(C);
  T var = 0;
  for (std::int64_t c = lane; c < C; c += 32) var += (row[c] - m) * (row[c] - m);
  const T r = rsqrt_of(warp_sum(var) / static_cast<T>(C) + eps);
  for (std::int64_t c = lane; c < C; c += 32)
    out[n * C + c] = (row[c] - m) * r * weight[c] + (bias ? bias[c] : T(0));
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

template <class T>
static void launch_forward2(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual, const T* weight,
                            const T* bias, std::int64_t N, std::int64_t C, T eps, Stream stream) {
  if (N == 0 || C == 0) return;
  BRRR_LAUNCH((layernorm_forward_kernel2<T>), row_blocks("layernorm_forward", N, kBlockSize / 32), kBlockSize, 0,
              stream, out, mean, rstd, sum, x, residual, weight, bias, N, C, eps);
}

template <class T>
void layernorm_forward2(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t N,
                        std::int64_t C, T eps, Stream stream) {
  launch_forward2<T>(nullptr, out, mean, rstd, x, nullptr, weight, bias, N, C, eps, stream);
}

template <class T>
void residual_layernorm_forward2(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual, const T* weight,
                                 const T* bias, std::int64_t N, std::int64_t C, T eps, Stream stream) {
  launch_forward2<T>(sum, out, mean, rstd, x, residual, weight, bias, N, C, eps, stream);
}

// =============================================================================================
// Forward, variant 3: one warp per row, float4 loads, the row held in registers.
//
// Two changes to variant 2. Loads are float4 (16 bytes a lane, 512 bytes a warp per
// instruction: a quarter of the load instructions). And each lane keeps its part of the row
// in registers, v[i] = columns 4 (l + 32 i) .. + 3, so x is read exactly once: the variance
// and the output are computed from registers, with no second or third trip through L1/L2.
// (Computing the variance from the registers also keeps the exact two-pass formula, with no
// E[x^2] - E[x]^2 cancellation.) The price: the register array's size must be known at
// compile time, so the kernel is a template on kVecs = float4s per lane, instantiated for
// 1, 2, 4, 8 and 16 (C <= 128, 256, 512, 1024, 2048); C = 768 runs kVecs = 8, whose last two
// slots are masked off. The fused residual form reads x and residual once, writes sum and
// out once: 4 passes over (N, C) where add-then-LayerNorm takes 6 (plus three re-reads).
// Expect it the fastest for GPT-2 widths, near the copy bandwidth. Not covered: C not a
// multiple of 4, pointers that are not 16-byte aligned, C > 2048: those run variant 2.
// Measured on the H100: at (65536, 384) 0.0735 ms, 2746 GB/s, 91.6% of copy; at (65536, 768)
// 0.1418 ms, 2843 GB/s, 94.8%; at (4096, 768), 24 MiB moved, 65.0% (too small to fill the GPU
// for long). The fused residual form at (65536, 768): 0.2785 ms, 2894 GB/s, 96.6% (variant 2
// 78.4%, variant 1 9.7%).

// __launch_bounds__: kVecs = 16 needs 90 registers, more than the 64 a 1024-thread block
// leaves each thread; launched with kBlockSize threads, ptxas may use them
// (scripts/check_kernel_resources.py).
template <int kVecs>
__global__ void __launch_bounds__(kBlockSize) layernorm_forward_kernel3(float* out, float* mean, float* rstd, float* sum, const float* x,
                                          const float* residual, const float* weight, const float* bias,
                                          std::int64_t N, int C4, float eps) {
  const int lane = threadIdx.x % 32;
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (n >= N) return;
  const std::int64_t offset = n * C4;  // in float4s
  const float C = 4.0f * static_cast<float>(C4);
  float4 v[kVecs];
  float s = 0.0f;
  for (int i = 0; i < kVecs; ++i) {
    const int c4 = lane + 32 * i;
    v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c4 < C4) {
      v[i] = reinterpret_cast<const float4*>(x)[offset + c4];
      if (residual) {
        const float4 r = reinterpret_cast<const float4*>(residual)[offset + c4];
        v[i] = make_float4(v[i].x + r.x, v[i].y + r.y, v[i].z + r.z, v[i].w + r.w);
        reinterpret_cast<float4*>(sum)[offset + c4] = v[i];
      }
      s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
  }
  const float m = warp_sum(s) / C;
  float var = 0.0f;
  for (int i = 0; i < kVecs; ++i) {
    if (lane + 32 * i < C4) {
      const float dx = v[i].x - m, dy = v[i].y - m, dz = v[i].z - m, dw = v[i].w - m;
      var += (dx * dx + dy * dy) + (dz * dz + dw * dw);
    }
  }
  const float r = rsqrtf(warp_sum(var) / C + eps);
  const float4* w4 = reinterpret_cast<const float4*>(weight);
  const float4* b4 = reinterpret_cast<const float4*>(bias);
  for (int i = 0; i < kVecs; ++i) {
    const int c4 = lane + 32 * i;
    if (c4 < C4) {
      const float4 w = w4[c4];
      const float4 b = bias ? b4[c4] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      reinterpret_cast<float4*>(out)[offset + c4] =
          make_float4((v[i].x - m) * r * w.x + b.x, (v[i].y - m) * r * w.y + b.y, (v[i].z - m) * r * w.z + b.z,
                      (v[i].w - m) * r * w.w + b.w);
    }
  }
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

static void launch_forward3(float* sum, float* out, float* mean, float* rstd, const float* x, const float* residual,
                            const float* weight, const float* bias, std::int64_t N, std::int64_t C, float eps,
                            Stream stream) {
  if (N == 0 || C == 0) return;
  const bool aligned = aligned16(out) && aligned16(x) && aligned16(weight) && (!bias || aligned16(bias)) &&
                       (!residual || (aligned16(residual) && aligned16(sum)));
  if (C % 4 != 0 || C > 2048 || !aligned) {
    launch_forward2<float>(sum, out, mean, rstd, x, residual, weight, bias, N, C, eps, stream);
    return;
  }
  const int C4 = static_cast<int>(C / 4), vecs = static_cast<int>(ceil_div(C4, 32));
  const int blocks = row_blocks("layernorm_forward", N, kBlockSize / 32);
  if (vecs <= 1)
    BRRR_LAUNCH(layernorm_forward_kernel3<1>, blocks, kBlockSize, 0, stream, out, mean, rstd, sum, x, residual,
                weight, bias, N, C4, eps);
  else if (vecs <= 2)
    BRRR_LAUNCH(layernorm_forward_kernel3<2>, blocks, kBlockSize, 0, stream, out, mean, rstd, sum, x, residual,
                weight, bias, N, C4, eps);
  else if (vecs <= 4)
    BRRR_LAUNCH(layernorm_forward_kernel3<4>, blocks, kBlockSize, 0, stream, out, mean, rstd, sum, x, residual,
                weight, bias, N, C4, eps);
  else if (vecs <= 8)
    BRRR_LAUNCH(layernorm_forward_kernel3<8>, blocks, kBlockSize, 0, stream, out, mean, rstd, sum, x, residual,
                weight, bias, N, C4, eps);
  else
    BRRR_LAUNCH(layernorm_forward_kernel3<16>, blocks, kBlockSize, 0, stream, out, mean, rstd, sum, x, residual,
                weight, bias, N, C4, eps);
}

void layernorm_forward3(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                        std::int64_t N, std::int64_t C, float eps, Stream stream) {
  launch_forward3(nullptr, out, mean, rstd, x, nullptr, weight, bias, N, C, eps, stream);
}

void residual_layernorm_forward3(float* sum, float* out, float* mean, float* rstd, const float* x,
                                 const float* residual, const float* weight, const float* bias, std::int64_t N,
                                 std::int64_t C, float eps, Stream stream) {
  launch_forward3(sum, out, mean, rstd, x, residual, weight, bias, N, C, eps, stream);
}

// =============================================================================================
// Backward, variant 1: one thread per row for dx, then one thread per column for dweight and
// dbias.
//
// dx needs two reductions along its row, dweight and dbias one reduction down each column: two
// directions, so the simplest code is two kernels. The row kernel has variant 1's problem
// (each warp's loads scatter over 32 rows); the column kernel is coalesced (neighbouring
// threads, neighbouring columns) but has only C threads, each adding N values one after the
// other. Both read x and dout, so the inputs cross the memory bus twice. Deterministic: every
// sum has one fixed order. Measured on the H100 at (65536, 768): 32.8964 ms, 18.38 GB/s, 0.6%
// of copy (0.3% at C = 384).

template <class T>
__global__ void layernorm_backward_dx_kernel1(T* dx, const T* dout, const T* x, const T* weight, const T* mean,
                                              const T* rstd, std::int64_t N, std::int64_t C) {
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n >= N) return;
  const T* row = x + n * C;
  const T* g = dout + n * C;
  const T m = mean[n], s = rstd[n];
  T mean_g = 0, mean_gn = 0;
  for (std::int64_t c = 0; c < C; ++c) {
    const T gw = g[c] * weight[c];
    mean_g += gw;
    mean_gn += gw * ((row[c] - m) * s);
  }
  mean_g = mean_g / static_cast<T>(C);
  mean_gn = mean_gn / static_cast<T>(C);
  for (std::int64_t c = 0; c < C; ++c) {
    const T norm = (row[c] - m) * s;
    dx[n * C + c] = s * (g[c] * weight[c] - mean_g - norm * mean_gn);
  }
}

template <class T>
__global__ void layernorm_backward_dparams_kernel1(T* dweight, T* dbias, const T* dout, const T* x, const T* mean,
                                                   const T* rstd, std::int64_t N, std::int64_t C) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  T dw = 0, db = 0;
  for (std::int64_t n = 0; n < N; ++n) {
    const T g = dout[n * C + c];
    dw += g * ((x[n * C + c] - mean[n]) * rstd[n]);
    db += g;
  }
  if (dweight) dweight[c] = dw;
  if (dbias) dbias[c] = db;
}

template <class T>
void layernorm_backward1(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean,
                         const T* rstd, std::int64_t N, std::int64_t C, Stream stream) {
  if (C == 0) return;
  if (N > 0)
    BRRR_LAUNCH((layernorm_backward_dx_kernel1<T>), row_blocks("layernorm_backward", N, kBlockSize), kBlockSize, 0,
                stream, dx, dout, x, weight, mean, rstd, N, C);
  if (dweight || dbias)  // with N == 0 both come out 0, as on the CPU
    BRRR_LAUNCH((layernorm_backward_dparams_kernel1<T>), grid_for(C, kBlockSize), kBlockSize, 0, stream, dweight,
                dbias, dout, x, mean, rstd, N, C);
}

// =============================================================================================
// Backward, variant 2: one warp per row, per-block partial dweight and dbias in shared memory,
// then a fixed-order sum of the blocks' partials. The float64 default.
//
// One pass over x and dout does everything. A block of W warps takes rows in a grid-stride
// loop (warp w of block b: rows b W + w, b W + w + G W, ... for a grid of G blocks). For each
// row the warp computes dx as variant 2 of the forward computes the mean (lane-strided,
// coalesced, warp shuffles), and on the way adds dout * norm and dout into running column
// sums in shared memory. Each warp has its own (2, C) slice of shared memory: if the warps
// of a block shared one, two warps would add to the same column at the same time, needing
// shared atomics, whose order (and so the last bits) changes from run to run. At the end the
// block adds its W slices in warp order and writes one (2, C) row to a partial buffer in the
// workspace; column_sum.h then adds the G rows in a fixed order. So dweight and dbias come
// out bit-identical run to run, with no float atomics (DESIGN.md, "Reproducibility"), and x
// and dout are read from DRAM once (the dx pass re-reads the row, mostly from L1).
//
// Sizes: W = 8 warps while 8 slices fit in 64 KiB of shared memory (C <= 1024 in float),
// fewer for wider rows; G = min(rows / W, 512). Both depend only on N, C and the dtype, so
// the order of additions does too, on any GPU. The partial buffer is G x 2C floats (3 MB for
// C = 768), read once by the second kernel. When even one slice does not fit in shared memory
// (C > 29,000 floats) this falls back to variant 1.
// Measured on the H100: 69.4% of copy at (65536, 384) (0.1454 ms, 2080 GB/s), but 50.9% at
// (65536, 768) (0.3959 ms, 1527 GB/s) and 31.1% at (4096, 768): below the 60% the course set
// for it at GPT-2's width, which is why variant 3 exists.

constexpr std::size_t kBackwardSharedTarget = 64 * 1024;
constexpr std::int64_t kBackwardMaxBlocks = 512;

template <class T>
__global__ void layernorm_backward_kernel2(T* dx, T* partial, const T* dout, const T* x, const T* weight,
                                           const T* mean, const T* rstd, std::int64_t N, std::int64_t C) {
  BRRR_DYNAMIC_SHARED(T, columns);  // (warps, 2, C): each warp's running dweight, then dbias
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (std::int64_t i = threadIdx.x; i < warps * 2 * C; i += blockDim.x) columns[i] = 0;
  __syncthreads();
  T* dweight = columns + warp * 2 * C;
  T* dbias = dweight + C;
  const std::int64_t all_warps = static_cast<std::int64_t>(gridDim.x) * warps;
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * warps + warp; n < N; n += all_warps) {
    const T* row = x + n * C;
    const T* g = dout + n * C;
    const T m = mean[n], s = rstd[n];
    T sum_g = 0, sum_gn = 0;
    for (std::int64_t c = lane; c < C; c += 32) {
      // dout[c] read once, into a register: nvcc knows dweight and dbias are shared memory and
      // keeps one load for the three uses, but the emulator's g++ must assume the store to
      // dweight[c] may change g[c] and loads it again, and its memory counters then disagreed
      // with ncu's (7 load requests an element against 6, on the H200, 2026-11-27).
      const T gc = g[c], norm = (row[c] - m) * s, gw = gc * weight[c];
      sum_g += gw;
      sum_gn += gw * norm;
      dweight[c] += gc * norm;  // only this lane of this warp touches column c of this slice
      dbias[c] += gc;
    }
    const T mean_g = warp_sum(sum_g) / static_cast<T>(C), mean_gn = warp_sum(sum_gn) / static_cast<T>(C);
    for (std::int64_t c = lane; c < C; c += 32) {
      const T norm = (row[c] - m) * s;
      dx[n * C + c] = s * (g[c] * weight[c] - mean_g - norm * mean_gn);
    }
  }
  __syncthreads();  // every thread arrives here: no thread returned early
  T* block_partial = partial + static_cast<std::int64_t>(blockIdx.x) * 2 * C;
  for (std::int64_t i = threadIdx.x; i < 2 * C; i += blockDim.x) {
    T total = 0;
    for (int w = 0; w < warps; ++w) total += columns[w * 2 * C + i];
    block_partial[i] = total;
  }
}

template <class T>
void layernorm_backward2(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean,
                         const T* rstd, std::int64_t N, std::int64_t C, Stream stream) {
  if (C == 0) return;
  const std::size_t slice = 2 * static_cast<std::size_t>(C) * sizeof(T);
  if (slice > simt::kMaxDynamicSharedBytes) {
    layernorm_backward1<T>(dx, dweight, dbias, dout, x, weight, mean, rstd, N, C, stream);
    return;
  }
  int warps = kBlockSize / 32;
  while (warps > 1 && warps * slice > kBackwardSharedTarget) warps /= 2;
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min(kBackwardMaxBlocks, ceil_div(N, warps)));
  T* partial = static_cast<T*>(workspace(static_cast<std::size_t>(blocks) * slice, stream));
  BRRR_LAUNCH((layernorm_backward_kernel2<T>), static_cast<int>(blocks), 32 * warps, warps * slice, stream, dx,
              partial, dout, x, weight, mean, rstd, N, C);
  column_sum_pair_launch(dweight, dbias, static_cast<const T*>(partial), blocks, C, 2 * C, stream);
}

// =============================================================================================
// Backward, variant 3: one warp per row, float4 loads, the row and the column partials held
// in registers. The float32 default.
//
// What variant 2 still spends, per element: two scalar loads of x and dout, a load of weight,
// two read-modify-writes of shared memory (dweight and dbias), then in the dx loop the same
// three loads again. Variant 3 does what the forward's variant 3 does, and one thing more.
// Loads are float4 and lane l keeps its part of the row in registers (columns 4 (l + 32 i)
// .. + 3), so x and dout are read once and the dx pass needs no memory but the store: after
// the first pass a lane holds only norm = (x - mean) * rstd and g = dout * weight, all that dx
// needs. And since a lane always owns the same columns, whichever row its warp is on, its
// share of dweight and dbias can be summed in registers too (float4 dweight[kVecs] and
// dbias[kVecs]) across all the rows the warp visits: no shared memory inside the row loop.
// Only at the end do the warps of a block meet: one at a time, in warp order, each adds its
// registers into one (2, C) row in shared memory (warp 0 writes, warp 1 adds, ..., a barrier
// between turns: 8 barriers once per block, not per row), the block writes that row to the
// workspace, and column_sum.h adds the blocks' rows, dweight and dbias in one launch.
//
// Determinism: each column's sum is taken over the rows of a warp in row order, then over the
// 8 warps of a block in warp order, then over the blocks in column_sum's fixed order. The grid,
// G = min(ceil(N / 8), 256) blocks, depends only on N, so the order does as well, on any GPU.
// Registers: four float4 arrays of kVecs, 16 kVecs floats a thread, so the kernel is a
// template on kVecs, instantiated for 1, 2, 3, 4, 6 and 8 float4s per lane (C <= 128, 256,
// 384, 512, 768, 1024: GPT-2's widths need no masked-off slots). The price is occupancy.
// __launch_bounds__ asks for two blocks (16 warps) per SM up to kVecs = 6, which caps a
// thread at 128 registers, and lets kVecs = 8 (128 floats of arrays alone) use up to 255, one
// block per SM; nvcc -Xptxas -v for sm_90 reports no spills for any of them. Slots past the
// row's end load zeros instead of skipping the loads behind `if`: a first draft with the `if`
// was clearly slower on an H100 (most at C = 1024), probably because the guarded loads were
// not all issued before the first was used. Expect it near the copy bandwidth. C not a
// multiple of 4, misaligned pointers and C > 1024 (1600 would need 208 registers of arrays)
// run variant 2.
// Measured on the H100: at (65536, 384) 0.1141 ms, 2650 GB/s, 88.4% of copy; at (65536, 768)
// 0.2187 ms, 2764 GB/s, 92.2% (variant 2: 50.9%); at (4096, 768) 0.0236 ms, 53.4%.

constexpr int kBackward3Warps = 8;
constexpr std::int64_t kBackward3MaxBlocks = 256;

static __device__ __forceinline__ float4 add4(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

template <int kVecs>
__global__ void __launch_bounds__(32 * kBackward3Warps, kVecs <= 6 ? 2 : 1)
    layernorm_backward_kernel3(float* dx, float* partial, const float* dout, const float* x, const float* weight,
                               const float* mean, const float* rstd, std::int64_t N, int C4) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float C = 4.0f * static_cast<float>(C4);
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* dout4 = reinterpret_cast<const float4*>(dout);
  const float4* weight4 = reinterpret_cast<const float4*>(weight);
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float4 dweight[kVecs], dbias[kVecs];  // this lane's columns, summed over its warp's rows
  for (int i = 0; i < kVecs; ++i) dweight[i] = dbias[i] = zero;

  const std::int64_t all_warps = static_cast<std::int64_t>(gridDim.x) * kBackward3Warps;
  for (std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * kBackward3Warps + warp; n < N; n += all_warps) {
    const std::int64_t offset = n * C4;  // in float4s
    const float m = mean[n], s = rstd[n];
    float4 norm[kVecs], g[kVecs];  // (x - mean) * rstd and dout * weight: all that dx needs
    float sum_g = 0.0f, sum_gn = 0.0f;
    for (int i = 0; i < kVecs; ++i) {
      // Slots past the row's end (C < 128 kVecs) load zeros: they add 0 to every sum.
      const int c4 = lane + 32 * i;
      const bool in_row = c4 < C4;
      const float4 v = in_row ? x4[offset + c4] : zero, d = in_row ? dout4[offset + c4] : zero;
      const float4 w = in_row ? weight4[c4] : zero;
      norm[i] = make_float4((v.x - m) * s, (v.y - m) * s, (v.z - m) * s, (v.w - m) * s);
      g[i] = make_float4(d.x * w.x, d.y * w.y, d.z * w.z, d.w * w.w);
      sum_g += (g[i].x + g[i].y) + (g[i].z + g[i].w);
      sum_gn += (g[i].x * norm[i].x + g[i].y * norm[i].y) + (g[i].z * norm[i].z + g[i].w * norm[i].w);
      dweight[i] = add4(dweight[i], make_float4(d.x * norm[i].x, d.y * norm[i].y, d.z * norm[i].z, d.w * norm[i].w));
      dbias[i] = add4(dbias[i], d);
    }
    const float mean_g = warp_sum(sum_g) / C, mean_gn = warp_sum(sum_gn) / C;
    for (int i = 0; i < kVecs; ++i) {
      const int c4 = lane + 32 * i;
      if (c4 < C4)
        reinterpret_cast<float4*>(dx)[offset + c4] =
            make_float4(s * (g[i].x - mean_g - norm[i].x * mean_gn), s * (g[i].y - mean_g - norm[i].y * mean_gn),
                        s * (g[i].z - mean_g - norm[i].z * mean_gn), s * (g[i].w - mean_g - norm[i].w * mean_gn));
    }
  }

  // The block's warps add their registers into one row, one warp at a time, in warp order.
  // (Every thread gets here: nothing above returns early.)
  __shared__ float4 block_columns[2][32 * kVecs];  // dweight, then dbias, in float4s
  for (int turn = 0; turn < kBackward3Warps; ++turn) {
    if (warp == turn)
      for (int i = 0; i < kVecs; ++i) {
        const int c4 = lane + 32 * i;
        block_columns[0][c4] = turn == 0 ? dweight[i] : add4(block_columns[0][c4], dweight[i]);
        block_columns[1][c4] = turn == 0 ? dbias[i] : add4(block_columns[1][c4], dbias[i]);
      }
    __syncthreads();
  }
  float4* block_partial = reinterpret_cast<float4*>(partial) + static_cast<std::int64_t>(blockIdx.x) * 2 * C4;
  for (int i = threadIdx.x; i < 2 * C4; i += blockDim.x) block_partial[i] = block_columns[i / C4][i % C4];
}

void layernorm_backward3(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                         const float* weight, const float* mean, const float* rstd, std::int64_t N, std::int64_t C,
                         Stream stream) {
  const bool aligned = aligned16(dx) && aligned16(dout) && aligned16(x) && aligned16(weight);
  if (C == 0 || C % 4 != 0 || C > 1024 || !aligned) {
    layernorm_backward2<float>(dx, dweight, dbias, dout, x, weight, mean, rstd, N, C, stream);
    return;
  }
  const int C4 = static_cast<int>(C / 4), vecs = static_cast<int>(ceil_div(C4, 32));
  const std::int64_t blocks = std::max<std::int64_t>(1, std::min(kBackward3MaxBlocks, ceil_div(N, kBackward3Warps)));
  float* partial = static_cast<float*>(workspace(static_cast<std::size_t>(blocks) * 2 * C * sizeof(float), stream));
  const int grid = static_cast<int>(blocks), threads = 32 * kBackward3Warps;
  if (vecs <= 1)
    BRRR_LAUNCH(layernorm_backward_kernel3<1>, grid, threads, 0, stream, dx, partial, dout, x, weight, mean, rstd, N,
                C4);
  else if (vecs <= 2)
    BRRR_LAUNCH(layernorm_backward_kernel3<2>, grid, threads, 0, stream, dx, partial, dout, x, weight, mean, rstd, N,
                C4);
  else if (vecs <= 3)
    BRRR_LAUNCH(layernorm_backward_kernel3<3>, grid, threads, 0, stream, dx, partial, dout, x, weight, mean, rstd, N,
                C4);
  else if (vecs <= 4)
    BRRR_LAUNCH(layernorm_backward_kernel3<4>, grid, threads, 0, stream, dx, partial, dout, x, weight, mean, rstd, N,
                C4);
  else if (vecs <= 6)
    BRRR_LAUNCH(layernorm_backward_kernel3<6>, grid, threads, 0, stream, dx, partial, dout, x, weight, mean, rstd, N,
                C4);
  else
    BRRR_LAUNCH(layernorm_backward_kernel3<8>, grid, threads, 0, stream, dx, partial, dout, x, weight, mean, rstd, N,
                C4);
  column_sum_pair_launch(dweight, dbias, static_cast<const float*>(partial), blocks, C, 2 * C, stream);
}

// =============================================================================================
// Variant 5 (chapter 18): bfloat16 in memory, float32 inside, forward and backward.
//
// For bf16 tensors: a warp a row, as variant 2, with widening loads (float_of) and rounding
// stores (bf16_of) around float32 math. The forward's statistics are float32 sums (the mean,
// then the biased variance around it: two passes over the row, which a warp re-reads from L1);
// only the stored mean and rstd are rounded, because the op's signature stores them in the
// tensor's dtype. The backward does not trust the saved mean: rounded to bf16 it is off by up
// to 2^-9 of itself, which is much of x - mean when |mean| is large beside the row's spread, so
// each warp recomputes it from x in float32 (and keeps it in the workspace for the second
// kernel). rstd is taken as saved (its 2^-9 is a relative error of dx of the size of dx's own
// rounding). dweight and dbias are column sums over rows, one thread a column, in row order
// (deterministic; variant 1's walk, slow for large N). Untimed: measurements.md, "Every CUDA variant".

constexpr int kBf16RowsPerBlock = 8;  // blocks of 8 warps, a row each

__global__ void layernorm_forward_bf16_kernel(brrr::bf16* out, brrr::bf16* mean, brrr::bf16* rstd,
                                              const brrr::bf16* x, const brrr::bf16* weight, const brrr::bf16* bias,
                                              std::int64_t N, std::int64_t C, float eps) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kBf16RowsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= N) return;  // the whole warp: its 32 lanes share the row
  const brrr::bf16* xr = x + row * C;
  float sum = 0;
  for (std::int64_t c = lane; c < C; c += 32) sum += float_of(xr[c]);
  const float m = warp_sum(sum) / static_cast<float>(C);
  float squares = 0;
  for (std::int64_t c = lane; c < C; c += 32) {
    const float d = float_of(xr[c]) - m;
    squares += d * d;
  }
  const float s = 1.0f / sqrt_of(warp_sum(squares) / static_cast<float>(C) + eps);
  brrr::bf16* o = out + row * C;
  for (std::int64_t c = lane; c < C; c += 32) {
    const float norm = (float_of(xr[c]) - m) * s;
    o[c] = bf16_of(norm * float_of(weight[c]) + (bias ? float_of(bias[c]) : 0.0f));
  }
  if (lane == 0) {
    mean[row] = bf16_of(m);
    rstd[row] = bf16_of(s);
  }
}

// dx of a row (see variant 1 for the formula), and the row's float32 mean into row_mean.
__global__ void layernorm_backward_dx_bf16_kernel(brrr::bf16* dx, float* row_mean, const brrr::bf16* dout,
                                                  const brrr::bf16* x, const brrr::bf16* weight,
                                                  const brrr::bf16* rstd, std::int64_t N, std::int64_t C) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kBf16RowsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= N) return;
  const brrr::bf16 *xr = x + row * C, *g = dout + row * C;
  float sum = 0;
  for (std::int64_t c = lane; c < C; c += 32) sum += float_of(xr[c]);
  const float m = warp_sum(sum) / static_cast<float>(C), s = float_of(rstd[row]);
  float mean_g = 0, mean_gn = 0;
  for (std::int64_t c = lane; c < C; c += 32) {
    const float gw = float_of(g[c]) * float_of(weight[c]);
    mean_g += gw;
    mean_gn += gw * (float_of(xr[c]) - m) * s;
  }
  mean_g = warp_sum(mean_g) / static_cast<float>(C);
  mean_gn = warp_sum(mean_gn) / static_cast<float>(C);
  for (std::int64_t c = lane; c < C; c += 32) {
    const float norm = (float_of(xr[c]) - m) * s;
    dx[row * C + c] = bf16_of(s * (float_of(g[c]) * float_of(weight[c]) - mean_g - norm * mean_gn));
  }
  if (lane == 0) row_mean[row] = m;
}

__global__ void layernorm_backward_params_bf16_kernel(brrr::bf16* dweight, brrr::bf16* dbias, const brrr::bf16* dout,
                                                      const brrr::bf16* x, const float* row_mean,
                                                      const brrr::bf16* rstd, std::int64_t N, std::int64_t C) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float w = 0, b = 0;
  for (std::int64_t r = 0; r < N; ++r) {
    const float g = float_of(dout[r * C + c]);
    w += g * (float_of(x[r * C + c]) - row_mean[r]) * float_of(rstd[r]);
    b += g;
  }
  dweight[c] = bf16_of(w);
  if (dbias) dbias[c] = bf16_of(b);
}

void layernorm_forward_bf16(brrr::bf16* out, brrr::bf16* mean, brrr::bf16* rstd, const brrr::bf16* x,
                            const brrr::bf16* weight, const brrr::bf16* bias, std::int64_t N, std::int64_t C,
                            brrr::bf16 eps, Stream stream) {
  if (N == 0) return;
  BRRR_LAUNCH(layernorm_forward_bf16_kernel, grid_for(N, kBf16RowsPerBlock), 32 * kBf16RowsPerBlock, 0, stream, out,
              mean, rstd, x, weight, bias, N, C, static_cast<float>(eps));
}

void layernorm_backward_bf16(brrr::bf16* dx, brrr::bf16* dweight, brrr::bf16* dbias, const brrr::bf16* dout,
                             const brrr::bf16* x, const brrr::bf16* weight, const brrr::bf16* mean,
                             const brrr::bf16* rstd, std::int64_t N, std::int64_t C, Stream stream) {
  (void)mean;  // recomputed from x (above)
  if (C == 0) return;
  const std::size_t bytes = static_cast<std::size_t>(std::max<std::int64_t>(N, 1)) * sizeof(float);
  float* row_mean = static_cast<float*>(workspace(bytes, stream));
  if (N > 0)
    BRRR_LAUNCH(layernorm_backward_dx_bf16_kernel, grid_for(N, kBf16RowsPerBlock), 32 * kBf16RowsPerBlock, 0, stream,
                dx, row_mean, dout, x, weight, rstd, N, C);
  BRRR_LAUNCH(layernorm_backward_params_bf16_kernel, grid_for(C, 256), 256, 0, stream, dweight, dbias, dout, x,
              row_mean, rstd, N, C);
}

// ---------------------------------------------------------------------------------------------

#define BRRR_INSTANTIATE(T)                                                                                         \
  template void layernorm_forward1<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t, std::int64_t, T,    \
                                      Stream);                                                                    \
  template void layernorm_forward2<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t, std::int64_t, T,    \
                                      Stream);                                                                    \
  template void layernorm_backward1<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, std::int64_t, \
                                       std::int64_t, Stream);                                                     \
  template void layernorm_backward2<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, std::int64_t, \
                                       std::int64_t, Stream);                                                     \
  template void residual_layernorm_forward1<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*,             \
                                               std::int64_t, std::int64_t, T, Stream);                            \
  template void residual_layernorm_forward2<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*,             \
                                               std::int64_t, std::int64_t, T, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

// float32 defaults: variant 3 forward and backward (each falls back to 2 by itself). float64
// (gradient checks on the device) gets the templated variants.
void register_layernorm_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  const VariantMeta naive = about("variant 1: one thread per row");
  const VariantMeta warp = about("variant 2: one warp per row, shuffles for the sums");
  const VariantMeta warp4 = about("variant 3: one warp per row, float4 loads, the row held in registers (else variant 2)");
  add(op::layernorm_forward<float>, kCuda, "naive", &layernorm_forward1<float>, 0, naive);
  add(op::layernorm_forward<float>, kCuda, "warp", &layernorm_forward2<float>, 10, warp);
  add(op::layernorm_forward<float>, kCuda, "warp-float4", &layernorm_forward3, 20, warp4);
  add(op::layernorm_forward<double>, kCuda, "naive", &layernorm_forward1<double>, 0, naive);
  add(op::layernorm_forward<double>, kCuda, "warp", &layernorm_forward2<double>, 10, warp);
  const VariantMeta backward_naive = about("variant 1: one thread per row for dx, then one per column for dweight, dbias");
  const VariantMeta partials = about("variant 2: one warp per row, per-block column partials summed in a fixed order");
  add(op::layernorm_backward<float>, kCuda, "naive", &layernorm_backward1<float>, 0, backward_naive);
  add(op::layernorm_backward<float>, kCuda, "warp-partials", &layernorm_backward2<float>, 10, partials);
  add(op::layernorm_backward<float>, kCuda, "warp-float4", &layernorm_backward3, 20,
      about("variant 3: one warp per row, float4 loads, column partials in registers (else variant 2)"));
  add(op::layernorm_backward<double>, kCuda, "naive", &layernorm_backward1<double>, 0, backward_naive);
  add(op::layernorm_backward<double>, kCuda, "warp-partials", &layernorm_backward2<double>, 10, partials);
  add(op::residual_layernorm_forward<float>, kCuda, "naive", &residual_layernorm_forward1<float>, 0, naive);
  add(op::residual_layernorm_forward<float>, kCuda, "warp", &residual_layernorm_forward2<float>, 10, warp);
  add(op::residual_layernorm_forward<float>, kCuda, "warp-float4", &residual_layernorm_forward3, 20, warp4);
  add(op::residual_layernorm_forward<double>, kCuda, "naive", &residual_layernorm_forward1<double>, 0, naive);
  add(op::residual_layernorm_forward<double>, kCuda, "warp", &residual_layernorm_forward2<double>, 10, warp);
  // bf16 tensors (chapter 18): variant 4, their only one.
  add(op::layernorm_forward<brrr::bf16>, kCuda, "bf16", &layernorm_forward_bf16, 10,
      about("variant 4: one warp per row, bf16 in memory, float32 statistics and math"));
  add(op::layernorm_backward<brrr::bf16>, kCuda, "bf16", &layernorm_backward_bf16, 10,
      about("variant 4: a warp per row for dx (the mean recomputed in float32), a thread per column for dweight, dbias"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
