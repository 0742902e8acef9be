// exercises/solutions/matmul_tiled.cpp: the reference solution of exercise ex04.1, a
// cache-tiled CPU matmul (chapter 04). The student's file is exercises/student/matmul_tiled.cpp.
//
// Each task owns one kTile x kTile tile of C and walks K in blocks of kBlockK: the tile of C
// (16 KiB in float) and one block row of B stay in cache while a block of A streams past.
// The inner loop runs along a row of B and of C with stride 1, so it vectorizes. A
// transposed B is copied into a row-major panel first, so that loop stays stride 1.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "exercises/solutions/solutions.h"

namespace brrr::solution {

template <class T>
void matmul_tiled(T* out, const T* a, const T* b, const kernels::MatmulShape& s, kernels::Stream) {
  const std::int64_t M = s.M, N = s.N, K = s.K;
  if (M == 0 || N == 0) return;
  constexpr std::int64_t kTile = 64, kBlockK = 256;
  const std::int64_t tiles_m = (M + kTile - 1) / kTile, tiles_n = (N + kTile - 1) / kTile;
  kernels::cpu::parallel_for(s.batch * tiles_m * tiles_n, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<T> packed;  // a (kb, cols) row-major piece of a transposed B
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t batch = task / (tiles_m * tiles_n);
      const std::int64_t i0 = (task / tiles_n) % tiles_m * kTile, j0 = task % tiles_n * kTile;
      const std::int64_t rows = std::min(kTile, M - i0), cols = std::min(kTile, N - j0);
      const T* A = a + batch * s.stride_a;
      const T* B = b + batch * s.stride_b;
      T* C = out + batch * s.stride_out;
      if (!s.accumulate)
        for (std::int64_t i = 0; i < rows; ++i) std::fill(C + (i0 + i) * N + j0, C + (i0 + i) * N + j0 + cols, T(0));
      for (std::int64_t k0 = 0; k0 < K; k0 += kBlockK) {
        const std::int64_t kb = std::min(kBlockK, K - k0);
        const T* panel = B + k0 * N + j0;  // B[k0 + k, j0 + j] at panel[k * ld + j]
        std::int64_t ld = N;
        if (s.trans_b) {
          packed.resize(kb * cols);
          for (std::int64_t j = 0; j < cols; ++j)
            for (std::int64_t k = 0; k < kb; ++k) packed[k * cols + j] = B[(j0 + j) * K + k0 + k];
          panel = packed.data();
          ld = cols;
        }
        for (std::int64_t i = 0; i < rows; ++i) {
          T* c = C + (i0 + i) * N + j0;
          for (std::int64_t k = 0; k < kb; ++k) {
            const T av = s.trans_a ? A[(k0 + k) * M + i0 + i] : A[(i0 + i) * K + k0 + k];
            const T* brow = panel + k * ld;
            for (std::int64_t j = 0; j < cols; ++j) c[j] += av * brow[j];
          }
        }
      }
    }
  });
}

template void matmul_tiled<float>(float*, const float*, const float*, const kernels::MatmulShape&, kernels::Stream);
template void matmul_tiled<double>(double*, const double*, const double*, const kernels::MatmulShape&,
                                   kernels::Stream);

}  // namespace brrr::solution
