// kernels/cuda/reduce.cu: sum and max over the middle axis of (outer, R, inner) on the GPU, and
// the backward of max. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cpu/reduce.cpp (the CPU reference), kernels/cuda/elementwise.cu.
// Read next: kernels/cuda/nn.cu.
//
// Two layouts, two kernels. When inner == 1 (summing the last dim) each output is a
// contiguous row of R values: a block reduces a row, its threads reading neighbouring values
// (coalesced), then combining their partials with warp shuffles (common.h's block_sum). When
// inner > 1 the R values of one output are `inner` apart, but the outputs next to each other
// are next to each other in memory: a block takes a tile of 32 neighbouring columns, each of
// its 8 warps sums every 8th row of the tile (a warp reads 32 neighbouring values), and the 8
// partials of each column are added in shared memory.
//
// Reproducibility (DESIGN.md): no float atomics. Every partial is combined in an order fixed by
// the shapes alone, so the same input gives the same bits on every run. Sums accumulate in
// double, as the CPU's do, so float results agree with the CPU to the last bit or two.
//
// A few long reductions (outer * inner small, R large: a full sum, a bias gradient) would
// leave most of the GPU idle with one block per output, so R is split into chunks: pass 1
// writes each chunk's partial sum (outer, splits, inner) to the workspace, pass 2 sums the
// partials, in order, with the same kernels.
//
// Compiled twice (see simt.h): by nvcc into brrr::kernels::cuda, by g++ into
// brrr::kernels::emu. Each op is variant "simple" (priority 10).
#include "kernels/cuda/reduce.h"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

using Acc = double;  // what sums accumulate in

constexpr int kTileCols = 32, kTileRows = 8;  // the block of the inner > 1 kernels: (32, 8)
// The grid's cap; the kernels loop over further tasks. The emulator's cap is small, so that its
// tests run blocks over several tasks: the barrier between one task and the next is then
// tested too (a block's result does not depend on which block runs a task).
constexpr int kMaxBlocks = BRRR_EMULATOR ? 8 : 1 << 16;
// Splitting R: aim for this many blocks, but give each block at least this much of R.
constexpr std::int64_t kTargetBlocks = 512;
constexpr std::int64_t kMinRowChunk = 8192;  // values of a row (inner == 1)
constexpr std::int64_t kMinColChunk = 256;   // rows of a tile (inner > 1)

