// kernels/cpu/cpu.h: helpers every CPU kernel uses, and the vectorizable math they share.
// Chapter 04 (matmul and the CPU backend). Read next: elementwise.cpp.
//
// Work is split into blocks of a fixed size (never "one block per thread"), and OpenMP hands
// the blocks out. A block's result never depends on which thread ran it or how many threads
// there are, which is how brrr gives bitwise-identical results for any thread count.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/signatures.h"

namespace brrr::kernels::cpu {

// Calls body(begin, end) for consecutive blocks of `grain` indices in [0, n), in parallel
// when there is more than one block.
template <class Body>
inline void parallel_for(std::int64_t n, std::int64_t grain, Body body) {
  if (n <= 0) return;
  const std::int64_t blocks = (n + grain - 1) / grain;
  if (blocks == 1 || omp_in_parallel()) {
    for (std::int64_t b = 0; b < blocks; ++b) body(b * grain, std::min(n, (b + 1) * grain));
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t b = 0; b < blocks; ++b) body(b * grain, std::min(n, (b + 1) * grain));
}

// Elementwise kernels move about 32 KiB per block: big enough to amortise scheduling,
// small enough to balance two cores on a 16k-element tensor.
constexpr std::int64_t kElementwiseGrain = 8192;
// Convolutions, pooling and reductions do at least ~16k multiply-adds or copies per block, so
// a small layer (the digits' CNN) runs on one thread instead of paying a wake-up per op,
// which costs far more than it saves when another process holds a core.
constexpr std::int64_t kLayerGrain = 16384;

// The grain of parallel_for when each index costs about `work` (elements, multiply-adds or
// copies): enough indices that a block does about `block_work`, and at least one.
inline std::int64_t grain(std::int64_t work, std::int64_t block_work) {
  return std::max<std::int64_t>(1, block_work / std::max<std::int64_t>(work, 1));
}

// exp(x) for float that the compiler can vectorize (no libm call): Cephes' method.
// x = n ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial, then scale by 2^n
// through the exponent bits. Relative error about 1 ulp; x is clamped to float's range.
inline float exp_vec(float x) {
  x = std::min(std::max(x, -87.3365447505f), 88.7228391117f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;   // ln2, split in two for precision
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
inline double exp_vec(double x) { return std::exp(x); }

// exp_vec, but exactly 0 where exp(x) is below float's normal range (x < -87, -inf included),
// where exp_vec clamps to about 1e-38: for weights that must vanish, a masked attention score
// or a -inf logit. float64 keeps std::exp.
inline float exp_vec_or_zero(float x) { return x < -87.0f ? 0.0f : exp_vec(x); }
inline double exp_vec_or_zero(double x) { return std::exp(x); }

// tanh(u) = 1 - 2 / (exp(2u) + 1): saturates cleanly to +-1 for large |u|.
inline float tanh_vec(float u) { return 1.0f - 2.0f / (exp_vec(2.0f * u) + 1.0f); }
inline double tanh_vec(double u) { return std::tanh(u); }

// erfc(x) for float that the compiler can vectorize: the Chebyshev fit of Numerical Recipes
// (Press et al., section 6.2, "erfcc"), t = 1 / (1 + |x| / 2) and
// erfc(|x|) = t exp(-x^2 + P(t)) with P of degree 9, relative error below 1.2e-7 by the fit
// (float rounding adds a few ulp more); erfc(-x) = 2 - erfc(x). Exact GELU needs it
// (0.5 x erfc(-x / sqrt 2)); erfc rather than 1 + erf keeps its left tail accurate. float64
// keeps std::erfc.
inline float erfc_vec(float x) {
  const float z = std::fabs(x), t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float r = t * exp_vec(p - z * z);
  return x >= 0.0f ? r : 2.0f - r;
}
inline double erfc_vec(double x) { return std::erfc(x); }

// One row of LayerNorm, out = (x - mean) * rstd * weight + bias (bias may be nullptr), rstd = 1
// / sqrt(var + eps) with the biased variance; returns mean and rstd. The row sums are omp simd
// reductions: vectorized, in double, in an order fixed by the compiled code (chains of scalar
// double adds, one add every 4 cycles, made the training forward 1.7% of a one-thread gpt-12m
// bf16 step, 0.5% with these, and the Decoder's LayerNorm 3% of GPT-2's 512-token prefill).
// nn.cpp's layernorm_forward and the Decoder's layer_norm_rows (rows/rows.cpp) both call it, so
// generation normalizes with the training forward's very numbers.
// The row's mean as layer_norm_row takes it (nn_bf16.cpp's LayerNorm backward takes it again).
template <class T>
inline double layer_norm_mean(const T* row, std::int64_t C) {
  double m = 0.0;
#pragma omp simd reduction(+ : m)
  for (std::int64_t c = 0; c < C; ++c) m += row[c];
  return m / static_cast<double>(C);
}

template <class T>
inline void layer_norm_row(T* out, double& mean, double& rstd, const T* row, const T* weight, const T* bias,
                           std::int64_t C, T eps) {
  const double m = layer_norm_mean(row, C);
  double v = 0.0;
#pragma omp simd reduction(+ : v)
  for (std::int64_t c = 0; c < C; ++c) v += (row[c] - m) * (row[c] - m);
  v /= static_cast<double>(C);
  const double s = 1.0 / std::sqrt(v + static_cast<double>(eps));
#pragma omp simd
  for (std::int64_t c = 0; c < C; ++c) {
    const T norm = static_cast<T>((row[c] - m) * s);
    out[c] = norm * weight[c] + (bias ? bias[c] : T(0));
  }
  mean = m, rstd = s;
}

// The exact GELU of one value, 0.5 x erfc(-x / sqrt 2): nn.cpp's gelu_erf_forward and the
// Decoder's epilogue (rows/rows.cpp) both compute it with this, so their bits agree.
template <class T>
inline T gelu_erf_value(T x) {
  return T(0.5) * x * erfc_vec(static_cast<T>(-0.7071067811865476) * x);
}

// GELU's other values and derivatives, one value each (nn.cpp has the formulas): the float32
// kernels of nn.cpp and the bf16 ones of nn_bf16.cpp compute them with these, so a bf16
// output is the float32 kernel's on the same (widened) input, rounded once.
template <class T>
inline T gelu_tanh_value(T v) {  // x / (1 + exp(-2u)) = 0.5 x (1 + tanh u)
  const T k2 = static_cast<T>(-2.0 * 0.7978845608028654), c = static_cast<T>(0.044715);
  return v / (T(1) + exp_vec(k2 * (v + c * v * v * v)));
}
template <class T>
inline T gelu_tanh_slope(T v) {
  const T k = static_cast<T>(0.7978845608028654), c = static_cast<T>(0.044715);
  const T th = tanh_vec(k * (v + c * v * v * v));
  return T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * k * (T(1) + T(3) * c * v * v);
}
template <class T>
inline T gelu_erf_slope(T v) {  // Phi(x) + x phi(x)
  const T r = static_cast<T>(-0.7071067811865476), k = static_cast<T>(0.3989422804014327);  // 1 / sqrt(2 pi)
  return T(0.5) * erfc_vec(r * v) + v * k * exp_vec(T(-0.5) * v * v);
}

// One row of LayerNorm's backward (nn.cpp has the formulas): dx for the row, and the row's
// dout * norm and dout added into the partial column sums pw and pb. nn.cpp's float kernels
// and nn_bf16.cpp's (on a row widened to float32) share it.
template <class T>
inline void layernorm_backward_row(T* dx, double* pw, double* pb, const T* g, const T* row, const T* weight, double m,
                                   double s, std::int64_t C) {
  double mean_g = 0.0, mean_gn = 0.0;
#pragma omp simd reduction(+ : mean_g, mean_gn)
  for (std::int64_t c = 0; c < C; ++c) {
    const double norm = (row[c] - m) * s;
    const double gw = static_cast<double>(g[c]) * weight[c];
    mean_g += gw;
    mean_gn += gw * norm;
    pw[c] += static_cast<double>(g[c]) * norm;
    pb[c] += g[c];
  }
  mean_g /= static_cast<double>(C);
  mean_gn /= static_cast<double>(C);
#pragma omp simd
  for (std::int64_t c = 0; c < C; ++c) {
    const double norm = (row[c] - m) * s;
    const double gw = static_cast<double>(g[c]) * weight[c];
    dx[c] = static_cast<T>(s * (gw - mean_g - norm * mean_gn));
  }
}

}  // namespace brrr::kernels::cpu
