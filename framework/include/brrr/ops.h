// brrr/ops.h: every differentiable op, dispatched by device to a kernel in the registry.
// Chapter 02 (ops and broadcasting). Read before: tensor.h. Read next: autograd.h.
//
// Each op checks its inputs (a brrr::Error names the op, the shapes and what was expected),
// makes its output, calls the selected kernel, and, when an input requires grad, records the
// closure that computes its backward (see autograd.h). Elementwise binary ops broadcast as
// NumPy does: shapes are aligned from the right and a size-1 dim stretches to match.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "brrr/kernels.h"
#include "brrr/tensor.h"

namespace brrr {
class Generator;
}

namespace brrr::ops {

// --- unary --------------------------------------------------------------------------------
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor pow(const Tensor& x, double exponent);

// --- binary, broadcasting -------------------------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// --- reductions (dims may be negative; an empty list means all dims) ------------------------
Tensor sum(const Tensor& x, std::vector<int> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, std::vector<int> dims = {}, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1), as torch.var.
Tensor var(const Tensor& x, std::vector<int> dims = {}, int correction = 1, bool keepdim = false);
Tensor max(const Tensor& x);  // the largest element, as a 0-dim tensor
// Largest along dim: (values, int64 indices of the first maximum), as torch.max(x, dim).
std::pair<Tensor, Tensor> max(const Tensor& x, int dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int dim, bool keepdim = false);

// --- linear algebra -------------------------------------------------------------------------
// (.., M, K) @ (.., K, N) -> (.., M, N); batch dims broadcast; 1-D operands as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);
// x @ weight^T + bias, weight (out, in) as in torch.nn.functional.linear; bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// --- shape ops (views, with their backward) ---------------------------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int dim = 0);

// --- neural-network ops -------------------------------------------------------------------------
// weight (V, C), indices int32/int64 of any shape S -> (S..., C).
Tensor embedding(const Tensor& weight, const Tensor& indices);
Tensor softmax(const Tensor& x, int dim = -1);
Tensor log_softmax(const Tensor& x, int dim = -1);
// An ignore_index that no target can equal: every row counts. With targets on a device it
// also spares a read of them back to the host (to count the rows that count): GPT::loss uses it.
inline constexpr std::int64_t kNoIgnoreIndex = INT64_MIN;
// Mean cross-entropy of logits (N, V) against int targets (N); targets equal to
// ignore_index are skipped. The registry picks how ("cross_entropy", op_variants.cpp):
// "fused" (cross_entropy_fused below: the default), "kernels" (cross_entropy_kernels) or
// "composed"; bfloat16 logits always take the kernels.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100);
// Its own kernels: a forward that keeps one log-sum-exp per row, and a backward from it.
Tensor cross_entropy_kernels(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100);
// Cross-entropy written with log_softmax and a gather, for comparison with the kernels (no
// ignore_index: every target must be a class).
Tensor cross_entropy_composed(const Tensor& logits, const Tensor& targets);
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). The registry
// picks how ("gelu"): "kernels" (the default) or "composed".
Tensor gelu(const Tensor& x);
Tensor gelu_kernels(const Tensor& x);   // its own kernels: one forward, one backward
Tensor gelu_composed(const Tensor& x);  // from mul, add, tanh: autograd derives the backward
// GELU exact, x Phi(x) = 0.5 x erfc(-x / sqrt 2) (PyTorch's nn.GELU(), Hugging Face's "gelu"):
// what a pretrained model whose config says "gelu" runs (GPTConfig::activation). Its kernels.
Tensor gelu_erf(const Tensor& x);
// LayerNorm over the last dim: (x - mean) / sqrt(var + eps) * weight + bias. The registry
// picks how ("layer_norm"): "kernels" (the default) or "composed".
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor layer_norm_kernels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
Tensor layer_norm_composed(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Fused forms (chapters 12, 13, 16; ops_fused.cpp): one kernel each way where the composed
// ops take several, with the same gradients.
// gelu(x + bias), x (.., C), bias (C): the MLP's bias add and GELU in one pass.
Tensor bias_gelu(const Tensor& x, const Tensor& bias);
// sum = x + residual and out = layer_norm(sum, weight, bias); returns {sum, out}. The registry
// picks how ("residual_layer_norm"): "fused" (one pass, residual_layer_norm_fused: the
// default) or "composed" (ops::add, then layer_norm_composed).
std::pair<Tensor, Tensor> residual_layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                              const Tensor& bias, double eps = 1e-5);
std::pair<Tensor, Tensor> residual_layer_norm_fused(const Tensor& x, const Tensor& residual, const Tensor& weight,
                                                    const Tensor& bias, double eps = 1e-5);
