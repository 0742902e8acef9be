// kernels/signatures.h: the one signature each op's kernels share, on every device.
// Chapter 04 (matmul and the CPU backend). Read before: kernels/include/brrr/kernels.h.
// Read next: kernels/cpu/elementwise.cpp.
//
// Kernels see raw pointers and sizes, never a Tensor: the op in framework/src checks shapes,
// allocates outputs and makes inputs contiguous, then calls the kernel selected in the
// registry. Shapes are written as in llm.c: (N, C) means N rows of C contiguous values.
// `stream` is the CUDA stream for GPU kernels; CPU kernels ignore it.
#pragma once
#include <cmath>
#include <cstdint>

#include "brrr/dtype.h"
#include "brrr/kernels.h"

namespace brrr::kernels {

using Stream = void*;
constexpr int kMaxDims = 8;

// A strided loop over up to three operands (0 = output, 1 = first input, 2 = second input),
// with broadcast dims given stride 0. Ops coalesce dims first, so ndim is usually 1 or 2.
struct Loop {
  int ndim = 0;
  std::int64_t size[kMaxDims] = {};
  std::int64_t stride[3][kMaxDims] = {};
  std::int64_t numel() const {
    std::int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= size[d];
    return n;
  }
};

// (batch, M, K) @ (batch, K, N) -> (batch, M, N), row-major; trans_a means a is stored as
// (K, M), trans_b that b is stored as (N, K). A stride of 0 broadcasts that operand over the
// batch. accumulate adds the product to out instead of overwriting it.
struct MatmulShape {
  std::int64_t batch = 1, M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  std::int64_t stride_a = 0, stride_b = 0, stride_out = 0;
  bool accumulate = false;
  // May float32 products use TF32 tensor cores (10-bit mantissas)? The caller decides
  // (brrr::cuda::set_allow_tf32, as PyTorch's allow_tf32); cuBLAS and the tensorcore variant
  // read it here, so no kernel reads a setting of the framework's.
  bool allow_tf32 = false;

