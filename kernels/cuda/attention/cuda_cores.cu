// kernels/cuda/attention/cuda_cores.cu: causal attention on the GPU's float32 units, from one
// thread per row to flash attention, forward and backward: variants 1 and 2.
// Chapter 15 (flash attention). Read before: kernels/cpu/attention.cpp (the reference and the
// math), kernels/cuda/common.h, kernels/cuda/attention/attention.h and common.h.
// Read next: kernels/cuda/attention/mma_sync.cu (variants 3 and 4, on the tensor cores), then
// framework/src/ops_attention.cpp (the op that calls these through the registry).
//
// kernels/cuda/attention/ holds attention by generation of the hardware, one file a family: the
// CUDA cores (this file) and Ampere's warp-level tensor cores (mma.sync, mma_sync.cu). The
// variants keep their numbers.
//
// For each of BH = batch * heads problems, q, k, v, out (T, hs) and lse (T):
//   s[i, j] = scale * q[i] . k[j] for j <= i,  lse[i] = log(sum_j exp(s[i, j])),
//   out[i] = sum_j exp(s[i, j] - lse[i]) v[j].
//
// The composed op writes the (T, T) scores to memory, reads them back for the mask, the
// softmax and the second matmul, and keeps them for the backward: at T = 1024 and 12 heads
// that is 48 MiB per sequence and layer, read and written several times. Flash attention
// (Dao et al. 2022; FlashAttention-2, Dao 2023) never writes them: a block loads a tile of
// queries, streams tiles of keys and values through shared memory, and keeps for each query
// row only a running max m, a running sum l and the unnormalised output. When a new tile
// raises the max from m to m', what was summed so far is rescaled by exp(m - m'):
//   l = l * exp(m - m') + sum_j exp(s_j - m'),   o = o * exp(m - m') + sum_j exp(s_j - m') v_j
// and at the end out = o / l and lse = m + log(l). Memory traffic is q, k, v and out, once
// per query tile; the (T, T) matrix exists only a tile at a time, in registers and shared memory.
//
// Variants, in the order of the folder (this file, then mma_sync.cu), registered for
// DeviceType::CUDA (float32 and float64 unless noted):
//   attention_forward   1 naive      one thread per query row, two passes over the keys
//                       2 flash      tiles in shared memory, online softmax (default)
//   attention_backward  1 naive      one thread per query row (dq) and per key row (dk, dv)
//                       2 flash      FlashAttention-2's loop order, deterministic (default)
//   attention_forward:bf16, attention_backward:bf16, the ops' bf16-products slots (chapter 18:
//   what ops::flash_attention calls under Autocast(kBFloat16); float32 in memory, inputs
//   rounded to bf16)
//                       3 bf16_mma   variant 2 on tensor cores, bf16 operands: the default up
//                                    to hs = 128 (its rule); its backward at hs = 64 and 128
//                                    runs variant 4's kernels on inputs rounded once
//                       1 naive      variant 1, every input rounded to bf16 as it is read
//
// Each tiled variant carries an eligibility rule, the largest head size its tiles hold (flash:
// 128 in float32, 64 forward and 32 backward in float64; bf16_mma: 128), and its launcher
// refuses a larger one: the registry runs variant 1 there (kernels/registry.cpp's choose()),
// and `brrr kernels attention_forward --head-size 160` says why.
//   attention_forward, attention_backward on bf16 data (dtype bfloat16, which the kernel lab
//   checks and times with --dtype bfloat16; no framework op calls them yet)
//                       4 bf16_pipelined  bf16 in memory, cp.async double buffering, ldmatrix
//                                    (head sizes 64 and 128)
//
// Measured on an H100 80GB HBM3, 2026-11-23, with `scripts/gpu.sh` (see docs/measurements.md),
// at (BH, T, hs) = (384, 1024, 64), as a share of the lab's float32 matmul peak (cuBLAS's
// SGEMM, 52.07 TFLOP/s in that run): flash forward 3.1901 ms, 16.16 TFLOP/s, 31.0%; flash
// backward 10.7383 ms, 12 TFLOP/s, 23.0%. Forward and backward together are only 1.29x faster
// than the composed op (13.97 against 18.05 ms; 1.11x at T = 256) and 2.1x slower than
// PyTorch's float32 SDPA (6.56 ms). The flash kernels are compute-bound and reach 23-31% of
// cuBLAS's float32 rate on the SIMT units; the tensor cores are the way past it. Variant 3's
// forward, before it took ldmatrix, took 0.096 ms at T = 256 (33.4 TFLOP/s); its backward and
// variant 4 were written after that run: docs/measurements.md, "Every CUDA variant: measured,
// or not yet".
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/common.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

// exp and log for float (the fast hardware versions: a few ulp, plenty for probabilities) and
// double (exact), so one kernel template serves both dtypes. (common.h's exp_of and log_of
// are the accurate ones, which the other kernels match the CPU with.)
__device__ inline float fast_exp(float x) { return __expf(x); }
__device__ inline double fast_exp(double x) { return ::exp(x); }
__device__ inline float fast_log(float x) { return __logf(x); }
__device__ inline double fast_log(double x) { return ::log(x); }

