// kernels/cpu/nn.cpp: embedding, softmax, cross-entropy, GELU and LayerNorm on the CPU.
// Chapter 07 (attention and the GPT) uses them all; GELU and LayerNorm are also chapters 12
// and 12, where these functions are the reference the CUDA kernels are checked against.
// Read before: matmul.cpp. Read next: optim.cpp.
#include "kernels/cpu/cpu_kernels.h"

#include <limits>
#include <vector>

#include "kernels/cpu/cpu.h"

namespace brrr::kernels::cpu {

// ---------------------------------------------------------------------------------------------
// embedding: out[n, :] = weight[idx[n], :]

void check_indices(std::int32_t* safe, std::int32_t* first_bad, const std::int32_t* idx, std::int64_t N,
                   std::int64_t limit, std::int64_t allowed, Stream) {
  for (std::int64_t i = 0; i < N; ++i) {
    const std::int64_t v = idx[i];
    const bool ok = (v >= 0 && v < limit) || v == allowed;
    safe[i] = ok ? idx[i] : 0;
    if (!ok && i < *first_bad) *first_bad = static_cast<std::int32_t>(i);
  }
}

template <class T>
void embedding_forward(T* out, const T* weight, const std::int32_t* idx, std::int64_t N, std::int64_t C, Stream) {
  parallel_for(N, grain(C, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) std::memcpy(out + n * C, weight + idx[n] * C, C * sizeof(T));
  });
}

// dweight[idx[n], :] += dout[n, :]. Two rows may share a token, so threads split the
// columns, not the rows: each column's additions happen in row order (deterministic).
template <class T>
void embedding_backward(T* dweight, const T* dout, const std::int32_t* idx, std::int64_t N, std::int64_t V, std::int64_t C, Stream) {
  constexpr std::int64_t kCols = 64;
  parallel_for((C + kCols - 1) / kCols, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t block = b; block < e; ++block) {
      const std::int64_t c0 = block * kCols, c1 = std::min(C, c0 + kCols);
      for (std::int64_t n = 0; n < N; ++n) {
        T* dst = dweight + idx[n] * C;
        const T* src = dout + n * C;
        for (std::int64_t c = c0; c < c1; ++c) dst[c] += src[c];
      }
    }
  });
}

// ---------------------------------------------------------------------------------------------
// softmax over rows: out = exp(x - max) / sum(exp(x - max)); subtracting the max keeps exp
// from overflowing and changes nothing mathematically.

// Each pass over a row is a loop the compiler vectorizes (omp simd), with exp_vec_or_zero
// (cpu.h: a masked score, -inf, still weighs exactly 0), and the sum in double, in an
// order fixed by the code, so the bits do not depend on the thread count. (One element at a
// time, with std::exp and a chain of double adds, it was 8.6% of a one-thread gpt-12m bf16
// training step, in attention's softmax over (T, T) scores; vectorized, 2.4%.)
template <class T>
void softmax_forward(T* out, const T* x, std::int64_t N, std::int64_t C, Stream) {
  parallel_for(N, grain(C, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      const T* row = x + n * C;
      T* o = out + n * C;
      T maxv = -std::numeric_limits<T>::infinity();
      for (std::int64_t c = 0; c < C; ++c) maxv = std::max(maxv, row[c]);
      // A fully masked row (all -inf) has no finite max; using 0 avoids inf - inf, and the row
      // then comes out NaN (0 / 0), as in PyTorch. Causal attention never masks a whole row.
      if (maxv == -std::numeric_limits<T>::infinity()) maxv = 0;
      double sum = 0.0;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t c = 0; c < C; ++c) {
        o[c] = exp_vec_or_zero(row[c] - maxv);
        sum += o[c];
      }
      const T inv = static_cast<T>(1.0 / sum);
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) o[c] *= inv;
    }
  });
}

// dx = out * (dout - sum(dout * out)), the Jacobian of softmax applied to dout.
template <class T>
void softmax_backward(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C, Stream) {
  parallel_for(N, grain(C, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      const T* g = dout + n * C;
      const T* y = out + n * C;
      double dot = 0.0;
#pragma omp simd reduction(+ : dot)
      for (std::int64_t c = 0; c < C; ++c) dot += static_cast<double>(g[c]) * y[c];
      const T d = static_cast<T>(dot);
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) dx[n * C + c] = y[c] * (g[c] - d);
    }
  });
}

