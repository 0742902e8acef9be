// kernels/cuda/gelu.cu: GELU on the GPU, forward and backward, alone and fused with the bias
// add of the linear layer before it (the MLP's c_fc: out = gelu(x W^T + b)).
// Chapter 12 (GELU on the GPU). Read before: kernels/cpu/nn.cpp (the reference, same formula),
// kernels/cuda/examples.cu (grid-stride loops, float4). Read next: kernels/cuda/layernorm.cu.
//
// GELU is elementwise: each output needs one input, a dozen flops and an exp (or tanh). By
// the H100 datasheet (3.35 TB/s of HBM3, 67 TFLOP/s of float32; the chapter measures both)
// the GPU does some 160 flops in the time it moves one float in and one out, so GELU is
// limited by memory traffic alone, and the variants below differ only in how they move bytes.
// The figure of merit is GB/s against the device's measured copy bandwidth (brrr kernel-lab
// gelu_forward).
//
// Formulas (the CPU kernel's, in the same order of operations):
//   gelu(x)  = x / (1 + exp(-2u)),  u = sqrt(2/pi) (x + 0.044715 x^3)   (= 0.5 x (1 + tanh u))
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// Every variant is checked against brrr::kernels::cpu::gelu_forward / gelu_backward. At the end,
// the exact GELU (x Phi(x), Hugging Face's "gelu") that some pretrained models ask for.
//
// Measured on an H100 80GB HBM3, 2026-11-23, with `scripts/gpu.sh` (see docs/measurements.md),
// as a share of the lab's measured copy bandwidth (about 3000 GB/s): at n = 2^26 the float4
// forward takes 0.1923 ms, 2791 GB/s, 93.1% (naive 74.6%), the float4 backward 0.2814 ms,
// 2862 GB/s, 95.5% (naive 89.5%). The paragraphs say what each variant bought.
#include "kernels/cuda/gelu.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/column_sum.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// The math, once for float and double (exp_of and tanh_of are common.h's).

template <class T>
static __device__ __forceinline__ T gelu_value(T x) {
  const T minus_2k = static_cast<T>(-2.0 * 0.7978845608028654), c = static_cast<T>(0.044715);
  return x / (T(1) + exp_of(minus_2k * (x + c * x * x * x)));
}

template <class T>
static __device__ __forceinline__ T gelu_grad(T x) {
  const T k = static_cast<T>(0.7978845608028654), c = static_cast<T>(0.044715);
  const T th = tanh_of(k * (x + c * x * x * x));
  return T(0.5) * (T(1) + th) + T(0.5) * x * (T(1) - th * th) * k * (T(1) + T(3) * c * x * x);
}

// Grid-stride kernels stop growing the grid here: 132 SMs x 8 resident blocks of 256 threads
// is one full wave on an H100 (two on smaller GPUs); the loop covers any n with it.
constexpr int kBlockSize = 256;
constexpr int kMaxBlocks = 132 * 8;

static void check_grid(const char* op, std::int64_t n) {
  BRRR_CHECK(n <= static_cast<std::int64_t>(kBlockSize) * INT_MAX, op, ": ", n,
             " elements need more than 2^31 - 1 blocks of ", kBlockSize, " threads");
}

// =============================================================================================
// Variant 1: one thread per element.
//
// The first kernel anyone writes: thread i computes out[i]. Consecutive threads touch
// consecutive floats, so each warp's load is one 128-byte transaction (coalesced), which is
// already most of what the hardware can do. What it leaves: every thread issues one 4-byte
// load and one 4-byte store, so a warp needs 32 memory instructions' worth of bookkeeping
// for 128 bytes, and the grid has n / 256 blocks, each paying launch and index arithmetic for
// very little work. Expect it within sight of the copy bandwidth for large n, but not at it.
// Measured on the H100 at n = 2^26: forward 0.2400 ms, 2237 GB/s, 74.6% of copy; backward
// 0.3002 ms, 2682 GB/s, 89.5%. At n = 2^20 (L2-resident): 36.1% and 45.6%.

template <class T>
__global__ void gelu_forward_kernel1(T* out, const T* x, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gelu_value(x[i]);
}

template <class T>
__global__ void gelu_backward_kernel1(T* dx, const T* dout, const T* x, std::int64_t n) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = dout[i] * gelu_grad(x[i]);
}

