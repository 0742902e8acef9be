// framework/src/ops_nn.cpp: cat/stack, embedding, softmax, cross-entropy, GELU, LayerNorm,
// attention and dropout, each with its backward.
// Chapter 05 (modules) uses cat, embedding and dropout; chapter 07 (attention and the GPT)
// uses the rest. Read before: ops_matmul.cpp. Read next: nn.cpp.
//
// GELU, LayerNorm and cross-entropy come in two forms: with kernels (one forward kernel and
// one hand-written backward kernel: gelu_kernels, ...) and composed (built from primitive ops,
// so autograd derives the backward: gelu_composed, ...). The chapters time one against the
// other; which one ops::gelu runs is the registry's choice (op_variants.cpp).
#include <cmath>
#include <limits>

#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::saved;
using autograd::TensorList;

// ---------------------------------------------------------------------------------------------
// cat and stack

Tensor cat(const std::vector<Tensor>& tensors, int dim) {
  BRRR_PROFILE("cat");
  BRRR_CHECK(!tensors.empty(), "cat: expected at least one tensor");
  const Tensor& first = tensors.front();
  detail::check_defined("cat", first);
  dim = normalize_dim(dim, first.dim(), "cat");
  Shape shape = first.shape();
  shape[dim] = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    detail::check_defined("cat", t);
    detail::check_same_dtype("cat", first, t);
    detail::check_same_device("cat", first, t);
    BRRR_CHECK(t.dim() == first.dim(), "cat: tensor ", i, " has shape ", shape_str(t.shape()), ", expected ",
               first.dim(), " dims like ", shape_str(first.shape()));
    for (int d = 0; d < t.dim(); ++d)
      BRRR_CHECK(d == dim || t.shape()[d] == first.shape()[d], "cat: tensor ", i, " has shape ", shape_str(t.shape()),
                 ", which differs from ", shape_str(first.shape()), " outside dim ", dim);
    shape[dim] += t.shape()[dim];
  }
  Tensor out = detail::new_tensor(shape, first.dtype(), first.device());
  std::vector<std::int64_t> sizes;
  std::int64_t start = 0;
  for (const Tensor& t : tensors) {
    detail::copy_into(out.narrow(dim, start, t.shape()[dim]), t);
    sizes.push_back(t.shape()[dim]);
    start += t.shape()[dim];
  }
  if (autograd::needs_grad(tensors))  // each input gets its slice of the gradient
    autograd::record("cat", tensors, out, [sizes, dim](const Tensor& g) {
      TensorList grads;
      std::int64_t s = 0;
      for (std::int64_t n : sizes) {
        grads.push_back(g.narrow(dim, s, n));
        s += n;
      }
      return grads;
    });
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int dim) {
  BRRR_CHECK(!tensors.empty(), "stack: expected at least one tensor");
  std::vector<Tensor> expanded;
  for (const Tensor& t : tensors) {
    detail::check_defined("stack", t);
    BRRR_CHECK(t.shape() == tensors.front().shape(), "stack: shapes differ: ", shape_str(tensors.front().shape()),
               " and ", shape_str(t.shape()));
    expanded.push_back(t.unsqueeze(normalize_dim(dim, t.dim() + 1, "stack")));
  }
  return cat(expanded, dim);
}

// ---------------------------------------------------------------------------------------------
// embedding

