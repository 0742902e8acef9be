// tests/core/test_nn_bf16.cpp: the CPU kernels on bf16 data that the bf16 training step runs
// (kernels/cpu/nn_bf16.cpp, attention.cpp's *_bf16_memory, elementwise.cpp's binary ops), which
// read bf16, compute in float32 and round once, in one pass. Chapter 18, section 10.
//
// Two promises for each, on fresh random inputs at ragged sizes (rows that end mid-vector,
// more rows than a LayerNorm chunk of 64, more values than a parallel block of 8192, more
// columns than bias + GELU's blocks of 64):
// - the bits: every output is the float32 kernel's on the widened inputs, rounded once
//   (brrr::bf16, ties to even, NaN kept), whatever the thread count: what the kernels'
//   vectorized loops must give, since they replaced widened float32 copies (attention on bf16
//   data is the exception: it sums in float where the float32 kernel sums in double);
// - the numbers: every output within bf16's rounding (2^-8 relative) of the float64 kernel on
//   the same values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "brrr/bfloat16.h"
#include "brrr/ops.h"
#include "brrr/parallel.h"
#include "brrr/tensor.h"
#include "kernels/cpu/cpu_kernels.h"

using namespace brrr;
namespace cpu = brrr::kernels::cpu;

namespace {

std::vector<bf16> random_bf16(std::size_t n, std::mt19937& rng, float scale = 1.5f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<bf16> v(n);
  for (bf16& x : v) x = bf16(normal(rng));
  return v;
}
template <class T>
std::vector<T> widen(const std::vector<bf16>& x) {
  std::vector<T> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<T>(static_cast<float>(x[i]));
  return out;
}

// got (bf16) against the float32 kernel's want rounded once: the same 16 bits (NaN included).
void same_bits(const char* what, const std::vector<bf16>& got, const std::vector<float>& want) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  std::size_t differ = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i].bits != bf16(want[i]).bits && differ++ == 0) first = i;
  INFO("first at ", first, " of ", got.size(), ": got ", static_cast<float>(got[first]), ", float32 rounded ",
       static_cast<float>(bf16(want[first])));
  CHECK(differ == 0);
}

// got within bf16's rounding of the float64 kernel's want: |got - want| <= 2^-8 |want| + tiny.
template <class G>
void near64(const char* what, const std::vector<G>& got, const std::vector<double>& want, double tiny = 1e-6) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(static_cast<float>(got[i]));
    worst = std::max(worst, std::abs(g - want[i]) / (std::ldexp(1.0, -8) * std::abs(want[i]) + tiny));
  }
  CHECK(worst <= 1.0);
}

// Runs body() on 1 and on 2 threads, checking it gives the same bits both times.
template <class Body>
void on_one_and_two_threads(const Body& body) {
  const int was = get_num_threads();
  set_num_threads(1);
  const std::vector<bf16> one = body();
  set_num_threads(2);
  const std::vector<bf16> two = body();
  set_num_threads(was);
  CHECK(std::memcmp(one.data(), two.data(), one.size() * sizeof(bf16)) == 0);
}

}  // namespace

