// tests/core/test_attention_op.cpp: ops::flash_attention on the CPU against the composed
// causal_attention_composed, its gradient by finite differences, and its errors. Chapter 15
// (flash attention). Read before: framework/src/ops_attention.cpp, kernels/cpu/attention.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "brrr/brrr.h"
#include "kernels/cpu/cpu_kernels.h"

using namespace brrr;

namespace {

Tensor input(Shape shape, std::uint64_t seed, DType dtype = kFloat64, double scale = 1.0) {
  Generator g(seed);
  Tensor t = randn(std::move(shape), g, dtype);
  NoGradGuard no_grad;
  return ops::mul(t, scale);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kFloat64).to_vector<double>(), y = b.to(kFloat64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::isnan(x[i] - y[i]) ? std::numeric_limits<double>::infinity() : std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

}  // namespace

TEST_CASE("flash_attention equals the composed causal_attention_composed in float64, forward and gradients") {
  // T = 1 (one key), odd T, T = 70, and head sizes 1, 16, 24, 64.
  for (const Shape& shape : std::vector<Shape>{{1, 1, 1, 4}, {2, 3, 17, 16}, {1, 2, 70, 24}, {2, 1, 5, 64}, {1, 1, 6, 1}}) {
    CAPTURE(shape_str(shape));
    const Tensor q = input(shape, 1, kFloat64, 1.5), k = input(shape, 2, kFloat64, 1.5), v = input(shape, 3);
    const Tensor w = input(shape, 4);  // loss = sum(out * w), so every output gets its own gradient
    Tensor grads[2][3];
    Tensor outs[2];
    for (int fused = 0; fused < 2; ++fused) {
      const Tensor qq = q.clone().requires_grad_(true), kk = k.clone().requires_grad_(true),
                   vv = v.clone().requires_grad_(true);
      outs[fused] = fused ? ops::flash_attention(qq, kk, vv) : ops::causal_attention_composed(qq, kk, vv);
      ops::sum(ops::mul(outs[fused], w)).backward();
      grads[fused][0] = qq.grad(), grads[fused][1] = kk.grad(), grads[fused][2] = vv.grad();
    }
    CHECK(outs[1].shape() == shape);
    CHECK(max_abs_diff(outs[1], outs[0]) < 1e-12);
    for (int i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(max_abs_diff(grads[1][i], grads[0][i]) < 1e-12);
    }
  }
}

TEST_CASE("attention_forward (CPU) saves lse = log-sum-exp of each row of masked, scaled scores") {
  const std::int64_t BH = 2, T = 9, hs = 5;
  const Tensor q = input({BH, T, hs}, 5), k = input({BH, T, hs}, 6), v = input({BH, T, hs}, 7);
  std::vector<double> out(BH * T * hs), lse(BH * T);
  const double scale = 0.3;
  kernels::cpu::attention_forward<double>(out.data(), lse.data(), q.data_ptr<double>(), k.data_ptr<double>(),
                                          v.data_ptr<double>(), {BH, T, hs, scale}, nullptr);
  const std::vector<double> qv = q.to_vector<double>(), kv = k.to_vector<double>();
  double worst = 0.0;
  for (std::int64_t b = 0; b < BH; ++b)
    for (std::int64_t i = 0; i < T; ++i) {
      double sum = 0.0;  // no max subtracted: the scores here are small
      for (std::int64_t j = 0; j <= i; ++j) {
        double s = 0.0;
        for (std::int64_t d = 0; d < hs; ++d) s += qv[(b * T + i) * hs + d] * kv[(b * T + j) * hs + d];
        sum += std::exp(scale * s);
      }
      worst = std::max(worst, std::abs(lse[b * T + i] - std::log(sum)));
    }
  CHECK(worst < 1e-12);
}

TEST_CASE("flash_attention: large scores do not overflow (the softmax is stable)") {
  const Tensor q = input({1, 1, 8, 4}, 8, kFloat32, 300.0), k = input({1, 1, 8, 4}, 9, kFloat32, 300.0),
               v = input({1, 1, 8, 4}, 10, kFloat32);
  const Tensor fused = ops::flash_attention(q, k, v), composed = ops::causal_attention_composed(q, k, v);
  CHECK(max_abs_diff(fused, composed) < 1e-4);
}

TEST_CASE("flash_attention in float32 is within float32 rounding of float64") {
  const Shape shape{2, 2, 33, 16};
  const Tensor q = input(shape, 11, kFloat64, 1.5), k = input(shape, 12, kFloat64, 1.5), v = input(shape, 13);
  const Tensor out64 = ops::flash_attention(q, k, v);
  const Tensor out32 = ops::flash_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32));
  CHECK(out32.dtype() == kFloat32);
  CHECK(max_abs_diff(out32, out64) < 1e-5);
}

TEST_CASE("gradcheck: flash_attention") {
  auto f = [](const std::vector<Tensor>& x) { return ops::flash_attention(x[0], x[1], x[2]); };
  for (const Shape& shape : std::vector<Shape>{{1, 2, 5, 3}, {2, 1, 7, 4}}) {
    CAPTURE(shape_str(shape));
    std::vector<Tensor> x = {input(shape, 14).requires_grad_(true), input(shape, 15).requires_grad_(true),
                             input(shape, 16).requires_grad_(true)};
    const GradcheckResult r = gradcheck(f, x);
    INFO(r.message);
    CHECK(r.ok);
  }
  // q, k, v as transposed views (as the GPT passes them): the op makes them contiguous.
  auto g = [](const std::vector<Tensor>& x) {
    return ops::flash_attention(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2));
  };
  std::vector<Tensor> x = {input({1, 6, 2, 3}, 17).requires_grad_(true), input({1, 6, 2, 3}, 18).requires_grad_(true),
                           input({1, 6, 2, 3}, 19).requires_grad_(true)};
  const GradcheckResult r = gradcheck(g, x);
  INFO(r.message);
  CHECK(r.ok);
}

TEST_CASE("flash_attention: errors name the op and the shapes") {
  const Tensor q = zeros({1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(ops::flash_attention(q, q, zeros({1, 2, 3, 5})),
                       "flash_attention: q, k, v must all be (B, H, T, hs), got (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 5)",
                       Error);
  CHECK_THROWS_WITH_AS(ops::flash_attention(zeros({2, 3, 4}), zeros({2, 3, 4}), zeros({2, 3, 4})),
                       "flash_attention: q, k, v must all be (B, H, T, hs), got (2, 3, 4), (2, 3, 4), (2, 3, 4)", Error);
  CHECK_THROWS_WITH_AS(ops::flash_attention(q, q, zeros({1, 2, 3, 4}, kFloat64)),
                       "flash_attention: dtypes differ: float32 (1, 2, 3, 4) and float64 (1, 2, 3, 4)", Error);
}
