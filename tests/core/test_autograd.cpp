// tests/core/test_autograd.cpp: gradcheck on every differentiable op, graph mechanics (chapter 03).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "brrr/brrr.h"

using namespace brrr;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

namespace {
Tensor param(Shape shape, std::uint64_t seed, double scale = 1.0, double shift = 0.0) {
  Generator g(seed);
  Tensor t = randn(std::move(shape), g, kFloat64);
  {
    NoGradGuard no_grad;
    t = ops::add(ops::mul(t, scale), shift);
  }
  return t.requires_grad_(true);
}

// max |a - b|: both signs count (max(a - b) alone misses b above a).
double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::isnan(x[i] - y[i]) ? INFINITY : std::fabs(x[i] - y[i]));
  return worst;
}

// erf of each element of a float64 tensor, by the C library (no op of brrr's computes erf).
Tensor erf_of(const Tensor& x) {
  std::vector<double> v = x.to_vector<double>();
  for (double& e : v) e = std::erf(e);
  return from_vector(v, x.shape(), kFloat64);
}

void check_grad(const char* name, const Fn& f, const std::vector<Tensor>& inputs) {
  INFO("op: ", std::string(name));
  const GradcheckResult r = gradcheck(f, inputs);
  INFO(r.message);
  CHECK(r.ok);
}
}  // namespace

TEST_CASE("gradcheck: unary ops") {
  check_grad("neg", [](auto& x) { return ops::neg(x[0]); }, {param({3, 4}, 1)});
  check_grad("exp", [](auto& x) { return ops::exp(x[0]); }, {param({3, 4}, 2)});
  check_grad("log", [](auto& x) { return ops::log(x[0]); }, {param({3, 4}, 3, 0.2, 2.0)});
  check_grad("sqrt", [](auto& x) { return ops::sqrt(x[0]); }, {param({3, 4}, 4, 0.2, 2.0)});
  check_grad("tanh", [](auto& x) { return ops::tanh(x[0]); }, {param({3, 4}, 5)});
  check_grad("relu", [](auto& x) { return ops::relu(x[0]); }, {param({3, 4}, 6)});
  check_grad("sigmoid", [](auto& x) { return ops::sigmoid(x[0]); }, {param({3, 4}, 7)});
  check_grad("pow 3", [](auto& x) { return ops::pow(x[0], 3.0); }, {param({3, 4}, 8)});
  check_grad("pow -0.5", [](auto& x) { return ops::pow(x[0], -0.5); }, {param({3, 4}, 9, 0.1, 2.0)});
}

TEST_CASE("gradcheck: binary ops with broadcasting") {
  check_grad("add", [](auto& x) { return x[0] + x[1]; }, {param({2, 3, 4}, 1), param({3, 1}, 2)});
  check_grad("sub", [](auto& x) { return x[0] - x[1]; }, {param({4}, 3), param({2, 3, 4}, 4)});
  check_grad("mul", [](auto& x) { return x[0] * x[1]; }, {param({2, 1, 4}, 5), param({3, 1}, 6)});
  check_grad("div", [](auto& x) { return x[0] / x[1]; }, {param({2, 3}, 7), param({2, 1}, 8, 0.1, 2.0)});
  check_grad("scalar ops", [](auto& x) { return (2.0 - x[0]) * 3.0 / 1.5 + 1.0; }, {param({5}, 9)});
  check_grad("same tensor twice", [](auto& x) { return x[0] * x[0] + x[0]; }, {param({3, 3}, 10)});
}

TEST_CASE("gradcheck: reductions") {
  check_grad("sum all", [](auto& x) { return ops::sum(x[0]); }, {param({2, 3, 4}, 1)});
  check_grad("sum dims", [](auto& x) { return ops::sum(x[0], {0, 2}); }, {param({2, 3, 4}, 2)});
  check_grad("sum keepdim", [](auto& x) { return ops::sum(x[0], {1}, true); }, {param({2, 3, 4}, 3)});
  check_grad("mean", [](auto& x) { return ops::mean(x[0], {-1}); }, {param({2, 3, 4}, 4)});
  check_grad("var", [](auto& x) { return ops::var(x[0], {1}); }, {param({2, 5, 3}, 5)});
  check_grad("max dim", [](auto& x) { return ops::max(x[0], 1).first; }, {param({3, 5, 2}, 6)});
  check_grad("max all", [](auto& x) { return ops::max(x[0]); }, {param({3, 5}, 7)});
}

