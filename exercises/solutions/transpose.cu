// exercises/solutions/transpose.cu: the reference solution of exercise ex14.2
// (exercises/student/transpose.cu; chapter 14), registered as transpose variant "solution".
// A 32 x 32 tile through shared memory, padded to 33 columns: loads and stores fully
// coalesced, no bank conflicts.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

constexpr int kTile = 32, kRows = 8;  // a block of (32, 8) threads moves a 32 x 32 tile
constexpr std::int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y

// Word (r, c) of the tile is at r * 33 + c, in bank (r + c) % 32: a column's 32 words are in
// 32 different banks, so reading one is a single wavefront. With [kTile][kTile] they would all
// be in bank c: 32 wavefronts.
__global__ void transpose_kernel(float* out, const float* in, std::int64_t M, std::int64_t N) {
  __shared__ float tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  for (std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTile; row0 < M;
       row0 += static_cast<std::int64_t>(gridDim.y) * kTile) {
    // Rows of in: a warp (fixed ty + r) reads 32 consecutive floats.
    for (int r = 0; r < kTile; r += kRows) {
      const std::int64_t i = row0 + ty + r, j = col0 + tx;
      if (i < M && j < N) tile[ty + r][tx] = in[i * N + j];
    }
    __syncthreads();
    // Rows of out (columns of in): out row col0 + ty + r, columns row0 + tx.
    for (int r = 0; r < kTile; r += kRows) {
      const std::int64_t j = col0 + ty + r, i = row0 + tx;
      if (j < N && i < M) out[j * M + i] = tile[tx][ty + r];
    }
    __syncthreads();  // before the next row tile overwrites the tile
  }
}

void transpose(float* out, const float* in, std::int64_t M, std::int64_t N, Stream stream) {
  if (M == 0 || N == 0) return;
  const dim3 grid(static_cast<unsigned>(ceil_div(N, kTile)),
                  static_cast<unsigned>(std::min<std::int64_t>(ceil_div(M, kTile), kMaxGridY)));
  BRRR_LAUNCH(transpose_kernel, grid, dim3(kTile, kRows), 0, stream, out, in, M, N);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