TEST_CASE("bf16 kernels, GELU: the float32 kernel's bits rounded once, near float64, NaN and infinities kept") {
  std::mt19937 rng(11);
  for (std::int64_t n : {1, 37, 8192 + 8192 + 45}) {
    CAPTURE(n);
    std::vector<bf16> x = random_bf16(static_cast<std::size_t>(n), rng, 3.0f), g = random_bf16(x.size(), rng);
    if (n > 3) x[1] = bf16(NAN), x[2] = bf16(INFINITY), x[3] = bf16(-INFINITY);
    const std::vector<float> x32 = widen<float>(x), g32 = widen<float>(g);
    std::vector<double> x64 = widen<double>(x), g64 = widen<double>(g);
    std::vector<bf16> out(x.size()), dx(x.size());
    std::vector<float> want(x.size()), dwant(x.size());
    std::vector<double> ref(x.size()), dref(x.size());
    using Fwd = void (*)(bf16*, const bf16*, std::int64_t, kernels::Stream);
    using Bwd = void (*)(bf16*, const bf16*, const bf16*, std::int64_t, kernels::Stream);
    struct Form {
      const char* name;
      Fwd fwd;
      Bwd bwd;
      void (*fwd32)(float*, const float*, std::int64_t, kernels::Stream);
      void (*bwd32)(float*, const float*, const float*, std::int64_t, kernels::Stream);
      void (*fwd64)(double*, const double*, std::int64_t, kernels::Stream);
      void (*bwd64)(double*, const double*, const double*, std::int64_t, kernels::Stream);
    };
    for (const Form& f : {Form{"tanh", cpu::gelu_forward_bf16, cpu::gelu_backward_bf16, cpu::gelu_forward<float>,
                               cpu::gelu_backward<float>, cpu::gelu_forward<double>, cpu::gelu_backward<double>},
                          Form{"erf", cpu::gelu_erf_forward_bf16, cpu::gelu_erf_backward_bf16,
                               cpu::gelu_erf_forward<float>, cpu::gelu_erf_backward<float>,
                               cpu::gelu_erf_forward<double>, cpu::gelu_erf_backward<double>}}) {
      CAPTURE(std::string(f.name));
      f.fwd(out.data(), x.data(), n, {});
      f.bwd(dx.data(), g.data(), x.data(), n, {});
      f.fwd32(want.data(), x32.data(), n, {});
      f.bwd32(dwant.data(), g32.data(), x32.data(), n, {});
      same_bits("forward", out, want);
      same_bits("backward", dx, dwant);
      if (n > 3) {
        CHECK(out[1].bits == 0x7FFF);  // NaN: the canonical one (the infinities: same_bits above)
        for (int i = 1; i <= 3; ++i) x64[i] = 0.0, g64[i] = 0.0;  // the float64 check skips them
      }
      f.fwd64(ref.data(), x64.data(), n, {});
      f.bwd64(dref.data(), g64.data(), x64.data(), n, {});
      std::vector<bf16> o = out, d = dx;
      if (n > 3) for (int i = 1; i <= 3; ++i) o[i] = bf16(0.0f), d[i] = bf16(0.0f);
      near64("forward against float64", o, ref, 1e-5);
      near64("backward against float64", d, dref, 1e-5);
      on_one_and_two_threads([&] {
        f.fwd(out.data(), x.data(), n, {});
        return out;
      });
    }
  }
}

TEST_CASE("bf16 kernels, bias + GELU: the float32 kernel's bits rounded once, dbias from the float32 dx") {
  std::mt19937 rng(12);
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{5, 37}, {67, 130}}) {
    CAPTURE(N);
    CAPTURE(C);
    const std::vector<bf16> x = random_bf16(N * C, rng), b = random_bf16(C, rng), g = random_bf16(N * C, rng);
    std::vector<bf16> out(x.size()), dx(x.size()), db(b.size());
    cpu::bias_gelu_forward_bf16(out.data(), x.data(), b.data(), N, C, {});
    cpu::bias_gelu_backward_bf16(dx.data(), db.data(), g.data(), x.data(), b.data(), N, C, {});
    std::vector<float> want(x.size()), dwant(x.size()), dbwant(b.size());
    cpu::bias_gelu_forward<float>(want.data(), widen<float>(x).data(), widen<float>(b).data(), N, C, {});
    cpu::bias_gelu_backward<float>(dwant.data(), dbwant.data(), widen<float>(g).data(), widen<float>(x).data(),
                                   widen<float>(b).data(), N, C, {});
    same_bits("forward", out, want);
    same_bits("dx", dx, dwant);
    same_bits("dbias", db, dbwant);
    std::vector<double> ref(x.size()), dref(x.size()), dbref(b.size());
    cpu::bias_gelu_backward<double>(dref.data(), dbref.data(), widen<double>(g).data(), widen<double>(x).data(),
                                    widen<double>(b).data(), N, C, {});
    near64("dbias against float64", db, dbref, 1e-4);
    on_one_and_two_threads([&] {
      cpu::bias_gelu_backward_bf16(dx.data(), db.data(), g.data(), x.data(), b.data(), N, C, {});
      std::vector<bf16> both = dx;
      both.insert(both.end(), db.begin(), db.end());
      return both;
    });
  }
}

