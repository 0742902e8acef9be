// kernels/cuda/crossentropy.h: every variant of crossentropy.cu, callable with raw pointers.
// Chapter 13 (reductions: LayerNorm, softmax and cross-entropy). Read before:
// kernels/cuda/layernorm.h. Read next: crossentropy.cu.
//
// Compiled twice (see simt.h): brrr::kernels::emu takes host pointers and runs on the
// emulator, brrr::kernels::cuda takes device pointers (CUDA builds only). Signatures are those
// of kernels/signatures.h; the number is the variant of crossentropy.cu.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_CROSSENTROPY_VARIANTS(NS)                                                                             \
  namespace NS {                                                                                                  \
  /* logits (N, V), targets (N) -> losses (N), lse (N): one block per row (max, sum of exp, log). */              \
  template <class T>                                                                                              \
  void cross_entropy_forward1(T* losses, T* lse, const T* logits, const std::int32_t* targets, std::int64_t N,    \
                              std::int64_t V, std::int64_t ignore_index, Stream stream);                          \
  /* dlogits (N, V) = dlosses[n] * (exp(logits - lse) - onehot): one block per row. */                            \
  template <class T>                                                                                              \
  void cross_entropy_backward1(T* dlogits, const T* dlosses, const T* logits, const T* lse,                       \
                               const std::int32_t* targets, std::int64_t N, std::int64_t V,                       \
                               std::int64_t ignore_index, Stream stream);                                         \
  /* losses (N) and dlogits (N, V) = dloss * (softmax - onehot) in one kernel: one block per row, an online */    \
  /* max and sum in one read of the row, float4 where V % 4 == 0 and the pointers are aligned (float). */         \
  template <class T>                                                                                              \
  void cross_entropy_fused2(T* losses, T* dlogits, const T* logits, const std::int32_t* targets, std::int64_t N,  \
                            std::int64_t V, std::int64_t ignore_index, T dloss, Stream stream);                   \
  /* The same with the row kept in shared memory between the passes (float; falls back to variant 2). */         \
  void cross_entropy_fused3(float* losses, float* dlogits, const float* logits, const std::int32_t* targets,     \
                            std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss,              \
                            Stream stream);                                                                       \
  /* Variant 5, on bf16 data: variant 3's plan on bf16 logits, float32 losses and sums, bf16 dlogits, which */    \
  /* may be the logits themselves (in place). */                                                                  \
  void cross_entropy_fused_bf16(float* losses, bf16* dlogits, const bf16* logits, const std::int32_t* targets,    \
                                std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss,          \
                                Stream stream);                                                                   \
  }

namespace brrr::kernels {
BRRR_CROSSENTROPY_VARIANTS(emu)
BRRR_CROSSENTROPY_VARIANTS(cuda)
}  // namespace brrr::kernels
