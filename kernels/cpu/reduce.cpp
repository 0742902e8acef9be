// kernels/cpu/reduce.cpp: sum and max over the middle axis of (outer, R, inner).
// Chapter 02 (ops and broadcasting). Read before: elementwise.cpp. Read next: matmul.cpp.
//
// Any reduction over adjacent dims is this shape: summing the last dim is inner = 1, summing
// the first (a bias gradient) is outer = 1. Sums accumulate in double and are cut into
// chunks of kChunk values along R whose partial sums are added in order, so the result does
// not depend on how many threads ran it.
#include "kernels/cpu/cpu_kernels.h"

#include <limits>
#include <vector>

#include "brrr/bfloat16.h"
#include "kernels/cpu/cpu.h"

namespace brrr::kernels::cpu {

constexpr std::int64_t kChunk = 4096;

// A value as the sums take it: float and double as they are, bf16 widened (exactly) first.
inline double value_of(float x) { return x; }
inline double value_of(double x) { return x; }
inline double value_of(bf16 x) { return static_cast<float>(x); }

// Sum of one strided run of R values, as a fold over chunk partials.
template <class T>
inline double sum_run(const T* x, std::int64_t R, std::int64_t stride) {
  double total = 0.0;
  for (std::int64_t c = 0; c < R; c += kChunk) {
    double partial = 0.0;
    const std::int64_t end = std::min(R, c + kChunk);
    for (std::int64_t r = c; r < end; ++r) partial += value_of(x[r * stride]);
    total += partial;
  }
  return total;
}

// In: the stored values' type (T, or bf16 for sum_dim on bf16 data, whose sums are T = float).
template <class T, class In>
void sum_dim_of(T* out, const In* in, std::int64_t outer, std::int64_t R, std::int64_t inner) {
  if (inner == 1 && outer < 2 * omp_get_max_threads() && R > 2 * kChunk) {
    // Few long rows: the chunks of each row run in parallel, then fold in order.
    const std::int64_t chunks = (R + kChunk - 1) / kChunk;
    std::vector<double> partial(chunks);
    for (std::int64_t o = 0; o < outer; ++o) {
      const In* row = in + o * R;
      parallel_for(chunks, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t c = b; c < e; ++c) partial[c] = sum_run(row + c * kChunk, std::min(kChunk, R - c * kChunk), 1);
      });
      double total = 0.0;
      for (double p : partial) total += p;
      out[o] = static_cast<T>(total);
    }
    return;
  }
  if (inner == 1) {
    parallel_for(outer, grain(R, kLayerGrain), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t o = b; o < e; ++o) out[o] = static_cast<T>(sum_run(in + o * R, R, 1));
    });
    return;
  }
  // inner > 1: accumulate whole rows of `inner` values, walking R in order; blocks of
  // columns run in parallel.
  constexpr std::int64_t kCols = 256;
  const std::int64_t col_blocks = (inner + kCols - 1) / kCols;
  parallel_for(outer * col_blocks, 1, [&](std::int64_t b, std::int64_t e) {
    double acc[kCols], partial[kCols];
    for (std::int64_t task = b; task < e; ++task) {
      const std::int64_t o = task / col_blocks, j0 = (task % col_blocks) * kCols;
      const std::int64_t width = std::min(kCols, inner - j0);
      std::fill(acc, acc + width, 0.0);
      for (std::int64_t c = 0; c < R; c += kChunk) {
        std::fill(partial, partial + width, 0.0);
        for (std::int64_t r = c; r < std::min(R, c + kChunk); ++r) {
          const In* row = in + (o * R + r) * inner + j0;
          for (std::int64_t j = 0; j < width; ++j) partial[j] += value_of(row[j]);
        }
        for (std::int64_t j = 0; j < width; ++j) acc[j] += partial[j];
      }
      for (std::int64_t j = 0; j < width; ++j) out[o * inner + j0 + j] = static_cast<T>(acc[j]);
    }
  });
}

template <class T>
void sum_dim(T* out, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream) {
  sum_dim_of(out, in, outer, R, inner);
}

// On bf16 data (chapter 18): the same loops on the widened values, so the bits of sum_dim<float>
// on a widened copy, without the copy.
void sum_dim_bf16(float* out, const bf16* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream) {
  sum_dim_of(out, in, outer, R, inner);
}

// The largest value and the index of its first occurrence; NaN counts as largest (as in
// PyTorch), so a NaN anywhere shows up in the result.
template <class T>
void max_dim(T* out, std::int64_t* index, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream) {
  parallel_for(outer * inner, grain(R, kLayerGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t task = b; task < e; ++task) {
      const std::int64_t o = task / inner, j = task % inner;
      const T* x = in + o * R * inner + j;
      T best = x[0];
      std::int64_t best_r = 0;
      for (std::int64_t r = 1; r < R && !std::isnan(best); ++r) {
        const T v = x[r * inner];
        if (v > best || std::isnan(v)) {
          best = v;
          best_r = r;
        }
      }
      out[task] = best;
      if (index) index[task] = best_r;
    }
  });
}

template <class T>
void max_dim_backward(T* dx, const T* dout, const std::int64_t* index, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream) {
  parallel_for(outer, grain(R * inner, kLayerGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t o = b; o < e; ++o) {
      std::fill(dx + o * R * inner, dx + (o + 1) * R * inner, T(0));
      for (std::int64_t j = 0; j < inner; ++j) dx[(o * R + index[o * inner + j]) * inner + j] = dout[o * inner + j];
    }
  });
}

template void max_dim_backward<float>(float*, const float*, const std::int64_t*, std::int64_t, std::int64_t, std::int64_t, Stream);
template void max_dim_backward<double>(double*, const double*, const std::int64_t*, std::int64_t, std::int64_t, std::int64_t, Stream);
template void sum_dim<float>(float*, const float*, std::int64_t, std::int64_t, std::int64_t, Stream);
template void sum_dim<double>(double*, const double*, std::int64_t, std::int64_t, std::int64_t, Stream);
template void max_dim<float>(float*, std::int64_t*, const float*, std::int64_t, std::int64_t, std::int64_t, Stream);
template void max_dim<double>(double*, std::int64_t*, const double*, std::int64_t, std::int64_t, std::int64_t, Stream);

}  // namespace brrr::kernels::cpu
