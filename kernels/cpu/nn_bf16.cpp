// kernels/cpu/nn_bf16.cpp: GELU, bias + GELU, LayerNorm and cross-entropy on bfloat16 data
// (chapter 18): the CPU kernels of ops on bf16 tensors, and the references of the bf16
// variants in kernels/cuda (gelu.cu, layernorm.cu, residual_layernorm.cu, crossentropy.cu).
// Read before: kernels/cpu/nn.cpp, kernels/cpu/fused.cpp (the float32 kernels these run).
//
// bf16 in memory, float32 inside: every input is widened to float32 (exact), the float32
// kernel runs, and each output is rounded to bf16 once, at the end (round to nearest even,
// brrr::bf16). Two statistics a backward needs are not taken from bf16: layernorm_backward
// recomputes the mean from x in float32, cross_entropy_backward the log-sum-exp from the
// logits. cross_entropy_fused needs no saved statistic: it takes the loss and the gradient
// from the row in one call (float32 losses, a bf16 gradient). Saved in bf16 they are off by up to 2^-9 of themselves: an lse near 5 off by 0.01,
// which is a 1% error in every probability of the row.
#include <cstdint>
#include <vector>

#include "brrr/bfloat16.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace brrr::kernels::cpu {

namespace {

std::vector<float> widen(const bf16* x, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]);
  return out;
}

void narrow(bf16* out, const std::vector<float>& x) {
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = bf16(x[i]);
}

// An elementwise float32 kernel (out from x; or dx from dout and x) on bf16 data.
template <void (*F)(float*, const float*, std::int64_t, Stream)>
void unary_bf16(bf16* out, const bf16* x, std::int64_t n, Stream s) {
  std::vector<float> y(static_cast<std::size_t>(n));
  F(y.data(), widen(x, n).data(), n, s);
  narrow(out, y);
}

template <void (*F)(float*, const float*, const float*, std::int64_t, Stream)>
void unary_backward_bf16(bf16* dx, const bf16* dout, const bf16* x, std::int64_t n, Stream s) {
  std::vector<float> d(static_cast<std::size_t>(n));
  F(d.data(), widen(dout, n).data(), widen(x, n).data(), n, s);
  narrow(dx, d);
}

}  // namespace

void gelu_forward_bf16(bf16* out, const bf16* x, std::int64_t n, Stream s) {
  unary_bf16<&gelu_forward<float>>(out, x, n, s);
}

void gelu_backward_bf16(bf16* dx, const bf16* dout, const bf16* x, std::int64_t n, Stream s) {
  unary_backward_bf16<&gelu_backward<float>>(dx, dout, x, n, s);
}

void gelu_erf_forward_bf16(bf16* out, const bf16* x, std::int64_t n, Stream s) {
  unary_bf16<&gelu_erf_forward<float>>(out, x, n, s);
}

void gelu_erf_backward_bf16(bf16* dx, const bf16* dout, const bf16* x, std::int64_t n, Stream s) {
  unary_backward_bf16<&gelu_erf_backward<float>>(dx, dout, x, n, s);
}

void bias_gelu_forward_bf16(bf16* out, const bf16* x, const bf16* bias, std::int64_t N, std::int64_t C, Stream s) {
  std::vector<float> y(static_cast<std::size_t>(N * C));
  bias_gelu_forward<float>(y.data(), widen(x, N * C).data(), widen(bias, C).data(), N, C, s);
  narrow(out, y);
}

// dbias is the column sums of the float32 dx, rounded once (not a sum of the rounded dx).
void bias_gelu_backward_bf16(bf16* dx, bf16* dbias, const bf16* dout, const bf16* x, const bf16* bias, std::int64_t N,
                             std::int64_t C, Stream s) {
  std::vector<float> d(static_cast<std::size_t>(N * C)), db(static_cast<std::size_t>(C));
  bias_gelu_backward<float>(d.data(), db.data(), widen(dout, N * C).data(), widen(x, N * C).data(),
                            widen(bias, C).data(), N, C, s);
  narrow(dx, d);
  if (dbias) narrow(dbias, db);
}

void layernorm_forward_bf16(bf16* out, bf16* mean, bf16* rstd, const bf16* x, const bf16* weight, const bf16* bias,
                            std::int64_t N, std::int64_t C, bf16 eps, Stream s) {
  std::vector<float> y(static_cast<std::size_t>(N * C)), m(static_cast<std::size_t>(N)), r(static_cast<std::size_t>(N));
  const std::vector<float> b = bias ? widen(bias, C) : std::vector<float>();
  layernorm_forward<float>(y.data(), m.data(), r.data(), widen(x, N * C).data(), widen(weight, C).data(),
                           bias ? b.data() : nullptr, N, C, static_cast<float>(eps), s);
  narrow(out, y);
  narrow(mean, m);
  narrow(rstd, r);
}

