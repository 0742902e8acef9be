// lab/cases_decode.cpp: the kernel lab's cases for the Decoder's kernels (chapter 08, fast
// generation on the CPU): linear_rows, a Linear over a few rows or a prefill's hundreds, with
// each epilogue the Decoder uses, and attend_rows, a prefill's causal attention over one head;
// and attend_cache and append_cache (chapter 20), a decoding step's attention over a KV cache and
// its write into it, and sample_rows, its draw. linear_rows, the two cache ops and sample_rows
// have CUDA kernels too (kernels/cuda/rows/), which the same cases check.
// Read before: cases.h, kernels/cpu/rows/rows.h. Read next: cases_nn.cpp.
//
// Their sizes are the 512-token prefill of gpt-12m (C = 384, 6 heads of 64), where the Decoder
// spends its time; their shapes are the ragged ones the kernels' tiles have edges at: 1 row (the
// GEMV), 2 and 5 (the 3 x 3 tiles), 7 and 53 (the GEMM's 6-row tiles, and past 48 rows, 33
// with AVX-512, where it takes over), K past one panel block (1544: two panels, 3077: one).
#include "lab/cases.h"

#include "brrr/bfloat16.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sample_rule.h"

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
  f(a.f<T>("y"), a.f<T>("x"), a.f<T>("w"), kBias ? a.f<T>("bias") : nullptr, a.dims[0], a.dims[1], a.dims[2], E,
    a.stream);
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
  f(a.f<float>("y"), a.f<float>("x"), a.f<bf16>("w"), a.f<float>("bias"), a.dims[0], a.dims[1], a.dims[2], kStore,
    a.stream);
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

// --- linear_rows at a decoding step's sizes (chapter 20) --------------------------------------
// One row to a few: each weight is read once and used for one multiply-add a row, so bandwidth,
// not FLOPs, is the limit and the lab reports GB/s and the share of the copy bandwidth (the GPU
// bar: 85%). The default size is GPT-2's c_fc at batch 1; --size 1x50257x768 is its head.

