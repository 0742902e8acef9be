// tests/core/test_conv.cpp: conv2d, conv1d, max_pool2d, avg_pool2d (chapter 09, convolutions):
// gradcheck in float64 for every option, hand-computed values, the "im2col" variant against the
// "direct" reference at ragged shapes, bitwise reproducibility over thread counts, the errors,
// and the nn modules' parameter names and shapes.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>

#include "brrr/brrr.h"

using namespace brrr;
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

namespace {
Tensor param(Shape shape, std::uint64_t seed, DType dtype = kFloat64) {
  Generator g(seed);
  return randn(std::move(shape), g, dtype).requires_grad_(true);
}

void check_grad(const std::string& name, const Fn& f, const std::vector<Tensor>& inputs) {
  INFO("case: ", name);
  const GradcheckResult r = gradcheck(f, inputs);
  INFO(r.message);
  CHECK(r.ok);
}

// One convolution's options, and shapes that exercise them: odd sizes, padding wider than
// the kernel's half-width, stride > 1, dilation, groups, depthwise.
struct ConvCase {
  const char* name;
  Shape x, w;
  ops::Size2 stride, padding, dilation;
  std::int64_t groups;
  bool bias;
};
const ConvCase kCases[] = {
    {"plain 3x3", {2, 3, 5, 6}, {4, 3, 3, 3}, 1, 0, 1, 1, true},
    {"padding 1", {2, 2, 5, 5}, {3, 2, 3, 3}, 1, 1, 1, 1, true},
    {"padding 3 > half the 3x3 kernel", {1, 2, 4, 5}, {2, 2, 3, 3}, 1, 3, 1, 1, true},
    {"stride 2, odd size", {2, 2, 7, 5}, {3, 2, 3, 3}, 2, 1, 1, 1, true},
    {"stride (3, 2), padding (2, 0)", {1, 3, 8, 7}, {2, 3, 2, 3}, {3, 2}, {2, 0}, 1, 1, false},
    {"dilation 2", {2, 2, 7, 7}, {2, 2, 3, 3}, 1, 2, 2, 1, true},
    {"dilation (1, 3), stride 2", {1, 2, 6, 9}, {3, 2, 2, 2}, 2, 1, {1, 3}, 1, true},
    {"groups 2", {2, 4, 5, 5}, {6, 2, 3, 3}, 1, 1, 1, 2, true},
    {"depthwise (groups = channels)", {2, 3, 6, 5}, {3, 1, 3, 3}, 2, 1, 1, 3, true},
    {"depthwise with multiplier 2", {1, 3, 5, 5}, {6, 1, 3, 3}, 1, 2, 1, 3, false},
    {"1x1", {3, 5, 3, 4}, {2, 5, 1, 1}, 1, 0, 1, 1, true},
};

Tensor run_conv(const ConvCase& c, const std::vector<Tensor>& in) {
  return ops::conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.stride, c.padding, c.dilation, c.groups);
}

// Runs f with op's variant selected, and puts the defaults back even if f throws.
template <class F>
auto with_variant(const char* variant, F f) {
  struct Reset {
    ~Reset() { kernels::reset_selection(); }
  } reset;
  for (const char* op : {"conv2d_forward", "conv2d_backward_input", "conv2d_backward_weight"})
    kernels::select(op, variant, DeviceType::CPU);
  return f();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  return std::isnan(worst) ? INFINITY : worst;
}
}  // namespace

TEST_CASE("gradcheck: conv2d with every option, both variants") {
  for (const char* variant : {"im2col", "direct"})
    with_variant(variant, [&] {
      std::uint64_t seed = 1;
      for (const ConvCase& c : kCases) {
        std::vector<Tensor> in{param(c.x, seed++), param(c.w, seed++), param({c.w[0]}, seed++)};
        check_grad(std::string(variant) + ": " + c.name, [&](const std::vector<Tensor>& t) { return run_conv(c, t); },
                   in);
      }
      return 0;
    });
}

