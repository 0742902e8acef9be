// kernels/cuda/matmul/gemm.h: what every CUDA matmul variant shares: the problem as the kernels
// see it (Operand, Gemm), element access with zeros past the edges, stores into out, the tile
// loaders and the grid.
// Chapter 14 (matmul from naive to tensor cores). Read before: kernels/cuda/matmul/matmul.h.
// Read next: kernels/cuda/matmul/cuda_cores.cu (variant 1 onwards).
//
// Every variant implements the whole contract of MatmulShape (kernels/signatures.h), because the
// registry may hand any of them the real GPT: (batch, M, K) @ (batch, K, N) -> (batch, M, N),
// either operand stored transposed, a batch stride of 0 broadcasting an operand, accumulate
// (out += a @ b), and M, N, K of any size, multiples of no tile. Three choices keep that out of
// the way of the ideas:
//   - an operand is a logical (rows, cols) matrix with a row stride and a column stride
//     (Operand below). A matrix stored transposed is the same matrix with the two strides
//     swapped, so no kernel tests trans_a or trans_b: only the tile loaders look at which
//     stride is 1, to make neighbouring threads read neighbouring addresses.
//   - tiles that hang over an edge of a matrix are filled with zeros when loaded, and outputs
//     outside (M, N) are not stored. A zero adds nothing to a dot product, so the inner loops
//     never check bounds.
//   - blockIdx.z walks the batch (in steps of gridDim.z, when the batch exceeds the 65535
//     blocks a grid may have along z).
//
// Included by each file of the folder, so it is compiled twice like them (simt.h): once for the
// GPU, once for the emulator.
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "kernels/signatures.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// What every variant shares: the problem, element access, stores, the grid

// One operand as the kernels see it: a logical (rows, cols) matrix whose element (r, c) of
// batch z is data[z * batch_stride + r * row_stride + c * col_stride]. a is (M, K) and b is
// (K, N) whether or not they are stored transposed.
template <class T>
struct Operand {
  const T* data;
  std::int64_t batch_stride, row_stride, col_stride;
  int rows, cols;
  bool vec4;  // float4 loads along the contiguous dimension are safe (variant 6)
};

// One matmul, passed by value to every kernel. out is (batch, M, N), row-major.
template <class T>
struct Gemm {
  T* out;
  Operand<T> a, b;
  int M, N, K;
  std::int64_t batch, stride_out;
  bool accumulate;
  bool out_vec4;  // float4 stores into out are safe (variant 6)
};

// (rows, cols) stored row-major, or as its transpose (cols, rows).
template <class T>
Operand<T> operand(const T* data, std::int64_t batch_stride, std::int64_t rows, std::int64_t cols, bool transposed) {
  Operand<T> m;
  m.data = data;
  m.batch_stride = batch_stride;
  m.rows = static_cast<int>(rows);
  m.cols = static_cast<int>(cols);
  m.row_stride = transposed ? 1 : cols;
  m.col_stride = transposed ? rows : 1;
  // A float4 of four neighbours along the contiguous dimension is 16-byte aligned when the
  // matrix starts aligned and every step to another line (the leading dimension) or to
  // another batch is a multiple of four elements. A view's data may be anywhere.
  const std::int64_t leading = m.col_stride == 1 ? m.row_stride : m.col_stride;
  m.vec4 = aligned16(data) && leading % 4 == 0 && batch_stride % 4 == 0;
  return m;
}

template <class T>
Gemm<T> describe(const char* op, T* out, const T* a, const T* b, const MatmulShape& s) {
  BRRR_CHECK(s.batch >= 0 && s.M >= 0 && s.N >= 0 && s.K >= 0, op, ": negative size in a batch of ", s.batch,
             " (", s.M, ", ", s.K, ") @ (", s.K, ", ", s.N, ")");
  BRRR_CHECK(s.M <= INT_MAX && s.N <= INT_MAX && s.K <= INT_MAX, op, ": (", s.M, ", ", s.K, ") @ (", s.K, ", ", s.N,
             ") has a dimension above 2^31 - 1; the kernels index rows and columns with int");
  Gemm<T> g;
  g.out = out;
  g.a = operand(a, s.stride_a, s.M, s.K, s.trans_a);
  g.b = operand(b, s.stride_b, s.K, s.N, s.trans_b);
  g.M = static_cast<int>(s.M);
  g.N = static_cast<int>(s.N);
  g.K = static_cast<int>(s.K);
  g.batch = s.batch;
  g.stride_out = s.stride_out;
  g.accumulate = s.accumulate;
  g.out_vec4 = aligned16(out) && s.N % 4 == 0 && s.stride_out % 4 == 0;
  return g;
}

// The grid for tiles_x by tiles_y output tiles of every matrix of the batch.
inline dim3 grid_of(const char* op, std::int64_t tiles_x, std::int64_t tiles_y, std::int64_t batch) {
  BRRR_CHECK(tiles_x <= INT_MAX && tiles_y <= 65535, op, ": ", tiles_x, " by ", tiles_y,
             " tiles of output; a grid has at most 2147483647 blocks along x and 65535 along y");
  return dim3(static_cast<unsigned>(tiles_x), static_cast<unsigned>(tiles_y),
              static_cast<unsigned>(std::min<std::int64_t>(batch, 65535)));
}

// Matrix z of the batch.
template <class T>
__device__ inline const T* matrix(const Operand<T>& m, std::int64_t z) {
  return m.data + z * m.batch_stride;
}

