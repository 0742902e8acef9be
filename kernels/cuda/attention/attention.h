// kernels/cuda/attention/attention.h: the causal attention kernels of kernels/cuda/attention/,
// callable with raw pointers, one function per variant. Chapter 15 (flash attention).
// Read before: kernels/signatures.h (attention_forward_fn, attention_backward_fn).
// Read next: kernels/cuda/attention/cuda_cores.cu (variants 1 and 2), then mma_sync.cu (3, 4),
// then wgmma.cu (5, Hopper).
//
// The folder's files are compiled twice (see simt.h), so each function exists in
// brrr::kernels::emu (the emulator, host pointers) and in brrr::kernels::cuda (the GPU, device
// pointers; only in CUDA builds). Sizes and scale in an AttentionShape (kernels/signatures.h):
// q, k, v, out, dout, dq, dk, dv (BH, T, hs), lse (BH, T), all contiguous; key j is visible to
// query i iff j <= i. T is float or double.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

// brrr::bf16 (brrr/bfloat16.h, C++20) by name only: nvcc compiles this header too, and a
// pointer needs no definition.
namespace brrr {
struct bf16;
}

#define BRRR_ATTENTION_KERNELS                                                                                   \
  /* Variant 1: one thread per query row, two passes over the keys. */                                          \
  template <class T>                                                                                             \
  void attention_forward_naive(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& shape, \
                               Stream stream);                                                                   \
  /* Variant 2: flash attention: tiles in shared memory, online softmax (head sizes up to 128). */            \
  template <class T>                                                                                             \
  void attention_forward_flash(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& shape, \
                               Stream stream);                                                                   \
  /* Variant 1: one thread per query row for dq, one per key row for dk and dv. */                              \
  template <class T>                                                                                             \
  void attention_backward_naive(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,         \
                                const T* out, const T* lse, const AttentionShape& shape, Stream stream);        \
  /* Variant 2: FlashAttention-2 style: a block per key tile for dk, dv, a block per query tile for dq. */      \
  template <class T>                                                                                             \
  void attention_backward_flash(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,         \
                                const T* out, const T* lse, const AttentionShape& shape, Stream stream);

namespace brrr::kernels {

#define BRRR_ATTENTION_TENSOR_CORE_KERNELS                                                                     \
  /* Variant 1 for the bf16 ops (chapter 18): every q, k, v (and dout) rounded to bfloat16 as it is read. */  \
  void attention_forward_naive_bf16(float* out, float* lse, const float* q, const float* k, const float* v,     \
                                    const AttentionShape& shape, Stream stream);                                \
  void attention_backward_naive_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q,        \
                                     const float* k, const float* v, const float* out, const float* lse,        \
                                     const AttentionShape& shape, Stream stream);                               \
  /* Variant 3: the flash forward on tensor cores, mma.sync m16n8k16 with q, k, v rounded to bfloat16 on load */ \
  /* and float32 accumulation (relative error about 1e-2, not 1e-6). */                                         \
  void attention_forward_bf16_mma(float* out, float* lse, const float* q, const float* k, const float* v,       \
                                  const AttentionShape& shape, Stream stream);                                  \
  /* Variant 3 backward: FlashAttention-2's backward on tensor cores, bf16 operands, dq in a second pass. */     \
  void attention_backward_bf16_mma(float* dq, float* dk, float* dv, const float* dout, const float* q,          \
                                   const float* k, const float* v, const float* out, const float* lse,          \
                                   const AttentionShape& shape, Stream stream);                                 \
  /* Variant 4 forward: q, k, v, out stored as bfloat16 (brrr::bf16, the bits of __nv_bfloat16), lse float32; */ \
  /* k and v tiles streamed by cp.async with double buffering. hs 64 or 128, 16-byte aligned pointers. */       \
  void attention_forward_bf16_pipelined(brrr::bf16* out, float* lse, const brrr::bf16* q, const brrr::bf16* k,  \
                                        const brrr::bf16* v, const AttentionShape& shape, Stream stream);       \
  /* Variant 4 backward: variant 3's loop order, q, k, v, out, dout bf16 by cp.async + ldmatrix; dq, dk, dv */ \
  /* float32. hs 64 or 128, 16-byte aligned pointers. */                                                        \
  void attention_backward_bf16_pipelined(float* dq, float* dk, float* dv, const brrr::bf16* dout,               \
                                         const brrr::bf16* q, const brrr::bf16* k, const brrr::bf16* v,         \
                                         const brrr::bf16* out, const float* lse, const AttentionShape& shape,  \
                                         Stream stream);                                                        \
  /* Variant 4 on the GPT's packed layouts (attention_*_qkv): q, k, v read from qkv (B, T, 3C), out and */     \
  /* dout (B, T, C), dq, dk, dv rounded into dqkv (B, T, 3C). */                                                 \
  void attention_forward_qkv_bf16_pipelined(brrr::bf16* out, float* lse, const brrr::bf16* qkv,                 \
                                            const AttentionShape& shape, std::int64_t heads, Stream stream);    \
  void attention_backward_qkv_bf16_pipelined(brrr::bf16* dqkv, const brrr::bf16* dout, const brrr::bf16* qkv,  \
                                             const brrr::bf16* out, const float* lse,                           \
                                             const AttentionShape& shape, std::int64_t heads, Stream stream);   \
  /* Variant 5 (wgmma.cu): variant 4's slots on Hopper: TMA rings, a producer and two consumer warpgroups, */  \
  /* wgmma. hs 64 or 128, 16-byte aligned pointers, sm_90 only on a GPU. */                                     \
  void attention_forward_wgmma(brrr::bf16* out, float* lse, const brrr::bf16* q, const brrr::bf16* k,          \
                               const brrr::bf16* v, const AttentionShape& shape, Stream stream);               \
  void attention_backward_wgmma(float* dq, float* dk, float* dv, const brrr::bf16* dout, const brrr::bf16* q,  \
                                const brrr::bf16* k, const brrr::bf16* v, const brrr::bf16* out,               \
                                const float* lse, const AttentionShape& shape, Stream stream);

namespace emu {
BRRR_ATTENTION_KERNELS
BRRR_ATTENTION_TENSOR_CORE_KERNELS
void register_attention_wgmma_kernels();  // wgmma.cu's variants, which register.cu adds
}  // namespace emu

namespace cuda {
BRRR_ATTENTION_KERNELS
BRRR_ATTENTION_TENSOR_CORE_KERNELS
void register_attention_wgmma_kernels();
}  // namespace cuda

}  // namespace brrr::kernels

#undef BRRR_ATTENTION_KERNELS
#undef BRRR_ATTENTION_TENSOR_CORE_KERNELS