namespace {
// Indices as int32 for the kernels, each checked to lie in [0, limit).
// The values are read to the host for the check; callers that need them pass `values`.
Tensor checked_indices(const char* op, const Tensor& indices, std::int64_t limit, std::int64_t allowed = INT64_MIN,
                       std::vector<std::int64_t>* values_out = nullptr) {
  detail::check_defined(op, indices);
  BRRR_CHECK(indices.dtype() == kInt32 || indices.dtype() == kInt64, op, ": indices must be int32 or int64, got ",
             dtype_name(indices.dtype()));
  const Tensor idx = indices.contiguous().to(kInt32);
  // Reading indices that live on a device back to the host makes the host wait for it: two
  // waits every training step (the token ids and the targets). So device indices are
  // checked on the device instead (device_checks.cpp), unless the caller needs their values
  // anyway or BRRR_DEVICE_CHECKS=1 asks for the check at once (for debugging).
  if (indices.device().is_cuda() && !values_out && !detail::device_checks())
    return detail::checked_on_device(op, idx, limit, allowed);  // no wait: reported at the next read
  const std::vector<std::int64_t> values = indices.to_vector<std::int64_t>();
  for (std::size_t i = 0; i < values.size(); ++i)
    BRRR_CHECK((values[i] >= 0 && values[i] < limit) || values[i] == allowed, op, ": index ", values[i], " at position ",
               i, " is out of range for ", limit, " entries");
  if (values_out) *values_out = values;
  return idx;
}
}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  BRRR_PROFILE("embedding", weight, indices);
  detail::check_defined("embedding", weight);
  BRRR_CHECK(weight.dim() == 2, "embedding: weight must be (num_embeddings, dim), got ", shape_str(weight.shape()));
  const std::int64_t V = weight.size(0), C = weight.size(1);
  const Tensor idx = checked_indices("embedding", indices, V);
  const Tensor w = weight.contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(C);
  Tensor out = detail::new_tensor(out_shape, weight.dtype(), weight.device());
  const std::int64_t N = idx.numel();
  static detail::KernelFamily<kernels::embedding_forward_fn> k(kernels::op::embedding_forward<float>);
  detail::dispatch_floating(weight.dtype(), "embedding", [&]<class T>() {
    k.get<T>(w.device())(out.data_ptr<T>(), w.data_ptr<T>(), idx.data_ptr<std::int32_t>(), N, C, detail::stream(w.device()));
  });
  if (autograd::needs_grad({&weight}))
    autograd::record("embedding", {weight}, out, [idx, V, C, N](const Tensor& g_in) {
      static detail::KernelFamily<kernels::embedding_backward_fn> kb(kernels::op::embedding_backward<float>);
      const Tensor g = g_in.contiguous();
      Tensor dw = zeros({V, C}, TensorOptions().dtype(g.dtype()).device(g.device()));
      detail::dispatch_floating(g.dtype(), "embedding", [&]<class T>() {
        kb.get<T>(g.device())(dw.data_ptr<T>(), g.data_ptr<T>(), idx.data_ptr<std::int32_t>(), N, V, C, detail::stream(g.device()));
      });
      return TensorList{dw};
    });
  return out;
}

// ---------------------------------------------------------------------------------------------
// softmax and log_softmax: the kernels work on rows, so another dim is moved last first.

namespace {
using RowForward = detail::KernelFamily<kernels::softmax_forward_fn>;
using RowBackward = detail::KernelFamily<kernels::softmax_backward_fn>;

Tensor row_op(const char* op, RowForward& forward, RowBackward& backward, const Tensor& x, int dim) {
  detail::check_defined(op, x);
  dim = normalize_dim(dim, x.dim(), op);
  if (x.dim() > 0 && dim != x.dim() - 1) return row_op(op, forward, backward, x.transpose(dim, -1), -1).transpose(dim, -1);
  const Tensor in = x.contiguous();
  const std::int64_t C = x.dim() == 0 ? 1 : x.size(-1), N = C ? in.numel() / C : 0;
  Tensor out = detail::new_like(in);
  detail::dispatch_floating(x.dtype(), op, [&]<class T>() {
    forward.get<T>(in.device())(out.data_ptr<T>(), in.data_ptr<T>(), N, C, detail::stream(in.device()));
  });
  if (autograd::needs_grad({&x}))
    autograd::record(op, {x}, out, [y = saved(out), N, C, op, &backward](const Tensor& g_in) {
      const Tensor g = g_in.contiguous();
      Tensor dx = detail::new_like(g);
      detail::dispatch_floating(g.dtype(), op, [&]<class T>() {
        backward.get<T>(g.device())(dx.data_ptr<T>(), g.data_ptr<T>(), y.data_ptr<T>(), N, C, detail::stream(g.device()));
      });
      return TensorList{dx};
    });
  return out;
}
}  // namespace

Tensor softmax(const Tensor& x, int dim) {
  BRRR_PROFILE("softmax", x);
  static RowForward forward(kernels::op::softmax_forward<float>);
  static RowBackward backward(kernels::op::softmax_backward<float>);
  return row_op("softmax", forward, backward, x, dim);
}

Tensor log_softmax(const Tensor& x, int dim) {
  BRRR_PROFILE("log_softmax", x);
  static RowForward forward(kernels::op::log_softmax_forward<float>);
  static RowBackward backward(kernels::op::log_softmax_backward<float>);
  return row_op("log_softmax", forward, backward, x, dim);
}

// ---------------------------------------------------------------------------------------------
// cross-entropy

