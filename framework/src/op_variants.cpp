// framework/src/op_variants.cpp: ops whose variants are built from ops, and which variant
// each device gets by default. Chapter 04 introduces the registry; chapters 15 and 17 use
// these. Read before: kernels/registry.h (providers), dispatch.h (OpVariant).
//
// Most ops reach one kernel, and the registry picks that kernel per device. A few are better
// done differently on different devices with ops that already exist, and that choice is the
// registry's too, never the model's: the variants below register like kernels (under the op's
// name, per device and dtype, with a priority), so GPT::forward calls one op and does not ask
// which device it runs on, and BRRR_KERNELS=causal_attention=flash overrides the choice.
//
//   causal_attention  "composed": matmul, mask, softmax, matmul (the CPU's default: its
//                     batched GEMMs beat the reference flash kernel there, docs/measurements.md);
//                     "flash": ops::flash_attention's kernels (a GPU's default: no (T, T) tensor)
//   linear_gelu       "bias_in_gemm": linear with its bias, then GELU (the CPU's default: the bias
//                     rides in the GEMM's output); "bias_gelu": the GEMM, then bias and GELU in one
//                     kernel (a GPU's default: one pass over the (N, 4C) activations fewer)
#include <mutex>

#include "brrr/ops.h"
#include "dispatch.h"
#include "kernels/registry.h"

namespace brrr::ops {
namespace {

Tensor attention_composed(const Tensor& q, const Tensor& k, const Tensor& v) {
  return causal_attention_composed(q, k, v);
}
Tensor attention_flash(const Tensor& q, const Tensor& k, const Tensor& v) { return flash_attention(q, k, v); }

Tensor linear_gelu_bias_in_gemm(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return gelu(linear(x, weight, bias));
}
Tensor linear_gelu_bias_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return bias.defined() ? bias_gelu(linear(x, weight), bias) : gelu(linear(x, weight));
}

template <class T>
void provide_dtype(DeviceType device) {
  const bool cpu = device == DeviceType::CPU;
  using kernels::about;
  kernels::add(variants::causal_attention<T>, device, "composed", &attention_composed, cpu ? 10 : 0,
               about("matmul, causal mask, softmax, matmul: the (T, T) weights kept for autograd"));
  kernels::add(variants::causal_attention<T>, device, "flash", &attention_flash, cpu ? 0 : 10,
               about("ops::flash_attention: one forward and one backward kernel, no (T, T) tensor"));
  kernels::add(variants::linear_gelu<T>, device, "bias_in_gemm", &linear_gelu_bias_in_gemm, cpu ? 10 : 0,
               about("linear with its bias in the GEMM's output, then GELU"));
  kernels::add(variants::linear_gelu<T>, device, "bias_gelu", &linear_gelu_bias_gelu, cpu ? 0 : 10,
               about("the GEMM, then bias and GELU in one fused kernel (bias_gelu_forward)"));
}

void provide(DeviceType device, bool /*emulated*/) {
  provide_dtype<float>(device);
  provide_dtype<double>(device);
}

}  // namespace

void register_op_variants() {
  static std::once_flag once;
  std::call_once(once, [] { kernels::add_provider(&provide); });
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double dropout, Generator* gen) {
  // The kernels have no dropout on the attention weights: with dropout it is the composed op.
  if (dropout > 0.0) return causal_attention_composed(q, k, v, dropout, gen);
  detail::check_defined("causal_attention", q);
  static detail::OpVariant variant(variants::causal_attention<float>);
  return variant(q.device(), q.dtype())(q, k, v);
}

Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined("linear_gelu", x);
  static detail::OpVariant variant(variants::linear_gelu<float>);
  return variant(x.device(), x.dtype())(x, weight, bias);
}

}  // namespace brrr::ops
