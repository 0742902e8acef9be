// lab/cases_attention.cpp: the kernel lab's cases for causal attention (chapter 15, flash
// attention): the forward and backward kernels, and causal_attention, the op whose variants
// (composed from matmul and softmax, or the flash kernels) the registry picks per device; and
// the kernels' bf16 versions that autocast calls (chapter 18, mixed precision).
// Read before: cases.h. Read next: cases_optim.cpp.
//
// For each of BH = batch * heads independent (T, hs) problems, with scale = 1 / sqrt(hs):
//   s[i, j] = scale q[i] . k[j] for j <= i (the causal mask), lse[i] = log sum_j exp(s[i, j]),
//   p[i, j] = exp(s[i, j] - lse[i]), out[i] = sum_j p[i, j] v[j].
// The backward, with D[i] = dout[i] . out[i]:
//   dv[j] = sum_i p[i, j] dout[i], dp[i, j] = dout[i] . v[j], ds[i, j] = p[i, j] (dp[i, j] - D[i]),
//   dq[i] = scale sum_j ds[i, j] k[j], dk[j] = scale sum_i ds[i, j] q[i].
#include <algorithm>

#include "brrr/bfloat16.h"
#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/tensor.h"
#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

double scale_for(const Dims& d) { return 1.0 / std::sqrt(static_cast<double>(d[2])); }
// The kernels' AttentionShape for dims (BH, T, hs).
kernels::AttentionShape shape_of(const Dims& d) { return {d[0], d[1], d[2], scale_for(d)}; }

template <class T>
void call_attention_forward(kernels::attention_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("lse"), a.f<T>("q"), a.f<T>("k"), a.f<T>("v"), shape_of(a.dims), a.stream);
}
template <class T>
void call_attention_backward(kernels::attention_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dq"), a.f<T>("dk"), a.f<T>("dv"), a.f<T>("dout"), a.f<T>("q"), a.f<T>("k"), a.f<T>("v"), a.f<T>("out"),
    a.f<T>("lse"), shape_of(a.dims), a.stream);
}

// out (BH, T, hs) and lse (BH, T) from q, k, v, as in the formulas above (attend_row, cases.h,
// for each query row: its weights computed once, out accumulated along v's rows); the BH
// problems spread over the cores.
void attention(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
               std::int64_t BH, std::int64_t T, std::int64_t hs, double scale, std::vector<double>* out,
               std::vector<double>* lse) {
  parallel_rows(BH, [&](std::int64_t b) {
    std::vector<double> s;
    const double *kb = k.data() + b * T * hs, *vb = v.data() + b * T * hs;
    for (std::int64_t i = 0; i < T; ++i) {
      const double l = attend_row(q.data() + (b * T + i) * hs, kb, vb, i + 1, hs, scale, s,
                                  out ? out->data() + (b * T + i) * hs : nullptr);
      if (lse) (*lse)[b * T + i] = l;
    }
  });
}

void attention_forward_reference(Problem& p) {
  attention(p.in("q"), p.in("k"), p.in("v"), p.dims[0], p.dims[1], p.dims[2], scale_for(p.dims), &p.out("out"),
            &p.out("lse"));
}

void make_attention_backward(Problem& p, Random& r) {
  const std::int64_t BH = p.dims[0], T = p.dims[1], hs = p.dims[2], n = BH * T * hs;
  p.input("dout", r.normal(n));
  p.input("q", r.normal(n));
  p.input("k", r.normal(n));
  p.input("v", r.normal(n));
  std::vector<double> out(n), lse(BH * T);
  attention(p.in("q"), p.in("k"), p.in("v"), BH, T, hs, scale_for(p.dims), &out, &lse);
  p.input("out", as_float(out));
  p.input("lse", as_float(lse));
  p.output("dq", n);
  p.output("dk", n);
  p.output("dv", n);
}