// An input as a kernel reads it: as it is, or (BF16, the mixed-precision ops of chapter 18)
// rounded to the nearest bfloat16, ties to even, as the tensor-core variants round what they load.
template <bool BF16, class T>
__device__ inline T as_input(T x) {
  if constexpr (BF16) return __bfloat162float(__float2bfloat16_rn(x));
  else return x;
}
}  // namespace

// =============================================================================================
// Variant 1 forward: one thread per query row
//
// Thread (bh, i) reads its query row and walks the keys 0..i twice: first for the max of the
// scores, then again, recomputing every score, for the sum of exp(s - max) and the weighted
// sum of the values, which it accumulates straight into its row of out (no other thread
// touches it). Nothing is shared: every thread reads the keys and values it needs on its
// own (through the caches, if they hold them), where a flash block loads each once for 64
// query rows; the threads of a warp read different rows of out and q (uncoalesced), and have
// different amounts of work (row i has i + 1 keys). It is here as the plain statement of the
// math. Measured on the H100 at (384, 1024, 64): 305.874 ms, 0.1685 TFLOP/s, 0.3% of the
// float32 matmul peak, 96 times slower than variant 2.
// With BF16 (attention_forward:bf16, chapter 18) every q, k, v it reads is rounded to bf16 first.

template <class T, bool BF16 = false>
__global__ void attention_forward_naive_kernel(T* out, T* lse, const T* q, const T* k, const T* v, std::int64_t BH,
                                               int T_len, int hs, T scale) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // bh * T + i
  if (row >= BH * T_len) return;
  const int i = static_cast<int>(row % T_len);
  const std::int64_t head = (row / T_len) * T_len * hs;
  const T* qi = q + row * hs;
  T* o = out + row * hs;
  T m = -INFINITY;
  for (int j = 0; j <= i; ++j) {
    T s = 0;
    for (int d = 0; d < hs; ++d)
      s += as_input<BF16>(qi[d]) * as_input<BF16>(k[head + static_cast<std::int64_t>(j) * hs + d]);
    m = max(m, s * scale);
  }
  for (int d = 0; d < hs; ++d) o[d] = 0;
  T l = 0;
  for (int j = 0; j <= i; ++j) {
    T s = 0;
    for (int d = 0; d < hs; ++d)
      s += as_input<BF16>(qi[d]) * as_input<BF16>(k[head + static_cast<std::int64_t>(j) * hs + d]);
    const T p = fast_exp(s * scale - m);
    l += p;
    for (int d = 0; d < hs; ++d) o[d] += p * as_input<BF16>(v[head + static_cast<std::int64_t>(j) * hs + d]);
  }
  for (int d = 0; d < hs; ++d) o[d] /= l;
  lse[row] = m + fast_log(l);
}

template <class T, bool BF16>
void launch_forward_naive(T* out, T* lse, const T* q, const T* k, const T* v, std::int64_t BH, std::int64_t T_len,
                          std::int64_t hs, T scale, Stream stream) {
  check_sizes("attention_forward", BH, T_len, hs);
  if (BH == 0 || T_len == 0) return;
  const int block = 128;
  BRRR_LAUNCH((attention_forward_naive_kernel<T, BF16>), grid_for(BH * T_len, block), block, 0, stream, out, lse, q, k, v, BH,
              static_cast<int>(T_len), static_cast<int>(hs), scale);
}

template <class T>
void attention_forward_naive(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& shape,
                             Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const T scale = static_cast<T>(shape.scale);
  launch_forward_naive<T, false>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
}

void attention_forward_naive_bf16(float* out, float* lse, const float* q, const float* k, const float* v,
                                  const AttentionShape& shape, Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  launch_forward_naive<float, true>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
}

// =============================================================================================
// The tiles of variant 2 (forward and backward)
//
// A block of 256 threads works on a tile of 64 query rows against tiles of 64 key rows. The
// threads form a 16 x 16 grid, (ty, tx): thread (ty, tx) owns the 4 rows ty*4 .. ty*4+3 of its
// tile, and within those rows the score columns tx, tx+16, tx+32, tx+48 and the head columns
// tx, tx+16, ... (HS / 16 of them). So a 64 x 64 tile of scores is 16 values per thread,
// and a 64 x HS tile of outputs HS / 4. The 16 threads that share a row are the lanes
// 0-15 or 16-31 of one warp, so a row's max or sum is four shuffles (xor 8, 4, 2, 1).
//
// HS, the head size rounded up to 32, 64 or 128, is a template parameter so the per-thread
// arrays have a fixed size and live in registers; the columns past hs are zeros in shared
// memory and add nothing to a dot product. Rows of q, k, v tiles are padded to HS + 1 values
// in shared memory: without it the 16 threads reading column d of 16 different rows of a
// tile (k[tx, d]) would all hit one memory bank, and wait for each other 16 times.

constexpr int kThreads = 256;      // 16 x 16
constexpr int kRows = 4;           // rows per thread: kTile / 16
constexpr int kScoreStride = kTile + 1;  // a tile of scores in shared memory, padded
// The most dynamic shared memory a block may use on an A100 (an H100 allows 227 KiB): a head
// size whose tiles need more is not one variant 2 runs (its eligibility rule, below).
constexpr std::size_t kMaxSharedBytes = 163 * 1024;

