// tests/exercises/wrong/wrong_kernels.cu: complete but wrong answers to the CUDA exercises (ex12.1-ex16.2
// and ex21.1, chapters 12-16 and 21), one planted mistake each; compiled twice like every .cu file (the GPU and the
// SIMT emulator), registered as variants "wrong_<mistake>" by register_wrong_cuda_kernels().
// test_wrong_answers.cpp grades them: each grader must fail them and say where.
// Plain kernels on purpose: one thread per element, row or output, except where the mistake
// lives in the tiling (ex14.1, ex14.2) or the online softmax (ex15.1).
#include <cfloat>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/matmul/wgmma_ring.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "kernels/registry.h"
#include "kernels/signatures.h"
#include "kernels/transpose.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::wrong {

constexpr int kBlock = 128;
constexpr float kSqrt2OverPi = 0.7978845608028654f, kCubic = 0.044715f;

__device__ inline std::int64_t global_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// ---------------------------------------------------------------------------------------------
// ex12.1: GELU forward without the cubic term: 0.5 x (1 + tanh(sqrt(2/pi) x)).

__global__ void gelu_no_cubic_kernel(float* out, const float* x, std::int64_t n) {
  const std::int64_t i = global_index();
  if (i < n) out[i] = 0.5f * x[i] * (1.0f + tanhf(kSqrt2OverPi * x[i]));
}
void gelu_forward_no_cubic(float* out, const float* x, std::int64_t n, Stream stream) {
  if (n > 0) BRRR_LAUNCH(gelu_no_cubic_kernel, grid_for(n, kBlock), kBlock, 0, stream, out, x, n);
}

// ---------------------------------------------------------------------------------------------
// ex12.2: GELU backward with half the product rule: d/dx [0.5 x (1 + tanh u)] taken as
// 0.5 (1 + tanh u), the x * tanh'(u) u' term forgotten.

__global__ void gelu_backward_half_kernel(float* dx, const float* dout, const float* x, std::int64_t n) {
  const std::int64_t i = global_index();
  if (i < n) {
    const float v = x[i];
    dx[i] = dout[i] * 0.5f * (1.0f + tanhf(kSqrt2OverPi * (v + kCubic * v * v * v)));
  }
}
void gelu_backward_half_product_rule(float* dx, const float* dout, const float* x, std::int64_t n, Stream stream) {
  if (n > 0) BRRR_LAUNCH(gelu_backward_half_kernel, grid_for(n, kBlock), kBlock, 0, stream, dx, dout, x, n);
}

// ---------------------------------------------------------------------------------------------
// ex13.1: LayerNorm forward with the unbiased variance (divided by C - 1, as torch.var does by
// default; LayerNorm divides by C). One thread per row.

__global__ void layernorm_unbiased_kernel(float* out, float* mean, float* rstd, const float* x, const float* weight,
                                          const float* bias, std::int64_t N, std::int64_t C, float eps) {
  const std::int64_t n = global_index();
  if (n >= N) return;
  const float* row = x + n * C;
  float sum = 0.0f;
  for (std::int64_t c = 0; c < C; ++c) sum += row[c];
  const float m = sum / static_cast<float>(C);
  float squares = 0.0f;
  for (std::int64_t c = 0; c < C; ++c) squares += (row[c] - m) * (row[c] - m);
  const float r = 1.0f / sqrtf(squares / static_cast<float>(C - 1) + eps);  // the slip: C - 1
  for (std::int64_t c = 0; c < C; ++c) out[n * C + c] = (row[c] - m) * r * weight[c] + bias[c];
  mean[n] = m, rstd[n] = r;
}
void layernorm_forward_unbiased_variance(float* out, float* mean, float* rstd, const float* x, const float* weight,
                                         const float* bias, std::int64_t N, std::int64_t C, float eps,
                                         Stream stream) {
  if (N > 0 && C > 0)
    BRRR_LAUNCH(layernorm_unbiased_kernel, grid_for(N, kBlock), kBlock, 0, stream, out, mean, rstd, x, weight, bias,
                N, C, eps);
}