// The backward's formulas in double on the operands given (the problem's, or the baseline's
// rounded copies) and the saved lse: D = dout . out per row, then every (query, key) pair's
// P and dS. `round`, when given, rounds P and dS on their way into the products (the bf16
// baseline's); without it every number stays a double.
void backward_rows(Problem& p, const std::vector<double>& dout, const std::vector<double>& q,
                   const std::vector<double>& k, const std::vector<double>& v, const std::vector<double>& out,
                   float (*round)(float)) {
  const std::int64_t BH = p.dims[0], T = p.dims[1], hs = p.dims[2];
  const double scale = scale_for(p.dims);
  const std::vector<double>& lse = p.in("lse");
  std::vector<double>&dq = p.out("dq"), &dk = p.out("dk"), &dv = p.out("dv");
  std::fill(dq.begin(), dq.end(), 0.0);
  std::fill(dk.begin(), dk.end(), 0.0);
  std::fill(dv.begin(), dv.end(), 0.0);
  const auto rounded = [&](double x) { return round ? static_cast<double>(round(static_cast<float>(x))) : x; };
  parallel_rows(BH, [&](std::int64_t b) {  // each of the BH problems writes its own rows
    for (std::int64_t i = 0; i < T; ++i) {
      const std::int64_t row = (b * T + i) * hs;
      double D = 0;
      for (std::int64_t c = 0; c < hs; ++c) D += dout[row + c] * out[row + c];
      for (std::int64_t j = 0; j <= i; ++j) {
        const std::int64_t col = (b * T + j) * hs;
        double s = 0, dp = 0;
        for (std::int64_t c = 0; c < hs; ++c) {
          s += q[row + c] * k[col + c];
          dp += dout[row + c] * v[col + c];
        }
        const double prob = std::exp(scale * s - lse[b * T + i]);
        const double prob_in = rounded(prob);           // for P^T dout
        const double ds_in = rounded(prob * (dp - D));  // for dS k and dS^T q
        for (std::int64_t c = 0; c < hs; ++c) {
          dv[col + c] += prob_in * dout[row + c];
          dq[row + c] += scale * ds_in * k[col + c];
          dk[col + c] += scale * ds_in * q[row + c];
        }
      }
    }
  });
}

// The backward from the saved out and lse, as the kernels read them.
void attention_backward_reference(Problem& p) {
  backward_rows(p, p.in("dout"), p.in("q"), p.in("k"), p.in("v"), p.in("out"), nullptr);
}

double attention_loss(const Problem& p) {
  std::vector<double> out(p.in("q").size());
  attention(p.in("q"), p.in("k"), p.in("v"), p.dims[0], p.dims[1], p.dims[2], scale_for(p.dims), &out, nullptr);
  return dot(p.in("dout"), out);
}

// --- The low-precision baselines (chapter 18; Case::baseline) ---------------------------------
// What a careful bf16 attention computes, on the inputs as a bf16 variant sees them: q, k, v
// (and dout, out) through `round`, each product of rounded operands summed in double (float32
// or better, as the tensor cores' accumulators), the softmax in double, and the intermediates
// that enter a product rounded on their way in: P before P v in the forward; P before P^T dout
// and dS before dS k and dS^T q in the backward. That is FlashAttention-2's algorithm with the
// rounding a bf16 product cannot avoid and no more. (PyTorch's bf16 math path rounds more: S,
// dP and every product's output; its float32 softmax rounds P as this does, normalized.)

std::vector<double> through(const std::vector<double>& v, float (*round)(float)) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = round(static_cast<float>(v[i]));
  return r;
}