// dst (kTile, HS + 1) = rows row0 .. row0 + 63 of src (T_len, hs), zeros past T_len and hs.
// Consecutive threads read consecutive values of a row: coalesced.
template <class T, int HS>
__device__ inline void load_tile(T* dst, const T* src, int row0, int T_len, int hs) {
  for (int e = threadIdx.x; e < kTile * HS; e += blockDim.x) {
    const int r = e / HS, d = e % HS;
    const bool inside = row0 + r < T_len && d < hs;
    dst[r * (HS + 1) + d] = inside ? src[static_cast<std::int64_t>(row0 + r) * hs + d] : T(0);
  }
}

// acc[a][c] += sum over i of scores[ty*4 + a, i] * tile[i, tx + 16 c]: this thread's block of a
// (64, 64) score tile (stride kScoreStride) times a (64, HS + 1) tile, i = 0 .. 63 in order.
// The forward's o += p v and the backward's dv, dk, dq products (variant 2) are all this.
template <class T, int HS>
__device__ inline void add_product(T (&acc)[kRows][HS / 16], const T* scores, const T* tile) {
  constexpr int ld = HS + 1;
  constexpr int kCols = HS / 16;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int i = 0; i < kTile; ++i) {
    T si[kRows], ti[kCols];
    for (int a = 0; a < kRows; ++a) si[a] = scores[(ty * kRows + a) * kScoreStride + i];
    for (int c = 0; c < kCols; ++c) ti[c] = tile[i * ld + tx + 16 * c];
    for (int a = 0; a < kRows; ++a)
      for (int c = 0; c < kCols; ++c) acc[a][c] += si[a] * ti[c];
  }
}