// ---------------------------------------------------------------------------------------------
// ex13.2: LayerNorm backward without the mean term: dx = rstd * (g - xhat * mean(g * xhat)),
// the - mean(g) that the mean's dependence on x brings in forgotten. dweight and dbias right.

__global__ void layernorm_backward_no_mean_kernel(float* dx, const float* dout, const float* x, const float* weight,
                                                  const float* mean, const float* rstd, std::int64_t N,
                                                  std::int64_t C) {
  const std::int64_t n = global_index();
  if (n >= N) return;
  const float m = mean[n], r = rstd[n];
  float gx_sum = 0.0f;
  for (std::int64_t c = 0; c < C; ++c) gx_sum += dout[n * C + c] * weight[c] * (x[n * C + c] - m) * r;
  const float gx_mean = gx_sum / static_cast<float>(C);
  for (std::int64_t c = 0; c < C; ++c) {
    const float g = dout[n * C + c] * weight[c], xhat = (x[n * C + c] - m) * r;
    dx[n * C + c] = r * (g - xhat * gx_mean);  // the slip: no - mean(g)
  }
}
__global__ void layernorm_dweight_kernel(float* dweight, float* dbias, const float* dout, const float* x,
                                         const float* mean, const float* rstd, std::int64_t N, std::int64_t C) {
  const std::int64_t c = global_index();
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (std::int64_t n = 0; n < N; ++n) {
    dw += dout[n * C + c] * (x[n * C + c] - mean[n]) * rstd[n];
    db += dout[n * C + c];
  }
  dweight[c] = dw, dbias[c] = db;
}
void layernorm_backward_no_mean_term(float* dx, float* dweight, float* dbias, const float* dout, const float* x,
                                     const float* weight, const float* mean, const float* rstd, std::int64_t N,
                                     std::int64_t C, Stream stream) {
  if (N > 0 && C > 0)
    BRRR_LAUNCH(layernorm_backward_no_mean_kernel, grid_for(N, kBlock), kBlock, 0, stream, dx, dout, x, weight, mean,
                rstd, N, C);
  if (C > 0)
    BRRR_LAUNCH(layernorm_dweight_kernel, grid_for(C, kBlock), kBlock, 0, stream, dweight, dbias, dout, x, mean, rstd,
                N, C);
}

// ---------------------------------------------------------------------------------------------
// ex14.1: the shared-memory tiled matmul, one tile short: the k loop stops before the last,
// partial tile (k0 + kTile <= K), so K = 45 sums only k < 32.

constexpr int kTile = 16;

