// kernels/cuda/rows/linear_rows.cu: linear_rows on the GPU, the Linear of a decoding step: y (M,
// N) = x (M, K) @ W^T + bias for one to a few rows of x, W (N, K) float32 or bfloat16 as a Linear
// stores it, then the epilogue (store, add to y, GELU). Chapter 20 (decoding on the GPU).
// Read before: rows.h, kernels/cpu/rows/rows.h (the CPU's linear_rows, the same op),
// kernels/cuda/matmul/cuda_cores.cu (the GEMMs of training). Read next: attend_cache.cu.
//
// Why not the training GEMM. With one row of x, each weight is read once and used once: 2 FLOPs
// per weight (half a FLOP per byte in float32, one in bf16), so the time is the weights' bytes
// over the memory's bandwidth. The goal is that bound: every weight read once, in full 32-byte
// sectors, with enough loads in flight to keep the memory busy, whatever M from 1 to a few. A
// GEMM's tiles of 64 or 128 rows of x hold one row and padding, and its tiles of 64 or 128
// outputs give a layer of N = 768 a dozen blocks or fewer, on a chip of 132 multiprocessors.
//
// The kernel. A block is 8 warps; each warp streams 2 rows of W (2 outputs), so a block has 16
// outputs. The K dimension is cut into chunks of 512 (kChunk), one per blockIdx.y: a layer with
// K = 3072 (GPT-2's c_proj of the MLP) has 6 chunks, so N = 768 outputs still make 48 x 6 = 288
// blocks. Each block copies its chunk of the x rows into shared memory (8 rows at a time, a
// pass; more rows take more passes over the same W chunk, which L1 then serves), and each lane
// of a warp reads 16 bytes of its W row at a time (4 floats or 8 bf16: one load of a float4),
// lane l the l-th 16 bytes of each 512-byte stretch, so a warp's load is 512 contiguous bytes.
// On bf16 weights, x is rounded to bf16 as it is copied (staged, below): bf16 operands, float32
// sums, as autocast and the CPU's linear_rows on bf16 weights compute.
//
// The order of additions (batch invariance). Within a chunk, lane l adds the products of its
// groups of 16 bytes in increasing k (one fused multiply-add each); the 32 lanes are summed by a
// butterfly of shuffles (common.h's warp_sum); then, where K has more than one chunk, a second
// kernel adds the chunks' sums in increasing chunk order, then the bias. None of it depends on M,
// on which rows share the call, or on whether W is aligned enough for 16-byte loads (the
// misaligned path loads the same elements one at a time and adds them in the same order). A row
// gets the same bits alone or in a batch: tests/emulator/test_rows.cpp checks it.
//
// Where K fits one chunk (K <= 512: GPT-2's c_attn, c_fc and attention c_proj have K = 768, two
// chunks; smaller models one), the one pass applies the bias and the epilogue itself and no
// partial sums go through memory.
//
// A prefill's hundreds of rows take the tiled variant further down: the same sums in the same
// order from tiles of x and W in shared memory. The default (by_rows) picks by M.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/rows/rows.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

using i64 = std::int64_t;

constexpr int kWarps = 8;                           // warps per block
constexpr int kOutputsPerWarp = 2;                  // rows of W each warp streams
constexpr int kOutputs = kWarps * kOutputsPerWarp;  // outputs per block
constexpr int kRows = 8;                            // rows of x per pass over a chunk
constexpr int kChunk = 512;                         // K elements per split

// The epilogues of linear_rows (kernels/signatures.h): 0 store, 1 add, 2 GELU (tanh), 3 GELU (erf).
enum Epilogue { kStore = 0, kAdd = 1, kGeluTanh = 2, kGeluErf = 3 };

// A weight widened to the type of the sums: bfloat16 exactly (its bits on top of 16 zeros).
__device__ inline float widen(float w) { return w; }
__device__ inline double widen(double w) { return w; }
__device__ inline float widen(brrr::bf16 w) { return float_of(w); }

