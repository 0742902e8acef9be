// tests/emulator/test_fused_kernels.cpp: the GPU kernels of chapters 12, 13 and 16 (GELU and
// bias + GELU, LayerNorm and residual + LayerNorm, cross-entropy and the fused classifier,
// AdamW, multi-tensor AdamW and SGD), every variant against the CPU reference on the emulator;
// then the fused ops (ops::bias_gelu, ops::residual_layer_norm, ops::cross_entropy_fused):
// gradient checks on the CPU in float64, the same ops on Device::cuda() against the CPU, and
// AdamW on the device (the multi-tensor path) against AdamW on the CPU.
// Chapters 12, 13 and 16. Read before: kernels/cuda/gelu.cu, layernorm.cu, crossentropy.cu,
// adamw.cu; tests/emulator/test_device_ops.cpp.
//
// The variants are called directly, brrr::kernels::emu::<op><variant>, with host pointers.
// Shapes are small (the emulator switches fibers at ~1 us each) but ragged: C = 1, 3, 33,
// 385, rows that do not fill a block, pointers one float off 16-byte alignment.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/cuda.h"
#include "brrr/kernels.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/crossentropy.h"
#include "kernels/cuda/gelu.h"
#include "kernels/cuda/layernorm.h"
#include "kernels/cuda/residual_layernorm.h"
#include "kernels/cuda/simt.h"

namespace emu = brrr::kernels::emu;
namespace cpu = brrr::kernels::cpu;
using brrr::kernels::AdamWParams;
using brrr::kernels::AdamWTensor;
using brrr::kernels::SGDParams;

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937& rng, double scale = 1.0, double shift = 0.0) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<T> values(n);
  for (T& v : values) v = static_cast<T>(normal(rng) * scale + shift);
  return values;
}

// The largest |a - b| / max(|b|, 1) over n values (absolute error near 0, relative above 1).
// NaN against anything but NaN is infinitely wrong.
template <class T>
double max_error(const T* a, const T* b, std::int64_t n) {
  double worst = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
      continue;
    }
    const double x = a[i], y = b[i];
    worst = std::max(worst, std::fabs(x - y) / std::max(std::fabs(y), 1.0));
  }
  return worst;
}
template <class T>
double max_error(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  return max_error(a.data(), b.data(), static_cast<std::int64_t>(a.size()));
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// Tolerances: float32 kernels sum in float where the CPU sums in double.
template <class T>
constexpr double tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

constexpr float kSentinel = -12345.0f;

}  // namespace

// =============================================================================================
// GELU (chapter 12)

TEST_CASE("gelu forward and backward: variants 1 and 2 match the CPU, ragged n, misaligned, nothing written past n") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(11);
  for (std::int64_t n : {0, 1, 3, 33, 385, 4099, 20001}) {
    for (int offset : {0, 1}) {  // offset 1: no float4 is 16-byte aligned, variant 2 runs its scalar loop
      CAPTURE(n);
      CAPTURE(offset);
      const std::vector<float> x = random_values<float>(n + 1, rng, 3.0), dout = random_values<float>(n + 1, rng);
      std::vector<float> ref(n + 1), ref_dx(n + 1);
      cpu::gelu_forward<float>(ref.data() + offset, x.data() + offset, n, nullptr);
      cpu::gelu_backward<float>(ref_dx.data() + offset, dout.data() + offset, x.data() + offset, n, nullptr);
      using Forward = void (*)(float*, const float*, std::int64_t, brrr::kernels::Stream);
      using Backward = void (*)(float*, const float*, const float*, std::int64_t, brrr::kernels::Stream);
      const std::pair<Forward, Backward> variants[] = {{&emu::gelu_forward1<float>, &emu::gelu_backward1<float>},
                                                       {&emu::gelu_forward2, &emu::gelu_backward2}};
      for (int v = 0; v < 2; ++v) {
        CAPTURE(v + 1);
        std::vector<float> out(n + 2, kSentinel), dx(n + 2, kSentinel);
        variants[v].first(out.data() + offset, x.data() + offset, n, nullptr);
        variants[v].second(dx.data() + offset, dout.data() + offset, x.data() + offset, n, nullptr);
        CHECK(max_error(out.data() + offset, ref.data() + offset, n) < 1e-6);
        CHECK(max_error(dx.data() + offset, ref_dx.data() + offset, n) < 1e-5);  // the CPU's tanh_vec: a few ulp
        CHECK(out[n + offset] == kSentinel);
        CHECK(dx[n + offset] == kSentinel);
        if (offset) CHECK(out[0] == kSentinel);
      }
    }
  }
  // float64: variant 1 against the CPU's std::exp and std::tanh
  const std::vector<double> x = random_values<double>(1001, rng, 3.0), dout = random_values<double>(1001, rng);
  std::vector<double> ref(1001), out(1001), ref_dx(1001), dx(1001);
  cpu::gelu_forward<double>(ref.data(), x.data(), 1001, nullptr);
  emu::gelu_forward1<double>(out.data(), x.data(), 1001, nullptr);
  cpu::gelu_backward<double>(ref_dx.data(), dout.data(), x.data(), 1001, nullptr);
  emu::gelu_backward1<double>(dx.data(), dout.data(), x.data(), 1001, nullptr);
  CHECK(max_error(out, ref) < 1e-14);
  CHECK(max_error(dx, ref_dx) < 1e-14);
}

namespace {
template <class T>
void check_bias_gelu(std::int64_t N, std::int64_t C, int offset, std::mt19937& rng) {
  CAPTURE(N);
  CAPTURE(C);
  CAPTURE(offset);
  const std::int64_t n = N * C;
  const std::vector<T> x = random_values<T>(n + 1, rng, 2.0), dout = random_values<T>(n + 1, rng);
  const std::vector<T> bias = random_values<T>(C + 1, rng);
  std::vector<T> ref(n + 1), ref_dx(n + 1), ref_db(C + 1);
  cpu::bias_gelu_forward<T>(ref.data() + offset, x.data() + offset, bias.data() + offset, N, C, nullptr);
  cpu::bias_gelu_backward<T>(ref_dx.data() + offset, ref_db.data() + offset, dout.data() + offset, x.data() + offset,
                             bias.data() + offset, N, C, nullptr);
  const auto check_forward = [&](auto forward) {
    std::vector<T> out(n + 1, T(kSentinel));
    forward(out.data() + offset, x.data() + offset, bias.data() + offset, N, C, nullptr);
    CHECK(max_error(out.data() + offset, ref.data() + offset, n) < tolerance<T>());
  };
  check_forward(&emu::bias_gelu_forward1<T>);
  if constexpr (std::is_same_v<T, float>) check_forward(&emu::bias_gelu_forward2);
  for (auto backward : {&emu::bias_gelu_backward1<T>, &emu::bias_gelu_backward2<T>}) {
    std::vector<T> dx(n + 1, T(kSentinel)), db(C + 1, T(NAN));  // dbias is overwritten, NaN or not
    backward(dx.data() + offset, db.data() + offset, dout.data() + offset, x.data() + offset, bias.data() + offset, N,
             C, nullptr);
    CHECK(max_error(dx.data() + offset, ref_dx.data() + offset, n) < tolerance<T>());
    CHECK(max_error(db.data() + offset, ref_db.data() + offset, C) < tolerance<T>() * 10);
    // the same inputs give the same bits again (no atomics)
    std::vector<T> dx2(n + 1, T(kSentinel)), db2(C + 1, T(NAN));
    backward(dx2.data() + offset, db2.data() + offset, dout.data() + offset, x.data() + offset, bias.data() + offset,
             N, C, nullptr);
    CHECK(same_bits(db, db2));
  }
}
}  // namespace

