// exercises/student/layernorm.cu: exercises ex13.1 (layernorm_forward) and ex13.2
// (layernorm_backward), your first reductions on the GPU (chapter 13,
// docs/chapters/13-reductions-layernorm-softmax-ce.md).
// Read before: the chapter, kernels/cuda/examples.cu (row_sum: one block per row),
// kernels/cuda/common.h (block_sum), kernels/cpu/nn.cpp (layernorm_forward and _backward: the
// reference). Read next: kernels/cuda/layernorm.cu, the built-in variants.
//
// What to write: both kernels and their host functions; they are registered as variant
// "student" of layernorm_forward and layernorm_backward on the CUDA device
// (exercises/student/student_cuda.cu). Grade with `build/brrr exercises check ex13.1` (ex13.2).
//
// Requirements (checked against the CPU kernels, within 1e-4 (forward) and 1e-3 (backward)
// relative error, at a ragged size: C not a multiple of 32)
//   - ex13.1: for each row n of x (N, C): mean[n] = sum_c x / C; var = sum_c (x - mean)^2 / C
//     (the biased variance, as PyTorch); rstd[n] = 1 / sqrt(var + eps);
//     out[n, c] = (x[n, c] - mean[n]) * rstd[n] * weight[c] + bias[c].
//   - ex13.2: with xhat = (x - mean) * rstd and g = dout * weight (per element):
//     dx[n, c] = rstd[n] * (g - mean_c(g) - xhat * mean_c(g * xhat));
//     dweight[c] = sum_n dout * xhat; dbias[c] = sum_n dout (overwritten, not accumulated).
//   - N == 0 launches nothing (but dweight and dbias are still zeros when N == 0 and C > 0).
//   - Deterministic: no float atomicAdd (the same inputs give the same bits, DESIGN.md).
//   - Correct on a real GPU: every thread of a block reaches every __syncthreads (never put
//     one inside an `if` that only some threads take).
//
// A plan
//   1. Forward: one block of 128 threads per row (grid N; or a loop over rows when N is huge).
//      Each thread sums x[c] for c = threadIdx.x, + 128, ...; block_sum (common.h, with a
//      `__shared__ float scratch[32]`) gives every thread the row's sum: the mean. A second
//      pass over the row does the same for (x - mean)^2; a third writes out. Thread 0 writes
//      mean and rstd.
//   2. Backward, dx: the same shape of kernel: two block sums (of g and of g * xhat), then a
//      pass that writes dx.
//   3. Backward, dweight and dbias: sums down the columns. A second kernel with one thread
//      per column c, looping over the N rows, is simple, deterministic and reads rows
//      coalesced (neighbouring threads read neighbouring c).
//   4. Grade, then try: more columns per thread, or the row kept in registers between passes.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

// TODO(ex13.1): layernorm_forward_kernel here.

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t C, float eps, Stream stream) {
  // TODO(ex13.1): launch your kernel (and delete this line).
  brrr::student::not_written("ex13.1", "layernorm_forward");
}

// TODO(ex13.2): the dx kernel and the dweight / dbias kernel here.

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N, std::int64_t C,
                        Stream stream) {
  // TODO(ex13.2): launch your kernels (and delete this line).
  brrr::student::not_written("ex13.2", "layernorm_backward");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
