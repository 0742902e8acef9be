// kernels/cpu/cpu_kernels.h: the CPU kernels, declared once. Each matches its op's signature
// in kernels/signatures.h and is registered in register.cpp.
// Chapter 04 (matmul and the CPU backend).
#pragma once
#include "kernels/signatures.h"

namespace brrr::kernels::cpu {

// elementwise.cpp
template <class T> void fill(T* out, T value, std::int64_t n, Stream);
template <class T> void copy(T* out, const T* in, const Loop& loop, Stream);
void cast(void* out, DType out_dtype, const void* in, DType in_dtype, std::int64_t n, Stream);
template <class T> void uniform(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, Stream);
template <class T> void normal(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, Stream);
template <class T> void dropout_mask(T* mask, std::int64_t n, T p, std::uint64_t seed, std::uint64_t counter, Stream);
template <class T> void neg(T* out, const T* x, std::int64_t n, Stream);
template <class T> void exp(T* out, const T* x, std::int64_t n, Stream);
template <class T> void log(T* out, const T* x, std::int64_t n, Stream);
template <class T> void sqrt(T* out, const T* x, std::int64_t n, Stream);
template <class T> void tanh(T* out, const T* x, std::int64_t n, Stream);
template <class T> void relu(T* out, const T* x, std::int64_t n, Stream);
template <class T> void sigmoid(T* out, const T* x, std::int64_t n, Stream);
template <class T> void pow_scalar(T* out, const T* x, T exponent, std::int64_t n, Stream);
template <class T> void relu_backward(T* dx, const T* dout, const T* x, std::int64_t n, Stream);
template <class T> void add(T* out, const T* a, const T* b, const Loop& loop, Stream);
template <class T> void sub(T* out, const T* a, const T* b, const Loop& loop, Stream);
template <class T> void mul(T* out, const T* a, const T* b, const Loop& loop, Stream);
template <class T> void div(T* out, const T* a, const T* b, const Loop& loop, Stream);
template <class T> void masked_fill(T* out, const T* x, const T* mask, T value, const Loop& loop, Stream);

// reduce.cpp
template <class T> void sum_dim(T* out, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);
template <class T> void max_dim(T* out, std::int64_t* index, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);

template <class T> void max_dim_backward(T* dx, const T* dout, const std::int64_t* index, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);

// matmul.cpp
template <class T> void matmul_naive(T* out, const T* a, const T* b, const MatmulShape& shape, Stream);
template <class T> void matmul_eigen(T* out, const T* a, const T* b, const MatmulShape& shape, Stream);
// gemm_blocked.cpp (float32, AVX-512 only)
template <class T> void matmul_blocked(T* out, const T* a, const T* b, const MatmulShape& shape, Stream);
// gemm_bf16.cpp (chapter 18): bf16 operands, float32 accumulation. The avx512 variant runs
// only where cpu_has_avx512_bf16(); the plain one runs anywhere and gives the same bits.
void matmul_bf16_plain(float* out, const float* a, const float* b, const MatmulShape& shape, Stream);
void matmul_bf16_avx512(float* out, const float* a, const float* b, const MatmulShape& shape, Stream);
bool cpu_has_avx512_bf16();
// matmul on bf16 data (bf16 a, b; float32 out): the bf16 GEMM above, its packing reading bf16
// as it is (matmul.cpp)
void matmul_bf16_memory(float* out, const bf16* a, const bf16* b, const MatmulShape& shape, Stream);

// nn.cpp
void check_indices(std::int32_t* safe, std::int32_t* first_bad, const std::int32_t* idx, std::int64_t N,
                   std::int64_t limit, std::int64_t allowed, Stream);
template <class T> void embedding_forward(T* out, const T* weight, const std::int32_t* idx, std::int64_t N, std::int64_t C, Stream);
template <class T> void embedding_backward(T* dweight, const T* dout, const std::int32_t* idx, std::int64_t N, std::int64_t V, std::int64_t C, Stream);
template <class T> void softmax_forward(T* out, const T* x, std::int64_t N, std::int64_t C, Stream);
template <class T> void softmax_backward(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C, Stream);
template <class T> void log_softmax_forward(T* out, const T* x, std::int64_t N, std::int64_t C, Stream);
template <class T> void log_softmax_backward(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C, Stream);
template <class T> void cross_entropy_forward(T* losses, T* lse, const T* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream);
template <class T> void cross_entropy_backward(T* dlogits, const T* dlosses, const T* logits, const T* lse, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream);
template <class T> void gelu_forward(T* out, const T* x, std::int64_t n, Stream);
template <class T> void gelu_backward(T* dx, const T* dout, const T* x, std::int64_t n, Stream);
template <class T> void gelu_erf_forward(T* out, const T* x, std::int64_t n, Stream);
template <class T> void gelu_erf_backward(T* dx, const T* dout, const T* x, std::int64_t n, Stream);
template <class T> void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps, Stream);
template <class T> void layernorm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean, const T* rstd, std::int64_t N, std::int64_t C, Stream);