TEST_CASE("bias_gelu forward and backward: every variant matches the CPU, ragged C and N, several row chunks") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(12);
  struct Shape {
    std::int64_t N, C;
  };
  for (const Shape s : {Shape{1, 1}, Shape{7, 3}, Shape{5, 33}, Shape{3, 385}, Shape{2, 384}, Shape{130, 5},
                        Shape{200, 40}, Shape{0, 6}})
    for (int offset : {0, 1}) check_bias_gelu<float>(s.N, s.C, offset, rng);
  check_bias_gelu<double>(70, 33, 0, rng);
}

// =============================================================================================
// LayerNorm (chapter 13)

namespace {
template <class T>
void check_layernorm(std::int64_t N, std::int64_t C, bool with_bias, int offset, std::mt19937& rng) {
  CAPTURE(N);
  CAPTURE(C);
  CAPTURE(with_bias);
  CAPTURE(offset);
  const std::int64_t n = N * C;
  const T eps = T(1e-5);
  const std::vector<T> x = random_values<T>(n + 1, rng, 2.0, 0.5), residual = random_values<T>(n + 1, rng);
  const std::vector<T> weight = random_values<T>(C + 1, rng, 0.5, 1.0), bias = random_values<T>(C + 1, rng);
  const std::vector<T> dout = random_values<T>(n + 1, rng);
  const T* b = with_bias ? bias.data() + offset : nullptr;
  std::vector<T> ref(n + 1), ref_mean(N + 1), ref_rstd(N + 1), ref_sum(n + 1);
  cpu::layernorm_forward<T>(ref.data() + offset, ref_mean.data(), ref_rstd.data(), x.data() + offset,
                            weight.data() + offset, b, N, C, eps, nullptr);

  using Forward = void (*)(T*, T*, T*, const T*, const T*, const T*, std::int64_t, std::int64_t, T,
                           brrr::kernels::Stream);
  std::vector<Forward> forwards = {&emu::layernorm_forward1<T>, &emu::layernorm_forward2<T>};
  if constexpr (std::is_same_v<T, float>) forwards.push_back(&emu::layernorm_forward3);
  for (std::size_t v = 0; v < forwards.size(); ++v) {
    CAPTURE(v + 1);
    std::vector<T> out(n + 1, T(kSentinel)), mean(N + 1, T(kSentinel)), rstd(N + 1, T(kSentinel));
    forwards[v](out.data() + offset, mean.data(), rstd.data(), x.data() + offset, weight.data() + offset, b, N, C, eps,
                nullptr);
    CHECK(max_error(out.data() + offset, ref.data() + offset, n) < tolerance<T>());
    CHECK(max_error(mean.data(), ref_mean.data(), N) < tolerance<T>());
    CHECK(max_error(rstd.data(), ref_rstd.data(), N) < tolerance<T>() * (C == 1 ? 100 : 1));  // 1/sqrt(eps) = 316
    CHECK(mean[N] == T(kSentinel));
  }

  // residual + LayerNorm: sum = x + residual, then LayerNorm of sum
  cpu::residual_layernorm_forward<T>(ref_sum.data() + offset, ref.data() + offset, ref_mean.data(), ref_rstd.data(),
                                     x.data() + offset, residual.data() + offset, weight.data() + offset, b, N, C, eps,
                                     nullptr);
  using Residual = void (*)(T*, T*, T*, T*, const T*, const T*, const T*, const T*, std::int64_t, std::int64_t, T,
                            brrr::kernels::Stream);
  std::vector<Residual> residuals = {&emu::residual_layernorm_forward1<T>, &emu::residual_layernorm_forward2<T>};
  if constexpr (std::is_same_v<T, float>) residuals.push_back(&emu::residual_layernorm_forward3);
  for (std::size_t v = 0; v < residuals.size(); ++v) {
    CAPTURE(v + 1);
    std::vector<T> sum(n + 1, T(kSentinel)), out(n + 1, T(kSentinel)), mean(N + 1), rstd(N + 1);
    residuals[v](sum.data() + offset, out.data() + offset, mean.data(), rstd.data(), x.data() + offset,
                 residual.data() + offset, weight.data() + offset, b, N, C, eps, nullptr);
    CHECK(max_error(sum.data() + offset, ref_sum.data() + offset, n) == 0.0);  // one rounding on both
    CHECK(max_error(out.data() + offset, ref.data() + offset, n) < tolerance<T>());
    CHECK(max_error(mean.data(), ref_mean.data(), N) < tolerance<T>());
  }

  // backward, from the CPU's mean and rstd (of x, not of the sum: recompute them)
  cpu::layernorm_forward<T>(ref.data() + offset, ref_mean.data(), ref_rstd.data(), x.data() + offset,
                            weight.data() + offset, b, N, C, eps, nullptr);
  std::vector<T> ref_dx(n + 1), ref_dw(C + 1), ref_db(C + 1);
  cpu::layernorm_backward<T>(ref_dx.data() + offset, ref_dw.data() + offset, ref_db.data() + offset,
                             dout.data() + offset, x.data() + offset, weight.data() + offset, ref_mean.data(),
                             ref_rstd.data(), N, C, nullptr);
  using Backward = void (*)(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, std::int64_t, std::int64_t,
                            brrr::kernels::Stream);
  std::vector<Backward> backwards = {&emu::layernorm_backward1<T>, &emu::layernorm_backward2<T>};
  if constexpr (std::is_same_v<T, float>) backwards.push_back(&emu::layernorm_backward3);
  for (std::size_t v = 0; v < backwards.size(); ++v) {
    CAPTURE(v + 1);
    const Backward backward = backwards[v];
    std::vector<T> dx(n + 1, T(kSentinel)), dw(C + 1, T(NAN)), db(C + 1, T(NAN));  // overwritten, not added to
    backward(dx.data() + offset, dw.data() + offset, with_bias ? db.data() + offset : nullptr, dout.data() + offset,
             x.data() + offset, weight.data() + offset, ref_mean.data(), ref_rstd.data(), N, C, nullptr);
    const double scale = C == 1 ? 1e4 : 1.0;  // C = 1: dx is rounding noise times rstd = 316
    CHECK(max_error(dx.data() + offset, ref_dx.data() + offset, n) < tolerance<T>() * 10 * scale);
    CHECK(max_error(dw.data() + offset, ref_dw.data() + offset, C) < tolerance<T>() * 10);
    if (with_bias) CHECK(max_error(db.data() + offset, ref_db.data() + offset, C) < tolerance<T>() * 10);
    else CHECK(std::isnan(db[offset]));  // a null dbias is not written
  }
}
}  // namespace