TEST_CASE("gradcheck: matmul and linear") {
  check_grad("matmul 2-D", [](auto& x) { return ops::matmul(x[0], x[1]); }, {param({3, 4}, 1), param({4, 5}, 2)});
  check_grad("matmul batched, broadcast", [](auto& x) { return ops::matmul(x[0], x[1]); },
             {param({2, 1, 3, 4}, 3), param({3, 4, 2}, 4)});
  check_grad("matmul transposed views", [](auto& x) { return ops::matmul(x[0].t(), x[1].t()); },
             {param({4, 3}, 5), param({5, 4}, 6)});
  check_grad("matmul vector", [](auto& x) { return ops::matmul(x[0], x[1]); }, {param({4}, 7), param({4, 3}, 8)});
  check_grad("linear", [](auto& x) { return ops::linear(x[0], x[1], x[2]); },
             {param({2, 3, 4}, 9), param({5, 4}, 10), param({5}, 11)});
  check_grad("linear no bias", [](auto& x) { return ops::linear(x[0], x[1]); }, {param({3, 4}, 12), param({2, 4}, 13)});
}

TEST_CASE("gradcheck: views") {
  check_grad("reshape", [](auto& x) { return x[0].reshape({6, 2}) * x[1]; }, {param({3, 4}, 1), param({6, 2}, 2)});
  check_grad("transpose + contiguous", [](auto& x) { return x[0].transpose(0, 2).contiguous() * 2.0; }, {param({2, 3, 4}, 3)});
  check_grad("permute", [](auto& x) { return x[0].permute({2, 0, 1}) * x[1]; }, {param({2, 3, 4}, 4), param({4, 2, 3}, 5)});
  check_grad("narrow", [](auto& x) { return x[0].narrow(1, 1, 2) * 3.0; }, {param({2, 4}, 6)});
  check_grad("select", [](auto& x) { return x[0].select(0, 1); }, {param({3, 4}, 7)});
  check_grad("expand", [](auto& x) { return x[0].expand({3, 4}) * x[1]; }, {param({3, 1}, 8), param({3, 4}, 9)});
  check_grad("squeeze/unsqueeze", [](auto& x) { return x[0].unsqueeze(1).squeeze(1) * 2.0; }, {param({3, 4}, 10)});
  check_grad("split + cat", [](auto& x) {
    auto parts = x[0].split(2, 1);
    return ops::cat({parts[1] * 2.0, parts[0]}, 1);
  }, {param({3, 4}, 11)});
  check_grad("stack", [](auto& x) { return ops::stack({x[0], x[1]}, 1); }, {param({3, 4}, 12), param({3, 4}, 13)});
}

// ---------------------------------------------------------------------------------------------
// gradcheck itself must fail on a wrong backward: otherwise every check above proves nothing.
// The ops below are right in the forward and wrong, in one way each, in the backward.

namespace {
// out = a * b^2, its backward made by `backward` (given g, a, b) instead of the right one.
Tensor planted(const Tensor& a, const Tensor& b,
               const std::function<autograd::TensorList(const Tensor&, const Tensor&, const Tensor&)>& backward) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = a * b * b;
  }
  if (autograd::needs_grad({&a, &b}))
    autograd::record("planted", {a, b}, out, [a_ = autograd::saved(a), b_ = autograd::saved(b), backward](const Tensor& g) {
      return backward(g, a_, b_);
    });
  return out;
}

GradcheckResult check_planted(const std::function<autograd::TensorList(const Tensor&, const Tensor&, const Tensor&)>& backward) {
  return gradcheck([&](const std::vector<Tensor>& x) { return planted(x[0], x[1], backward); },
                   {param({3, 4}, 30), param({3, 4}, 31)});
}
}  // namespace