// attention.cpp
template <class T> void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& shape, Stream);
template <class T> void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out, const T* lse, const AttentionShape& shape, Stream);
// ... and in mixed precision (chapter 18): the same loops on q, k, v (and dout) rounded to bf16 as they are read
void attention_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v, const AttentionShape& shape, Stream);
// ... and on bf16 data (the references of chapter 15's variant 4): the float32 loops reading bf16
// where they copy (exact), out rounded to bf16 once
void attention_forward_bf16_memory(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v, const AttentionShape& shape, Stream);
void attention_backward_bf16_memory(float* dq, float* dk, float* dv, const bf16* dout, const bf16* q, const bf16* k, const bf16* v, const bf16* out, const float* lse, const AttentionShape& shape, Stream);
void attention_forward_qkv_bf16(bf16* out, float* lse, const bf16* qkv, const AttentionShape& shape, std::int64_t heads, Stream);
void attention_backward_qkv_bf16(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse, const AttentionShape& shape, std::int64_t heads, Stream);
void attention_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v, const float* out, const float* lse, const AttentionShape& shape, Stream);

// optim.cpp
template <class T> void adamw_step(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWParams& hp, Stream);
template <class T> void sgd_step(T* param, const T* grad, T* buf, std::int64_t n, const SGDParams& hp, Stream);

// fused.cpp: the references for the fused kernels (chapters 12-16), from the kernels above
template <class T> void bias_gelu_forward(T* out, const T* x, const T* bias, std::int64_t N, std::int64_t C, Stream);
template <class T> void bias_gelu_backward(T* dx, T* dbias, const T* dout, const T* x, const T* bias, std::int64_t N, std::int64_t C, Stream);
template <class T> void matmul_bias_gelu(T* out, T* pre, const T* a, const T* b, const T* bias, const MatmulShape& shape, Stream);
template <class T> void residual_layernorm_forward(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual, const T* weight, const T* bias, std::int64_t N, std::int64_t C, T eps, Stream);
template <class T> void cross_entropy_fused(T* losses, T* dlogits, const T* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, T dloss, Stream);
void cross_entropy_fused_rowwise(float* losses, float* dlogits, const float* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream);

