// exercises/solutions/crossentropy.cu: the reference solution of exercise ex16.1
// (exercises/student/crossentropy.cu; chapter 16), registered as cross_entropy_fused variant
// "solution". One block per row, three passes over it (max, sum of exps, gradient);
// kernels/cuda/crossentropy.cu goes further.
#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

constexpr int kBlock = 256;
constexpr int kMaxBlocks = 65535;

// The max over a block (blockDim.x a multiple of 32), in every thread; block_sum with max.
__device__ float block_max(float value, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  value = warp_max(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  return warp_max(lane < warps ? scratch[lane] : -FLT_MAX);
}

__global__ void cross_entropy_fused_kernel(float* losses, float* dlogits, const float* logits,
                                           const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                           std::int64_t ignore_index, float dloss) {
  __shared__ float scratch[32];
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const float* row = logits + n * V;
    float* grad = dlogits + n * V;
    const std::int64_t target = targets[n];
    if (target == ignore_index) {  // the same for every thread of the block: no barrier skipped
      for (std::int64_t c = threadIdx.x; c < V; c += blockDim.x) grad[c] = 0.0f;
      if (threadIdx.x == 0) losses[n] = 0.0f;
      continue;
    }
    float local_max = -FLT_MAX;
    for (std::int64_t c = threadIdx.x; c < V; c += blockDim.x) local_max = fmaxf(local_max, row[c]);
    const float row_max = block_max(local_max, scratch);
    float local_sum = 0.0f;
    for (std::int64_t c = threadIdx.x; c < V; c += blockDim.x) local_sum += expf(row[c] - row_max);
    const float lse = row_max + logf(block_sum(local_sum, scratch));
    for (std::int64_t c = threadIdx.x; c < V; c += blockDim.x)
      grad[c] = dloss * (expf(row[c] - lse) - (c == target ? 1.0f : 0.0f));
    if (threadIdx.x == 0) losses[n] = lse - row[target];
  }
}

void cross_entropy_fused(float* losses, float* dlogits, const float* logits, const std::int32_t* targets,
                         std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream stream) {
  if (N == 0) return;
  const int blocks = static_cast<int>(std::min<std::int64_t>(N, kMaxBlocks));
  BRRR_LAUNCH(cross_entropy_fused_kernel, blocks, kBlock, 0, stream, losses, dlogits, logits, targets, N, V,
              ignore_index, dloss);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