TEST_CASE("bf16 kernels, LayerNorm and residual + LayerNorm: the float32 kernels' bits rounded once, near float64") {
  std::mt19937 rng(13);
  const float eps = 1e-5f;
  for (auto [N, C] : {std::pair<std::int64_t, std::int64_t>{3, 37}, {67, 130}}) {
    CAPTURE(N);
    CAPTURE(C);
    const std::vector<bf16> x = random_bf16(N * C, rng), r = random_bf16(N * C, rng), g = random_bf16(N * C, rng),
                            dres = random_bf16(N * C, rng), w = random_bf16(C, rng), b = random_bf16(C, rng);
    const std::vector<float> w32 = widen<float>(w), b32 = widen<float>(b);
    // LayerNorm, mean and rstd bf16.
    std::vector<bf16> out(x.size()), mean(N), rstd(N), dx(x.size()), dw(C), db(C);
    cpu::layernorm_forward_bf16(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, bf16(eps), {});
    cpu::layernorm_backward_bf16(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(),
                                 rstd.data(), N, C, {});
    std::vector<float> y(x.size()), m(N), s(N), d(x.size()), dw32(C), db32(C);
    const float eps_bf16 = static_cast<float>(bf16(eps));
    cpu::layernorm_forward<float>(y.data(), m.data(), s.data(), widen<float>(x).data(), w32.data(), b32.data(), N, C,
                                  eps_bf16, {});
    same_bits("layernorm out", out, y);
    same_bits("layernorm mean", mean, m);
    same_bits("layernorm rstd", rstd, s);
    std::vector<double> y64(x.size()), m64(N), s64(N);
    cpu::layernorm_forward<double>(y64.data(), m64.data(), s64.data(), widen<double>(x).data(), widen<double>(w).data(),
                                   widen<double>(b).data(), N, C, eps_bf16, {});
    near64("layernorm out against float64", out, y64, 1e-4);
    // The backward: the mean from x in float32 as the forward takes it (so m is the forward's
    // float32 mean, before rounding), rstd as saved (bf16).
    for (std::int64_t n = 0; n < N; ++n) s[n] = static_cast<float>(rstd[n]);
    cpu::layernorm_backward<float>(d.data(), dw32.data(), db32.data(), widen<float>(g).data(), widen<float>(x).data(),
                                   w32.data(), m.data(), s.data(), N, C, {});
    same_bits("layernorm dx", dx, d);
    same_bits("layernorm dweight", dw, dw32);
    same_bits("layernorm dbias", db, db32);

    // Residual + LayerNorm: sum rounded once, mean and rstd float32, dsum = dres + dx rounded once.
    std::vector<bf16> sum(x.size()), rout(x.size()), dsum(x.size()), rdw(C), rdb(C);
    std::vector<float> rm(N), rs(N);
    cpu::residual_layernorm_forward_bf16(sum.data(), rout.data(), rm.data(), rs.data(), x.data(), r.data(), w.data(),
                                         b.data(), N, C, eps, {});
    cpu::residual_layernorm_backward_bf16(dsum.data(), rdw.data(), rdb.data(), g.data(), dres.data(), sum.data(),
                                          w.data(), rm.data(), rs.data(), N, C, {});
    std::vector<float> sum32(x.size()), y32(x.size()), m32(N), s32(N);
    for (std::size_t i = 0; i < sum32.size(); ++i)
      sum32[i] = static_cast<float>(bf16(static_cast<float>(x[i]) + static_cast<float>(r[i])));
    cpu::layernorm_forward<float>(y32.data(), m32.data(), s32.data(), sum32.data(), w32.data(), b32.data(), N, C, eps, {});
    same_bits("residual sum", sum, sum32);
    same_bits("residual out", rout, y32);
    CHECK(rm == m32);
    CHECK(rs == s32);
    cpu::layernorm_backward<float>(d.data(), dw32.data(), db32.data(), widen<float>(g).data(), sum32.data(), w32.data(),
                                   m32.data(), s32.data(), N, C, {});
    for (std::size_t i = 0; i < d.size(); ++i) d[i] += static_cast<float>(dres[i]);
    same_bits("residual dsum", dsum, d);
    same_bits("residual dweight", rdw, dw32);
    same_bits("residual dbias", rdb, db32);
    std::vector<double> d64(x.size()), dw64(C), db64(C);
    std::vector<double> sum64(sum32.begin(), sum32.end()), y2(x.size()), mm(N), ss(N);
    cpu::layernorm_forward<double>(y2.data(), mm.data(), ss.data(), sum64.data(), widen<double>(w).data(),
                                   widen<double>(b).data(), N, C, static_cast<double>(eps), {});
    cpu::layernorm_backward<double>(d64.data(), dw64.data(), db64.data(), widen<double>(g).data(), sum64.data(),
                                    widen<double>(w).data(), mm.data(), ss.data(), N, C, {});
    for (std::size_t i = 0; i < d64.size(); ++i) d64[i] += static_cast<float>(dres[i]);
    near64("residual dsum against float64", dsum, d64, 1e-4);
    near64("residual dweight against float64", rdw, dw64, 1e-3);
    on_one_and_two_threads([&] {
      cpu::residual_layernorm_backward_bf16(dsum.data(), rdw.data(), rdb.data(), g.data(), dres.data(), sum.data(),
                                            w.data(), rm.data(), rs.data(), N, C, {});
      std::vector<bf16> all = dsum;
      all.insert(all.end(), rdw.begin(), rdw.end());
      return all;
    });
  }
}

