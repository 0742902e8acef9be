// kernels/cuda/nn.h: the CUDA embedding, softmax and log-softmax kernels of nn.cu, callable
// with raw pointers. Chapter 10 (the GPU and the emulator). Read before: kernels/signatures.h.
// Read next: kernels/cuda/nn.cu.
//
// Compiled twice (see simt.h): brrr::kernels::emu (the emulator, host pointers) and
// brrr::kernels::cuda (the GPU, device pointers). T is float or double. Each matches its op's
// signature in kernels/signatures.h and is registered as variant "simple".
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_CUDA_NN_KERNELS(NS)                                                                               \
  namespace NS {                                                                                              \
  void check_indices(std::int32_t* safe, std::int32_t* first_bad, const std::int32_t* idx, std::int64_t N,      \
                     std::int64_t limit, std::int64_t allowed, Stream stream);                                  \
  template <class T> void embedding_forward_simple(T* out, const T* weight, const std::int32_t* idx,          \
                                                   std::int64_t N, std::int64_t C, Stream stream);            \
  /* Adds dout's rows into dweight (as the CPU kernel does), in row order: deterministic. */                  \
  template <class T> void embedding_backward_simple(T* dweight, const T* dout, const std::int32_t* idx,       \
                                                    std::int64_t N, std::int64_t V, std::int64_t C,           \
                                                    Stream stream);                                            \
  template <class T> void softmax_forward_simple(T* out, const T* x, std::int64_t N, std::int64_t C,          \
                                                 Stream stream);                                               \
  template <class T> void softmax_backward_simple(T* dx, const T* dout, const T* out, std::int64_t N,         \
                                                  std::int64_t C, Stream stream);                              \
  template <class T> void log_softmax_forward_simple(T* out, const T* x, std::int64_t N, std::int64_t C,      \
                                                     Stream stream);                                           \
  template <class T> void log_softmax_backward_simple(T* dx, const T* dout, const T* out, std::int64_t N,     \
                                                      std::int64_t C, Stream stream);                          \
  }

namespace brrr::kernels {
BRRR_CUDA_NN_KERNELS(emu)
BRRR_CUDA_NN_KERNELS(cuda)
}  // namespace brrr::kernels

#undef BRRR_CUDA_NN_KERNELS
