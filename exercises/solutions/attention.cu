// exercises/solutions/attention.cu: the reference solution of exercise ex15.1
// (exercises/student/attention.cu; chapter 15), registered as attention_forward variant
// "solution". One simple flash kernel: a thread per query row, the keys and values of a tile
// shared by the block, an online softmax, the output row accumulated in place. No tensor
// cores, no register tiling: kernels/cuda/attention/ goes further.
#include <cfloat>
#include <cstdint>

#include "brrr/error.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

constexpr int kBr = 32;           // query rows per block, one per thread
constexpr int kBc = 32;           // keys per tile
constexpr std::int64_t kMaxHs = 128;  // 2 * kBc * hs floats of shared memory: 32 KiB at 128
constexpr int kMaxBlocksY = 65535;

__global__ void flash_attention_forward_kernel(float* out, float* lse, const float* q, const float* k,
                                               const float* v, std::int64_t BH, std::int64_t T, std::int64_t hs,
                                               float scale) {
  BRRR_DYNAMIC_SHARED(float, tile);  // k rows (kBc, hs), then v rows (kBc, hs)
  float* k_tile = tile;
  float* v_tile = tile + kBc * hs;
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.x) * kBr;
  const std::int64_t t = first_row + threadIdx.x;  // this thread's query row
  const bool real = t < T;
  // The last key any row of this block sees: the same for every thread (uniform loop bound).
  const std::int64_t last_key = (first_row + kBr < T ? first_row + kBr : T) - 1;
  for (std::int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const std::int64_t base = bh * T * hs;
    const float* q_row = q + base + t * hs;
    float* o_row = out + base + t * hs;
    if (real)
      for (std::int64_t d = 0; d < hs; ++d) o_row[d] = 0.0f;
    float m = -FLT_MAX, l = 0.0f;
    for (std::int64_t j0 = 0; j0 <= last_key; j0 += kBc) {
      // Thread i loads key row j0 + i and value row j0 + i (zeros past T).
      const std::int64_t j_load = j0 + threadIdx.x;
      for (std::int64_t d = 0; d < hs; ++d) {
        k_tile[threadIdx.x * hs + d] = j_load < T ? k[base + j_load * hs + d] : 0.0f;
        v_tile[threadIdx.x * hs + d] = j_load < T ? v[base + j_load * hs + d] : 0.0f;
      }
      __syncthreads();
      if (real && j0 <= t) {
        const int keys = static_cast<int>(t - j0 + 1 < kBc ? t - j0 + 1 : kBc);  // causal: j <= t
        float s[kBc];
        float tile_max = -FLT_MAX;
        for (int j = 0; j < keys; ++j) {
          float dot = 0.0f;
          for (std::int64_t d = 0; d < hs; ++d) dot += q_row[d] * k_tile[j * hs + d];
          s[j] = dot * scale;
          tile_max = fmaxf(tile_max, s[j]);
        }
        const float m_new = fmaxf(m, tile_max);
        const float correction = expf(m - m_new);  // rescales what was summed under the old max
        l *= correction;
        for (int j = 0; j < keys; ++j) {
          s[j] = expf(s[j] - m_new);
          l += s[j];
        }
        for (std::int64_t d = 0; d < hs; ++d) {
          float acc = o_row[d] * correction;
          for (int j = 0; j < keys; ++j) acc += s[j] * v_tile[j * hs + d];
          o_row[d] = acc;
        }
        m = m_new;
      }
      __syncthreads();  // every thread is done with the tile before the next load
    }
    if (real) {
      for (std::int64_t d = 0; d < hs; ++d) o_row[d] /= l;
      lse[bh * T + t] = m + logf(l);
    }
  }
}

void flash_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionShape& shape, Stream stream) {
  const std::int64_t BH = shape.BH, T = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  BRRR_CHECK(hs <= kMaxHs, "attention_forward (solution): head size ", hs, " is above ", kMaxHs,
             " (the shared memory of one tile of keys and values)");
  if (BH == 0 || T == 0) return;
  const dim3 grid(static_cast<unsigned>(ceil_div(T, kBr)),
                  static_cast<unsigned>(std::min<std::int64_t>(BH, kMaxBlocksY)));
  const std::size_t shared = 2 * kBc * static_cast<std::size_t>(hs) * sizeof(float);
  BRRR_LAUNCH(flash_attention_forward_kernel, grid, kBr, shared, stream, out, lse, q, k, v, BH, T, hs, scale);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