TEST_CASE("bf16 kernels, attention on bf16 data: float32 sums near float64, out rounded once, any thread count") {
  std::mt19937 rng(14);
  const kernels::AttentionShape shape = kernels::AttentionShape::of(3, 37, 7);
  const std::size_t n = static_cast<std::size_t>(3 * 37 * 7), rows = 3 * 37;
  const std::vector<bf16> q = random_bf16(n, rng), k = random_bf16(n, rng), v = random_bf16(n, rng),
                          g = random_bf16(n, rng);
  std::vector<bf16> out(n);
  std::vector<float> lse(rows);
  cpu::attention_forward_bf16_memory(out.data(), lse.data(), q.data(), k.data(), v.data(), shape, {});
  std::vector<double> o64(n), lse64(rows);
  cpu::attention_forward<double>(o64.data(), lse64.data(), widen<double>(q).data(), widen<double>(k).data(),
                                 widen<double>(v).data(), shape, {});
  near64("out against float64", out, o64, 1e-5);
  // Float32's sums: lse and the gradients within a few float32 ulps of float64's, far inside bf16's.
  auto near32 = [](const char* what, const std::vector<float>& got, const std::vector<double>& want) {
    INFO(what);
    double worst = 0.0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - want[i]) / (1e-5 * (1.0 + std::abs(want[i]))));
    CHECK(worst <= 1.0);
  };
  near32("lse against float64", lse, lse64);
  std::vector<float> dq(n), dk(n), dv(n);
  std::vector<double> dq64(n), dk64(n), dv64(n);
  cpu::attention_backward_bf16_memory(dq.data(), dk.data(), dv.data(), g.data(), q.data(), k.data(), v.data(),
                                      out.data(), lse.data(), shape, {});
  cpu::attention_backward<double>(dq64.data(), dk64.data(), dv64.data(), widen<double>(g).data(),
                                  widen<double>(q).data(), widen<double>(k).data(), widen<double>(v).data(),
                                  widen<double>(out).data(), lse64.data(), shape, {});
  near32("dq against float64", dq, dq64);
  near32("dk against float64", dk, dk64);
  near32("dv against float64", dv, dv64);
  on_one_and_two_threads([&] {  // heads are independent: one thread each, the same bits
    cpu::attention_forward_bf16_memory(out.data(), lse.data(), q.data(), k.data(), v.data(), shape, {});
    return out;
  });
}

