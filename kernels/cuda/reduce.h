// kernels/cuda/reduce.h: the CUDA reductions of reduce.cu, callable with raw pointers.
// Chapter 10 (the GPU and the emulator). Read before: kernels/signatures.h.
// Read next: kernels/cuda/reduce.cu.
//
// Compiled twice (see simt.h): brrr::kernels::emu (the emulator, host pointers) and
// brrr::kernels::cuda (the GPU, device pointers). T is float or double. Each matches its op's
// signature in kernels/signatures.h and is registered as variant "simple".
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_CUDA_REDUCE_KERNELS(NS)                                                                           \
  namespace NS {                                                                                              \
  /* (outer, R, inner) -> (outer, inner), summed in double, in a fixed order (deterministic). */              \
  template <class T> void sum_dim_simple(T* out, const T* in, std::int64_t outer, std::int64_t R,             \
                                         std::int64_t inner, Stream stream);                                   \
  /* The largest value and the index of its first occurrence (NaN counts as largest); index may be null. */  \
  template <class T> void max_dim_simple(T* out, std::int64_t* index, const T* in, std::int64_t outer,        \
                                         std::int64_t R, std::int64_t inner, Stream stream);                   \
  template <class T> void max_dim_backward_simple(T* dx, const T* dout, const std::int64_t* index,            \
                                                  std::int64_t outer, std::int64_t R, std::int64_t inner,     \
                                                  Stream stream);                                              \
  }

namespace brrr::kernels {
BRRR_CUDA_REDUCE_KERNELS(emu)
BRRR_CUDA_REDUCE_KERNELS(cuda)
}  // namespace brrr::kernels

#undef BRRR_CUDA_REDUCE_KERNELS
