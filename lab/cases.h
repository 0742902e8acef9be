// lab/cases.h: the kernel lab's table, one file per chapter, and what the files share.
// Chapter 11 (the roofline and the kernel lab). Read before: kernel_lab.h (Case, Problem,
// Args). Read next: any cases_*.cpp, e.g. cases_elementwise.cpp.
//
// Each file returns its chapter's cases in course order; kernel_lab.cpp's cases() puts them
// together. A case's reference is a plain loop in double, written from the formula in its
// chapter, never a call of the kernels it checks (a reference that is the code under test
// checks only its rounding).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/signatures.h"
#include "lab/kernel_lab.h"

namespace brrr::lab {

std::vector<Case> elementwise_cases();  // cases_elementwise.cpp: chapters 02 and 12 (fill ... bias_gelu)
std::vector<Case> random_cases();       // cases_random.cpp: chapter 01 (uniform, normal, dropout_mask)
std::vector<Case> reduction_cases();    // cases_reduction.cpp: chapter 13 (sums, softmax, cross-entropy, LayerNorm)
std::vector<Case> matmul_cases();       // cases_matmul.cpp: chapters 04 and 14 (matmul, linear_gelu)
std::vector<Case> decode_cases();       // cases_decode.cpp: chapter 08 (linear_rows, attend_rows)
std::vector<Case> nn_cases();           // cases_nn.cpp: chapters 07 and 17 (embedding, check_indices)
std::vector<Case> conv_cases();         // cases_conv.cpp: chapter 09 (convolution, pooling)
std::vector<Case> attention_cases();    // cases_attention.cpp: chapter 15 (attention, causal_attention)
std::vector<Case> optim_cases();        // cases_optim.cpp: chapter 16 (AdamW, SGD)

// body(i) for i in [0, n), spread over the CPU's cores: a reference's independent rows (or batch
// entries, or heads). Each i writes outputs of its own and sums them in its own fixed order, so
// the reference does not depend on the thread count. At the GPU bars' sizes a reference is
// billions of multiply-adds in double: one core took minutes (matmul at 4096^3: about 760 s).
template <class Body>
void parallel_rows(std::int64_t n, Body body) {
  kernels::cpu::parallel_for(n, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) body(i);
  });
}

// One dim, contiguous operands: no broadcasting (the elementwise ops' simplest Loop).
inline kernels::Loop flat_loop(std::int64_t n) {
  kernels::Loop loop;
  loop.ndim = 1;
  loop.size[0] = n;
  loop.stride[0][0] = loop.stride[1][0] = loop.stride[2][0] = 1;
  return loop;
}

// sum(dout * y): the scalar whose gradient a backward kernel computes, for grad mode.
inline double dot(const std::vector<double>& dout, const std::vector<double>& y) {
  double s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) s += dout[i] * y[i];
  return s;
}

// GELU, the tanh approximation (chapter 12): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline double gelu(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return 0.5 * x * (1.0 + std::tanh(u));
}
// Its derivative, by the product and chain rules.
inline double gelu_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double t = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// GELU exact (Hugging Face's "gelu"): x Phi(x), Phi(x) = 0.5 erfc(-x / sqrt 2).
inline double gelu_erf(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
// Its derivative: Phi(x) + x phi(x), phi the normal density.
inline double gelu_erf_grad(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

// Causal attention for one query row q (hs) over the keys and values at positions 0 .. t - 1
// (rows of k and v, hs apart): s_j = scale q . k_j, lse = log(sum_j exp(s_j)), and, when out
// is given, out (hs) = sum_j exp(s_j - lse) v_j. Returns lse. `s` is scratch for t scores.
// The formula of chapter 15, shared by the attention cases (cases_attention.cpp) and the
// Decoder's attend_rows (cases_decode.cpp), whose rows are the last n of T positions.
inline double attend_row(const double* q, const double* k, const double* v, std::int64_t t, std::int64_t hs,
                         double scale, std::vector<double>& s, double* out) {
  s.resize(static_cast<std::size_t>(t));
  double max = -INFINITY;
  for (std::int64_t j = 0; j < t; ++j) {
    const double* kj = k + j * hs;
    double dot = 0;
    for (std::int64_t c = 0; c < hs; ++c) dot += q[c] * kj[c];
    s[j] = scale * dot;
    max = std::max(max, s[j]);
  }
  double sum = 0;
  for (std::int64_t j = 0; j < t; ++j) sum += std::exp(s[j] - max);
  const double lse = max + std::log(sum);
  if (!out) return lse;
  std::fill(out, out + hs, 0.0);
  for (std::int64_t j = 0; j < t; ++j) {  // along v's rows (contiguous)
    const double pj = std::exp(s[j] - lse);
    const double* vj = v + j * hs;
    for (std::int64_t c = 0; c < hs; ++c) out[c] += pj * vj[c];
  }
  return lse;
}

// A copy of one problem's float array as float32 numbers, for a case that builds its inputs
// from another reference's outputs (a backward's saved statistics).
inline std::vector<float> as_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

}  // namespace brrr::lab