void attention_forward_baseline(Problem& p, float (*round)(float)) {
  const std::int64_t BH = p.dims[0], T = p.dims[1], hs = p.dims[2];
  const double scale = scale_for(p.dims);
  const std::vector<double> q = through(p.in("q"), round), k = through(p.in("k"), round),
                            v = through(p.in("v"), round);
  std::vector<double>&out = p.out("out"), &lse = p.out("lse");
  parallel_rows(BH, [&](std::int64_t b) {
    std::vector<double> s(T), o(hs);
    for (std::int64_t i = 0; i < T; ++i) {
      const double* qi = q.data() + (b * T + i) * hs;
      double max = -1e300;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::int64_t c = 0; c < hs; ++c) dot += qi[c] * k[(b * T + j) * hs + c];
        s[j] = scale * dot;
        max = std::max(max, s[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - max);
      const double l = max + std::log(sum);
      lse[b * T + i] = l;
      std::fill(o.begin(), o.end(), 0.0);
      for (std::int64_t j = 0; j <= i; ++j) {
        const double pj = round(static_cast<float>(std::exp(s[j] - l)));  // P, rounded for P v
        for (std::int64_t c = 0; c < hs; ++c) o[c] += pj * v[(b * T + j) * hs + c];
      }
      std::copy(o.begin(), o.end(), out.begin() + (b * T + i) * hs);
    }
  });
}

void attention_backward_baseline(Problem& p, float (*round)(float)) {
  backward_rows(p, through(p.in("dout"), round), through(p.in("q"), round), through(p.in("k"), round),
                through(p.in("v"), round), through(p.in("out"), round), round);
}

// --- attention_forward:bf16, attention_backward:bf16: bf16 products (chapter 18) ------------
// The float32 formulas on q, k, v (and dout) rounded to the nearest bf16, ties to even: what is
// left to a kernel's error is its own arithmetic (float32 sums; the tensor-core variant's bf16
// softmax weights). out and lse are the forward's float32 results and are not rounded.

Problem with_inputs_rounded(const Problem& p) {
  Problem r = p;
  for (Array& a : r.arrays)
    if (a.role == Array::kInput && a.name != "lse" && a.name != "out")
      for (double& x : a.values) x = round_to_bf16(static_cast<float>(x));
  return r;
}

void attention_forward_bf16_reference(Problem& p) {
  Problem r = with_inputs_rounded(p);
  attention_forward_reference(r);
  p.out("out") = r.out("out");
  p.out("lse") = r.out("lse");
}

void attention_backward_bf16_reference(Problem& p) {
  Problem r = with_inputs_rounded(p);
  attention_backward_reference(r);
  for (const char* name : {"dq", "dk", "dv"}) p.out(name) = r.out(name);
}

// The backward's inputs as a bf16 forward leaves them: out and lse from the rounded q, k, v.
void make_attention_backward_bf16(Problem& p, Random& r) {
  make_attention_backward(p, r);
  const Problem rounded = with_inputs_rounded(p);
  std::vector<double> out(p.in("q").size()), lse(p.in("lse").size());
  attention(rounded.in("q"), rounded.in("k"), rounded.in("v"), p.dims[0], p.dims[1], p.dims[2], scale_for(p.dims),
            &out, &lse);
  p.array("out").values = out;
  p.array("lse").values = lse;
  for (double& x : p.array("out").values) x = static_cast<float>(x);  // float32, as the lab's inputs are
  for (double& x : p.array("lse").values) x = static_cast<float>(x);
}

// --- attention_forward/bf16, attention_backward/bf16: on bf16 data (chapter 15's variant 4) ---
// bf16 in memory: run with --dtype bfloat16, which uploads q, k, v, dout, out as bf16 and rounds
// them for the reference; lse and the gradients are float32 (Array::kFloat32). The reference is
// the float32 op's, on those values.

void call_attention_forward_bf16_memory(kernels::attention_forward_on_bf16_fn f, const Args& a) {
  f(a.f<bf16>("out"), a.f<float>("lse"), a.f<bf16>("q"), a.f<bf16>("k"), a.f<bf16>("v"), shape_of(a.dims), a.stream);
}
void call_attention_backward_bf16_memory(kernels::attention_backward_on_bf16_fn f, const Args& a) {
  f(a.f<float>("dq"), a.f<float>("dk"), a.f<float>("dv"), a.f<bf16>("dout"), a.f<bf16>("q"), a.f<bf16>("k"),
    a.f<bf16>("v"), a.f<bf16>("out"), a.f<float>("lse"), shape_of(a.dims), a.stream);
}

