// kernels/cpu/register.cpp: every CPU kernel into the registry, for float32 and float64.
// Chapter 04 (matmul and the CPU backend). The registry calls this once, on first use.
#include <type_traits>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/registry.h"

namespace brrr::kernels {

namespace {
constexpr DeviceType kCpu = DeviceType::CPU;

template <class T>
void register_floating() {
  constexpr DType dt = dtype_of<T>();
  add("fill", kCpu, dt, "cpu", &cpu::fill<T>, 0);
  add("copy", kCpu, dt, "cpu", &cpu::copy<T>, 0);
  add("uniform", kCpu, dt, "cpu", &cpu::uniform<T>, 0);
  add("normal", kCpu, dt, "cpu", &cpu::normal<T>, 0);
  add("dropout_mask", kCpu, dt, "cpu", &cpu::dropout_mask<T>, 0);
  add("neg", kCpu, dt, "cpu", &cpu::neg<T>, 0);
  add("exp", kCpu, dt, "cpu", &cpu::exp<T>, 0);
  add("log", kCpu, dt, "cpu", &cpu::log<T>, 0);
  add("sqrt", kCpu, dt, "cpu", &cpu::sqrt<T>, 0);
  add("tanh", kCpu, dt, "cpu", &cpu::tanh<T>, 0);
  add("relu", kCpu, dt, "cpu", &cpu::relu<T>, 0);
  add("sigmoid", kCpu, dt, "cpu", &cpu::sigmoid<T>, 0);
  add("pow_scalar", kCpu, dt, "cpu", &cpu::pow_scalar<T>, 0);
  add("relu_backward", kCpu, dt, "cpu", &cpu::relu_backward<T>, 0);
  add("add", kCpu, dt, "cpu", &cpu::add<T>, 0);
  add("sub", kCpu, dt, "cpu", &cpu::sub<T>, 0);
  add("mul", kCpu, dt, "cpu", &cpu::mul<T>, 0);
  add("div", kCpu, dt, "cpu", &cpu::div<T>, 0);
  add("masked_fill", kCpu, dt, "cpu", &cpu::masked_fill<T>, 0);
  add("sum_dim", kCpu, dt, "cpu", &cpu::sum_dim<T>, 0);
  add("max_dim", kCpu, dt, "cpu", &cpu::max_dim<T>, 0);
  add("max_dim_backward", kCpu, dt, "cpu", &cpu::max_dim_backward<T>, 0);
  add("matmul", kCpu, dt, "eigen", &cpu::matmul_eigen<T>, 10);
  add("matmul", kCpu, dt, "naive", &cpu::matmul_naive<T>, 0);
  add("embedding_forward", kCpu, dt, "cpu", &cpu::embedding_forward<T>, 0);
  if constexpr (std::is_same_v<T, float>)  // once: it has no floating-point dtype of its own
    add("check_indices", kCpu, kInt32, "cpu", &cpu::check_indices, 0);
  add("embedding_backward", kCpu, dt, "cpu", &cpu::embedding_backward<T>, 0);
  add("softmax_forward", kCpu, dt, "cpu", &cpu::softmax_forward<T>, 0);
  add("softmax_backward", kCpu, dt, "cpu", &cpu::softmax_backward<T>, 0);
  add("log_softmax_forward", kCpu, dt, "cpu", &cpu::log_softmax_forward<T>, 0);
  add("log_softmax_backward", kCpu, dt, "cpu", &cpu::log_softmax_backward<T>, 0);
  add("cross_entropy_forward", kCpu, dt, "cpu", &cpu::cross_entropy_forward<T>, 0);
  add("cross_entropy_backward", kCpu, dt, "cpu", &cpu::cross_entropy_backward<T>, 0);
  add("gelu_forward", kCpu, dt, "cpu", &cpu::gelu_forward<T>, 0);
  add("gelu_backward", kCpu, dt, "cpu", &cpu::gelu_backward<T>, 0);
  add("layernorm_forward", kCpu, dt, "cpu", &cpu::layernorm_forward<T>, 0);
  add("layernorm_backward", kCpu, dt, "cpu", &cpu::layernorm_backward<T>, 0);
  add("attention_forward", kCpu, dt, "cpu", &cpu::attention_forward<T>, 0);
  add("attention_backward", kCpu, dt, "cpu", &cpu::attention_backward<T>, 0);
  add("adamw_step", kCpu, dt, "cpu", &cpu::adamw_step<T>, 0);
  add("sgd_step", kCpu, dt, "cpu", &cpu::sgd_step<T>, 0);
  add("bias_gelu_forward", kCpu, dt, "cpu", &cpu::bias_gelu_forward<T>, 0);
  add("bias_gelu_backward", kCpu, dt, "cpu", &cpu::bias_gelu_backward<T>, 0);
  add("residual_layernorm_forward", kCpu, dt, "cpu", &cpu::residual_layernorm_forward<T>, 0);
  add("cross_entropy_fused", kCpu, dt, "cpu", &cpu::cross_entropy_fused<T>, 0);
  add("adamw_multi_step", kCpu, dt, "cpu", &cpu::adamw_multi_step<T>, 0);
}

template <class T>
void register_integer() {
  constexpr DType dt = dtype_of<T>();
  add("fill", kCpu, dt, "cpu", &cpu::fill<T>, 0);
  add("copy", kCpu, dt, "cpu", &cpu::copy<T>, 0);
}
}  // namespace

void register_cpu_kernels() {
  register_floating<float>();
  register_floating<double>();
#ifdef __AVX512F__
  // float32 only, and only where the AVX-512 micro-kernel compiles: beats "eigen" (10).
  add("matmul", kCpu, kFloat32, "blocked", &cpu::matmul_blocked<float>, 20);
#endif
  register_integer<std::int32_t>();
  register_integer<std::int64_t>();
  for (DType dt : {kFloat32, kFloat64, kInt32, kInt64}) add("cast", kCpu, dt, "cpu", &cpu::cast, 0);
}

}  // namespace brrr::kernels