// ops::cross_entropy whose forward kernel also writes d loss / d logits (kept until backward,
// which only scales it). Without grad it is ops::cross_entropy.
Tensor cross_entropy_fused(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100);
// Causal self-attention: q, k, v (B, H, T, hs) -> (B, H, T, hs). Position t attends to
// positions <= t; scores are scaled by 1/sqrt(hs). With dropout > 0 and a generator, the
// attention weights are dropped out (as nanoGPT's attn_dropout). The registry picks how, per
// device ("causal_attention": "composed" on the CPU, whose batched GEMMs are faster there;
// "flash" on a GPU); with dropout only "composed" is eligible (the kernels have none), so the
// registry runs it then, and a selected "flash" is an error naming the dropout.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double dropout = 0.0,
                        Generator* gen = nullptr);
// The same from the packed projection the GPT makes, qkv (B, T, 3 C) (q, k, v side by side,
// each C = n_head hs wide; FlashAttention's "qkvpacked" form): the registry picks the variant
// as above. Where it picks "flash", flash_attention_qkv runs, whose backward writes the
// gradient of qkv as one tensor; the other variants get qkv's head views (three narrows, whose
// backwards fill three zero (B, T, 3 C) tensors that autograd adds).
Tensor causal_attention_qkv(const Tensor& qkv, std::int64_t n_head, double dropout = 0.0, Generator* gen = nullptr);
// q (which = 0), k (1) or v (2) of a packed qkv (B, T, 3 C) as a (B, n_head, T, hs) view: the
// columns [which C, (which + 1) C), heads moved next to the batch (no copy).
Tensor qkv_head(const Tensor& qkv, std::int64_t n_head, int which);
// The same from matmul, mask and softmax (chapter 07): autograd derives the backward, and
// the (B, H, T, T) weights are kept for it.
Tensor causal_attention_composed(const Tensor& q, const Tensor& k, const Tensor& v, double dropout = 0.0,
                                 Generator* gen = nullptr);
// The same with its own kernels (chapter 15): one forward kernel that never holds the (T, T)
// scores (flash attention on the GPU) and one backward kernel. No dropout.
Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v);
// flash_attention on packed qkv (B, T, 3 C) -> (B, H, T, hs): the heads are split by copies
// inside, and the backward writes d qkv (B, T, 3 C) directly, each element once.
Tensor flash_attention_qkv(const Tensor& qkv, std::int64_t n_head);
// gelu(x @ weight^T + bias), the MLP's first half: x (.., in), weight (out, in), bias (out)
// or undefined. The registry picks how, per device ("linear_gelu"): "bias_in_gemm" (the bias
// rides in the GEMM, then ops::gelu: the CPU's default), "bias_gelu" (the GEMM, then bias and
// GELU in one kernel: a GPU's) or "composed" (linear, then gelu_composed).
Tensor linear_gelu(const Tensor& x, const Tensor& weight, const Tensor& bias);

