// exercises/student/student_cuda.h: the host functions of the CUDA exercises (chapters 12-16, 21),
// declared for both copies of each .cu file (brrr::kernels::cuda for the GPU, ::emu for the
// emulator; kernels/cuda/simt.h picks the namespace). Include it after simt.h.
// Read first: docs/teaching.md. Each function has the signature of its op in
// kernels/signatures.h (float32 only, but for ex21.1's bf16 data) and lives in its exercise's file:
//   ex12.1 gelu_forward, ex12.2 gelu_backward           exercises/student/gelu.cu         (chapter 12)
//   ex13.1 layernorm_forward, ex13.2 layernorm_backward exercises/student/layernorm.cu    (chapter 13)
//   ex14.1 matmul_shared                              exercises/student/matmul.cu       (chapter 14)
//   ex14.2 transpose (graded on its memory counters)  exercises/student/transpose.cu    (chapter 14)
//   ex15.1 flash_attention_forward                    exercises/student/attention.cu    (chapter 15)
//   ex16.1 cross_entropy_fused                        exercises/student/crossentropy.cu (chapter 16)
//   ex16.2 adamw_step                                 exercises/student/adamw.cu        (chapter 16)
//   ex21.1 tma_ring_matmul (bf16 data, Hopper's wgmma) exercises/student/tma_ring.cu     (chapter 21)
// The stubs (namespace ...::student) register as variant "student" in student_cuda.cu; the
// reference solutions (exercises/solutions, namespace ...::solution) as "solution".
#pragma once
#include <cstdint>

#include "kernels/cuda/simt.h"
#include "kernels/signatures.h"

namespace brrr::student {
// exercises/student/register.cpp: throws "exercise ID (NAME): not written yet: ...".
[[noreturn]] void not_written(const char* id, const char* name);
}  // namespace brrr::student

#define BRRR_CUDA_EXERCISE_FUNCTIONS                                                                               \
  void gelu_forward(float* out, const float* x, std::int64_t n, Stream stream);                                    \
  void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, Stream stream);                 \
  void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight,                \
                         const float* bias, std::int64_t N, std::int64_t C, float eps, Stream stream);             \
  void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,              \
                          const float* weight, const float* mean, const float* rstd, std::int64_t N,               \
                          std::int64_t C, Stream stream);                                                          \
  void matmul_shared(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);         \
  void transpose(float* out, const float* in, std::int64_t M, std::int64_t N, Stream stream);                      \
  void flash_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,             \
                               const AttentionShape& shape, Stream stream);                                        \
  void cross_entropy_fused(float* losses, float* dlogits, const float* logits, const std::int32_t* targets,        \
                           std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream stream); \
  void adamw_step(float* param, const float* grad, float* m, float* v, std::int64_t n, const AdamWParams& hp,      \
                  Stream stream);                                                                                  \
  void tma_ring_matmul(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape,            \
                       Stream stream);

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {
BRRR_CUDA_EXERCISE_FUNCTIONS
}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {
BRRR_CUDA_EXERCISE_FUNCTIONS
}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution

#undef BRRR_CUDA_EXERCISE_FUNCTIONS

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {
// student_cuda.cu: adds the stubs (and the solutions, when built) to the registry; called by
// the exercises' provider (exercises/install.cpp) for the backend the CUDA device has.
void register_student_cuda_kernels();
}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