Case as_gemv(Case c, const char* name, const char* what) {
  c.name = name;
  c.what = what;
  c.chapter = "20";
  c.gpu_size = {1, 3072, 768}, c.emulator_size = {1, 96, 1024}, c.cpu_size = {1, 3072, 768};
  c.shapes = {{1, 1, 1}, {1, 40, 1030}, {4, 33, 517}};  // one chunk of K or three (kernels/cuda/rows/)
  c.report_flops = false;
  c.flops = nullptr;
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

// --- attend_cache: one query per row against its slot of a KV cache (chapter 20) -----------------
// dims (rows, heads, T, hs), T the cache's capacity; row b reads slot rows - 1 - b (so a row's
// slot is not its index) at cache_length(T, b) positions: T, T - 1, T - 2, T, ... (ragged, and
// the bytes a case moves follow from its sizes). --dtype bfloat16 stores the cache in bf16; q and
// out stay float32, as a Decoder keeps them.

std::int64_t cache_length(std::int64_t T, std::int64_t b) { return std::max<std::int64_t>(1, T - b % 3); }

// Row b's slot (B - 1 - b) and length (cache_length), as int32 arrays "slots" and "lengths".
void cache_indices(Problem& p, std::int64_t B, std::int64_t T) {
  std::vector<std::int32_t> slots(static_cast<std::size_t>(B)), lengths(slots.size());
  for (std::int64_t b = 0; b < B; ++b) {
    slots[b] = static_cast<std::int32_t>(B - 1 - b);
    lengths[b] = static_cast<std::int32_t>(cache_length(T, b));
  }
  p.indices("slots", slots);
  p.indices("lengths", lengths);
}

void attend_cache_make(Problem& p, Random& r) {
  const std::int64_t B = p.dims[0], C = p.dims[1] * p.dims[3], T = p.dims[2];
  const Array::Type rows_type = p.dtype == kBFloat16 ? Array::kFloat32 : Array::kFloat;
  p.input("q", r.normal(B * C), rows_type);
  p.input("k", r.normal(B * T * C));
  p.input("v", r.normal(B * T * C));
  cache_indices(p, B, T);
  p.output("out", B * C, rows_type);
}

void attend_cache_reference(Problem& p) {
  const std::int64_t B = p.dims[0], H = p.dims[1], T = p.dims[2], hs = p.dims[3], C = H * hs;
  const std::vector<double>&q = p.in("q"), &k = p.in("k"), &v = p.in("v");
  const std::vector<double>&slots = p.in("slots"), &lengths = p.in("lengths");
  std::vector<double>& out = p.out("out");
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  parallel_rows(B * H, [&](std::int64_t i) {
    const std::int64_t b = i / H, h = i % H, t = static_cast<std::int64_t>(lengths[b]);
    const std::int64_t at = static_cast<std::int64_t>(slots[b]) * T * C + h * hs;
    std::vector<double> e(static_cast<std::size_t>(t));
    double top = -INFINITY, total = 0;
    for (std::int64_t j = 0; j < t; ++j) {
      double dot = 0;
      for (std::int64_t c = 0; c < hs; ++c) dot += q[b * C + h * hs + c] * k[at + j * C + c];
      e[j] = scale * dot;
      top = std::max(top, e[j]);
    }
    for (std::int64_t j = 0; j < t; ++j) total += (e[j] = std::exp(e[j] - top));
    for (std::int64_t c = 0; c < hs; ++c) {
      double o = 0;
      for (std::int64_t j = 0; j < t; ++j) o += e[j] / total * v[at + j * C + c];
      out[b * C + h * hs + c] = o;
    }
  });
}

kernels::CacheShape cache_shape_of(const Args& a) {
  kernels::CacheShape s;
  s.rows = a.dims[0], s.heads = a.dims[1], s.capacity = a.dims[2], s.hs = a.dims[3];
  s.slots = s.rows, s.q_stride = s.heads * s.hs;
  return s;
}

template <class T>
void call_attend_cache(kernels::attend_cache_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("q"), a.f<T>("k"), a.f<T>("v"), a.idx("slots"), a.idx("lengths"), cache_shape_of(a),
    a.stream);
}

void call_attend_cache_bf16(kernels::attend_cache_on_bf16_fn f, const Args& a) {
  f(a.f<float>("out"), a.f<float>("q"), a.f<bf16>("k"), a.f<bf16>("v"), a.idx("slots"), a.idx("lengths"),
    cache_shape_of(a), a.stream);
}

Case attend_cache_case() {
  return Case{
      .name = "attend_cache",
      .what = "out (rows, heads * hs): each row's query q (rows, heads * hs) against its slot of the cache k, v "
              "(slots, T, heads * hs), over the row's length: a decoding step's attention",
      .chapter = "20",
      .dim_names = {"rows", "heads", "T", "hs"},
      // GPT-2 (12 heads of 64) at 8 sequences of 1024 positions; on the emulator 4 of 200
      .gpu_size = {8, 12, 1024, 64}, .emulator_size = {4, 2, 200, 64}, .cpu_size = {8, 12, 1024, 64},
      // one position; a length past one block of 128 (and 129, 130); small and odd head sizes;
      // the largest head the GPU kernel holds (256); more rows than one warp's 32 positions
      .shapes = {{1, 1, 1, 1}, {3, 2, 130, 64}, {5, 3, 7, 24}, {2, 2, 257, 40}, {2, 1, 300, 256}, {7, 2, 33, 33}},
      .tolerance = 1e-4,  // sums over the positions and the head: float32 rounding grows with both
      .bytes = [](const Dims& d) {
        double positions = 0;
        for (std::int64_t b = 0; b < d[0]; ++b) positions += static_cast<double>(cache_length(d[2], b));
        const double C = static_cast<double>(d[1] * d[3]);
        return 4.0 * (2 * d[0] * C + 2 * positions * C + 2 * d[0]);  // q, out; the keys and values read; slots, lengths
      },
      .make = &attend_cache_make,
      .reference = &attend_cache_reference,
      .call = call(op::attend_cache<float>, &call_attend_cache<float>, op::attend_cache<double>,
                   &call_attend_cache<double>, op::attend_cache_on_bf16, &call_attend_cache_bf16)};
}