__global__ void matmul_tile_short_kernel(float* out, const float* a, const float* b, MatmulShape s) {
  __shared__ float as[kTile][kTile], bs[kTile][kTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kTile + tx;
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * kTile + ty;
  for (std::int64_t batch = blockIdx.z; batch < s.batch; batch += gridDim.z) {
    const float* A = a + batch * s.stride_a;
    const float* B = b + batch * s.stride_b;
    float sum = 0.0f;
    for (std::int64_t k0 = 0; k0 + kTile <= s.K; k0 += kTile) {  // the slip: the last partial tile is dropped
      const std::int64_t ka = k0 + tx, kb = k0 + ty;
      as[ty][tx] = row < s.M ? (s.trans_a ? A[ka * s.M + row] : A[row * s.K + ka]) : 0.0f;
      bs[ty][tx] = col < s.N ? (s.trans_b ? B[col * s.K + kb] : B[kb * s.N + col]) : 0.0f;
      __syncthreads();
      for (int kk = 0; kk < kTile; ++kk) sum += as[ty][kk] * bs[kk][tx];
      __syncthreads();
    }
    if (row < s.M && col < s.N) {
      float* C = out + batch * s.stride_out + row * s.N + col;
      *C = s.accumulate ? *C + sum : sum;
    }
  }
}
void matmul_tile_short(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  if (s.batch == 0 || s.M == 0 || s.N == 0) return;
  const dim3 grid(static_cast<unsigned>(ceil_div(s.N, kTile)), static_cast<unsigned>(ceil_div(s.M, kTile)),
                  static_cast<unsigned>(s.batch < 65535 ? s.batch : 65535));
  BRRR_LAUNCH(matmul_tile_short_kernel, grid, dim3(kTile, kTile), 0, stream, out, a, b, s);
}

// ---------------------------------------------------------------------------------------------
// ex14.2: the shared-memory transpose, two slips. wrong_unpadded: the tile is [32][32], so the
// column read of the store loop has all 32 lanes in one bank (right results, 31 bank conflicts
// per request). wrong_whole_tiles: padded, but the grid is N / 32 by M / 32 blocks, rounded
// down, so the ragged edge tiles are never written (right counts at multiples of 32).

constexpr int kTransposeTile = 32, kTransposeRows = 8;

template <int kPad>
__global__ void transpose_tile_kernel(float* out, const float* in, std::int64_t M, std::int64_t N) {
  __shared__ float tile[kTransposeTile][kTransposeTile + kPad];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t col0 = static_cast<std::int64_t>(blockIdx.x) * kTransposeTile;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.y) * kTransposeTile;
  for (int r = 0; r < kTransposeTile; r += kTransposeRows) {
    const std::int64_t i = row0 + ty + r, j = col0 + tx;
    if (i < M && j < N) tile[ty + r][tx] = in[i * N + j];
  }
  __syncthreads();
  for (int r = 0; r < kTransposeTile; r += kTransposeRows) {
    const std::int64_t j = col0 + ty + r, i = row0 + tx;
    if (j < N && i < M) out[j * M + i] = tile[tx][ty + r];
  }
}
template <int kPad, bool kWholeTilesOnly>
void transpose_tile(float* out, const float* in, std::int64_t M, std::int64_t N, Stream stream) {
  if (M == 0 || N == 0) return;
  const std::int64_t tiles_n = kWholeTilesOnly ? N / kTransposeTile : ceil_div(N, kTransposeTile);  // the slip
  const std::int64_t tiles_m = kWholeTilesOnly ? M / kTransposeTile : ceil_div(M, kTransposeTile);
  if (tiles_n == 0 || tiles_m == 0) return;
  const dim3 grid(static_cast<unsigned>(tiles_n), static_cast<unsigned>(tiles_m));
  BRRR_LAUNCH((transpose_tile_kernel<kPad>), grid, dim3(kTransposeTile, kTransposeRows), 0, stream, out, in, M, N);
}

// ---------------------------------------------------------------------------------------------
// ex15.1: flash attention whose online softmax never rescales: when a later tile of keys raises
// the running max, what was summed under the old max is kept as it was. Right while T fits
// one tile (32 keys), wrong past it. One thread per query row.

constexpr int kKeysPerTile = 32;

__global__ void attention_no_rescale_kernel(float* out, float* lse, const float* q, const float* k, const float* v,
                                            std::int64_t BH, std::int64_t T, std::int64_t hs, float scale) {
  const std::int64_t index = global_index();
  if (index >= BH * T) return;
  const std::int64_t bh = index / T, t = index % T, base = bh * T * hs;
  float* o = out + base + t * hs;
  for (std::int64_t d = 0; d < hs; ++d) o[d] = 0.0f;
  float m = -FLT_MAX, l = 0.0f;
  for (std::int64_t j0 = 0; j0 <= t; j0 += kKeysPerTile) {
    const std::int64_t j1 = j0 + kKeysPerTile - 1 < t ? j0 + kKeysPerTile - 1 : t;
    for (std::int64_t j = j0; j <= j1; ++j) {
      float dot = 0.0f;
      for (std::int64_t d = 0; d < hs; ++d) dot += q[base + t * hs + d] * k[base + j * hs + d];
      m = fmaxf(m, dot * scale);
    }
    for (std::int64_t j = j0; j <= j1; ++j) {
      float dot = 0.0f;
      for (std::int64_t d = 0; d < hs; ++d) dot += q[base + t * hs + d] * k[base + j * hs + d];
      const float p = expf(dot * scale - m);  // the slip: l and o were summed under the old m
      l += p;
      for (std::int64_t d = 0; d < hs; ++d) o[d] += p * v[base + j * hs + d];
    }
  }
  for (std::int64_t d = 0; d < hs; ++d) o[d] /= l;
  lse[bh * T + t] = m + logf(l);
}
void attention_forward_no_rescale(float* out, float* lse, const float* q, const float* k, const float* v,
                                  const AttentionShape& shape, Stream stream) {
  const std::int64_t BH = shape.BH, T = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  if (BH > 0 && T > 0)
    BRRR_LAUNCH(attention_no_rescale_kernel, grid_for(BH * T, kBlock), kBlock, 0, stream, out, lse, q, k, v, BH, T,
                hs, scale);
}