// The max and the sum over the 16 lanes that share a row (lanes 0-15 or 16-31 of a warp).
template <class T>
__device__ inline T row_max16(T x) {
  for (int offset = 8; offset > 0; offset /= 2) x = max(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
template <class T>
__device__ inline T row_sum16(T x) {
  for (int offset = 8; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

// =============================================================================================
// Variant 2 forward: flash attention
//
// Block (bh, query tile): load the 64 query rows once, then for each key tile up to the
// diagonal: load k and v tiles into shared memory; scores s (4 x 4 per thread) from shared
// memory; per row, the tile's max, the new running max, the correction exp(m - m') applied to
// l and o; p = exp(s - m') written to shared memory; then o += p v (every thread needs the
// whole row of p, hence the trip through shared memory). Key tiles beyond the diagonal are all
// masked and are not loaded at all: a causal forward does half the work of a full one. Inside
// the diagonal tile, and past T in the last tile, the mask sets s = -inf, so p = 0.
//
// The scores are never written to global memory: global traffic is q once, k and v once per
// query tile at or below the diagonal, and out. Query tiles are handed out last-first: the
// last tile has the most key tiles to visit, and starting the longest blocks first leaves
// the short ones to fill the gaps at the end.
//
// The running max is finite from the first key tile on: key 0 is visible to every query, so
// exp(m - m') never sees -inf - (-inf). l is kept per thread (over its own 16 columns) and
// summed over the row's 16 threads only once, at the end.
//
// Shared memory: q, k, v tiles (64, HS + 1) and p (64, 65): 113 KiB for HS = 128 in float32
// (one block per SM), 41 KiB for HS = 32.
//
// Measured on the H100 (causal FLOPs only, against cuBLAS's SGEMM, 52.07 TFLOP/s): at
// (384, 1024, 64) 3.1901 ms, 16.16 TFLOP/s, 31.0%; at T = 256, 0.2811 ms, 11.46 TFLOP/s, 22.0%.
// The op is far right of the ridge, so this is a compute figure, and a modest one: each FMA
// of the tile products needs half a shared-memory load (a 4 x 4 block of scores a thread,
// and the p v product reads p from shared memory), where variant 8 of matmul (matmul/cuda_cores.cu), at 85% of
// cuBLAS, holds 8 x 8 outputs a thread and reads float4s.

template <class T, int HS>
constexpr std::size_t forward_shared_bytes() {
  return (3 * kTile * (HS + 1) + kTile * kScoreStride) * sizeof(T);
}

template <class T, int HS>
__global__ void __launch_bounds__(kThreads)
    attention_forward_flash_kernel(T* out, T* lse, const T* q, const T* k, const T* v, int T_len, int hs, T scale) {
  constexpr int ld = HS + 1;
  constexpr int kCols = HS / 16;  // head columns per thread
  BRRR_DYNAMIC_SHARED(T, smem);
  T* q_tile = smem;                    // (64, ld)
  T* k_tile = q_tile + kTile * ld;     // (64, ld)
  T* v_tile = k_tile + kTile * ld;     // (64, ld)
  T* p_tile = v_tile + kTile * ld;     // (64, 65)
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int query_tile = gridDim.y - 1 - blockIdx.y;
  const int q0 = query_tile * kTile;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * T_len * hs;

  load_tile<T, HS>(q_tile, q + head, q0, T_len, hs);
  T m[kRows], l[kRows], o[kRows][kCols];
  for (int a = 0; a < kRows; ++a) {
    m[a] = -INFINITY;
    l[a] = 0;
    for (int c = 0; c < kCols; ++c) o[a][c] = 0;
  }

  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile;
    __syncthreads();  // everyone is done with the previous k, v and p tiles
    load_tile<T, HS>(k_tile, k + head, k0, T_len, hs);
    load_tile<T, HS>(v_tile, v + head, k0, T_len, hs);
    __syncthreads();

    // s = q k^T for rows ty*4 + a and key columns tx + 16 b.
    T s[kRows][4] = {};
    for (int d = 0; d < HS; ++d) {
      T qd[kRows], kd[4];
      for (int a = 0; a < kRows; ++a) qd[a] = q_tile[(ty * kRows + a) * ld + d];
      for (int b = 0; b < 4; ++b) kd[b] = k_tile[(tx + 16 * b) * ld + d];
      for (int a = 0; a < kRows; ++a)
        for (int b = 0; b < 4; ++b) s[a][b] += qd[a] * kd[b];
    }

    // Online softmax, row by row.
    for (int a = 0; a < kRows; ++a) {
      const int i = q0 + ty * kRows + a;
      T tile_max = -INFINITY;
      for (int b = 0; b < 4; ++b) {
        const int j = k0 + tx + 16 * b;
        s[a][b] = j <= i && j < T_len ? s[a][b] * scale : T(-INFINITY);
        tile_max = max(tile_max, s[a][b]);
      }
      const T m_new = max(m[a], row_max16(tile_max));
      const T correction = fast_exp(m[a] - m_new);
      m[a] = m_new;
      l[a] *= correction;
      for (int c = 0; c < kCols; ++c) o[a][c] *= correction;
      for (int b = 0; b < 4; ++b) {
        const T p = fast_exp(s[a][b] - m_new);
        l[a] += p;
        p_tile[(ty * kRows + a) * kScoreStride + tx + 16 * b] = p;
      }
    }
    __syncthreads();

    add_product<T, HS>(o, p_tile, v_tile);  // o += p v for rows ty*4 + a, head columns tx + 16 c
  }

  for (int a = 0; a < kRows; ++a) {
    const T row_l = row_sum16(l[a]);  // all 32 lanes take part, whether or not their row exists
    const int i = q0 + ty * kRows + a;
    if (i >= T_len) continue;
    T* out_row = out + head + static_cast<std::int64_t>(i) * hs;
    for (int c = 0; c < kCols; ++c)
      if (tx + 16 * c < hs) out_row[tx + 16 * c] = o[a][c] / row_l;
    if (tx == 0) lse[blockIdx.x * static_cast<std::int64_t>(T_len) + i] = m[a] + fast_log(row_l);
  }
}

template <class T, int HS>
void launch_forward_flash(T* out, T* lse, const T* q, const T* k, const T* v, std::int64_t BH, std::int64_t T_len,
                          std::int64_t hs, T scale, Stream stream) {
  const dim3 grid(static_cast<unsigned>(BH), static_cast<unsigned>(ceil_div(T_len, kTile)));
  BRRR_LAUNCH((attention_forward_flash_kernel<T, HS>), grid, kThreads, forward_shared_bytes<T, HS>(), stream, out,
              lse, q, k, v, static_cast<int>(T_len), static_cast<int>(hs), scale);
}

// The largest head size variant 2's forward tiles hold in T's shared memory: 128 in float32;
// 64 in float64 (226 KiB at HS = 128, more than an A100 gives a block). Its eligibility rule:
// the registry runs variant 1 above it, and the launcher refuses a larger one.
template <class T>
constexpr std::int64_t flash_forward_max_head_size() {
  return forward_shared_bytes<T, 128>() <= kMaxSharedBytes  ? 128
         : forward_shared_bytes<T, 64>() <= kMaxSharedBytes ? 64
                                                            : 32;
}

template <class T>
void attention_forward_flash(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& shape,
                             Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const T scale = static_cast<T>(shape.scale);
  check_sizes("attention_forward", BH, T_len, hs);
  check_head_size("attention_forward flash", hs, flash_forward_max_head_size<T>());
  if (BH == 0 || T_len == 0) return;
  BRRR_CHECK(BH <= INT32_MAX && ceil_div(T_len, kTile) <= 65535, "attention_forward: BH = ", BH, ", T = ", T_len,
             " is more blocks than a grid holds");
  switch (padded_head_size(hs)) {
    case 32: return launch_forward_flash<T, 32>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
    case 64: return launch_forward_flash<T, 64>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
    default:
      if constexpr (flash_forward_max_head_size<T>() >= 128)
        launch_forward_flash<T, 128>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
  }
}

// =============================================================================================
// The backward, shared by both variants: D[i] = dout[i] . out[i], (BH * T)
//
// The softmax backward needs, per query row, D[i] = sum_j p[i, j] dp[i, j], which equals
// dout[i] . out[i] (chapter 15). Both variants need it for every (query, key) pair, so it is
// computed once, by a warp per row, into scratch memory.

template <class T, bool BF16 = false>
__global__ void attention_row_dot_kernel(T* D, const T* dout, const T* out, std::int64_t rows, int hs) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together: the shuffles below stay full
  T sum = 0;
  for (int d = threadIdx.x % 32; d < hs; d += 32)
    sum += as_input<BF16>(dout[row * hs + d]) * out[row * hs + d];  // out: the forward's float32
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) D[row] = sum;
}

template <class T, bool BF16 = false>
T* row_dots(const T* dout, const T* out, std::int64_t rows, std::int64_t hs, Stream stream) {
  T* D = static_cast<T*>(workspace(static_cast<std::size_t>(rows) * sizeof(T), stream));
  const int block = 256;
  BRRR_LAUNCH((attention_row_dot_kernel<T, BF16>), grid_for(rows, block / 32), block, 0, stream, D, dout, out, rows,
              static_cast<int>(hs));
  return D;
}

// =============================================================================================
// Variant 1 backward: a thread per query row for dq, a thread per key row for dk and dv
//
// With lse saved, any p[i, j] = exp(scale * q[i] . k[j] - lse[i]) can be recomputed on its
// own, without the rest of its row. dq[i] sums over the keys of row i, so one thread per
// query row owns it; dk[j] and dv[j] sum over the queries i >= j that see key j, so one
// thread per key row owns those. Each thread accumulates straight into its own row of global
// memory: no atomics, no races, and every p and dp is computed twice (once by each kernel).
// With BF16 (chapter 18) every q, k, v and dout it reads is rounded to bf16 first (out, like lse,
// is the forward's float32 result: variant 3 rounds it in D too, within its tolerance).

template <class T, bool BF16 = false>
__global__ void attention_backward_dq_naive_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v,
                                                   const T* lse, const T* D, std::int64_t BH, int T_len, int hs,
                                                   T scale) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // bh * T + i
  if (row >= BH * T_len) return;
  const int i = static_cast<int>(row % T_len);
  const std::int64_t head = (row / T_len) * T_len * hs;
  const T *qi = q + row * hs, *doi = dout + row * hs;
  T* dqi = dq + row * hs;
  for (int d = 0; d < hs; ++d) dqi[d] = 0;
  for (int j = 0; j <= i; ++j) {
    const T *kj = k + head + static_cast<std::int64_t>(j) * hs, *vj = v + head + static_cast<std::int64_t>(j) * hs;
    T s = 0, dp = 0;
    for (int d = 0; d < hs; ++d) {
      s += as_input<BF16>(qi[d]) * as_input<BF16>(kj[d]);
      dp += as_input<BF16>(doi[d]) * as_input<BF16>(vj[d]);
    }
    const T ds = fast_exp(s * scale - lse[row]) * (dp - D[row]);
    for (int d = 0; d < hs; ++d) dqi[d] += scale * ds * as_input<BF16>(kj[d]);
  }
}