Tensor cross_entropy_kernels(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index) {
  BRRR_PROFILE("cross_entropy", logits, targets);
  detail::check_defined("cross_entropy", logits);
  detail::check_defined("cross_entropy", targets);
  BRRR_CHECK(logits.dim() == 2, "cross_entropy: logits must be (N, V), got ", shape_str(logits.shape()));
  BRRR_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), "cross_entropy: targets ",
             shape_str(targets.shape()), " do not match logits ", shape_str(logits.shape()), " (expected (",
             logits.size(0), ",))");
  const std::int64_t N = logits.size(0), V = logits.size(1);
  // Every row counts when no target can be ignored; otherwise count them (a read of the
  // targets, which checks their range too).
  std::vector<std::int64_t> tv;
  const bool all_count = ignore_index == kNoIgnoreIndex;
  const Tensor t = checked_indices("cross_entropy", targets, V, ignore_index, all_count ? nullptr : &tv);
  std::int64_t counted = all_count ? N : 0;
  for (std::int64_t v : tv) counted += v != ignore_index;
  const Tensor x = logits.contiguous();
  Tensor losses = detail::new_tensor({N}, x.dtype(), x.device());
  Tensor lse = detail::new_tensor({N}, x.dtype(), x.device());
  static detail::KernelFamily<kernels::cross_entropy_forward_fn> k(kernels::op::cross_entropy_forward<float>);
  detail::dispatch_floating_or_bf16(x.dtype(), "cross_entropy", [&]<class T>() {
    k.get<T>(x.device())(losses.data_ptr<T>(), lse.data_ptr<T>(), x.data_ptr<T>(), t.data_ptr<std::int32_t>(), N, V,
                         ignore_index, detail::stream(x.device()));
  });
  // The mean over the rows that count; all rows ignored gives NaN, as in PyTorch.
  Tensor loss;
  {
    NoGradGuard no_grad;
    loss = div(sum(losses), static_cast<double>(counted));
  }
  if (autograd::needs_grad({&logits}))
    autograd::record("cross_entropy", {logits}, loss,
                     [x = saved(x), lse, t, N, V, ignore_index, counted](const Tensor& g) {
                       static detail::KernelFamily<kernels::cross_entropy_backward_fn> kb(kernels::op::cross_entropy_backward<float>);
                       // d mean / d loss_n = 1 / counted for every row (on a device, without
                       // reading g back: that would make the host wait).
                       Tensor dlosses = g.device().is_cpu()
                                            ? full({N}, g.item<double>() / static_cast<double>(counted),
                                                   TensorOptions().dtype(g.dtype()).device(g.device()))
                                            : div(g, static_cast<double>(counted)).reshape({1}).expand({N}).contiguous();
                       Tensor dx = detail::new_like(x);
                       detail::dispatch_floating_or_bf16(x.dtype(), "cross_entropy", [&]<class T>() {
                         kb.get<T>(x.device())(dx.data_ptr<T>(), dlosses.data_ptr<T>(), x.data_ptr<T>(), lse.data_ptr<T>(),
                                               t.data_ptr<std::int32_t>(), N, V, ignore_index, detail::stream(x.device()));
                       });
                       return TensorList{dx};
                     });
  return loss;
}

Tensor cross_entropy_composed(const Tensor& logits, const Tensor& targets) {
  BRRR_PROFILE("cross_entropy_composed", logits, targets);
  BRRR_CHECK(logits.dim() == 2, "cross_entropy_composed: logits must be (N, V), got ", shape_str(logits.shape()));
  const std::int64_t N = logits.size(0), V = logits.size(1);
  const Tensor t = checked_indices("cross_entropy_composed", targets, V);
  BRRR_CHECK(t.numel() == N, "cross_entropy_composed: ", t.numel(), " targets for ", N, " rows");
  // -mean(log_softmax(logits)[n, t[n]]): the gather is a one-hot mask times the row. The mask
  // is built where the logits are (no (N, V) copy from the host to a GPU): column index minus
  // target is exactly 0 at the target (integers below 2^24 are exact in float32).
  BRRR_CHECK(V < (1 << 24), "cross_entropy_composed: ", V, " classes; the one-hot needs fewer than 2^24");
  const TensorOptions like = TensorOptions().dtype(logits.dtype()).device(logits.device());
  const Tensor offset = sub(arange(V, like).reshape({1, V}), t.to(logits.device()).to(logits.dtype()).reshape({N, 1}));
  const Tensor one_hot = masked_fill(ones({N, V}, like), offset, 0.0);
  return neg(mean(sum(mul(log_softmax(logits, -1), one_hot), {1})));
}