TEST_CASE("gradcheck reports a planted wrong backward, naming the input and the element") {
  // The right backward passes: d(a b^2)/da = b^2, d(a b^2)/db = 2 a b.
  const GradcheckResult right = check_planted([](const Tensor& g, const Tensor& a, const Tensor& b) {
    return autograd::TensorList{g * b * b, g * a * b * 2.0};
  });
  INFO(right.message);
  CHECK(right.ok);
  CHECK(right.max_abs_error < 1e-8);

  // The power rule's factor 2 forgotten in b's gradient.
  const GradcheckResult no_factor = check_planted([](const Tensor& g, const Tensor& a, const Tensor& b) {
    return autograd::TensorList{g * b * b, g * a * b};
  });
  CHECK_FALSE(no_factor.ok);
  CHECK(no_factor.message.find("input 1 (3, 4) element 0: autograd ") == 0);
  CHECK(no_factor.message.find(", finite differences ") != std::string::npos);

  // One element wrong, the last: every element is compared, not a sample.
  const GradcheckResult one_element = check_planted([](const Tensor& g, const Tensor& a, const Tensor& b) {
    Tensor ga = (g * b * b).contiguous().clone();
    ga.data_ptr<double>()[11] += 1e-3;
    return autograd::TensorList{ga, g * a * b * 2.0};
  });
  CHECK_FALSE(one_element.ok);
  CHECK(one_element.message.find("input 0 (3, 4) element 11: ") == 0);

  // a's gradient 0.1% too large everywhere: above gradcheck's rtol of 1e-4.
  const GradcheckResult slightly = check_planted([](const Tensor& g, const Tensor& a, const Tensor& b) {
    return autograd::TensorList{g * b * b * 1.001, g * a * b * 2.0};
  });
  CHECK_FALSE(slightly.ok);
  CHECK(slightly.message.find("input 0 (3, 4)") == 0);
  CHECK(slightly.max_rel_error == doctest::Approx(1e-3).epsilon(0.01));

  // No gradient for b at all: autograd's zero against the true one.
  const GradcheckResult missing = check_planted([](const Tensor& g, const Tensor&, const Tensor& b) {
    return autograd::TensorList{g * b * b, Tensor()};
  });
  CHECK_FALSE(missing.ok);
  CHECK(missing.message.find("input 1 (3, 4) element 0: autograd 0,") == 0);
}

TEST_CASE("gradients flow through dtype conversion") {
  Tensor x = ones({3}, TensorOptions().dtype(kFloat64).requires_grad(true));
  (x.to(kFloat32) * 3.0).sum().backward();
  CHECK(x.grad().dtype() == kFloat64);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3, 3});
}

