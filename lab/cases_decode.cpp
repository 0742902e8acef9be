// lab/cases_decode.cpp: the kernel lab's cases for the Decoder's kernels (chapter 08, fast
// generation on the CPU): linear_rows, a Linear over a few rows or a prefill's hundreds, with
// each epilogue the Decoder uses, and attend_rows, a prefill's causal attention over one head.
// Read before: cases.h, kernels/cpu/rows/rows.h. Read next: cases_nn.cpp.
//
// Their sizes are the 512-token prefill of gpt-12m (C = 384, 6 heads of 64), where the Decoder
// spends its time; their shapes are the ragged ones the kernels' tiles have edges at: 1 row (the
// GEMV), 2 and 5 (the 3 x 3 tiles), 7 and 53 (the GEMM's 6-row tiles, and past 48 rows, 33
// with AVX-512, where it takes over), K past one panel block (1544: two panels, 3077: one).
#include "lab/cases.h"

#include "brrr/bfloat16.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

// --- linear_rows: y (M, N) = x (M, K) @ w^T + bias, then the epilogue -------------------------

enum Epilogue { kStore = 0, kAdd = 1, kGeluTanh = 2, kGeluErf = 3 };

template <int E, bool kBias>
void linear_rows_reference(Problem& p) {
  const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
  const std::vector<double>&x = p.in("x"), &w = p.in("w");
  const std::vector<double>* bias = kBias ? &p.in("bias") : nullptr;
  std::vector<double>& y = p.out("y");
  parallel_rows(M, [&](std::int64_t m) {
    for (std::int64_t n = 0; n < N; ++n) {
      double s = bias ? (*bias)[n] : 0.0;
      for (std::int64_t k = 0; k < K; ++k) s += x[m * K + k] * w[n * K + k];
      double& out = y[m * N + n];
      if constexpr (E == kStore) out = s;
      if constexpr (E == kAdd) out += s;  // y held the residual
      if constexpr (E == kGeluTanh) out = gelu(s);
      if constexpr (E == kGeluErf) out = gelu_erf(s);
    }
  });
}

template <int E, bool kBias>
void linear_rows_make(Problem& p, Random& r) {
  const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
  p.input("x", r.normal(M * K));
  // A Linear's initial scale (1 / sqrt(K)), so the sums are of order 1, where GELU bends.
  p.input("w", r.normal(N * K, 0.0f, 1.0f / std::sqrt(static_cast<float>(K))));
  if (kBias) p.input("bias", r.normal(N, 0.0f, 0.1f));
  if (E == kAdd) p.inout("y", r.normal(M * N));
  else p.output("y", M * N);
}

template <int E, bool kBias, class T>
void call_linear_rows(kernels::linear_rows_fn<T> f, const Args& a) {
  f(a.f<T>("y"), a.f<T>("x"), a.f<T>("w"), kBias ? a.f<T>("bias") : nullptr, a.dims[0], a.dims[1], a.dims[2], E);
}

template <int E, bool kBias>
Case linear_rows_case(const char* name, const char* what) {
  return Case{.name = name,
              .op = "linear_rows",
              .what = what,
              .chapter = "08",
              .dim_names = {"M", "N", "K"},
              .gpu_size = {512, 1536, 384}, .emulator_size = {64, 96, 64}, .cpu_size = {512, 1536, 384},
              .shapes = {{1, 1, 1}, {2, 9, 17}, {5, 40, 33}, {7, 137, 65}, {53, 45, 130}, {7, 40, 1544}, {13, 19, 3077}},
              .tolerance = 1e-4,  // sums of K products: float32 rounding grows like sqrt(K)
              .report_flops = true,
              .bytes = [](const Dims& d) {
                return 4.0 * (d[0] * d[2] + d[1] * d[2] + (kBias ? d[1] : 0) + (E == kAdd ? 2 : 1) * d[0] * d[1]);
              },
              .flops = [](const Dims& d) { return 2.0 * d[0] * d[1] * d[2]; },
              .make = &linear_rows_make<E, kBias>,
              .reference = &linear_rows_reference<E, kBias>,
              .call = call(op::linear_rows<float>, &call_linear_rows<E, kBias, float>, op::linear_rows<double>,
                           &call_linear_rows<E, kBias, double>)};
}

// --- linear_rows on bfloat16 weights (--dtype bf16; rows/bf16.cpp, rows/amx.cpp) -------------
// Run with --dtype bfloat16: w is uploaded as bf16 (and the reference sees it rounded), x, the
// bias and y stay float32, as the Decoder keeps them. The kernels round x to bf16 at the input
// (autocast's meaning of bf16), so the reference takes x rounded too: what is left is the float32
// sums' error. The variants pack w into pair panels on each call (the Decoder packs once), and
// the times include it.

void linear_rows_bf16_reference(Problem& p) {
  const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
  const std::vector<double>&x = p.in("x"), &w = p.in("w"), &bias = p.in("bias");
  std::vector<double> xr(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto v = static_cast<float>(x[i]);
    xr[i] = std::abs(v) < 1.17549435e-38f ? 0.0 : round_to_bf16(v);  // float32 subnormals read as 0
  }
  std::vector<double>& y = p.out("y");
  parallel_rows(M, [&](std::int64_t m) {
    for (std::int64_t n = 0; n < N; ++n) {
      double s = bias[n];
      for (std::int64_t k = 0; k < K; ++k) s += xr[m * K + k] * w[n * K + k];
      y[m * N + n] = s;
    }
  });
}

