// exercises/solutions/gelu.cu: the reference solution of exercises ex12.1 and ex12.2
// (exercises/student/gelu.cu; chapter 12), registered as variant "solution".
// Plain on purpose: one element per thread in a grid-stride loop, float loads, tanhf.
// kernels/cuda/gelu.cu goes further (float4 loads, one exp instead of tanh).
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;
constexpr int kBlock = 256;

__global__ void gelu_forward_kernel(float* out, const float* x, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    const float u = kSqrt2OverPi * (v + kCubic * v * v * v);
    out[i] = 0.5f * v * (1.0f + tanhf(u));
  }
}

__global__ void gelu_backward_kernel(float* dx, const float* dout, const float* x, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = x[i];
    const float th = tanhf(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float slope =
        0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = dout[i] * slope;
  }
}

void gelu_forward(float* out, const float* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  BRRR_LAUNCH(gelu_forward_kernel, grid_for(n, kBlock, 65535), kBlock, 0, stream, out, x, n);
}

void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, Stream stream) {
  if (n == 0) return;
  BRRR_LAUNCH(gelu_backward_kernel, grid_for(n, kBlock, 65535), kBlock, 0, stream, dx, dout, x, n);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