// ---------------------------------------------------------------------------------------------
// GELU

namespace {
// An activation with a forward kernel and a backward kernel, dx = dout * f'(x) from the saved
// input: both GELUs.
Tensor activation_kernels(const char* name, detail::KernelFamily<kernels::unary_fn>& forward,
                          detail::KernelFamily<kernels::unary_backward_fn>& backward, const Tensor& x) {
  detail::check_defined(name, x);
  const Tensor in = x.contiguous();
  Tensor out = detail::new_like(in);
  detail::dispatch_floating_or_bf16(in.dtype(), name, [&]<class T>() {
    forward.get<T>(in.device())(out.data_ptr<T>(), in.data_ptr<T>(), in.numel(), detail::stream(in.device()));
  });
  if (autograd::needs_grad({&x}))
    autograd::record(name, {x}, out, [name, &backward, x = saved(in)](const Tensor& g_in) {
      const Tensor g = g_in.contiguous();
      Tensor dx = detail::new_like(g);
      detail::dispatch_floating_or_bf16(g.dtype(), name, [&]<class T>() {
        backward.get<T>(g.device())(dx.data_ptr<T>(), g.data_ptr<T>(), x.data_ptr<T>(), g.numel(),
                                    detail::stream(g.device()));
      });
      return TensorList{dx};
    });
  return out;
}
}  // namespace

Tensor gelu_kernels(const Tensor& x) {
  BRRR_PROFILE("gelu", x);
  static detail::KernelFamily<kernels::unary_fn> forward(kernels::op::gelu_forward<float>);
  static detail::KernelFamily<kernels::unary_backward_fn> backward(kernels::op::gelu_backward<float>);
  return activation_kernels("gelu", forward, backward, x);
}

Tensor gelu_erf(const Tensor& x) {
  BRRR_PROFILE("gelu_erf", x);
  static detail::KernelFamily<kernels::unary_fn> forward(kernels::op::gelu_erf_forward<float>);
  static detail::KernelFamily<kernels::unary_backward_fn> backward(kernels::op::gelu_erf_backward<float>);
  return activation_kernels("gelu_erf", forward, backward, x);
}

Tensor gelu_composed(const Tensor& x) {
  BRRR_PROFILE("gelu_composed", x);
  const double k = std::sqrt(2.0 / M_PI);
  const Tensor inner = mul(add(x, mul(pow(x, 3.0), 0.044715)), k);
  return mul(mul(x, 0.5), add(tanh(inner), 1.0));
}

// ---------------------------------------------------------------------------------------------
// LayerNorm over the last dim

namespace {
void check_layer_norm(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined(op, x);
  detail::check_defined(op, weight);
  BRRR_CHECK(x.dim() >= 1, op, ": input must have at least 1 dim");
  const std::int64_t C = x.size(-1);
  BRRR_CHECK(weight.dim() == 1 && weight.size(0) == C, op, ": weight ", shape_str(weight.shape()),
             " does not match the last dim of the input ", shape_str(x.shape()));
  BRRR_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == C), op, ": bias ", shape_str(bias.shape()),
             " does not match the last dim of the input ", shape_str(x.shape()));
  detail::check_same_dtype(op, x, weight);
}
}  // namespace

Tensor layer_norm_kernels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  BRRR_PROFILE("layer_norm", x, weight);
  check_layer_norm("layer_norm", x, weight, bias);
  const std::int64_t C = x.size(-1), N = C ? x.numel() / C : 0;
  const Tensor in = x.contiguous(), w = weight.contiguous(), b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor out = detail::new_like(in);
  Tensor mean = detail::new_tensor({N}, x.dtype(), x.device());
  Tensor rstd = detail::new_tensor({N}, x.dtype(), x.device());
  static detail::KernelFamily<kernels::layernorm_forward_fn> k(kernels::op::layernorm_forward<float>);
  detail::dispatch_floating_or_bf16(x.dtype(), "layer_norm", [&]<class T>() {
    k.get<T>(in.device())(out.data_ptr<T>(), mean.data_ptr<T>(), rstd.data_ptr<T>(), in.data_ptr<T>(), w.data_ptr<T>(),
                          b.defined() ? b.data_ptr<T>() : nullptr, N, C, static_cast<T>(eps), detail::stream(in.device()));
  });
  if (autograd::needs_grad({&x, &weight, &bias}))
    autograd::record("layer_norm", {x, weight, bias}, out,
                     [in = saved(in), w = saved(w), mean, rstd, N, C, has_bias = b.defined()](const Tensor& g_in) {
                       static detail::KernelFamily<kernels::layernorm_backward_fn> kb(kernels::op::layernorm_backward<float>);
                       const Tensor g = g_in.contiguous();
                       Tensor dx = detail::new_like(g);
                       Tensor dw = detail::new_like(w);
                       Tensor db = has_bias ? detail::new_like(w) : Tensor();
                       detail::dispatch_floating_or_bf16(g.dtype(), "layer_norm", [&]<class T>() {
                         kb.get<T>(g.device())(dx.data_ptr<T>(), dw.data_ptr<T>(), has_bias ? db.data_ptr<T>() : nullptr,
                                               g.data_ptr<T>(), in.data_ptr<T>(), w.data_ptr<T>(), mean.data_ptr<T>(),
                                               rstd.data_ptr<T>(), N, C, detail::stream(g.device()));
                       });
                       return TensorList{dx, dw, db};
                     });
  return out;
}