void linear_rows_bf16_make(Problem& p, Random& r) {
  const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
  p.input("x", r.normal(M * K), Array::kFloat32);
  p.input("w", r.normal(N * K, 0.0f, 1.0f / std::sqrt(static_cast<float>(K))));
  p.input("bias", r.normal(N, 0.0f, 0.1f), Array::kFloat32);
  p.output("y", M * N, Array::kFloat32);
}

void call_linear_rows_bf16(kernels::linear_rows_on_bf16_fn f, const Args& a) {
  f(a.f<float>("y"), a.f<float>("x"), a.f<bf16>("w"), a.f<float>("bias"), a.dims[0], a.dims[1], a.dims[2], kStore);
}

Case linear_rows_bf16_case() {
  Case c = linear_rows_case<kStore, true>(
      "linear_rows/bf16",
      "y (M, N) float32 = bf16(x (M, K)) @ w (N, K)^T bfloat16 + bias, float32 sums: --dtype bf16's Linear");
  c.make = &linear_rows_bf16_make;
  c.reference = &linear_rows_bf16_reference;
  // In float32 bytes, as every case counts them (no residual read): the lab scales them to what
  // the arrays take stored, w's 2 bytes included (kernel_lab.cpp, traffic_bytes).
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[1] * d[2] + d[1] + d[0] * d[1]); };
  // the same descriptor twice: one dtype, bfloat16 (lab/kernel_lab.h)
  c.call = call(op::linear_rows_on_bf16, &call_linear_rows_bf16, op::linear_rows_on_bf16, &call_linear_rows_bf16);
  return c;
}

// --- attend_rows: the last n of T positions of one head's causal attention ---------------------
// (the lab's sizes are positive, so the case names T = t0 + n, the positions in all)

void attend_rows_reference(Problem& p) {
  const std::int64_t n = p.dims[0], t0 = p.dims[1] - n, hs = p.dims[2];
  const std::vector<double>&q = p.in("q"), &k = p.in("k"), &v = p.in("v");
  std::vector<double>& out = p.out("out");
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  parallel_rows(n, [&](std::int64_t i) {  // row i sees positions 0 .. t0 + i (cases.h)
    std::vector<double> s;
    attend_row(q.data() + i * hs, k.data(), v.data(), t0 + i + 1, hs, scale, s, out.data() + i * hs);
  });
}

template <class T>
void call_attend_rows(kernels::attend_rows_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("q"), a.f<T>("k"), a.f<T>("v"), a.dims[1] - a.dims[0], a.dims[0], a.dims[2]);
}

}  // namespace

std::vector<Case> decode_cases() {
  return {
      linear_rows_case<kStore, true>("linear_rows", "y (M, N) = x (M, K) @ w (N, K)^T + bias (N): the Decoder's Linear"),
      linear_rows_case<kStore, false>("linear_rows/no_bias", "y (M, N) = x (M, K) @ w (N, K)^T: the output projection"),
      linear_rows_case<kAdd, true>("linear_rows/residual",
                                   "y (M, N) += x (M, K) @ w (N, K)^T + bias: a projection into the residual stream"),
      linear_rows_case<kGeluTanh, true>("linear_rows/gelu", "y (M, N) = gelu_tanh(x (M, K) @ w (N, K)^T + bias): c_fc"),
      linear_rows_case<kGeluErf, true>("linear_rows/gelu_erf",
                                       "y (M, N) = gelu_erf(x (M, K) @ w (N, K)^T + bias): c_fc with the exact GELU"),
      linear_rows_bf16_case(),
      Case{.name = "attend_rows",
           .what = "out (n, hs): the last n rows (positions T - n .. T - 1) of one head's causal softmax(q k^T "
                   "/ sqrt(hs)) v, q (n, hs), k and v (T, hs)",
           .chapter = "08",
           .dim_names = {"n", "T", "hs"},
           .gpu_size = {512, 512, 64}, .emulator_size = {32, 40, 64}, .cpu_size = {512, 512, 64},
           // one row (a decoding step), a group of rows, rows past one group of 16, a long cache
           .shapes = {{1, 1, 1}, {1, 38, 64}, {5, 8, 64}, {7, 7, 24}, {23, 33, 64}, {40, 140, 32}},
           .tolerance = 1e-4,
           .report_flops = true,
           .bytes = [](const Dims& d) { return 4.0 * (2 * d[0] * d[2] + 2 * d[1] * d[2]); },
           // two products of n rows by about T - n / 2 positions of hs
           .flops = [](const Dims& d) { return 4.0 * d[0] * (d[1] - (d[0] - 1) / 2.0) * d[2]; },
           .make = [](Problem& p, Random& r) {
             const std::int64_t n = p.dims[0], T = p.dims[1], hs = p.dims[2];
             BRRR_CHECK(T >= n, "attend_rows: the positions T (", T, ") must be at least the rows n (", n, ")");
             p.input("q", r.normal(n * hs));
             p.input("k", r.normal(T * hs));
             p.input("v", r.normal(T * hs));
             p.output("out", n * hs);
           },
           .reference = &attend_rows_reference,
           .call = call(op::attend_rows<float>, &call_attend_rows<float>, op::attend_rows<double>,
                        &call_attend_rows<double>)},
  };
}

}  // namespace brrr::lab
