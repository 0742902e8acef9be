// exercises/student/crossentropy.cu: exercise ex16.1 (cross_entropy_fused): softmax, the
// cross-entropy loss and its gradient in one kernel, with no probability tensor in between
// (chapter 16, docs/chapters/16-fused-optimizer.md; the reductions are chapter 13's).
// Read before: the chapters, kernels/cpu/nn.cpp (cross_entropy_forward and _backward) and
// kernels/cpu/fused.cpp (cross_entropy_fused: the reference), kernels/cuda/common.h
// (block_sum, warp_max), exercises/student/layernorm.cu (ex13.1: a block per row).
// Read next: kernels/cuda/crossentropy.cu, the built-in variants.
//
// What to write: one kernel (and its host function) that, for each row n of logits (N, V),
// writes the loss and the gradient. Registered as variant "student" of cross_entropy_fused on
// the CUDA device (exercises/student/student_cuda.cu).
//
// Requirements (checked against the CPU kernel within 1e-4 relative error, at a ragged V,
// with some rows' target equal to ignore_index)
//   - lse = log(sum_v exp(logits[n, v])), computed safely: max + log(sum exp(logit - max)).
//   - losses[n] = lse - logits[n, targets[n]];
//     dlogits[n, v] = dloss * (exp(logits[n, v] - lse) - (v == targets[n] ? 1 : 0)).
//   - A row whose target is ignore_index: losses[n] = 0 and dlogits[n, :] = 0.
//   - N == 0 does nothing. No float atomics (the same bits every run).
//
// A plan
//   1. One block of 256 threads per row (a loop over rows when N passes 65535 blocks).
//   2. Pass 1: each thread's max over its columns (v = threadIdx.x, + 256, ...); a block max:
//      warp_max, then the warps' maxima through `__shared__ float scratch[32]` (like
//      block_sum in common.h, with max for +).
//   3. Pass 2: each thread's sum of exp(logit - max); block_sum; lse = max + logf(sum).
//   4. Pass 3: write dlogits; thread 0 writes the loss. The ignored row writes zeros (decide
//      it from targets[n], the same for the whole block, so no thread skips a barrier).
//   5. Grade, then: can passes 1 and 2 be one (an online max and sum, chapter 15's trick)?
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

// TODO(ex16.1): cross_entropy_fused_kernel here.

void cross_entropy_fused(float* losses, float* dlogits, const float* logits, const std::int32_t* targets,
                         std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream stream) {
  // TODO(ex16.1): launch your kernel (and delete this line).
  brrr::student::not_written("ex16.1", "cross_entropy_fused");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