// --- append_cache: each row's key and value into its slot of the cache (chapter 20) ------------
// dims (rows, heads, T, hs) as attend_cache's, the same slots and lengths: row b's new key and
// value land at position cache_length(T, b) - 1 of slot rows - 1 - b; the rest of the cache
// keeps its numbers (k and v are read and written, so the check sees a stray write).

void append_cache_make(Problem& p, Random& r) {
  const std::int64_t B = p.dims[0], C = p.dims[1] * p.dims[3], T = p.dims[2];
  p.input("new_k", r.normal(B * C));
  p.input("new_v", r.normal(B * C));
  cache_indices(p, B, T);
  p.inout("k", r.normal(B * T * C));
  p.inout("v", r.normal(B * T * C));
}

void append_cache_reference(Problem& p) {
  const std::int64_t B = p.dims[0], T = p.dims[2], C = p.dims[1] * p.dims[3];
  const std::vector<double>&slots = p.in("slots"), &lengths = p.in("lengths");
  for (const char* name : {"k", "v"}) {
    const std::vector<double>& rows = p.in(name[0] == 'k' ? "new_k" : "new_v");
    std::vector<double>& cache = p.out(name);
    for (std::int64_t b = 0; b < B; ++b) {
      const auto at = static_cast<std::int64_t>((slots[b] * static_cast<double>(T) + lengths[b] - 1) * C);
      for (std::int64_t c = 0; c < C; ++c) cache[at + c] = rows[b * C + c];
    }
  }
}

template <class T>
void call_append_cache(kernels::append_cache_fn<T> f, const Args& a) {
  f(a.f<T>("k"), a.f<T>("v"), a.f<T>("new_k"), a.f<T>("new_v"), a.idx("slots"), a.idx("lengths"), cache_shape_of(a),
    a.stream);
}

Case append_cache_case() {
  return Case{
      .name = "append_cache",
      .what = "k, v (slots, T, heads * hs): each row's new key and value (rows, heads * hs) written into its slot "
              "at its length - 1, the rest kept: a decoding step's cache write",
      .chapter = "20",
      .dim_names = {"rows", "heads", "T", "hs"},
      .gpu_size = {32, 12, 1024, 64}, .emulator_size = {4, 2, 20, 64}, .cpu_size = {32, 12, 1024, 64},
      // one number; rows of odd widths; more numbers a row than a block's 128 threads
      .shapes = {{1, 1, 1, 1}, {3, 2, 130, 64}, {5, 3, 7, 24}, {2, 1, 5, 257}},
      .tolerance = 0,  // a copy
      // the new rows read, the cache's rows written, slots and lengths: the rest of k and v is
      // untouched (the check's inout copies are not the kernel's traffic)
      .bytes = [](const Dims& d) { return 4.0 * (4 * d[0] * d[1] * d[3] + 2 * d[0]); },
      .make = &append_cache_make,
      .reference = &append_cache_reference,
      .call = call(op::append_cache<float>, &call_append_cache<float>, op::append_cache<double>,
                   &call_append_cache<double>)};
}

// --- sample_rows: a token drawn from each row of logits (chapter 20) ---------------------------
// dims (rows, V). Each row gets another rule (temperature, top_k, top_p in turn, u drawn), and
// every other row's logits are rounded to quarters, so that many tie (the ranking's ids). The
// reference is kernels/sample_rule.h's definition written plainly (a sort, then integer sums).