template <class T, bool BF16 = false>
__global__ void attention_backward_dkdv_naive_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k,
                                                     const T* v, const T* lse, const T* D, std::int64_t BH,
                                                     int T_len, int hs, T scale) {
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;  // bh * T + j
  if (row >= BH * T_len) return;
  const int j = static_cast<int>(row % T_len);
  const std::int64_t first = row - j;  // row of query 0 in this head
  const T *kj = k + row * hs, *vj = v + row * hs;
  T *dkj = dk + row * hs, *dvj = dv + row * hs;
  for (int d = 0; d < hs; ++d) dkj[d] = dvj[d] = 0;
  for (int i = j; i < T_len; ++i) {
    const T *qi = q + (first + i) * hs, *doi = dout + (first + i) * hs;
    T s = 0, dp = 0;
    for (int d = 0; d < hs; ++d) {
      s += as_input<BF16>(qi[d]) * as_input<BF16>(kj[d]);
      dp += as_input<BF16>(doi[d]) * as_input<BF16>(vj[d]);
    }
    const T p = fast_exp(s * scale - lse[first + i]);
    const T ds = p * (dp - D[first + i]);
    for (int d = 0; d < hs; ++d) {
      dvj[d] += p * as_input<BF16>(doi[d]);
      dkj[d] += scale * ds * as_input<BF16>(qi[d]);
    }
  }
}

template <class T, bool BF16>
void launch_backward_naive(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                           const T* lse, std::int64_t BH, std::int64_t T_len, std::int64_t hs, T scale, Stream stream) {
  check_sizes("attention_backward", BH, T_len, hs);
  if (BH == 0 || T_len == 0) return;
  const T* D = row_dots<T, BF16>(dout, out, BH * T_len, hs, stream);
  const int block = 128, blocks = grid_for(BH * T_len, block);
  BRRR_LAUNCH((attention_backward_dq_naive_kernel<T, BF16>), blocks, block, 0, stream, dq, dout, q, k, v, lse, D, BH,
              static_cast<int>(T_len), static_cast<int>(hs), scale);
  BRRR_LAUNCH((attention_backward_dkdv_naive_kernel<T, BF16>), blocks, block, 0, stream, dk, dv, dout, q, k, v, lse, D, BH,
              static_cast<int>(T_len), static_cast<int>(hs), scale);
}

template <class T>
void attention_backward_naive(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                              const T* lse, const AttentionShape& shape, Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const T scale = static_cast<T>(shape.scale);
  launch_backward_naive<T, false>(dq, dk, dv, dout, q, k, v, out, lse, BH, T_len, hs, scale, stream);
}

void attention_backward_naive_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                   const float* v, const float* out, const float* lse, const AttentionShape& shape,
                                   Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  launch_backward_naive<float, true>(dq, dk, dv, dout, q, k, v, out, lse, BH, T_len, hs, scale, stream);
}