TEST_CASE("gradcheck: conv1d, max_pool2d, avg_pool2d") {
  check_grad("conv1d stride 2 padding 2 dilation 2", [](const std::vector<Tensor>& t) {
    return ops::conv1d(t[0], t[1], t[2], 2, 2, 2);
  }, {param({2, 3, 11}, 1), param({4, 3, 3}, 2), param({4}, 3)});
  check_grad("conv1d depthwise", [](const std::vector<Tensor>& t) {
    return ops::conv1d(t[0], t[1], Tensor(), 1, 1, 1, 4);
  }, {param({2, 4, 7}, 4), param({4, 1, 3}, 5)});
  // Random inputs have distinct values, so each window's maximum is unique and the max is
  // differentiable there (finite differences of 1e-6 cannot move it).
  check_grad("max_pool2d 2x2", [](const std::vector<Tensor>& t) { return ops::max_pool2d(t[0], 2); },
             {param({2, 3, 6, 7}, 6)});
  check_grad("max_pool2d 3x3 stride 2 padding 1 (overlapping)", [](const std::vector<Tensor>& t) {
    return ops::max_pool2d(t[0], 3, 2, 1);
  }, {param({2, 2, 7, 6}, 7)});
  check_grad("max_pool2d (3, 2) stride (1, 2)", [](const std::vector<Tensor>& t) {
    return ops::max_pool2d(t[0], {3, 2}, {1, 2});
  }, {param({1, 2, 5, 5}, 8)});
  check_grad("avg_pool2d 2x2", [](const std::vector<Tensor>& t) { return ops::avg_pool2d(t[0], 2); },
             {param({2, 3, 5, 7}, 9)});
  check_grad("avg_pool2d 3x3 stride 2 padding 1", [](const std::vector<Tensor>& t) {
    return ops::avg_pool2d(t[0], 3, 2, 1);
  }, {param({2, 2, 7, 6}, 10)});
}

TEST_CASE("conv2d and pooling give the hand-computed values") {
  // x (1, 1, 3, 3) = 1..9; a 2x2 kernel of ones sums each window; padding 1 adds a ring of 0.
  const Tensor x = tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f, 9.f}).view({1, 1, 3, 3});
  const Tensor ones4 = ones({1, 1, 2, 2});
  CHECK(ops::conv2d(x, ones4).to_vector<float>() == std::vector<float>{12, 16, 24, 28});
  CHECK(ops::conv2d(x, ones4, tensor({0.5f}), 2, 1).to_vector<float>() == std::vector<float>{1.5, 5.5, 11.5, 28.5});
  // A 3x3 dilation 2 kernel over a 5x5 image touches its corners and centre lines only.
  const Tensor y = arange(25, kFloat32).view({1, 1, 5, 5});
  CHECK(ops::conv2d(y, ones({1, 1, 2, 2}), Tensor(), 1, 0, 4).to_vector<float>() ==
        std::vector<float>{0 + 4 + 20 + 24});
  // Pooling: max with its indices (h * W + w within the plane), and the mean.
  auto [m, idx] = ops::max_pool2d_with_indices(x, 2, 1);
  CHECK(m.to_vector<float>() == std::vector<float>{5, 6, 8, 9});
  CHECK(idx.to_vector<std::int64_t>() == std::vector<std::int64_t>{4, 5, 7, 8});
  CHECK(ops::avg_pool2d(x, 2, 1).to_vector<float>() == std::vector<float>{3, 4, 6, 7});
  // Padding counts as 0 in the mean (divisor 4 still) and never wins a max.
  CHECK(ops::avg_pool2d(x, 2, 2, 1).to_vector<float>() == std::vector<float>{0.25, 1.25, 2.75, 7});
  const Tensor neg = ops::neg(x);
  CHECK(ops::max_pool2d(neg, 2, 2, 1).to_vector<float>() == std::vector<float>{-1, -2, -4, -5});
}

TEST_CASE("conv2d: im2col matches the direct reference at ragged float32 shapes, forward and backward") {
  std::uint64_t seed = 100;
  for (const ConvCase& c : kCases) {
    INFO("case: ", c.name);
    const Tensor x = param(c.x, seed++, kFloat32), w = param(c.w, seed++, kFloat32), b = param({c.w[0]}, seed++, kFloat32);
    auto run = [&] {
      x.set_grad(Tensor()), w.set_grad(Tensor()), b.set_grad(Tensor());
      Tensor out = run_conv(c, {x, w, b});
      Generator g(7);
      ops::sum(ops::mul(out, randn(out.shape(), g))).backward();
      return std::vector<Tensor>{out, x.grad(), w.grad(), c.bias ? b.grad() : out};
    };
    const auto ref = with_variant("direct", run), got = with_variant("im2col", run);
    // Each output sums at most C_in kH kW = 27 products of N(0, 1) numbers: float32 rounding
    // stays below 1e-5 of that; a wrong tap or group would be off by about 1.
    for (std::size_t i = 0; i < ref.size(); ++i) CHECK(max_abs_diff(ref[i], got[i]) < 1e-4);
  }
}

TEST_CASE("conv2d and pooling are bitwise identical with 1 and 2 threads") {
  const int before = get_num_threads();
  auto run = [](int threads) {
    set_num_threads(threads);
    // Large enough that the GEMM and the copies split over threads (and im2col groups images).
    const Tensor x = param({6, 16, 23, 21}, 1, kFloat32), w = param({24, 16, 3, 3}, 2, kFloat32),
                 b = param({24}, 3, kFloat32);
    Tensor out = ops::max_pool2d(ops::relu(ops::conv2d(x, w, b, 1, 1)), 3, 2, 1);
    out = ops::avg_pool2d(out, 2);
    Generator g(4);
    ops::sum(ops::mul(out, randn(out.shape(), g))).backward();
    return std::vector<std::vector<float>>{out.to_vector<float>(), x.grad().to_vector<float>(),
                                           w.grad().to_vector<float>(), b.grad().to_vector<float>()};
  };
  const auto one = run(1), two = run(2);
  set_num_threads(before);
  for (std::size_t i = 0; i < one.size(); ++i) CHECK(one[i] == two[i]);
}