TEST_CASE("layernorm forward, residual forward and backward: every variant matches the CPU, float32") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(21);
  struct Shape {
    std::int64_t N, C;
  };
  // C = 4, 64, 384, 768: the forward's variant 3 float4 path (1, 1, 4, 8 float4s per lane); C
  // = 1, 3, 33, 385, 2052: its fallback to variant 2; N = 37: the last block of 8 rows is not
  // full. The backward's variant 3 runs kVecs = 1 (C = 4, 64), 2 (200), 3 (384), 4 (400), 6
  // (768) and 8 (1000, 1024), ragged (C = 200, 400, 1000 mask off part of the last float4
  // slot); C = 1028 is just too wide for it (variant 2). N = 2053: more rows than its 256
  // blocks of 8 warps, so the warps' grid-stride loops wrap, some warps taking one row more.
  for (const Shape s : {Shape{5, 1}, Shape{7, 3}, Shape{37, 33}, Shape{9, 385}, Shape{11, 384}, Shape{3, 4},
                        Shape{13, 64}, Shape{3, 768}, Shape{2, 2052}, Shape{0, 8}, Shape{5, 200}, Shape{3, 400},
                        Shape{4, 1000}, Shape{2, 1024}, Shape{2, 1028}, Shape{2053, 8}, Shape{37, 768}})
    check_layernorm<float>(s.N, s.C, true, 0, rng);
  check_layernorm<float>(9, 384, false, 0, rng);  // no bias
  check_layernorm<float>(6, 64, true, 1, rng);    // misaligned: variant 3 falls back
  check_layernorm<float>(9, 1100, true, 0, rng);  // the backward's 8 warp slices exceed 64 KiB: 4 warps
}

TEST_CASE("layernorm forward, residual forward and backward: every variant matches the CPU, float64") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(22);
  check_layernorm<double>(37, 33, true, 0, rng);
  check_layernorm<double>(5, 600, false, 0, rng);  // 4 warps in the backward (8 slices of 9.6 KB doubles)
}

TEST_CASE("layernorm backward variants 2 and 3: the same inputs give the same bits twice") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(23);
  using Backward = void (*)(float*, float*, float*, const float*, const float*, const float*, const float*,
                            const float*, std::int64_t, std::int64_t, brrr::kernels::Stream);
  struct Case {
    Backward backward;
    std::int64_t N, C;
  };
  // variant 3 at (2100, 72): 256 blocks, some warps take two rows; (45, 768): kVecs = 6
  for (const Case k : {Case{&emu::layernorm_backward2<float>, 45, 70}, Case{&emu::layernorm_backward3, 2100, 72},
                       Case{&emu::layernorm_backward3, 45, 768}}) {
    const std::int64_t N = k.N, C = k.C;
    CAPTURE(N);
    CAPTURE(C);
    const std::vector<float> x = random_values<float>(N * C, rng), dout = random_values<float>(N * C, rng);
    const std::vector<float> w = random_values<float>(C, rng), mean = random_values<float>(N, rng, 0.1);
    const std::vector<float> rstd = random_values<float>(N, rng, 0.1, 1.0);
    std::vector<float> dx1(N * C), dw1(C), db1(C), dx2(N * C), dw2(C), db2(C);
    k.backward(dx1.data(), dw1.data(), db1.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C,
               nullptr);
    k.backward(dx2.data(), dw2.data(), db2.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C,
               nullptr);
    CHECK(same_bits(dx1, dx2));
    CHECK(same_bits(dw1, dw2));
    CHECK(same_bits(db1, db2));
  }
}

// =============================================================================================
// Cross-entropy (chapter 16)

namespace {
template <class T>
void check_cross_entropy(std::int64_t N, std::int64_t V, int offset, std::mt19937& rng, double scale = 2.0) {
  CAPTURE(N);
  CAPTURE(V);
  CAPTURE(offset);
  const std::int64_t ignore_index = -100;
  std::vector<T> logits = random_values<T>(N * V + 1, rng, scale);
  if (V > 2) logits[offset + 1] = static_cast<T>(-INFINITY);  // a masked logit in row 0
  std::uniform_int_distribution<std::int32_t> pick(0, static_cast<std::int32_t>(V - 1));
  std::vector<std::int32_t> targets(N);
  for (auto& t : targets) t = pick(rng);
  if (N > 1) targets[1] = static_cast<std::int32_t>(ignore_index);
  if (V > 2) targets[0] = static_cast<std::int32_t>(V - 1);  // not the masked one
  const std::vector<T> dlosses = random_values<T>(N, rng);
  const T* x = logits.data() + offset;

  std::vector<T> ref_losses(N), ref_lse(N), losses(N, T(kSentinel)), lse(N, T(kSentinel));
  cpu::cross_entropy_forward<T>(ref_losses.data(), ref_lse.data(), x, targets.data(), N, V, ignore_index, nullptr);
  emu::cross_entropy_forward1<T>(losses.data(), lse.data(), x, targets.data(), N, V, ignore_index, nullptr);
  CHECK(max_error(losses, ref_losses) < tolerance<T>());
  CHECK(max_error(lse, ref_lse) < tolerance<T>());
  if (N > 1) CHECK(losses[1] == T(0));

  std::vector<T> ref_d(N * V + 1), d(N * V + 1, T(kSentinel));
  cpu::cross_entropy_backward<T>(ref_d.data() + offset, dlosses.data(), x, ref_lse.data(), targets.data(), N, V,
                                 ignore_index, nullptr);
  emu::cross_entropy_backward1<T>(d.data() + offset, dlosses.data(), x, ref_lse.data(), targets.data(), N, V,
                                  ignore_index, nullptr);
  CHECK(max_error(d.data() + offset, ref_d.data() + offset, N * V) < tolerance<T>() * 0.1);

  // fused: dloss 0.25 for every row, as a mean over 4 rows would give
  const T dloss = T(0.25);
  std::vector<T> fused_losses(N, T(kSentinel)), fd(N * V + 1, T(kSentinel));
  cpu::cross_entropy_fused<T>(ref_losses.data(), ref_d.data() + offset, x, targets.data(), N, V, ignore_index, dloss,
                              nullptr);
  emu::cross_entropy_fused2<T>(fused_losses.data(), fd.data() + offset, x, targets.data(), N, V, ignore_index, dloss,
                               nullptr);
  CHECK(max_error(fused_losses, ref_losses) < tolerance<T>());
  CHECK(max_error(fd.data() + offset, ref_d.data() + offset, N * V) < tolerance<T>() * 0.1);
  if (N > 1)
    for (std::int64_t v = 0; v < V; ++v) REQUIRE(fd[offset + V + v] == T(0));  // the ignored row
  // variant 3 (the row in shared memory, float only; variant 2 where it does not apply): the
  // same arithmetic in the same order, so the same bits
  if constexpr (std::is_same_v<T, float>) {
    std::vector<T> losses3(N, T(kSentinel)), d3(N * V + 1, T(kSentinel));
    emu::cross_entropy_fused3(losses3.data(), d3.data() + offset, x, targets.data(), N, V, ignore_index, dloss,
                              nullptr);
    CHECK(losses3 == fused_losses);
    CHECK(std::equal(d3.begin() + offset, d3.begin() + offset + N * V, fd.begin() + offset));
  }
  // each row's gradient sums to 0 (softmax sums to 1, minus the one-hot)
  double row_sum = 0.0;
  for (std::int64_t v = 0; v < V; ++v) row_sum += fd[offset + v];
  CHECK(std::fabs(row_sum) < 1e-5);
}
}  // namespace

