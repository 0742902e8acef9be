// lab/cases_reduction.cpp: the kernel lab's cases for chapter 13 (reductions, LayerNorm,
// softmax and cross-entropy): sum_dim, max_dim and its backward, softmax and log_softmax
// forward and backward, cross-entropy forward, backward and fused, LayerNorm forward and
// backward, and the fused residual + LayerNorm; and the ops whose variants are built from ops
// (framework/src/op_variants.cpp): layer_norm, residual_layer_norm and cross_entropy, each with
// its kernels or composed (chapter 07) as the registry picks. Read before: cases.h. Read next:
// cases_matmul.cpp.
//
// The references are the chapter's formulas as loops over rows, in double. A backward case's
// problem also holds the forward's inputs its kernel does not read (x for softmax_backward,
// bias for layernorm_backward), so that grad mode can differentiate the forward's formula.
// Its saved statistics (mean, rstd, lse, out) come from the forward's reference, rounded to
// float32 like every input, and the backward's reference reads them as the kernel does.
#include <algorithm>
#include <limits>

#include "brrr/bfloat16.h"
#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/tensor.h"
#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

constexpr double kEps = 1e-5;               // LayerNorm's, as PyTorch's default
constexpr std::int64_t kIgnoreIndex = -100;  // cross-entropy's, as PyTorch's

// --- the calls -------------------------------------------------------------------------------

template <class T>
void call_sum_dim(kernels::sum_dim_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("in"), a.dims[0], a.dims[1], a.dims[2], a.stream);
}
// sum_dim on bf16 data: in bfloat16, out float32.
void call_sum_dim_bf16(kernels::sum_dim_on_bf16_fn f, const Args& a) {
  f(a.f<float>("out"), a.f<bf16>("in"), a.dims[0], a.dims[1], a.dims[2], a.stream);
}
template <class T>
void call_max_dim(kernels::max_dim_fn<T> f, const Args& a) {
  f(a.f<T>("out"), static_cast<std::int64_t*>(a.get("index")), a.f<T>("in"), a.dims[0], a.dims[1], a.dims[2],
    a.stream);
}
template <class T>
void call_max_dim_backward(kernels::max_dim_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dout"), static_cast<const std::int64_t*>(a.get("index")), a.dims[0], a.dims[1], a.dims[2],
    a.stream);
}
template <class T>
void call_softmax_forward(kernels::softmax_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), a.dims[0], a.dims[1], a.stream);
}
template <class T>
void call_softmax_backward(kernels::softmax_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dout"), a.f<T>("out"), a.dims[0], a.dims[1], a.stream);
}
template <class T>
void call_cross_entropy_forward(kernels::cross_entropy_forward_fn<T> f, const Args& a) {
  f(a.f<T>("losses"), a.f<T>("lse"), a.f<T>("logits"), a.idx("targets"), a.dims[0], a.dims[1], kIgnoreIndex,
    a.stream);
}
template <class T>
void call_cross_entropy_backward(kernels::cross_entropy_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dlogits"), a.f<T>("dlosses"), a.f<T>("logits"), a.f<T>("lse"), a.idx("targets"), a.dims[0], a.dims[1],
    kIgnoreIndex, a.stream);
}
double mean_dloss(const Dims& d) { return 1.0 / static_cast<double>(std::max<std::int64_t>(d[0], 1)); }
template <class T>
void call_cross_entropy_fused(kernels::cross_entropy_fused_fn<T> f, const Args& a) {
  f(a.f<T>("losses"), a.f<T>("dlogits"), a.f<T>("logits"), a.idx("targets"), a.dims[0], a.dims[1], kIgnoreIndex,
    static_cast<T>(mean_dloss(a.dims)), a.stream);
}
void call_cross_entropy_fused_bf16(kernels::cross_entropy_fused_on_bf16_fn f, const Args& a) {
  f(a.f<float>("losses"), a.f<bf16>("dlogits"), a.f<bf16>("logits"), a.idx("targets"), a.dims[0], a.dims[1],
    kIgnoreIndex, static_cast<float>(mean_dloss(a.dims)), a.stream);
}
template <class T>
void call_layernorm_forward(kernels::layernorm_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("mean"), a.f<T>("rstd"), a.f<T>("x"), a.f<T>("weight"), a.f<T>("bias"), a.dims[0],
    a.dims[1], static_cast<T>(kEps), a.stream);
}
template <class T>
void call_layernorm_backward(kernels::layernorm_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dweight"), a.f<T>("dbias"), a.f<T>("dout"), a.f<T>("x"), a.f<T>("weight"), a.f<T>("mean"),
    a.f<T>("rstd"), a.dims[0], a.dims[1], a.stream);
}
template <class T>
void call_residual_layernorm_forward(kernels::residual_layernorm_forward_fn<T> f, const Args& a) {
  f(a.f<T>("sum"), a.f<T>("out"), a.f<T>("mean"), a.f<T>("rstd"), a.f<T>("x"), a.f<T>("residual"), a.f<T>("weight"),
    a.f<T>("bias"), a.dims[0], a.dims[1], static_cast<T>(kEps), a.stream);
}
void call_residual_layernorm_forward_bf16(kernels::residual_layernorm_forward_on_bf16_fn f, const Args& a) {
  f(a.f<bf16>("sum"), a.f<bf16>("out"), a.f<float>("mean"), a.f<float>("rstd"), a.f<bf16>("x"), a.f<bf16>("residual"),
    a.f<bf16>("weight"), a.f<bf16>("bias"), a.dims[0], a.dims[1], static_cast<float>(kEps), a.stream);
}
void call_residual_layernorm_backward_bf16(kernels::residual_layernorm_backward_on_bf16_fn f, const Args& a) {
  f(a.f<bf16>("dsum"), a.f<bf16>("dweight"), a.f<bf16>("dbias"), a.f<bf16>("dout"), a.f<bf16>("dres"),
    a.f<bf16>("sum"), a.f<bf16>("weight"), a.f<float>("mean"), a.f<float>("rstd"), a.dims[0], a.dims[1], a.stream);
}

