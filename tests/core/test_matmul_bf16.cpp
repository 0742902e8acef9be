// tests/core/test_matmul_bf16.cpp: the bf16 GEMM (kernels/cpu/gemm_bf16.cpp) and the Autocast
// scope that selects it (brrr/autocast.h), chapter 18. Both variants, "avx512bf16" (where the
// CPU has AVX512-BF16; skipped elsewhere) and "plain" (everywhere), are checked against the
// naive float32 matmul of the bf16-rounded operands on ragged sizes, all transpose layouts,
// accumulation and broadcast batches; against each other bit for bit; and over thread counts.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "brrr/bfloat16.h"
#include "brrr/brrr.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/linear_gelu_check.h"
#include "tests/skip.h"
#include "tests/slow_cpu.h"

using namespace brrr;

namespace {

bool has_variant(const char* name) {
  for (const auto& v : kernels::variants("matmul:bf16"))
    if (v.variant == name && v.device.type == DeviceType::CPU) return true;
  return false;
}

// Runs f with the named variants selected, and puts the defaults back even if f throws.
Tensor with_variants(const char* matmul, const char* matmul_bf16, const std::function<Tensor()>& f) {
  struct Reset {
    ~Reset() { kernels::reset_selection(); }
  } reset;
  kernels::select("matmul", matmul);
  if (matmul_bf16) kernels::select("matmul:bf16", matmul_bf16);
  return f();
}

// t with every element rounded to the nearest bfloat16 (brrr/bfloat16.h), still float32.
Tensor rounded(const Tensor& t) {
  std::vector<float> v = t.contiguous().to_vector<float>();
  for (float& x : v) x = round_to_bf16(x);
  return from_vector(v, t.shape());
}

// max |ref - got| / K, as in test_matmul_blocked.cpp: the float32 sums of K products of
// size about 1 stay within 1e-6 * K of the exact sums of the same (bf16) products.
double scaled_error(const Tensor& ref, const Tensor& got, std::int64_t K) {
  REQUIRE(ref.shape() == got.shape());
  const std::vector<float> r = ref.to_vector<float>(), g = got.to_vector<float>();
  double worst = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) worst = std::max(worst, std::abs(static_cast<double>(r[i]) - g[i]));
  return worst / static_cast<double>(std::max<std::int64_t>(K, 1));
}

// f(operands) under Autocast(kBFloat16) with `variant`, against the naive (double) matmul of
// the operands rounded to bf16. And the rounding must matter: on more than a few products the
// unrounded float32 product is further off than the bound by far (about 1e-3 of a product).
void check_variant(const char* variant_name, const std::vector<Tensor>& in,
                   const std::function<Tensor(const std::vector<Tensor>&)>& f, std::int64_t K) {
  const std::string variant = variant_name;
  CAPTURE(variant);
  std::vector<Tensor> r;
  for (const Tensor& t : in) r.push_back(rounded(t));
  const Tensor ref = with_variants("naive", nullptr, [&] { return f(r); });
  const Tensor exact = with_variants("naive", nullptr, [&] { return f(in); });
  const Tensor got = with_variants("naive", variant_name, [&] {
    const Autocast autocast(kBFloat16);
    return f(in);
  });
  CHECK(scaled_error(ref, got, K) < 1e-6);
  if (got.numel() * K >= 1000) CHECK(scaled_error(exact, got, K) > 1e-5);  // (one product may round little)
}

void check_both(const std::vector<Tensor>& in, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                std::int64_t K) {
  check_variant("plain", in, f, K);
  if (has_variant("avx512bf16")) check_variant("avx512bf16", in, f, K);
}

Tensor mm(const std::vector<Tensor>& x) { return ops::matmul(x[0], x[1]); }

}  // namespace

TEST_CASE("bf16 matmul is the float32 product of the bf16-rounded operands, on ragged sizes") {
  Generator g(31);
  // 12 x 32 is one tile, 512 one KC block (256 pairs of k): odd K pads the last pair with a
  // zero, K > 512 runs several blocks, N > 512 several B panels.
  for (auto [M, N, K] : {std::array<int, 3>{1, 1, 1}, {13, 37, 5}, {12, 32, 512}, {25, 65, 513}, {5, 600, 40},
                         {130, 700, 1100}}) {
    CAPTURE(M);
    CAPTURE(N);
    CAPTURE(K);
    check_both({randn({M, K}, g), randn({K, N}, g)}, &mm, K);
  }
}