TEST_CASE("cross_entropy forward, backward and fused: match the CPU, V = 4096 and ragged V, ignore_index, -inf") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(31);
  check_cross_entropy<float>(3, 4096, 0, rng);   // float4 path of the fused kernel
  check_cross_entropy<float>(3, 4096, 1, rng);   // misaligned: scalar
  check_cross_entropy<float>(4, 1001, 0, rng);   // ragged V: scalar
  check_cross_entropy<float>(5, 37, 0, rng, 30.0);  // large logits: exp would overflow without the max
  check_cross_entropy<float>(2, 1, 0, rng);      // one class: loss 0, gradient 0
  check_cross_entropy<float>(6, 8, 0, rng);
  check_cross_entropy<double>(3, 1001, 0, rng);
}

TEST_CASE("cross_entropy fused at GPT-2's padded vocabulary, V = 50,304") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(32);
  check_cross_entropy<float>(2, 50304, 0, rng);  // 12 or 13 float4s a thread: 4 at a time, then 1
  check_cross_entropy<float>(2, 28004, 0, rng);  // 6 or 7: 4, then 2, then 1
}

// Variant 5, on bf16 data: against the CPU's kernel on the same bf16 logits (both widen them
// exactly and sum in float32, in different orders: the losses agree to float32's rounding, the
// gradients to one bf16 rounding), and in place (dlogits == logits) equal to out of place.
// Rows of 5, 1000, 1001 and GPT-2's padded 50,304 values: the scalar and the 16-byte paths, the
// ignored row, -inf logits; logits misaligned by one value take the scalar path too.
TEST_CASE("cross_entropy fused on bf16 data (variant 5): matches the CPU, in place equals out of place") {
  const brrr::simt::HostMemoryKernels host_memory;
  std::mt19937 rng(55);
  for (const auto& [N, V, offset] : {std::tuple{3, 5, 0}, {6, 1000, 0}, {6, 1000, 1}, {6, 1001, 0}, {2, 50304, 0}}) {
    CAPTURE(N);
    CAPTURE(V);
    CAPTURE(offset);
    const std::int64_t n = static_cast<std::int64_t>(N) * V;
    std::vector<brrr::bf16> logits(n + offset);
    for (auto& x : logits) x = brrr::bf16(static_cast<float>(std::normal_distribution<double>(0.0, 2.0)(rng)));
    if (V > 5) logits[offset + V + 3] = brrr::bf16(-INFINITY);  // row 1 has a -inf logit: its gradient is 0
    std::vector<std::int32_t> targets(N);
    for (int r = 0; r < N; ++r) targets[r] = static_cast<std::int32_t>(rng() % V);
    if (targets[1] == 3) targets[1] = 4;  // not the -inf logit (an infinite loss)
    targets[N - 1] = -100;                // an ignored row: loss 0, gradient 0
    const float dloss = 1.0f / static_cast<float>(N);
    std::vector<float> loss_cpu(N), loss_emu(N), loss_in_place(N);
    std::vector<brrr::bf16> d_cpu(n), d_emu(n + offset), in_place = logits;
    cpu::cross_entropy_fused_bf16(loss_cpu.data(), d_cpu.data(), logits.data() + offset, targets.data(), N, V, -100,
                                  dloss, nullptr);
    emu::cross_entropy_fused_bf16(loss_emu.data(), d_emu.data() + offset, logits.data() + offset, targets.data(), N,
                                  V, -100, dloss, nullptr);
    emu::cross_entropy_fused_bf16(loss_in_place.data(), in_place.data() + offset, in_place.data() + offset,
                                  targets.data(), N, V, -100, dloss, nullptr);
    CHECK(max_error(loss_emu.data(), loss_cpu.data(), N) < 1e-5);
    CHECK(loss_emu[N - 1] == 0.0f);
    double worst = 0.0;  // in units of the gradient's scale, dloss
    for (std::int64_t i = 0; i < n; ++i)
      worst = std::max(worst, std::abs(static_cast<double>(static_cast<float>(d_emu[offset + i])) -
                                       static_cast<double>(static_cast<float>(d_cpu[i]))) / dloss);
    CHECK(worst <= 1.0 / 128);  // one bf16 rounding of values of at most 1 (2^-8 relative, 2^-7 apart)
    CHECK(std::all_of(d_emu.begin() + offset + (N - 1) * V, d_emu.end(), [](brrr::bf16 x) { return x.bits == 0; }));
    if (V > 5) CHECK(static_cast<float>(d_emu[offset + V + 3]) == 0.0f);
    CHECK(std::memcmp(loss_in_place.data(), loss_emu.data(), sizeof(float) * N) == 0);
    CHECK(std::memcmp(in_place.data() + offset, d_emu.data() + offset, sizeof(brrr::bf16) * n) == 0);
  }
}

// LayerNorm's variant 5, residual + LayerNorm on bf16 data (residual_layernorm.cu), against the
// CPU's kernels on the same inputs. The stored sum is one rounding of the same float32 add on
// both: equal bit for bit. mean and rstd are float32 sums in different orders; out, dsum, dweight
// and dbias agree to one bf16 rounding (2^-8 relative, neighbours 2^-7 apart). C = 8 and 768,
// 264 (one lane's second 16 bytes), 1024 over two blocks: the 16-byte path; C = 100, pointers one
// value off, and C = 2048 in the backward: the scalar path. dres = nullptr is dres = 0, and two
// runs of the backward (the emulator shuffles the blocks' order) give the same bits.
static std::vector<float> widened(const std::vector<brrr::bf16>& v, std::size_t offset = 0) {
  std::vector<float> out;
  for (std::size_t i = offset; i < v.size(); ++i) out.push_back(static_cast<float>(v[i]));
  return out;
}