// --- sum and max over the middle axis of (outer, R, inner) -----------------------------------

void sum_dim_reference(Problem& p) {
  const std::int64_t outer = p.dims[0], R = p.dims[1], inner = p.dims[2];
  const std::vector<double>& in = p.in("in");
  std::vector<double>& out = p.out("out");
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < inner; ++j) {
      double s = 0;
      for (std::int64_t r = 0; r < R; ++r) s += in[(o * R + r) * inner + j];
      out[o * inner + j] = s;
    }
}

// The largest value and its first position (random normals have no ties).
void argmax(const std::vector<double>& in, const Dims& d, std::vector<double>* value, std::vector<double>* index) {
  const std::int64_t outer = d[0], R = d[1], inner = d[2];
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < inner; ++j) {
      std::int64_t best = 0;
      for (std::int64_t r = 1; r < R; ++r)
        if (in[(o * R + r) * inner + j] > in[(o * R + best) * inner + j]) best = r;
      if (value) (*value)[o * inner + j] = in[(o * R + best) * inner + j];
      if (index) (*index)[o * inner + j] = static_cast<double>(best);
    }
}

void make_max_dim_backward(Problem& p, Random& r) {
  const std::int64_t outer = p.dims[0], R = p.dims[1], inner = p.dims[2];
  const std::vector<float> in = r.normal(outer * R * inner);
  std::vector<double> index(outer * inner);
  argmax({in.begin(), in.end()}, p.dims, nullptr, &index);
  p.input("in", in);  // not read by the kernel: grad mode's forward
  p.input("dout", r.normal(outer * inner));
  p.indices("index", {index.begin(), index.end()});
  p.array("index").type = Array::kInt64;
  p.output("dx", outer * R * inner);
}

void max_dim_backward_reference(Problem& p) {  // dout at the saved positions, 0 elsewhere
  const std::int64_t outer = p.dims[0], R = p.dims[1], inner = p.dims[2];
  const std::vector<double>&dout = p.in("dout"), &index = p.in("index");
  std::vector<double>& dx = p.out("dx");
  std::fill(dx.begin(), dx.end(), 0.0);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < inner; ++j)
      dx[(o * R + static_cast<std::int64_t>(index[o * inner + j])) * inner + j] = dout[o * inner + j];
}

double max_dim_loss(const Problem& p) {
  std::vector<double> value(p.dims[0] * p.dims[2]);
  argmax(p.in("in"), p.dims, &value, nullptr);
  return dot(p.in("dout"), value);
}

// --- softmax and log-softmax over rows of (N, C) ---------------------------------------------

// y = softmax(x) per row (or log-softmax): exp(x - max) / sum exp(x - max).
std::vector<double> softmax(const std::vector<double>& x, std::int64_t N, std::int64_t C, bool log) {
  std::vector<double> y(x.size());
  for (std::int64_t n = 0; n < N; ++n) {
    const double* row = x.data() + n * C;
    const double max = *std::max_element(row, row + C);
    double sum = 0;
    for (std::int64_t c = 0; c < C; ++c) sum += std::exp(row[c] - max);
    for (std::int64_t c = 0; c < C; ++c)
      y[n * C + c] = log ? row[c] - max - std::log(sum) : std::exp(row[c] - max) / sum;
  }
  return y;
}

template <bool Log>
void softmax_reference(Problem& p) {
  p.out("out") = softmax(p.in("x"), p.dims[0], p.dims[1], Log);
}

template <bool Log>
void make_softmax_backward(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  const std::vector<float> x = r.normal(N * C, 0.0f, 3.0f);
  p.input("x", x);  // not read by the kernel: grad mode's forward
  p.input("dout", r.normal(N * C));
  p.input("out", as_float(softmax({x.begin(), x.end()}, N, C, Log)));
  p.output("dx", N * C);
}

// softmax: dx = y (dout - sum(dout y)); log-softmax: dx = dout - exp(y) sum(dout), per row.
template <bool Log>
void softmax_backward_reference(Problem& p) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  const std::vector<double>&dout = p.in("dout"), &y = p.in("out");
  std::vector<double>& dx = p.out("dx");
  for (std::int64_t n = 0; n < N; ++n) {
    double s = 0;
    for (std::int64_t c = 0; c < C; ++c) s += Log ? dout[n * C + c] : dout[n * C + c] * y[n * C + c];
    for (std::int64_t c = 0; c < C; ++c) {
      const std::int64_t i = n * C + c;
      dx[i] = Log ? dout[i] - std::exp(y[i]) * s : y[i] * (dout[i] - s);
    }
  }
}

template <bool Log>
double softmax_loss(const Problem& p) {
  return dot(p.in("dout"), softmax(p.in("x"), p.dims[0], p.dims[1], Log));
}

// --- cross-entropy: logits (N, V), targets (N) -----------------------------------------------

// Targets uniform over the vocabulary, with every 16th row (from the 6th) ignored as padding.
std::vector<std::int32_t> targets_for(Random& r, std::int64_t N, std::int64_t V) {
  std::vector<std::int32_t> t = r.integers(N, static_cast<std::int32_t>(V));
  for (std::int64_t n = 5; n < N; n += 16) t[n] = static_cast<std::int32_t>(kIgnoreIndex);
  return t;
}

// loss[n] = lse[n] - logits[n, target], lse[n] = log sum_v exp(logits[n, v]); 0 if ignored.
void cross_entropy(const std::vector<double>& logits, const std::vector<double>& targets, std::int64_t N,
                   std::int64_t V, std::vector<double>* losses, std::vector<double>* lse) {
  for (std::int64_t n = 0; n < N; ++n) {
    const double* row = logits.data() + n * V;
    const double max = *std::max_element(row, row + V);
    double sum = 0;
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - max);
    const double l = max + std::log(sum);
    const auto t = static_cast<std::int64_t>(targets[n]);
    if (lse) (*lse)[n] = l;
    if (losses) (*losses)[n] = t == kIgnoreIndex ? 0.0 : l - row[t];
  }
}

void make_cross_entropy(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], V = p.dims[1];
  p.input("logits", r.normal(N * V, 0.0f, 2.0f));
  p.indices("targets", targets_for(r, N, V));
}

