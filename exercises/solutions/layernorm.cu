// exercises/solutions/layernorm.cu: the reference solution of exercises ex13.1 and ex13.2
// (exercises/student/layernorm.cu; chapter 13), registered as variant "solution".
// Plain on purpose: one block per row, three passes over the row for the forward; for the
// backward one block per row for dx and one thread per column for dweight and dbias (no
// atomics, so the same bits every run). kernels/cuda/layernorm.cu goes further.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

constexpr int kRowBlock = 128;      // threads per row: a multiple of 32 (block_sum)
constexpr int kMaxRowBlocks = 65535;  // rows beyond this many blocks: a loop over rows

// x, out (N, C); mean, rstd (N). The row loop's bounds are the same for every thread of a
// block, so all of them reach block_sum's barriers.
__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* x, const float* weight,
                                         const float* bias, std::int64_t N, std::int64_t C, float eps) {
  __shared__ float scratch[32];
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* row = x + n * C;
    float sum = 0.0f;
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += row[c];
    const float m = block_sum(sum, scratch) / static_cast<float>(C);
    float squares = 0.0f;
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) squares += (row[c] - m) * (row[c] - m);
    const float r = 1.0f / sqrtf(block_sum(squares, scratch) / static_cast<float>(C) + eps);
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x)
      out[n * C + c] = (row[c] - m) * r * weight[c] + bias[c];
    if (threadIdx.x == 0) mean[n] = m, rstd[n] = r;
  }
}

// dx (N, C), one block per row: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dout * weight.
__global__ void layernorm_backward_dx_kernel(float* dx, const float* dout, const float* x, const float* weight,
                                             const float* mean, const float* rstd, std::int64_t N, std::int64_t C) {
  __shared__ float scratch[32];
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float m = mean[n], r = rstd[n];
    float g_sum = 0.0f, gx_sum = 0.0f;
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float g = dout[n * C + c] * weight[c], xhat = (x[n * C + c] - m) * r;
      g_sum += g;
      gx_sum += g * xhat;
    }
    const float g_mean = block_sum(g_sum, scratch) / static_cast<float>(C);
    const float gx_mean = block_sum(gx_sum, scratch) / static_cast<float>(C);
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) {
      const float g = dout[n * C + c] * weight[c], xhat = (x[n * C + c] - m) * r;
      dx[n * C + c] = r * (g - g_mean - xhat * gx_mean);
    }
  }
}

// dweight, dbias (C): one thread per column sums down the N rows, always in the same order.
__global__ void layernorm_backward_dweight_kernel(float* dweight, float* dbias, const float* dout, const float* x,
                                                  const float* mean, const float* rstd, std::int64_t N,
                                                  std::int64_t C) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C; c += stride) {
    float dw = 0.0f, db = 0.0f;
    for (std::int64_t n = 0; n < N; ++n) {
      const float d = dout[n * C + c];
      dw += d * (x[n * C + c] - mean[n]) * rstd[n];
      db += d;
    }
    dweight[c] = dw;
    dbias[c] = db;
  }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* weight, const float* bias,
                       std::int64_t N, std::int64_t C, float eps, Stream stream) {
  if (N == 0 || C == 0) return;
  const int blocks = static_cast<int>(std::min<std::int64_t>(N, kMaxRowBlocks));
  BRRR_LAUNCH(layernorm_forward_kernel, blocks, kRowBlock, 0, stream, out, mean, rstd, x, weight, bias, N, C, eps);
}

void layernorm_backward(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                        const float* weight, const float* mean, const float* rstd, std::int64_t N, std::int64_t C,
                        Stream stream) {
  if (C == 0) return;
  if (N > 0) {
    const int blocks = static_cast<int>(std::min<std::int64_t>(N, kMaxRowBlocks));
    BRRR_LAUNCH(layernorm_backward_dx_kernel, blocks, kRowBlock, 0, stream, dx, dout, x, weight, mean, rstd, N, C);
  }
  BRRR_LAUNCH(layernorm_backward_dweight_kernel, grid_for(C, 128), 128, 0, stream, dweight, dbias, dout, x, mean,
              rstd, N, C);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