// causal_attention on (B, H, T, hs) tensors: the forward above with BH = B * H.
void causal_attention_reference(Problem& p) {
  const std::int64_t B = p.dims[0], H = p.dims[1], T = p.dims[2], hs = p.dims[3];
  attention(p.in("q"), p.in("k"), p.in("v"), B * H, T, hs, 1.0 / std::sqrt(static_cast<double>(hs)),
            &p.out("out"), nullptr);
}

void call_causal_attention(ops::variants::attention_fn f, const Args& a) {
  const Shape shape = {a.dims[0], a.dims[1], a.dims[2], a.dims[3]};
  a.store("out", f(a.tensor("q", shape, a.dtype), a.tensor("k", shape, a.dtype), a.tensor("v", shape, a.dtype), 0.0,
                   nullptr));
}

// grad mode: brrr::gradcheck through autograd, on the variant alone, in float64.
GradcheckResult causal_attention_gradcheck(const std::string& variant, Device device) {
  const auto fn = kernels::lookup_variant(ops::variants::causal_attention<double>, device.type, variant);
  BRRR_CHECK(fn != nullptr, "kernel-lab causal_attention: no variant '", variant, "'");
  Generator gen(11);
  const TensorOptions options = TensorOptions().dtype(kFloat64).device(device).requires_grad(true);
  const std::vector<Tensor> inputs = {randn({1, 2, 5, 3}, gen, options), randn({1, 2, 5, 3}, gen, options),
                                      randn({1, 2, 5, 3}, gen, options)};
  return gradcheck([fn](const std::vector<Tensor>& x) { return fn(x[0], x[1], x[2], 0.0, nullptr); }, inputs);
}

// q @ k^T and p @ v, 2 T T hs flops each, over the causal half.
double attention_flops(const Dims& d) { return 4.0 * d[0] * d[1] * d[1] * d[2] / 2; }
// Recomputing the scores and four more matmuls: 2.5x the forward's.
double attention_backward_flops(const Dims& d) { return 2.5 * attention_flops(d); }

// The ideal traffic, in float32 bytes as every case counts it (the lab scales bf16 arrays):
// the forward reads q, k, v and writes out and lse; the backward reads dout, q, k, v, out and
// lse and writes dq, dk, dv.
double attention_forward_bytes(const Dims& d) { return 16.0 * d[0] * d[1] * d[2] + 4.0 * d[0] * d[1]; }
double attention_backward_bytes(const Dims& d) { return 32.0 * d[0] * d[1] * d[2] + 4.0 * d[0] * d[1]; }

void make_attention_forward(Problem& p, Random& r) {
  const std::int64_t n = p.dims[0] * p.dims[1] * p.dims[2];
  p.input("q", r.normal(n));
  p.input("k", r.normal(n));
  p.input("v", r.normal(n));
  p.output("out", n);
  p.output("lse", p.dims[0] * p.dims[1]);
}

Case attention_case(Case c) {
  c.chapter = "15";
  c.dim_names = {"BH", "T", "hs"};
  // GPT-2 small: batch 32 * 12 heads, T = 1024
  c.gpu_size = {384, 1024, 64}, c.emulator_size = {4, 64, 32}, c.cpu_size = {48, 256, 64};
  // one position; a T that is no multiple of the 64-row tiles; a head size below a padded one
  c.shapes = {{1, 1, 1}, {2, 37, 64}, {3, 70, 17}};
  c.report_flops = true;
  c.grad_shape = {2, 5, 3};
  return c;
}