// =============================================================================================
// Variant 2 backward: FlashAttention-2's loop order, without atomics
//
// Per (query tile, key tile) pair below the diagonal, the backward rebuilds the tile's
// p = exp(scale * q k^T - lse) and dp = dout v^T, then ds = p * (dp - D), and needs
//   dv += p^T dout,  dk += scale * ds^T q   (sums over query rows: belong to the key tile)
//   dq += scale * ds k                       (sums over key rows: belong to the query tile)
// FlashAttention-2 gives each block a key tile, keeps its dk and dv in registers while it
// walks the query tiles, and adds each pair's share of dq into global memory with float
// atomics. Atomics make dq depend on the order the blocks happen to run in, so its last bits
// change from run to run (DESIGN.md, "Reproducibility"). Here dq has its own kernel instead:
// a block per query tile walks the key tiles and keeps dq in registers. The price: p, dp and
// ds are computed twice (7 tile products per pair instead of 5, about 40% more arithmetic).
// Measured on the H100, counting the 5 products of the ideal backward: at (384, 1024, 64)
// 10.7383 ms, 12 TFLOP/s, 23.0% of the float32 matmul peak; at T = 256, 0.9833 ms, 8.19
// TFLOP/s, 15.7%. The naive backward takes 5210.12 ms at T = 1024: 485 times longer.
//
// Both kernels use the tiles of the forward: 256 threads as 16 x 16, 4 rows per thread, and
// share their tile math (score_products for S and dP, add_product for the gradient sums).

// The tile math both kernels share. Each thread holds a 4 x 4 block of a 64 x 64 tile of
// scores (its rows ty*4 + a, its columns tx + 16 b) and a 4 x HS/16 block of gradients (its
// rows ty*4 + a, head columns tx + 16 c). Kernel A's rows are keys and its columns queries;
// kernel B's the other way round, so the same two helpers serve both (add_product is above,
// beside load_tile: the forward uses it too).

// s[a][b] = rows_s[ty*4 + a] . cols_s[tx + 16 b] and dp[a][b] = rows_dp[ty*4 + a] . cols_dp[tx + 16 b]
// over the head dimension, for four (64, HS + 1) tiles in shared memory: the scores (or their
// transpose) and dP = dout v^T (or its transpose) of one pair of tiles, in one pass over d.
template <class T, int HS>
__device__ inline void score_products(T (&s)[kRows][4], T (&dp)[kRows][4], const T* rows_s, const T* rows_dp,
                                      const T* cols_s, const T* cols_dp) {
  constexpr int ld = HS + 1;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  for (int a = 0; a < kRows; ++a)
    for (int b = 0; b < 4; ++b) s[a][b] = dp[a][b] = T(0);
  for (int d = 0; d < HS; ++d) {
    T rs[kRows], rdp[kRows], cs[4], cdp[4];
    for (int a = 0; a < kRows; ++a) {
      rs[a] = rows_s[(ty * kRows + a) * ld + d];
      rdp[a] = rows_dp[(ty * kRows + a) * ld + d];
    }
    for (int b = 0; b < 4; ++b) {
      cs[b] = cols_s[(tx + 16 * b) * ld + d];
      cdp[b] = cols_dp[(tx + 16 * b) * ld + d];
    }
    for (int a = 0; a < kRows; ++a)
      for (int b = 0; b < 4; ++b) {
        s[a][b] += rs[a] * cs[b];
        dp[a][b] += rdp[a] * cdp[b];
      }
  }
}

// Kernel A: block (bh, key tile). Thread (ty, tx) owns key rows ty*4 + a of the tile; for the
// tile products it takes query columns tx + 16 b, for dk and dv head columns tx + 16 c.
// Shared: k, v, q, dout tiles (64, HS + 1), p^T and ds^T (64, 65): 161.5 KiB at HS = 128 in
// float32, just inside an A100's 163 KiB.
template <class T, int HS>
constexpr std::size_t dkdv_shared_bytes() {
  return (4 * kTile * (HS + 1) + 2 * kTile * kScoreStride) * sizeof(T);
}

