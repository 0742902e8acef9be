// kernels/cuda/gelu.h: every variant of gelu.cu, callable with raw pointers (tests, benchmarks).
// Chapter 12 (GELU on the GPU). Read before: kernels/cuda/examples.h. Read next: gelu.cu.
//
// gelu.cu is compiled twice (see simt.h), so each function exists in brrr::kernels::emu (the
// emulator: host pointers) and in brrr::kernels::cuda (the GPU: device pointers, CUDA builds
// only), with the signatures of kernels/signatures.h. The number is the variant of gelu.cu.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_GELU_VARIANTS(NS)                                                                                     \
  namespace NS {                                                                                                  \
  /* out = gelu(x), (n). 1: one thread per element (float, double); 2: grid-stride float4 (float). */          \
  template <class T> void gelu_forward1(T* out, const T* x, std::int64_t n, Stream stream);                       \
  void gelu_forward2(float* out, const float* x, std::int64_t n, Stream stream);                                  \
  /* dx = dout * gelu'(x), (n). */                                                                                \
  template <class T> void gelu_backward1(T* dx, const T* dout, const T* x, std::int64_t n, Stream stream);        \
  void gelu_backward2(float* dx, const float* dout, const float* x, std::int64_t n, Stream stream);               \
  /* out (N, C) = gelu(x + bias), bias (C). 1: one thread per element; 2: grid-stride float4. */                  \
  template <class T>                                                                                              \
  void bias_gelu_forward1(T* out, const T* x, const T* bias, std::int64_t N, std::int64_t C, Stream stream);      \
  void bias_gelu_forward2(float* out, const float* x, const float* bias, std::int64_t N, std::int64_t C,          \
                          Stream stream);                                                                         \
  /* dx (N, C) = dout * gelu'(x + bias), dbias (C) = column sums of dx (overwritten). 1: elementwise, then */     \
  /* one thread per column; 2: column tiles with per-block partial sums, then a fixed-order sum. */               \
  template <class T>                                                                                              \
  void bias_gelu_backward1(T* dx, T* dbias, const T* dout, const T* x, const T* bias, std::int64_t N,              \
                           std::int64_t C, Stream stream);                                                        \
  template <class T>                                                                                              \
  void bias_gelu_backward2(T* dx, T* dbias, const T* dout, const T* x, const T* bias, std::int64_t N,              \
                           std::int64_t C, Stream stream);                                                        \
  /* Exact GELU, x Phi(x), and dx = dout * gelu'(x): grid-stride, S float, double or bf16. */                      \
  template <class S> void gelu_erf_forward(S* out, const S* x, std::int64_t n, Stream stream);                    \
  template <class S> void gelu_erf_backward(S* dx, const S* dout, const S* x, std::int64_t n, Stream stream);     \
  }

namespace brrr::kernels {
BRRR_GELU_VARIANTS(emu)
BRRR_GELU_VARIANTS(cuda)
}  // namespace brrr::kernels