// The bf16 ops: float32 data only (one descriptor twice: the call is "one dtype"), timed against
// the best bf16 GEMM's FLOP/s. Checked at T = 1, a T past one 64-row tile and not a multiple of
// it, and head sizes 16, 32 and 17 (padded inside the tensor-core tiles); head sizes 64, 128 and
// 136 (past variant 3's tiles) are checked by tests/emulator/test_attention.cpp, through the op.
Case attention_bf16_case(Case c) {
  c = attention_case(c);
  c.chapter = "18";
  c.peak_op = "matmul:bf16";
  c.shapes = {{1, 1, 16}, {2, 37, 32}, {1, 70, 17}};
  return c;
}

// Variant 4 takes head sizes 64 and 128 and 16-byte aligned pointers (cp.async), so the check
// shapes keep to head size 64 (T = 1, a ragged second tile; hs = 128 and T = 130 are
// tests/emulator/test_attention_bf16_memory.cpp's) and the lab runs it aligned only. The bar
// sizes: B*H = 96, T = 1024 (and 4096 by --size), hs = 64.
Case attention_bf16_memory_case(Case c) {
  c = attention_case(c);
  c.chapter = "18";
  c.peak_op = "matmul:bf16";
  c.gpu_size = {96, 1024, 64}, c.emulator_size = {2, 64, 64};
  c.shapes = {{1, 1, 64}, {2, 37, 64}};
  c.aligned_only = true;
  c.grad_shape = {};
  // The float32 ops' tolerances, the floor of the bf16 judgement (Case::baseline).
  c.tolerance = c.name == "attention_forward/bf16" ? 1e-4 : 1e-3;
  return c;
}

// --- attention_forward_qkv/bf16, attention_backward_qkv/bf16: the GPT's packed layouts ------
// (chapter 18, section 12). dims (B, heads, T, hs), C = heads hs: qkv (B, T, 3 C), out and dout
// (B, T, C), lse (B heads, T), dqkv (B, T, 3 C), all bf16 but lse (--dtype bfloat16). The
// references and baselines are the unpacked ops' on the (B heads, T, hs) problem the packed
// arrays hold, their results packed back.

// Head h of batch b of the column block at `column` of a (B, T, width) array <-> (B heads, T, hs).
std::vector<float> heads_of(const std::vector<double>& packed, const Dims& d, std::int64_t width,
                            std::int64_t column) {
  const std::int64_t B = d[0], H = d[1], T = d[2], hs = d[3];
  std::vector<float> out(static_cast<std::size_t>(B * H * T * hs));
  for (std::int64_t bh = 0; bh < B * H; ++bh)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < hs; ++c)
        out[static_cast<std::size_t>((bh * T + t) * hs + c)] =
            static_cast<float>(packed[static_cast<std::size_t>(((bh / H) * T + t) * width + column + (bh % H) * hs + c)]);
  return out;
}
void pack_heads(std::vector<double>& packed, const std::vector<double>& heads, const Dims& d, std::int64_t width,
                std::int64_t column) {
  const std::int64_t B = d[0], H = d[1], T = d[2], hs = d[3];
  for (std::int64_t bh = 0; bh < B * H; ++bh)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t c = 0; c < hs; ++c)
        packed[static_cast<std::size_t>(((bh / H) * T + t) * width + column + (bh % H) * hs + c)] =
            heads[static_cast<std::size_t>((bh * T + t) * hs + c)];
}