// The G = 16 / sizeof(W) weights at p, widened: one 16-byte load when `vector` (p aligned), else
// `count` (1 .. G) loads of one element. Both give the same numbers; only the loads differ.
template <int G, class T, class W>
__device__ inline void load_weights(T (&out)[G], const W* p, int count, bool vector) {
  if (vector && count == G) {
    if constexpr (std::is_same_v<W, float>) {
      const float4 v = *reinterpret_cast<const float4*>(p);
      out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    } else if constexpr (std::is_same_v<W, double>) {
      const double2 d = *reinterpret_cast<const double2*>(p);
      out[0] = d.x, out[1] = d.y;
    } else {  // 8 bfloat16: element 2i is the low half of word i (little-endian), 2i + 1 the high
      const float4 v = *reinterpret_cast<const float4*>(p);
      const unsigned words[4] = {__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z),
                                 __float_as_uint(v.w)};
      for (int i = 0; i < 4; ++i) {
        out[2 * i] = __uint_as_float(words[i] << 16);
        out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
      }
    }
    return;
  }
  for (int j = 0; j < G; ++j) out[j] = j < count ? widen(p[j]) : T(0);
}

// A value of x as the products take it: rounded to bf16 (to nearest, ties to even) when the
// weights are bf16, which is what bf16 means in brrr (autocast's meaning: bf16 operands, float32
// sums; the CPU's linear_rows on bf16 weights rounds x the same way, kernels/cpu/rows/rows.h).
// A product of two bf16 numbers is exact in float32, so only the sums round.
template <class W, class T>
__device__ inline T staged(T x) {
  if constexpr (std::is_same_v<W, brrr::bf16>) return float_of(bf16_of(x));
  return x;
}

// G values of the x stage at p (16-byte aligned: kChunk and the group's offset are multiples of
// G), in float4s. With 8 values a lane (bf16 weights) the lanes are 32 bytes apart, so a
// quarter-warp's first float4s would fall on 16 of the 32 banks twice over (2-way conflicts, the
// emulator's counters showed); lanes 4 to 7 of each quarter read their second float4 first,
// which puts the quarter's 8 reads on all 32 banks. The values are the same either way.
template <int G, class T>
__device__ inline void load_stage(T (&out)[G], const T* p, int lane) {
  if constexpr (std::is_same_v<T, float>) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
    if constexpr (G == 8) {
      const int first = (lane >> 2) & 1;
      const float4 a = p4[first], b = p4[first ^ 1];  // (selected after, so no index is dynamic)
      const float4 lo = first ? b : a, hi = first ? a : b;
      out[0] = lo.x, out[1] = lo.y, out[2] = lo.z, out[3] = lo.w;
      out[4] = hi.x, out[5] = hi.y, out[6] = hi.z, out[7] = hi.w;
    } else {
      const float4 v = p4[0];
      out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
    }
  } else {
    for (int j = 0; j < G; ++j) out[j] = p[j];
  }
}

// The bias and the epilogue on one output's sum s; `old` is where the output goes (kAdd adds s to it).
template <class T>
__device__ inline T finish(T s, const T* bias, i64 n, int epilogue, const T* old) {
  if (bias) s += bias[n];
  if (epilogue == kAdd) return *old + s;
  if (epilogue == kGeluTanh) {
    const T u = T(0.7978845608028654) * (s + T(0.044715) * s * s * s);  // sqrt(2 / pi) (s + 0.044715 s^3)
    return T(0.5) * s * (T(1) + tanh_of(u));
  }
  if (epilogue == kGeluErf) return T(0.5) * s * erfc_of(-s * T(0.7071067811865476));  // s Phi(s)
  return s;
}