// ---------------------------------------------------------------------------------------------
// ex16.1: fused cross-entropy whose gradient forgets dloss: dlogits = softmax - onehot, not
// dloss * (softmax - onehot) (the mean over rows is then missing). One thread per row.

__global__ void cross_entropy_no_dloss_kernel(float* losses, float* dlogits, const float* logits,
                                              const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                              std::int64_t ignore_index, float dloss) {
  const std::int64_t n = global_index();
  if (n >= N) return;
  const float* row = logits + n * V;
  float* grad = dlogits + n * V;
  const std::int64_t target = targets[n];
  if (target == ignore_index) {
    for (std::int64_t c = 0; c < V; ++c) grad[c] = 0.0f;
    losses[n] = 0.0f;
    return;
  }
  float row_max = -FLT_MAX;
  for (std::int64_t c = 0; c < V; ++c) row_max = fmaxf(row_max, row[c]);
  float sum = 0.0f;
  for (std::int64_t c = 0; c < V; ++c) sum += expf(row[c] - row_max);
  const float lse = row_max + logf(sum);
  for (std::int64_t c = 0; c < V; ++c) grad[c] = expf(row[c] - lse) - (c == target ? 1.0f : 0.0f);  // the slip
  losses[n] = lse - row[target];
}
void cross_entropy_fused_no_dloss(float* losses, float* dlogits, const float* logits, const std::int32_t* targets,
                                  std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss,
                                  Stream stream) {
  if (N > 0)
    BRRR_LAUNCH(cross_entropy_no_dloss_kernel, grid_for(N, kBlock), kBlock, 0, stream, losses, dlogits, logits,
                targets, N, V, ignore_index, dloss);
}

// ---------------------------------------------------------------------------------------------
// ex16.2: AdamW without bias correction: m and v used as they are, though both start at 0 and
// underestimate the moments in the first steps (by 1 - beta^t).

__global__ void adamw_no_bias_correction_kernel(float* param, const float* grad, float* m, float* v, std::int64_t n,
                                                float lr, float beta1, float beta2, float eps, float weight_decay) {
  const std::int64_t i = global_index();
  if (i >= n) return;
  const float g = grad[i];
  const float mi = beta1 * m[i] + (1.0f - beta1) * g;
  const float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
  param[i] = param[i] * (1.0f - lr * weight_decay) - lr * mi / (sqrtf(vi) + eps);  // the slip: no 1 - beta^t
  m[i] = mi, v[i] = vi;
}
void adamw_step_no_bias_correction(float* param, const float* grad, float* m, float* v, std::int64_t n,
                                   const AdamWParams& hp, Stream stream) {
  if (n > 0)
    BRRR_LAUNCH(adamw_no_bias_correction_kernel, grid_for(n, kBlock), kBlock, 0, stream, param, grad, m, v, n,
                static_cast<float>(hp.lr), static_cast<float>(hp.beta1), static_cast<float>(hp.beta2),
                static_cast<float>(hp.eps), static_cast<float>(hp.weight_decay));
}

