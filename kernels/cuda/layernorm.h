// kernels/cuda/layernorm.h: every variant of layernorm.cu, callable with raw pointers.
// Chapter 13 (reductions: LayerNorm, softmax and cross-entropy).
// Read before: kernels/cuda/gelu.h. Read next: layernorm.cu.
//
// Compiled twice (see simt.h): brrr::kernels::emu takes host pointers and runs on the
// emulator, brrr::kernels::cuda takes device pointers (CUDA builds only). Signatures are those
// of kernels/signatures.h; the number is the variant of layernorm.cu.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_LAYERNORM_VARIANTS(NS)                                                                                \
  namespace NS {                                                                                                  \
  /* x (N, C) -> out (N, C), mean (N), rstd (N). 1: a thread per row; 2: a warp per row; 3: a warp per row, */    \
  /* float4, the row held in registers (float; falls back to 2 when C % 4, alignment or C > 2048 forbid). */     \
  template <class T>                                                                                              \
  void layernorm_forward1(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t N,   \
                          std::int64_t C, T eps, Stream stream);                                                  \
  template <class T>                                                                                              \
  void layernorm_forward2(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t N,   \
                          std::int64_t C, T eps, Stream stream);                                                  \
  void layernorm_forward3(float* out, float* mean, float* rstd, const float* x, const float* weight,              \
                          const float* bias, std::int64_t N, std::int64_t C, float eps, Stream stream);           \
  /* dx (N, C), dweight (C), dbias (C), the last two overwritten (either may be null). 1: a thread per row for */ \
  /* dx, then a thread per column; 2: a warp per row, per-block partials in shared memory, a fixed-order sum; */  \
  /* 3: a warp per row, float4, the row and the column partials in registers (float; falls back to 2 when */      \
  /* C % 4, alignment or C > 1024 forbid). */                                                                     \
  template <class T>                                                                                              \
  void layernorm_backward1(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,               \
                           const T* mean, const T* rstd, std::int64_t N, std::int64_t C, Stream stream);          \
  template <class T>                                                                                              \
  void layernorm_backward2(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight,               \
                           const T* mean, const T* rstd, std::int64_t N, std::int64_t C, Stream stream);          \
  void layernorm_backward3(float* dx, float* dweight, float* dbias, const float* dout, const float* x,              \
                           const float* weight, const float* mean, const float* rstd, std::int64_t N,             \
                           std::int64_t C, Stream stream);                                                        \
  /* sum (N, C) = x + residual, then out, mean, rstd = layernorm(sum). Variants as the forward's. */              \
  template <class T>                                                                                              \
  void residual_layernorm_forward1(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual,               \
                                   const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps,         \
                                   Stream stream);                                                                \
  template <class T>                                                                                              \
  void residual_layernorm_forward2(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual,               \
                                   const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps,         \
                                   Stream stream);                                                                \
  void residual_layernorm_forward3(float* sum, float* out, float* mean, float* rstd, const float* x,              \
                                   const float* residual, const float* weight, const float* bias, std::int64_t N, \
                                   std::int64_t C, float eps, Stream stream);                                     \
  }

namespace brrr::kernels {
BRRR_LAYERNORM_VARIANTS(emu)
BRRR_LAYERNORM_VARIANTS(cuda)
}  // namespace brrr::kernels