// The pass over one chunk of K (blockIdx.y) for kOutputs outputs (blockIdx.x) and every row of
// x, kRows at a time. With one chunk it writes y; with more, each output's sum over its chunk
// goes to partials (chunks, M, N) for linear_rows_combine.
template <class T, class W>
__global__ void __launch_bounds__(kWarps * 32)
    linear_rows_chunk(T* y, T* partials, const T* x, const W* w, const T* bias, i64 M, i64 N, i64 K, int epilogue,
                      bool vector) {
  constexpr int G = 16 / static_cast<int>(sizeof(W));  // weights per 16-byte load
  constexpr int kGroups = kChunk / (32 * G);           // loads per lane per chunk
  __shared__ float4 stage_storage[kRows * kChunk * sizeof(T) / 16];  // float4: 16-byte aligned
  T* stage = reinterpret_cast<T*>(stage_storage);  // (kRows, kChunk): this pass's rows of x, zero past K
  __shared__ T sums[kRows][kOutputs];  // the pass's sums, written out together (contiguous in n)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const i64 k0 = i64{blockIdx.y} * kChunk;
  const int len = static_cast<int>(K - k0 < kChunk ? K - k0 : kChunk);
  const bool split = gridDim.y > 1;
  for (i64 m0 = 0; m0 < M; m0 += kRows) {
    const int rows = static_cast<int>(M - m0 < kRows ? M - m0 : kRows);
    __syncthreads();  // the last pass has read the stage
    for (int i = threadIdx.x; i < rows * kChunk; i += blockDim.x) {
      const int r = i / kChunk, k = i % kChunk;
      stage[i] = k < len ? staged<W>(x[(m0 + r) * K + k0 + k]) : T(0);
    }
    __syncthreads();
    // All of the warp's weights for this chunk first (kOutputsPerWarp x kGroups loads of 16 bytes
    // a lane, none waiting for another), then the products: a lane that loaded one group and
    // used it before loading the next would have one load in flight, and memory's latency, not
    // its bandwidth, would set the time.
    T wv[kOutputsPerWarp][kGroups][G];
BRRR_UNROLL
    for (int o = 0; o < kOutputsPerWarp; ++o) {
      const i64 n = i64{blockIdx.x} * kOutputs + o * kWarps + warp;
BRRR_UNROLL
      for (int g = 0; g < kGroups; ++g) {
        const int kg = (g * 32 + lane) * G;  // this lane's group: k0 + kg .. k0 + kg + G - 1
        const int count = len - kg < G ? len - kg : G;
        if (n < N && count > 0) load_weights<G>(wv[o][g], w + n * K + k0 + kg, count, vector);
      }
    }
BRRR_UNROLL
    for (int o = 0; o < kOutputsPerWarp; ++o) {
      if (i64{blockIdx.x} * kOutputs + o * kWarps + warp >= N) break;  // the same for the whole warp
      T acc[kRows];
      for (int r = 0; r < kRows; ++r) acc[r] = T(0);
BRRR_UNROLL
      for (int g = 0; g < kGroups; ++g) {
        const int kg = (g * 32 + lane) * G;
        const int count = len - kg < G ? len - kg : G;
        if (count <= 0) break;
        for (int r = 0; r < kRows; ++r) {
          if (r >= rows) break;
          T xv[G];
          load_stage<G>(xv, stage + r * kChunk + kg, lane);
BRRR_UNROLL
          for (int j = 0; j < G; ++j)
            if (j < count) acc[r] = fma_of(wv[o][g][j], xv[j], acc[r]);
        }
      }
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        const T s = warp_sum(acc[r]);
        if (lane == 0) sums[r][o * kWarps + warp] = s;
      }
    }
    __syncthreads();
    // One thread an output, so a row's 16 outputs are one store of consecutive addresses (lane 0
    // of each warp storing its own would make each 4-byte output a 32-byte sector of its own).
    for (int i = threadIdx.x; i < rows * kOutputs; i += blockDim.x) {
      const int r = i / kOutputs, j = i % kOutputs;
      const i64 n = i64{blockIdx.x} * kOutputs + j, at = (m0 + r) * N + n;
      if (n >= N) continue;
      if (split) partials[i64{blockIdx.y} * M * N + at] = sums[r][j];
      else y[at] = finish(sums[r][j], bias, n, epilogue, y + at);
    }
  }
}

// y = the chunks' sums added in chunk order, then the bias and the epilogue: one thread an output.
template <class T>
__global__ void linear_rows_combine(T* y, const T* partials, const T* bias, i64 M, i64 N, int chunks, int epilogue) {
  const i64 MN = M * N;
  for (i64 i = i64{blockIdx.x} * blockDim.x + threadIdx.x; i < MN; i += i64{gridDim.x} * blockDim.x) {
    T s = partials[i];
    for (int c = 1; c < chunks; ++c) s += partials[c * MN + i];
    y[i] = finish(s, bias, i % N, epilogue, y + i);
  }
}