TEST_CASE("residual + LayerNorm on bf16 data (variant 5): forward and backward match the CPU") {
  const brrr::simt::HostMemoryKernels host_memory;
  std::mt19937 rng(18);
  const auto bf16s = [&](std::size_t n, double scale, double shift) {
    std::vector<brrr::bf16> out;
    for (double v : random_values<double>(n, rng, scale, shift)) out.push_back(brrr::bf16(static_cast<float>(v)));
    return out;
  };
  for (const auto& [N, C, offset] : {std::tuple{3, 8, 0}, {37, 768, 0}, {5, 100, 0}, {9, 264, 1}, {130, 1024, 0},
                                     {4, 2048, 0}}) {
    CAPTURE(N);
    CAPTURE(C);
    CAPTURE(offset);
    const std::size_t n = static_cast<std::size_t>(N) * C;
    const auto x = bf16s(n + offset, 2.0, 0.5), residual = bf16s(n + offset, 1.0, 0.0);
    const auto weight = bf16s(C, 0.2, 1.0), bias = bf16s(C, 0.2, 0.0);
    std::vector<brrr::bf16> sum_c(n), out_c(n), sum_e(n + offset), out_e(n + offset);
    std::vector<float> mean_c(N), rstd_c(N), mean_e(N), rstd_e(N);
    cpu::residual_layernorm_forward_bf16(sum_c.data(), out_c.data(), mean_c.data(), rstd_c.data(), x.data() + offset,
                                         residual.data() + offset, weight.data(), bias.data(), N, C, 1e-5f, nullptr);
    emu::residual_layernorm_forward_bf16(sum_e.data() + offset, out_e.data() + offset, mean_e.data(), rstd_e.data(),
                                         x.data() + offset, residual.data() + offset, weight.data(), bias.data(), N,
                                         C, 1e-5f, nullptr);
    CHECK(std::memcmp(sum_e.data() + offset, sum_c.data(), n * sizeof(brrr::bf16)) == 0);
    CHECK(max_error(mean_e.data(), mean_c.data(), N) < 1e-5);
    CHECK(max_error(rstd_e.data(), rstd_c.data(), N) < 1e-5);
    CHECK(max_error(widened(out_e, offset).data(), widened(out_c).data(), static_cast<std::int64_t>(n)) <= 1.0 / 128);

    const auto dout = bf16s(n + offset, 1.0, 0.0), dres = bf16s(n + offset, 1.0, 0.0);
    const std::vector<brrr::bf16> zeros(n + offset);
    std::vector<brrr::bf16> dsum_c(n), dw_c(C), db_c(C), dsum_e(n + offset), dw_e(C), db_e(C);
    cpu::residual_layernorm_backward_bf16(dsum_c.data(), dw_c.data(), db_c.data(), dout.data() + offset,
                                          dres.data() + offset, sum_c.data(), weight.data(), mean_c.data(),
                                          rstd_c.data(), N, C, nullptr);
    const auto backward = [&](std::vector<brrr::bf16>& dsum, std::vector<brrr::bf16>& dw, std::vector<brrr::bf16>& db,
                              const brrr::bf16* res) {
      emu::residual_layernorm_backward_bf16(dsum.data() + offset, dw.data(), db.data(), dout.data() + offset, res,
                                            sum_e.data() + offset, weight.data(), mean_c.data(), rstd_c.data(), N, C,
                                            nullptr);
    };
    backward(dsum_e, dw_e, db_e, dres.data() + offset);
    CHECK(max_error(widened(dsum_e, offset).data(), widened(dsum_c).data(), static_cast<std::int64_t>(n)) <= 1.0 / 128);
    CHECK(max_error(widened(dw_e).data(), widened(dw_c).data(), C) <= 1.0 / 128);
    CHECK(max_error(widened(db_e).data(), widened(db_c).data(), C) <= 1.0 / 128);
    std::vector<brrr::bf16> again(n + offset), dw_again(C), db_again(C), none(n + offset), dw_none(C), db_none(C);
    backward(again, dw_again, db_again, dres.data() + offset);
    CHECK(std::memcmp(again.data(), dsum_e.data(), again.size() * sizeof(brrr::bf16)) == 0);
    CHECK(std::memcmp(dw_again.data(), dw_e.data(), C * sizeof(brrr::bf16)) == 0);
    CHECK(std::memcmp(db_again.data(), db_e.data(), C * sizeof(brrr::bf16)) == 0);
    backward(none, dw_none, db_none, nullptr);
    backward(again, dw_again, db_again, zeros.data() + offset);
    CHECK(std::memcmp(again.data(), none.data(), again.size() * sizeof(brrr::bf16)) == 0);
    CHECK(std::memcmp(dw_none.data(), dw_e.data(), C * sizeof(brrr::bf16)) == 0);  // dres adds to dsum only
  }
}

// =============================================================================================
// AdamW and SGD (chapter 16)

namespace {
AdamWParams adamw_params(std::int64_t step, double weight_decay) {
  return AdamWParams{1e-2, 0.9, 0.95, 1e-8, weight_decay, step};
}

// param, grad, m, v of n values each, at an offset into their buffers.
template <class T>
struct Slot {
  std::vector<T> param, grad, m, v;
  int offset, grad_shift;  // grad starts grad_shift values further than the other three
  std::int64_t n;
  Slot(std::int64_t n_, int offset_, std::mt19937& rng, int grad_shift_ = 0)
      : offset(offset_), grad_shift(grad_shift_), n(n_) {
    param = random_values<T>(n + offset, rng);
    grad = random_values<T>(n + offset + grad_shift, rng);
    m = random_values<T>(n + offset, rng, 0.1);
    v = random_values<T>(n + offset, rng, 0.01);
    for (T& x : v) x = x * x;  // second moments are >= 0
  }
  AdamWTensor<T> tensor(double weight_decay) {
    return {param.data() + offset, grad.data() + offset + grad_shift, m.data() + offset, v.data() + offset, n,
            weight_decay};
  }
};
}  // namespace

TEST_CASE("adamw_step variants 1 and 2 match the CPU over three steps, ragged n, misaligned") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(41);
  for (std::int64_t n : {0, 1, 3, 1001, 4099}) {
    for (int offset : {0, 1}) {
      CAPTURE(n);
      CAPTURE(offset);
      Slot<float> ref(n, offset, rng);
      Slot<float> one = ref, two = ref;
      for (std::int64_t step = 1; step <= 3; ++step) {
        const AdamWParams hp = adamw_params(step, 0.1);
        const AdamWTensor<float> r = ref.tensor(0.1), a = one.tensor(0.1), b = two.tensor(0.1);
        cpu::adamw_step<float>(r.param, r.grad, r.m, r.v, n, hp, nullptr);
        emu::adamw_step1<float>(a.param, a.grad, a.m, a.v, n, hp, nullptr);
        emu::adamw_step2(b.param, b.grad, b.m, b.v, n, hp, nullptr);
      }
      // An FMA here or there is the only difference allowed (see adamw.cu): a few ulp.
      CHECK(max_error(one.param, ref.param) < 1e-6);
      CHECK(max_error(one.m, ref.m) < 1e-6);
      CHECK(max_error(one.v, ref.v) < 1e-6);
      CHECK(same_bits(two.param, one.param));  // variants on one device: bit for bit
      CHECK(same_bits(two.m, one.m));
      CHECK(same_bits(two.v, one.v));
    }
  }
  Slot<double> ref(777, 0, rng);
  Slot<double> one = ref;
  const AdamWParams hp = adamw_params(5, 0.01);
  cpu::adamw_step<double>(ref.param.data(), ref.grad.data(), ref.m.data(), ref.v.data(), 777, hp, nullptr);
  emu::adamw_step1<double>(one.param.data(), one.grad.data(), one.m.data(), one.v.data(), 777, hp, nullptr);
  CHECK(max_error(one.param, ref.param) < 1e-14);
}