TEST_CASE("bf16 matmul handles transposed operands, a batch with a broadcast operand, and K = 0") {
  Generator g(32);
  const int M = 71, N = 90, K = 301;
  const Tensor a = randn({M, K}, g), at = randn({K, M}, g).t(), b = randn({K, N}, g), bt = randn({N, K}, g).t();
  for (auto [ta, tb] : {std::array<bool, 2>{false, false}, {false, true}, {true, false}, {true, true}}) {
    CAPTURE(ta);
    CAPTURE(tb);
    check_both({ta ? at : a, tb ? bt : b}, &mm, K);
  }
  check_both({randn({6, 64, 33}, g), randn({33, 70}, g)}, &mm, 33);  // b shared (batch stride 0)
  const Tensor empty = with_variants("naive", "plain", [] {
    const Autocast autocast(kBFloat16);
    return ops::matmul(ones({4, 0}), ones({0, 3}));
  });
  CHECK(empty.to_vector<float>() == std::vector<float>(12, 0.0f));
}

TEST_CASE("bf16 linear accumulates onto the bias, and its backward GEMMs run in bf16 too") {
  Generator g(33);
  const int N = 77, in = 300, out = 45;
  const Tensor x = randn({N, in}, g), w = randn({out, in}, g), bias = randn({out}, g), up = randn({N, out}, g);
  // The upstream gradient is rounded to bf16 in the backward GEMMs as well: use a bf16 value
  // for it, so the reference (which cannot round it) sees the same numbers.
  const Tensor up16 = rounded(up);
  auto forward_backward = [&](const std::vector<Tensor>& v) {
    Tensor xx = v[0].detach().requires_grad_(true), ww = v[1].detach().requires_grad_(true);
    Tensor y = ops::linear(xx, ww, bias);
    Tensor loss = ops::sum(ops::mul(y, up16));
    loss.backward();
    return ops::cat({y.detach().reshape({-1}), xx.grad().reshape({-1}), ww.grad().reshape({-1})}, 0);
  };
  check_both({x, w}, forward_backward, std::max(in, N));
  // The backward remembers the forward's scope: backward() outside it still rounds.
  auto backward_outside = [&](const char* variant) {
    return with_variants("naive", variant, [&] {
      Tensor xx = x.detach().requires_grad_(true);
      Tensor y;
      {
        const Autocast autocast(kBFloat16);
        y = ops::linear(xx, rounded(w), bias);
      }
      ops::sum(ops::mul(y, up16)).backward();
      return xx.grad();
    });
  };
  const Tensor ref = with_variants("naive", nullptr, [&] { return ops::matmul(up16, rounded(w)); });
  CHECK(scaled_error(ref, backward_outside("plain"), out) < 1e-6);
}

TEST_CASE("bf16 matmul: avx512bf16 and plain agree bit for bit, and neither depends on the thread count") {
  const int before = get_num_threads();
  // Under qemu (BRRR_SLOW_CPU=1) fewer rows and columns and a smaller batch, K still over one
  // 512-deep panel: 50 million multiply-adds a run rather than 860 million.
  const std::int64_t M = test::sized(300, 61), K = test::sized(700, 530), N = test::sized(1000, 97),
                     batch = test::sized(48, 6), rows = test::sized(150, 37);
  auto run = [&](const char* variant, int threads) {
    set_num_threads(threads);
    Generator g(34);
    const Tensor a = randn({M, K}, g), b = randn({K, N}, g), q = randn({batch, 64, 33}, g),
                 k = randn({batch, 33, 64}, g), c = randn({3, rows, 171}, g), d = randn({171, 130}, g);
    return with_variants("naive", variant, [&] {
      const Autocast autocast(kBFloat16);
      return ops::cat({ops::matmul(a, b).reshape({-1}), ops::matmul(q, k).reshape({-1}),
                       ops::matmul(c, d).reshape({-1}), ops::matmul(a.t(), a).reshape({-1}),
                       ops::matmul(b, b.t()).reshape({-1})},
                      0);
    }).to_vector<float>();
  };
  const auto plain1 = run("plain", 1), plain2 = run("plain", 2);
  CHECK(plain1 == plain2);
  if (has_variant("avx512bf16")) {
    const auto avx1 = run("avx512bf16", 1), avx2 = run("avx512bf16", 2);
    CHECK(avx1 == avx2);
    CHECK(avx1 == plain1);
  }
  set_num_threads(before);
  if (!has_variant("avx512bf16")) test::skip("this CPU has no AVX512-BF16: only the plain variant was checked");
}

TEST_CASE("bf16 matmul keeps infinities and NaN, and rounds operands to nearest even") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // 1 + 2^-8 is a tie between two bf16 (1 and 1 + 2^-7): it rounds to 1, the even one, and
  // 1 + 3 * 2^-8 to 1 + 2^-6 (up, to even). One column meets an infinity, one a NaN.
  const Tensor a = from_vector(std::vector<float>{1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f}, {1, 2});
  const Tensor b = from_vector(std::vector<float>{1.0f, 0.0f, inf, 1.0f, 0.0f, 1.0f, 1.0f, nan}, {2, 4});
  for (const char* variant : {"plain", "avx512bf16"}) {
    if (!has_variant(variant)) continue;
    INFO("variant ", variant);
    const std::vector<float> c = with_variants("naive", variant, [&] {
      const Autocast autocast(kBFloat16);
      return ops::matmul(a, b);
    }).to_vector<float>();
    CHECK(c[0] == 1.0f);
    CHECK(c[1] == 1.0f + 0x1p-6f);
    CHECK(c[2] == inf);
    CHECK(std::isnan(c[3]));
  }
}