// ---------------------------------------------------------------------------------------------
// The tiled variant, for a prefill's hundreds of rows: the same sums in the same order, so a
// prompt prefilled whole keeps the bits of its tokens decoded one at a time.
//
// With M rows the kernel above makes ceil(M / 8) passes over each block's chunk of W: every
// weight is loaded from L1 or L2 M / 8 times, and each load serves 8 rows. A GEMM would instead
// keep a tile of W and a tile of x in shared memory and use each value many times; but a GEMM
// sums each output in its own order (its K loop, its split of K over warps), and a prefilled
// token would then differ from the same token decoded, in the last bits of every logit.
//
// The order above is: within a chunk, "lane" l (0 .. 31) of an output's warp adds the products
// of its groups of G = 16 / sizeof(W) values, group g covering chunk positions (32 g + l) G to
// (32 g + l) G + G - 1, in increasing g then position; then warp_sum's butterfly adds the 32
// lanes. Nothing in it needs the 32 partial sums of an output to come from loads the lanes
// made themselves, only that lane l of some warp holds exactly that sum. So here a block takes a
// tile of 16 rows by 16 outputs and one chunk, and stages the chunk a slice at a time, slice g
// being the 32 G positions of group g of every lane: 16 rows of x and 16 rows of W in shared
// memory. Each warp owns 4 rows by 8 outputs of the tile; its lane l keeps the 32 partial sums
// of lane l for all of them, adding slice after slice in the same g-then-position order, and
// warp_sum ends each of the 32 outputs as above. The chunks' sums go through the same
// linear_rows_combine. Padding (rows past M, outputs past N, positions past K) is zeros, whose
// products add +0 to sums that start at +0 and so are never -0: the same bits as skipping them.
//
// Each value staged is used 16 times (by the tile's other side) instead of once per 8 rows, and
// each lane reads G values of a row at once from shared memory: 12 16-byte loads for 128 fused
// multiply-adds (float32 weights). Not timed on a GPU yet.

constexpr int kTileRows = 16, kTileOutputs = 16;   // a block's tile of y
constexpr int kWarpRows = 4, kWarpOutputs = 8;     // a warp's part: 4 x 2 warps cover the tile
static_assert((kTileRows / kWarpRows) * (kTileOutputs / kWarpOutputs) == kWarps, "the warps cover the tile");
static_assert(kWarpRows * kWarpOutputs == 32, "one output of a warp's part per lane, to store");
static_assert(kTileRows == kTileOutputs, "the two stages are filled by one loop");

template <class T, class W>
__global__ void __launch_bounds__(kWarps * 32)
    linear_rows_tile(T* y, T* partials, const T* x, const W* w, const T* bias, i64 M, i64 N, i64 K, int epilogue) {
  constexpr int G = 16 / static_cast<int>(sizeof(W));  // the group of one lane, as above
  constexpr int kSlice = 32 * G;                       // one group of every lane
  constexpr int kSlices = kChunk / kSlice;
  __shared__ float4 xs_storage[kTileRows * kSlice * sizeof(T) / 16];
  __shared__ float4 ws_storage[kTileOutputs * kSlice * sizeof(T) / 16];
  T* xs = reinterpret_cast<T*>(xs_storage);  // (kTileRows, kSlice), x staged as the products take it
  T* ws = reinterpret_cast<T*>(ws_storage);  // (kTileOutputs, kSlice), W widened
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (warp / (kTileOutputs / kWarpOutputs)) * kWarpRows;
  const int out0 = (warp % (kTileOutputs / kWarpOutputs)) * kWarpOutputs;
  const i64 m0 = i64{blockIdx.y} * kTileRows, n0 = i64{blockIdx.x} * kTileOutputs;
  const i64 k0 = i64{blockIdx.z} * kChunk;
  const int len = static_cast<int>(K - k0 < kChunk ? K - k0 : kChunk);
  T acc[kWarpRows][kWarpOutputs];
  for (int r = 0; r < kWarpRows; ++r)
    for (int o = 0; o < kWarpOutputs; ++o) acc[r][o] = T(0);
  for (int g = 0; g < kSlices && g * kSlice < len; ++g) {
    __syncthreads();  // the last slice has been read
    for (int i = threadIdx.x; i < kTileRows * kSlice; i += blockDim.x) {
      const int r = i / kSlice, k = g * kSlice + i % kSlice;
      xs[i] = m0 + r < M && k < len ? staged<W>(x[(m0 + r) * K + k0 + k]) : T(0);
      ws[i] = n0 + r < N && k < len ? widen(w[(n0 + r) * K + k0 + k]) : T(0);  // kTileOutputs == kTileRows
    }
    __syncthreads();
    T xv[kWarpRows][G], wv[kWarpOutputs][G];
BRRR_UNROLL
    for (int r = 0; r < kWarpRows; ++r) load_stage<G>(xv[r], xs + (row0 + r) * kSlice + lane * G, lane);
BRRR_UNROLL
    for (int o = 0; o < kWarpOutputs; ++o) load_stage<G>(wv[o], ws + (out0 + o) * kSlice + lane * G, lane);
BRRR_UNROLL
    for (int j = 0; j < G; ++j)
BRRR_UNROLL
      for (int r = 0; r < kWarpRows; ++r)
BRRR_UNROLL
        for (int o = 0; o < kWarpOutputs; ++o) acc[r][o] = fma_of(wv[o][j], xv[r][j], acc[r][o]);
  }
  // Each output's 32 lanes added by warp_sum (every lane gets the sum; lane r * 8 + o keeps it),
  // then the tile written from shared memory one output a thread: a row's 16 outputs one store
  // of consecutive addresses, where each lane storing its own would be a 32-byte sector each.
  __shared__ T sums[kTileRows][kTileOutputs];
  T mine = T(0);
BRRR_UNROLL
  for (int r = 0; r < kWarpRows; ++r)
BRRR_UNROLL
    for (int o = 0; o < kWarpOutputs; ++o) {
      const T s = warp_sum(acc[r][o]);
      if (lane == r * kWarpOutputs + o) mine = s;
    }
  sums[row0 + lane / kWarpOutputs][out0 + lane % kWarpOutputs] = mine;
  __syncthreads();
  const bool split = gridDim.z > 1;
  for (int i = threadIdx.x; i < kTileRows * kTileOutputs; i += blockDim.x) {
    const int r = i / kTileOutputs, o = i % kTileOutputs;
    const i64 m = m0 + r, n = n0 + o, at = m * N + n;
    if (m >= M || n >= N) continue;
    if (split) partials[i64{blockIdx.z} * M * N + at] = sums[r][o];
    else y[at] = finish(sums[r][o], bias, n, epilogue, y + at);
  }
}

