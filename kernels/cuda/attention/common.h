// kernels/cuda/attention/common.h: what the attention variants of every generation share: the
// checks of a call's sizes and head size, the query and key tile of 64 rows, and the
// backward's first pass (D = dout . out for every row) of the tensor-core variants.
// Chapter 15 (flash attention). Read before: kernels/cuda/attention/attention.h.
// Read next: kernels/cuda/attention/cuda_cores.cu.
//
// Included by each file of the folder, so it is compiled twice like them (simt.h): once for the
// GPU, once for the emulator.
#pragma once
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

inline void check_sizes(const char* op, std::int64_t BH, std::int64_t T_len, std::int64_t hs) {
  BRRR_CHECK(BH >= 0 && T_len >= 0 && hs >= 0, op, ": sizes must not be negative, got BH = ", BH, ", T = ", T_len,
             ", hs = ", hs);
  BRRR_CHECK(T_len * hs <= INT32_MAX, op, ": one head of (T, hs) = (", T_len, ", ", hs,
             ") has more than 2^31 elements");
}

// Query and key rows per tile: variant 2's (256 threads as 16 x 16, 4 rows each) and the
// tensor-core variants' (4 warps of 16 query rows).
constexpr int kTile = 64;

// Where head bh's rows are in memory: row t at (bh / heads) T ld + (bh % heads) hs + t ld. The
// ops' (BH, T, hs) arrays are {1, hs}; the GPT's packed qkv (B, T, 3 C), read from its q, k or v
// columns, is {heads, 3 C}, and out (B, T, C) is {heads, C} (attention_forward_qkv, chapter 18).
struct HeadLayout {
  std::int64_t heads = 1, ld = 0;
  __device__ __host__ std::int64_t head(std::int64_t bh, std::int64_t T_len, std::int64_t hs) const {
    return (bh / heads) * T_len * ld + (bh % heads) * hs;
  }
};
inline HeadLayout contiguous_heads(std::int64_t hs) { return HeadLayout{1, hs}; }

// The padded head size a variant-2 kernel is compiled for (0: hs is too large).
inline int padded_head_size(std::int64_t hs) { return hs <= 32 ? 32 : hs <= 64 ? 64 : hs <= 128 ? 128 : 0; }

// Refuses a head size above what a tiled variant's kernels are compiled for (`most`).
inline void check_head_size(const char* op, std::int64_t hs, std::int64_t most) {
  BRRR_CHECK(hs <= most, op, ": head size ", hs, " is more than its tiles hold (", most,
             "); the registry passes this variant over there, and runs another");
}

// The backward's first pass, shared by the tensor-core variants (mma_sync.cu, wgmma.cu).
// as_float's In: float (variant 3), or __nv_bfloat16 (variant 4), for which rounding to bf16 is exact.
__device__ inline float as_float(float x) { return x; }
__device__ inline float as_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// D_i = dout_i . out_i for every row of every head, computed once before the two kernels from
// dout and out rounded to bf16, as the tensor cores see dout (and as a bf16 forward would store
// out): then dS = P (dP - D) is exactly 0 where it should be (a row with one key: dP = D). A warp
// per row, its lanes along the row (coalesced), summed by a fixed butterfly (deterministic): the
// shape of attention_row_dot_kernel (variants 1 and 2), here with both factors rounded, inputs
// of either type, and float sums. Each kernel then reads D_i beside lse_i. (It used to be computed inside the tiles, by a
// thread per row walking its row: the dk, dv kernel redid it for every key tile that sees the
// row, O(T^2 / 64) rows in all, each lane reading a different row: 32 sectors per request.)
// With `rounded` (variant 3 on float32 data), the same pass also writes q, k, v and dout
// rounded to bf16 into rounded[0 .. 4 rows hs), in that order, for variant 4's kernels.
// dout and out are where `io` says (heads of T_len rows); q, k, v (read for `rounded` only) are
// (rows, hs) contiguous.
template <class In>
__global__ void attention_backward_prepare_kernel(float* D, __nv_bfloat16* rounded, const In* q, const In* k,
                                                  const In* v, const In* dout, const In* out, std::int64_t rows,
                                                  int hs, std::int64_t T_len, HeadLayout io) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together: the shuffles below stay full
  const std::int64_t n = rows * hs;
  const std::int64_t io_row = io.head(row / T_len, T_len, hs) + (row % T_len) * io.ld;
  float sum = 0.0f;
  for (int d = threadIdx.x % 32; d < hs; d += 32) {
    const std::int64_t at = row * hs + d;
    const __nv_bfloat16 g = __float2bfloat16_rn(as_float(dout[io_row + d]));
    sum += __bfloat162float(g) * __bfloat162float(__float2bfloat16_rn(as_float(out[io_row + d])));
    if (rounded) {
      rounded[at] = __float2bfloat16_rn(as_float(q[at]));
      rounded[n + at] = __float2bfloat16_rn(as_float(k[at]));
      rounded[2 * n + at] = __float2bfloat16_rn(as_float(v[at]));
      rounded[3 * n + at] = g;
    }
  }
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) D[row] = sum;
}

// io: where dout and out are, heads of T_len rows; by default (rows, hs) contiguous.
template <class In>
void prepare_backward(float* D, __nv_bfloat16* rounded, const In* q, const In* k, const In* v, const In* dout,
                      const In* out, std::int64_t rows, std::int64_t hs, Stream stream, std::int64_t T_len = 0,
                      HeadLayout io = {}) {
  const int block = 256;
  if (io.ld == 0) io = contiguous_heads(hs), T_len = rows > 0 ? rows : 1;
  BRRR_LAUNCH((attention_backward_prepare_kernel<In>), grid_for(rows, block / 32), block, 0, stream, D, rounded, q,
              k, v, dout, out, rows, static_cast<int>(hs), T_len, io);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