TEST_CASE("bf16 kernels, cross-entropy: the float32 kernels' bits on each widened row, the gradient rounded once") {
  std::mt19937 rng(15);
  const std::int64_t N = 9, V = 67;
  const std::vector<bf16> logits = random_bf16(N * V, rng, 3.0f), dl = random_bf16(N, rng);
  std::vector<std::int32_t> targets(N);
  for (std::int64_t i = 0; i < N; ++i) targets[i] = static_cast<std::int32_t>((i * 29) % V);
  targets[4] = -100;  // ignored
  const std::vector<float> l32 = widen<float>(logits);
  std::vector<bf16> losses(N), lse(N), d(N * V);
  std::vector<float> fl(N), fe(N), fd(N * V), flosses(N), fdl(N * V);
  cpu::cross_entropy_forward_bf16(losses.data(), lse.data(), logits.data(), targets.data(), N, V, -100, {});
  cpu::cross_entropy_forward<float>(fl.data(), fe.data(), l32.data(), targets.data(), N, V, -100, {});
  same_bits("losses", losses, fl);
  same_bits("lse", lse, fe);
  cpu::cross_entropy_backward_bf16(d.data(), dl.data(), logits.data(), lse.data(), targets.data(), N, V, -100, {});
  cpu::cross_entropy_backward<float>(fd.data(), widen<float>(dl).data(), l32.data(), fe.data(), targets.data(), N, V,
                                     -100, {});
  same_bits("dlogits", d, fd);
  std::vector<float> losses_fused(N);
  cpu::cross_entropy_fused_bf16(losses_fused.data(), d.data(), logits.data(), targets.data(), N, V, -100, 0.125f, {});
  cpu::cross_entropy_fused_rowwise(flosses.data(), fdl.data(), l32.data(), targets.data(), N, V, -100, 0.125f, {});
  CHECK(losses_fused == flosses);
  same_bits("fused dlogits", d, fdl);
}

TEST_CASE("bf16 add, sub, mul, div on the CPU: float32 math rounded once, ties to even, broadcasting as float32") {
  std::mt19937 rng(16);
  const Tensor a = from_vector(widen<float>(random_bf16(5 * 37, rng)), {5, 37}).to(kBFloat16);
  const Tensor b = from_vector(widen<float>(random_bf16(5 * 37, rng)), {5, 37}).to(kBFloat16);
  const Tensor row = from_vector(widen<float>(random_bf16(37, rng)), {37}).to(kBFloat16);
  auto check = [](const char* what, const Tensor& got, const Tensor& want32) {
    INFO(what);
    CHECK(got.dtype() == kBFloat16);
    const std::vector<float> g = got.to_vector<float>(), w = want32.to_vector<float>();
    std::size_t differ = 0;
    for (std::size_t i = 0; i < g.size(); ++i) differ += static_cast<float>(bf16(w[i])) != g[i];
    CHECK(differ == 0);
  };
  const Tensor a32 = a.to(kFloat32), b32 = b.to(kFloat32), row32 = row.to(kFloat32);
  check("add", ops::add(a, b), ops::add(a32, b32));
  check("sub", ops::sub(a, row), ops::sub(a32, row32));
  check("mul", ops::mul(row, b), ops::mul(row32, b32));
  check("div", ops::div(a, b), ops::div(a32, b32));
  check("a transposed view", ops::add(a.transpose(0, 1), b.transpose(0, 1)), ops::add(a32.transpose(0, 1), b32.transpose(0, 1)));
  // Ties, in the vectorized loop: 1 + 2^-8 is halfway between 1 and 1 + 2^-7, and rounds to the
  // even 1; (1 + 2^-7) + 2^-8 to the even 1 + 2^-6. NaN stays NaN, inf + -inf is NaN.
  std::vector<float> x(40, 1.0f), y(40, std::ldexp(1.0f, -8));
  x[17] = 1.0f + std::ldexp(1.0f, -7);
  x[20] = NAN;
  x[21] = INFINITY, y[21] = -INFINITY;
  const std::vector<float> sum =
      ops::add(from_vector(x, {40}).to(kBFloat16), from_vector(y, {40}).to(kBFloat16)).to_vector<float>();
  CHECK(sum[0] == 1.0f);
  CHECK(sum[17] == 1.0f + std::ldexp(1.0f, -6));
  CHECK(std::isnan(sum[20]));
  CHECK(std::isnan(sum[21]));
  CHECK(sum[39] == 1.0f);
}