void cross_entropy_forward_reference(Problem& p) {
  cross_entropy(p.in("logits"), p.in("targets"), p.dims[0], p.dims[1], &p.out("losses"), &p.out("lse"));
}

// dlogits[n, v] = dlosses[n] (exp(logits[n, v] - lse[n]) - [v == target]); 0 if ignored.
void cross_entropy_gradient(const Problem& p, const std::vector<double>& lse, const std::vector<double>& dlosses,
                            std::vector<double>* dlogits) {
  const std::int64_t N = p.dims[0], V = p.dims[1];
  const std::vector<double>&logits = p.in("logits"), &targets = p.in("targets");
  for (std::int64_t n = 0; n < N; ++n) {
    const auto t = static_cast<std::int64_t>(targets[n]);
    for (std::int64_t v = 0; v < V; ++v)
      (*dlogits)[n * V + v] =
          t == kIgnoreIndex ? 0.0 : dlosses[n] * (std::exp(logits[n * V + v] - lse[n]) - (v == t ? 1.0 : 0.0));
  }
}

void make_cross_entropy_backward(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], V = p.dims[1];
  make_cross_entropy(p, r);
  std::vector<double> lse(N);
  cross_entropy(p.in("logits"), p.in("targets"), N, V, nullptr, &lse);
  p.input("dlosses", r.uniform(N, 0.5f / N, 1.5f / N));
  p.input("lse", as_float(lse));
  p.output("dlogits", N * V);
}

void cross_entropy_backward_reference(Problem& p) {
  // The bf16 kernels recompute lse from the logits rather than read the saved one, which is
  // rounded to bf16 (kernels/cpu/nn_bf16.cpp): in bfloat16, so does the reference.
  std::vector<double> lse = p.in("lse");
  if (p.dtype == kBFloat16) cross_entropy(p.in("logits"), p.in("targets"), p.dims[0], p.dims[1], nullptr, &lse);
  cross_entropy_gradient(p, lse, p.in("dlosses"), &p.out("dlogits"));
}

double cross_entropy_backward_loss(const Problem& p) {  // sum(dlosses * losses)
  std::vector<double> losses(p.dims[0]);
  cross_entropy(p.in("logits"), p.in("targets"), p.dims[0], p.dims[1], &losses, nullptr);
  return dot(p.in("dlosses"), losses);
}

void cross_entropy_fused_reference(Problem& p) {
  const std::int64_t N = p.dims[0];
  std::vector<double> lse(N);
  cross_entropy(p.in("logits"), p.in("targets"), N, p.dims[1], &p.out("losses"), &lse);
  // The kernel's dloss: a float in float32 and on bf16 data (cross_entropy_fused/bf16), a double in float64.
  const double dloss = p.dtype != kFloat64 ? static_cast<float>(mean_dloss(p.dims)) : mean_dloss(p.dims);
  const std::vector<double> dlosses(N, dloss);
  cross_entropy_gradient(p, lse, dlosses, &p.out("dlogits"));
}

double cross_entropy_fused_loss(const Problem& p) {  // the mean over rows: dloss * sum(losses)
  std::vector<double> losses(p.dims[0]);
  cross_entropy(p.in("logits"), p.in("targets"), p.dims[0], p.dims[1], &losses, nullptr);
  double s = 0;
  for (double l : losses) s += l;
  return static_cast<float>(mean_dloss(p.dims)) * s;
}

// --- LayerNorm over rows of (N, C) -----------------------------------------------------------

// mean = sum x / C, var = sum (x - mean)^2 / C (biased), rstd = 1 / sqrt(var + eps),
// out = (x - mean) rstd weight + bias.
void layernorm(const std::vector<double>& x, const std::vector<double>& weight, const std::vector<double>& bias,
               std::int64_t N, std::int64_t C, std::vector<double>* out, std::vector<double>* mean,
               std::vector<double>* rstd) {
  for (std::int64_t n = 0; n < N; ++n) {
    const double* row = x.data() + n * C;
    double m = 0, var = 0;
    for (std::int64_t c = 0; c < C; ++c) m += row[c];
    m /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) var += (row[c] - m) * (row[c] - m);
    const double s = 1.0 / std::sqrt(var / static_cast<double>(C) + kEps);
    if (mean) (*mean)[n] = m;
    if (rstd) (*rstd)[n] = s;
    if (out)
      for (std::int64_t c = 0; c < C; ++c) (*out)[n * C + c] = (row[c] - m) * s * weight[c] + bias[c];
  }
}

void make_layernorm(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  p.input("x", r.normal(N * C, 0.5f, 2.0f));  // an offset, so the mean matters
  p.input("weight", r.normal(C, 1.0f, 0.2f));
  p.input("bias", r.normal(C, 0.0f, 0.2f));
  p.output("out", N * C);
  p.output("mean", N);
  p.output("rstd", N);
}

void layernorm_forward_reference(Problem& p) {
  layernorm(p.in("x"), p.in("weight"), p.in("bias"), p.dims[0], p.dims[1], &p.out("out"), &p.out("mean"),
            &p.out("rstd"));
}

void make_layernorm_backward(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  p.input("dout", r.normal(N * C));
  p.input("x", r.normal(N * C, 0.5f, 2.0f));
  p.input("weight", r.normal(C, 1.0f, 0.2f));
  p.input("bias", r.normal(C, 0.0f, 0.2f));  // not read by the kernel: grad mode's forward
  std::vector<double> mean(N), rstd(N);
  layernorm(p.in("x"), p.in("weight"), p.in("bias"), N, C, nullptr, &mean, &rstd);
  p.input("mean", as_float(mean));
  p.input("rstd", as_float(rstd));
  p.output("dx", N * C);
  p.output("dweight", C);
  p.output("dbias", C);
}