  // G independent (M, K) @ (K, N) products whose operands and results are packed one group
  // after the other (a convolution's groups: chapter 09's im2col + GEMM, on every device).
  static MatmulShape grouped(std::int64_t G, std::int64_t M, std::int64_t N, std::int64_t K, bool trans_a,
                             bool trans_b, bool accumulate) {
    MatmulShape m;
    m.batch = G, m.M = M, m.N = N, m.K = K;
    m.trans_a = trans_a, m.trans_b = trans_b, m.accumulate = accumulate;
    m.stride_a = M * K, m.stride_b = K * N, m.stride_out = M * N;
    return m;
  }
};

// A 2-D convolution over NCHW images (conv1d is the case H = kH = 1): input (N, C_in, H, W),
// weight (C_out, C_in / groups, kH, kW), output (N, C_out, H_out, W_out) with
//   H_out = (H + 2 pad_h - dil_h (kH - 1) - 1) / stride_h + 1   (W_out likewise).
// Output channel co sees only the input channels of its group, co / (C_out / groups).
struct ConvShape {
  std::int64_t N = 0, C_in = 0, H = 0, W = 0;
  std::int64_t C_out = 0, kH = 1, kW = 1, groups = 1;
  std::int64_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dil_h = 1, dil_w = 1;
  std::int64_t H_out = 0, W_out = 0;
};

// 2-D pooling over `planes` = N * C independent (H, W) images, window (kH, kW), no dilation:
// H_out = (H + 2 pad_h - kH) / stride_h + 1 (W_out likewise). Padding counts as -inf for max
// pooling and as 0 for average pooling, whose divisor is always kH * kW (PyTorch's default,
// count_include_pad=True).
struct PoolShape {
  std::int64_t planes = 0, H = 0, W = 0;
  std::int64_t kH = 1, kW = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  std::int64_t H_out = 0, W_out = 0;
};

// Causal attention over BH = batch * heads independent (T, hs) problems: every query row i
// sees the keys 0..i, scores scaled by `scale` (usually 1 / sqrt(hs), AttentionShape::of).
struct AttentionShape {
  std::int64_t BH = 0, T = 0, hs = 0;
  double scale = 1;  // the kernel uses it in its own dtype (static_cast<T>)
  static AttentionShape of(std::int64_t BH, std::int64_t T, std::int64_t hs) {
    return {BH, T, hs, hs > 0 ? 1.0 / std::sqrt(static_cast<double>(hs)) : 1.0};
  }
};

struct AdamWParams {
  double lr, beta1, beta2, eps, weight_decay;
  std::int64_t step;  // 1 for the first step (bias correction)
  // A CUDA graph's AdamW (chapter 17): device memory holding this step's AdamWConstants<T>
  // (below), which the CUDA multi-tensor kernel reads instead of taking the constants made
  // from the fields above as arguments: a graph replays its arguments, so what changes from
  // step to step must come through memory. Every tensor then has weight_decay or 0 (1 - lr * 0
  // is 1 at any lr: nanoGPT's two groups). nullptr elsewhere (always on the CPU).
  const void* constants = nullptr;
};

// AdamW's numbers for one step, made on the host in double and rounded once to T, as
// kernels/cpu/optim.cpp makes them; decay is 1 - lr * weight_decay.
template <class T>
struct AdamWConstants {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, bias_correction2_sqrt, eps, decay;
};
template <class T>
T adamw_decay(double lr, double weight_decay) {
  return static_cast<T>(1.0 - lr * weight_decay);
}
template <class T>
AdamWConstants<T> adamw_constants(const AdamWParams& hp, double weight_decay) {
  const double bias_correction1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double bias_correction2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  return {static_cast<T>(hp.beta1),
          static_cast<T>(1.0 - hp.beta1),
          static_cast<T>(hp.beta2),
          static_cast<T>(1.0 - hp.beta2),
          static_cast<T>(hp.lr / bias_correction1),
          static_cast<T>(std::sqrt(bias_correction2)),
          static_cast<T>(hp.eps),
          adamw_decay<T>(hp.lr, weight_decay)};
}

struct SGDParams {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
  bool first_step;  // the momentum buffer starts as the gradient itself
};

// --- signatures, by op name (T is float or double) -------------------------------------------
template <class T> using fill_fn = void (*)(T* out, T value, std::int64_t n, Stream);
template <class T> using copy_fn = void (*)(T* out, const T* in, const Loop& loop, Stream);
// cast: converts n elements between any two dtypes; registered under the output dtype.
using cast_fn = void (*)(void* out, DType out_dtype, const void* in, DType in_dtype, std::int64_t n, Stream);
// Random numbers: element i comes from philox(seed, counter + i / 4), so it does not
// depend on how the work is split.
template <class T> using random_fn = void (*)(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, Stream);
// dropout_mask: mask[i] = 0 with probability p, else 1 / (1 - p), from philox(seed, counter + i / 4).
template <class T> using dropout_mask_fn = void (*)(T* mask, std::int64_t n, T p, std::uint64_t seed, std::uint64_t counter, Stream);

// neg exp log sqrt tanh relu sigmoid gelu_forward gelu_erf_forward
template <class T> using unary_fn = void (*)(T* out, const T* x, std::int64_t n, Stream);
template <class T> using pow_scalar_fn = void (*)(T* out, const T* x, T exponent, std::int64_t n, Stream);
// relu_backward gelu_backward gelu_erf_backward: dx = dout * f'(x)
template <class T> using unary_backward_fn = void (*)(T* dx, const T* dout, const T* x, std::int64_t n, Stream);
// add sub mul div
template <class T> using binary_fn = void (*)(T* out, const T* a, const T* b, const Loop& loop, Stream);
template <class T> using masked_fill_fn = void (*)(T* out, const T* x, const T* mask, T value, const Loop& loop, Stream);

// Reductions over the middle axis of (outer, R, inner) -> (outer, inner).
template <class T> using sum_dim_fn = void (*)(T* out, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);
template <class T> using max_dim_fn = void (*)(T* out, std::int64_t* index, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);
// dx (outer, R, inner) = 0 except dx[o, index[o, j], j] = dout[o, j].
template <class T> using max_dim_backward_fn = void (*)(T* dx, const T* dout, const std::int64_t* index, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);

template <class T> using matmul_fn = void (*)(T* out, const T* a, const T* b, const MatmulShape& shape, Stream);
// matmul's bf16-products slot, op::matmul<float>.autocast() ("matmul:bf16"; chapter 18, mixed
// precision): matmul's float32 signature, but a and b are rounded to bfloat16 (round to nearest
// even) before they are multiplied; products are added in float32.

// embedding: weight (V, C), idx (N) -> out (N, C); backward adds dout rows into dweight.
// Indices checked where they are, without reading them back (chapter 17): safe[i] = idx[i]
// when it is in [0, limit) or equals allowed, else 0 (so the op that follows never reads out
// of bounds), and *first_bad lowered to the position of a bad one (the caller sets it high
// first and reads it later). idx, safe (N).
using check_indices_fn = void (*)(std::int32_t* safe, std::int32_t* first_bad, const std::int32_t* idx, std::int64_t N,
                                  std::int64_t limit, std::int64_t allowed, Stream);
template <class T> using embedding_forward_fn = void (*)(T* out, const T* weight, const std::int32_t* idx, std::int64_t N, std::int64_t C, Stream);
template <class T> using embedding_backward_fn = void (*)(T* dweight, const T* dout, const std::int32_t* idx, std::int64_t N, std::int64_t V, std::int64_t C, Stream);

// softmax / log_softmax over rows of (N, C); backward takes the forward's output.
template <class T> using softmax_forward_fn = void (*)(T* out, const T* x, std::int64_t N, std::int64_t C, Stream);
template <class T> using softmax_backward_fn = void (*)(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C, Stream);

// cross_entropy: logits (N, V), targets (N) -> losses (N) and lse (N), the log-sum-exp of
// each row (all the backward needs besides the logits). Rows whose target is ignore_index
// get loss 0 and gradient 0.
template <class T> using cross_entropy_forward_fn = void (*)(T* losses, T* lse, const T* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream);
template <class T> using cross_entropy_backward_fn = void (*)(T* dlogits, const T* dlosses, const T* logits, const T* lse, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream);

// layernorm: x (N, C) -> out (N, C), mean (N), rstd (N) = 1/sqrt(var + eps).
template <class T> using layernorm_forward_fn = void (*)(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps, Stream);
// Writes dx (N, C), dweight (C), dbias (C) (overwritten, not accumulated).
template <class T> using layernorm_backward_fn = void (*)(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean, const T* rstd, std::int64_t N, std::int64_t C, Stream);

// --- fused kernels (chapters 12-16): one pass where the composed ops take several -------------
// bias_gelu_forward: out (N, C) = gelu(x + bias), bias (C). bias_gelu_backward: dx (N, C) =
// dout * gelu'(x + bias) and dbias (C) = sum over N of dx (overwritten).
template <class T> using bias_gelu_forward_fn = void (*)(T* out, const T* x, const T* bias, std::int64_t N, std::int64_t C, Stream);
template <class T> using bias_gelu_backward_fn = void (*)(T* dx, T* dbias, const T* dout, const T* x, const T* bias, std::int64_t N, std::int64_t C, Stream);
// matmul_bias_gelu (chapter 14, a GEMM with its epilogue fused): out (batch, M, N) =
// gelu(a @ b + bias), bias (N) added to every row of every matrix; pre, unless nullptr, gets
// a @ b before the bias (the x that bias_gelu_backward takes). shape as matmul's; accumulate
// is refused.
template <class T> using matmul_bias_gelu_fn = void (*)(T* out, T* pre, const T* a, const T* b, const T* bias, const MatmulShape& shape, Stream);
// linear_rows and attend_rows (chapter 08): the Decoder's kernels for inference on the CPU
// (kernels/cpu/rows/rows.h), ops so that the kernel lab checks and times them; linear_rows has
// CUDA kernels too (kernels/cuda/rows/, chapter 20). linear_rows: y (M,
// N) = x (M, K) @ w^T + bias, w (N, K) as a Linear stores it, bias (N) or nullptr, then the
// epilogue: 0 stores, 1 adds to what y holds (a residual), 2 applies GELU (tanh), 3 the exact
// GELU (erf); anything else is refused. attend_rows: n consecutive rows of one head's causal
// attention, row i at position t0 + i: out (n, hs) row i = the softmax(q_i . k_p / sqrt(hs))
// weighted sum of v_p over p = 0 .. t0 + i; q (n, hs), k and v (t0 + n, hs), all contiguous.
template <class T> using linear_rows_fn = void (*)(T* y, const T* x, const T* w, const T* bias, std::int64_t M, std::int64_t N, std::int64_t K, int epilogue, Stream);
template <class T> using attend_rows_fn = void (*)(T* out, const T* q, const T* k, const T* v, std::int64_t t0, std::int64_t n, std::int64_t hs);
// linear_rows on bfloat16 weights (--dtype bf16): x, bias and y float32, w bfloat16; x is
// rounded to bf16 at the input, the sums are float32 (kernels/cpu/rows/rows.h).
using linear_rows_on_bf16_fn = void (*)(float* y, const float* x, const bf16* w, const float* bias, std::int64_t M, std::int64_t N, std::int64_t K, int epilogue, Stream);
// attend_cache (chapter 20): one query per row against its sequence's keys and values in a KV
// cache, every head, as a decoding step needs it. The cache k and v are (slots, capacity, heads *
// hs); row r reads slot slots[r] at positions 0 .. lengths[r] - 1 (its new token's key and value
// already written there): out (rows, heads * hs) row r, head h = the softmax(q . k_p / sqrt(hs))
// weighted sum of v_p over those positions, q (rows, q_stride) with head h at h * hs. Rows may
// share a slot at different lengths (a prefill's rows, so the prefill can give the step's bits).
// slots and lengths are int32 in the device's memory (a captured step reads them there); a row
// whose slot or length is out of range ([0, slots), [1, capacity]) comes out NaN.
struct CacheShape {
  std::int64_t rows = 0, heads = 0, hs = 0;
  std::int64_t slots = 0, capacity = 0;
  std::int64_t q_stride = 0;  // between rows of q: at least heads * hs
};
template <class T> using attend_cache_fn = void (*)(T* out, const T* q, const T* k, const T* v, const std::int32_t* slots, const std::int32_t* lengths, const CacheShape& shape, Stream);
// append_cache (chapter 20): each row's new key and value into its slot of the cache, at the
// position lengths[r] - 1 that attend_cache then reads last: k[slots[r], lengths[r] - 1, :] =
// new_k row r, and v from new_v alike; new_k and new_v are rows of shape.q_stride (the k and v
// columns of a (rows, 3C) qkv buffer), heads * hs numbers each. A row whose slot or length is out
// of range writes nothing (and attend_cache gives it NaN).
template <class T> using append_cache_fn = void (*)(T* k, T* v, const T* new_k, const T* new_v, const std::int32_t* slots, const std::int32_t* lengths, const CacheShape& shape, Stream);
// sample_rows (chapter 20): a token drawn from each row of logits (rows, V) under that row's
// rule, rules (rows, 4) float64: temperature (> 0), top_k (0: all), top_p in (0, 1] and the
// uniform draw u in [0, 1), as models::sample_token defines a draw (kernels/sample_rule.h says
// exactly, and how its integer weights differ). out (rows) int32: the token, or -1 for a row
// whose rule is out of range, that holds a NaN or whose largest logit is infinite. Every array
// in the device's memory.
using sample_rows_fn = void (*)(std::int32_t* out, const float* logits, const double* rules, std::int64_t rows, std::int64_t V, Stream);
// attend_cache on a bfloat16 cache: q and out float32, k and v bfloat16, every sum float32.
using attend_cache_on_bf16_fn = void (*)(float* out, const float* q, const bf16* k, const bf16* v, const std::int32_t* slots, const std::int32_t* lengths, const CacheShape& shape, Stream);
// transpose (chapter 14's exercise ex14.2): out (N, M) = in (M, N)^T, both row-major,
// out[j * M + i] = in[i * N + j]. Its kernels are declared in kernels/transpose.h.
template <class T> using transpose_fn = void (*)(T* out, const T* in, std::int64_t M, std::int64_t N, Stream);
// residual_layernorm_forward: sum (N, C) = x + residual, then out = layernorm(sum) with its
// mean and rstd (N). The backward of the sum is the identity, so layernorm_backward serves.
template <class T> using residual_layernorm_forward_fn = void (*)(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual, const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps, Stream);
// cross_entropy_fused: one read of each row of logits (N, V) gives losses (N) and writes
// dlogits (N, V) = dloss * (softmax(logits) - onehot(target)); rows whose target is
// ignore_index get loss 0 and gradient 0. No probability tensor is kept.
template <class T> using cross_entropy_fused_fn = void (*)(T* losses, T* dlogits, const T* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, T dloss, Stream);
// cross_entropy_fused on bf16 data (chapter 18; the classifier of a step whose activations are
// bf16 in memory): logits and dlogits bfloat16, losses and dloss float32, every sum float32.
// dlogits may be logits itself: the gradient overwrites the logits in place, as llm.c's
// classifier does, so a step keeps one (N, V) buffer, not two.
using cross_entropy_fused_on_bf16_fn = void (*)(float* losses, bf16* dlogits, const bf16* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream);
// residual_layernorm_forward on bf16 data (chapter 18; a block's residual add and LayerNorm in
// a step whose activations are bf16 in memory): x, residual, sum, out, weight and bias bfloat16;
// mean, rstd (N) and eps float32, every sum float32. out normalizes sum as stored (rounded to
// bf16), so the backward sees the row the forward normalized.
using residual_layernorm_forward_on_bf16_fn = void (*)(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* x, const bf16* residual, const bf16* weight, const bf16* bias, std::int64_t N, std::int64_t C, float eps, Stream);
// residual_layernorm_backward on bf16 data: the backward of out = layernorm(sum) that also adds
// the gradient the residual stream gets from its other users, so the gradient passes once:
// dsum (N, C) = dres + layernorm_backward's dx from dout, dres (N, C) or nullptr (none). dweight
// and dbias (C) overwritten (dbias may be nullptr); mean and rstd the forward's, float32. dsum is
// the gradient of x and of residual both (sum = x + residual).
using residual_layernorm_backward_on_bf16_fn = void (*)(bf16* dsum, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* dres, const bf16* sum, const bf16* weight, const float* mean, const float* rstd, std::int64_t N, std::int64_t C, Stream);
// Causal attention (AttentionShape above): q, k, v, out (BH, T, hs), lse (BH, T) = log-sum-exp
// of each row of the scaled, masked scores (all the backward needs besides q, k, v, out). The
// backward overwrites dq, dk, dv.
template <class T> using attention_forward_fn = void (*)(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& shape, Stream);
template <class T> using attention_backward_fn = void (*)(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const T* lse, const AttentionShape& shape, Stream);
// Their bf16-products slots, op::attention_forward<float>.autocast() and the backward's
// ("attention_forward:bf16"; chapter 18, mixed precision): the float32 signatures, but q, k, v
// (in the backward also dout) are rounded to bfloat16 (round to nearest even) before they are
// multiplied; products are added, and the softmax statistics (lse, D = dout . out), outputs and
// gradients kept, in float32.

// On bf16 data (chapter 18; the tensor-core kernels of chapter 14's variant 12 and chapter 15's
// variant 4, which copy bf16 tiles straight from memory with 16-byte cp.async): the same ops,
// "matmul" and "attention_*" in dtype bfloat16, with signatures of their own: operands in
// bfloat16, sums and statistics in float32.
// matmul on bf16 data: out (batch, M, N) float32 = a @ b with a, b bfloat16, shape as matmul's.
using matmul_on_bf16_fn = void (*)(float* out, const bf16* a, const bf16* b, const MatmulShape& shape, Stream);
// matmul_bias_gelu on bf16 data: out (batch, M, N) float32 = gelu(a @ b + bias) and pre = a @ b
// (unless nullptr), a and b bfloat16, bias (N) float32; otherwise as matmul_bias_gelu.
using matmul_bias_gelu_on_bf16_fn = void (*)(float* out, float* pre, const bf16* a, const bf16* b, const float* bias,
                                             const MatmulShape& shape, Stream);
// sum_dim on bf16 data (chapter 18, section 11: a linear layer's bias gradient): out (outer,
// inner) float32 = in (outer, R, inner) bfloat16 summed over R, as sum_dim<float> sums the
// widened values (each bf16 value is exactly a float): the same bits, without the widened copy.
using sum_dim_on_bf16_fn = void (*)(float* out, const bf16* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);
// matmul_epilogue on bf16 data (chapter 18, section 11: the bf16 step's GEMM with its epilogue,
// as cuBLASLt offers it): out (M, N) bfloat16 = act(a @ b + bias), a and b bfloat16 with
// MatmulShape's trans_a and trans_b (batch 1, no accumulate), the sums float32 and the result
// rounded to bf16 once. bias (N) bfloat16, or nullptr for none. gelu true: act is GELU (the tanh
// form, gelu_forward's) and pre (M, N) = a @ b + bias, rounded to bf16, is stored for the
// backward unless nullptr; gelu false: act is the identity and pre is not written.
using matmul_epilogue_on_bf16_fn = void (*)(bf16* out, bf16* pre, const bf16* a, const bf16* b, const bf16* bias,
                                            bool gelu, const MatmulShape& shape, Stream);
// attention_forward on bf16 data: q, k, v, out bfloat16 (BH, T, hs), lse float32 (BH, T).
// attention_backward on bf16 data: from dout, q, k, v, out bfloat16 and the float32 lse, dq,
// dk, dv float32 (BH, T, hs), overwritten.
using attention_forward_on_bf16_fn = void (*)(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const AttentionShape& shape, Stream);
using attention_backward_on_bf16_fn = void (*)(float* dq, float* dk, float* dv, const bf16* dout, const bf16* q, const bf16* k, const bf16* v, const bf16* out, const float* lse, const AttentionShape& shape, Stream);
// The same two on the GPT's packed projection (chapter 18, section 12: no copies around the
// attention): qkv (B, T, 3 C) bfloat16 with C = heads * hs, head h's q, k and v at columns
// h hs, C + h hs and 2 C + h hs; out and dout (B, T, C) bfloat16, head h at columns h hs (what
// c_proj reads and its backward writes); lse float32 (B, heads, T); dqkv (B, T, 3 C) bfloat16,
// overwritten, each of dq, dk, dv rounded once from its float32 sums. shape.BH = B * heads.
using attention_forward_qkv_on_bf16_fn = void (*)(bf16* out, float* lse, const bf16* qkv, const AttentionShape& shape, std::int64_t heads, Stream);
using attention_backward_qkv_on_bf16_fn = void (*)(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, const AttentionShape& shape, std::int64_t heads, Stream);

// Convolution and pooling (chapter 09, convolutions): bias may be nullptr. The
// backward is two ops: dx (overwritten) from dout and weight; dweight and dbias (overwritten;
// dbias may be nullptr) from dout and x.
template <class T> using conv2d_forward_fn = void (*)(T* out, const T* x, const T* weight, const T* bias, const ConvShape& shape, Stream);
template <class T> using conv2d_backward_input_fn = void (*)(T* dx, const T* dout, const T* weight, const ConvShape& shape, Stream);
template <class T> using conv2d_backward_weight_fn = void (*)(T* dweight, T* dbias, const T* dout, const T* x, const ConvShape& shape, Stream);
// Pooling, per plane: out (planes, H_out, W_out). max_pool2d keeps, for each output, the index
// h * W + w of its window's first largest input within its plane (as PyTorch's indices); the
// backward adds dout there. Backward kernels overwrite dx (planes, H, W).
template <class T> using max_pool2d_forward_fn = void (*)(T* out, std::int64_t* index, const T* x, const PoolShape& shape, Stream);
template <class T> using max_pool2d_backward_fn = void (*)(T* dx, const T* dout, const std::int64_t* index, const PoolShape& shape, Stream);
template <class T> using avg_pool2d_forward_fn = void (*)(T* out, const T* x, const PoolShape& shape, Stream);
template <class T> using avg_pool2d_backward_fn = void (*)(T* dx, const T* dout, const PoolShape& shape, Stream);

// Optimizers update n parameters in place.
template <class T> using adamw_step_fn = void (*)(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWParams& hp, Stream);
// AdamW over many tensors in one launch: each entry is one parameter tensor with its own
// weight decay (hp.weight_decay is ignored). The list itself is host memory.
template <class T>
struct AdamWTensor {
  T* param;
  const T* grad;
  T* m;
  T* v;
  std::int64_t n;
  double weight_decay;
};
template <class T> using adamw_multi_step_fn = void (*)(const AdamWTensor<T>* tensors, int count, const AdamWParams& hp, Stream);
// AdamW over many tensors with their gradients clipped by the global norm (chapter 16; what
// clip_grad_norm then the step do, without writing the clipped gradients back): norm (one T, in
// the device's memory) = sqrt of the sum of the squares of every gradient, summed in T in a
// fixed order; each gradient g is used as g * min(1, max_norm / (norm + 1e-6)) (PyTorch's
// coefficient), and is left as it was in memory. max_norm must be positive.
template <class T> using adamw_clipped_multi_step_fn = void (*)(T* norm, const AdamWTensor<T>* tensors, int count, const AdamWParams& hp, double max_norm, Stream);
template <class T> using sgd_step_fn = void (*)(T* param, const T* grad, T* momentum_buffer, std::int64_t n, const SGDParams& hp, Stream);

// --- the ops: one descriptor per op name -----------------------------------------------------
// Registrations and lookups name an op through these (brrr/kernels.h's Op, kernels/registry.h),
// so the compiler checks every kernel against its op's signature above. op::exp<float> is the
// op "exp" in float32, whose kernels are unary_fn<float>. Each name is written once, here
// (tests/layout/check_op_names.py): precision is a descriptor's dtype or its products
// (op::matmul<float>.autocast()), never a second name.
namespace op {
template <class T> inline constexpr Op<fill_fn<T>> fill{"fill", dtype_of<T>()};
template <class T> inline constexpr Op<copy_fn<T>> copy{"copy", dtype_of<T>()};
// cast registers under the dtype it converts to: op::cast<float> writes float32.
template <class T> inline constexpr Op<cast_fn> cast{"cast", dtype_of<T>()};
template <class T> inline constexpr Op<random_fn<T>> uniform{"uniform", dtype_of<T>()};
template <class T> inline constexpr Op<random_fn<T>> normal{"normal", dtype_of<T>()};
template <class T> inline constexpr Op<dropout_mask_fn<T>> dropout_mask{"dropout_mask", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> neg{"neg", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> exp{"exp", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> log{"log", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> sqrt{"sqrt", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> tanh{"tanh", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> relu{"relu", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> sigmoid{"sigmoid", dtype_of<T>()};
template <class T> inline constexpr Op<pow_scalar_fn<T>> pow_scalar{"pow_scalar", dtype_of<T>()};
template <class T> inline constexpr Op<unary_backward_fn<T>> relu_backward{"relu_backward", dtype_of<T>()};
template <class T> inline constexpr Op<binary_fn<T>> add{"add", dtype_of<T>()};
template <class T> inline constexpr Op<binary_fn<T>> sub{"sub", dtype_of<T>()};
template <class T> inline constexpr Op<binary_fn<T>> mul{"mul", dtype_of<T>()};
template <class T> inline constexpr Op<binary_fn<T>> div{"div", dtype_of<T>()};
template <class T> inline constexpr Op<masked_fill_fn<T>> masked_fill{"masked_fill", dtype_of<T>()};
template <class T> inline constexpr Op<sum_dim_fn<T>> sum_dim{"sum_dim", dtype_of<T>()};
template <class T> inline constexpr Op<max_dim_fn<T>> max_dim{"max_dim", dtype_of<T>()};
template <class T> inline constexpr Op<max_dim_backward_fn<T>> max_dim_backward{"max_dim_backward", dtype_of<T>()};
template <class T> inline constexpr Op<matmul_fn<T>> matmul{"matmul", dtype_of<T>()};
// matmul on bf16 data with float32 results: the op "matmul" in dtype bfloat16, with a signature
// of its own (its name is matmul<float>'s). Autocast's float32 data with bf16 products is
// matmul<float>.autocast().
inline constexpr Op<matmul_on_bf16_fn> matmul_on_bf16{matmul<float>.name, kBFloat16};
// check_indices works on int32 indices whatever the table's dtype: one descriptor, kInt32.
inline constexpr Op<check_indices_fn> check_indices{"check_indices", kInt32};
template <class T> inline constexpr Op<embedding_forward_fn<T>> embedding_forward{"embedding_forward", dtype_of<T>()};
template <class T> inline constexpr Op<embedding_backward_fn<T>> embedding_backward{"embedding_backward", dtype_of<T>()};
template <class T> inline constexpr Op<softmax_forward_fn<T>> softmax_forward{"softmax_forward", dtype_of<T>()};
template <class T> inline constexpr Op<softmax_backward_fn<T>> softmax_backward{"softmax_backward", dtype_of<T>()};
template <class T> inline constexpr Op<softmax_forward_fn<T>> log_softmax_forward{"log_softmax_forward", dtype_of<T>()};
template <class T> inline constexpr Op<softmax_backward_fn<T>> log_softmax_backward{"log_softmax_backward", dtype_of<T>()};
template <class T> inline constexpr Op<cross_entropy_forward_fn<T>> cross_entropy_forward{"cross_entropy_forward", dtype_of<T>()};
template <class T> inline constexpr Op<cross_entropy_backward_fn<T>> cross_entropy_backward{"cross_entropy_backward", dtype_of<T>()};
template <class T> inline constexpr Op<unary_fn<T>> gelu_forward{"gelu_forward", dtype_of<T>()};
template <class T> inline constexpr Op<unary_backward_fn<T>> gelu_backward{"gelu_backward", dtype_of<T>()};
// GELU exact, x Phi(x) (Hugging Face's "gelu"); gelu_forward and gelu_backward are the tanh form.
template <class T> inline constexpr Op<unary_fn<T>> gelu_erf_forward{"gelu_erf_forward", dtype_of<T>()};
template <class T> inline constexpr Op<unary_backward_fn<T>> gelu_erf_backward{"gelu_erf_backward", dtype_of<T>()};
template <class T> inline constexpr Op<layernorm_forward_fn<T>> layernorm_forward{"layernorm_forward", dtype_of<T>()};
template <class T> inline constexpr Op<layernorm_backward_fn<T>> layernorm_backward{"layernorm_backward", dtype_of<T>()};
template <class T> inline constexpr Op<bias_gelu_forward_fn<T>> bias_gelu_forward{"bias_gelu_forward", dtype_of<T>()};
template <class T> inline constexpr Op<bias_gelu_backward_fn<T>> bias_gelu_backward{"bias_gelu_backward", dtype_of<T>()};
template <class T> inline constexpr Op<matmul_bias_gelu_fn<T>> matmul_bias_gelu{"matmul_bias_gelu", dtype_of<T>()};
template <class T> inline constexpr Op<linear_rows_fn<T>> linear_rows{"linear_rows", dtype_of<T>()};
template <class T> inline constexpr Op<attend_rows_fn<T>> attend_rows{"attend_rows", dtype_of<T>()};
// linear_rows with bfloat16 weights: the op "linear_rows" in dtype bfloat16 (as matmul_on_bf16).
inline constexpr Op<linear_rows_on_bf16_fn> linear_rows_on_bf16{linear_rows<float>.name, kBFloat16};
template <class T> inline constexpr Op<attend_cache_fn<T>> attend_cache{"attend_cache", dtype_of<T>()};
// attend_cache on a bfloat16 cache: the op "attend_cache" in dtype bfloat16.
inline constexpr Op<attend_cache_on_bf16_fn> attend_cache_on_bf16{attend_cache<float>.name, kBFloat16};
template <class T> inline constexpr Op<append_cache_fn<T>> append_cache{"append_cache", dtype_of<T>()};
inline constexpr Op<sample_rows_fn> sample_rows{"sample_rows", kFloat32};
// matmul_bias_gelu on bf16 data: the op "matmul_bias_gelu" in dtype bfloat16 (as matmul_on_bf16).
inline constexpr Op<matmul_bias_gelu_on_bf16_fn> matmul_bias_gelu_on_bf16{matmul_bias_gelu<float>.name, kBFloat16};
// sum_dim on bf16 data, float32 out: the op "sum_dim" in dtype bfloat16 (as matmul_on_bf16).
inline constexpr Op<sum_dim_on_bf16_fn> sum_dim_on_bf16{sum_dim<float>.name, kBFloat16};
// The bf16 step's GEMM with its epilogue: bf16 data only.
inline constexpr Op<matmul_epilogue_on_bf16_fn> matmul_epilogue_on_bf16{"matmul_epilogue", kBFloat16};
template <class T> inline constexpr Op<residual_layernorm_forward_fn<T>> residual_layernorm_forward{"residual_layernorm_forward", dtype_of<T>()};
template <class T> inline constexpr Op<cross_entropy_fused_fn<T>> cross_entropy_fused{"cross_entropy_fused", dtype_of<T>()};
// cross_entropy_fused on bf16 data: the op "cross_entropy_fused" in dtype bfloat16 (as matmul_on_bf16).
inline constexpr Op<cross_entropy_fused_on_bf16_fn> cross_entropy_fused_on_bf16{cross_entropy_fused<float>.name, kBFloat16};
// residual + LayerNorm on bf16 data: "residual_layernorm_forward" and "residual_layernorm_backward"
// in dtype bfloat16 (float32 statistics; the backward has only this form).
inline constexpr Op<residual_layernorm_forward_on_bf16_fn> residual_layernorm_forward_on_bf16{residual_layernorm_forward<float>.name, kBFloat16};
inline constexpr Op<residual_layernorm_backward_on_bf16_fn> residual_layernorm_backward_on_bf16{"residual_layernorm_backward", kBFloat16};
template <class T> inline constexpr Op<attention_forward_fn<T>> attention_forward{"attention_forward", dtype_of<T>()};
template <class T> inline constexpr Op<attention_backward_fn<T>> attention_backward{"attention_backward", dtype_of<T>()};
// attention on bf16 data (as matmul_on_bf16): the ops "attention_*" in dtype bfloat16.
inline constexpr Op<attention_forward_on_bf16_fn> attention_forward_on_bf16{attention_forward<float>.name, kBFloat16};
inline constexpr Op<attention_backward_on_bf16_fn> attention_backward_on_bf16{attention_backward<float>.name, kBFloat16};
inline constexpr Op<attention_forward_qkv_on_bf16_fn> attention_forward_qkv_on_bf16{"attention_forward_qkv", kBFloat16};
inline constexpr Op<attention_backward_qkv_on_bf16_fn> attention_backward_qkv_on_bf16{"attention_backward_qkv", kBFloat16};
template <class T> inline constexpr Op<conv2d_forward_fn<T>> conv2d_forward{"conv2d_forward", dtype_of<T>()};
template <class T> inline constexpr Op<conv2d_backward_input_fn<T>> conv2d_backward_input{"conv2d_backward_input", dtype_of<T>()};
template <class T> inline constexpr Op<conv2d_backward_weight_fn<T>> conv2d_backward_weight{"conv2d_backward_weight", dtype_of<T>()};
template <class T> inline constexpr Op<max_pool2d_forward_fn<T>> max_pool2d_forward{"max_pool2d_forward", dtype_of<T>()};
template <class T> inline constexpr Op<max_pool2d_backward_fn<T>> max_pool2d_backward{"max_pool2d_backward", dtype_of<T>()};
template <class T> inline constexpr Op<avg_pool2d_forward_fn<T>> avg_pool2d_forward{"avg_pool2d_forward", dtype_of<T>()};
template <class T> inline constexpr Op<avg_pool2d_backward_fn<T>> avg_pool2d_backward{"avg_pool2d_backward", dtype_of<T>()};
template <class T> inline constexpr Op<adamw_step_fn<T>> adamw_step{"adamw_step", dtype_of<T>()};
template <class T> inline constexpr Op<adamw_multi_step_fn<T>> adamw_multi_step{"adamw_multi_step", dtype_of<T>()};
template <class T> inline constexpr Op<adamw_clipped_multi_step_fn<T>> adamw_clipped_multi_step{"adamw_clipped_multi_step", dtype_of<T>()};
template <class T> inline constexpr Op<sgd_step_fn<T>> sgd_step{"sgd_step", dtype_of<T>()};
template <class T> inline constexpr Op<transpose_fn<T>> transpose{"transpose", dtype_of<T>()};
}  // namespace op

}  // namespace brrr::kernels