// The (B heads, T, hs) problem inside a packed one: q, k, v (and for the backward dout, out and
// lse) as inputs, the unpacked op's outputs.
Problem unpacked(const Problem& p, bool backward) {
  const Dims& d = p.dims;
  const std::int64_t C = d[1] * d[3], n = d[0] * d[1] * d[2] * d[3];
  Problem u;
  u.dims = {d[0] * d[1], d[2], d[3]};
  u.dtype = p.dtype;
  u.input("q", heads_of(p.in("qkv"), d, 3 * C, 0));
  u.input("k", heads_of(p.in("qkv"), d, 3 * C, C));
  u.input("v", heads_of(p.in("qkv"), d, 3 * C, 2 * C));
  if (backward) {
    u.input("dout", heads_of(p.in("dout"), d, C, 0));
    u.input("out", heads_of(p.in("out"), d, C, 0));
    const std::vector<double>& lse = p.in("lse");
    u.input("lse", std::vector<float>(lse.begin(), lse.end()));
    for (const char* name : {"dq", "dk", "dv"}) u.output(name, n);
  } else {
    u.output("out", n);
    u.output("lse", d[0] * d[1] * d[2]);
  }
  return u;
}
void packed_results(Problem& p, Problem& u, bool backward) {
  const std::int64_t C = p.dims[1] * p.dims[3];
  if (backward) {
    const char* names[] = {"dq", "dk", "dv"};
    for (int i = 0; i < 3; ++i) pack_heads(p.out("dqkv"), u.out(names[i]), p.dims, 3 * C, i * C);
  } else {
    pack_heads(p.out("out"), u.out("out"), p.dims, C, 0);
    p.out("lse") = u.out("lse");
  }
}

void make_attention_qkv(Problem& p, Random& r, bool backward) {
  const std::int64_t B = p.dims[0], H = p.dims[1], T = p.dims[2], hs = p.dims[3], C = H * hs;
  p.input("qkv", r.normal(B * T * 3 * C));
  if (!backward) {
    p.output("out", B * T * C);
    p.output("lse", B * H * T, Array::kFloat32);
    return;
  }
  p.input("dout", r.normal(B * T * C));
  // out and lse as a bf16 forward leaves them: from q, k, v rounded to bf16.
  Problem u = unpacked(p, false);
  for (Array& a : u.arrays)
    if (a.role == Array::kInput)
      for (double& x : a.values) x = round_to_bf16(static_cast<float>(x));
  std::vector<double> out(static_cast<std::size_t>(B * H * T * hs)), lse(static_cast<std::size_t>(B * H * T));
  attention(u.in("q"), u.in("k"), u.in("v"), B * H, T, hs, 1.0 / std::sqrt(static_cast<double>(hs)), &out, &lse);
  std::vector<double> packed(static_cast<std::size_t>(B * T * C));
  pack_heads(packed, out, p.dims, C, 0);
  p.input("out", as_float(packed));
  p.input("lse", as_float(lse), Array::kFloat32);
  p.output("dqkv", B * T * 3 * C);
}

template <bool kBackward>
void attention_qkv_reference(Problem& p) {
  Problem u = unpacked(p, kBackward);
  if (kBackward) attention_backward_reference(u);
  else attention_forward_reference(u);
  packed_results(p, u, kBackward);
}
template <bool kBackward>
void attention_qkv_baseline(Problem& p, float (*round)(float)) {
  Problem u = unpacked(p, kBackward);
  if (kBackward) attention_backward_baseline(u, round);
  else attention_forward_baseline(u, round);
  packed_results(p, u, kBackward);
}

void call_attention_forward_qkv(kernels::attention_forward_qkv_on_bf16_fn f, const Args& a) {
  const std::int64_t B = a.dims[0], H = a.dims[1], T = a.dims[2], hs = a.dims[3];
  f(a.f<bf16>("out"), a.f<float>("lse"), a.f<bf16>("qkv"), kernels::AttentionShape::of(B * H, T, hs), H, a.stream);
}
void call_attention_backward_qkv(kernels::attention_backward_qkv_on_bf16_fn f, const Args& a) {
  const std::int64_t B = a.dims[0], H = a.dims[1], T = a.dims[2], hs = a.dims[3];
  f(a.f<bf16>("dqkv"), a.f<bf16>("dout"), a.f<bf16>("qkv"), a.f<bf16>("out"), a.f<float>("lse"),
    kernels::AttentionShape::of(B * H, T, hs), H, a.stream);
}