// With xhat = (x - mean) rstd and g = dout weight, per row:
//   dx = rstd (g - mean(g) - xhat mean(g xhat)),  dweight = sum_n dout xhat,  dbias = sum_n dout.
void layernorm_backward_reference(Problem& p) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  const std::vector<double>&dout = p.in("dout"), &x = p.in("x"), &weight = p.in("weight"), &rstd = p.in("rstd");
  // The bf16 kernels recompute the mean from x rather than read the saved one, which is
  // rounded to bf16 (kernels/cpu/nn_bf16.cpp): in bfloat16, so does the reference.
  std::vector<double> mean = p.in("mean");
  if (p.dtype == kBFloat16)
    for (std::int64_t n = 0; n < N; ++n) {
      mean[n] = 0;
      for (std::int64_t c = 0; c < C; ++c) mean[n] += x[n * C + c] / static_cast<double>(C);
    }
  std::vector<double>&dx = p.out("dx"), &dweight = p.out("dweight"), &dbias = p.out("dbias");
  std::fill(dweight.begin(), dweight.end(), 0.0);
  std::fill(dbias.begin(), dbias.end(), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    double g_mean = 0, gx_mean = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const std::int64_t i = n * C + c;
      const double xhat = (x[i] - mean[n]) * rstd[n], g = dout[i] * weight[c];
      g_mean += g;
      gx_mean += g * xhat;
      dweight[c] += dout[i] * xhat;
      dbias[c] += dout[i];
    }
    g_mean /= static_cast<double>(C);
    gx_mean /= static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) {
      const std::int64_t i = n * C + c;
      const double xhat = (x[i] - mean[n]) * rstd[n];
      dx[i] = rstd[n] * (dout[i] * weight[c] - g_mean - xhat * gx_mean);
    }
  }
}

double layernorm_loss(const Problem& p) {
  std::vector<double> out(p.in("x").size());
  layernorm(p.in("x"), p.in("weight"), p.in("bias"), p.dims[0], p.dims[1], &out, nullptr, nullptr);
  return dot(p.in("dout"), out);
}

void make_residual_layer_norm(Problem& p, Random& r) {  // residual_layer_norm's: the op's inputs and outputs
  const std::int64_t N = p.dims[0], C = p.dims[1];
  p.input("x", r.normal(N * C, 0.5f, 2.0f));
  p.input("residual", r.normal(N * C));
  p.input("weight", r.normal(C, 1.0f, 0.2f));
  p.input("bias", r.normal(C, 0.0f, 0.2f));
  p.output("sum", N * C);
  p.output("out", N * C);
}

void make_residual_layernorm(Problem& p, Random& r) {  // the kernel's: the op's, and mean and rstd
  make_residual_layer_norm(p, r);
  p.output("mean", p.dims[0]);
  p.output("rstd", p.dims[0]);
}

void residual_layernorm_reference(Problem& p) {
  const std::vector<double>&x = p.in("x"), &residual = p.in("residual");
  std::vector<double>& sum = p.out("sum");
  for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + residual[i];
  // The kernel normalizes the sum it stored: in float32, sum rounded to float32.
  std::vector<double> stored = sum;
  if (p.dtype == kFloat32)
    for (double& s : stored) s = static_cast<float>(s);
  layernorm(stored, p.in("weight"), p.in("bias"), p.dims[0], p.dims[1], &p.out("out"), &p.out("mean"),
            &p.out("rstd"));
}

// On bf16 data (residual_layernorm.cu): the sum is stored in bf16, and normalized as stored.
void residual_layernorm_bf16_reference(Problem& p) {
  const std::vector<double>&x = p.in("x"), &residual = p.in("residual");
  std::vector<double>& sum = p.out("sum");
  for (std::size_t i = 0; i < x.size(); ++i) sum[i] = static_cast<float>(bf16(static_cast<float>(x[i] + residual[i])));
  layernorm(sum, p.in("weight"), p.in("bias"), p.dims[0], p.dims[1], &p.out("out"), &p.out("mean"), &p.out("rstd"));
}

// The backward's inputs: a stored sum (bf16 values), the gradients reaching it through out
// (dout) and directly (dres), and the forward's float32 statistics of that sum.
void make_residual_layernorm_backward(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  std::vector<float> sum = r.normal(N * C, 0.5f, 2.0f);
  for (float& v : sum) v = static_cast<float>(bf16(v));
  p.input("dout", r.normal(N * C));
  p.input("dres", r.normal(N * C));
  p.input("sum", sum);
  p.input("weight", r.normal(C, 1.0f, 0.2f));
  std::vector<double> mean(N), rstd(N);
  layernorm({sum.begin(), sum.end()}, p.in("weight"), std::vector<double>(C, 0.0), N, C, nullptr, &mean, &rstd);
  p.input("mean", as_float(mean), Array::kFloat32);
  p.input("rstd", as_float(rstd), Array::kFloat32);
  p.output("dsum", N * C);
  p.output("dweight", C);
  p.output("dbias", C);
}

// dsum = dres + rstd (g - mean(g) - xhat mean(g xhat)), xhat = (sum - mean) rstd, g = dout weight;
// dweight = sum_n dout xhat, dbias = sum_n dout (chapter 13's formulas, and the residual's gradient).
void residual_layernorm_backward_reference(Problem& p) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  const std::vector<double>&dout = p.in("dout"), &dres = p.in("dres"), &x = p.in("sum"), &weight = p.in("weight");
  const std::vector<double>&mean = p.in("mean"), &rstd = p.in("rstd");
  std::vector<double>&dx = p.out("dsum"), &dweight = p.out("dweight"), &dbias = p.out("dbias");
  std::fill(dweight.begin(), dweight.end(), 0.0);
  std::fill(dbias.begin(), dbias.end(), 0.0);
  for (std::int64_t n = 0; n < N; ++n) {
    double g_mean = 0, gx_mean = 0;
    for (std::int64_t c = 0; c < C; ++c) {
      const std::int64_t i = n * C + c;
      const double xhat = (x[i] - mean[n]) * rstd[n], g = dout[i] * weight[c];
      g_mean += g / static_cast<double>(C);
      gx_mean += g * xhat / static_cast<double>(C);
      dweight[c] += dout[i] * xhat;
      dbias[c] += dout[i];
    }
    for (std::int64_t c = 0; c < C; ++c) {
      const std::int64_t i = n * C + c;
      const double xhat = (x[i] - mean[n]) * rstd[n];
      dx[i] = dres[i] + rstd[n] * (dout[i] * weight[c] - g_mean - xhat * gx_mean);
    }
  }
}