TEST_CASE("gradcheck: neural-network ops, fused and composed") {
  Tensor idx = from_vector(std::vector<std::int64_t>{0, 3, 3, 1, 4}, {5}, kInt64);
  Tensor targets = from_vector(std::vector<std::int64_t>{2, 0, 4, 1}, {4}, kInt64);
  check_grad("embedding", [&](auto& x) { return ops::embedding(x[0], idx.reshape({5, 1})); }, {param({6, 3}, 1)});
  check_grad("softmax", [](auto& x) { return ops::softmax(x[0], -1); }, {param({3, 5}, 2)});
  check_grad("softmax dim 0", [](auto& x) { return ops::softmax(x[0], 0); }, {param({3, 5}, 3)});
  check_grad("log_softmax", [](auto& x) { return ops::log_softmax(x[0], 1); }, {param({3, 5}, 4)});
  check_grad("cross_entropy", [&](auto& x) { return ops::cross_entropy(x[0], targets); }, {param({4, 5}, 5)});
  check_grad("cross_entropy ignore_index", [&](auto& x) {
    return ops::cross_entropy(x[0], from_vector(std::vector<std::int64_t>{2, -100, 4, 1}, {4}, kInt64));
  }, {param({4, 5}, 6)});
  check_grad("cross_entropy_composed", [&](auto& x) { return ops::cross_entropy_composed(x[0], targets); }, {param({4, 5}, 7)});
  check_grad("gelu", [](auto& x) { return ops::gelu(x[0]); }, {param({4, 5}, 8, 2.0)});
  check_grad("gelu_composed", [](auto& x) { return ops::gelu_composed(x[0]); }, {param({4, 5}, 9, 2.0)});
  check_grad("gelu_erf", [](auto& x) { return ops::gelu_erf(x[0]); }, {param({4, 5}, 21, 2.0)});
  check_grad("layer_norm", [](auto& x) { return ops::layer_norm(x[0], x[1], x[2]); },
             {param({2, 3, 6}, 10), param({6}, 11), param({6}, 12)});
  check_grad("layer_norm_composed", [](auto& x) { return ops::layer_norm_composed(x[0], x[1], x[2]); },
             {param({3, 6}, 13), param({6}, 14), param({6}, 15)});
  check_grad("causal_attention_composed", [](auto& x) { return ops::causal_attention_composed(x[0], x[1], x[2]); },
             {param({2, 2, 5, 3}, 16), param({2, 2, 5, 3}, 17), param({2, 2, 5, 3}, 18)});
  check_grad("masked_fill", [](auto& x) {
    return ops::masked_fill(x[0], from_vector(std::vector<double>{1, 0, 0, 1}, {2, 2}, kFloat64), 0.0);
  }, {param({3, 2, 2}, 19)});
  Generator g(3);
  Tensor mask_probe = param({50}, 20);
  check_grad("dropout (same mask each call)", [](auto& x) {
    Generator fixed(99);
    return ops::dropout(x[0], 0.3, fixed);
  }, {mask_probe});
}

TEST_CASE("fused and composed forms agree") {
  Generator g(1);
  Tensor x = randn({4, 7, 33}, g, kFloat64), w = randn({33}, g, kFloat64), b = randn({33}, g, kFloat64);
  CHECK(max_abs_diff(ops::layer_norm(x, w, b), ops::layer_norm_composed(x, w, b)) < 1e-12);
  CHECK(max_abs_diff(ops::gelu(x), ops::gelu_composed(x)) < 1e-12);
  Tensor logits = randn({6, 11}, g, kFloat64);
  Tensor t = from_vector(std::vector<std::int64_t>{0, 10, 5, 5, 2, 7}, {6}, kInt64);
  CHECK(ops::cross_entropy(logits, t).item() == doctest::Approx(ops::cross_entropy_composed(logits, t).item()).epsilon(1e-12));
  // float32 fused GELU (vectorized exp) stays within float rounding of the float64 one
  Tensor xf = x.to(kFloat32);
  CHECK(max_abs_diff(ops::gelu(xf).to(kFloat64), ops::gelu(x)) < 2e-6);
  // The exact GELU against PyTorch's formula written out in float64 (erf from the C library),
  // and its float32 kernel (a fitted erfc) within float rounding of it.
  const Tensor exact = ops::mul(ops::mul(x, 0.5), ops::add(erf_of(ops::mul(x, 1.0 / std::sqrt(2.0))), 1.0));
  CHECK(max_abs_diff(ops::gelu_erf(x), exact) < 1e-12);
  CHECK(max_abs_diff(ops::gelu_erf(xf).to(kFloat64), exact) < 2e-6);
  // It is not the tanh form: they differ by up to 4.7e-4 (at x = -2.70).
  CHECK(max_abs_diff(ops::gelu_erf(x), ops::gelu(x)) > 1e-4);
}