Tensor layer_norm_composed(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  BRRR_PROFILE("layer_norm_composed", x, weight);
  check_layer_norm("layer_norm_composed", x, weight, bias);
  const Tensor mu = mean(x, {-1}, true);
  const Tensor centered = sub(x, mu);
  const Tensor variance = mean(mul(centered, centered), {-1}, true);
  const Tensor normed = div(centered, sqrt(add(variance, eps)));
  const Tensor scaled = mul(normed, weight);
  return bias.defined() ? add(scaled, bias) : scaled;
}

// ---------------------------------------------------------------------------------------------
// causal self-attention, composed: softmax(q k^T / sqrt(hs) + mask) v

Tensor causal_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, Generator* gen) {
  BRRR_PROFILE("causal_attention_composed", q, k, v);
  detail::check_defined("causal_attention_composed", q);
  BRRR_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.shape() == q.shape(),
             "causal_attention_composed: q, k, v must all be (B, H, T, hs), got ", shape_str(q.shape()), ", ",
             shape_str(k.shape()), ", ", shape_str(v.shape()));
  const std::int64_t T = q.size(2), hs = q.size(3);
  const Tensor scores = mul(matmul(q, k.transpose(-2, -1)), 1.0 / std::sqrt(static_cast<double>(hs)));
  // mask[t, s] = 1 where s > t: position t may not look ahead. Made once per (T, dtype, device).
  thread_local std::vector<Tensor> masks;
  Tensor mask;
  for (const Tensor& m : masks)
    if (m.size(0) == T && m.dtype() == q.dtype() && m.device() == q.device()) mask = m;
  if (!mask.defined()) {
    std::vector<double> m(static_cast<std::size_t>(T * T));
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t s = 0; s < T; ++s) m[t * T + s] = s > t ? 1.0 : 0.0;
    mask = from_vector(m, {T, T}, TensorOptions().dtype(q.dtype()).device(q.device()));
    masks.push_back(mask);
  }
  Tensor att = softmax(masked_fill(scores, mask, -std::numeric_limits<double>::infinity()), -1);
  if (dropout_p > 0.0) {
    BRRR_CHECK(gen != nullptr, "causal_attention_composed: dropout needs a generator");
    att = dropout(att, dropout_p, *gen);
  }
  return matmul(att, v);
}

// ---------------------------------------------------------------------------------------------
// dropout

Tensor dropout(const Tensor& x, double p, Generator& gen, bool training) {
  BRRR_PROFILE("dropout", x);
  detail::check_defined("dropout", x);
  BRRR_CHECK(p >= 0.0 && p < 1.0, "dropout: p must be in [0, 1), got ", p);
  if (!training || p == 0.0) return x;
  // bf16 (chapter 18): the same mask on a float32 copy, the result rounded once.
  if (x.dtype() == kBFloat16) return dropout(x.to(kFloat32), p, gen, training).to(kBFloat16);
  detail::refuse_random_in_capture("dropout", x.device());
  Tensor mask = detail::new_like(x);
  const std::int64_t n = x.numel();
  detail::dispatch_floating(x.dtype(), "dropout", [&]<class T>() {
    static detail::KernelFamily<kernels::dropout_mask_fn> k(kernels::op::dropout_mask<float>);
    const std::uint64_t counter = gen.reserve(static_cast<std::uint64_t>((n + 3) / 4));
    k.get<T>(x.device())(mask.data_ptr<T>(), n, static_cast<T>(p), gen.seed(), counter, detail::stream(x.device()));
  });
  return mul(x, mask);
}

}  // namespace brrr::ops