__device__ inline std::int64_t smaller(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// A value as the sums take it: float and double as they are, bf16 widened (exactly) first.
__device__ inline Acc acc_of(float x) { return x; }
__device__ inline Acc acc_of(double x) { return x; }
__device__ inline Acc acc_of(brrr::bf16 x) { return float_of(x); }

// Threads for a block that reduces rows of `length` values: a multiple of 32, at most 256.
int row_threads(std::int64_t length) {
  return static_cast<int>(std::min<std::int64_t>(256, std::max<std::int64_t>(32, ceil_div(length, 32) * 32)));
}

// ---------------------------------------------------------------------------------------------
// sum: one pass of (outer, R, inner) -> (outer, splits, inner), chunk = ceil(R / splits)
// values of R per output. splits == 1 is the whole sum; In and Out differ in pass 2 (double
// partials in, T out) and in pass 1 of a split sum (T in, double partials out).

template <class In, class Out>
__global__ void sum_rows_kernel(Out* out, const In* in, std::int64_t tasks, std::int64_t R, std::int64_t chunk,
                                std::int64_t splits) {
  __shared__ Acc scratch[32];
  for (std::int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {  // task = (o, s)
    const std::int64_t o = task / splits, begin = (task % splits) * chunk, end = smaller(R, begin + chunk);
    const In* row = in + o * R;
    Acc sum = 0;
    for (std::int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) sum += acc_of(row[r]);
    sum = block_sum(sum, scratch);  // every thread of the block calls it, on every task
    if (threadIdx.x == 0) out[task] = static_cast<Out>(sum);
  }
}

template <class In, class Out>
__global__ void sum_cols_kernel(Out* out, const In* in, std::int64_t tasks, std::int64_t R, std::int64_t inner,
                                std::int64_t tiles, std::int64_t chunk, std::int64_t splits) {
  __shared__ Acc partial[kTileRows][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (std::int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {  // task = (o, tile, s)
    const std::int64_t s = task % splits, tile = task / splits % tiles, o = task / splits / tiles;
    const std::int64_t j = tile * kTileCols + tx, begin = s * chunk, end = smaller(R, begin + chunk);
    Acc sum = 0;
    if (j < inner)
      for (std::int64_t r = begin + ty; r < end; r += kTileRows) sum += acc_of(in[(o * R + r) * inner + j]);
    partial[ty][tx] = sum;
    __syncthreads();
    if (ty == 0 && j < inner) {
      Acc total = 0;
      for (int y = 0; y < kTileRows; ++y) total += partial[y][tx];
      out[(o * splits + s) * inner + j] = static_cast<Out>(total);
    }
    __syncthreads();  // partial is rewritten by the next task
  }
}

template <class In, class Out>
void sum_pass(Out* out, const In* in, std::int64_t outer, std::int64_t R, std::int64_t inner, std::int64_t splits,
              Stream stream) {
  const std::int64_t chunk = ceil_div(R, splits);
  if (inner == 1) {
    const std::int64_t tasks = outer * splits;
    BRRR_LAUNCH((sum_rows_kernel<In, Out>), grid_for(tasks, 1, kMaxBlocks), row_threads(chunk), 0, stream, out, in,
                tasks, R, chunk, splits);
  } else {
    const std::int64_t tiles = ceil_div(inner, kTileCols), tasks = outer * tiles * splits;
    BRRR_LAUNCH((sum_cols_kernel<In, Out>), grid_for(tasks, 1, kMaxBlocks), dim3(kTileCols, kTileRows), 0, stream,
                out, in, tasks, R, inner, tiles, chunk, splits);
  }
}

// ---------------------------------------------------------------------------------------------
// max: the largest value and the index of its first occurrence, NaN counting as largest (as
// the CPU does). Threads scan their share of R in increasing order and then combine with
// `beats`, which orders (value, index) pairs completely: NaN above everything, then by
// value, equal values (and two NaNs) by the smaller index. Any order of combining gives the
// same winner, which is exactly the one the CPU's left-to-right scan picks.

template <class T>
__device__ inline bool beats(T v, std::int64_t i, T best, std::int64_t best_i) {
  const bool v_nan = v != v, best_nan = best != best;
  if (v_nan != best_nan) return v_nan;
  if (v_nan || v == best) return i < best_i;
  return v > best;
}

// The winner among the 32 lanes of a warp, in every lane. std::int64_t travels as long long,
// the type every CUDA version has a shuffle for.
template <class T>
__device__ inline void warp_argmax(T& v, std::int64_t& i) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const T other_v = __shfl_xor_sync(0xffffffffu, v, offset);
    const std::int64_t other_i = __shfl_xor_sync(0xffffffffu, static_cast<long long>(i), offset);
    if (beats(other_v, other_i, v, i)) {
      v = other_v;
      i = other_i;
    }
  }
}

// inner == 1: one block per row. A thread starts from (-inf, R), which any element beats.
template <class T>
__global__ void max_rows_kernel(T* out, std::int64_t* index, const T* in, std::int64_t outer, std::int64_t R) {
  __shared__ T warp_v[32];
  __shared__ std::int64_t warp_i[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (std::int64_t o = blockIdx.x; o < outer; o += gridDim.x) {
    const T* row = in + o * R;
    T v = minus_infinity<T>();
    std::int64_t i = R;
    for (std::int64_t r = threadIdx.x; r < R; r += blockDim.x) {
      const T x = row[r];
      if (beats(x, r, v, i)) {
        v = x;
        i = r;
      }
    }
    warp_argmax(v, i);
    __syncthreads();  // the previous row's warp 0 has read warp_v
    if (lane == 0) {
      warp_v[warp] = v;
      warp_i[warp] = i;
    }
    __syncthreads();
    if (warp == 0) {
      v = lane < warps ? warp_v[lane] : minus_infinity<T>();
      i = lane < warps ? warp_i[lane] : R;
      warp_argmax(v, i);
      if (lane == 0) {
        out[o] = v;
        if (index) index[o] = i;
      }
    }
  }
}

// inner > 1: a (32, 8) block per tile of 32 columns, as for the sum.
template <class T>
__global__ void max_cols_kernel(T* out, std::int64_t* index, const T* in, std::int64_t tasks, std::int64_t R,
                                std::int64_t inner, std::int64_t tiles) {
  __shared__ T part_v[kTileRows][kTileCols];
  __shared__ std::int64_t part_i[kTileRows][kTileCols];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (std::int64_t task = blockIdx.x; task < tasks; task += gridDim.x) {  // task = (o, tile)
    const std::int64_t o = task / tiles, j = task % tiles * kTileCols + tx;
    T v = minus_infinity<T>();
    std::int64_t i = R;
    if (j < inner) {
      for (std::int64_t r = ty; r < R; r += kTileRows) {
        const T x = in[(o * R + r) * inner + j];
        if (beats(x, r, v, i)) {
          v = x;
          i = r;
        }
      }
    }
    part_v[ty][tx] = v;
    part_i[ty][tx] = i;
    __syncthreads();
    if (ty == 0 && j < inner) {
      for (int y = 1; y < kTileRows; ++y) {
        if (beats(part_v[y][tx], part_i[y][tx], v, i)) {
          v = part_v[y][tx];
          i = part_i[y][tx];
        }
      }
      out[o * inner + j] = v;
      if (index) index[o * inner + j] = i;
    }
    __syncthreads();
  }
}

// ---------------------------------------------------------------------------------------------
// max backward: dx = 0, then dx[o, index[o, j], j] = dout[o, j]. Two launches on one stream
// run in order; every (o, j) writes its own element, so the scatter has no races.

template <class T>
__global__ void zero_kernel(T* x, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = T(0);
}

template <class T>
__global__ void max_scatter_kernel(T* dx, const T* dout, const std::int64_t* index, std::int64_t n, std::int64_t R,
                                   std::int64_t inner) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += stride) {
    const std::int64_t o = t / inner, j = t % inner;
    dx[(o * R + index[t]) * inner + j] = dout[t];
  }
}

void check_sizes(const char* op, std::int64_t outer, std::int64_t R, std::int64_t inner) {
  BRRR_CHECK(outer >= 0 && R >= 0 && inner >= 0, op, ": sizes (outer, R, inner) = (", outer, ", ", R, ", ", inner,
             ") must not be negative");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The host functions: the registered signatures of kernels/signatures.h.

// In: the stored values' type (T, or bf16 for sum_dim on bf16 data, whose sums are T = float).
template <class T, class In>
void sum_dim_of(T* out, const In* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream stream) {
  check_sizes("sum_dim", outer, R, inner);
  if (outer == 0 || inner == 0) return;
  const std::int64_t blocks = inner == 1 ? outer : outer * ceil_div(inner, kTileCols);
  const std::int64_t min_chunk = inner == 1 ? kMinRowChunk : kMinColChunk;
  const std::int64_t splits =
      std::max<std::int64_t>(1, std::min(ceil_div(R, min_chunk), ceil_div(kTargetBlocks, blocks)));
  if (splits == 1) return sum_pass(out, in, outer, R, inner, 1, stream);
  Acc* partial = static_cast<Acc*>(workspace(static_cast<std::size_t>(outer * splits * inner) * sizeof(Acc), stream));
  sum_pass(partial, in, outer, R, inner, splits, stream);   // (outer, splits, inner)
  sum_pass(out, partial, outer, splits, inner, 1, stream);  // summed in order of the splits
}

template <class T>
void sum_dim_simple(T* out, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner, Stream stream) {
  sum_dim_of(out, in, outer, R, inner, stream);
}

// On bf16 data (chapter 18; a linear layer's bias gradient): the same passes, the values widened
// as they are read, so the bits of sum_dim<float> on a widened copy without the copy's pass.
void sum_dim_bf16_simple(float* out, const brrr::bf16* in, std::int64_t outer, std::int64_t R, std::int64_t inner,
                         Stream stream) {
  sum_dim_of(out, in, outer, R, inner, stream);
}

template <class T>
void max_dim_simple(T* out, std::int64_t* index, const T* in, std::int64_t outer, std::int64_t R, std::int64_t inner,
                    Stream stream) {
  check_sizes("max_dim", outer, R, inner);
  if (outer == 0 || inner == 0) return;
  BRRR_CHECK(R > 0, "max_dim: cannot take the max over 0 elements (outer, R, inner) = (", outer, ", ", R, ", ", inner,
             ")");
  if (inner == 1) {
    BRRR_LAUNCH(max_rows_kernel<T>, grid_for(outer, 1, kMaxBlocks), row_threads(R), 0, stream, out, index, in, outer,
                R);
  } else {
    const std::int64_t tiles = ceil_div(inner, kTileCols), tasks = outer * tiles;
    BRRR_LAUNCH(max_cols_kernel<T>, grid_for(tasks, 1, kMaxBlocks), dim3(kTileCols, kTileRows), 0, stream, out, index,
                in, tasks, R, inner, tiles);
  }
}

template <class T>
void max_dim_backward_simple(T* dx, const T* dout, const std::int64_t* index, std::int64_t outer, std::int64_t R,
                             std::int64_t inner, Stream stream) {
  check_sizes("max_dim_backward", outer, R, inner);
  const std::int64_t n = outer * R * inner, outputs = outer * inner;
  if (n == 0) return;
  BRRR_LAUNCH(zero_kernel<T>, grid_for(n, 256, 4096), 256, 0, stream, dx, n);
  BRRR_LAUNCH(max_scatter_kernel<T>, grid_for(outputs, 256, 4096), 256, 0, stream, dx, dout, index, outputs, R, inner);
}

#define BRRR_INSTANTIATE(T)                                                                                  \
  template void sum_dim_simple<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t, Stream);          \
  template void max_dim_simple<T>(T*, std::int64_t*, const T*, std::int64_t, std::int64_t, std::int64_t,    \
                                  Stream);                                                                   \
  template void max_dim_backward_simple<T>(T*, const T*, const std::int64_t*, std::int64_t, std::int64_t,   \
                                           std::int64_t, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

namespace {
template <class T>
void register_reduce() {
  const DeviceType cuda = DeviceType::CUDA;
  add(op::sum_dim<T>, cuda, "simple", &sum_dim_simple<T>, 10, about("a block per output, partials combined in a fixed order"));
  add(op::max_dim<T>, cuda, "simple", &max_dim_simple<T>, 10, about("a block per output, the first largest value"));
  add(op::max_dim_backward<T>, cuda, "simple", &max_dim_backward_simple<T>, 10,
      about("one thread per element of dx: dout where its index was the max, else 0"));
}
}  // namespace

void register_reduce_kernels() {
  register_reduce<float>();
  register_reduce<double>();
  add(op::sum_dim_on_bf16, DeviceType::CUDA, "simple", &sum_dim_bf16_simple, 10,
      about("sum_dim's blocks reading bf16 (widened as read), float32 out: sum_dim<float>'s bits"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