TEST_CASE("Autocast is a scope: it nests, restores, refuses other dtypes and leaves float64 alone") {
  CHECK(autocast_dtype() == kFloat32);
  {
    const Autocast on(kBFloat16);
    CHECK(autocast_dtype() == kBFloat16);
    {
      const Autocast off(kFloat32);
      CHECK(autocast_dtype() == kFloat32);
    }
    CHECK(autocast_dtype() == kBFloat16);
    CHECK_THROWS_WITH_AS(Autocast{kFloat64}, doctest::Contains("Autocast: dtype must be bfloat16"), Error);
    // float64 matmuls are the gradient checks' reference: never rounded.
    Generator g(35);
    const Tensor a = randn({20, 30}, g, TensorOptions().dtype(kFloat64)), b = randn({30, 10}, g, TensorOptions().dtype(kFloat64));
    const Tensor inside = ops::matmul(a, b);
    const Autocast off(kFloat32);
    CHECK(inside.to_vector<double>() == ops::matmul(a, b).to_vector<double>());
  }
  CHECK(autocast_dtype() == kFloat32);
}

// Defined in kernels/cpu/gemm_bf16.cpp (its one other caller, matmul.cpp, declares them too).
namespace brrr::kernels::cpu {
void matmul_bf16_data_plain(float* out, const bf16* a, const bf16* b, const MatmulShape& s, Stream stream);
void matmul_bf16_data_avx512(float* out, const bf16* a, const bf16* b, const MatmulShape& s, Stream stream);
}  // namespace brrr::kernels::cpu

// matmul on bf16 data (chapter 18, section 10): the same GEMM, its packing reading bf16 from
// memory instead of rounding float32. On the widened operands (exact) the float32-reading GEMM
// rounds each to itself, so the two give the same bits: every layout, a batch whose B is
// shared, an odd K above one KC block (512), accumulation.
TEST_CASE("bf16 GEMM on bf16 data: the bits of the float32-reading GEMM on the widened operands") {
  namespace kc = kernels::cpu;
  Generator g(61);
  for (const auto& [M, N, K] : std::vector<std::array<std::int64_t, 3>>{{13, 37, 29}, {25, 33, 515}, {1, 70, 2}}) {
    for (int layout = 0; layout < 4; ++layout) {
      kernels::MatmulShape s;
      s.batch = 2, s.M = M, s.N = N, s.K = K, s.trans_a = layout & 1, s.trans_b = layout & 2;
      s.stride_a = M * K, s.stride_b = 0, s.stride_out = M * N, s.accumulate = true;
      const Tensor a = randn({2 * M * K}, g).to(kBFloat16), b = randn({K * N}, g).to(kBFloat16);
      const Tensor start = randn({2 * M * N}, g);
      const std::vector<float> a32 = a.to_vector<float>(), b32 = b.to_vector<float>();
      INFO("M " << M << " N " << N << " K " << K << " layout " << layout);
      auto run16 = [&](kernels::matmul_on_bf16_fn gemm) {
        std::vector<float> out = start.to_vector<float>();
        gemm(out.data(), a.data_ptr<bf16>(), b.data_ptr<bf16>(), s, nullptr);
        return out;
      };
      auto run32 = [&](kernels::matmul_fn<float> gemm) {
        std::vector<float> out = start.to_vector<float>();
        gemm(out.data(), a32.data(), b32.data(), s, nullptr);
        return out;
      };
      const bool avx = kc::cpu_has_avx512_bf16();
      CHECK(run16(&kc::matmul_bf16_data_plain) == run32(&kc::matmul_bf16_plain));
      CHECK(run16(&kc::matmul_bf16_memory) == run32(avx ? &kc::matmul_bf16_avx512 : &kc::matmul_bf16_plain));
      if (avx) CHECK(run16(&kc::matmul_bf16_data_avx512) == run32(&kc::matmul_bf16_avx512));
    }
  }
}