// --- the ops built from ops: their variants take and return tensors --------------------------

void call_layer_norm(ops::variants::layer_norm_fn f, const Args& a) {
  const std::int64_t N = a.dims[0], C = a.dims[1];
  a.store("out", f(a.tensor("x", {N, C}, a.dtype), a.tensor("weight", {C}, a.dtype), a.tensor("bias", {C}, a.dtype),
                   kEps));
}

void make_layer_norm(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  p.input("x", r.normal(N * C, 0.5f, 2.0f));
  p.input("weight", r.normal(C, 1.0f, 0.2f));
  p.input("bias", r.normal(C, 0.0f, 0.2f));
  p.output("out", N * C);
}

void layer_norm_reference(Problem& p) {
  layernorm(p.in("x"), p.in("weight"), p.in("bias"), p.dims[0], p.dims[1], &p.out("out"), nullptr, nullptr);
}

void call_residual_layer_norm(ops::variants::residual_layer_norm_fn f, const Args& a) {
  const std::int64_t N = a.dims[0], C = a.dims[1];
  const auto [sum, out] = f(a.tensor("x", {N, C}, a.dtype), a.tensor("residual", {N, C}, a.dtype),
                            a.tensor("weight", {C}, a.dtype), a.tensor("bias", {C}, a.dtype), kEps);
  a.store("sum", sum);
  a.store("out", out);
}


void residual_layer_norm_reference(Problem& p) {
  const std::vector<double>&x = p.in("x"), &residual = p.in("residual");
  std::vector<double>& sum = p.out("sum");
  for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + residual[i];
  std::vector<double> stored = sum;  // normalized as stored, as the kernel does (see above)
  if (p.dtype == kFloat32)
    for (double& s : stored) s = static_cast<float>(s);
  layernorm(stored, p.in("weight"), p.in("bias"), p.dims[0], p.dims[1], &p.out("out"), nullptr, nullptr);
}

// The composed loss has no ignore_index, so every target here is a class.
void make_cross_entropy_loss(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], V = p.dims[1];
  p.input("logits", r.normal(N * V, 0.0f, 2.0f));
  p.indices("targets", r.integers(N, static_cast<std::int32_t>(V)));
  p.output("loss", 1);
}

void cross_entropy_loss_reference(Problem& p) {
  const std::int64_t N = p.dims[0];
  std::vector<double> losses(static_cast<std::size_t>(N));
  cross_entropy(p.in("logits"), p.in("targets"), N, p.dims[1], &losses, nullptr);
  double sum = 0;
  for (double l : losses) sum += l;
  p.out("loss")[0] = sum / static_cast<double>(N);
}

void call_cross_entropy(ops::variants::cross_entropy_fn f, const Args& a) {
  const std::int64_t N = a.dims[0], V = a.dims[1];
  a.store("loss", f(a.tensor("logits", {N, V}, a.dtype), a.tensor("targets", {N}, kInt32), kIgnoreIndex));
}

// grad mode: brrr::gradcheck through autograd, on the variant alone, in float64 (the kernels'
// backward and the composed op's derived one alike).
template <class Fn>
Fn variant_for_gradcheck(kernels::Op<Fn> op, const std::string& variant, Device device) {
  ops::register_op_variants();
  const Fn fn = kernels::lookup_variant(op, device.type, variant);
  BRRR_CHECK(fn != nullptr, "kernel-lab ", op.name, ": no variant '", variant, "'");
  return fn;
}

GradcheckResult layer_norm_gradcheck(const std::string& variant, Device device) {
  const auto fn = variant_for_gradcheck(ops::variants::layer_norm<double>, variant, device);
  Generator gen(13);
  const TensorOptions options = TensorOptions().dtype(kFloat64).device(device).requires_grad(true);
  const std::vector<Tensor> inputs = {randn({3, 7}, gen, options), randn({7}, gen, options), randn({7}, gen, options)};
  return gradcheck([fn](const std::vector<Tensor>& x) { return fn(x[0], x[1], x[2], kEps); }, inputs);
}

GradcheckResult residual_layer_norm_gradcheck(const std::string& variant, Device device) {
  const auto fn = variant_for_gradcheck(ops::variants::residual_layer_norm<double>, variant, device);
  Generator gen(17);
  const TensorOptions options = TensorOptions().dtype(kFloat64).device(device).requires_grad(true);
  const std::vector<Tensor> inputs = {randn({3, 7}, gen, options), randn({3, 7}, gen, options),
                                      randn({7}, gen, options), randn({7}, gen, options)};
  // Both outputs reach the loss, as in the GPT's block (the sum is the residual stream).
  return gradcheck(
      [fn](const std::vector<Tensor>& x) {
        const auto [sum, out] = fn(x[0], x[1], x[2], x[3], kEps);
        return ops::add(ops::mul(out, 2.0), ops::mul(sum, sum));
      },
      inputs);
}

GradcheckResult cross_entropy_gradcheck(const std::string& variant, Device device) {
  const auto fn = variant_for_gradcheck(ops::variants::cross_entropy<double>, variant, device);
  Generator gen(19);
  const TensorOptions options = TensorOptions().dtype(kFloat64).device(device).requires_grad(true);
  const Tensor targets =
      from_vector(std::vector<double>{2, 0, 4, 1}, {4}, TensorOptions().dtype(kInt64).device(device));
  return gradcheck([fn, targets](const std::vector<Tensor>& x) { return fn(x[0], targets, kIgnoreIndex); },
                   {randn({4, 5}, gen, options)});
}

// --- sizes -----------------------------------------------------------------------------------

// Rows of a model's width: 64 * 1024 rows of GPT-2 small's 768 on a GPU. Checked at one
// short row, and rows whose length is no multiple of 4 or 32 (ragged blocks and float4 tails).
Case rows(Case c) {
  c.chapter = "13";
  c.dim_names = {"N", "C"};
  if (c.gpu_size.empty()) c.gpu_size = {65536, 768}, c.emulator_size = {128, 768}, c.cpu_size = {16384, 768};
  if (c.shapes.empty()) c.shapes = {{1, 3}, {7, 100}, {5, 129}};
  c.grad_shape = {3, 7};
  return c;
}