// As attention_bf16_memory_case, with the batch and the heads apart: GPT-2's 16 x 12 heads at
// T = 1024 on a GPU; two heads of two batches at a ragged T on the emulator.
Case attention_qkv_case(Case c) {
  c.chapter = "18";
  c.dim_names = {"B", "heads", "T", "hs"};
  c.gpu_size = {16, 12, 1024, 64}, c.emulator_size = {1, 2, 64, 64}, c.cpu_size = {2, 12, 256, 64};
  c.shapes = {{1, 1, 1, 64}, {2, 2, 37, 64}};
  c.report_flops = true;
  c.peak_op = "matmul:bf16";
  c.aligned_only = true;
  const bool backward = c.name == "attention_backward_qkv/bf16";
  c.tolerance = backward ? 1e-3 : 1e-4;
  c.flops = backward ? +[](const Dims& d) { return attention_backward_flops({d[0] * d[1], d[2], d[3]}); }
                     : +[](const Dims& d) { return attention_flops({d[0] * d[1], d[2], d[3]}); };
  c.bytes = backward ? +[](const Dims& d) { return attention_backward_bytes({d[0] * d[1], d[2], d[3]}); }
                     : +[](const Dims& d) { return attention_forward_bytes({d[0] * d[1], d[2], d[3]}); };
  return c;
}

}  // namespace