// Element (r, c) of a matrix of m, or 0 outside it (the padding of an edge tile).
template <class T>
__device__ inline T element_or_zero(const T* base, const Operand<T>& m, int r, int c) {
  return r < m.rows && c < m.cols ? base[r * m.row_stride + c * m.col_stride] : T(0);
}

// The same operand read the other way round: a (M, K) as a^T (K, M).
template <class T>
__device__ inline Operand<T> transposed(Operand<T> m) {
  const std::int64_t stride = m.row_stride;
  m.row_stride = m.col_stride;
  m.col_stride = stride;
  const int rows = m.rows;
  m.rows = m.cols;
  m.cols = rows;
  return m;
}

// out[i, j] = value, or += value when accumulating; nothing outside (M, N).
template <class T>
__device__ inline void store_out(const Gemm<T>& g, T* out, int i, int j, T value) {
  if (i < g.M && j < g.N) {
    T& c = out[static_cast<std::int64_t>(i) * g.N + j];
    c = g.accumulate ? c + value : value;
  }
}

// The (ROWS, COLS) tile of a matrix of m whose top-left element is (r0, c0), copied into
// tile[r * pitch + c], zeros where it hangs over the matrix's edge. Consecutive threads read
// consecutive addresses, so each warp's loads coalesce: along a row when m's rows are
// contiguous (col_stride 1), down a column when m is stored transposed.
template <int ROWS, int COLS, int THREADS, class T>
__device__ inline void load_tile(T* tile, int pitch, const T* base, const Operand<T>& m, int r0, int c0, int tid) {
  if (m.col_stride == 1) {
    for (int e = tid; e < ROWS * COLS; e += THREADS) {
      const int r = e / COLS, c = e % COLS;
      tile[r * pitch + c] = element_or_zero(base, m, r0 + r, c0 + c);
    }
  } else {
    for (int e = tid; e < ROWS * COLS; e += THREADS) {
      const int r = e % ROWS, c = e / ROWS;
      tile[r * pitch + c] = element_or_zero(base, m, r0 + r, c0 + c);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Variant 6's loaders (kernels/cuda/matmul/cuda_cores.cu says why four values a load), which
// variants 7 and 8 copy their float32 tiles with too.

// Four neighbours of a matrix of m along its contiguous dimension, from (r, c): (r, c..c+3)
// when m's rows are contiguous (along_rows), (r..r+3, c) when its columns are. One float4 load
// when all four are inside and m allows it; otherwise four loads, zeros outside.
__device__ inline float4 load4(const float* base, const Operand<float>& m, int r, int c, bool along_rows) {
  if (along_rows) {
    if (m.vec4 && r < m.rows && c + 3 < m.cols)
      return __ldg(reinterpret_cast<const float4*>(base + r * m.row_stride + c));
    return make_float4(element_or_zero(base, m, r, c), element_or_zero(base, m, r, c + 1),
                       element_or_zero(base, m, r, c + 2), element_or_zero(base, m, r, c + 3));
  }
  if (m.vec4 && c < m.cols && r + 3 < m.rows)
    return __ldg(reinterpret_cast<const float4*>(base + c * m.col_stride + r));
  return make_float4(element_or_zero(base, m, r, c), element_or_zero(base, m, r + 1, c),
                     element_or_zero(base, m, r + 2, c), element_or_zero(base, m, r + 3, c));
}

// load_tile with four values per load. ROWS, COLS, pitch, r0 and c0 are multiples of 4 and
// tile is 16-byte aligned.
template <int ROWS, int COLS, int THREADS>
__device__ inline void load_tile4(float* tile, int pitch, const float* base, const Operand<float>& m, int r0, int c0,
                                  int tid) {
  if (m.col_stride == 1) {  // rows contiguous: a float4 along a row, stored as one
    for (int e = tid; e < ROWS * COLS / 4; e += THREADS) {
      const int r = e / (COLS / 4), c = 4 * (e % (COLS / 4));
      *reinterpret_cast<float4*>(&tile[r * pitch + c]) = load4(base, m, r0 + r, c0 + c, true);
    }
  } else {  // columns contiguous: a float4 down a column, stored as four values
    for (int e = tid; e < ROWS * COLS / 4; e += THREADS) {
      const int r = 4 * (e % (ROWS / 4)), c = e / (ROWS / 4);
      const float4 v = load4(base, m, r0 + r, c0 + c, false);
      tile[r * pitch + c] = v.x;
      tile[(r + 1) * pitch + c] = v.y;
      tile[(r + 2) * pitch + c] = v.z;
      tile[(r + 3) * pitch + c] = v.w;
    }
  }
}

// out[i, j..j+3] = v (or += v), as one float4 where allowed and inside; j is a multiple of 4.
__device__ inline void store_out4(const Gemm<float>& g, float* out, int i, int j, float4 v) {
  if (i >= g.M) return;
  if (g.out_vec4 && j + 3 < g.N) {
    float4* p = reinterpret_cast<float4*>(out + static_cast<std::int64_t>(i) * g.N + j);
    if (g.accumulate) {
      const float4 old = *p;
      v = make_float4(old.x + v.x, old.y + v.y, old.z + v.z, old.w + v.w);
    }
    *p = v;
    return;
  }
  store_out(g, out, i, j, v.x);
  store_out(g, out, i, j + 1, v.y);
  store_out(g, out, i, j + 2, v.z);
  store_out(g, out, i, j + 3, v.w);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