// The checks of every variant; false when there is nothing to compute.
template <class T, class W>
bool check_call(T* y, const T* x, const W* w, i64 M, i64 N, i64 K, int epilogue) {
  BRRR_CHECK(epilogue >= kStore && epilogue <= kGeluErf, "linear_rows: epilogue ", epilogue,
             " is not 0 (store), 1 (add), 2 (GELU, tanh) or 3 (GELU, erf)");
  BRRR_CHECK(M >= 0 && N >= 0 && K >= 0, "linear_rows: sizes must not be negative, got M = ", M, ", N = ", N,
             ", K = ", K);
  if (M == 0 || N == 0) return false;
  BRRR_CHECK(K >= 1, "linear_rows: K must be positive on the GPU, got 0 (M = ", M, ", N = ", N, ")");
  BRRR_CHECK(y && x && w, "linear_rows: y, x and w must be given");
  BRRR_CHECK(ceil_div(K, kChunk) <= 65535, "linear_rows: K = ", K, " (", ceil_div(K, kChunk), " chunks of ", kChunk,
             ") is more than one launch's grid holds");
  return true;
}

// Where K has more than one chunk, the chunks' sums go through the workspace to the combine.
template <class T>
T* partials_for(i64 chunks, i64 M, i64 N, Stream stream) {
  if (chunks == 1) return nullptr;
  return static_cast<T*>(workspace(static_cast<std::size_t>(chunks * M * N) * sizeof(T), stream));
}
template <class T>
void combine(T* y, const T* partials, const T* bias, i64 M, i64 N, i64 chunks, int epilogue, Stream stream) {
  if (chunks > 1)
    BRRR_LAUNCH((linear_rows_combine<T>), grid_for(M * N, 256, 4096), 256, 0, stream, y, partials, bias, M, N,
                static_cast<int>(chunks), epilogue);
}

