// framework/src/op_variants.cpp: ops whose variants are built from ops, and which variant
// each device gets by default. Chapter 04 introduces the registry; chapters 07, 15 and 17 use
// these. Read before: kernels/registry.h (providers), dispatch.h (OpVariant).
//
// Most ops reach one kernel, and the registry picks that kernel per device. A few are better
// done differently on different devices with ops that already exist, or come in a teaching
// version built from primitives (chapter 07), and that choice is the registry's too, never
// the model's: the variants below register like kernels (under the op's name, per device and
// dtype, with a priority), so GPT::forward calls one op and does not ask which device it runs
// on or whether it should teach, and BRRR_KERNELS=causal_attention=flash (or
// BRRR_KERNELS='*=composed': every op's "composed" variant) overrides the choice. The
// variants, highest priority (the default) first:
//
//   layer_norm           "kernels": layer_norm_kernels, one forward and one backward kernel;
//                        "composed": layer_norm_composed (mean, sub, mul, sqrt, div)
//   residual_layer_norm  "fused": residual_layer_norm_fused, the add and LayerNorm in one
//                        kernel; "composed": ops::add, then layer_norm_composed
//   gelu                 "kernels": gelu_kernels; "composed": gelu_composed (mul, add, tanh)
//   linear_gelu          "bias_in_gemm": linear with its bias, then ops::gelu (the CPU's default:
//                        the bias rides in the GEMM's output); "bias_gelu": the GEMM, then bias
//                        and GELU in one kernel (a GPU's default: one pass over the (N, 4C)
//                        activations fewer); "composed": linear, then gelu_composed
//   cross_entropy        "fused": cross_entropy_fused, whose forward kernel writes the gradient
//                        too; "kernels": cross_entropy_kernels, a forward and a backward
//                        kernel; "composed": cross_entropy_composed (log_softmax, one-hot mask)
//   causal_attention     "composed": matmul, mask, softmax, matmul (the CPU's default: its
//                        batched GEMMs beat the reference flash kernel there, docs/measurements.md;
//                        the one variant whose rule allows dropout, so the registry runs it for
//                        any call with dropout); "flash": ops::flash_attention's kernels (a GPU's
//                        default: no (T, T) tensor)
//
// All are registered in float32 and float64. bfloat16 tensors (chapter 18) go to the ops'
// kernels whatever is selected, as they did before the registry chose: layer_norm_kernels,
// gelu_kernels, residual_layer_norm_fused and cross_entropy_fused read bf16; causal_attention
// is flash_attention_qkv's kernels on bf16 data (with dropout, the composed op on a float32
// copy); linear_gelu is one matmul_epilogue op (the GEMM, the bias and GELU; chapter 18,
// section 11).
#include <initializer_list>
#include <mutex>
#include <utility>

#include "brrr/autocast.h"
#include "brrr/ops.h"
#include "dispatch.h"
#include "kernels/registry.h"

namespace brrr::ops {
namespace {

Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, double dropout, Generator* gen) {
  return causal_attention_composed(q, k, v, dropout, gen);
}
Tensor attention_flash(const Tensor& q, const Tensor& k, const Tensor& v, double dropout, Generator* /*gen*/) {
  BRRR_CHECK(dropout == 0.0, "causal_attention flash: no dropout (its rule; the registry does not run it with one)");
  return flash_attention(q, k, v);
}

Tensor linear_gelu_bias_in_gemm(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return gelu(linear(x, weight, bias));
}
Tensor linear_gelu_bias_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return bias.defined() ? bias_gelu(linear(x, weight), bias) : gelu(linear(x, weight));
}
Tensor linear_gelu_composed(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return gelu_composed(linear(x, weight, bias));
}

std::pair<Tensor, Tensor> residual_layer_norm_composed(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                       const Tensor& bias, double eps) {
  const Tensor sum = add(x, residual);
  return {sum, layer_norm_composed(sum, weight, bias, eps)};
}

Tensor cross_entropy_composed_any(const Tensor& logits, const Tensor& targets, std::int64_t /*ignore_index*/) {
  return cross_entropy_composed(logits, targets);  // no row is ignored: every target must be a class
}