namespace {
template <class T>
void check_multi_tensor(std::mt19937& rng) {
  // Odd sizes, tensors of several 1024-parameter chunks, empty and misaligned ones, their own
  // weight decays; 70 tensors in all, so the list takes two launches (64 + 6). Offsets of 1, 2
  // and 3 values give float tensors a head of 3, 2 or 1 parameters before their float4s (the
  // heads of sizes 1 and 3 are the whole tensor); every fifth tensor's grad is one value
  // further than its other pointers, so it takes the scalar loop.
  std::vector<std::int64_t> sizes = {1, 3, 4097, 33, 0, 9000, 385, 4096, 5, 2050, 1027, 2};
  while (sizes.size() < 70) sizes.push_back(static_cast<std::int64_t>(sizes.size() % 7 + 1));
  std::vector<Slot<T>> multi, single;
  std::vector<AdamWTensor<T>> list;
  std::vector<double> decays;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    multi.emplace_back(sizes[i], static_cast<int>(i % 4), rng, i % 5 == 4 ? 1 : 0);
    decays.push_back(i % 2 ? 0.0 : 0.1 * static_cast<double>(i % 5));
  }
  single = multi;
  for (std::int64_t step = 1; step <= 2; ++step) {
    list.clear();
    for (std::size_t i = 0; i < multi.size(); ++i) list.push_back(multi[i].tensor(decays[i]));
    AdamWParams hp = adamw_params(step, 123.0);  // ignored by the multi-tensor step
    emu::adamw_multi_step<T>(list.data(), static_cast<int>(list.size()), hp, nullptr);
    for (std::size_t i = 0; i < single.size(); ++i) {
      hp.weight_decay = decays[i];
      const AdamWTensor<T> t = single[i].tensor(decays[i]);
      if constexpr (std::is_same_v<T, float>) {
        if (i % 2) emu::adamw_step2(t.param, t.grad, t.m, t.v, t.n, hp, nullptr);
        else emu::adamw_step1<T>(t.param, t.grad, t.m, t.v, t.n, hp, nullptr);
      } else {
        emu::adamw_step1<T>(t.param, t.grad, t.m, t.v, t.n, hp, nullptr);
      }
    }
  }
  for (std::size_t i = 0; i < multi.size(); ++i) {
    CAPTURE(i);
    CHECK(same_bits(multi[i].param, single[i].param));
    CHECK(same_bits(multi[i].m, single[i].m));
    CHECK(same_bits(multi[i].v, single[i].v));
  }
}
}  // namespace

TEST_CASE("adamw_multi_step: bit for bit adamw_step on each tensor, 70 tensors of odd sizes, own weight decays") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(42);
  check_multi_tensor<float>(rng);
  check_multi_tensor<double>(rng);
  emu::adamw_multi_step<float>(nullptr, 0, adamw_params(1, 0.0), nullptr);  // an empty list launches nothing
}

// adamw_clipped_multi_step (adamw.cu): 70 tensors of odd sizes (two lists of 64 and 6, so two
// norm launches' partials meet in the clip kernel), against the CPU's kernel and against the
// composition it replaces: the norm in double, the gradients scaled by the coefficient, then
// adamw_multi_step. Without clipping (a max_norm above the norm) it is adamw_multi_step bit for
// bit; two runs give the same bits; a max_norm that is not positive is an error.
TEST_CASE("adamw_clipped_multi_step: the norm, the clipped update, the same bits twice") {
  const brrr::simt::HostMemoryKernels host_memory;
  std::mt19937 rng(16);
  std::vector<std::int64_t> sizes = {1, 3, 4097, 33, 0, 9000, 385, 4096, 5, 2050, 1027, 2};
  while (sizes.size() < 70) sizes.push_back(static_cast<std::int64_t>(sizes.size() % 7 + 1));
  struct State {
    std::vector<std::vector<float>> param, grad, m, v;
  };
  State start;
  double squares = 0;
  for (std::int64_t n : sizes) {
    start.param.push_back(random_values<float>(n, rng));
    start.grad.push_back(random_values<float>(n, rng, 3.0));
    start.m.push_back(random_values<float>(n, rng, 0.1));
    start.v.push_back(std::vector<float>(n, 0.01f));
    for (float g : start.grad.back()) squares += static_cast<double>(g) * g;
  }
  const double norm = std::sqrt(squares), max_norm = norm / 3;
  const auto list_of = [&](State& s) {
    std::vector<AdamWTensor<float>> list;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      list.push_back({s.param[i].data(), s.grad[i].data(), s.m[i].data(), s.v[i].data(), sizes[i], i % 2 ? 0.0 : 0.1});
    return list;
  };
  const AdamWParams hp = adamw_params(3, 0.0);
  const auto clipped = [&](State& s, double limit, float* out) {
    const auto list = list_of(s);
    emu::adamw_clipped_multi_step<float>(out, list.data(), static_cast<int>(list.size()), hp, limit, nullptr);
  };
  State emu_run = start, cpu_run = start, composed = start, again = start;
  float emu_norm = 0, cpu_norm = 0, again_norm = 0;
  clipped(emu_run, max_norm, &emu_norm);
  const auto cpu_list = list_of(cpu_run);
  cpu::adamw_clipped_multi_step<float>(&cpu_norm, cpu_list.data(), static_cast<int>(cpu_list.size()), hp, max_norm,
                                       nullptr);
  CHECK(std::abs(emu_norm - norm) / norm < 1e-5);
  CHECK(std::abs(cpu_norm - norm) / norm < 1e-5);
  const float coefficient = static_cast<float>(max_norm / (norm + 1e-6));
  for (auto& g : composed.grad)
    for (float& x : g) x *= coefficient;
  const auto composed_list = list_of(composed);
  emu::adamw_multi_step<float>(composed_list.data(), static_cast<int>(composed_list.size()), hp, nullptr);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(i);
    CHECK(max_error(emu_run.param[i].data(), cpu_run.param[i].data(), sizes[i]) < 1e-6);
    CHECK(max_error(emu_run.param[i].data(), composed.param[i].data(), sizes[i]) < 1e-6);
    CHECK(max_error(emu_run.m[i].data(), composed.m[i].data(), sizes[i]) < 1e-6);
    CHECK(same_bits(emu_run.grad[i], start.grad[i]));  // the gradients are not written
  }
  clipped(again, max_norm, &again_norm);
  CHECK(again_norm == emu_norm);
  for (std::size_t i = 0; i < sizes.size(); ++i) CHECK(same_bits(again.param[i], emu_run.param[i]));

  State unclipped = start, plain = start;
  float unclipped_norm = 0;
  clipped(unclipped, 2 * norm, &unclipped_norm);
  const auto plain_list = list_of(plain);
  emu::adamw_multi_step<float>(plain_list.data(), static_cast<int>(plain_list.size()), hp, nullptr);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CHECK(same_bits(unclipped.param[i], plain.param[i]));
    CHECK(same_bits(unclipped.v[i], plain.v[i]));
  }
  CHECK(unclipped_norm == emu_norm);
  CHECK_THROWS_AS(clipped(again, 0.0, &again_norm), brrr::Error);
  float empty_norm = -1;
  emu::adamw_clipped_multi_step<float>(&empty_norm, nullptr, 0, hp, 1.0, nullptr);  // nothing to clip: norm 0
  CHECK(empty_norm == 0.0f);
}

TEST_CASE("sgd_step matches the CPU: plain, momentum, dampening, nesterov, first and later steps") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(43);
  for (const SGDParams base : {SGDParams{0.1, 0.0, 0.0, 0.0, false, true}, SGDParams{0.1, 0.9, 0.0, 0.01, false, true},
                               SGDParams{0.05, 0.9, 0.1, 0.0, true, true}}) {
    CAPTURE(base.momentum);
    CAPTURE(base.nesterov);
    const std::int64_t n = 1001;
    std::vector<float> p = random_values<float>(n, rng), g = random_values<float>(n, rng), buf(n, 0.0f);
    std::vector<float> rp = p, rbuf = buf;
    for (int step = 0; step < 3; ++step) {
      SGDParams hp = base;
      hp.first_step = step == 0;
      cpu::sgd_step<float>(rp.data(), g.data(), rbuf.data(), n, hp, nullptr);
      emu::sgd_step1<float>(p.data(), g.data(), buf.data(), n, hp, nullptr);
    }
    CHECK(max_error(p, rp) < 1e-6);
    CHECK(max_error(buf, rbuf) < 1e-6);
  }
}