template <class T, int HS>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dkdv_flash_kernel(T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v,
                                         const T* lse, const T* D, int T_len, int hs, T scale) {
  constexpr int ld = HS + 1;
  constexpr int kCols = HS / 16;
  BRRR_DYNAMIC_SHARED(T, smem);
  T* k_tile = smem;                       // (64, ld), for the whole kernel
  T* v_tile = k_tile + kTile * ld;        // (64, ld), for the whole kernel
  T* q_tile = v_tile + kTile * ld;        // (64, ld), one query tile at a time
  T* do_tile = q_tile + kTile * ld;       // (64, ld)
  T* pt_tile = do_tile + kTile * ld;      // p^T (64 keys, 65)
  T* dst_tile = pt_tile + kTile * kScoreStride;  // ds^T (64 keys, 65)
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int key_tile = blockIdx.y;  // tile 0 sees every query tile: the longest blocks go first
  const int k0 = key_tile * kTile;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * T_len * hs;
  const std::int64_t head_rows = static_cast<std::int64_t>(blockIdx.x) * T_len;  // into lse and D
  const int query_tiles = static_cast<int>(ceil_div(T_len, kTile));

  load_tile<T, HS>(k_tile, k + head, k0, T_len, hs);
  load_tile<T, HS>(v_tile, v + head, k0, T_len, hs);
  T dk_acc[kRows][kCols] = {}, dv_acc[kRows][kCols] = {};

  // Query tiles before the diagonal see none of these keys.
  for (int query_tile = key_tile; query_tile < query_tiles; ++query_tile) {
    const int q0 = query_tile * kTile;
    __syncthreads();  // everyone is done with the previous q, dout, p^T and ds^T tiles
    load_tile<T, HS>(q_tile, q + head, q0, T_len, hs);
    load_tile<T, HS>(do_tile, dout + head, q0, T_len, hs);
    T lse_i[4], D_i[4];  // for this thread's query columns
    for (int b = 0; b < 4; ++b) {
      const int i = q0 + tx + 16 * b;
      lse_i[b] = i < T_len ? lse[head_rows + i] : T(0);
      D_i[b] = i < T_len ? D[head_rows + i] : T(0);
    }
    __syncthreads();

    // s^T = k q^T and dp^T = v dout^T for key rows ty*4 + a and query columns tx + 16 b.
    T s[kRows][4], dp[kRows][4];
    score_products<T, HS>(s, dp, k_tile, v_tile, q_tile, do_tile);
    for (int a = 0; a < kRows; ++a)
      for (int b = 0; b < 4; ++b) {
        const int j = k0 + ty * kRows + a, i = q0 + tx + 16 * b;
        const T p = j <= i && i < T_len ? fast_exp(s[a][b] * scale - lse_i[b]) : T(0);
        pt_tile[(ty * kRows + a) * kScoreStride + tx + 16 * b] = p;
        dst_tile[(ty * kRows + a) * kScoreStride + tx + 16 * b] = p * (dp[a][b] - D_i[b]);
      }
    __syncthreads();

    // dv += p^T dout and dk += ds^T q for key rows ty*4 + a and head columns tx + 16 c.
    add_product<T, HS>(dv_acc, pt_tile, do_tile);
    add_product<T, HS>(dk_acc, dst_tile, q_tile);
  }

  for (int a = 0; a < kRows; ++a) {
    const int j = k0 + ty * kRows + a;
    if (j >= T_len) continue;
    for (int c = 0; c < kCols; ++c) {
      const int d = tx + 16 * c;
      if (d >= hs) continue;
      dk[head + static_cast<std::int64_t>(j) * hs + d] = scale * dk_acc[a][c];
      dv[head + static_cast<std::int64_t>(j) * hs + d] = dv_acc[a][c];
    }
  }
}

// Kernel B: block (bh, query tile). Thread (ty, tx) owns query rows ty*4 + a; key columns
// tx + 16 b for the tile products, head columns tx + 16 c for dq.
// Shared: q, dout, k, v tiles (64, HS + 1) and ds (64, 65): 145 KiB at HS = 128 in float32.
template <class T, int HS>
constexpr std::size_t dq_shared_bytes() {
  return (4 * kTile * (HS + 1) + kTile * kScoreStride) * sizeof(T);
}

template <class T, int HS>
__global__ void __launch_bounds__(kThreads)
    attention_backward_dq_flash_kernel(T* dq, const T* dout, const T* q, const T* k, const T* v, const T* lse,
                                       const T* D, int T_len, int hs, T scale) {
  constexpr int ld = HS + 1;
  constexpr int kCols = HS / 16;
  BRRR_DYNAMIC_SHARED(T, smem);
  T* q_tile = smem;                   // (64, ld), for the whole kernel
  T* do_tile = q_tile + kTile * ld;   // (64, ld), for the whole kernel
  T* k_tile = do_tile + kTile * ld;   // (64, ld), one key tile at a time
  T* v_tile = k_tile + kTile * ld;    // (64, ld)
  T* ds_tile = v_tile + kTile * ld;   // (64, 65)
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int query_tile = gridDim.y - 1 - blockIdx.y;  // the longest blocks first
  const int q0 = query_tile * kTile;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * T_len * hs;
  const std::int64_t head_rows = static_cast<std::int64_t>(blockIdx.x) * T_len;

  load_tile<T, HS>(q_tile, q + head, q0, T_len, hs);
  load_tile<T, HS>(do_tile, dout + head, q0, T_len, hs);
  T lse_i[kRows], D_i[kRows];
  for (int a = 0; a < kRows; ++a) {
    const int i = q0 + ty * kRows + a;
    lse_i[a] = i < T_len ? lse[head_rows + i] : T(0);
    D_i[a] = i < T_len ? D[head_rows + i] : T(0);
  }
  T dq_acc[kRows][kCols] = {};

  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile;
    __syncthreads();  // everyone is done with the previous k, v and ds tiles
    load_tile<T, HS>(k_tile, k + head, k0, T_len, hs);
    load_tile<T, HS>(v_tile, v + head, k0, T_len, hs);
    __syncthreads();

    // s = q k^T and dp = dout v^T for query rows ty*4 + a and key columns tx + 16 b.
    T s[kRows][4], dp[kRows][4];
    score_products<T, HS>(s, dp, q_tile, do_tile, k_tile, v_tile);
    for (int a = 0; a < kRows; ++a)
      for (int b = 0; b < 4; ++b) {
        const int i = q0 + ty * kRows + a, j = k0 + tx + 16 * b;
        const T p = j <= i && i < T_len ? fast_exp(s[a][b] * scale - lse_i[a]) : T(0);
        ds_tile[(ty * kRows + a) * kScoreStride + tx + 16 * b] = p * (dp[a][b] - D_i[a]);
      }
    __syncthreads();

    // dq += ds k for query rows ty*4 + a and head columns tx + 16 c.
    add_product<T, HS>(dq_acc, ds_tile, k_tile);
  }

  for (int a = 0; a < kRows; ++a) {
    const int i = q0 + ty * kRows + a;
    if (i >= T_len) continue;
    for (int c = 0; c < kCols; ++c)
      if (tx + 16 * c < hs) dq[head + static_cast<std::int64_t>(i) * hs + tx + 16 * c] = scale * dq_acc[a][c];
  }
}