TEST_CASE("gradients accumulate across backward calls and zero_grad clears them") {
  Tensor w = ones({3}, TensorOptions().requires_grad(true));
  (w * 2.0).sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{2, 2, 2});
  (w * 3.0).sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{5, 5, 5});
  w.set_grad(Tensor());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("a gradient used by two inputs is not shared between their .grad") {
  Tensor a = ones({2}, TensorOptions().requires_grad(true));
  Tensor b = ones({2}, TensorOptions().requires_grad(true));
  (a + b).sum().backward();
  {
    NoGradGuard no_grad;
    a.grad().add_(ones({2}));
  }
  CHECK(b.grad().to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("grad_ready: once per leaf, when its gradient is final, the last-used leaves first") {
  // w is used twice, at the start and at the end (a tied embedding); b only at the end; a only
  // at the start. loss = sum((w * a) * b + w).
  Tensor w = param({3}, 1), a = param({3}, 2), b = param({3}, 3);
  std::vector<std::string> order;
  std::vector<Tensor> grad_when_ready;
  int nodes = 0;
  autograd::BackwardHooks hooks;
  hooks.grad_ready = [&](const Tensor& leaf) {
    order.push_back(leaf.impl() == w.impl() ? "w" : leaf.impl() == a.impl() ? "a" : leaf.impl() == b.impl() ? "b" : "?");
    grad_when_ready.push_back(leaf.grad().clone());
  };
  hooks.node_done = [&] { ++nodes; };
  {
    const autograd::BackwardHooksGuard guard(hooks);
    ops::sum(ops::add(ops::mul(ops::mul(w, a), b), w)).backward();
  }
  REQUIRE(order.size() == 3);
  CHECK(order.back() != "b");  // b's gradient is final before the first multiplication runs
  CHECK(nodes == 4);           // sum, add, mul, mul
  for (std::size_t i = 0; i < order.size(); ++i) {
    CAPTURE(order[i]);
    const Tensor& expected = order[i] == "w" ? w.grad() : order[i] == "a" ? a.grad() : b.grad();
    CHECK(max_abs_diff(grad_when_ready[i], expected) == 0.0);  // nothing was added after the hook
  }
  // Out of the guard's scope, no hook.
  order.clear();
  ops::sum(ops::mul(w, a)).backward();
  CHECK(order.empty());
}

TEST_CASE("NoGradGuard, detach and requires_grad") {
  Tensor w = ones({2}, TensorOptions().requires_grad(true));
  {
    NoGradGuard no_grad;
    Tensor y = w * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
  }
  Tensor y = w * 2.0;
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.grad_fn()->name == "mul");
  Tensor d = y.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == y.storage());
  CHECK_THROWS_WITH_AS(y.requires_grad_(false), doctest::Contains("only leaf tensors"), Error);
  CHECK_THROWS_WITH_AS(zeros({2}, kInt64).requires_grad_(), doctest::Contains("only floating-point"), Error);
}

TEST_CASE("backward errors: non-scalar, no grad, freed graph") {
  Tensor w = ones({2, 2}, TensorOptions().requires_grad(true));
  Tensor y = w * 2.0;
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("only for a tensor with one element, got shape (2, 2)"), Error);
  CHECK_THROWS_WITH_AS(ones({1}).backward(), doctest::Contains("does not require grad"), Error);
  Tensor loss = (w * w).sum();
  loss.backward();
  CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("already freed"), Error);
  Tensor loss2 = (w * w).sum();
  loss2.backward(Tensor(), true);
  loss2.backward();  // retained once, so a second pass works
  y.backward(ones({2, 2}));  // an explicit gradient for a non-scalar
  CHECK_THROWS_WITH_AS(y.backward(ones({3})), doctest::Contains("does not match the tensor's shape (2, 2)"), Error);
}

TEST_CASE("in-place changes to a tensor that requires grad are refused while recording") {
  Tensor w = ones({2}, TensorOptions().requires_grad(true));
  CHECK_THROWS_WITH_AS(w.fill_(3), doctest::Contains("cannot be modified in place"), Error);
  NoGradGuard no_grad;
  w.fill_(3);
  CHECK(w.at<float>({0}) == 3.0f);
}

TEST_CASE("a deep graph does not overflow the stack") {
  Tensor w = ones({1}, TensorOptions().requires_grad(true));
  Tensor y = w;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  y.sum().backward();
  CHECK(w.grad().item() == 1.0);
}