// The framework's own entries in the kernel registry (ops whose variants are built from ops,
// such as causal_attention and linear_gelu). Added the first time such an op runs; a tool
// that lists the registry before that (brrr kernels) calls this first. Calling it again does
// nothing.
void register_op_variants();
// The teaching versions built from primitives everywhere (chapter 07): selects the "composed"
// variant of every op that has one (layer_norm, residual_layer_norm, gelu, linear_gelu,
// cross_entropy, causal_attention), as BRRR_KERNELS='*=composed' does. For the whole
// process, like any selection: kernels::reset_selection() goes back to the defaults.
void select_composed();
// Their descriptors (brrr/kernels.h's Op): the signature an op's variants share, under the
// op's name, per dtype. op_variants.cpp registers through them; the kernel lab calls them.
namespace variants {
// dropout and gen as causal_attention's: only a variant whose rule allows dropout gets p > 0.
using attention_fn = Tensor (*)(const Tensor& q, const Tensor& k, const Tensor& v, double dropout, Generator* gen);
using linear_gelu_fn = Tensor (*)(const Tensor& x, const Tensor& weight, const Tensor& bias);
using layer_norm_fn = Tensor (*)(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps);
using residual_layer_norm_fn = std::pair<Tensor, Tensor> (*)(const Tensor& x, const Tensor& residual,
                                                             const Tensor& weight, const Tensor& bias, double eps);
using gelu_fn = Tensor (*)(const Tensor& x);
using cross_entropy_fn = Tensor (*)(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index);
template <class T>
inline constexpr kernels::Op<attention_fn> causal_attention{"causal_attention", dtype_of<T>()};
template <class T>
inline constexpr kernels::Op<linear_gelu_fn> linear_gelu{"linear_gelu", dtype_of<T>()};
template <class T>
inline constexpr kernels::Op<layer_norm_fn> layer_norm{"layer_norm", dtype_of<T>()};
template <class T>
inline constexpr kernels::Op<residual_layer_norm_fn> residual_layer_norm{"residual_layer_norm", dtype_of<T>()};
template <class T>
inline constexpr kernels::Op<gelu_fn> gelu{"gelu", dtype_of<T>()};
template <class T>
inline constexpr kernels::Op<cross_entropy_fn> cross_entropy{"cross_entropy", dtype_of<T>()};
}  // namespace variants
// --- convolution and pooling (chapter 09, convolutions; ops_conv.cpp) ----------------------------
// A pair of sizes (height, width), or one size for both, as PyTorch's int-or-tuple arguments:
// conv2d(x, w, b, 1, 1) or conv2d(x, w, b, {2, 1}, {1, 0}).
struct Size2 {
  std::int64_t h, w;
  Size2(std::int64_t both) : h(both), w(both) {}  // NOLINT: implicit, as PyTorch's int
  Size2(std::int64_t h, std::int64_t w) : h(h), w(w) {}
};
// x (N, C_in, H, W), weight (C_out, C_in / groups, kH, kW), bias (C_out) or undefined ->
// (N, C_out, H_out, W_out), H_out = (H + 2 padding - dilation (kH - 1) - 1) / stride + 1, as
// torch.nn.functional.conv2d. groups = C_in = C_out is a depthwise convolution.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), Size2 stride = 1,
              Size2 padding = 0, Size2 dilation = 1, std::int64_t groups = 1);
// x (N, C_in, L), weight (C_out, C_in / groups, k), bias (C_out) -> (N, C_out, L_out): conv2d
// on images one pixel tall.
Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(), std::int64_t stride = 1,
              std::int64_t padding = 0, std::int64_t dilation = 1, std::int64_t groups = 1);
// Max over each window of x (N, C, H, W), stride defaulting to the window (torch's None):
// (values, int64 indices h * W + w of each window's largest input within its plane), as
// torch.nn.functional.max_pool2d(..., return_indices=True). padding is at most half the window.
std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding = 0);
Tensor max_pool2d(const Tensor& x, Size2 kernel_size);
Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding = 0);
// Mean over each window, padding counted as zeros (torch's count_include_pad=True).
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size);
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding = 0);

// Zero each element with probability p and scale the rest by 1/(1-p); identity when !training.
Tensor dropout(const Tensor& x, double p, Generator& gen, bool training = true);
// Where mask (any dtype, nonzero = true) is true, value; elsewhere x. Broadcasts mask to x.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

}  // namespace brrr::ops

namespace brrr {
// Operators, so formulas read as math.
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
}  // namespace brrr
