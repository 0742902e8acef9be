// kernels/cuda/residual_layernorm.cu: LayerNorm's variant 5, the residual add and LayerNorm of
// a transformer block on bf16 data, forward and backward, each passing over its rows once.
// Chapter 18 (mixed precision). Read before: kernels/cuda/layernorm.cu (variants 1 to 4: the
// formulas, the warp per row, the row in registers), kernels/cpu/nn_bf16.cpp (the CPU's kernels).
// Read next: kernels/cuda/crossentropy.cu's variant 5 (the classifier on bf16 data).
//
// A GPT-2 block reads its residual stream twice: x = x + attn(ln_1(x)), x = x + mlp(ln_2(x)).
// Fused, each add meets the LayerNorm after it: sum = x + residual, out = layernorm(sum). In a
// step whose activations are bf16 in memory (llm.c's layout) the rows are 2 bytes a value, and
// the least traffic of the forward is a read of x and residual and a write of sum and out: 8
// bytes a value, with weight, bias (C) and the float32 mean and rstd (N) beside it. Variant 3
// of layernorm.cu holds the row in registers so that it is read once; this file does the same
// with 16-byte loads of 8 bf16 values, and also keeps weight and bias from being read again for
// every row: a block stages them in shared memory, as float32, once for its kRowsPerBlock rows,
// in the order the lanes read them (staged_at, below).
//
// The backward is where the residual stream's gradient meets LayerNorm's. sum feeds two users,
// the LayerNorm and the next residual add, so its gradient is the sum of two: dres, which the
// next block's add passes down unchanged, and LayerNorm's dx from dout. Unfused that is a
// LayerNorm backward writing dx, then an add reading dx and dres and writing their sum: two
// more passes over (N, C). Here the backward reads dres while it writes dx, and writes the
// sum: dsum = dres + rstd (g - mean(g) - norm mean(g norm)), g = dout weight, norm = (sum -
// mean) rstd (the formula of chapter 13). The float32 mean and rstd of the forward are used as
// they are: nothing is recomputed, unlike variant 4, whose statistics are stored in bf16.
// dweight and dbias are column sums over rows: each warp keeps its columns in registers, the
// block's warps add theirs in warp order into shared memory, each block writes one partial row,
// and a second kernel adds the partial rows in block order (deterministic: DESIGN.md,
// "Reproducibility"). That partial row is the price of the column sums: 2 C floats a block
// written and read back, so a block takes kBackwardRowsPerBlock rows (128: 1/32 more writes).
//
// Rows whose C is not a multiple of 8, pointers off a 16-byte boundary, or rows too long for
// the registers (C > 2048 forward, C > 1024 backward) take plain loops, a warp a row, that read
// the row again (the forward reads back the sum it wrote; the backward walks the columns a
// thread a column, as variant 4). Untimed on a GPU (written after the H200 run).
#include "kernels/cuda/residual_layernorm.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

constexpr int kWarps = 8;                   // a block: 8 warps, a row a warp at a time
constexpr int kRowsPerBlock = 32;           // forward: 4 rows a warp, weight and bias staged once
constexpr int kBackwardRowsPerBlock = 128;  // backward: 16 rows a warp, one partial row a block

// 8 bf16 values from 16 bytes (word w holds values 2w, low half, and 2w + 1, high half), widened
// exactly; and 8 float32 values rounded to nearest even into 16 bytes.
static __device__ __forceinline__ void load8(float* v, const brrr::bf16* p) {
  const int4 q = *reinterpret_cast<const int4*>(p);
  const int words[4] = {q.x, q.y, q.z, q.w};
  for (int w = 0; w < 4; ++w) {
    v[2 * w] = __uint_as_float(static_cast<unsigned>(words[w]) << 16);
    v[2 * w + 1] = __uint_as_float(static_cast<unsigned>(words[w]) & 0xffff0000u);
  }
}
static __device__ __forceinline__ void store8(brrr::bf16* p, const float* v) {
  int words[4];
  for (int w = 0; w < 4; ++w)
    words[w] = static_cast<int>(static_cast<unsigned>(bf16_of(v[2 * w]).bits) |
                                (static_cast<unsigned>(bf16_of(v[2 * w + 1]).bits) << 16));
  *reinterpret_cast<int4*>(p) = make_int4(words[0], words[1], words[2], words[3]);
}

