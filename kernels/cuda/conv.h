// kernels/cuda/conv.h: every variant of conv.cu, callable with raw pointers (tests, benchmarks).
// Chapter 09 (convolutions), the GPU section. Read before: kernels/cpu/conv_im2col.cpp.
// Read next: conv.cu.
//
// conv.cu is compiled twice (see simt.h), so each function exists in brrr::kernels::emu (the
// emulator: host pointers) and in brrr::kernels::cuda (the GPU: device pointers, CUDA builds
// only), with the signatures of kernels/signatures.h. T is float or double.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_CONV_VARIANTS(NS)                                                                                    \
  namespace NS {                                                                                                 \
  /* Variant 1, im2col + the registry's matmul (the default): forward, dx, dweight and dbias. */                \
  template <class T>                                                                                             \
  void conv2d_im2col_forward(T* out, const T* x, const T* weight, const T* bias, const ConvShape& s, Stream);     \
  template <class T>                                                                                             \
  void conv2d_im2col_backward_input(T* dx, const T* dout, const T* weight, const ConvShape& s, Stream);          \
  template <class T>                                                                                             \
  void conv2d_im2col_backward_weight(T* dweight, T* dbias, const T* dout, const T* x, const ConvShape& s, Stream); \
  /* Variant 2, direct and tiled: an output tile per block, input patch and weights in shared memory. */         \
  template <class T>                                                                                             \
  void conv2d_direct_forward(T* out, const T* x, const T* weight, const T* bias, const ConvShape& s, Stream);     \
  /* The elements col and the reordered dout may hold at once (default 2^24); more images go in */             \
  /* several groups. Returns the previous value. For tests: tiny shapes then take the groups' path. */           \
  std::int64_t set_conv_workspace_budget(std::int64_t elements);                                                 \
  /* Pooling: a thread per output (forward), a thread per input gathering its windows (backward). */             \
  template <class T>                                                                                             \
  void max_pool2d_forward(T* out, std::int64_t* index, const T* x, const PoolShape& s, Stream);                  \
  template <class T>                                                                                             \
  void max_pool2d_backward(T* dx, const T* dout, const std::int64_t* index, const PoolShape& s, Stream);         \
  template <class T> void avg_pool2d_forward(T* out, const T* x, const PoolShape& s, Stream);                   \
  template <class T> void avg_pool2d_backward(T* dx, const T* dout, const PoolShape& s, Stream);                \
  }

namespace brrr::kernels {
BRRR_CONV_VARIANTS(emu)
BRRR_CONV_VARIANTS(cuda)
}  // namespace brrr::kernels
