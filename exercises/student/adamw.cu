// exercises/student/adamw.cu: exercise ex16.2 (adamw_step), the AdamW update as one elementwise
// kernel (chapter 16, docs/chapters/16-fused-optimizer.md).
// Read before: the chapter, kernels/cpu/optim.cpp (adamw_step: the reference, operation by
// operation as torch.optim.AdamW), exercises/student/gelu.cu (ex12.1: a grid-stride loop).
// Read next: kernels/cuda/adamw.cu, the built-in variants (and adamw_multi_step).
//
// What to write: the update of n parameters in place, registered as variant "student" of
// adamw_step on the CUDA device (exercises/student/student_cuda.cu), so once it passes the
// trainer's optimizer can run on it (BRRR_KERNELS=adamw_step=student ...).
//
// Requirements (checked against the CPU kernel within 1e-5 relative error, ragged n, step 10)
//   For each i < n, with g = grad[i] and t = hp.step:
//     p = param[i] * (1 - lr * weight_decay)            decoupled weight decay
//     m[i] = beta1 * m[i] + (1 - beta1) * g
//     v[i] = beta2 * v[i] + (1 - beta2) * g * g
//     param[i] = p - lr / (1 - beta1^t) * m[i] / (sqrt(v[i]) / sqrt(1 - beta2^t) + eps)
//   - n == 0 does nothing; every param, m and v element updated exactly once.
//
// A plan
//   1. On the host, in double, the per-step constants: the decay factor, the bias
//      corrections 1 - beta^t (std::pow), lr / (1 - beta1^t) and sqrt(1 - beta2^t); pass them
//      to the kernel as floats (hp itself is host memory: pass values, not &hp).
//   2. The kernel: a grid-stride loop over i, reading each of param, grad, m, v once and
//      writing param, m, v once.
//   3. Host: return if n == 0; BRRR_LAUNCH with 256 threads a block and grid_for(n, 256, ...).
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

// TODO(ex16.2): adamw_step_kernel here.

void adamw_step(float* param, const float* grad, float* m, float* v, std::int64_t n, const AdamWParams& hp,
                Stream stream) {
  // TODO(ex16.2): launch your kernel (and delete this line).
  brrr::student::not_written("ex16.2", "adamw_step");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