// weight (and bias) staged in shared memory as float32, laid out for the lanes: lane l's 8
// values of its vector i (columns 8 (l + 32 i) .. + 7) are the float4s (2 i) 32 + l and (2 i +
// 1) 32 + l, so each float4 load of a warp reads 512 consecutive bytes, free of bank conflicts
// (in column order, lane l's 8 floats would share banks with lanes l + 4, l + 8, ...).
// staged_at(c) is column c's place, in floats; an array takes 256 kVecs floats.
static __device__ __forceinline__ int staged_at(int c) {
  return ((2 * (c / 256) + c % 8 / 4) * 32 + c / 8 % 32) * 4 + c % 4;
}
static __device__ __forceinline__ void staged8(float* out, const float4* staged, int i, int lane) {
  const float4 a = staged[2 * i * 32 + lane], b = staged[(2 * i + 1) * 32 + lane];
  const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  for (int j = 0; j < 8; ++j) out[j] = v[j];
}

static int blocks_for(const char* op, std::int64_t N, int rows_per_block) {
  BRRR_CHECK(ceil_div(N, rows_per_block) <= INT_MAX, op, ": ", N, " rows need more than 2^31 - 1 blocks");
  return static_cast<int>(ceil_div(N, rows_per_block));
}

// =============================================================================================
// Forward.
//
// Lane l of a warp holds values 8 (l + 32 i) .. + 7 of its row for i < kVecs (C <= 256 kVecs),
// as variant 3 holds float4s: x and residual are read once, sum is rounded to bf16 and written,
// and the statistics are taken from the rounded values in registers (two passes over registers:
// the mean, then the squared deviations), so out normalizes exactly the sum that is stored.

template <int kVecs>
__global__ void __launch_bounds__(32 * kWarps)
    residual_layernorm_forward_kernel(brrr::bf16* sum, brrr::bf16* out, float* mean, float* rstd,
                                      const brrr::bf16* x, const brrr::bf16* residual, const brrr::bf16* weight,
                                      const brrr::bf16* bias, std::int64_t N, int C, float eps) {
  BRRR_DYNAMIC_SHARED(float4, staged);  // weight, then bias: 256 kVecs floats each (staged_at)
  float* staged_floats = reinterpret_cast<float*>(staged);
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    staged_floats[staged_at(c)] = float_of(weight[c]);
    staged_floats[256 * kVecs + staged_at(c)] = bias ? float_of(bias[c]) : 0.0f;
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t last = first + kRowsPerBlock < N ? first + kRowsPerBlock : N;
  for (std::int64_t n = first + warp; n < last; n += kWarps) {
    const std::int64_t row = n * C;
    float v[kVecs][8] = {};
    float s = 0.0f;
    for (int i = 0; i < kVecs; ++i) {
      const int c = 8 * (lane + 32 * i);
      if (c < C) {
        float r[8] = {};
        load8(v[i], x + row + c);
        load8(r, residual + row + c);
        for (int j = 0; j < 8; ++j) v[i][j] = float_of(bf16_of(v[i][j] + r[j]));  // as stored
        store8(sum + row + c, v[i]);
        for (int j = 0; j < 8; ++j) s += v[i][j];
      }
    }
    const float m = warp_sum(s) / static_cast<float>(C);
    float squares = 0.0f;
    for (int i = 0; i < kVecs; ++i)
      if (8 * (lane + 32 * i) < C)
        for (int j = 0; j < 8; ++j) squares += (v[i][j] - m) * (v[i][j] - m);
    const float r = 1.0f / sqrt_of(warp_sum(squares) / static_cast<float>(C) + eps);
    for (int i = 0; i < kVecs; ++i) {
      const int c = 8 * (lane + 32 * i);
      if (c < C) {
        float w[8], b[8], o[8];
        staged8(w, staged, i, lane);
        staged8(b, staged + 64 * kVecs, i, lane);
        for (int j = 0; j < 8; ++j) o[j] = (v[i][j] - m) * r * w[j] + b[j];
        store8(out + row + c, o);
      }
    }
    if (lane == 0) {
      mean[n] = m;
      rstd[n] = r;
    }
  }
}