// One registration of an op built from ops: the variant's name, its function, its priority on
// the CPU and on a GPU (the highest is the default), and the line `brrr kernels` shows.
template <class Fn>
struct Registration {
  const char* variant;
  Fn fn;
  int cpu_priority, gpu_priority;
  const char* about;
};

// Registers each row of `table` as a variant of `op` on `device`.
template <class Fn>
void add_variants(kernels::Op<Fn> op, DeviceType device, std::initializer_list<Registration<Fn>> table) {
  for (const Registration<Fn>& r : table)
    kernels::add(op, device, r.variant, r.fn, device == DeviceType::CPU ? r.cpu_priority : r.gpu_priority,
                 kernels::about(r.about));
}

template <class T>
void provide_dtype(DeviceType device) {
  const bool cpu = device == DeviceType::CPU;
  using kernels::about;
  // Each row: the variant, its function, its priority on the CPU and on a GPU, what it does.
  add_variants(variants::layer_norm<T>, device, {
      {"kernels", &layer_norm_kernels, 10, 10, "one forward kernel (mean and rstd kept) and one backward kernel"},
      {"composed", &layer_norm_composed, 0, 0, "mean, sub, mul, sqrt, div: autograd derives the backward (chapter 07)"},
  });
  add_variants(variants::residual_layer_norm<T>, device, {
      {"fused", &residual_layer_norm_fused, 10, 10,
       "the residual add and LayerNorm in one kernel; the backward is layer_norm's"},
      {"composed", &residual_layer_norm_composed, 0, 0, "ops::add, then layer_norm_composed"},
  });
  add_variants(variants::gelu<T>, device, {
      {"kernels", &gelu_kernels, 10, 10, "one forward kernel and one backward kernel"},
      {"composed", &gelu_composed, 0, 0, "mul, add, tanh: autograd derives the backward (chapter 07)"},
  });
  add_variants(variants::linear_gelu<T>, device, {
      {"bias_in_gemm", &linear_gelu_bias_in_gemm, 10, 0, "linear with its bias in the GEMM's output, then ops::gelu"},
      {"bias_gelu", &linear_gelu_bias_gelu, 0, 10,
       "the GEMM, then bias and GELU in one fused kernel (bias_gelu_forward)"},
      {"composed", &linear_gelu_composed, -10, -10, "linear with its bias, then gelu_composed"},
  });
  add_variants(variants::cross_entropy<T>, device, {
      {"fused", &cross_entropy_fused, 10, 10,
       "one kernel writes the losses and the gradient, kept until backward (chapter 16)"},
      {"kernels", &cross_entropy_kernels, 5, 5,
       "a forward kernel (one log-sum-exp per row kept) and a backward kernel"},
      {"composed", &cross_entropy_composed_any, 0, 0,
       "log_softmax times a one-hot mask: autograd derives the backward; no ignore_index"},
  });
  kernels::VariantMeta composed = about("matmul, causal mask, softmax, matmul: the (T, T) weights kept for autograd");
  composed.dropout = true;  // its eligibility rule: any call, dropout on the weights included
  kernels::add(variants::causal_attention<T>, device, "composed", &attention_composed, cpu ? 10 : 0, composed);
  kernels::add(variants::causal_attention<T>, device, "flash", &attention_flash, cpu ? 0 : 10,
               about("ops::flash_attention: one forward and one backward kernel, no (T, T) tensor"));
}

void provide(DeviceType device, bool /*emulated*/) {
  provide_dtype<float>(device);
  provide_dtype<double>(device);
}

// The framework's provider joins the registry before its first use, so a BRRR_KERNELS that
// names these ops (read when the registry is first built) finds them. A static initialiser:
// whatever calls an op of this file links this file, and add_provider touches nothing that
// needs initialising first (kernels/registry.cpp).
[[maybe_unused]] const bool provider_added = (register_op_variants(), true);

