// exercises/solutions/adamw.cu: the reference solution of exercise ex16.2
// (exercises/student/adamw.cu; chapter 16), registered as adamw_step variant "solution".
// One thread per parameter in a grid-stride loop; the step's constants computed once on the
// host, in double, as kernels/cpu/optim.cpp does.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

constexpr int kBlock = 256;

struct AdamWConstants {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps;
};

__global__ void adamw_step_kernel(float* param, const float* grad, float* m, float* v, std::int64_t n,
                                  AdamWConstants c) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = grad[i];
    const float p = param[i] * c.decay;
    const float mi = m[i] * c.beta1 + g * c.one_minus_beta1;
    const float vi = v[i] * c.beta2 + g * g * c.one_minus_beta2;
    const float denom = sqrtf(vi) / c.bias_correction2_sqrt + c.eps;
    param[i] = p - c.step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

void adamw_step(float* param, const float* grad, float* m, float* v, std::int64_t n, const AdamWParams& hp,
                Stream stream) {
  if (n == 0) return;
  AdamWConstants c;
  c.decay = static_cast<float>(1.0 - hp.lr * hp.weight_decay);
  c.beta1 = static_cast<float>(hp.beta1), c.one_minus_beta1 = static_cast<float>(1.0 - hp.beta1);
  c.beta2 = static_cast<float>(hp.beta2), c.one_minus_beta2 = static_cast<float>(1.0 - hp.beta2);
  const double t = static_cast<double>(hp.step);
  c.step_size = static_cast<float>(hp.lr / (1.0 - std::pow(hp.beta1, t)));
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(hp.beta2, t)));
  c.eps = static_cast<float>(hp.eps);
  BRRR_LAUNCH(adamw_step_kernel, grid_for(n, kBlock, 65535), kBlock, 0, stream, param, grad, m, v, n, c);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