// Any C and alignment: a warp a row, one value a lane at a time; the sum is read back (each
// lane reads only what it wrote) for the variance and the output.
__global__ void residual_layernorm_forward_scalar_kernel(brrr::bf16* sum, brrr::bf16* out, float* mean, float* rstd,
                                                         const brrr::bf16* x, const brrr::bf16* residual,
                                                         const brrr::bf16* weight, const brrr::bf16* bias,
                                                         std::int64_t N, std::int64_t C, float eps) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t last = first + kRowsPerBlock < N ? first + kRowsPerBlock : N;
  for (std::int64_t n = first + warp; n < last; n += kWarps) {
    brrr::bf16* srow = sum + n * C;
    float s = 0.0f;
    for (std::int64_t c = lane; c < C; c += 32) {
      const brrr::bf16 stored = bf16_of(float_of(x[n * C + c]) + float_of(residual[n * C + c]));
      srow[c] = stored;
      s += float_of(stored);
    }
    const float m = warp_sum(s) / static_cast<float>(C);
    float squares = 0.0f;
    for (std::int64_t c = lane; c < C; c += 32) squares += (float_of(srow[c]) - m) * (float_of(srow[c]) - m);
    const float r = 1.0f / sqrt_of(warp_sum(squares) / static_cast<float>(C) + eps);
    for (std::int64_t c = lane; c < C; c += 32)
      out[n * C + c] = bf16_of((float_of(srow[c]) - m) * r * float_of(weight[c]) + (bias ? float_of(bias[c]) : 0.0f));
    if (lane == 0) {
      mean[n] = m;
      rstd[n] = r;
    }
  }
}

void residual_layernorm_forward_bf16(brrr::bf16* sum, brrr::bf16* out, float* mean, float* rstd, const brrr::bf16* x,
                                     const brrr::bf16* residual, const brrr::bf16* weight, const brrr::bf16* bias,
                                     std::int64_t N, std::int64_t C, float eps, Stream stream) {
  if (N == 0 || C == 0) return;
  const int blocks = blocks_for("residual_layernorm_forward", N, kRowsPerBlock), threads = 32 * kWarps;
  const bool aligned = aligned16(sum) && aligned16(out) && aligned16(x) && aligned16(residual);
  const int vecs = static_cast<int>(ceil_div(C, 256));
  if (C % 8 != 0 || vecs > 8 || !aligned) {
    BRRR_LAUNCH(residual_layernorm_forward_scalar_kernel, blocks, threads, 0, stream, sum, out, mean, rstd, x,
                residual, weight, bias, N, C, eps);
    return;
  }
  const auto shared = [](int k) { return 2 * 256 * static_cast<std::size_t>(k) * sizeof(float); };
  const int c = static_cast<int>(C);
  if (vecs <= 1)
    BRRR_LAUNCH(residual_layernorm_forward_kernel<1>, blocks, threads, shared(1), stream, sum, out, mean, rstd, x,
                residual, weight, bias, N, c, eps);
  else if (vecs <= 2)
    BRRR_LAUNCH(residual_layernorm_forward_kernel<2>, blocks, threads, shared(2), stream, sum, out, mean, rstd, x,
                residual, weight, bias, N, c, eps);
  else if (vecs <= 3)
    BRRR_LAUNCH(residual_layernorm_forward_kernel<3>, blocks, threads, shared(3), stream, sum, out, mean, rstd, x,
                residual, weight, bias, N, c, eps);
  else if (vecs <= 4)
    BRRR_LAUNCH(residual_layernorm_forward_kernel<4>, blocks, threads, shared(4), stream, sum, out, mean, rstd, x,
                residual, weight, bias, N, c, eps);
  else
    BRRR_LAUNCH(residual_layernorm_forward_kernel<8>, blocks, threads, shared(8), stream, sum, out, mean, rstd, x,
                residual, weight, bias, N, c, eps);
}

// =============================================================================================
// Backward.
//
// Per row, lane l holds the same values as in the forward: norm and g = dout weight for its
// 8 kVecs columns, and adds dout norm and dout into its column registers dw, db. dres is read
// only in the last loop, where dsum is written, so its registers are not held across the two
// row reductions.