template <class T>
inline double logsumexp(const T* row, std::int64_t C) {
  T maxv = -std::numeric_limits<T>::infinity();
  for (std::int64_t c = 0; c < C; ++c) maxv = std::max(maxv, row[c]);
  if (maxv == -std::numeric_limits<T>::infinity()) return maxv;
  double sum = 0.0;
  for (std::int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(row[c] - maxv));
  return static_cast<double>(maxv) + std::log(sum);
}

template <class T>
void log_softmax_forward(T* out, const T* x, std::int64_t N, std::int64_t C, Stream) {
  parallel_for(N, grain(C, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      const double lse = logsumexp(x + n * C, C);
      for (std::int64_t c = 0; c < C; ++c) out[n * C + c] = static_cast<T>(x[n * C + c] - lse);
    }
  });
}

// dx = dout - exp(out) * sum(dout), since exp(out) is the softmax.
template <class T>
void log_softmax_backward(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C, Stream) {
  parallel_for(N, grain(C, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < C; ++c) sum += dout[n * C + c];
      for (std::int64_t c = 0; c < C; ++c)
        dx[n * C + c] = static_cast<T>(dout[n * C + c] - std::exp(static_cast<double>(out[n * C + c])) * sum);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// cross-entropy, fused: loss[n] = lse(logits[n]) - logits[n, target[n]]. The backward
// recomputes the softmax from the logits and the saved lse, so no (N, V) probability tensor
// is ever stored: dlogits[n, v] = (exp(logits[n, v] - lse[n]) - [v == target]) * dloss[n].

template <class T>
void cross_entropy_forward(T* losses, T* lse, const T* logits, const std::int32_t* targets, std::int64_t N,
                           std::int64_t V, std::int64_t ignore_index, Stream) {
  parallel_for(N, grain(V, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      const double l = logsumexp(logits + n * V, V);
      lse[n] = static_cast<T>(l);
      losses[n] = targets[n] == ignore_index ? T(0) : static_cast<T>(l - logits[n * V + targets[n]]);
    }
  });
}

template <class T>
void cross_entropy_backward(T* dlogits, const T* dlosses, const T* logits, const T* lse, const std::int32_t* targets,
                            std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream) {
  parallel_for(N, grain(V, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      T* d = dlogits + n * V;
      if (targets[n] == ignore_index) {
        std::fill(d, d + V, T(0));
        continue;
      }
      const T* row = logits + n * V;
      const T g = dlosses[n], l = lse[n];
      for (std::int64_t v = 0; v < V; ++v) d[v] = std::exp(row[v] - l) * g;
      d[targets[n]] -= g;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// GELU, tanh approximation: gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
// tanh_vec (cpu.h) lets the loop vectorize; float64 uses std::tanh.

// Forward as x / (1 + exp(-2u)), the same function (0.5 (1 + tanh u) = 1 / (1 + exp(-2u))),
// with one exp and one divide per element instead of tanh's exp, divide and extra terms.
// (cpu.h: gelu_tanh_value and gelu_tanh_slope, shared with the bf16 kernels.)
template <class T>
void gelu_forward(T* out, const T* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) out[i] = gelu_tanh_value(x[i]);
  });
}

template <class T>
void gelu_backward(T* dx, const T* dout, const T* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) dx[i] = gelu_tanh_slope(x[i]) * dout[i];
  });
}

// GELU, exact (Hugging Face's "gelu", PyTorch's nn.GELU()): gelu(x) = x Phi(x), Phi the normal
// distribution's CDF, Phi(x) = 0.5 erfc(-x / sqrt 2). gelu'(x) = Phi(x) + x phi(x), phi(x) =
// exp(-x^2 / 2) / sqrt(2 pi). GPT-2 uses the tanh form above; a pretrained model whose config
// says "gelu" needs this one (the two differ by up to 4.7e-4, at x = -2.70).
template <class T>
void gelu_erf_forward(T* out, const T* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) out[i] = gelu_erf_value(x[i]);  // cpu.h
  });
}