template <class T, int HS>
constexpr bool backward_fits() {
  return dkdv_shared_bytes<T, HS>() <= kMaxSharedBytes && dq_shared_bytes<T, HS>() <= kMaxSharedBytes;
}
// The backward's eligibility rule, as the forward's: 128 in float32, 32 in float64.
template <class T>
constexpr std::int64_t flash_backward_max_head_size() {
  return backward_fits<T, 128>() ? 128 : backward_fits<T, 64>() ? 64 : 32;
}

template <class T, int HS>
void launch_backward_flash(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                           const T* lse, std::int64_t BH, std::int64_t T_len, std::int64_t hs, T scale, Stream stream) {
  if constexpr (!backward_fits<T, HS>()) return;  // never reached: check_head_size refused it
  const T* D = row_dots(dout, out, BH * T_len, hs, stream);
  const dim3 grid(static_cast<unsigned>(BH), static_cast<unsigned>(ceil_div(T_len, kTile)));
  BRRR_LAUNCH((attention_backward_dkdv_flash_kernel<T, HS>), grid, kThreads, dkdv_shared_bytes<T, HS>(), stream, dk,
              dv, dout, q, k, v, lse, D, static_cast<int>(T_len), static_cast<int>(hs), scale);
  BRRR_LAUNCH((attention_backward_dq_flash_kernel<T, HS>), grid, kThreads, dq_shared_bytes<T, HS>(), stream, dq, dout,
              q, k, v, lse, D, static_cast<int>(T_len), static_cast<int>(hs), scale);
}

template <class T>
void attention_backward_flash(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                              const T* lse, const AttentionShape& shape, Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const T scale = static_cast<T>(shape.scale);
  check_sizes("attention_backward", BH, T_len, hs);
  check_head_size("attention_backward flash", hs, flash_backward_max_head_size<T>());
  if (BH == 0 || T_len == 0) return;
  BRRR_CHECK(BH <= INT32_MAX && ceil_div(T_len, kTile) <= 65535, "attention_backward: BH = ", BH, ", T = ", T_len,
             " is more blocks than a grid holds");
  switch (padded_head_size(hs)) {
    case 32: return launch_backward_flash<T, 32>(dq, dk, dv, dout, q, k, v, out, lse, BH, T_len, hs, scale, stream);
    case 64: return launch_backward_flash<T, 64>(dq, dk, dv, dout, q, k, v, out, lse, BH, T_len, hs, scale, stream);
    default: return launch_backward_flash<T, 128>(dq, dk, dv, dout, q, k, v, out, lse, BH, T_len, hs, scale, stream);
  }
}

// =============================================================================================

#define BRRR_INSTANTIATE(T)                                                                                         \
  template void attention_forward_naive<T>(T*, T*, const T*, const T*, const T*, const AttentionShape&, Stream);    \
  template void attention_forward_flash<T>(T*, T*, const T*, const T*, const T*, const AttentionShape&, Stream);    \
  template void attention_backward_naive<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                            const AttentionShape&, Stream);                                         \
  template void attention_backward_flash<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*, \
                                            const AttentionShape&, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

namespace {
// A registration's metadata with its head-size rule: the registry runs the variant only for
// head sizes up to `most` (variant 1, which takes any, below it in priority).
VariantMeta tiles_up_to(std::int64_t most, VariantMeta meta) {
  meta.max_head_size = most;
  return meta;
}

template <class T>
void register_dtype() {
  const DeviceType cuda = DeviceType::CUDA;
  add(op::attention_forward<T>, cuda, "naive", &attention_forward_naive<T>, 0,
      about("variant 1: one thread per query row, two passes over the keys"));
  add(op::attention_forward<T>, cuda, "flash", &attention_forward_flash<T>, 20,
      tiles_up_to(flash_forward_max_head_size<T>(),
                  about("variant 2: tiles of keys and values through shared memory, online softmax")));
  add(op::attention_backward<T>, cuda, "naive", &attention_backward_naive<T>, 0,
      about("variant 1: a thread per query row (dq) and per key row (dk, dv)"));
  add(op::attention_backward<T>, cuda, "flash", &attention_backward_flash<T>, 20,
      tiles_up_to(flash_backward_max_head_size<T>(),
                  about("variant 2: FlashAttention-2's loop order, no atomics (deterministic)")));
}
}  // namespace

void register_attention_cuda_core_kernels() {
  register_dtype<float>();
  register_dtype<double>();
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
