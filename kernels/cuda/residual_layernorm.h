// kernels/cuda/residual_layernorm.h: residual_layernorm.cu's kernels, callable with raw pointers.
// Chapter 18 (mixed precision). Read before: kernels/cuda/layernorm.h. Read next:
// residual_layernorm.cu.
//
// Compiled twice (see simt.h): brrr::kernels::emu takes host pointers and runs on the
// emulator, brrr::kernels::cuda takes device pointers (CUDA builds only). Signatures are those
// of kernels/signatures.h (residual_layernorm_forward_on_bf16_fn and the backward's).
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_RESIDUAL_LAYERNORM_VARIANTS(NS)                                                                      \
  namespace NS {                                                                                                  \
  /* LayerNorm's variant 5: sum = x + residual and out = layernorm(sum) on bf16 data, float32 mean, rstd. */     \
  void residual_layernorm_forward_bf16(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* x,             \
                                       const bf16* residual, const bf16* weight, const bf16* bias,                \
                                       std::int64_t N, std::int64_t C, float eps, Stream stream);                 \
  /* dsum = dres + layernorm's dx, dweight, dbias (overwritten), on bf16 data. */                                 \
  void residual_layernorm_backward_bf16(bf16* dsum, bf16* dweight, bf16* dbias, const bf16* dout,                 \
                                        const bf16* dres, const bf16* sum, const bf16* weight, const float* mean, \
                                        const float* rstd, std::int64_t N, std::int64_t C, Stream stream);        \
  }

namespace brrr::kernels {
BRRR_RESIDUAL_LAYERNORM_VARIANTS(emu)
BRRR_RESIDUAL_LAYERNORM_VARIANTS(cuda)
}  // namespace brrr::kernels