template <int kVecs>
__global__ void __launch_bounds__(32 * kWarps)
    residual_layernorm_backward_kernel(brrr::bf16* dsum, float* partial, const brrr::bf16* dout,
                                       const brrr::bf16* dres, const brrr::bf16* sum, const brrr::bf16* weight,
                                       const float* mean, const float* rstd, std::int64_t N, int C) {
  BRRR_DYNAMIC_SHARED(float4, staged);  // weight (256 kVecs floats, staged_at), then dweight, dbias (2 C)
  float* columns = reinterpret_cast<float*>(staged) + 256 * kVecs;
  for (int c = threadIdx.x; c < C; c += blockDim.x)
    reinterpret_cast<float*>(staged)[staged_at(c)] = float_of(weight[c]);
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kBackwardRowsPerBlock;
  const std::int64_t last = first + kBackwardRowsPerBlock < N ? first + kBackwardRowsPerBlock : N;
  float dw[kVecs][8] = {}, db[kVecs][8] = {};
  for (std::int64_t n = first + warp; n < last; n += kWarps) {
    const std::int64_t row = n * C;
    const float m = mean[n], r = rstd[n];
    float norm[kVecs][8] = {}, g[kVecs][8] = {};
    float sum_g = 0.0f, sum_gn = 0.0f;
    for (int i = 0; i < kVecs; ++i) {
      const int c = 8 * (lane + 32 * i);
      if (c >= C) continue;
      float d[8] = {}, w[8];
      load8(d, dout + row + c);
      load8(norm[i], sum + row + c);
      staged8(w, staged, i, lane);
      for (int j = 0; j < 8; ++j) {
        norm[i][j] = (norm[i][j] - m) * r;
        g[i][j] = d[j] * w[j];
        sum_g += g[i][j];
        sum_gn += g[i][j] * norm[i][j];
        dw[i][j] += d[j] * norm[i][j];
        db[i][j] += d[j];
      }
    }
    const float mean_g = warp_sum(sum_g) / static_cast<float>(C), mean_gn = warp_sum(sum_gn) / static_cast<float>(C);
    for (int i = 0; i < kVecs; ++i) {
      const int c = 8 * (lane + 32 * i);
      if (c >= C) continue;
      float res[8] = {0, 0, 0, 0, 0, 0, 0, 0}, o[8];
      if (dres) load8(res, dres + row + c);
      for (int j = 0; j < 8; ++j) o[j] = res[j] + r * (g[i][j] - mean_g - norm[i][j] * mean_gn);
      store8(dsum + row + c, o);
    }
  }
  // The block's warps add their columns into shared memory one warp at a time, in warp order.
  for (int turn = 0; turn < kWarps; ++turn) {
    if (warp == turn)
      for (int i = 0; i < kVecs; ++i)
        for (int j = 0; j < 8; ++j) {
          const int c = 8 * (lane + 32 * i) + j;
          if (c >= C) continue;
          columns[c] = turn == 0 ? dw[i][j] : columns[c] + dw[i][j];
          columns[C + c] = turn == 0 ? db[i][j] : columns[C + c] + db[i][j];
        }
    __syncthreads();
  }
  float* block_partial = partial + static_cast<std::int64_t>(blockIdx.x) * 2 * C;
  for (int k = threadIdx.x; k < 2 * C; k += blockDim.x) block_partial[k] = columns[k];
}

// dweight, dbias: the partial rows of `blocks` blocks added in block order, a thread a column.
__global__ void residual_layernorm_params_kernel(brrr::bf16* dweight, brrr::bf16* dbias, const float* partial,
                                                 int blocks, std::int64_t C) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float w = 0.0f, b = 0.0f;
  for (int k = 0; k < blocks; ++k) {
    w += partial[2 * C * k + c];
    b += partial[2 * C * k + C + c];
  }
  dweight[c] = bf16_of(w);
  if (dbias) dbias[c] = bf16_of(b);
}

// Any C and alignment: dsum a warp a row, one value a lane at a time (the row read twice)...
__global__ void residual_layernorm_backward_scalar_kernel(brrr::bf16* dsum, const brrr::bf16* dout,
                                                          const brrr::bf16* dres, const brrr::bf16* sum,
                                                          const brrr::bf16* weight, const float* mean,
                                                          const float* rstd, std::int64_t N, std::int64_t C) {
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (n >= N) return;  // the whole warp
  const std::int64_t row = n * C;
  const float m = mean[n], r = rstd[n];
  float sum_g = 0.0f, sum_gn = 0.0f;
  for (std::int64_t c = lane; c < C; c += 32) {
    const float g = float_of(dout[row + c]) * float_of(weight[c]);
    sum_g += g;
    sum_gn += g * (float_of(sum[row + c]) - m) * r;
  }
  const float mean_g = warp_sum(sum_g) / static_cast<float>(C), mean_gn = warp_sum(sum_gn) / static_cast<float>(C);
  for (std::int64_t c = lane; c < C; c += 32) {
    const float norm = (float_of(sum[row + c]) - m) * r, g = float_of(dout[row + c]) * float_of(weight[c]);
    dsum[row + c] = bf16_of((dres ? float_of(dres[row + c]) : 0.0f) + r * (g - mean_g - norm * mean_gn));
  }
}