void sample_rows_make(Problem& p, Random& r) {
  const std::int64_t rows = p.dims[0], V = p.dims[1];
  std::vector<float> logits = r.normal(rows * V, 0.0f, 2.0f);
  for (std::int64_t i = 0; i < rows * V; ++i)
    if ((i / V) % 2 == 1) logits[i] = std::round(logits[i] * 4.0f) / 4.0f;
  p.input("logits", logits);
  const std::vector<float> u = r.uniform(rows, 0.0f, 1.0f);
  const float temperatures[] = {1.0f, 0.7f, 1.6f}, top_p[] = {1.0f, 0.9f, 0.3f, 1e-3f};
  const float top_k[] = {0.0f, 1.0f, 5.0f, static_cast<float>(V - 1), static_cast<float>(V + 3)};
  std::vector<float> rules(static_cast<std::size_t>(rows * kernels::sample::kRuleSize));
  for (std::int64_t i = 0; i < rows; ++i) {
    float* rule = rules.data() + i * kernels::sample::kRuleSize;
    rule[kernels::sample::kTemperature] = temperatures[i % 3];
    rule[kernels::sample::kTopK] = top_k[i % 5];
    rule[kernels::sample::kTopP] = top_p[i % 4];
    rule[kernels::sample::kUniform] = u[i];
  }
  p.input("rules", rules, Array::kFloat64);
  p.output("token", rows, Array::kInt32);
}

void sample_rows_reference(Problem& p) {
  const std::int64_t rows = p.dims[0], V = p.dims[1];
  const std::vector<double>&logits = p.in("logits"), &rules = p.in("rules");
  std::vector<double>& token = p.out("token");
  std::vector<float> row(static_cast<std::size_t>(V));
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t v = 0; v < V; ++v) row[v] = static_cast<float>(logits[i * V + v]);
    token[i] = kernels::cpu::sample_row(row.data(), V, rules.data() + i * kernels::sample::kRuleSize);
  }
}

void call_sample_rows(kernels::sample_rows_fn f, const Args& a) {
  f(a.f<std::int32_t>("token"), a.f<float>("logits"), a.f<double>("rules"), a.dims[0], a.dims[1], a.stream);
}

Case sample_rows_case() {
  return Case{
      .name = "sample_rows",
      .what = "token (rows): one token drawn from each row of logits (rows, V) by its rule (temperature, top_k, "
              "top_p, u): a sampled decoding step's draw, no vocabulary sorted",
      .chapter = "20",
      .dim_names = {"rows", "V"},
      .gpu_size = {32, 50304}, .emulator_size = {4, 1000}, .cpu_size = {32, 50304},
      // one token; fewer tokens than a block's threads; more; GPT-2's padded vocabulary cut short
      .shapes = {{1, 1}, {5, 7}, {10, 300}, {3, 1031}},
      .tolerance = 0,  // a token
      // the logits read once, 4 float64 a rule, a token written (the passes read the row again:
      // up to 17 times with top_k and top_p, 7 without)
      .bytes = [](const Dims& d) { return 4.0 * (d[0] * d[1] + 8 * d[0] + d[0]); },
      .make = &sample_rows_make,
      .reference = &sample_rows_reference,
      .call = call(op::sample_rows, &call_sample_rows, op::sample_rows, &call_sample_rows)};
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
      as_gemv(linear_rows_case<kStore, true>("", ""), "linear_rows/gemv",
              "y (M, N) = x (M, K) @ w (N, K)^T + bias at a decoding step's M (1 to a few): bandwidth-bound, in GB/s"),
      as_gemv(linear_rows_bf16_case(), "linear_rows/gemv/bf16",
              "linear_rows/gemv on bfloat16 weights (--dtype bf16): y, x and the bias float32"),
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
      attend_cache_case(),
      append_cache_case(),
      sample_rows_case(),
  };
}

}  // namespace brrr::lab