template <class T>
void gelu_forward1(T* out, const T* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  check_grid("gelu_forward", n);
  BRRR_LAUNCH((gelu_forward_kernel1<T>), grid_for(n, kBlockSize), kBlockSize, 0, stream, out, x, n);
}

template <class T>
void gelu_backward1(T* dx, const T* dout, const T* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  check_grid("gelu_backward", n);
  BRRR_LAUNCH((gelu_backward_kernel1<T>), grid_for(n, kBlockSize), kBlockSize, 0, stream, dx, dout, x, n);
}

// =============================================================================================
// Variant 2: a grid-stride loop over float4s, and a scalar tail.
//
// Each thread moves 16 bytes per load instruction instead of 4 (LDG.128), so a warp covers
// 512 contiguous bytes per instruction: a quarter of the load/store instructions of variant 1
// and more bytes in flight per thread, which is what keeps HBM busy. The grid is capped at
// one wave (kMaxBlocks) and each thread loops, so no block is scheduled just to do four
// elements. The n % 4 leftover elements, and everything when a pointer is not 16-byte aligned
// (a view's data), go through the scalar loop. Expect it close to the copy bandwidth for
// large tensors; for small ones (a few MB) launch overhead dominates both variants.
// Measured on the H100 at n = 2^26: forward 0.1923 ms, 2791 GB/s, 93.1% of copy; backward
// 0.2814 ms, 2862 GB/s, 95.5%. That is as fast as the lab's plain copy kernel (94.7% at the
// same size): GELU costs nothing beyond its bytes. At n = 2^20 (8 MiB) forward 0.0071 ms,
// 39.2%, backward 49.7%, barely ahead of naive (36.1%, 45.6%): as predicted, the size is too
// small. At the copy bandwidth its 8 MiB take 2.8 microseconds of the 7.1 measured; the rest
// is the launch and the ramp-up, and the copy kernel does no better (39.1%).

__global__ void gelu_forward_kernel2(float* out, const float* x, std::int64_t n, std::int64_t n4) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* out4 = reinterpret_cast<float4*>(out);
  for (std::int64_t i = first; i < n4; i += stride) {
    const float4 v = __ldg(x4 + i);
    out4[i] = make_float4(gelu_value(v.x), gelu_value(v.y), gelu_value(v.z), gelu_value(v.w));
  }
  for (std::int64_t i = 4 * n4 + first; i < n; i += stride) out[i] = gelu_value(x[i]);
}

__global__ void gelu_backward_kernel2(float* dx, const float* dout, const float* x, std::int64_t n,
                                      std::int64_t n4) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* g4 = reinterpret_cast<const float4*>(dout);
  float4* dx4 = reinterpret_cast<float4*>(dx);
  for (std::int64_t i = first; i < n4; i += stride) {
    const float4 v = __ldg(x4 + i), g = __ldg(g4 + i);
    dx4[i] = make_float4(g.x * gelu_grad(v.x), g.y * gelu_grad(v.y), g.z * gelu_grad(v.z), g.w * gelu_grad(v.w));
  }
  for (std::int64_t i = 4 * n4 + first; i < n; i += stride) dx[i] = dout[i] * gelu_grad(x[i]);
}

void gelu_forward2(float* out, const float* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  const std::int64_t n4 = aligned16(out) && aligned16(x) ? n / 4 : 0;
  const int blocks = grid_for(std::max(n4, n - 4 * n4), kBlockSize, kMaxBlocks);
  BRRR_LAUNCH(gelu_forward_kernel2, blocks, kBlockSize, 0, stream, out, x, n, n4);
}

void gelu_backward2(float* dx, const float* dout, const float* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  const std::int64_t n4 = aligned16(dx) && aligned16(dout) && aligned16(x) ? n / 4 : 0;
  const int blocks = grid_for(std::max(n4, n - 4 * n4), kBlockSize, kMaxBlocks);
  BRRR_LAUNCH(gelu_backward_kernel2, blocks, kBlockSize, 0, stream, dx, dout, x, n, n4);
}