// =============================================================================================
// The fused ops: gradient checks (CPU, float64), then Device::cuda() against the CPU

namespace {
using brrr::Tensor;

Tensor param(brrr::Shape shape, std::uint64_t seed, double scale = 1.0) {
  brrr::Generator g(seed);
  Tensor t = brrr::randn(std::move(shape), g, brrr::kFloat64);
  {
    brrr::NoGradGuard no_grad;
    t = brrr::ops::mul(t, scale);
  }
  return t.requires_grad_(true);
}

void check_grad(const char* name, const std::function<Tensor(const std::vector<Tensor>&)>& f,
                const std::vector<Tensor>& inputs) {
  INFO("op: ", std::string(name));
  const brrr::GradcheckResult r = brrr::gradcheck(f, inputs);
  INFO(r.message);
  CHECK(r.ok);
}

double max_error(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to(brrr::kCPU).to_vector<double>(), y = b.to(brrr::kCPU).to_vector<double>();
  return max_error(x, y);
}
}  // namespace

TEST_CASE("gradcheck: bias_gelu, residual_layer_norm and cross_entropy_fused on the CPU, float64") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  using namespace brrr;
  check_grad("bias_gelu", [](auto& x) { return ops::bias_gelu(x[0], x[1]); },
             {param({2, 3, 5}, 1, 2.0), param({5}, 2)});
  check_grad("residual_layer_norm", [](auto& x) {
    const auto [sum, out] = ops::residual_layer_norm(x[0], x[1], x[2], x[3]);
    return out * 2.0 + sum * sum;  // gradient reaches sum both directly and through out
  }, {param({2, 3, 6}, 3), param({2, 3, 6}, 4), param({6}, 5), param({6}, 6)});
  check_grad("residual_layer_norm, no bias", [](auto& x) {
    return ops::residual_layer_norm(x[0], x[1], x[2], Tensor()).second;
  }, {param({4, 7}, 7), param({4, 7}, 8), param({7}, 9)});
  const Tensor targets = from_vector(std::vector<std::int64_t>{2, -100, 4, 1}, {4}, kInt64);
  check_grad("cross_entropy_fused", [&](auto& x) { return ops::cross_entropy_fused(x[0], targets); },
             {param({4, 5}, 10, 2.0)});
}

TEST_CASE("the fused ops agree with the composed ones on the CPU: values and gradients") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  using namespace brrr;
  Generator gen(3);
  const Tensor x0 = randn({4, 6, 33}, gen, kFloat64), r0 = randn({4, 6, 33}, gen, kFloat64);
  const Tensor w0 = randn({33}, gen, kFloat64), b0 = randn({33}, gen, kFloat64);
  CHECK(max_error(ops::bias_gelu(x0, b0), ops::gelu(x0 + b0)) < 1e-14);
  const auto [s, y] = ops::residual_layer_norm(x0, r0, w0, b0);
  CHECK(max_error(s, x0 + r0) == 0.0);
  CHECK(max_error(y, ops::layer_norm(x0 + r0, w0, b0)) < 1e-14);

  const Tensor logits0 = randn({6, 11}, gen, kFloat64) * 3.0;
  const Tensor t = from_vector(std::vector<std::int64_t>{0, 10, -100, 5, 2, 7}, {6}, kInt64);
  const Tensor a = logits0.clone().requires_grad_(true), b = logits0.clone().requires_grad_(true);
  const Tensor fused = ops::cross_entropy_fused(a, t), plain = ops::cross_entropy(b, t);
  CHECK(max_error(fused, plain) < 1e-14);
  (fused * 3.0).backward();  // an incoming gradient other than 1
  (plain * 3.0).backward();
  CHECK(max_error(a.grad(), b.grad()) < 1e-14);
  // without grad, it is ops::cross_entropy
  NoGradGuard no_grad;
  CHECK(max_error(ops::cross_entropy_fused(logits0, t), ops::cross_entropy(logits0, t)) == 0.0);
}

TEST_CASE("bias_gelu, residual_layer_norm and cross_entropy_fused on Device::cuda() (emulated) match the CPU") {
  using namespace brrr;
  cuda::use_emulator();
  const Device gpu = Device::cuda();
  Generator gen(5);
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dt));
    const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
    const Tensor x0 = randn({3, 5, 33}, gen, dt), r0 = randn({3, 5, 33}, gen, dt);
    const Tensor w0 = randn({33}, gen, dt), b0 = randn({33}, gen, dt);
    const Tensor logits0 = randn({7, 1001}, gen, dt) * 2.0;
    const Tensor targets = from_vector(std::vector<std::int64_t>{0, 1000, -100, 5, 999, 7, 500}, {7}, kInt64);

    // loss = cross_entropy_fused(out-derived logits) + sum(bias_gelu(sum) * out): every op,
    // every input, one backward.
    const auto run = [&](Device device) {
      std::vector<Tensor> leaves;
      for (const Tensor& t : {x0, r0, w0, b0, logits0}) leaves.push_back(t.to(device).detach().requires_grad_(true));
      const auto [sum, out] = ops::residual_layer_norm(leaves[0], leaves[1], leaves[2], leaves[3]);
      const Tensor act = ops::bias_gelu(sum, leaves[3]);
      const Tensor loss = ops::cross_entropy_fused(leaves[4] * 1.5, targets.to(device)) + ops::sum(act * out) * 0.01;
      loss.backward();
      std::vector<Tensor> results = {loss, sum, out, act};
      for (const Tensor& leaf : leaves) results.push_back(leaf.grad());
      return results;
    };
    const std::vector<Tensor> on_cpu = run(kCPU), on_gpu = run(gpu);
    const char* names[] = {"loss", "sum", "out", "act", "dx", "dresidual", "dweight", "dbias", "dlogits"};
    for (std::size_t i = 0; i < on_cpu.size(); ++i) {
      CAPTURE(names[i]);
      REQUIRE(on_gpu[i].defined());
      CHECK(on_gpu[i].device() == gpu);
      CHECK(max_error(on_gpu[i], on_cpu[i]) < tol * 10);
    }
  }
  // each float32 variant of the forward kernels, selected by name
  const Tensor x0 = randn({9, 384}, gen), r0 = randn({9, 384}, gen), w0 = randn({384}, gen), b0 = randn({384}, gen);
  const auto [cpu_sum, cpu_out] = ops::residual_layer_norm(x0, r0, w0, b0);
  for (const char* variant : {"naive", "warp", "warp-float4"}) {
    CAPTURE(variant);
    kernels::select("residual_layernorm_forward", variant, DeviceType::CUDA);
    const auto [sum, out] = ops::residual_layer_norm(x0.to(gpu), r0.to(gpu), w0.to(gpu), b0.to(gpu));
    CHECK(max_error(sum, cpu_sum) == 0.0);
    CHECK(max_error(out, cpu_out) < 2e-5);
  }
  kernels::reset_selection();
}

