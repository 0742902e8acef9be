// tests/core/test_ops.cpp: op values against hand-computed results, broadcasting, kernel
// registry, determinism over thread counts, and error messages (chapters 02 and 04).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "brrr/brrr.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/registry.h"
#include "kernels/signatures.h"

using namespace brrr;

namespace {
std::vector<float> v(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("elementwise ops and NumPy broadcasting") {
  Tensor a = arange(6).reshape({2, 3});
  Tensor b = tensor({10, 20, 30});
  CHECK(v(a + b) == std::vector<float>{10, 21, 32, 13, 24, 35});
  CHECK(v(a * tensor({2}).reshape({1, 1})) == std::vector<float>{0, 2, 4, 6, 8, 10});
  CHECK(v(tensor({1, 2}).reshape({2, 1}) - tensor({1, 2, 3})) == std::vector<float>{0, -1, -2, 1, 0, -1});
  CHECK(v(a / 2.0) == std::vector<float>{0, 0.5f, 1, 1.5f, 2, 2.5f});
  CHECK(v(1.0 - a) == std::vector<float>{1, 0, -1, -2, -3, -4});
  CHECK(v(a.t() + 1.0) == std::vector<float>{1, 4, 2, 5, 3, 6});  // a strided input
  CHECK(ops::broadcast_shapes({8, 1, 6, 1}, {7, 1, 5}, "test") == Shape{8, 7, 6, 5});
  CHECK_THROWS_WITH_AS(ops::add(ones({2, 3}), ones({3, 2})), doctest::Contains("add: shapes (2, 3) and (3, 2) cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(ops::add(ones({2}), ones({2}, kFloat64)), doctest::Contains("dtypes differ"), Error);
}

TEST_CASE("unary ops") {
  Tensor x = tensor({-1.0, 0.0, 2.0});
  CHECK(v(ops::relu(x)) == std::vector<float>{0, 0, 2});
  CHECK(v(ops::neg(x)) == std::vector<float>{1, 0, -2});
  CHECK(ops::exp(x).at<float>({2}) == doctest::Approx(std::exp(2.0)));
  CHECK(ops::tanh(x).at<float>({0}) == doctest::Approx(std::tanh(-1.0)));
  CHECK(ops::sigmoid(x).at<float>({1}) == doctest::Approx(0.5));
  CHECK(v(ops::pow(x, 2.0)) == std::vector<float>{1, 0, 4});
  CHECK(ops::sqrt(tensor({4.0})).item() == 2.0);
  CHECK(ops::log(tensor({1.0})).item() == 0.0);
}

TEST_CASE("reductions: sum, mean, var, max with keepdim") {
  Tensor x = arange(24).reshape({2, 3, 4});
  CHECK(ops::sum(x).item() == 276.0);
  CHECK(v(ops::sum(x, {1})) == std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57});
  CHECK(ops::sum(x, {0, 2}, true).shape() == Shape{1, 3, 1});
  CHECK(v(ops::sum(x, {0, 2})) == std::vector<float>{60, 92, 124});
  CHECK(v(ops::mean(x, {-1})) == std::vector<float>{1.5f, 5.5f, 9.5f, 13.5f, 17.5f, 21.5f});
  CHECK(ops::var(tensor({1, 2, 3, 4})).item() == doctest::Approx(1.6666667));
  CHECK(ops::var(tensor({1, 2, 3, 4}), {}, 0).item() == doctest::Approx(1.25));
  auto [values, indices] = ops::max(tensor({3, 1, 4, 1, 5, 9, 2, 6}).reshape({2, 4}), 1);
  CHECK(v(values) == std::vector<float>{4, 9});
  CHECK(indices.to_vector<std::int64_t>() == std::vector<std::int64_t>{2, 1});
  CHECK(ops::argmax(tensor({1, 7, 7}), 0).item<std::int64_t>() == 1);  // the first maximum
  CHECK(std::isnan(ops::max(tensor({1, NAN, 3})).item()));
  CHECK_THROWS_WITH_AS(ops::sum(x, {3}), doctest::Contains("sum: dim 3 is out of range for a tensor of 3 dims"), Error);
  CHECK_THROWS_WITH_AS(ops::sum(x, {1, -2}), doctest::Contains("listed twice"), Error);
}

TEST_CASE("matmul: 2-D, batched, broadcast, vectors, transposed views") {
  Tensor a = arange(6).reshape({2, 3}), b = arange(12).reshape({3, 4});
  CHECK(v(ops::matmul(a, b)) == std::vector<float>{20, 23, 26, 29, 56, 68, 80, 92});
  CHECK(v(ops::matmul(b.t(), a.t())) == v(ops::matmul(a, b).t().contiguous()));
  Tensor batch = ops::stack({a, a * 2.0});  // (2, 2, 3)
  Tensor out = ops::matmul(batch, b);       // b broadcast over the batch
  CHECK(out.shape() == Shape{2, 2, 4});
  CHECK(v(out.select(0, 1)) == v(ops::matmul(a, b) * 2.0));
  CHECK(ops::matmul(tensor({1, 2, 3}), b).shape() == Shape{4});
  CHECK(ops::matmul(a, tensor({1, 1, 1})).to_vector<float>() == std::vector<float>{3, 12});
  CHECK_THROWS_WITH_AS(ops::matmul(ones({4, 3}), ones({5, 2})), doctest::Contains("matmul: inner dimensions differ: (4, 3) @ (5, 2)"), Error);
}

TEST_CASE("every matmul variant agrees with the naive reference on random sizes") {
  Generator g(11);
  for (auto [M, N, K] : {std::array<int, 3>{1, 1, 1}, {7, 5, 3}, {300, 260, 70}, {33, 513, 129}}) {
    Tensor a = randn({M, K}, g), b = randn({K, N}, g);
    kernels::select("matmul", "naive");
    const Tensor ref = ops::matmul(a, b);
    kernels::select("matmul", "eigen");
    const Tensor fast = ops::matmul(a, b);
    kernels::reset_selection();
    const double scale = std::sqrt(static_cast<double>(K));
    CHECK(ops::max(ops::sub(ref, fast)).item() < 1e-5 * scale);
    CHECK(ops::max(ops::sub(fast, ref)).item() < 1e-5 * scale);
  }
}

TEST_CASE("the kernel registry lists variants, selects by name and rejects unknown names") {
  const auto names = kernels::ops();
  CHECK(std::find(names.begin(), names.end(), "matmul") != names.end());
  const std::string fastest = kernels::selected("matmul", DeviceType::CPU, kFloat32);
  CHECK(fastest != "naive");  // the default is the highest-priority variant, never the reference loop
  kernels::select_from_spec("matmul=naive");
  CHECK(kernels::selected("matmul", DeviceType::CPU, kFloat32) == "naive");
  kernels::reset_selection();
  CHECK(kernels::selected("matmul", DeviceType::CPU, kFloat32) == fastest);
  CHECK_THROWS_WITH_AS(kernels::select("matmul", "fastest"), doctest::Contains("has no variant 'fastest' (variants: "), Error);
  CHECK_THROWS_WITH_AS(kernels::select("matmul", "fastest"), doctest::Contains("naive"), Error);
  CHECK_THROWS_WITH_AS(kernels::select("matmull", "naive"), doctest::Contains("unknown op 'matmull'"), Error);
  CHECK_THROWS_WITH_AS(kernels::select_from_spec("matmul"), doctest::Contains("not of the form op=variant"), Error);
}

TEST_CASE("results are bitwise identical with 1 and 2 threads") {
  const int before = get_num_threads();
  auto run = [](int threads) {
    set_num_threads(threads);
    Generator g(3);
    Tensor a = randn({257, 300}, g), b = randn({300, 190}, g), w = randn({190}, g);
    Tensor x = ops::layer_norm(ops::gelu(ops::matmul(a, b)), w, w);
    Tensor big = randn({1 << 20}, g);
    return std::make_pair(x.to_vector<float>(), std::vector<float>{ops::sum(big).item<float>(), ops::sum(x).item<float>(),
                                                                   ops::sum(x, {0}).to_vector<float>()[7]});
  };
  const auto one = run(1), two = run(2);
  set_num_threads(before);
  CHECK(one.first == two.first);
  CHECK(one.second == two.second);
}

TEST_CASE("softmax on the CPU: a masked (-inf) score weighs exactly 0, rows of ragged length sum to 1") {
  for (int C : {1, 7, 16, 33, 300}) {
    Generator g(C);
    Tensor x = randn({5, C}, g) * 4.0;
    std::vector<float> v = x.to_vector<float>();
    for (int c = 1; c < C; c += 3) v[2 * C + c] = -INFINITY;  // row 2: every third score masked
    const std::vector<float> y = ops::softmax(from_vector(v, {5, C}), -1).to_vector<float>();
    for (int n = 0; n < 5; ++n) {
      double sum = 0;
      for (int c = 0; c < C; ++c) {
        sum += y[n * C + c];
        if (std::isinf(v[n * C + c])) CHECK(y[n * C + c] == 0.0f);
        else CHECK(y[n * C + c] == doctest::Approx(std::exp(static_cast<double>(v[n * C + c])) /
                                                   [&] {
                                                     double z = 0;
                                                     for (int k = 0; k < C; ++k) z += std::exp(static_cast<double>(v[n * C + k]));
                                                     return z;
                                                   }())
                                          .epsilon(1e-5));
      }
      CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
    }
  }
}

TEST_CASE("cross_entropy_fused: the CPU's rowwise variant matches the unfused pair, and not the thread count") {
  // Ragged V (not a multiple of the vector width), ignored rows, and a row with every fifth
  // logit -inf (its gradient there exactly 0) but a finite target.
  const std::int64_t N = 37, V = 1003, ignore = -100;
  Generator g(5);
  std::vector<float> logits = (randn({N, V}, g) * 3.0).to_vector<float>();
  std::vector<std::int32_t> targets(N);
  for (std::int64_t n = 0; n < N; ++n) targets[n] = static_cast<std::int32_t>((n * 131) % V);
  for (std::int64_t n = 3; n < N; n += 7) targets[n] = ignore;
  for (std::int64_t v = 0; v < V; v += 5) logits[4 * V + v] = -INFINITY;
  logits[4 * V + targets[4]] = 1.0f;
  const float dloss = 1.0f / 31;
  std::vector<float> ref_loss(N), ref_d(N * V);
  kernels::cpu::cross_entropy_fused<float>(ref_loss.data(), ref_d.data(), logits.data(), targets.data(), N, V, ignore,
                                           dloss, nullptr);
  const int before = get_num_threads();
  auto run = [&](int threads) {
    set_num_threads(threads);
    std::vector<float> loss(N, 7.0f), d(N * V, 7.0f);
    kernels::cpu::cross_entropy_fused_rowwise(loss.data(), d.data(), logits.data(), targets.data(), N, V, ignore,
                                              dloss, nullptr);
    return std::make_pair(loss, d);
  };
  const auto one = run(1), two = run(2);
  set_num_threads(before);
  CHECK(one == two);
  const auto& [loss, d] = one;
  for (std::int64_t n = 0; n < N; ++n) {
    INFO("row ", n);
    CHECK(loss[n] == doctest::Approx(ref_loss[n]).epsilon(1e-6));
    for (std::int64_t v = 0; v < V; ++v) {
      REQUIRE(std::fabs(d[n * V + v] - ref_d[n * V + v]) <= 1e-6f * dloss);
      if (targets[n] == ignore || std::isinf(logits[n * V + v])) REQUIRE(d[n * V + v] == 0.0f);
    }
  }
}

TEST_CASE("softmax, log_softmax and cross_entropy values") {
  Tensor x = tensor({1, 2, 3});
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  CHECK(ops::softmax(x).at<float>({2}) == doctest::Approx(std::exp(3.0) / z));
  CHECK(ops::log_softmax(x).at<float>({0}) == doctest::Approx(1.0 - std::log(z)));
  Tensor big = tensor({1000, 0});  // the max is subtracted: no overflow
  CHECK(ops::softmax(big).at<float>({0}) == doctest::Approx(1.0));
  Tensor logits = tensor({2, 1, 0, 0, 0, 5}).reshape({2, 3});
  Tensor t = from_vector(std::vector<std::int64_t>{0, 2}, {2}, kInt64);
  const double l0 = -std::log(std::exp(2.0) / (std::exp(2.0) + std::exp(1.0) + 1.0));
  const double l1 = -std::log(std::exp(5.0) / (2.0 + std::exp(5.0)));
  CHECK(ops::cross_entropy(logits, t).item() == doctest::Approx((l0 + l1) / 2));
  CHECK_THROWS_WITH_AS(ops::cross_entropy(logits, from_vector(std::vector<std::int64_t>{0, 3}, {2}, kInt64)),
                       doctest::Contains("index 3 at position 1 is out of range for 3 entries"), Error);
  CHECK_THROWS_WITH_AS(ops::cross_entropy(logits, from_vector(std::vector<std::int64_t>{0}, {1}, kInt64)),
                       doctest::Contains("targets (1,) do not match logits (2, 3)"), Error);
  CHECK_THROWS_WITH_AS(ops::cross_entropy(logits, tensor({0, 1})), doctest::Contains("int32 or int64"), Error);
}

TEST_CASE("embedding, layer_norm, gelu and attention values") {
  Tensor w = arange(6).reshape({3, 2});
  Tensor e = ops::embedding(w, from_vector(std::vector<std::int32_t>{2, 0}, {2}, kInt32));
  CHECK(v(e) == std::vector<float>{4, 5, 0, 1});
  CHECK_THROWS_WITH_AS(ops::embedding(w, from_vector(std::vector<std::int64_t>{3}, {1}, kInt64)),
                       doctest::Contains("embedding: index 3 at position 0 is out of range for 3 entries"), Error);
  Tensor ln = ops::layer_norm(tensor({1, 2, 3}), ones({3}), zeros({3}));
  CHECK(ln.at<float>({0}) == doctest::Approx(-1.2247357).epsilon(1e-5));
  CHECK(ops::gelu(tensor({1.0})).item() == doctest::Approx(0.8411920).epsilon(1e-6));
  CHECK_THROWS_WITH_AS(ops::layer_norm(ones({2, 4}), ones({3}), zeros({3})), doctest::Contains("weight (3,) does not match"), Error);
  // attention: the first position can only see itself
  Generator g(1);
  Tensor q = randn({1, 1, 4, 2}, g), k = randn({1, 1, 4, 2}, g), val = randn({1, 1, 4, 2}, g);
  Tensor y = ops::causal_attention_composed(q, k, val);
  CHECK(y.at<float>({0, 0, 0, 1}) == doctest::Approx(val.at<float>({0, 0, 0, 1})));
  CHECK_THROWS_WITH_AS(ops::causal_attention_composed(q, k, ones({1, 1, 3, 2})), doctest::Contains("(B, H, T, hs)"), Error);
}

TEST_CASE("dropout is seeded, scales kept values and is the identity in eval") {
  Tensor x = ones({10000});
  Generator a(1), b(1);
  Tensor ya = ops::dropout(x, 0.25, a), yb = ops::dropout(x, 0.25, b);
  CHECK(v(ya) == v(yb));
  const std::vector<float> values = v(ya);
  int zeros_seen = 0;
  for (float f : values) {
    CHECK((f == 0.0f || f == doctest::Approx(1.0 / 0.75)));
    zeros_seen += f == 0.0f;
  }
  CHECK(zeros_seen == doctest::Approx(2500).epsilon(0.1));
  CHECK(ops::dropout(x, 0.25, a, false).storage() == x.storage());
  CHECK_THROWS_WITH_AS(ops::dropout(x, 1.0, a), doctest::Contains("p must be in [0, 1)"), Error);
}

TEST_CASE("dropout masks are Philox's words bit for bit, at any length, counter and thread count") {
  // The CPU kernel computes 16 counters at once (kernels/cpu/elementwise.cpp); element i must be
  // word i % 4 of philox(seed, counter + i / 4), as the GPU's kernel and the scalar loop give.
  kernels::Kernel<kernels::dropout_mask_fn<float>> mask_f(kernels::op::dropout_mask<float>);
  kernels::Kernel<kernels::dropout_mask_fn<double>> mask_d(kernels::op::dropout_mask<double>);
  const int before = get_num_threads();
  const std::uint64_t seed = 0x123456789ABCDEFull;
  for (const std::uint64_t counter : {std::uint64_t{0}, std::uint64_t{5}, std::uint64_t{0xFFFFFFFDull},
                                      ~std::uint64_t{0} - 6})  // across a carry into the high word, and a wrap
    for (const std::int64_t n : {1, 3, 63, 64, 65, 1000, 70001})
      for (const int threads : {1, 2}) {
        set_num_threads(threads);
        std::vector<float> f(static_cast<std::size_t>(n));
        std::vector<double> d(static_cast<std::size_t>(n));
        mask_f(DeviceType::CPU)(f.data(), n, 0.3f, seed, counter, nullptr);
        mask_d(DeviceType::CPU)(d.data(), n, 0.3, seed, counter, nullptr);
        int wrong = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const float u = uniform_from_bits(philox(seed, counter + static_cast<std::uint64_t>(i / 4))[i % 4]);
          wrong += f[i] != (u < 0.3f ? 0.0f : 1.0f / (1.0f - 0.3f));
          wrong += d[i] != (u < 0.3 ? 0.0 : 1.0 / (1.0 - 0.3));
        }
        CAPTURE(counter);
        CAPTURE(n);
        CAPTURE(threads);
        CHECK(wrong == 0);
      }
  set_num_threads(before);
}
