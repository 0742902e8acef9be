// exercises/solutions/matmul.cu: the reference solution of exercise ex14.1
// (exercises/student/matmul.cu; chapter 14), registered as matmul variant "solution".
// The textbook shared-memory tiling, with the whole MatmulShape contract: transposes, batch
// strides (0 broadcasts), accumulate, ragged sizes. kernels/cuda/matmul/ goes further.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

constexpr int kTile = 16;
constexpr int kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y and gridDim.z

// out (batch, M, N) = a @ b; a block of (kTile, kTile) threads computes one kTile x kTile tile
// of one batch's out. Every thread runs the same k0 loop, so all reach each __syncthreads.
__global__ void matmul_shared_kernel(float* out, const float* a, const float* b, MatmulShape s) {
  __shared__ float as[kTile][kTile], bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kTile + tx;
  const std::int64_t row_base = static_cast<std::int64_t>(blockIdx.y) * kTile;
  for (std::int64_t row_tile = row_base; row_tile < s.M; row_tile += static_cast<std::int64_t>(gridDim.y) * kTile) {
    const std::int64_t row = row_tile + ty;
    for (std::int64_t batch = blockIdx.z; batch < s.batch; batch += gridDim.z) {
      const float* A = a + batch * s.stride_a;
      const float* B = b + batch * s.stride_b;
      float sum = 0.0f;
      for (std::int64_t k0 = 0; k0 < s.K; k0 += kTile) {
        // as[ty][tx] = A(row, k0 + tx); bs[ty][tx] = B(k0 + ty, col); zeros outside.
        const std::int64_t ka = k0 + tx, kb = k0 + ty;
        as[ty][tx] = row < s.M && ka < s.K ? (s.trans_a ? A[ka * s.M + row] : A[row * s.K + ka]) : 0.0f;
        bs[ty][tx] = kb < s.K && col < s.N ? (s.trans_b ? B[col * s.K + kb] : B[kb * s.N + col]) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < kTile; ++kk) sum += as[ty][kk] * bs[kk][tx];
        __syncthreads();  // before the next iteration overwrites the tiles
      }
      if (row < s.M && col < s.N) {
        float* C = out + batch * s.stride_out + row * s.N + col;
        *C = s.accumulate ? *C + sum : sum;
      }
    }
  }
}

void matmul_shared(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream) {
  if (shape.batch == 0 || shape.M == 0 || shape.N == 0) return;
  const dim3 grid(static_cast<unsigned>(ceil_div(shape.N, kTile)),
                  static_cast<unsigned>(std::min<std::int64_t>(ceil_div(shape.M, kTile), kMaxGridYZ)),
                  static_cast<unsigned>(std::min<std::int64_t>(shape.batch, kMaxGridYZ)));
  BRRR_LAUNCH(matmul_shared_kernel, grid, dim3(kTile, kTile), 0, stream, out, a, b, shape);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