TEST_CASE("AdamW on Device::cuda() (emulated, one multi-tensor launch per group) matches AdamW on the CPU") {
  using namespace brrr;
  cuda::use_emulator();
  const Device gpu = Device::cuda();
  Generator gen(6);
  std::vector<Tensor> cpu_params, gpu_params;
  for (const Shape& shape : std::vector<Shape>{{33, 5}, {7}, {4097}, {3, 3, 3}, {1}, {11}}) {
    const Tensor p = randn(shape, gen);
    cpu_params.push_back(p.clone().requires_grad_(true));
    gpu_params.push_back(p.to(gpu).requires_grad_(true));
  }
  const optim::AdamWOptions options = optim::AdamWOptions(1e-2).betas({0.9, 0.95}).weight_decay(0.1);
  optim::AdamW cpu_opt(optim::decay_groups(cpu_params, options)), gpu_opt(optim::decay_groups(gpu_params, options));
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = 0; i < cpu_params.size(); ++i) {
      if (i == 4 && step == 1) {  // a parameter without a gradient this step is left alone
        cpu_params[i].set_grad(Tensor());
        gpu_params[i].set_grad(Tensor());
        continue;
      }
      const Tensor g = randn(cpu_params[i].shape(), gen);
      cpu_params[i].set_grad(g);
      gpu_params[i].set_grad(g.to(gpu));
    }
    cpu_opt.step();
    gpu_opt.step();
  }
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    CAPTURE(i);
    CHECK(gpu_params[i].device() == gpu);
    CHECK(max_error(gpu_params[i], cpu_params[i]) < 1e-6);
  }
  const std::vector<Tensor> cpu_state = cpu_opt.state(), gpu_state = gpu_opt.state();
  for (std::size_t i = 0; i < cpu_state.size(); ++i) CHECK(max_error(gpu_state[i], cpu_state[i]) < 1e-6);
}

// The trainer's step with --grad_clip on a GPU (train/trainer.cpp): AdamW::step_with_clipping,
// one adamw_clipped_multi_step, against clip_grad_norm then step on the CPU. The gradients are
// 10 times larger than the limit allows, so every step clips. On the device the gradients stay
// as they were (the kernel does not write them); on the CPU step_with_clipping is the two calls,
// bit for bit.
TEST_CASE("AdamW::step_with_clipping on Device::cuda() (emulated) matches clip_grad_norm then step on the CPU") {
  using namespace brrr;
  cuda::use_emulator();
  const Device gpu = Device::cuda();
  Generator gen(16);
  std::vector<Tensor> cpu_params, gpu_params, cpu_again;
  // Matrices first: nanoGPT's groups keep this order, so the CPU's norm adds in the same order.
  for (const Shape& shape : std::vector<Shape>{{33, 5}, {3, 3, 3}, {7}, {4097}, {1}}) {
    const Tensor p = randn(shape, gen);
    cpu_params.push_back(p.clone().requires_grad_(true));
    cpu_again.push_back(p.clone().requires_grad_(true));
    gpu_params.push_back(p.to(gpu).requires_grad_(true));
  }
  const optim::AdamWOptions options = optim::AdamWOptions(1e-2).betas({0.9, 0.95}).weight_decay(0.1);
  optim::AdamW cpu_opt(optim::decay_groups(cpu_params, options)), gpu_opt(optim::decay_groups(gpu_params, options));
  optim::AdamW again_opt(optim::decay_groups(cpu_again, options));
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> grads;
    for (std::size_t i = 0; i < cpu_params.size(); ++i) {
      grads.push_back(randn(cpu_params[i].shape(), gen) * 10.0);
      cpu_params[i].set_grad(grads.back().clone());
      cpu_again[i].set_grad(grads.back().clone());
      gpu_params[i].set_grad(grads.back().to(gpu));
    }
    const double cpu_norm = optim::clip_grad_norm(cpu_params, 1.0).item<double>();
    cpu_opt.step();
    const Tensor gpu_norm = gpu_opt.step_with_clipping(1.0);
    CHECK(gpu_norm.device() == gpu);
    CHECK(std::abs(gpu_norm.item<double>() - cpu_norm) / cpu_norm < 1e-5);
    CHECK(again_opt.step_with_clipping(1.0).item<double>() == cpu_norm);
    for (std::size_t i = 0; i < gpu_params.size(); ++i) CHECK(max_error(gpu_params[i].grad(), grads[i]) == 0.0);
  }
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    CAPTURE(i);
    CHECK(max_error(gpu_params[i], cpu_params[i]) < 1e-6);
    CHECK(max_error(cpu_again[i], cpu_params[i]) == 0.0);
  }
  CHECK_THROWS_AS(gpu_opt.step_with_clipping(-1.0), Error);
}

// ops::residual_layer_norm on bf16 tensors (what the GPT block calls): on the CPU and on
// Device::cuda() (emulated), values and gradients against the float32 op on the same (bf16)
// inputs, within bf16's rounding. The sum also reaches the loss directly, as the residual
// stream does through the next block's add; autograd runs that add's backward before
// LayerNorm's here, so the backward's fused form (dsum = dres + LayerNorm's dx,
// autograd::record_accumulating) gets dres.
TEST_CASE("residual_layer_norm on bf16 tensors: values and gradients as the float32 op's, CPU and emulated GPU") {
  using namespace brrr;
  cuda::use_emulator();
  Generator gen(18);
  const std::int64_t N = 37, C = 264;
  const std::vector<Tensor> inputs = {randn({N, C}, gen) * 2.0 + 0.5, randn({N, C}, gen), randn({C}, gen) * 0.2 + 1.0,
                                      randn({C}, gen) * 0.2};
  // The loss's weights on out and on sum, bf16 values: the gradients arriving are the same in both runs.
  const Tensor a = randn({N, C}, gen).to(kBFloat16).to(kFloat32), b = randn({N, C}, gen).to(kBFloat16).to(kFloat32);
  const auto run = [&](DType dtype, Device device) {
    std::vector<Tensor> leaves;
    for (const Tensor& t : inputs) leaves.push_back(t.to(kBFloat16).to(dtype).to(device).requires_grad_(true));
    const auto [sum, out] = ops::residual_layer_norm(leaves[0], leaves[1], leaves[2], leaves[3]);
    CHECK(sum.dtype() == dtype);
    CHECK(out.dtype() == dtype);
    const Tensor loss = ops::sum(out * a.to(dtype).to(device)) + ops::sum((sum + 1.0) * b.to(dtype).to(device));
    loss.backward();
    std::vector<Tensor> results = {sum.to(kCPU).to(kFloat32), out.to(kCPU).to(kFloat32)};
    for (const Tensor& leaf : leaves) results.push_back(leaf.grad().to(kCPU).to(kFloat32));
    return results;
  };
  const std::vector<Tensor> expected = run(kFloat32, kCPU);
  for (const Device device : {kCPU, Device::cuda()}) {
    CAPTURE(device.str());
    const std::vector<Tensor> got = run(kBFloat16, device);
    // sum, out, dx, dresidual: a few bf16 roundings (2^-8 each) relative to max(|x|, 1).
    // dweight, dbias: sums over N rows of values that differ by such roundings (out normalizes
    // the sum rounded to bf16), so their difference grows as sqrt(N) 2^-8: about 0.024 at N = 37.
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(max_error(got[i], expected[i]) <= (i < 4 ? 1.0 / 64 : 1.0 / 16));
    }
  }
}
