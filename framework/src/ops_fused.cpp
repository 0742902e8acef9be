// framework/src/ops_fused.cpp: the fused ops of the GPU chapters, each one kernel where the
// composed form takes several: bias + GELU (chapter 12), residual add + LayerNorm (chapter
// 12) and the cross-entropy whose forward kernel also writes the gradient (chapters 13, 16).
// Read before: ops_nn.cpp (gelu, layer_norm, cross_entropy: the unfused ops these replace).
// Read next: kernels/cuda/gelu.cu.
//
// Each op works on every device: the CPU kernels (kernels/cpu/fused.cpp) are the unfused
// kernels run back to back, so a gradient check in float64 on the CPU checks the same
// autograd wiring the GPU uses.
#include <cmath>
#include <vector>

#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::saved;
using autograd::TensorList;

// ---------------------------------------------------------------------------------------------
// bias + GELU: out = gelu(x + bias), x (.., C), bias (C)

Tensor bias_gelu(const Tensor& x, const Tensor& bias) {
  BRRR_PROFILE("bias_gelu", x, bias);
  detail::check_defined("bias_gelu", x);
  detail::check_defined("bias_gelu", bias);
  BRRR_CHECK(x.dim() >= 1 && bias.dim() == 1 && bias.size(0) == x.size(-1), "bias_gelu: bias ",
             shape_str(bias.shape()), " does not match the last dim of the input ", shape_str(x.shape()));
  detail::check_same_dtype("bias_gelu", x, bias);
  detail::check_same_device("bias_gelu", x, bias);
  const std::int64_t C = x.size(-1), N = C ? x.numel() / C : 0;
  const Tensor in = x.contiguous(), b = bias.contiguous();
  Tensor out = detail::new_like(in);
  static detail::KernelFamily<kernels::bias_gelu_forward_fn> k(kernels::op::bias_gelu_forward<float>);
  detail::dispatch_floating_or_bf16(in.dtype(), "bias_gelu", [&]<class T>() {
    k.get<T>(in.device())(out.data_ptr<T>(), in.data_ptr<T>(), b.data_ptr<T>(), N, C, detail::stream(in.device()));
  });
  if (autograd::needs_grad({&x, &bias}))
    autograd::record("bias_gelu", {x, bias}, out, [in = saved(in), b = saved(b), N, C](const Tensor& g_in) {
      static detail::KernelFamily<kernels::bias_gelu_backward_fn> kb(kernels::op::bias_gelu_backward<float>);
      const Tensor g = g_in.contiguous();
      Tensor dx = detail::new_like(g), db = detail::new_like(b);
      detail::dispatch_floating_or_bf16(g.dtype(), "bias_gelu", [&]<class T>() {
        kb.get<T>(g.device())(dx.data_ptr<T>(), db.data_ptr<T>(), g.data_ptr<T>(), in.data_ptr<T>(), b.data_ptr<T>(),
                              N, C, detail::stream(g.device()));
      });
      return TensorList{dx, db};
    });
  return out;
}

// ---------------------------------------------------------------------------------------------
// residual add + LayerNorm: sum = x + residual, out = layer_norm(sum), on float32, float64 and
// bf16 data
//
// Two outputs, both differentiable (sum is the residual stream that the next block adds to),
// so the op records two nodes: "residual_add" (sum from x and residual; its backward passes
// the gradient to both) and "layer_norm" (out from sum, weight and bias; the backward of
// ops::layer_norm). Gradients reaching sum directly and through out meet in sum's node, as
// they would after ops::add followed by ops::layer_norm.

