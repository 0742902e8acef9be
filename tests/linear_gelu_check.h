// tests/linear_gelu_check.h: which GELU the bf16 step's fused linear layer applies (chapter 18,
// section 11), tested on the emulator (tests/emulator/test_matmul_epilogue_bf16.cpp) and on a GPU,
// where the op is cuBLASLt's epilogue (tests/cuda/test_gpu.cpp). At K = 1, with weight 1 and bias
// 0, the sum before GELU is x itself, exact: pre must be x, and out bf16(gelu(x)) of brrr's tanh
// form (kernels/cpu/nn.cpp). The exact GELU (erf) differs from it by up to about 2e-4, which moves
// the bf16 rounding of some outputs: a kernel with the other GELU matches on fewer of them.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "brrr/brrr.h"

namespace brrr::test {

// GELU's tanh form and its slope in float64, the references of the bf16 linear layer's tests.
inline double gelu_tanh64(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}
inline double gelu_tanh_slope64(double v) {
  const double k = std::sqrt(2.0 / M_PI), th = std::tanh(k * (v + 0.044715 * v * v * v));
  return 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * v * v);
}

struct GeluForm {
  double tanh_share = 0, erf_share = 0;  // of outputs equal to bf16(gelu_tanh(x)), bf16(gelu_erf(x))
  bool pre_exact = true;                 // pre == x everywhere
};

// x: 4,096 bf16 values spread over [-6, 6]; y = linear_gelu(x, W = ones (8, 1), b = zeros (8)) on
// `device`, x requiring grad so that pre is kept (the epilogue with its auxiliary output).
inline GeluForm linear_gelu_form(Device device) {
  const std::int64_t N = 4096, F = 8;
  std::vector<float> xs(N);
  for (std::int64_t i = 0; i < N; ++i) xs[i] = round_to_bf16(-6.0f + 12.0f * static_cast<float>(i) / (N - 1));
  const TensorOptions on = TensorOptions().device(device);
  Tensor x = from_vector(xs, {N, 1}).to(device).to(kBFloat16).requires_grad_(true);
  const Tensor w = ones({F, 1}, on).to(kBFloat16), b = zeros({F}, on).to(kBFloat16);
  const Tensor y = ops::linear_gelu(x, w, b);
  const std::vector<float> out = y.to(kFloat32).to(kCPU).to_vector<float>();
  GeluForm form;
  for (std::int64_t i = 0; i < N; ++i) {
    const double v = xs[i];
    const double tanh_form = gelu_tanh64(v);
    const double erf_form = 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    for (std::int64_t f = 0; f < F; ++f) {
      form.tanh_share += out[i * F + f] == round_to_bf16(static_cast<float>(tanh_form));
      form.erf_share += out[i * F + f] == round_to_bf16(static_cast<float>(erf_form));
    }
  }
  form.tanh_share /= N * F, form.erf_share /= N * F;
  // pre is what the backward reads: its gradient through GELU at x is gelu'(x) exactly when pre is x.
  ops::sum(y.to(kFloat32)).backward();
  const std::vector<float> dx = x.grad().to(kFloat32).to(kCPU).to_vector<float>();
  for (std::int64_t i = 0; i < N; ++i) {
    const double slope = gelu_tanh_slope64(xs[i]);
    // dx = sum over the F columns of round(1 * gelu'(pre)) * 1, rounded: within 2^-7 of F gelu'(x)
    if (std::abs(dx[i] - F * slope) > std::ldexp(std::abs(F * slope), -7) + 1e-3) form.pre_exact = false;
  }
  return form;
}

}  // namespace brrr::test