template <class T, class W>
void linear_rows_split_k(T* y, const T* x, const W* w, const T* bias, i64 M, i64 N, i64 K, int epilogue,
                         Stream stream) {
  if (!check_call(y, x, w, M, N, K, epilogue)) return;
  const i64 chunks = ceil_div(K, kChunk), blocks = ceil_div(N, kOutputs);
  BRRR_CHECK(blocks <= INT_MAX, "linear_rows: N = ", N, " is more than one launch's grid holds");
  // 16-byte loads of W when every row, chunk and group starts on 16 bytes.
  const bool vector = aligned16(w) && (K * static_cast<i64>(sizeof(W))) % 16 == 0;
  T* partials = partials_for<T>(chunks, M, N, stream);
  BRRR_LAUNCH((linear_rows_chunk<T, W>), dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(chunks)),
              kWarps * 32, 0, stream, y, partials, x, w, bias, M, N, K, epilogue, vector);
  combine(y, partials, bias, M, N, chunks, epilogue, stream);
}

template <class T, class W>
void linear_rows_tiled(T* y, const T* x, const W* w, const T* bias, i64 M, i64 N, i64 K, int epilogue,
                       Stream stream) {
  if (!check_call(y, x, w, M, N, K, epilogue)) return;
  const i64 chunks = ceil_div(K, kChunk), columns = ceil_div(N, kTileOutputs), tiles = ceil_div(M, kTileRows);
  BRRR_CHECK(columns <= INT_MAX && tiles <= 65535, "linear_rows: M = ", M, " or N = ", N,
             " is more than one launch's grid holds");
  T* partials = partials_for<T>(chunks, M, N, stream);
  BRRR_LAUNCH((linear_rows_tile<T, W>),
              dim3(static_cast<unsigned>(columns), static_cast<unsigned>(tiles), static_cast<unsigned>(chunks)),
              kWarps * 32, 0, stream, y, partials, x, w, bias, M, N, K, epilogue);
  combine(y, partials, bias, M, N, chunks, epilogue, stream);
}

// The default: the GEMV for a decoding step's few rows, where it reads each weight once, and
// the tiles for a prefill's many, where it would read each weight M / 8 times. Both give the
// same bits, so where the line falls changes the time only. 64 rows is a choice, not yet a
// measurement: a decoding batch of up to 64 keeps the GEMV, written for a decoding step.
constexpr i64 kGemvRows = 64;

template <class T, class W>
void linear_rows_by_rows(T* y, const T* x, const W* w, const T* bias, i64 M, i64 N, i64 K, int epilogue,
                         Stream stream) {
  if (M > kGemvRows) linear_rows_tiled<T, W>(y, x, w, bias, M, N, K, epilogue, stream);
  else linear_rows_split_k<T, W>(y, x, w, bias, M, N, K, epilogue, stream);
}

}  // namespace

void register_linear_rows_kernels() {
  const DeviceType cuda = DeviceType::CUDA;
  const VariantMeta split_k = about(
      "a GEMV split over K: chunks of 512, a warp per 2 rows of W in 16-byte loads, x in shared memory, then "
      "the chunks added in order (rows/linear_rows.cu)");
  const VariantMeta tiled = about(
      "tiles of 16 rows by 16 outputs staged in shared memory, each lane summing what split_k's lane sums, in "
      "its order: split_k's bits for a prefill's many rows (rows/linear_rows.cu)");
  const VariantMeta by_rows = about("split_k for up to 64 rows, tiled above: the same bits either way (rows/linear_rows.cu)");
  add(op::linear_rows<float>, cuda, "by_rows", &linear_rows_by_rows<float, float>, 20, by_rows);
  add(op::linear_rows<double>, cuda, "by_rows", &linear_rows_by_rows<double, double>, 20, by_rows);
  add(op::linear_rows_on_bf16, cuda, "by_rows", &linear_rows_by_rows<float, brrr::bf16>, 20, by_rows);
  add(op::linear_rows<float>, cuda, "split_k", &linear_rows_split_k<float, float>, 10, split_k);
  add(op::linear_rows<double>, cuda, "split_k", &linear_rows_split_k<double, double>, 10, split_k);
  add(op::linear_rows_on_bf16, cuda, "split_k", &linear_rows_split_k<float, brrr::bf16>, 10, split_k);
  add(op::linear_rows<float>, cuda, "tiled", &linear_rows_tiled<float, float>, 5, tiled);
  add(op::linear_rows<double>, cuda, "tiled", &linear_rows_tiled<double, double>, 5, tiled);
  add(op::linear_rows_on_bf16, cuda, "tiled", &linear_rows_tiled<float, brrr::bf16>, 5, tiled);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
