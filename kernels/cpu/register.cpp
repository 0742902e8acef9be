// kernels/cpu/register.cpp: every CPU kernel into the registry, for float32 and float64 (and
// bfloat16 where a kernel takes bf16 data, chapter 18).
// Chapter 04 (matmul and the CPU backend). The registry calls this once, on first use.
#include <type_traits>

#include "brrr/bfloat16.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/rows/rows.h"
#include "kernels/registry.h"
#include "kernels/transpose.h"

namespace brrr::kernels {

namespace {
constexpr DeviceType kCpu = DeviceType::CPU;

// "cpu" is each op's one CPU kernel: a plain loop over the formula, split over the cores by
// parallel_for in fixed-size chunks (reductions combine chunk partials in order, so the bits
// do not depend on the thread count). The about lines are what `brrr kernels` prints.
template <class T>
void register_floating() {
  add(op::fill<T>, kCpu, "cpu", &cpu::fill<T>, 0, about("std::fill over chunks"));
  add(op::copy<T>, kCpu, "cpu", &cpu::copy<T>, 0, about("memcpy when contiguous, else a strided loop"));
  add(op::uniform<T>, kCpu, "cpu", &cpu::uniform<T>, 0, about("Philox 4x32-10: 24 (float) or 53 (double) random bits per element"));
  add(op::normal<T>, kCpu, "cpu", &cpu::normal<T>, 0, about("Philox words through Box-Muller, in double"));
  add(op::dropout_mask<T>, kCpu, "cpu", &cpu::dropout_mask<T>, 0, about("Philox uniform < p gives 0, else 1 / (1 - p)"));
  add(op::neg<T>, kCpu, "cpu", &cpu::neg<T>, 0, about("a vectorized loop"));
  add(op::exp<T>, kCpu, "cpu", &cpu::exp<T>, 0, about("std::exp per element"));
  add(op::log<T>, kCpu, "cpu", &cpu::log<T>, 0, about("std::log per element"));
  add(op::sqrt<T>, kCpu, "cpu", &cpu::sqrt<T>, 0, about("std::sqrt per element"));
  add(op::tanh<T>, kCpu, "cpu", &cpu::tanh<T>, 0, about("std::tanh per element"));
  add(op::relu<T>, kCpu, "cpu", &cpu::relu<T>, 0, about("max(x, 0), vectorized"));
  add(op::sigmoid<T>, kCpu, "cpu", &cpu::sigmoid<T>, 0, about("1 / (1 + exp(-x)) per element"));
  add(op::pow_scalar<T>, kCpu, "cpu", &cpu::pow_scalar<T>, 0, about("std::pow per element"));
  add(op::relu_backward<T>, kCpu, "cpu", &cpu::relu_backward<T>, 0, about("dout where x > 0, else 0"));
  add(op::add<T>, kCpu, "cpu", &cpu::add<T>, 0, about("the Loop's outer dims walked, the last dim a plain loop"));
  add(op::sub<T>, kCpu, "cpu", &cpu::sub<T>, 0, about("as add"));
  add(op::mul<T>, kCpu, "cpu", &cpu::mul<T>, 0, about("as add"));
  add(op::div<T>, kCpu, "cpu", &cpu::div<T>, 0, about("as add"));
  add(op::masked_fill<T>, kCpu, "cpu", &cpu::masked_fill<T>, 0, about("as add, with a third (mask) operand"));
  add(op::sum_dim<T>, kCpu, "cpu", &cpu::sum_dim<T>, 0, about("double sums over fixed chunks of R, added in order"));
  add(op::max_dim<T>, kCpu, "cpu", &cpu::max_dim<T>, 0, about("a scan for the first largest value (NaN counts as largest)"));
  add(op::max_dim_backward<T>, kCpu, "cpu", &cpu::max_dim_backward<T>, 0, about("zeros, then dout scattered to the saved indices"));
  add(op::matmul<T>, kCpu, "eigen", &cpu::matmul_eigen<T>, 10, about("a fixed grid of tiles over the threads, each one single-threaded Eigen GEMM"));
  add(op::matmul<T>, kCpu, "naive", &cpu::matmul_naive<T>, 0, about("the textbook triple loop, accumulating in double: slow and exact"));
  add(op::embedding_forward<T>, kCpu, "cpu", &cpu::embedding_forward<T>, 0, about("one row copy per index"));
  add(op::embedding_backward<T>, kCpu, "cpu", &cpu::embedding_backward<T>, 0, about("threads split the columns, rows added in order (deterministic)"));
  add(op::softmax_forward<T>, kCpu, "cpu", &cpu::softmax_forward<T>, 0, about("per row: max, exp(x - max), sum, divide"));
  add(op::softmax_backward<T>, kCpu, "cpu", &cpu::softmax_backward<T>, 0, about("per row: out * (dout - sum(dout * out))"));
  add(op::log_softmax_forward<T>, kCpu, "cpu", &cpu::log_softmax_forward<T>, 0, about("per row: x - max - log(sum(exp(x - max)))"));
  add(op::log_softmax_backward<T>, kCpu, "cpu", &cpu::log_softmax_backward<T>, 0, about("per row: dout - exp(out) * sum(dout)"));
  add(op::cross_entropy_forward<T>, kCpu, "cpu", &cpu::cross_entropy_forward<T>, 0, about("per row: log-sum-exp minus the target's logit"));
  add(op::cross_entropy_backward<T>, kCpu, "cpu", &cpu::cross_entropy_backward<T>, 0, about("softmax rebuilt from the saved lse, minus the one-hot target"));
  add(op::gelu_forward<T>, kCpu, "cpu", &cpu::gelu_forward<T>, 0, about("the tanh form as x / (1 + exp(-2u)): one exp, vectorized"));
  add(op::gelu_backward<T>, kCpu, "cpu", &cpu::gelu_backward<T>, 0, about("gelu'(x) from the formula, vectorized tanh"));
  add(op::gelu_erf_forward<T>, kCpu, "cpu", &cpu::gelu_erf_forward<T>, 0, about("0.5 x erfc(-x / sqrt 2), a vectorized erfc"));
  add(op::gelu_erf_backward<T>, kCpu, "cpu", &cpu::gelu_erf_backward<T>, 0, about("Phi(x) + x phi(x), vectorized erfc and exp"));
  add(op::layernorm_forward<T>, kCpu, "cpu", &cpu::layernorm_forward<T>, 0, about("per row: mean, biased variance, normalize, scale and shift"));
  add(op::layernorm_backward<T>, kCpu, "cpu", &cpu::layernorm_backward<T>, 0, about("dx per row; dweight, dbias from fixed row chunks added in order"));
  add(op::attention_forward<T>, kCpu, "cpu", &cpu::attention_forward<T>, 0, about("one row of scores at a time (no (T, T) matrix), sums in double"));
  add(op::attention_backward<T>, kCpu, "cpu", &cpu::attention_backward<T>, 0, about("rebuilds each row's probabilities from lse, threads over heads"));
  // Convolution (conv.cpp, conv_im2col.cpp): "direct" is the definition summed in double, the
  // reference; "im2col" lowers each op to the registry's GEMM and is the default.
  add(op::conv2d_forward<T>, kCpu, "direct", &cpu::conv2d_direct_forward<T>, 0, about("the definition: one output at a time, summed in double"));
  add(op::conv2d_forward<T>, kCpu, "im2col", &cpu::conv2d_im2col_forward<T>, 10, about("windows copied into columns, then one GEMM per group"));
  add(op::conv2d_backward_input<T>, kCpu, "direct", &cpu::conv2d_direct_backward_input<T>, 0, about("per input pixel, the outputs whose windows cover it, in double"));
  add(op::conv2d_backward_input<T>, kCpu, "im2col", &cpu::conv2d_im2col_backward_input<T>, 10, about("weight^T @ dout, then col2im adds each column back"));
  add(op::conv2d_backward_weight<T>, kCpu, "direct", &cpu::conv2d_direct_backward_weight<T>, 0, about("per weight, the sum over images and positions, in double"));
  add(op::conv2d_backward_weight<T>, kCpu, "im2col", &cpu::conv2d_im2col_backward_weight<T>, 10, about("dout @ col^T per group of images, added in order"));
  add(op::max_pool2d_forward<T>, kCpu, "cpu", &cpu::max_pool2d_forward<T>, 0, about("per window: the first largest value and its index"));
  add(op::max_pool2d_backward<T>, kCpu, "cpu", &cpu::max_pool2d_backward<T>, 0, about("zeros, then dout added at the saved indices, plane by plane"));
  add(op::avg_pool2d_forward<T>, kCpu, "cpu", &cpu::avg_pool2d_forward<T>, 0, about("per window: the sum in double over kH kW"));
  add(op::avg_pool2d_backward<T>, kCpu, "cpu", &cpu::avg_pool2d_backward<T>, 0, about("dout / (kH kW) added to each input of its window"));
  add(op::adamw_step<T>, kCpu, "cpu", &cpu::adamw_step<T>, 0, about("the update per element, written with explicit fma"));
  add(op::sgd_step<T>, kCpu, "cpu", &cpu::sgd_step<T>, 0, about("momentum, dampening, Nesterov as PyTorch's SGD"));
  // fused.cpp: each of these is the unfused CPU kernels above run one after the other (not an
  // independent computation of the fused formula): checking a fused CUDA kernel against it
  // checks it against the unfused path; the kernel lab's references (lab/cases_*.cpp) are
  // written from the formulas instead.
  add(op::bias_gelu_forward<T>, kCpu, "cpu", &cpu::bias_gelu_forward<T>, 0, about("unfused: x + bias, then gelu_forward"));
  add(op::bias_gelu_backward<T>, kCpu, "cpu", &cpu::bias_gelu_backward<T>, 0, about("unfused: x + bias, gelu_backward, then the column sums"));
  add(op::matmul_bias_gelu<T>, kCpu, "cpu", &cpu::matmul_bias_gelu<T>, 0, about("unfused: the registry's matmul, then bias_gelu_forward"));
  add(op::residual_layernorm_forward<T>, kCpu, "cpu", &cpu::residual_layernorm_forward<T>, 0, about("unfused: x + residual, then layernorm_forward"));
  add(op::cross_entropy_fused<T>, kCpu, "cpu", &cpu::cross_entropy_fused<T>, 0, about("unfused: cross_entropy_forward, then cross_entropy_backward"));
  add(op::adamw_multi_step<T>, kCpu, "cpu", &cpu::adamw_multi_step<T>, 0, about("unfused: adamw_step on each tensor in turn"));
  add(op::adamw_clipped_multi_step<T>, kCpu, "cpu", &cpu::adamw_clipped_multi_step<T>, 0,
      about("the sum of squares over chunks of 1024 added in order, then adamw_step's loop on each g times the coefficient"));
}

template <class T>
void register_integer() {
  add(op::fill<T>, kCpu, "cpu", &cpu::fill<T>, 0, about("std::fill over chunks"));
  add(op::copy<T>, kCpu, "cpu", &cpu::copy<T>, 0, about("memcpy when contiguous, else a strided loop"));
}

template <class T>
void register_cast() {
  add(op::cast<T>, kCpu, "cpu", &cpu::cast, 0, about("static_cast per element, from any dtype"));
}
}  // namespace

void register_cpu_kernels() {
  register_floating<float>();
  register_floating<double>();
  cpu::register_transpose_kernels();  // kernels/cpu/transpose.cpp (chapter 14's transpose)
#ifdef __AVX512F__
  // float32 only, and only where the AVX-512 micro-kernel compiles: beats "eigen" (10).
  add(op::matmul<float>, kCpu, "blocked", &cpu::matmul_blocked<float>, 20,
      about("packed panels and an AVX-512 micro-kernel in registers (gemm_blocked.cpp)"));
#endif
  add(op::cross_entropy_fused<float>, kCpu, "rowwise", &cpu::cross_entropy_fused_rowwise, 10,
      about("one pass per row, kept in L1: max, exp_vec sums (in double), the gradient (fused.cpp)"));
  // Mixed precision (chapter 18): the AVX512-BF16 kernel where this CPU has the instruction
  // (asked at run time, so one binary runs on any x86 CPU), the plain loops everywhere.
  // Each rounds its inputs to bf16: they are matmul's bf16-products slot ("matmul:bf16"), which
  // the registry asks for the calls that want bf16 products (autocast's) and for no other.
  add(op::matmul<float>.autocast(), kCpu, "plain", &cpu::matmul_bf16_plain, 0,
      about("the bf16 GEMM's packing and loops in portable C++: float32 FMAs on exact bf16 products"));
  if (cpu::cpu_has_avx512_bf16())
    add(op::matmul<float>.autocast(), kCpu, "avx512bf16", &cpu::matmul_bf16_avx512, 20,
        about("pairs of bf16 packed into 32-bit words, a 12 x 32 tile of vdpbf16ps (gemm_bf16.cpp)"));
  // ... and attention under autocast: the float32 loops on inputs rounded where they are copied
  // (checked against the reference on the rounded inputs).
  add(op::attention_forward<float>.autocast(), kCpu, "cpu", &cpu::attention_forward_bf16, 0,
      about("attention_forward's loops, q, k, v rounded to bf16 where they are copied (no extra pass)"));
  add(op::attention_backward<float>.autocast(), kCpu, "cpu", &cpu::attention_backward_bf16, 0,
      about("attention_backward's loops, q, k, v and dout rounded to bf16 where they are read"));
  // ... and the ops on bf16 data of the tensor-core kernels that read bf16 from memory (chapters
  // 14 and 15): here the float32 kernels reading bf16 as they go, the references the lab runs
  // them beside, and the CPU's bf16 step.
  add(op::matmul_on_bf16, kCpu, "cpu", &cpu::matmul_bf16_memory, 0,
      about("the bf16 GEMM, its packing reading bf16 as it is (no widened copy)"));
  add(op::sum_dim_on_bf16, kCpu, "cpu", &cpu::sum_dim_bf16, 0,
      about("sum_dim's loops (double sums, chunks folded in order) reading bf16: sum_dim<float>'s bits on the widened values"));
  add(op::matmul_epilogue_on_bf16, kCpu, "cpu", &cpu::matmul_epilogue_bf16, 0,
      about("rows start as the bias, the bf16 GEMM adds a @ b in float32, one pass rounds (through GELU)"));
  add(op::attention_forward_on_bf16, kCpu, "cpu", &cpu::attention_forward_bf16_memory, 0,
      about("attention_forward's loops reading bf16 where they copy (exact), out rounded once"));
  add(op::attention_backward_on_bf16, kCpu, "cpu", &cpu::attention_backward_bf16_memory, 0,
      about("attention_backward's loops reading bf16 where they copy (exact)"));
  add(op::attention_forward_qkv_on_bf16, kCpu, "cpu", &cpu::attention_forward_qkv_bf16, 0,
      about("the heads copied out of qkv (exact), attention_forward on bf16 data, out copied into (B, T, C)"));
  add(op::attention_backward_qkv_on_bf16, kCpu, "cpu", &cpu::attention_backward_qkv_bf16, 0,
      about("the heads copied out, attention_backward on bf16 data, dq, dk, dv rounded into (B, T, 3 C)"));
  add(op::residual_layernorm_forward_on_bf16, kCpu, "cpu", &cpu::residual_layernorm_forward_bf16, 0,
      about("the sum rounded to bf16 once, layernorm_forward's float32 loops on it, float32 mean and rstd"));
  add(op::residual_layernorm_backward_on_bf16, kCpu, "cpu", &cpu::residual_layernorm_backward_bf16, 0,
      about("layernorm_backward's float32 loops, the residual's gradient added before the one rounding"));
  add(op::cross_entropy_fused_on_bf16, kCpu, "cpu", &cpu::cross_entropy_fused_bf16, 0,
      about("each row widened into an L1 buffer, the rowwise variant's loss and gradient, the gradient rounded once"));
  // The Decoder's kernels (chapter 08, kernels/cpu/rows/rows.h), registered for the kernel lab; the
  // Decoder calls them directly.
  add(op::linear_rows<float>, kCpu, "tiles", &cpu::linear_rows_op, 0,
      about("a GEMV of 4 weight rows at a time up to 2 rows, 3 x 3 tiles up to 47 (with AVX-512 8 x 4, two "
            "rows of W per vector, up to 32), then the GEMM's 6 x 16 tile over packed x and W (rows/rows.cpp, rows/gemm.cpp)"));
  add(op::linear_rows<double>, kCpu, "loop", &cpu::linear_rows_loop, 0, about("the formula, a dot product per output"));
  add(op::linear_rows_on_bf16, kCpu, "tiles", &cpu::linear_rows_bf16_op, 0,
      about("x rounded to bf16, W as pair panels (packed per call), one float32 sum per output on VDPBF16PS "
            "(rows/bf16.cpp)"));
  if (cpu::amx_available())
    add(op::linear_rows_on_bf16, kCpu, "amx", &cpu::linear_rows_bf16_amx_op, -1,
        about("AMX's tile unit on the same rounded x and pair panels (rows/amx.cpp): what BRRR_AMX=1 runs"));
  add(op::attend_rows<float>, kCpu, "tiles", &cpu::attend_rows_op, 0,
      about("scores as linear_rows's dot products, the softmax 8 lanes at a time, values 6 rows at a time (rows/rows.cpp)"));
  add(op::attend_rows<double>, kCpu, "loop", &cpu::attend_rows_loop, 0, about("the formula, row by row"));
  // attend_cache, whose kernels of note are CUDA's (chapter 20, kernels/cuda/rows/): here for the
  // lab, which checks every op on the CPU, and to compare a GPU's answer with.
  add(op::attend_cache<float>, kCpu, "rows", &cpu::attend_cache, 0,
      about("attend_row per (row, head) over the row's slot of the cache (rows/cache.cpp)"));
  add(op::attend_cache<double>, kCpu, "loop", &cpu::attend_cache_loop, 0, about("the formula, row by row"));
  add(op::append_cache<float>, kCpu, "rows", &cpu::append_cache<float>, 0, about("a copy per row (rows/cache.cpp)"));
  add(op::append_cache<double>, kCpu, "rows", &cpu::append_cache<double>, 0, about("a copy per row (rows/cache.cpp)"));
  add(op::sample_rows, kCpu, "sort", &cpu::sample_rows, 0,
      about("the definition written plainly: every token ranked by a sort, then integer sums (rows/sample.cpp)"));
  register_integer<std::int32_t>();
  register_integer<std::int64_t>();
  // bfloat16 (chapter 18): storage and conversion; ops on bf16 tensors compute in float32.
  add(op::fill<bf16>, kCpu, "cpu", &cpu::fill<bf16>, 0, about("std::fill over chunks"));
  add(op::copy<bf16>, kCpu, "cpu", &cpu::copy<bf16>, 0, about("memcpy when contiguous, else a strided loop"));
  const char* const in_float32 = "each value widened in the loop, the float32 op, the result rounded once";
  add(op::add<bf16>, kCpu, "cpu", &cpu::add<bf16>, 0, about(in_float32));
  add(op::sub<bf16>, kCpu, "cpu", &cpu::sub<bf16>, 0, about(in_float32));
  add(op::mul<bf16>, kCpu, "cpu", &cpu::mul<bf16>, 0, about(in_float32));
  add(op::div<bf16>, kCpu, "cpu", &cpu::div<bf16>, 0, about(in_float32));
  // ... and GELU, bias + GELU, LayerNorm and cross-entropy on bf16 data (nn_bf16.cpp), one pass.
  const char* const widened = "one pass: values (or one row, in L1) widened, the float32 kernel's math, each output rounded once";
  add(op::gelu_forward<bf16>, kCpu, "cpu", &cpu::gelu_forward_bf16, 0, about(widened));
  add(op::gelu_backward<bf16>, kCpu, "cpu", &cpu::gelu_backward_bf16, 0, about(widened));
  add(op::gelu_erf_forward<bf16>, kCpu, "cpu", &cpu::gelu_erf_forward_bf16, 0, about(widened));
  add(op::gelu_erf_backward<bf16>, kCpu, "cpu", &cpu::gelu_erf_backward_bf16, 0, about(widened));
  add(op::bias_gelu_forward<bf16>, kCpu, "cpu", &cpu::bias_gelu_forward_bf16, 0, about(widened));
  add(op::bias_gelu_backward<bf16>, kCpu, "cpu", &cpu::bias_gelu_backward_bf16, 0, about(widened));
  add(op::layernorm_forward<bf16>, kCpu, "cpu", &cpu::layernorm_forward_bf16, 0, about(widened));
  add(op::layernorm_backward<bf16>, kCpu, "cpu", &cpu::layernorm_backward_bf16, 0,
      about("one pass, rows widened in L1, the mean recomputed from x, the float32 kernel's math, each output rounded once"));
  add(op::cross_entropy_forward<bf16>, kCpu, "cpu", &cpu::cross_entropy_forward_bf16, 0, about(widened));
  add(op::cross_entropy_backward<bf16>, kCpu, "cpu", &cpu::cross_entropy_backward_bf16, 0,
      about("one pass, rows widened in L1, lse recomputed from the logits, the float32 kernel's math, each output rounded once"));
  add(op::check_indices, kCpu, "cpu", &cpu::check_indices, 0,
      about("one pass: a bad index becomes 0 and the first bad position is kept"));
  register_cast<float>();
  register_cast<double>();
  register_cast<std::int32_t>();
  register_cast<std::int64_t>();
  register_cast<bf16>();
}

}  // namespace brrr::kernels
