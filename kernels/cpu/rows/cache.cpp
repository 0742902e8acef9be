// kernels/cpu/rows/cache.cpp: attend_cache and append_cache on the CPU, the ops whose kernels of
// note are CUDA's (kernels/cuda/rows/attend_cache.cu, chapter 20): one query per row against its
// slot of a KV cache, and the writing of each row's key and value into it. Here for the kernel lab, which checks every op on the CPU too, and as the CPU's answer
// to compare a GPU's with. Read before: rows.h (attend_row), kernels/cache_shape.h.
// Read next: kernels/cuda/rows/attend_cache.cu.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cache_shape.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/rows/rows.h"

namespace brrr::kernels::cpu {

namespace {

using i64 = std::int64_t;

// The row's slot and length, or false when either is out of range (the row is then NaN, as on
// the GPU: kernels/cache_shape.h).
bool row_in_range(const CacheShape& s, const std::int32_t* slots, const std::int32_t* lengths, i64 r) {
  return slots[r] >= 0 && slots[r] < s.slots && lengths[r] >= 1 && lengths[r] <= s.capacity;
}

template <class T>
void fill_nan(T* row, i64 n) {
  for (i64 c = 0; c < n; ++c) row[c] = std::numeric_limits<T>::quiet_NaN();
}

}  // namespace

void attend_cache(float* out, const float* q, const float* k, const float* v, const std::int32_t* slots,
                  const std::int32_t* lengths, const CacheShape& s, Stream) {
  check_cache_shape("attend_cache", s, out, q, k, v, slots, lengths);
  const i64 C = s.heads * s.hs;
  rows_parallel(s.rows * s.heads, 1, [&](i64 begin, i64 end) {
    std::vector<float> scores(static_cast<std::size_t>(s.capacity));
    for (i64 i = begin; i < end; ++i) {
      const i64 r = i / s.heads, h = i % s.heads;
      float* o = out + r * C + h * s.hs;
      if (!row_in_range(s, slots, lengths, r)) {
        fill_nan(o, s.hs);
        continue;
      }
      const i64 at = i64{slots[r]} * s.capacity * C + h * s.hs;
      attend_row(o, q + r * s.q_stride + h * s.hs, k + at, v + at, lengths[r], C, s.hs, scores.data());
    }
  });
}

void attend_cache_loop(double* out, const double* q, const double* k, const double* v, const std::int32_t* slots,
                       const std::int32_t* lengths, const CacheShape& s, Stream) {
  check_cache_shape("attend_cache", s, out, q, k, v, slots, lengths);
  const i64 C = s.heads * s.hs;
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hs));
  for (i64 r = 0; r < s.rows; ++r)
    for (i64 h = 0; h < s.heads; ++h) {
      double* o = out + r * C + h * s.hs;
      if (!row_in_range(s, slots, lengths, r)) {
        fill_nan(o, s.hs);
        continue;
      }
      const double* qh = q + r * s.q_stride + h * s.hs;
      const i64 at = i64{slots[r]} * s.capacity * C + h * s.hs, t = lengths[r];
      std::vector<double> e(static_cast<std::size_t>(t));
      double top = -INFINITY;
      for (i64 p = 0; p < t; ++p) {
        double dot = 0;
        for (i64 c = 0; c < s.hs; ++c) dot += qh[c] * k[at + p * C + c];
        e[p] = scale * dot;
        top = std::max(top, e[p]);
      }
      double total = 0;
      for (i64 p = 0; p < t; ++p) total += (e[p] = std::exp(e[p] - top));
      for (i64 c = 0; c < s.hs; ++c) o[c] = 0;
      for (i64 p = 0; p < t; ++p)
        for (i64 c = 0; c < s.hs; ++c) o[c] += e[p] / total * v[at + p * C + c];
    }
}

template <class T>
void append_cache(T* k, T* v, const T* new_k, const T* new_v, const std::int32_t* slots, const std::int32_t* lengths,
                  const CacheShape& s, Stream) {
  check_cache_shape("append_cache", s, k, new_k, v, new_v, slots, lengths);
  const i64 C = s.heads * s.hs;
  for (i64 r = 0; r < s.rows; ++r) {
    if (!row_in_range(s, slots, lengths, r)) continue;  // attend_cache gives the row NaN
    const i64 at = (i64{slots[r]} * s.capacity + lengths[r] - 1) * C;
    std::copy(new_k + r * s.q_stride, new_k + r * s.q_stride + C, k + at);
    std::copy(new_v + r * s.q_stride, new_v + r * s.q_stride + C, v + at);
  }
}

template void append_cache(float*, float*, const float*, const float*, const std::int32_t*, const std::int32_t*,
                           const CacheShape&, Stream);
template void append_cache(double*, double*, const double*, const double*, const std::int32_t*, const std::int32_t*,
                           const CacheShape&, Stream);

}  // namespace brrr::kernels::cpu
