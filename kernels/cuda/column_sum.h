// kernels/cuda/column_sum.h: the second half of a deterministic column reduction: sums K rows
// of per-block partial results into one row, always in the same order.
// Chapters 12 and 13 (bias + GELU backward's dbias, LayerNorm backward's dweight and dbias).
// Read before: kernels/cuda/common.h. Include it after simt.h and common.h, inside no namespace.
//
// Why two kernels and not float atomics: a column sum over N rows spread across many blocks
// needs the blocks' results combined somewhere. atomicAdd combines them in whatever order the
// blocks finish, so the last bits of dbias change from run to run (DESIGN.md,
// "Reproducibility"). Instead each block writes its partial row to a buffer (the workspace),
// and this kernel adds the K partial rows in a fixed order: thread (x, y) of a 32 x 8 block
// sums rows y, y + 8, y + 16, ... of column 32 * blockIdx.x + x, then row y = 0 adds the eight
// sums in order y = 0..7. The order depends only on K, never on timing.
#pragma once
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// out[c] = sum over k < K of partial[k * row_stride + c], c < C. With `out2` as well, the
// blocks of blockIdx.y = 1 sum the next C columns of each partial row into out2 in the same
// launch (LayerNorm's dweight and dbias, stored side by side in one partial row). Launch with
// column_sum_launch or column_sum_pair_launch. `static`: every kernel file that includes this
// has its own copy.
template <class T>
static __global__ void column_sum_kernel(T* out, T* out2, const T* partial, std::int64_t K, std::int64_t C,
                                         std::int64_t row_stride) {
  __shared__ T sums[8][32];
  T* target = blockIdx.y == 0 ? out : out2;
  if (target == nullptr) return;  // the whole block leaves: no thread waits at the barrier below
  partial += blockIdx.y * C;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  T sum = 0;
  if (c < C)
    for (std::int64_t k = threadIdx.y; k < K; k += 8) sum += partial[k * row_stride + c];
  sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    T total = 0;
    for (int y = 0; y < 8; ++y) total += sums[y][threadIdx.x];
    target[c] = total;
  }
}

template <class T>
static void column_sum_launch(T* out, const T* partial, std::int64_t K, std::int64_t C, std::int64_t row_stride,
                              Stream stream) {
  if (out == nullptr || C == 0) return;
  BRRR_LAUNCH((column_sum_kernel<T>), grid_for(C, 32), dim3(32, 8), 0, stream, out, static_cast<T*>(nullptr),
              partial, K, C, row_stride);
}

// out[c] from columns 0..C-1 of the partial rows and out2[c] from columns C..2C-1, one launch
// (either output may be null).
template <class T>
static void column_sum_pair_launch(T* out, T* out2, const T* partial, std::int64_t K, std::int64_t C,
                                   std::int64_t row_stride, Stream stream) {
  if ((out == nullptr && out2 == nullptr) || C == 0) return;
  BRRR_LAUNCH((column_sum_kernel<T>), dim3(grid_for(C, 32), 2), dim3(32, 8), 0, stream, out, out2, partial, K, C,
              row_stride);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