// =============================================================================================
// Fused bias + GELU, forward: out (N, C) = gelu(x + bias), bias (C).
//
// Unfused, the MLP adds the bias in one pass (read x, write x + b) and applies GELU in
// another (read it back, write out): four passes over (N, C). Fused, x is read once and out
// written once, half the traffic. The bias row is tiny (C floats) and stays in L1/L2.
//
// Variant 1: one thread per element, column c = i % C (a 64-bit modulo per element: cheap
// next to the memory traffic, but not free).
// Variant 2: variant 2 of GELU plus the bias. When C is a multiple of 4 and every pointer is
// 16-byte aligned, float4 i covers columns 4i % C .. 4i % C + 3 of one row, so the bias comes
// in as one float4 too; otherwise it runs the scalar loop alone.
// Measured on the H100 at (8192, 3072): variant 2 0.0755 ms, 2666 GB/s, 89.0% of copy;
// variant 1 0.0955 ms, 2109 GB/s, 70.4%.

template <class T>
__global__ void bias_gelu_forward_kernel1(T* out, const T* x, const T* bias, std::int64_t n, std::int64_t C) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = gelu_value(x[i] + bias[i % C]);
}

template <class T>
void bias_gelu_forward1(T* out, const T* x, const T* bias, std::int64_t N, std::int64_t C, Stream stream) {
  const std::int64_t n = N * C;
  if (n == 0) return;
  check_grid("bias_gelu_forward", n);
  BRRR_LAUNCH((bias_gelu_forward_kernel1<T>), grid_for(n, kBlockSize), kBlockSize, 0, stream, out, x, bias, n, C);
}

__global__ void bias_gelu_forward_kernel2(float* out, const float* x, const float* bias, std::int64_t n,
                                          std::int64_t n4, std::int64_t C) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  const float4* b4 = reinterpret_cast<const float4*>(bias);
  float4* out4 = reinterpret_cast<float4*>(out);
  const std::int64_t C4 = C / 4;
  for (std::int64_t i = first; i < n4; i += stride) {
    const float4 v = __ldg(x4 + i), b = __ldg(b4 + i % C4);
    out4[i] = make_float4(gelu_value(v.x + b.x), gelu_value(v.y + b.y), gelu_value(v.z + b.z),
                          gelu_value(v.w + b.w));
  }
  for (std::int64_t i = 4 * n4 + first; i < n; i += stride) out[i] = gelu_value(x[i] + bias[i % C]);
}

void bias_gelu_forward2(float* out, const float* x, const float* bias, std::int64_t N, std::int64_t C,
                        Stream stream) {
  const std::int64_t n = N * C;
  if (n == 0) return;
  const bool vector = C % 4 == 0 && aligned16(out) && aligned16(x) && aligned16(bias);
  const std::int64_t n4 = vector ? n / 4 : 0;
  const int blocks = grid_for(std::max(n4, n - 4 * n4), kBlockSize, kMaxBlocks);
  BRRR_LAUNCH(bias_gelu_forward_kernel2, blocks, kBlockSize, 0, stream, out, x, bias, n, n4, C);
}

// =============================================================================================
// Fused bias + GELU, backward: dx (N, C) = dout * gelu'(x + bias), dbias (C) = sum over rows
// of dx. dbias is a reduction over N; brrr keeps it deterministic (no float atomics), so the
// same inputs give the same bits on every run.
//
// Variant 1: two kernels. The elementwise one writes dx (one thread per element); then one
// thread per column walks down its column of dx, row by row. The column walk is coalesced
// (neighbouring threads read neighbouring columns of one row), but it reads dx back from
// memory (another N * C floats) and has only C threads: for C = 768 that is 3 blocks on a
// GPU of 132 SMs, each thread doing N dependent adds. Slow for large N, and obviously so.
//
// Variant 2: one pass that writes dx and sums columns on the way. A block of 32 x 8 threads
// owns a tile of 32 columns and a chunk of rows: thread (x, y) handles column x of rows
// y, y + 8, ... of the chunk, keeping its sum in a register; at the end the block adds its
// 8 sums per column in shared memory, in order, and writes one partial row to the workspace.
// A second small kernel (column_sum.h) adds the chunks' partial rows in a fixed order. dx is
// read never and written once; the partials are (chunks, C), at most 128 rows. Each warp
// reads a 128-byte row segment: coalesced, but scalar (a float4 tile of 128 columns would
// cut the load instructions by 4; not done, to keep the tile arithmetic readable).
// Not in the kernel lab's table yet (chapter 11's exercise adds it). Inside the 12.3M GPT's
// step on the H100 (docs/measurements.md, the profile) the op's backward, this variant, took
// 144.5 us a call.