// The mean comes again from x, in float32: saved in bf16 it is off by up to 2^-9 of itself,
// which is much of x - mean where |mean| is large beside the spread of the row. rstd is taken
// as saved: its 2^-9 is a relative error of dx of the same size, as the rounding of dx itself.
void layernorm_backward_bf16(bf16* dx, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* x, const bf16* weight,
                             const bf16*, const bf16* rstd, std::int64_t N, std::int64_t C, Stream s) {
  const std::vector<float> x32 = widen(x, N * C), w32 = widen(weight, C), r = widen(rstd, N);
  std::vector<float> m(static_cast<std::size_t>(N));
  for (std::int64_t n = 0; n < N; ++n) {
    double sum = 0;  // as the float32 forward sums (nn.cpp)
    for (std::int64_t c = 0; c < C; ++c) sum += x32[n * C + c];
    m[n] = C ? static_cast<float>(sum / static_cast<double>(C)) : 0.0f;
  }
  std::vector<float> d(static_cast<std::size_t>(N * C)), dw(static_cast<std::size_t>(C)), db(static_cast<std::size_t>(C));
  layernorm_backward<float>(d.data(), dw.data(), dbias ? db.data() : nullptr, widen(dout, N * C).data(), x32.data(),
                            w32.data(), m.data(), r.data(), N, C, s);
  narrow(dx, d);
  narrow(dweight, dw);
  if (dbias) narrow(dbias, db);
}

// Residual + LayerNorm (chapter 18; the CUDA kernels are residual_layernorm.cu): sum = x +
// residual rounded to bf16 once, then the float32 LayerNorm of that stored sum, so out
// normalizes the row the backward will read. mean and rstd stay float32.
void residual_layernorm_forward_bf16(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* x,
                                     const bf16* residual, const bf16* weight, const bf16* bias, std::int64_t N,
                                     std::int64_t C, float eps, Stream s) {
  std::vector<float> stored(static_cast<std::size_t>(N * C)), y(static_cast<std::size_t>(N * C));
  for (std::int64_t i = 0; i < N * C; ++i) {
    sum[i] = bf16(static_cast<float>(x[i]) + static_cast<float>(residual[i]));
    stored[i] = static_cast<float>(sum[i]);
  }
  const std::vector<float> b = bias ? widen(bias, C) : std::vector<float>();
  layernorm_forward<float>(y.data(), mean, rstd, stored.data(), widen(weight, C).data(), bias ? b.data() : nullptr, N,
                           C, eps, s);
  narrow(out, y);
}

// dsum = dres + LayerNorm's dx in float32, rounded once; the forward's float32 mean and rstd as
// they are (nothing recomputed, unlike layernorm_backward_bf16 above, whose are bf16).
void residual_layernorm_backward_bf16(bf16* dsum, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* dres,
                                      const bf16* sum, const bf16* weight, const float* mean, const float* rstd,
                                      std::int64_t N, std::int64_t C, Stream s) {
  std::vector<float> d(static_cast<std::size_t>(N * C)), dw(static_cast<std::size_t>(C)), db(static_cast<std::size_t>(C));
  layernorm_backward<float>(d.data(), dw.data(), db.data(), widen(dout, N * C).data(), widen(sum, N * C).data(),
                            widen(weight, C).data(), mean, rstd, N, C, s);
  if (dres)
    for (std::int64_t i = 0; i < N * C; ++i) d[i] += static_cast<float>(dres[i]);
  narrow(dsum, d);
  narrow(dweight, dw);
  if (dbias) narrow(dbias, db);
}

void cross_entropy_forward_bf16(bf16* losses, bf16* lse, const bf16* logits, const std::int32_t* targets,
                                std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream s) {
  std::vector<float> l(static_cast<std::size_t>(N)), e(static_cast<std::size_t>(N));
  cross_entropy_forward<float>(l.data(), e.data(), widen(logits, N * V).data(), targets, N, V, ignore_index, s);
  narrow(losses, l);
  narrow(lse, e);
}

// The saved lse (bf16) is not used: it comes again from the logits, in float32.
void cross_entropy_backward_bf16(bf16* dlogits, const bf16* dlosses, const bf16* logits, const bf16*,
                                 const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index,
                                 Stream s) {
  const std::vector<float> x = widen(logits, N * V);
  std::vector<float> l(static_cast<std::size_t>(N)), e(static_cast<std::size_t>(N));
  cross_entropy_forward<float>(l.data(), e.data(), x.data(), targets, N, V, ignore_index, s);
  std::vector<float> d(static_cast<std::size_t>(N * V));
  cross_entropy_backward<float>(d.data(), widen(dlosses, N).data(), x.data(), e.data(), targets, N, V, ignore_index, s);
  narrow(dlogits, d);
}

// The loss and the gradient in one call, as the float32 "rowwise" variant (fused.cpp) computes
// them, a row at a time: the row widened to float32 (exact), its loss and gradient in float32,
// the gradient rounded to bf16 once. A row is widened before its gradient is written, so
// dlogits may be logits (in place).
void cross_entropy_fused_bf16(float* losses, bf16* dlogits, const bf16* logits, const std::int32_t* targets,
                              std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream s) {
  parallel_for(N, grain(V, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    std::vector<float> row(static_cast<std::size_t>(V)), d(static_cast<std::size_t>(V));
    for (std::int64_t n = b; n < e; ++n) {
      for (std::int64_t v = 0; v < V; ++v) row[v] = static_cast<float>(logits[n * V + v]);
      cross_entropy_fused_rowwise(&losses[n], d.data(), row.data(), &targets[n], 1, V, ignore_index, dloss, s);
      for (std::int64_t v = 0; v < V; ++v) dlogits[n * V + v] = bf16(d[v]);
    }
  });
}

}  // namespace brrr::kernels::cpu
