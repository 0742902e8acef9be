// kernels/cuda/common.h: small helpers the CUDA kernel files share: launch sizes, warp and
// block reductions, alignment. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/simt.h. Include it after simt.h, inside no namespace.
#pragma once
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>

#include "brrr/bfloat16.h"
#include "kernels/cuda/simt.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// ceil(a / b) for positive b.
__host__ __device__ inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Blocks of block_size threads for `work` items, at most max_blocks of them (0: no cap); a
// grid-stride loop in the kernel covers the rest. At least one block.
inline int grid_for(std::int64_t work, int block_size, int max_blocks = 0) {
  std::int64_t blocks = ceil_div(std::max<std::int64_t>(work, 1), block_size);
  if (max_blocks > 0) blocks = std::min<std::int64_t>(blocks, max_blocks);
  return static_cast<int>(std::min<std::int64_t>(blocks, INT_MAX));
}

// float4 loads and stores need 16-byte aligned addresses: cudaMalloc's are, a view's may not be.
inline bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Math for float and double, so a kernel template calls one name for both: CUDA's C library
// has a name per type (expf for float, exp for double), the same functions the CPU kernels
// reach through std::exp, accurate to 1 or 2 ulp.
__device__ inline float exp_of(float x) { return ::expf(x); }
__device__ inline double exp_of(double x) { return ::exp(x); }
__device__ inline float log_of(float x) { return ::logf(x); }
__device__ inline double log_of(double x) { return ::log(x); }
__device__ inline float sqrt_of(float x) { return ::sqrtf(x); }
__device__ inline double sqrt_of(double x) { return ::sqrt(x); }
__device__ inline float tanh_of(float x) { return ::tanhf(x); }
__device__ inline double tanh_of(double x) { return ::tanh(x); }
__device__ inline float erfc_of(float x) { return ::erfcf(x); }
__device__ inline double erfc_of(double x) { return ::erfc(x); }
__device__ inline float pow_of(float x, float y) { return ::powf(x, y); }
__device__ inline double pow_of(double x, double y) { return ::pow(x, y); }
// a * b + c with one rounding. Written out where bits must not depend on the compiler: left
// to itself, nvcc (and g++, for the emulator) fuses a * b + c into an FMA or not depending on
// the code around it, so two kernels with the same formula can differ in the last bit.
__device__ inline float fma_of(float a, float b, float c) { return ::fmaf(a, b, c); }
__device__ inline double fma_of(double a, double b, double c) { return ::fma(a, b, c); }
// GELU, the tanh form, in float32: gelu(x) = 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), u =
// sqrt(2/pi) (x + 0.044715 x^3), as kernels/cpu/nn.cpp computes it; the GEMM epilogues'
// (matmul/mma_sync.cu's variant 11, matmul/wgmma_ring.h, matmul/epilogue.cu).
__device__ inline float gelu_tanh(float x) {
  return x / (1.0f + exp_of(-2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
// brrr::bf16, the element of a BFloat16 tensor (chapter 18), in a kernel: widened exactly (its
// 16 bits on top of 16 zeros), narrowed to nearest even by CUDA's own conversion (which the
// emulator spells with brrr::bf16, bit for bit the same: NaN canonical, infinities kept).
__device__ inline float float_of(brrr::bf16 x) { return __uint_as_float(static_cast<unsigned>(x.bits) << 16); }
__device__ inline brrr::bf16 bf16_of(float x) {
  brrr::bf16 out;
  out.bits = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  return out;
}

template <class T>
__device__ inline T minus_infinity() {
  return -static_cast<T>(INFINITY);
}

// The sum (max) over the 32 lanes of a warp, in every lane (a butterfly of five shuffles).
template <class T>
__device__ inline T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}
template <class T>
__device__ inline T warp_max(T value) {
  for (int offset = 16; offset > 0; offset /= 2) value = max(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// The sum over a block (blockDim.x a multiple of 32, at most 1024), in every thread. Every
// thread of the block must call it. `scratch` is 32 values of shared memory; it is free again
// when the function returns.
template <class T>
__device__ inline T block_sum(T value, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : T(0);
  return warp_sum(value);
}

// The max over a block, in every thread, under the same rules as block_sum. NaNs are skipped
// (as std::max(m, x) skips them on the CPU); a row with a NaN comes out NaN through exp anyway.
template <class T>
__device__ inline T block_max(T value, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  value = warp_max(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : minus_infinity<T>();
  return warp_max(value);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