namespace {
// On bf16 data (chapter 18: kernels/cuda/residual_layernorm.cu): mean and rstd are float32, and
// the backward is one kernel that also adds the gradient sum collected from its other user, the
// next residual add (autograd::record_accumulating): dsum = dres + LayerNorm's dx, in one pass,
// where the float ops above write dx and then autograd adds the two in another.
std::pair<Tensor, Tensor> residual_layer_norm_on_bf16(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                      const Tensor& bias, const Tensor& in, const Tensor& r,
                                                      const Tensor& w, const Tensor& b, std::int64_t N,
                                                      std::int64_t C, double eps) {
  Tensor sum = detail::new_like(in), out = detail::new_like(in);
  Tensor mean = detail::new_tensor({N}, kFloat32, x.device()), rstd = detail::new_tensor({N}, kFloat32, x.device());
  static kernels::Kernel<kernels::residual_layernorm_forward_on_bf16_fn> k(kernels::op::residual_layernorm_forward_on_bf16);
  k(in.device().type, kBFloat16)(sum.data_ptr<bf16>(), out.data_ptr<bf16>(), mean.data_ptr<float>(),
                                 rstd.data_ptr<float>(), in.data_ptr<bf16>(), r.data_ptr<bf16>(), w.data_ptr<bf16>(),
                                 b.defined() ? b.data_ptr<bf16>() : nullptr, N, C, static_cast<float>(eps),
                                 detail::stream(in.device()));
  if (autograd::needs_grad({&x, &residual}))
    autograd::record("residual_add", {x, residual}, sum, [](const Tensor& g) { return TensorList{g, g}; });
  if (!autograd::needs_grad({&sum, &weight, &bias})) return {sum, out};
  auto backward = [s = saved(sum), w = saved(w), mean, rstd, N, C, has_bias = b.defined()](const Tensor& g_in,
                                                                                          const Tensor& collected) {
    static kernels::Kernel<kernels::residual_layernorm_backward_on_bf16_fn> kb(
        kernels::op::residual_layernorm_backward_on_bf16);
    const Tensor g = g_in.contiguous();
    const Tensor dres = collected.defined() ? collected.to(kBFloat16).contiguous() : Tensor();
    Tensor dsum = detail::new_like(g), dw = detail::new_like(w), db = has_bias ? detail::new_like(w) : Tensor();
    kb(g.device().type, kBFloat16)(dsum.data_ptr<bf16>(), dw.data_ptr<bf16>(), has_bias ? db.data_ptr<bf16>() : nullptr,
                                   g.data_ptr<bf16>(), dres.defined() ? dres.data_ptr<bf16>() : nullptr,
                                   s.data_ptr<bf16>(), w.data_ptr<bf16>(), mean.data_ptr<float>(),
                                   rstd.data_ptr<float>(), N, C, detail::stream(g.device()));
    return TensorList{dsum, dw, db};
  };
  autograd::record_accumulating("residual_layer_norm", {sum, weight, bias}, 0, out, std::move(backward));
  return {sum, out};
}
}  // namespace

std::pair<Tensor, Tensor> residual_layer_norm_fused(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                    const Tensor& bias, double eps) {
  BRRR_PROFILE("residual_layer_norm", x, residual);
  const char* op = "residual_layer_norm";
  for (const Tensor* t : {&x, &residual, &weight}) detail::check_defined(op, *t);
  BRRR_CHECK(x.dim() >= 1 && residual.shape() == x.shape(), op, ": residual ", shape_str(residual.shape()),
             " must have the input's shape ", shape_str(x.shape()));
  const std::int64_t C = x.size(-1), N = C ? x.numel() / C : 0;
  BRRR_CHECK(weight.dim() == 1 && weight.size(0) == C, op, ": weight ", shape_str(weight.shape()),
             " does not match the last dim of the input ", shape_str(x.shape()));
  BRRR_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == C), op, ": bias ", shape_str(bias.shape()),
             " does not match the last dim of the input ", shape_str(x.shape()));
  detail::check_same_dtype(op, x, residual);
  detail::check_same_dtype(op, x, weight);
  detail::check_same_device(op, x, residual);
  detail::check_same_device(op, x, weight);
  const Tensor in = x.contiguous(), r = residual.contiguous(), w = weight.contiguous();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  if (x.dtype() == kBFloat16) {
    if (b.defined()) detail::check_same_dtype(op, x, b);
    return residual_layer_norm_on_bf16(x, residual, weight, bias, in, r, w, b, N, C, eps);
  }
  Tensor sum = detail::new_like(in), out = detail::new_like(in);
  Tensor mean = detail::new_tensor({N}, x.dtype(), x.device());
  Tensor rstd = detail::new_tensor({N}, x.dtype(), x.device());
  static detail::KernelFamily<kernels::residual_layernorm_forward_fn> k(kernels::op::residual_layernorm_forward<float>);
  detail::dispatch_floating(x.dtype(), op, [&]<class T>() {
    k.get<T>(in.device())(sum.data_ptr<T>(), out.data_ptr<T>(), mean.data_ptr<T>(), rstd.data_ptr<T>(),
                          in.data_ptr<T>(), r.data_ptr<T>(), w.data_ptr<T>(), b.defined() ? b.data_ptr<T>() : nullptr,
                          N, C, static_cast<T>(eps), detail::stream(in.device()));
  });
  if (autograd::needs_grad({&x, &residual}))
    autograd::record("residual_add", {x, residual}, sum, [](const Tensor& g) { return TensorList{g, g}; });
  if (autograd::needs_grad({&sum, &weight, &bias}))
    autograd::record("layer_norm", {sum, weight, bias}, out,
                     [s = saved(sum), w = saved(w), mean, rstd, N, C, has_bias = b.defined()](const Tensor& g_in) {
                       static detail::KernelFamily<kernels::layernorm_backward_fn> kb(kernels::op::layernorm_backward<float>);
                       const Tensor g = g_in.contiguous();
                       Tensor dx = detail::new_like(g), dw = detail::new_like(w);
                       Tensor db = has_bias ? detail::new_like(w) : Tensor();
                       detail::dispatch_floating(g.dtype(), "residual_layer_norm", [&]<class T>() {
                         kb.get<T>(g.device())(dx.data_ptr<T>(), dw.data_ptr<T>(), has_bias ? db.data_ptr<T>() : nullptr,
                                               g.data_ptr<T>(), s.data_ptr<T>(), w.data_ptr<T>(), mean.data_ptr<T>(),
                                               rstd.data_ptr<T>(), N, C, detail::stream(g.device()));
                       });
                       return TensorList{dx, dw, db};
                     });
  return {sum, out};
}