// ---------------------------------------------------------------------------------------------
// ex21.1: the TMA ring's producer, twice wrong (emulator only: its grader runs there always, so
// the GPU copies would be compiled for nothing).
#if BRRR_EMULATOR
//
// ex21.1's two wrong producers. NoEmptyWait never waits for the consumers to
// release a stage, so it refills stage 0 while their wgmmas may still read it; WrongParity waits
// for the lap's own phase instead of the one before, so its first wait never ends.

template <bool kWaitEmpty, unsigned kParityFlip>
struct RingProducer {
  template <bool A_MN, bool B_MN>
  __device__ static void fill(const wgmma_ring::Ring& ring, const wgmma_ring::TileWalk& walk,
                              const brrr::simt::TensorMap* a_map, const brrr::simt::TensorMap* b_map) {
    using namespace wgmma_ring;
    int it = 0;
    for (std::int64_t tile = walk.first; tile < walk.count; tile += walk.step) {
      const Tile t = walk.at(tile);
      for (int kt = 0; kt < walk.k_tiles; ++kt, ++it) {
        const int s = it % kStages, lap = it / kStages;
        if (kWaitEmpty) mbarrier_wait_parity(&ring.empty[s], static_cast<unsigned>(lap & 1) ^ kParityFlip);
        mbarrier_arrive_expect_tx(&ring.full[s], kStageBytes);
        copy_a_tile<A_MN>(ring.a_tile(s), a_map, t, kt * kBK, &ring.full[s]);
        copy_b_tile<B_MN>(ring.b_tile(s), b_map, t, kt * kBK, &ring.full[s]);
      }
    }
  }
};

template <bool kWaitEmpty, unsigned kParityFlip>
void tma_ring_matmul(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape, Stream stream) {
  wgmma_ring::gemm<RingProducer<kWaitEmpty, kParityFlip>>("tma_ring_matmul (ex21.1)", out, a, b, shape,
                                                          wgmma_ring::Epilogue{nullptr, nullptr}, stream);
}
#endif  // BRRR_EMULATOR

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::wrong

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

void register_wrong_cuda_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  add(op::gelu_forward<float>, kCuda, "wrong_no_cubic", &wrong::gelu_forward_no_cubic, -30);             // ex12.1
  add(op::gelu_backward<float>, kCuda, "wrong_half_product_rule", &wrong::gelu_backward_half_product_rule,
      -30);                                                                                                // ex12.2
  add(op::layernorm_forward<float>, kCuda, "wrong_unbiased_variance", &wrong::layernorm_forward_unbiased_variance,
      -30);                                                                                                // ex13.1
  add(op::layernorm_backward<float>, kCuda, "wrong_no_mean_term", &wrong::layernorm_backward_no_mean_term,
      -30);                                                                                                // ex13.2
  add(op::matmul<float>, kCuda, "wrong_tile_short", &wrong::matmul_tile_short, -30);                    // ex14.1
  add(op::transpose<float>, kCuda, "wrong_unpadded", &wrong::transpose_tile<0, false>, -30);               // ex14.2
  add(op::transpose<float>, kCuda, "wrong_whole_tiles", &wrong::transpose_tile<1, true>, -30);            // ex14.2
  add(op::attention_forward<float>, kCuda, "wrong_no_rescale", &wrong::attention_forward_no_rescale, -30);  // ex15.1
  add(op::cross_entropy_fused<float>, kCuda, "wrong_no_dloss", &wrong::cross_entropy_fused_no_dloss, -30);  // ex16.1
  add(op::adamw_step<float>, kCuda, "wrong_no_bias_correction", &wrong::adamw_step_no_bias_correction,
      -30);                                                                                                // ex16.2
#if BRRR_EMULATOR
  add(op::matmul_on_bf16, kCuda, "wrong_no_empty_wait", &wrong::tma_ring_matmul<false, 1>, -30);        // ex21.1
  add(op::matmul_on_bf16, kCuda, "wrong_parity", &wrong::tma_ring_matmul<true, 0>, -30);                // ex21.1
#endif
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
