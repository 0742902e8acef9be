// tests/core/test_fused_vs_composed.cpp: the fused ops (chapters 12, 13, 16) against the
// composed ones built from primitive ops, values and gradients through autograd, in float64
// on the CPU. Read before: framework/src/ops_fused.cpp.
//
// The CPU's fused kernels are the unfused kernels run back to back (kernels/cpu/register.cpp
// says so where they are registered), so comparing ops::bias_gelu with ops::gelu(x + bias)
// would compare a kernel with itself. The composed forms (gelu_composed, layer_norm_composed,
// cross_entropy_composed) share no kernel with them: mul, add, tanh, sum, log_softmax, and
// autograd deriving every backward. The kernel lab (lab/cases_*.cpp) checks the same kernels
// against references written from the formulas.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "brrr/brrr.h"

using namespace brrr;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.contiguous().to(kFloat64).to_vector<double>();
  const std::vector<double> y = b.contiguous().to(kFloat64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// f and g on copies of the same leaves: equal outputs, and equal gradients of sum(out * w)
// for a random w (an incoming gradient other than ones).
void check_same(const char* what, const Fn& fused, const Fn& composed, const std::vector<Tensor>& leaves) {
  CAPTURE(what);
  std::vector<Tensor> a, b;
  for (const Tensor& t : leaves) {
    a.push_back(t.clone().requires_grad_(true));
    b.push_back(t.clone().requires_grad_(true));
  }
  const Tensor out_a = fused(a), out_b = composed(b);
  CHECK(max_abs_diff(out_a, out_b) < 1e-12);
  Generator gen(99);
  const Tensor w = randn(out_a.shape(), gen, kFloat64);
  ops::sum(out_a * w).backward();
  ops::sum(out_b * w).backward();
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    CAPTURE(i);
    REQUIRE(a[i].grad().defined());
    CHECK(max_abs_diff(a[i].grad(), b[i].grad()) < 1e-12);
  }
}

}  // namespace

TEST_CASE("bias_gelu against gelu_composed(x + bias), through autograd") {
  Generator gen(1);
  check_same("bias_gelu", [](const auto& x) { return ops::bias_gelu(x[0], x[1]); },
             [](const auto& x) { return ops::gelu_composed(x[0] + x[1]); },
             {randn({3, 5, 37}, gen, kFloat64) * 2.0, randn({37}, gen, kFloat64)});
}

TEST_CASE("residual_layer_norm against layer_norm_composed(x + residual), through autograd") {
  Generator gen(2);
  const std::vector<Tensor> leaves = {randn({4, 3, 29}, gen, kFloat64) + 0.5, randn({4, 3, 29}, gen, kFloat64),
                                      randn({29}, gen, kFloat64), randn({29}, gen, kFloat64)};
  // The gradient reaches the sum both directly and through the normalized output.
  check_same("residual_layer_norm",
             [](const auto& x) {
               const auto [sum, out] = ops::residual_layer_norm(x[0], x[1], x[2], x[3]);
               return out * 2.0 + sum * sum;
             },
             [](const auto& x) {
               const Tensor sum = x[0] + x[1];
               return ops::layer_norm_composed(sum, x[2], x[3]) * 2.0 + sum * sum;
             },
             leaves);
}

TEST_CASE("cross_entropy_fused against cross_entropy_composed, through autograd") {
  Generator gen(3);
  const Tensor targets = from_vector(std::vector<std::int64_t>{0, 10, 3, 5, 2, 7, 10}, {7}, kInt64);
  check_same("cross_entropy_fused", [&](const auto& x) { return ops::cross_entropy_fused(x[0], targets); },
             [&](const auto& x) { return ops::cross_entropy_composed(x[0], targets); },
             {randn({7, 11}, gen, kFloat64) * 3.0});
}