// nn_bf16.cpp (chapter 18): bf16 in memory, the float32 kernels' math inside, one pass, one rounding per output
void gelu_forward_bf16(bf16* out, const bf16* x, std::int64_t n, Stream);
void gelu_backward_bf16(bf16* dx, const bf16* dout, const bf16* x, std::int64_t n, Stream);
void gelu_erf_forward_bf16(bf16* out, const bf16* x, std::int64_t n, Stream);
void gelu_erf_backward_bf16(bf16* dx, const bf16* dout, const bf16* x, std::int64_t n, Stream);
void bias_gelu_forward_bf16(bf16* out, const bf16* x, const bf16* bias, std::int64_t N, std::int64_t C, Stream);
void bias_gelu_backward_bf16(bf16* dx, bf16* dbias, const bf16* dout, const bf16* x, const bf16* bias, std::int64_t N, std::int64_t C, Stream);
void layernorm_forward_bf16(bf16* out, bf16* mean, bf16* rstd, const bf16* x, const bf16* weight, const bf16* bias, std::int64_t N, std::int64_t C, bf16 eps, Stream);
void layernorm_backward_bf16(bf16* dx, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* x, const bf16* weight, const bf16* mean, const bf16* rstd, std::int64_t N, std::int64_t C, Stream);
void residual_layernorm_forward_bf16(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* x, const bf16* residual, const bf16* weight, const bf16* bias, std::int64_t N, std::int64_t C, float eps, Stream);
void residual_layernorm_backward_bf16(bf16* dsum, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* dres, const bf16* sum, const bf16* weight, const float* mean, const float* rstd, std::int64_t N, std::int64_t C, Stream);
void cross_entropy_forward_bf16(bf16* losses, bf16* lse, const bf16* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream);
void cross_entropy_backward_bf16(bf16* dlogits, const bf16* dlosses, const bf16* logits, const bf16* lse, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream);
void cross_entropy_fused_bf16(float* losses, bf16* dlogits, const bf16* logits, const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream);
// sum_dim on bf16 data, float32 sums (reduce.cpp): sum_dim<float>'s loops on the widened values
void sum_dim_bf16(float* out, const bf16* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream);
// matmul_epilogue on bf16 data: out = act(a @ b + bias) rounded once (nn_bf16.cpp, the end)
void matmul_epilogue_bf16(bf16* out, bf16* pre, const bf16* a, const bf16* b, const bf16* bias, bool gelu, const MatmulShape& shape, Stream);
template <class T> void adamw_multi_step(const AdamWTensor<T>* tensors, int count, const AdamWParams& hp, Stream);
template <class T> void adamw_clipped_multi_step(T* norm, const AdamWTensor<T>* tensors, int count, const AdamWParams& hp, double max_norm, Stream);

// conv.cpp (the reference), conv_im2col.cpp (the default), pool.cpp
template <class T> void conv2d_direct_forward(T* out, const T* x, const T* weight, const T* bias, const ConvShape& shape, Stream);
template <class T> void conv2d_direct_backward_input(T* dx, const T* dout, const T* weight, const ConvShape& shape, Stream);
template <class T> void conv2d_direct_backward_weight(T* dweight, T* dbias, const T* dout, const T* x, const ConvShape& shape, Stream);
template <class T> void conv2d_im2col_forward(T* out, const T* x, const T* weight, const T* bias, const ConvShape& shape, Stream);
template <class T> void conv2d_im2col_backward_input(T* dx, const T* dout, const T* weight, const ConvShape& shape, Stream);
template <class T> void conv2d_im2col_backward_weight(T* dweight, T* dbias, const T* dout, const T* x, const ConvShape& shape, Stream);
template <class T> void max_pool2d_forward(T* out, std::int64_t* index, const T* x, const PoolShape& shape, Stream);
template <class T> void max_pool2d_backward(T* dx, const T* dout, const std::int64_t* index, const PoolShape& shape, Stream);
template <class T> void avg_pool2d_forward(T* out, const T* x, const PoolShape& shape, Stream);
template <class T> void avg_pool2d_backward(T* dx, const T* dout, const PoolShape& shape, Stream);

// rows/cache.cpp: attend_cache (kernels/signatures.h), whose kernels of note are CUDA's
// (kernels/cuda/rows/): float32 through rows.h's attend_row, float64 the formula.
void attend_cache(float* out, const float* q, const float* k, const float* v, const std::int32_t* slots,
                  const std::int32_t* lengths, const CacheShape& shape, Stream);
void attend_cache_loop(double* out, const double* q, const double* k, const double* v, const std::int32_t* slots,
                       const std::int32_t* lengths, const CacheShape& shape, Stream);
// append_cache: each row's key and value copied to its slot at position lengths[r] - 1.
template <class T>
void append_cache(T* k, T* v, const T* new_k, const T* new_v, const std::int32_t* slots, const std::int32_t* lengths,
                  const CacheShape& shape, Stream);

// rows/sample.cpp: sample_rows (kernels/signatures.h) by sorting, kernels/sample_rule.h's draw
// written plainly; sample_row draws one row (the kernel lab's reference calls it).
void sample_rows(std::int32_t* out, const float* logits, const double* rules, std::int64_t rows, std::int64_t V,
                 Stream);
std::int32_t sample_row(const float* logits, std::int64_t V, const double* rule);

}  // namespace brrr::kernels::cpu