// Chapter 18, section 11: a linear layer on bf16 tensors is one matmul_epilogue op (and
// linear_gelu one with GELU); its bias gradient is sum_dim on the bf16 gradient. The values are
// held to the float64 results on the same bf16 inputs: y within one bf16 rounding, the float32
// gradients dW and db near their float64 sums, dx (bf16) within its rounding.
TEST_CASE("linear and linear_gelu on bf16 tensors: one rounding of the float32 sums, gradients near float64") {
  Generator g(71);
  const std::int64_t N = 37, in = 45, out = 29;
  // bf16 values, kept as float32 masters (as the model's parameters are) and as float64 copies.
  const Tensor x32 = rounded(randn({N, in}, g)), w32 = rounded(ops::mul(randn({out, in}, g), 0.3)),
               b32 = rounded(ops::mul(randn({out}, g), 0.5)), up = rounded(randn({N, out}, g));
  const std::vector<float> xv = x32.to_vector<float>(), wv = w32.to_vector<float>(), bv = b32.to_vector<float>(),
                           uv = up.to_vector<float>();
  for (bool with_gelu : {false, true}) {
    CAPTURE(with_gelu);
    Tensor x = x32.to(kBFloat16).requires_grad_(true), w = w32.detach().requires_grad_(true),
           b = b32.detach().requires_grad_(true);
    const Tensor w16 = w.to(kBFloat16), b16 = b.to(kBFloat16);
    const Tensor y = with_gelu ? ops::linear_gelu(x, w16, b16) : ops::linear(x, w16, b16);
    CHECK(y.dtype() == kBFloat16);
    ops::sum(ops::mul(y.to(kFloat32), up)).backward();
    REQUIRE(x.grad().dtype() == kBFloat16);
    REQUIRE(w.grad().dtype() == kFloat32);
    const std::vector<float> yv = y.to(kFloat32).to_vector<float>(), dx = x.grad().to(kFloat32).to_vector<float>(),
                             dw = w.grad().to_vector<float>(), db = b.grad().to_vector<float>();
    std::vector<double> dpre(static_cast<std::size_t>(N * out));
    int wrong = 0;
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < out; ++o) {
        double pre = bv[o];
        for (std::int64_t i = 0; i < in; ++i) pre += static_cast<double>(xv[n * in + i]) * wv[o * in + i];
        const double want = with_gelu ? test::gelu_tanh64(pre) : pre;
        if (std::abs(yv[n * out + o] - want) > std::ldexp(std::abs(want), -8) + 1e-6) ++wrong;
        dpre[n * out + o] = uv[n * out + o] * (with_gelu ? test::gelu_tanh_slope64(pre) : 1.0);
      }
    CHECK(wrong == 0);
    // dx (N, in) = dpre W, dW (out, in) = dpre^T x, db = dpre's column sums: each near its float64
    // sum (dpre passes through bf16 on its way, a relative 2^-9 an element).
    auto close = [](double got, double want, double scale) { return std::abs(got - want) <= 1e-2 * scale + 1e-6; };
    double scale_dx = 0, scale_dw = 0, scale_db = 0;
    std::vector<double> rdx(dx.size(), 0.0), rdw(dw.size(), 0.0), rdb(db.size(), 0.0);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t o = 0; o < out; ++o) {
        const double d = dpre[n * out + o];
        rdb[o] += d;
        for (std::int64_t i = 0; i < in; ++i) {
          rdx[n * in + i] += d * wv[o * in + i];
          rdw[o * in + i] += d * xv[n * in + i];
        }
      }
    for (double v : rdx) scale_dx = std::max(scale_dx, std::abs(v));
    for (double v : rdw) scale_dw = std::max(scale_dw, std::abs(v));
    for (double v : rdb) scale_db = std::max(scale_db, std::abs(v));
    int wrong_grads = 0;
    for (std::size_t i = 0; i < dx.size(); ++i) wrong_grads += !close(dx[i], rdx[i], scale_dx);
    for (std::size_t i = 0; i < dw.size(); ++i) wrong_grads += !close(dw[i], rdw[i], scale_dw);
    for (std::size_t i = 0; i < db.size(); ++i) wrong_grads += !close(db[i], rdb[i], scale_db);
    CHECK(wrong_grads == 0);
  }
}

TEST_CASE("sum_dim on bf16 data: the bits of sum_dim<float> on the widened values, without the copy") {
  namespace kc = kernels::cpu;
  Generator g(72);
  for (const auto& [outer, R, inner] : std::vector<std::array<std::int64_t, 3>>{{1, 77, 29}, {3, 9000, 1}, {2, 5, 300}}) {
    const Tensor in = randn({outer * R * inner}, g).to(kBFloat16);
    const std::vector<float> wide = in.to(kFloat32).to_vector<float>();
    std::vector<float> got(static_cast<std::size_t>(outer * inner)), want(got.size());
    kc::sum_dim_bf16(got.data(), in.data_ptr<bf16>(), outer, R, inner, nullptr);
    kc::sum_dim<float>(want.data(), wide.data(), outer, R, inner, nullptr);
    CHECK(got == want);
  }
}