TEST_CASE("conv2d and pooling errors name the op, the shapes and the rule") {
  const Tensor x = zeros({2, 3, 8, 8});
  CHECK(error_of([&] { ops::conv2d(x, zeros({5, 4, 3, 3})); }).find("conv2d: input has 3 channels, weight expects 4") !=
        std::string::npos);
  CHECK(error_of([&] { ops::conv2d(zeros({2, 4, 8, 8}), zeros({5, 1, 3, 3}), Tensor(), 1, 0, 1, 2); })
            .find("conv2d: input has 4 channels, weight expects 2 (1 per group x 2 groups)") != std::string::npos);
  CHECK(error_of([&] { ops::conv2d(zeros({2, 4, 8, 8}), zeros({5, 2, 3, 3}), Tensor(), 1, 0, 1, 2); })
            .find("conv2d: 5 output channels") != std::string::npos);
  CHECK(error_of([&] { ops::conv2d(zeros({3, 8, 8}), zeros({5, 3, 3, 3})); })
            .find("conv2d: input must be (N, C_in, H, W), got (3, 8, 8)") != std::string::npos);
  CHECK(error_of([&] { ops::conv2d(x, zeros({5, 3, 3, 3}), zeros({4})); }).find("conv2d: bias (4,) does not match weight (5, 3, 3, 3) (expected (5,))") !=
        std::string::npos);
  CHECK(error_of([&] { ops::conv2d(x, zeros({5, 3, 3, 3}), Tensor(), 0); }).find("conv2d: stride must be at least 1") !=
        std::string::npos);
  CHECK(error_of([&] { ops::conv2d(zeros({1, 3, 2, 2}), zeros({5, 3, 3, 3})); })
            .find("conv2d: input height 2 padded by 0 on each side is 2, smaller than the kernel's span 3") !=
        std::string::npos);
  CHECK(error_of([&] { ops::conv2d(x, zeros({5, 3, 3, 3}, kFloat64)); }).find("conv2d: dtypes differ") !=
        std::string::npos);
  CHECK(error_of([&] { ops::conv1d(zeros({2, 3, 8}), zeros({5, 2, 3})); })
            .find("conv1d: input has 3 channels, weight expects 2") != std::string::npos);
  CHECK(error_of([&] { ops::max_pool2d(x, 3, 1, 2); })
            .find("max_pool2d: padding (2, 2) must be at most half the kernel (3, 3)") != std::string::npos);
  CHECK(error_of([&] { ops::avg_pool2d(zeros({8, 8}), 2); }).find("avg_pool2d: input must be (N, C, H, W)") !=
        std::string::npos);
  CHECK(error_of([&] { ops::max_pool2d(x, 9); }).find("max_pool2d: input height 8") != std::string::npos);
}

TEST_CASE("nn::Conv2d, Conv1d, pooling and Flatten: PyTorch's names, shapes and init bounds") {
  Generator g(3);
  nn::Conv2d conv(4, 6, {3, 5}, g, nn::ConvOptions().padding({1, 2}).groups(2));
  const auto params = conv.named_parameters();
  REQUIRE(params.size() == 2);
  CHECK(params[0].first == "weight");
  CHECK(params[0].second.shape() == Shape{6, 2, 3, 5});
  CHECK(params[1].first == "bias");
  CHECK(params[1].second.shape() == Shape{6});
  const double bound = 1.0 / std::sqrt(2.0 * 3 * 5);  // fan_in = C_in / groups * kH * kW
  for (float v : conv.weight.to_vector<float>()) CHECK(std::fabs(v) <= bound);
  CHECK(conv(zeros({2, 4, 7, 9})).shape() == Shape{2, 6, 7, 9});
  nn::Conv1d conv1(3, 2, 3, g, nn::ConvOptions().stride(2).bias(false));
  CHECK(conv1.named_parameters().size() == 1);
  CHECK(conv1.weight.shape() == Shape{2, 3, 3});
  CHECK(conv1(zeros({1, 3, 9})).shape() == Shape{1, 2, 4});
  nn::Sequential net{std::make_shared<nn::Conv2d>(1, 2, 3, g), std::make_shared<nn::MaxPool2d>(2),
                     std::make_shared<nn::AvgPool2d>(1), std::make_shared<nn::Flatten>()};
  CHECK(net.named_parameters()[0].first == "0.weight");
  CHECK(net(zeros({5, 1, 8, 8})).shape() == Shape{5, 2 * 3 * 3});
}