template <class T>
__global__ void bias_gelu_backward_dx_kernel1(T* dx, const T* dout, const T* x, const T* bias, std::int64_t n,
                                              std::int64_t C) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) dx[i] = dout[i] * gelu_grad(x[i] + bias[i % C]);
}

template <class T>
__global__ void bias_gelu_backward_dbias_kernel1(T* dbias, const T* dx, std::int64_t N, std::int64_t C) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  T sum = 0;
  for (std::int64_t r = 0; r < N; ++r) sum += dx[r * C + c];
  dbias[c] = sum;
}

template <class T>
void bias_gelu_backward1(T* dx, T* dbias, const T* dout, const T* x, const T* bias, std::int64_t N, std::int64_t C,
                         Stream stream) {
  const std::int64_t n = N * C;
  if (C == 0) return;
  check_grid("bias_gelu_backward", n);
  if (n > 0)
    BRRR_LAUNCH((bias_gelu_backward_dx_kernel1<T>), grid_for(n, kBlockSize), kBlockSize, 0, stream, dx, dout, x,
                bias, n, C);
  // With N == 0 the sum is empty and dbias comes out 0, as on the CPU.
  if (dbias) BRRR_LAUNCH((bias_gelu_backward_dbias_kernel1<T>), grid_for(C, kBlockSize), kBlockSize, 0, stream,
                         dbias, dx, N, C);
}

constexpr int kTileColumns = 32, kTileRows = 8;  // a block of 32 x 8 threads
constexpr std::int64_t kMaxChunks = 128;         // row chunks: rows of the partial buffer

template <class T>
__global__ void bias_gelu_backward_kernel2(T* dx, T* partial, const T* dout, const T* x, const T* bias,
                                           std::int64_t N, std::int64_t C, std::int64_t rows_per_chunk) {
  __shared__ T sums[kTileRows][kTileColumns];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kTileColumns + threadIdx.x;
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.y) * rows_per_chunk;
  const std::int64_t end_row = first_row + rows_per_chunk < N ? first_row + rows_per_chunk : N;
  T sum = 0;
  if (c < C) {
    const T b = bias[c];
    for (std::int64_t r = first_row + threadIdx.y; r < end_row; r += kTileRows) {
      const T d = dout[r * C + c] * gelu_grad(x[r * C + c] + b);
      dx[r * C + c] = d;
      sum += d;
    }
  }
  sums[threadIdx.y][threadIdx.x] = sum;  // every thread gets here: the barrier is not divergent
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    T total = 0;
    for (int y = 0; y < kTileRows; ++y) total += sums[y][threadIdx.x];
    partial[static_cast<std::int64_t>(blockIdx.y) * C + c] = total;
  }
}

template <class T>
void bias_gelu_backward2(T* dx, T* dbias, const T* dout, const T* x, const T* bias, std::int64_t N, std::int64_t C,
                         Stream stream) {
  if (C == 0) return;
  // Chunks of at least 64 rows (8 per thread row), at most kMaxChunks of them: both depend
  // only on N, so the order of the additions, and the bits of dbias, do too.
  const std::int64_t chunks = std::max<std::int64_t>(1, std::min(kMaxChunks, ceil_div(N, 64)));
  const std::int64_t rows_per_chunk = std::max<std::int64_t>(1, ceil_div(N, chunks));
  BRRR_CHECK(ceil_div(C, kTileColumns) <= INT_MAX, "bias_gelu_backward: C = ", C, " is too many columns");
  T* partial = static_cast<T*>(workspace(static_cast<std::size_t>(chunks * C) * sizeof(T), stream));
  const dim3 grid(static_cast<unsigned>(ceil_div(C, kTileColumns)), static_cast<unsigned>(chunks));
  BRRR_LAUNCH((bias_gelu_backward_kernel2<T>), grid, dim3(kTileColumns, kTileRows), 0, stream, dx, partial, dout, x,
              bias, N, C, rows_per_chunk);
  column_sum_launch(dbias, static_cast<const T*>(partial), chunks, C, C, stream);
}