// The vocabulary's rows: GPT-2's padded 50304, 8 * 1024 rows, on a GPU.
Case vocab(Case c) {
  c.gpu_size = {8192, 50304}, c.emulator_size = {32, 1000}, c.cpu_size = {512, 50304};
  c.shapes = {{1, 5}, {9, 300}, {22, 1001}};  // 22 rows: the ignored rows 5 and 21 included
  c = rows(c);
  c.dim_names = {"N", "V"};
  c.grad_shape = {6, 9};
  return c;
}

Case middle(Case c) {  // (outer, R, inner): a bias gradient, the sum over all 64K rows
  c.chapter = "13";
  c.dim_names = {"outer", "R", "inner"};
  c.gpu_size = {1, 65536, 768}, c.emulator_size = {2, 256, 96}, c.cpu_size = {1, 16384, 768};
  c.shapes = {{1, 1, 1}, {2, 37, 33}, {3, 100, 1}, {1, 1000, 7}};
  c.grad_shape = {2, 5, 3};
  return c;
}

// sum_dim on bf16 data is chapter 18's (a linear layer's bias gradient in the bf16 step).
Case bf16_bias_gradient(Case c) {
  c.chapter = "18";
  return c;
}

// cross_entropy_fused on bf16 data (chapter 18: the classifier of a step whose activations are
// bf16 in memory): logits and dlogits bfloat16, losses float32 (Array::kFloat32). Run with
// --dtype bfloat16 (its data is bf16 only); the reference is cross_entropy_fused's on the same
// bf16 logits, and dlogits is compared after the lab rounds the reference's to bf16.
Case cross_entropy_fused_bf16_case() {
  Case c = vocab({.name = "cross_entropy_fused/bf16",
                  .op = "cross_entropy_fused",
                  .what = "losses (N) float32, dlogits (N, V) in one pass over logits (N, V), bfloat16 in memory",
                  .tolerance = 1e-4,
                  // one read of logits, one write of dlogits; read targets, write losses
                  .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 8.0 * d[0]; },
                  .make = [](Problem& p, Random& r) {
                    make_cross_entropy(p, r);
                    p.output("losses", p.dims[0], Array::kFloat32);
                    p.output("dlogits", p.dims[0] * p.dims[1]);
                  },
                  .reference = &cross_entropy_fused_reference,
                  .call = call(op::cross_entropy_fused_on_bf16, &call_cross_entropy_fused_bf16,
                               op::cross_entropy_fused_on_bf16, &call_cross_entropy_fused_bf16)});
  c.chapter = "18";
  // 1001 values a row: the scalar path; 1000 and 304: whole 16-byte pieces (V % 8 == 0)
  c.shapes = {{1, 5}, {9, 304}, {22, 1001}, {4, 1000}};
  return c;
}

// Residual + LayerNorm on bf16 data (chapter 18; residual_layernorm.cu), forward and backward:
// every (N, C) array and weight, bias bfloat16, mean and rstd float32 (Array::kFloat32). Run
// with --dtype bfloat16. Checked at rows of 8 values (the 16-byte path: 1 to 4 and 8 of them a
// lane), rows of 100 and 129 (the scalar path), and enough rows for several blocks.
std::vector<Case> residual_layernorm_bf16_cases() {
  std::vector<Case> cases = {
      rows({.name = "residual_layernorm_forward/bf16",
            .op = "residual_layernorm_forward",
            .what = "sum (N, C) = x + residual; out = layernorm(sum), bfloat16 in memory; mean, rstd (N) float32",
            .tolerance = 1e-4,
            // read x, residual; write sum, out; read weight, bias; write mean, rstd
            .bytes = [](const Dims& d) { return 16.0 * d[0] * d[1] + 8.0 * d[1] + 8.0 * d[0]; },
            .make = [](Problem& p, Random& r) {
              make_residual_layer_norm(p, r);
              p.output("mean", p.dims[0], Array::kFloat32);
              p.output("rstd", p.dims[0], Array::kFloat32);
            },
            .reference = &residual_layernorm_bf16_reference,
            .call = call(op::residual_layernorm_forward_on_bf16, &call_residual_layernorm_forward_bf16,
                         op::residual_layernorm_forward_on_bf16, &call_residual_layernorm_forward_bf16)}),
      rows({.name = "residual_layernorm_backward/bf16",
            .op = "residual_layernorm_backward",
            .what = "dsum (N, C) = dres + layernorm's dx from dout; dweight, dbias (C); bfloat16 in memory",
            .tolerance = 1e-3,  // dweight and dbias are sums over all N rows
            // read dout, dres, sum, weight, mean, rstd; write dsum, dweight, dbias
            .bytes = [](const Dims& d) { return 16.0 * d[0] * d[1] + 12.0 * d[1] + 8.0 * d[0]; },
            .make = &make_residual_layernorm_backward, .reference = &residual_layernorm_backward_reference,
            .call = call(op::residual_layernorm_backward_on_bf16, &call_residual_layernorm_backward_bf16,
                         op::residual_layernorm_backward_on_bf16, &call_residual_layernorm_backward_bf16)}),
  };
  for (Case& c : cases) {
    c.chapter = "18";
    c.shapes = {{1, 8}, {7, 100}, {5, 129}, {9, 768}, {40, 264}, {130, 1024}, {3, 2048}};
  }
  return cases;
}