std::vector<Case> attention_cases() {
  return {
      attention_case({.name = "attention_forward",
                      .what = "causal attention: out (BH, T, hs), lse (BH, T) from q, k, v (BH, T, hs)",
                      .tolerance = 1e-4,
                      .bytes = &attention_forward_bytes,
                      .flops = &attention_flops,
                      .make = &make_attention_forward,
                      .reference = &attention_forward_reference,
                      .baseline = &attention_forward_baseline,
                      .call = call(op::attention_forward<float>, &call_attention_forward<float>,
                                   op::attention_forward<double>, &call_attention_forward<double>)}),
      attention_case({.name = "attention_backward",
                      .what = "dq, dk, dv (BH, T, hs) from dout, q, k, v and the forward's out, lse",
                      .tolerance = 1e-3,  // dk and dv are sums over every query that sees the key
                      .bytes = &attention_backward_bytes,
                      .flops = &attention_backward_flops,
                      .make = &make_attention_backward, .reference = &attention_backward_reference,
                      .baseline = &attention_backward_baseline,
                      .call = call(op::attention_backward<float>, &call_attention_backward<float>,
                                   op::attention_backward<double>, &call_attention_backward<double>),
                      .grads = {{.output = "dq", .input = "q"}, {.output = "dk", .input = "k"},
                                {.output = "dv", .input = "v"}},
                      .loss = &attention_loss}),
      attention_bf16_case({.name = "attention_forward:bf16",
                           .what = "attention_forward on q, k, v rounded to bf16: float32 in memory, sums and lse",
                           .tolerance = 1e-4,
                           .bytes = &attention_forward_bytes,
                           .flops = &attention_flops,
                           .make = &make_attention_forward,
                           .reference = &attention_forward_bf16_reference,
                           .baseline = &attention_forward_baseline,
                           .call = call(op::attention_forward<float>.autocast(), &call_attention_forward<float>,
                                        op::attention_forward<float>.autocast(), &call_attention_forward<float>)}),
      attention_bf16_case({.name = "attention_backward:bf16",
                           .what = "attention_backward on dout, q, k, v, out rounded to bf16: float32 lse and gradients",
                           .tolerance = 1e-3,
                           .bytes = &attention_backward_bytes,
                           .flops = &attention_backward_flops,
                           .make = &make_attention_backward_bf16,
                           .reference = &attention_backward_bf16_reference,
                           .baseline = &attention_backward_baseline,
                           .call = call(op::attention_backward<float>.autocast(), &call_attention_backward<float>,
                                        op::attention_backward<float>.autocast(), &call_attention_backward<float>)}),
      attention_bf16_memory_case(
          {.name = "attention_forward/bf16",
           .op = "attention_forward",
           .what = "out (BH, T, hs) bf16, lse (BH, T) float32 from q, k, v bf16 in memory",
           .bytes = &attention_forward_bytes,
           .flops = &attention_flops,
           .make = [](Problem& p, Random& r) {
             make_attention_forward(p, r);
             p.array("lse").type = Array::kFloat32;
           },
           .reference = &attention_forward_reference,
           .baseline = &attention_forward_baseline,
           .call = call(op::attention_forward_on_bf16, &call_attention_forward_bf16_memory,
                        op::attention_forward_on_bf16, &call_attention_forward_bf16_memory)}),
      attention_bf16_memory_case(
          {.name = "attention_backward/bf16",
           .op = "attention_backward",
           .what = "dq, dk, dv (BH, T, hs) float32 from dout, q, k, v, out bf16 and lse float32",
           .bytes = &attention_backward_bytes,
           .flops = &attention_backward_flops,
           .make = [](Problem& p, Random& r) {
             make_attention_backward_bf16(p, r);  // out and lse from the rounded q, k, v
             for (const char* name : {"lse", "dq", "dk", "dv"}) p.array(name).type = Array::kFloat32;
           },
           .reference = &attention_backward_reference,
           .baseline = &attention_backward_baseline,
           .call = call(op::attention_backward_on_bf16, &call_attention_backward_bf16_memory,
                        op::attention_backward_on_bf16, &call_attention_backward_bf16_memory)}),
      attention_qkv_case(
          {.name = "attention_forward_qkv/bf16",
           .op = "attention_forward_qkv",
           .what = "out (B, T, C) bf16, lse (B heads, T) float32 from the packed qkv (B, T, 3 C) bf16",
           .make = [](Problem& p, Random& r) { make_attention_qkv(p, r, false); },
           .reference = &attention_qkv_reference<false>,
           .baseline = &attention_qkv_baseline<false>,
           .call = call(op::attention_forward_qkv_on_bf16, &call_attention_forward_qkv,
                        op::attention_forward_qkv_on_bf16, &call_attention_forward_qkv)}),
      attention_qkv_case(
          {.name = "attention_backward_qkv/bf16",
           .op = "attention_backward_qkv",
           .what = "dqkv (B, T, 3 C) bf16 from dout, out (B, T, C) bf16, qkv bf16 and lse float32",
           .make = [](Problem& p, Random& r) { make_attention_qkv(p, r, true); },
           .reference = &attention_qkv_reference<true>,
           .baseline = &attention_qkv_baseline<true>,
           .call = call(op::attention_backward_qkv_on_bf16, &call_attention_backward_qkv,
                        op::attention_backward_qkv_on_bf16, &call_attention_backward_qkv)}),
      Case{.name = "causal_attention",
           .what = "out (B, H, T, hs) from q, k, v (B, H, T, hs): composed or flash, as the registry picks",
           .chapter = "15",
           .dim_names = {"B", "H", "T", "hs"},
           .gpu_size = {32, 12, 1024, 64}, .emulator_size = {1, 4, 64, 32}, .cpu_size = {4, 12, 256, 64},
           .shapes = {{1, 1, 1, 1}, {2, 3, 37, 16}},
           .tolerance = 1e-4,
           .report_flops = true,
           .bytes = [](const Dims& d) { return 16.0 * d[0] * d[1] * d[2] * d[3]; },
           .flops = [](const Dims& d) { return attention_flops({d[0] * d[1], d[2], d[3]}); },
           .make = [](Problem& p, Random& r) {
             const std::int64_t n = p.dims[0] * p.dims[1] * p.dims[2] * p.dims[3];
             p.input("q", r.normal(n));
             p.input("k", r.normal(n));
             p.input("v", r.normal(n));
             p.output("out", n);
           },
           .reference = &causal_attention_reference,
           .call = call(ops::variants::causal_attention<float>, &call_causal_attention,
                        ops::variants::causal_attention<double>, &call_causal_attention),
           .gradcheck = &causal_attention_gradcheck},
  };
}

}  // namespace brrr::lab