// =============================================================================================
// Variant 3 (chapter 18): bfloat16 in memory, float32 inside, for GELU, its backward and
// bias + GELU forward and backward on bf16 tensors.
//
// A bf16 element is 2 bytes where a float is 4, so a memory-bound kernel on bf16 data moves
// half the bytes and, at the same bandwidth, takes half the time. Each kernel is variant 1's
// with a grid-stride loop, a widening load (float_of, common.h: the 16 bits over 16 zero bits,
// exact) and a rounding store (bf16_of: to nearest even, once). The math in between is
// gelu_value / gelu_grad in float32, so an output is the float32 result on the bf16 inputs,
// rounded once: within half a bf16 step (2^-9 relative) of it. Not done: loading pairs
// (__nv_bfloat162, 4 bytes) or 8 at a time (16 bytes), which would cut the load instructions
// as float4 did in variant 2; untimed on a GPU (docs/measurements.md, "Every CUDA variant").
// dbias of the backward is the column sums of the float32 dx, in row order, one thread per
// column (variant 1's walk: deterministic, slow for large N), rounded once; the CPU kernel
// (kernels/cpu/nn_bf16.cpp) does the same.

__global__ void gelu_forward_bf16_kernel(brrr::bf16* out, const brrr::bf16* x, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = bf16_of(gelu_value(float_of(x[i])));
}

__global__ void gelu_backward_bf16_kernel(brrr::bf16* dx, const brrr::bf16* dout, const brrr::bf16* x,
                                          std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = bf16_of(float_of(dout[i]) * gelu_grad(float_of(x[i])));
}

__global__ void bias_gelu_forward_bf16_kernel(brrr::bf16* out, const brrr::bf16* x, const brrr::bf16* bias,
                                              std::int64_t n, std::int64_t C) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = bf16_of(gelu_value(float_of(x[i]) + float_of(bias[i % C])));
}

__global__ void bias_gelu_backward_dx_bf16_kernel(brrr::bf16* dx, const brrr::bf16* dout, const brrr::bf16* x,
                                                  const brrr::bf16* bias, std::int64_t n, std::int64_t C) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = bf16_of(float_of(dout[i]) * gelu_grad(float_of(x[i]) + float_of(bias[i % C])));
}

__global__ void bias_gelu_backward_dbias_bf16_kernel(brrr::bf16* dbias, const brrr::bf16* dout, const brrr::bf16* x,
                                                     const brrr::bf16* bias, std::int64_t N, std::int64_t C) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const float b = float_of(bias[c]);
  float sum = 0;
  for (std::int64_t r = 0; r < N; ++r) sum += float_of(dout[r * C + c]) * gelu_grad(float_of(x[r * C + c]) + b);
  dbias[c] = bf16_of(sum);
}

void gelu_forward_bf16(brrr::bf16* out, const brrr::bf16* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  BRRR_LAUNCH(gelu_forward_bf16_kernel, grid_for(n, kBlockSize, kMaxBlocks), kBlockSize, 0, stream, out, x, n);
}

void gelu_backward_bf16(brrr::bf16* dx, const brrr::bf16* dout, const brrr::bf16* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  BRRR_LAUNCH(gelu_backward_bf16_kernel, grid_for(n, kBlockSize, kMaxBlocks), kBlockSize, 0, stream, dx, dout, x, n);
}

void bias_gelu_forward_bf16(brrr::bf16* out, const brrr::bf16* x, const brrr::bf16* bias, std::int64_t N,
                            std::int64_t C, Stream stream) {
  const std::int64_t n = N * C;
  if (n == 0) return;
  BRRR_LAUNCH(bias_gelu_forward_bf16_kernel, grid_for(n, kBlockSize, kMaxBlocks), kBlockSize, 0, stream, out, x,
              bias, n, C);
}

void bias_gelu_backward_bf16(brrr::bf16* dx, brrr::bf16* dbias, const brrr::bf16* dout, const brrr::bf16* x,
                             const brrr::bf16* bias, std::int64_t N, std::int64_t C, Stream stream) {
  const std::int64_t n = N * C;
  if (C == 0) return;
  if (n > 0)
    BRRR_LAUNCH(bias_gelu_backward_dx_bf16_kernel, grid_for(n, kBlockSize, kMaxBlocks), kBlockSize, 0, stream, dx,
                dout, x, bias, n, C);
  // With N == 0 the sum is empty and dbias comes out 0, as on the CPU.
  if (dbias)
    BRRR_LAUNCH(bias_gelu_backward_dbias_bf16_kernel, grid_for(C, kBlockSize), kBlockSize, 0, stream, dbias, dout, x,
                bias, N, C);
}

// ---------------------------------------------------------------------------------------------

