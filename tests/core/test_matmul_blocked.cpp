// tests/core/test_matmul_blocked.cpp: the "blocked" float32 matmul (kernels/cpu/gemm_blocked.cpp)
// against the naive reference, on ragged sizes, all transpose layouts, accumulation, batches
// with a broadcast operand, and bitwise reproducibility over thread counts (chapter 04).
// Skipped (test::skip: ctest says Skipped) when the CPU build has no AVX-512, for the variant is
// not registered then; scripts/test.sh requires them to run on a machine with AVX-512.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>

#include "brrr/brrr.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

bool blocked_registered() {
  for (const auto& v : kernels::variants("matmul"))
    if (v.variant == "blocked" && v.device.type == DeviceType::CPU && v.dtype == kFloat32) return true;
  return false;
}

void skip_without_avx512() { test::skip("this build has no AVX-512, so no \"blocked\" matmul variant"); }

// Runs f with the named matmul variant selected, and puts the defaults back even if f throws.
Tensor with_variant(const char* variant, const std::function<Tensor()>& f) {
  struct Reset {
    ~Reset() { kernels::reset_selection(); }
  } reset;
  kernels::select("matmul", variant);
  return f();
}

// max |ref - got| / K. Each of the K products is about 1 in size for randn inputs and each
// float32 FMA rounds by at most 6e-8 of the running sum, so 1e-6 * K bounds blocked's error
// with room to spare (measured: 4x below it); the naive kernel sums in double. A wrong tile
// or a dropped k would be off by about 1.
double scaled_error(const Tensor& ref, const Tensor& got, std::int64_t K) {
  REQUIRE(ref.shape() == got.shape());
  const std::vector<float> r = ref.to_vector<float>(), g = got.to_vector<float>();
  double worst = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(r[i]) - g[i]));
  return worst / static_cast<double>(std::max<std::int64_t>(K, 1));
}

void check_against_naive(const std::function<Tensor()>& f, std::int64_t K) {
  const Tensor ref = with_variant("naive", f), got = with_variant("blocked", f);
  CHECK(scaled_error(ref, got, K) < 1e-6);
}

}  // namespace

TEST_CASE("blocked matmul agrees with naive on ragged sizes") {
  if (!blocked_registered()) return skip_without_avx512();
  Generator g(21);
  // 12 x 32 is one micro-kernel tile and 256 one KC block: sizes straddle both, K > KC runs
  // several packed blocks, N > 512 several B panels, M = 5 with large N splits a row panel.
  for (auto [M, N, K] : {std::array<int, 3>{1, 1, 1}, {13, 37, 5}, {12, 32, 256}, {25, 65, 257}, {5, 1500, 40},
                         {300, 1000, 700}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    Tensor a = randn({M, K}, g), b = randn({K, N}, g);
    check_against_naive([&] { return ops::matmul(a, b); }, K);
  }
}

TEST_CASE("blocked matmul handles transposed operands and K = 0") {
  if (!blocked_registered()) return skip_without_avx512();
  Generator g(22);
  const int M = 71, N = 90, K = 300;
  // a stored (K, M) and b stored (N, K): .t() gives views the kernel reads as trans_a/trans_b.
  Tensor a = randn({M, K}, g), at = randn({K, M}, g).t(), b = randn({K, N}, g), bt = randn({N, K}, g).t();
  for (auto [ta, tb] : {std::array<bool, 2>{false, false}, {false, true}, {true, false}, {true, true}}) {
    CAPTURE(ta);
    CAPTURE(tb);
    const Tensor& lhs = ta ? at : a;
    const Tensor& rhs = tb ? bt : b;
    check_against_naive([&] { return ops::matmul(lhs, rhs); }, K);
  }
  const Tensor empty = with_variant("blocked", [] { return ops::matmul(ones({4, 0}), ones({0, 3})); });
  CHECK(empty.to_vector<float>() == std::vector<float>(12, 0.0f));
}

TEST_CASE("blocked matmul accumulates into the output (linear with bias) and in backward") {
  if (!blocked_registered()) return skip_without_avx512();
  Generator g(23);
  // linear: y = x @ W^T + b fills y with b, then the GEMM accumulates (trans_b, accumulate).
  // Its backward runs dx = g @ W and dW = g^T @ x (trans_a).
  const int N = 77, in = 300, out = 45;
  Tensor x = randn({N, in}, g), w = randn({out, in}, g), bias = randn({out}, g), up = randn({N, out}, g);
  auto grads = [&](const char* variant) {
    return with_variant(variant, [&] {
      Tensor xx = x.detach().requires_grad_(true), ww = w.detach().requires_grad_(true);
      Tensor y = ops::linear(xx, ww, bias);
      ops::sum(ops::mul(y, up)).backward();
      return ops::cat({y.detach().reshape({-1}), xx.grad().reshape({-1}), ww.grad().reshape({-1})}, 0);
    });
  };
  CHECK(scaled_error(grads("naive"), grads("blocked"), std::max(in, N)) < 1e-6);
}

TEST_CASE("blocked matmul over a batch with a broadcast operand") {
  if (!blocked_registered()) return skip_without_avx512();
  Generator g(24);
  // Attention-sized: many small matrices, one thread per matrix.
  Tensor q = randn({48, 64, 32}, g), k = randn({48, 32, 64}, g), shared = randn({32, 64}, g);
  check_against_naive([&] { return ops::matmul(q, k); }, 32);
  check_against_naive([&] { return ops::matmul(q, shared); }, 32);  // b: batch stride 0
  // A few larger matrices: threads split each matrix. a shared (stride 0) this time.
  Tensor a = randn({200, 150}, g), b = randn({3, 150, 170}, g);
  check_against_naive([&] { return ops::matmul(a, b); }, 150);
}

TEST_CASE("blocked matmul is bitwise identical with 1 and 2 threads") {
  if (!blocked_registered()) return skip_without_avx512();
  const int before = get_num_threads();
  auto run = [](int threads) {
    set_num_threads(threads);
    Generator g(25);
    Tensor a = randn({300, 700}, g), b = randn({700, 1000}, g), q = randn({48, 64, 32}, g), k = randn({48, 32, 64}, g);
    Tensor c = randn({3, 150, 170}, g), d = randn({170, 130}, g);
    return with_variant("blocked", [&] {
      return ops::cat({ops::matmul(a, b).reshape({-1}), ops::matmul(q, k).reshape({-1}), ops::matmul(c, d).reshape({-1}),
                       ops::matmul(a.t(), a).reshape({-1})},
                      0);
    }).to_vector<float>();
  };
  const auto one = run(1), two = run(2);
  set_num_threads(before);
  CHECK(one == two);
}