// The dtypes the variants are registered in. Another dtype goes to the op's kernels, which
// read bfloat16 and name the op in their error for any other dtype.
bool has_variants(DType dtype) { return dtype == kFloat32 || dtype == kFloat64; }

}  // namespace

void register_op_variants() {
  static std::once_flag once;
  std::call_once(once, [] { kernels::add_provider(&provide); });
}

void select_composed() {
  register_op_variants();
  kernels::select_from_spec("*=composed");
}

Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  detail::check_defined("layer_norm", x);
  if (!has_variants(x.dtype())) return layer_norm_kernels(x, weight, bias, eps);
  static detail::OpVariant variant(variants::layer_norm<float>);
  return variant(x.device(), x.dtype())(x, weight, bias, eps);
}

std::pair<Tensor, Tensor> residual_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                              const Tensor& bias, double eps) {
  detail::check_defined("residual_layer_norm", x);
  if (!has_variants(x.dtype())) return residual_layer_norm_fused(x, residual, weight, bias, eps);  // bf16 too
  static detail::OpVariant variant(variants::residual_layer_norm<float>);
  return variant(x.device(), x.dtype())(x, residual, weight, bias, eps);
}

Tensor gelu(const Tensor& x) {
  detail::check_defined("gelu", x);
  if (!has_variants(x.dtype())) return gelu_kernels(x);
  static detail::OpVariant variant(variants::gelu<float>);
  return variant(x.device(), x.dtype())(x);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index) {
  detail::check_defined("cross_entropy", logits);
  if (logits.dtype() == kBFloat16) return cross_entropy_fused(logits, targets, ignore_index);  // a float32 loss
  if (!has_variants(logits.dtype())) return cross_entropy_kernels(logits, targets, ignore_index);
  static detail::OpVariant variant(variants::cross_entropy<float>);
  return variant(logits.device(), logits.dtype())(logits, targets, ignore_index);
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double dropout, Generator* gen) {
  detail::check_defined("causal_attention", q);
  // The variants' rules read the dropout: the kernels have none, so with dropout the registry
  // runs "composed" (or refuses a selected "flash", naming the dropout).
  kernels::Call call;
  call.dropout = dropout;
  call.head_size = q.dim() == 4 ? q.size(3) : 0;
  static detail::OpVariant variant(variants::causal_attention<float>);
  return variant(q.device(), q.dtype(), call)(q, k, v, dropout, gen);
}

Tensor causal_attention_qkv(const Tensor& qkv, std::int64_t n_head, double dropout, Generator* gen) {
  detail::check_qkv("causal_attention_qkv", qkv, n_head);
  // bf16 data (chapter 18): the fused kernels on bf16 data. Dropout needs the composed variant,
  // which runs on a float32 copy under autocast (its matmuls' operands rounded), rounded once.
  if (qkv.dtype() == kBFloat16) {
    if (dropout == 0.0) return flash_attention_qkv(qkv, n_head);
    const Autocast autocast(kBFloat16);
    const Tensor wide = qkv.to(kFloat32);
    return causal_attention_composed(qkv_head(wide, n_head, 0), qkv_head(wide, n_head, 1), qkv_head(wide, n_head, 2),
                                     dropout, gen)
        .to(kBFloat16);
  }
  kernels::Call call;  // as causal_attention's
  call.dropout = dropout;
  call.head_size = qkv.size(2) / 3 / n_head;
  static detail::OpVariant variant(variants::causal_attention<float>);
  const variants::attention_fn chosen = variant(qkv.device(), qkv.dtype(), call);
  if (chosen == &attention_flash) return flash_attention_qkv(qkv, n_head);
  return chosen(qkv_head(qkv, n_head, 0), qkv_head(qkv, n_head, 1), qkv_head(qkv, n_head, 2), dropout, gen);
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined("linear_gelu", x);
  if (x.dtype() == kBFloat16) return linear_on_bf16(x, weight, bias, true);  // one op (chapter 18, section 11)
  static detail::OpVariant variant(variants::linear_gelu<float>);
  return variant(x.device(), x.dtype())(x, weight, bias);
}

}  // namespace brrr::ops