template void gelu_forward1<float>(float*, const float*, std::int64_t, Stream);
template void gelu_forward1<double>(double*, const double*, std::int64_t, Stream);
template void gelu_backward1<float>(float*, const float*, const float*, std::int64_t, Stream);
template void gelu_backward1<double>(double*, const double*, const double*, std::int64_t, Stream);
template void bias_gelu_forward1<float>(float*, const float*, const float*, std::int64_t, std::int64_t, Stream);
template void bias_gelu_forward1<double>(double*, const double*, const double*, std::int64_t, std::int64_t, Stream);
template void bias_gelu_backward1<float>(float*, float*, const float*, const float*, const float*, std::int64_t,
                                         std::int64_t, Stream);
template void bias_gelu_backward1<double>(double*, double*, const double*, const double*, const double*,
                                          std::int64_t, std::int64_t, Stream);
template void bias_gelu_backward2<float>(float*, float*, const float*, const float*, const float*, std::int64_t,
                                         std::int64_t, Stream);
template void bias_gelu_backward2<double>(double*, double*, const double*, const double*, const double*,
                                          std::int64_t, std::int64_t, Stream);

// The float4 variants are the defaults for float32 (measured on an H100 at n = 2^26: 93.1% and
// 95.5% of copy bandwidth, forward and backward, against naive's 74.6% and 89.5%);
// float64, used by gradient checks on the device, gets the templated ones.
// =============================================================================================
// Exact GELU (Hugging Face's "gelu", PyTorch's nn.GELU()): gelu(x) = x Phi(x) = 0.5 x
// erfc(-x / sqrt 2), gelu'(x) = Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi). GPT-2 uses the tanh form;
// a pretrained model whose config asks for this one runs it. One variant: variant 1's memory
// pattern in a grid-stride loop (the CPU kernel, kernels/cpu/nn.cpp, is its reference). S is
// the stored type; bf16 is loaded to float for the math and each output rounded once.

template <class T>
static __device__ __forceinline__ T gelu_erf_value(T x) {
  return T(0.5) * x * erfc_of(static_cast<T>(-0.7071067811865476) * x);
}

template <class T>
static __device__ __forceinline__ T gelu_erf_grad(T x) {
  const T r = static_cast<T>(-0.7071067811865476), k = static_cast<T>(0.3989422804014327);  // 1 / sqrt(2 pi)
  return T(0.5) * erfc_of(r * x) + x * k * exp_of(T(-0.5) * x * x);
}

template <class S> struct MathOf { using type = S; };  // float and double compute in themselves
template <> struct MathOf<brrr::bf16> { using type = float; };
template <class S> static __device__ __forceinline__ typename MathOf<S>::type to_math(S v) {
  if constexpr (std::is_same_v<S, brrr::bf16>) return float_of(v); else return v;
}
template <class S> static __device__ __forceinline__ S from_math(typename MathOf<S>::type v) {
  if constexpr (std::is_same_v<S, brrr::bf16>) return bf16_of(v); else return v;
}

template <class S>
__global__ void gelu_erf_forward_kernel(S* out, const S* x, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = from_math<S>(gelu_erf_value(to_math(x[i])));
}

template <class S>
__global__ void gelu_erf_backward_kernel(S* dx, const S* dout, const S* x, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dx[i] = from_math<S>(to_math(dout[i]) * gelu_erf_grad(to_math(x[i])));
}

template <class S>
void gelu_erf_forward(S* out, const S* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  BRRR_LAUNCH((gelu_erf_forward_kernel<S>), grid_for(n, kBlockSize, kMaxBlocks), kBlockSize, 0, stream, out, x, n);
}

template <class S>
void gelu_erf_backward(S* dx, const S* dout, const S* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  BRRR_LAUNCH((gelu_erf_backward_kernel<S>), grid_for(n, kBlockSize, kMaxBlocks), kBlockSize, 0, stream, dx, dout,
              x, n);
}

template void gelu_erf_forward<float>(float*, const float*, std::int64_t, Stream);
template void gelu_erf_forward<double>(double*, const double*, std::int64_t, Stream);
template void gelu_erf_forward<brrr::bf16>(brrr::bf16*, const brrr::bf16*, std::int64_t, Stream);
template void gelu_erf_backward<float>(float*, const float*, const float*, std::int64_t, Stream);
template void gelu_erf_backward<double>(double*, const double*, const double*, std::int64_t, Stream);
template void gelu_erf_backward<brrr::bf16>(brrr::bf16*, const brrr::bf16*, const brrr::bf16*, std::int64_t, Stream);