// ... and dweight, dbias a thread a column, in row order (variant 4's walk).
__global__ void residual_layernorm_columns_scalar_kernel(brrr::bf16* dweight, brrr::bf16* dbias,
                                                         const brrr::bf16* dout, const brrr::bf16* sum,
                                                         const float* mean, const float* rstd, std::int64_t N,
                                                         std::int64_t C) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float w = 0.0f, b = 0.0f;
  for (std::int64_t n = 0; n < N; ++n) {
    const float d = float_of(dout[n * C + c]);
    w += d * ((float_of(sum[n * C + c]) - mean[n]) * rstd[n]);
    b += d;
  }
  dweight[c] = bf16_of(w);
  if (dbias) dbias[c] = bf16_of(b);
}

void residual_layernorm_backward_bf16(brrr::bf16* dsum, brrr::bf16* dweight, brrr::bf16* dbias,
                                      const brrr::bf16* dout, const brrr::bf16* dres, const brrr::bf16* sum,
                                      const brrr::bf16* weight, const float* mean, const float* rstd, std::int64_t N,
                                      std::int64_t C, Stream stream) {
  if (C == 0) return;
  const int threads = 32 * kWarps;
  const bool aligned = aligned16(dsum) && aligned16(dout) && aligned16(sum) && (!dres || aligned16(dres));
  const int vecs = static_cast<int>(ceil_div(C, 256));
  if (N == 0 || C % 8 != 0 || vecs > 4 || !aligned) {
    if (N > 0)
      BRRR_LAUNCH(residual_layernorm_backward_scalar_kernel, blocks_for("residual_layernorm_backward", N, kWarps),
                  threads, 0, stream, dsum, dout, dres, sum, weight, mean, rstd, N, C);
    BRRR_LAUNCH(residual_layernorm_columns_scalar_kernel, grid_for(C, threads), threads, 0, stream, dweight, dbias,
                dout, sum, mean, rstd, N, C);
    return;
  }
  const int blocks = blocks_for("residual_layernorm_backward", N, kBackwardRowsPerBlock);
  float* partial = static_cast<float*>(workspace(static_cast<std::size_t>(blocks) * 2 * C * sizeof(float), stream));
  const auto shared = [&](int k) { return (256 * static_cast<std::size_t>(k) + 2 * C) * sizeof(float); };
  const int c = static_cast<int>(C);
  if (vecs <= 1)
    BRRR_LAUNCH(residual_layernorm_backward_kernel<1>, blocks, threads, shared(1), stream, dsum, partial, dout, dres,
                sum, weight, mean, rstd, N, c);
  else if (vecs <= 2)
    BRRR_LAUNCH(residual_layernorm_backward_kernel<2>, blocks, threads, shared(2), stream, dsum, partial, dout, dres,
                sum, weight, mean, rstd, N, c);
  else if (vecs <= 3)
    BRRR_LAUNCH(residual_layernorm_backward_kernel<3>, blocks, threads, shared(3), stream, dsum, partial, dout, dres,
                sum, weight, mean, rstd, N, c);
  else
    BRRR_LAUNCH(residual_layernorm_backward_kernel<4>, blocks, threads, shared(4), stream, dsum, partial, dout, dres,
                sum, weight, mean, rstd, N, c);
  BRRR_LAUNCH(residual_layernorm_params_kernel, grid_for(C, threads), threads, 0, stream, dweight, dbias,
              static_cast<const float*>(partial), blocks, C);
}

void register_residual_layernorm_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  add(op::residual_layernorm_forward_on_bf16, kCuda, "bf16", &residual_layernorm_forward_bf16, 10,
      about("variant 5: a warp a row held in registers, 16-byte loads of 8 bf16, weight and bias staged once a block"));
  add(op::residual_layernorm_backward_on_bf16, kCuda, "bf16", &residual_layernorm_backward_bf16, 10,
      about("variant 5: a warp a row held in registers, adds the residual stream's gradient; column partials a block"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