template <class T>
void gelu_erf_backward(T* dx, const T* dout, const T* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) dx[i] = gelu_erf_slope(x[i]) * dout[i];  // cpu.h
  });
}

// ---------------------------------------------------------------------------------------------
// LayerNorm over rows of (N, C): out = (x - mean) * rstd * weight + bias,
// rstd = 1 / sqrt(var + eps) with the biased variance. mean and rstd are saved for backward.

// Each row is cpu.h's layer_norm_row (vectorized sums in double), which the Decoder shares.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, std::int64_t N,
                       std::int64_t C, T eps, Stream) {
  parallel_for(N, grain(C, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      double m, s;
      layer_norm_row(out + n * C, m, s, x + n * C, weight, bias, C, eps);
      mean[n] = static_cast<T>(m);
      rstd[n] = static_cast<T>(s);
    }
  });
}

// With norm = (x - mean) * rstd and g = dout * weight:
//   dx = rstd * (g - mean(g) - norm * mean(g * norm))
//   dweight = sum over rows of dout * norm,  dbias = sum over rows of dout.
// Rows are cut into fixed chunks whose partial dweight/dbias are added in chunk order.
template <class T>
void layernorm_backward(T* dx, T* dweight, T* dbias, const T* dout, const T* x, const T* weight, const T* mean,
                        const T* rstd, std::int64_t N, std::int64_t C, Stream) {
  constexpr std::int64_t kRows = 64;
  const std::int64_t chunks = (N + kRows - 1) / kRows;
  std::vector<double> partial_w(chunks * C, 0.0), partial_b(chunks * C, 0.0);
  parallel_for(chunks, 1, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t chunk = b; chunk < e; ++chunk) {
      double* pw = partial_w.data() + chunk * C;
      double* pb = partial_b.data() + chunk * C;
      for (std::int64_t n = chunk * kRows; n < std::min(N, (chunk + 1) * kRows); ++n)
        layernorm_backward_row(dx + n * C, pw, pb, dout + n * C, x + n * C, weight, static_cast<double>(mean[n]),
                               static_cast<double>(rstd[n]), C);  // cpu.h
    }
  });
  for (std::int64_t c = 0; c < C; ++c) {
    double w = 0.0, bsum = 0.0;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      w += partial_w[chunk * C + c];
      bsum += partial_b[chunk * C + c];
    }
    if (dweight) dweight[c] = static_cast<T>(w);
    if (dbias) dbias[c] = static_cast<T>(bsum);
  }
}

#define BRRR_INSTANTIATE(T)                                                                                       \
  template void embedding_forward<T>(T*, const T*, const std::int32_t*, std::int64_t, std::int64_t, Stream);      \
  template void embedding_backward<T>(T*, const T*, const std::int32_t*, std::int64_t, std::int64_t, std::int64_t, \
                                      Stream);                                                                    \
  template void softmax_forward<T>(T*, const T*, std::int64_t, std::int64_t, Stream);                             \
  template void softmax_backward<T>(T*, const T*, const T*, std::int64_t, std::int64_t, Stream);                  \
  template void log_softmax_forward<T>(T*, const T*, std::int64_t, std::int64_t, Stream);                         \
  template void log_softmax_backward<T>(T*, const T*, const T*, std::int64_t, std::int64_t, Stream);              \
  template void cross_entropy_forward<T>(T*, T*, const T*, const std::int32_t*, std::int64_t, std::int64_t,       \
                                         std::int64_t, Stream);                                                   \
  template void cross_entropy_backward<T>(T*, const T*, const T*, const T*, const std::int32_t*, std::int64_t,    \
                                          std::int64_t, std::int64_t, Stream);                                    \
  template void gelu_forward<T>(T*, const T*, std::int64_t, Stream);                                              \
  template void gelu_backward<T>(T*, const T*, const T*, std::int64_t, Stream);                                   \
  template void gelu_erf_forward<T>(T*, const T*, std::int64_t, Stream);                                          \
  template void gelu_erf_backward<T>(T*, const T*, const T*, std::int64_t, Stream);                               \
  template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, std::int64_t, std::int64_t, T,     \
                                     Stream);                                                                     \
  template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, std::int64_t,  \
                                      std::int64_t, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

}  // namespace brrr::kernels::cpu