void register_gelu_kernels() {
  const DeviceType cuda = DeviceType::CUDA;
  const VariantMeta naive = about("variant 1: one thread per element");
  const VariantMeta float4 = about("variant 2: a grid-stride loop over float4s, and a scalar tail");
  add(op::gelu_forward<float>, cuda, "naive", &gelu_forward1<float>, 0, naive);
  add(op::gelu_forward<float>, cuda, "float4", &gelu_forward2, 10, float4);
  add(op::gelu_forward<double>, cuda, "naive", &gelu_forward1<double>, 0, naive);
  add(op::gelu_backward<float>, cuda, "naive", &gelu_backward1<float>, 0, naive);
  add(op::gelu_backward<float>, cuda, "float4", &gelu_backward2, 10, float4);
  add(op::gelu_backward<double>, cuda, "naive", &gelu_backward1<double>, 0, naive);
  const VariantMeta bias_naive = about("variant 1: one thread per element, column i % C");
  add(op::bias_gelu_forward<float>, cuda, "naive", &bias_gelu_forward1<float>, 0, bias_naive);
  add(op::bias_gelu_forward<float>, cuda, "float4", &bias_gelu_forward2, 10,
      about("variant 2: float4s when C % 4 == 0 and the pointers are aligned, else variant 1's loop"));
  add(op::bias_gelu_forward<double>, cuda, "naive", &bias_gelu_forward1<double>, 0, bias_naive);
  const VariantMeta backward_naive = about("variant 1: two kernels, dx per element, then dbias per column");
  const VariantMeta backward_tiled = about("variant 2: one pass in 32 x 8 tiles, dx written and columns summed on the way");
  add(op::bias_gelu_backward<float>, cuda, "naive", &bias_gelu_backward1<float>, 0, backward_naive);
  add(op::bias_gelu_backward<float>, cuda, "tiled", &bias_gelu_backward2<float>, 10, backward_tiled);
  add(op::bias_gelu_backward<double>, cuda, "naive", &bias_gelu_backward1<double>, 0, backward_naive);
  add(op::bias_gelu_backward<double>, cuda, "tiled", &bias_gelu_backward2<double>, 10, backward_tiled);
  // bf16 tensors (chapter 18): variant 3, their only one.
  const VariantMeta in_bf16 = about("variant 3: bf16 in memory, float32 math, each output rounded once");
  add(op::gelu_forward<brrr::bf16>, cuda, "bf16", &gelu_forward_bf16, 10, in_bf16);
  add(op::gelu_backward<brrr::bf16>, cuda, "bf16", &gelu_backward_bf16, 10, in_bf16);
  add(op::bias_gelu_forward<brrr::bf16>, cuda, "bf16", &bias_gelu_forward_bf16, 10, in_bf16);
  add(op::bias_gelu_backward<brrr::bf16>, cuda, "bf16", &bias_gelu_backward_bf16, 10,
      about("variant 3: bf16 in memory, float32 math; dbias one thread a column, from the float32 dx"));
  // Exact GELU: one grid-stride kernel per direction, for every dtype.
  const VariantMeta erf = about("grid-stride, 0.5 x erfc(-x / sqrt 2) (bf16: float32 math, rounded once)");
  const VariantMeta erf_grad = about("grid-stride, Phi(x) + x phi(x) (bf16: float32 math, rounded once)");
  add(op::gelu_erf_forward<float>, cuda, "grid_stride", &gelu_erf_forward<float>, 10, erf);
  add(op::gelu_erf_forward<double>, cuda, "grid_stride", &gelu_erf_forward<double>, 10, erf);
  add(op::gelu_erf_forward<brrr::bf16>, cuda, "grid_stride", &gelu_erf_forward<brrr::bf16>, 10, erf);
  add(op::gelu_erf_backward<float>, cuda, "grid_stride", &gelu_erf_backward<float>, 10, erf_grad);
  add(op::gelu_erf_backward<double>, cuda, "grid_stride", &gelu_erf_backward<double>, 10, erf_grad);
  add(op::gelu_erf_backward<brrr::bf16>, cuda, "grid_stride", &gelu_erf_backward<brrr::bf16>, 10, erf_grad);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