// Sums over a dim, softmax and log-softmax, cross-entropy's kernels.
std::vector<Case> sum_softmax_cases() {
  return {
      middle({.name = "sum_dim", .what = "out (outer, inner) = in (outer, R, inner) summed over R",
              .tolerance = 1e-4,
              .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] * d[2] + 4.0 * d[0] * d[2]; },
              .make = [](Problem& p, Random& r) {
                p.input("in", r.normal(p.dims[0] * p.dims[1] * p.dims[2]));
                p.output("out", p.dims[0] * p.dims[2]);
              },
              .reference = &sum_dim_reference,
              .call = call(op::sum_dim<float>, &call_sum_dim<float>, op::sum_dim<double>, &call_sum_dim<double>)}),
      // Chapter 18: a linear layer's bias gradient on bf16 data (run with --dtype bfloat16): the
      // float32 column sums of a bf16 gradient, without a widened copy.
      bf16_bias_gradient(middle({.name = "sum_dim/bf16", .op = "sum_dim",
              .what = "out (outer, inner) float32 = in (outer, R, inner) bfloat16 summed over R",
              .tolerance = 1e-4,
              // in float32 bytes, as every case counts them (the lab scales bf16 arrays to 2)
              .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] * d[2] + 4.0 * d[0] * d[2]; },
              .make = [](Problem& p, Random& r) {
                p.input("in", r.normal(p.dims[0] * p.dims[1] * p.dims[2]));
                p.output("out", p.dims[0] * p.dims[2], Array::kFloat32);
              },
              .reference = &sum_dim_reference,
              .call = call(op::sum_dim_on_bf16, &call_sum_dim_bf16, op::sum_dim_on_bf16, &call_sum_dim_bf16)})),
      middle({.name = "max_dim", .what = "out, index (outer, inner) = the max over R of in (outer, R, inner), first",
              .tolerance = 0, .tolerance64 = 0,
              .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] * d[2] + 12.0 * d[0] * d[2]; },
              .make = [](Problem& p, Random& r) {
                p.input("in", r.normal(p.dims[0] * p.dims[1] * p.dims[2]));
                p.output("out", p.dims[0] * p.dims[2]);
                p.output("index", p.dims[0] * p.dims[2], Array::kInt64);
              },
              .reference = [](Problem& p) { argmax(p.in("in"), p.dims, &p.out("out"), &p.out("index")); },
              .call = call(op::max_dim<float>, &call_max_dim<float>, op::max_dim<double>, &call_max_dim<double>)}),
      middle({.name = "max_dim_backward", .what = "dx (outer, R, inner) = dout (outer, inner) at index, else 0",
              .tolerance = 0, .tolerance64 = 0,
              .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] * d[2] + 12.0 * d[0] * d[2]; },
              .make = &make_max_dim_backward, .reference = &max_dim_backward_reference,
              .call = call(op::max_dim_backward<float>, &call_max_dim_backward<float>, op::max_dim_backward<double>,
                           &call_max_dim_backward<double>),
              .grads = {{.output = "dx", .input = "in"}}, .loss = &max_dim_loss}),
      rows({.name = "softmax_forward", .what = "out (N, C) = softmax of each row of x (N, C)",
            // attention's scores: B * n_head * T rows of T
            .gpu_size = {65536, 1024}, .emulator_size = {64, 1000}, .cpu_size = {8192, 1024},
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1]; },  // read x, write out
            .make = [](Problem& p, Random& r) {
              p.input("x", r.normal(p.dims[0] * p.dims[1], 0.0f, 3.0f));
              p.output("out", p.dims[0] * p.dims[1]);
            },
            .reference = &softmax_reference<false>,
            .call = call(op::softmax_forward<float>, &call_softmax_forward<float>, op::softmax_forward<double>,
                         &call_softmax_forward<double>)}),
      rows({.name = "softmax_backward", .what = "dx (N, C) = out (dout - sum(dout out)) per row",
            .gpu_size = {65536, 1024}, .emulator_size = {64, 1000}, .cpu_size = {8192, 1024},
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) { return 12.0 * d[0] * d[1]; },  // read dout and out, write dx
            .make = &make_softmax_backward<false>, .reference = &softmax_backward_reference<false>,
            .call = call(op::softmax_backward<float>, &call_softmax_backward<float>, op::softmax_backward<double>,
                         &call_softmax_backward<double>),
            .grads = {{.output = "dx", .input = "x"}}, .loss = &softmax_loss<false>}),
      rows({.name = "log_softmax_forward", .what = "out (N, C) = x - max - log(sum(exp(x - max))) per row",
            .gpu_size = {65536, 1024}, .emulator_size = {64, 1000}, .cpu_size = {8192, 1024},
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1]; },
            .make = [](Problem& p, Random& r) {
              p.input("x", r.normal(p.dims[0] * p.dims[1], 0.0f, 3.0f));
              p.output("out", p.dims[0] * p.dims[1]);
            },
            .reference = &softmax_reference<true>,
            .call = call(op::log_softmax_forward<float>, &call_softmax_forward<float>,
                         op::log_softmax_forward<double>, &call_softmax_forward<double>)}),
      rows({.name = "log_softmax_backward", .what = "dx (N, C) = dout - exp(out) sum(dout) per row",
            .gpu_size = {65536, 1024}, .emulator_size = {64, 1000}, .cpu_size = {8192, 1024},
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) { return 12.0 * d[0] * d[1]; },
            .make = &make_softmax_backward<true>, .reference = &softmax_backward_reference<true>,
            .call = call(op::log_softmax_backward<float>, &call_softmax_backward<float>,
                         op::log_softmax_backward<double>, &call_softmax_backward<double>),
            .grads = {{.output = "dx", .input = "x"}}, .loss = &softmax_loss<true>}),
      vocab({.name = "cross_entropy_forward", .what = "losses (N), lse (N) from logits (N, V) and targets (N)",
             .tolerance = 1e-4,
             // read logits and targets, write losses and lse
             .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] + 12.0 * d[0]; },
             .make = [](Problem& p, Random& r) {
               make_cross_entropy(p, r);
               p.output("losses", p.dims[0]);
               p.output("lse", p.dims[0]);
             },
             .reference = &cross_entropy_forward_reference,
             .call = call(op::cross_entropy_forward<float>, &call_cross_entropy_forward<float>,
                          op::cross_entropy_forward<double>, &call_cross_entropy_forward<double>,
                          op::cross_entropy_forward<bf16>, &call_cross_entropy_forward<bf16>)}),
      vocab({.name = "cross_entropy_backward",
             .what = "dlogits (N, V) from dlosses (N), logits (N, V), the forward's lse (N), targets",
             .tolerance = 1e-4,
             // read logits, write dlogits; read dlosses, lse, targets
             .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 12.0 * d[0]; },
             .make = &make_cross_entropy_backward, .reference = &cross_entropy_backward_reference,
             .call = call(op::cross_entropy_backward<float>, &call_cross_entropy_backward<float>,
                          op::cross_entropy_backward<double>, &call_cross_entropy_backward<double>,
                          op::cross_entropy_backward<bf16>, &call_cross_entropy_backward<bf16>),
             .grads = {{.output = "dlogits", .input = "logits"}}, .loss = &cross_entropy_backward_loss}),
      vocab({.name = "cross_entropy_fused",
             .what = "losses (N) and dlogits (N, V) in one pass over logits (N, V), dloss = 1/N",
             .tolerance = 1e-4,
             // one read of logits, one write of dlogits; read targets, write losses
             .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 8.0 * d[0]; },
             .make = [](Problem& p, Random& r) {
               make_cross_entropy(p, r);
               p.output("losses", p.dims[0]);
               p.output("dlogits", p.dims[0] * p.dims[1]);
             },
             .reference = &cross_entropy_fused_reference,
             .call = call(op::cross_entropy_fused<float>, &call_cross_entropy_fused<float>,
                          op::cross_entropy_fused<double>, &call_cross_entropy_fused<double>),
             .grads = {{.output = "dlogits", .input = "logits"}}, .loss = &cross_entropy_fused_loss}),
      cross_entropy_fused_bf16_case(),
  };
}