// ---------------------------------------------------------------------------------------------
// cross-entropy, fused with its backward
//
// The loss is a mean over the rows that count, so d loss / d loss_n = 1 / counted is known
// before backward() runs. The forward kernel takes it as dloss and writes dlogits =
// dloss * (softmax - onehot) while the row is at hand; the backward only scales by the
// incoming gradient (1 when the loss is the root, so usually nothing at all). The price:
// dlogits, (N, V), is held from the forward to the backward. Without grad there is no
// backward to prepare, and the op is ops::cross_entropy_kernels.

namespace {
// Targets as int32 for the kernel, each in [0, V) or ignore_index; counts the rows that count.
Tensor checked_targets(const Tensor& targets, std::int64_t V, std::int64_t ignore_index, std::int64_t& counted) {
  BRRR_CHECK(targets.dtype() == kInt32 || targets.dtype() == kInt64,
             "cross_entropy_fused: targets must be int32 or int64, got ", dtype_name(targets.dtype()));
  // Targets on a device with no ignore_index: every row counts, and nothing is read back (the
  // range is checked on the device: device_checks.cpp).
  if (targets.device().is_cuda() && ignore_index == kNoIgnoreIndex && !detail::device_checks()) {
    counted = targets.numel();
    return detail::checked_on_device("cross_entropy_fused", targets.contiguous().to(kInt32), V, ignore_index);
  }
  const std::vector<std::int64_t> values = targets.to_vector<std::int64_t>();
  counted = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    BRRR_CHECK((values[i] >= 0 && values[i] < V) || values[i] == ignore_index, "cross_entropy_fused: target ",
               values[i], " at position ", i, " is out of range for ", V, " classes");
    counted += values[i] != ignore_index;
  }
  return targets.contiguous().to(kInt32);
}
}  // namespace

Tensor cross_entropy_fused(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index) {
  BRRR_PROFILE("cross_entropy_fused", logits, targets);
  detail::check_defined("cross_entropy_fused", logits);
  detail::check_defined("cross_entropy_fused", targets);
  if (!autograd::needs_grad({&logits})) return cross_entropy_kernels(logits, targets, ignore_index);
  BRRR_CHECK(logits.dim() == 2, "cross_entropy_fused: logits must be (N, V), got ", shape_str(logits.shape()));
  BRRR_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), "cross_entropy_fused: targets ",
             shape_str(targets.shape()), " do not match logits ", shape_str(logits.shape()), " (expected (",
             logits.size(0), ",))");
  const std::int64_t N = logits.size(0), V = logits.size(1);
  std::int64_t counted = 0;
  const Tensor t = checked_targets(targets, V, ignore_index, counted);
  const Tensor x = logits.contiguous();
  Tensor losses = detail::new_tensor({N}, x.dtype(), x.device());
  Tensor dlogits = detail::new_like(x);
  // All rows ignored: the loss is NaN (0 / 0, as in PyTorch) and every gradient row is 0.
  const double dloss = counted > 0 ? 1.0 / static_cast<double>(counted) : 0.0;
  static detail::KernelFamily<kernels::cross_entropy_fused_fn> k(kernels::op::cross_entropy_fused<float>);
  detail::dispatch_floating(x.dtype(), "cross_entropy_fused", [&]<class T>() {
    k.get<T>(x.device())(losses.data_ptr<T>(), dlogits.data_ptr<T>(), x.data_ptr<T>(), t.data_ptr<std::int32_t>(), N,
                         V, ignore_index, static_cast<T>(dloss), detail::stream(x.device()));
  });
  Tensor loss;
  {
    NoGradGuard no_grad;
    loss = div(sum(losses), static_cast<double>(counted));
  }
  autograd::record("cross_entropy_fused", {logits}, loss, [dlogits](const Tensor& g) {
    if (g.device().is_cpu()) {  // reading the scale is free on the host, and 1 needs no pass
      const double scale = g.item<double>();
      return TensorList{scale == 1.0 ? dlogits : mul(dlogits, scale)};
    }
    // On a device reading g would make the host wait: scale on the device instead.
    return TensorList{mul(dlogits, g)};
  });
  return loss;
}

}  // namespace brrr::ops
