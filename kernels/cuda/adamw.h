// kernels/cuda/adamw.h: every variant of adamw.cu, callable with raw pointers.
// Chapter 16 (the fused optimizer). Read before: kernels/cuda/crossentropy.h.
// Read next: adamw.cu.
//
// Compiled twice (see simt.h): brrr::kernels::emu takes host pointers and runs on the
// emulator, brrr::kernels::cuda takes device pointers (CUDA builds only). Signatures are those
// of kernels/signatures.h; the number is the variant of adamw.cu.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_ADAMW_VARIANTS(NS)                                                                                    \
  namespace NS {                                                                                                  \
  /* One tensor of n parameters in place. 1: one thread per parameter; 2: grid-stride float4 (float). */          \
  template <class T>                                                                                              \
  void adamw_step1(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWParams& hp, Stream stream);   \
  void adamw_step2(float* param, const float* grad, float* m, float* v, std::int64_t n, const AdamWParams& hp,    \
                   Stream stream);                                                                                \
  /* Many tensors, each with its own weight decay, in one launch per 64 tensors (hp.weight_decay unused). */     \
  template <class T>                                                                                              \
  void adamw_multi_step(const AdamWTensor<T>* tensors, int count, const AdamWParams& hp, Stream stream);          \
  /* The same with the gradients clipped by their global norm: two passes over them, three launches. */        \
  template <class T>                                                                                              \
  void adamw_clipped_multi_step(T* norm, const AdamWTensor<T>* tensors, int count, const AdamWParams& hp,         \
                                double max_norm, Stream stream);                                                  \
  /* SGD with momentum, one thread per parameter. */                                                              \
  template <class T>                                                                                              \
  void sgd_step1(T* param, const T* grad, T* momentum_buffer, std::int64_t n, const SGDParams& hp, Stream stream); \
  }

namespace brrr::kernels {
BRRR_ADAMW_VARIANTS(emu)
BRRR_ADAMW_VARIANTS(cuda)
}  // namespace brrr::kernels