// LayerNorm's kernels, then the ops whose variants are kernels or composed.
std::vector<Case> layernorm_and_op_cases() {
  return {
      rows({.name = "layernorm_forward", .what = "out (N, C) = (x - mean) * rstd * weight (C) + bias (C); mean, rstd (N)",
            .tolerance = 1e-4,
            // read x, write out, read weight and bias, write mean and rstd
            .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 8.0 * d[1] + 8.0 * d[0]; },
            .make = &make_layernorm, .reference = &layernorm_forward_reference,
            .call = call(op::layernorm_forward<float>, &call_layernorm_forward<float>, op::layernorm_forward<double>,
                         &call_layernorm_forward<double>, op::layernorm_forward<bf16>, &call_layernorm_forward<bf16>)}),
      rows({.name = "layernorm_backward",
            .what = "dx (N, C), dweight (C), dbias (C) from dout, x, weight and the forward's mean, rstd",
            .tolerance = 1e-3,  // dweight and dbias are sums over all N rows
            // read dout, x, weight, mean, rstd; write dx, dweight, dbias
            .bytes = [](const Dims& d) { return 12.0 * d[0] * d[1] + 12.0 * d[1] + 8.0 * d[0]; },
            .make = &make_layernorm_backward, .reference = &layernorm_backward_reference,
            .call = call(op::layernorm_backward<float>, &call_layernorm_backward<float>,
                         op::layernorm_backward<double>, &call_layernorm_backward<double>,
                         op::layernorm_backward<bf16>, &call_layernorm_backward<bf16>),
            .grads = {{.output = "dx", .input = "x"},
                      {.output = "dweight", .input = "weight"},
                      {.output = "dbias", .input = "bias"}},
            .loss = &layernorm_loss}),
      rows({.name = "residual_layernorm_forward",
            .what = "sum (N, C) = x + residual; out = layernorm(sum); mean, rstd (N), fused",
            .tolerance = 1e-4,
            // read x, residual; write sum, out; read weight, bias; write mean, rstd
            .bytes = [](const Dims& d) { return 16.0 * d[0] * d[1] + 8.0 * d[1] + 8.0 * d[0]; },
            .make = &make_residual_layernorm, .reference = &residual_layernorm_reference,
            .call = call(op::residual_layernorm_forward<float>, &call_residual_layernorm_forward<float>,
                         op::residual_layernorm_forward<double>, &call_residual_layernorm_forward<double>)}),
      // --- chapter 07's ops, whose variants the registry picks: kernels (or fused) or composed ---
      rows({.name = "layer_norm", .what = "out (N, C) = layer_norm(x, weight (C), bias (C)): kernels or composed",
            .chapter = "07",
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 8.0 * d[1]; },  // read x, write out
            .make = &make_layer_norm, .reference = &layer_norm_reference,
            .call = call(ops::variants::layer_norm<float>, &call_layer_norm, ops::variants::layer_norm<double>,
                         &call_layer_norm),
            .gradcheck = &layer_norm_gradcheck}),
      rows({.name = "residual_layer_norm",
            .what = "sum (N, C) = x + residual; out = layer_norm(sum): fused or composed",
            .chapter = "07",
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) { return 16.0 * d[0] * d[1] + 8.0 * d[1]; },
            .make = &make_residual_layer_norm, .reference = &residual_layer_norm_reference,
            .call = call(ops::variants::residual_layer_norm<float>, &call_residual_layer_norm,
                         ops::variants::residual_layer_norm<double>, &call_residual_layer_norm),
            .gradcheck = &residual_layer_norm_gradcheck}),
      vocab({.name = "cross_entropy",
             .what = "the mean loss of logits (N, V) against targets (N): fused, kernels or composed",
             .chapter = "07",
             .tolerance = 1e-4,
             .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] + 4.0 * d[0]; },  // read logits, targets
             .make = &make_cross_entropy_loss, .reference = &cross_entropy_loss_reference,
             .call = call(ops::variants::cross_entropy<float>, &call_cross_entropy,
                          ops::variants::cross_entropy<double>, &call_cross_entropy),
             .gradcheck = &cross_entropy_gradcheck}),
  };
}

}  // namespace

std::vector<Case> reduction_cases() {
  std::vector<Case> all = sum_softmax_cases();
  for (Case& c : layernorm_and_op_cases()) all.push_back(std::move(c));
  for (Case& c : residual_layernorm_bf16_cases()) all.push_back(std::move(c));
  return all;
}

}  // namespace brrr::lab
