// kernels/cuda/nn.cu: embedding, softmax and log-softmax on the GPU, forward and backward.
// Chapter 10 (the GPU and the emulator); the GPT of chapter 07 runs on them once it moves to
// the GPU. Read before: kernels/cpu/nn.cpp (the CPU reference), kernels/cuda/reduce.cu.
// Read next: kernels/cuda/gelu.cu.
//
// Softmax and log-softmax work on rows of (N, C): one block per row, its threads striding
// through the row (coalesced), with block-wide max and sum (warp shuffles, then shared memory
// across warps). Subtracting the row's max before exp keeps exp from overflowing and changes
// nothing mathematically. Sums accumulate in double, as the CPU's do.
//
// Embedding backward adds rows of dout into rows of dweight, and two rows of dout may go to
// the same row of dweight (a token that appears twice). Float atomicAdd would make the order
// of those additions, and so the last bits, differ from run to run; instead each vocabulary
// row belongs to exactly one block, which adds its tokens' rows in order (see below).
//
// Compiled twice (see simt.h): by nvcc into brrr::kernels::cuda, by g++ into
// brrr::kernels::emu. Each op is variant "simple" (priority 10).
#include "kernels/cuda/nn.h"

#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

using Acc = double;  // what row sums accumulate in
// The grid's cap; blocks loop over further rows. Small in the emulator, so that its tests run
// blocks over several rows (and so test what separates one row from the next).
constexpr int kMaxRowBlocks = BRRR_EMULATOR ? 8 : 1 << 16;


// Threads for one row of C values: a multiple of 32, at most 512.
int row_threads(std::int64_t C) {
  return static_cast<int>(std::min<std::int64_t>(512, std::max<std::int64_t>(32, ceil_div(C, 32) * 32)));
}

// The row's max, or 0 when every value is -inf (a fully masked row: 0 avoids inf - inf; the
// row then comes out NaN, as on the CPU and in PyTorch). NaNs are skipped.
template <class T>
__device__ inline T row_max(const T* row, std::int64_t C, T* scratch) {
  T m = minus_infinity<T>();
  for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) m = max(m, row[c]);
  return block_max(m, scratch);
}

// ---------------------------------------------------------------------------------------------
// embedding forward: out[n, :] = weight[idx[n], :], (N, C). A block copies rows, its threads
// striding along C; a Pack of 16 bytes at a time when C and both pointers allow it.

template <class T>
struct alignas(16) Pack {
  static constexpr int size = 16 / sizeof(T);
  T v[size];
};

template <class T>
__global__ void embedding_forward_kernel(T* out, const T* weight, const std::int32_t* idx, std::int64_t N,
                                         std::int64_t C, bool packed) {
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* src = weight + static_cast<std::int64_t>(idx[n]) * C;
    T* dst = out + n * C;
    if (packed) {
      const std::int64_t packs = C / Pack<T>::size;
      for (std::int64_t p = threadIdx.x; p < packs; p += blockDim.x)
        reinterpret_cast<Pack<T>*>(dst)[p] = reinterpret_cast<const Pack<T>*>(src)[p];
    } else {
      for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// check_indices: every index in range, or allowed, with no read back to the host (the
// framework reads first_bad at the next copy to the host it makes anyway). A bad index
// becomes 0 in safe, so the embedding or cross-entropy kernel after it stays in bounds.

__global__ void check_indices_kernel(std::int32_t* safe, std::int32_t* first_bad, const std::int32_t* idx,
                                     std::int64_t N, std::int64_t limit, std::int64_t allowed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < N; i += stride) {
    const std::int64_t v = idx[i];
    const bool ok = (v >= 0 && v < limit) || v == allowed;
    safe[i] = ok ? idx[i] : 0;
    if (!ok) atomicMin(first_bad, static_cast<int>(i));
  }
}

// ---------------------------------------------------------------------------------------------
// embedding backward: dweight[idx[n], :] += dout[n, :] for n = 0, 1, ..., N - 1.
//
// Block (b, y) owns the vocabulary rows v with v % G == b (G = gridDim.x, so the popular
// low token ids spread over all blocks) and the columns y * blockDim.x + threadIdx.x. It
// reads idx a tile of blockDim.x tokens at a time: each thread loads one token and votes
// whether the block owns it; __ballot_sync turns each warp's votes into a 32-bit mask, and
// the block then visits only its own tokens, in the order of n (warp by warp, bit by bit).
// For each it adds that row of dout to its row of dweight: every (row, column) of dweight
// has one owner thread, and its additions come in the order of n, exactly the order of the
// CPU's loop, so the result is the same to the bit and the same on every run.
//
// Candid note: each block still reads all of idx (G * N reads in all, cheap next to dout),
// and a token that fills most of the batch puts most of the additions on one block, one
// after another. Sorting idx first (llm.c's deterministic encoder_backward) balances that.

template <class T>
__global__ void embedding_backward_kernel(T* dweight, const T* dout, const std::int32_t* idx, std::int64_t N,
                                          std::int64_t C) {
  __shared__ std::int32_t tokens[256];  // blockDim.x <= 256
  __shared__ unsigned owned[8];         // per warp of the tile: bit l = lane l's token is ours
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  const std::int32_t owner = static_cast<std::int32_t>(blockIdx.x), owners = static_cast<std::int32_t>(gridDim.x);
  for (std::int64_t n0 = 0; n0 < N; n0 += blockDim.x) {
    __syncthreads();  // everyone is done with the previous tile
    bool ours = false;
    if (n0 + threadIdx.x < N) {
      const std::int32_t v = idx[n0 + threadIdx.x];
      tokens[threadIdx.x] = v;
      ours = v % owners == owner;
    }
    const unsigned votes = __ballot_sync(0xffffffffu, ours);
    if (lane == 0) owned[warp] = votes;
    __syncthreads();
    if (c >= C) continue;  // after the barriers: this thread has no column, but loads tokens
    for (int w = 0; w < warps; ++w) {
      for (unsigned bits = owned[w]; bits != 0; bits &= bits - 1) {  // lowest set bit first
        const int k = w * 32 + __ffs(static_cast<int>(bits)) - 1;
        dweight[static_cast<std::int64_t>(tokens[k]) * C + c] += dout[(n0 + k) * C + c];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// softmax: out = exp(x - max) / sum(exp(x - max)). Three passes over the row (max, sum,
// write); the second and third read it from cache. exp is taken in T and summed in double,
// as on the CPU.

template <class T>
__global__ void softmax_forward_kernel(T* out, const T* x, std::int64_t N, std::int64_t C) {
  __shared__ T max_scratch[32];
  __shared__ Acc sum_scratch[32];
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* row = x + n * C;
    T* o = out + n * C;
    T m = row_max(row, C, max_scratch);
    if (m == minus_infinity<T>()) m = T(0);
    Acc sum = 0;
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += static_cast<Acc>(exp_of(row[c] - m));
    sum = block_sum(sum, sum_scratch);
    const T inv = static_cast<T>(1.0 / sum);
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) o[c] = exp_of(row[c] - m) * inv;
  }
}

// dx = out * (dout - sum(dout * out)): the Jacobian of softmax applied to dout.
template <class T>
__global__ void softmax_backward_kernel(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C) {
  __shared__ Acc scratch[32];
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* g = dout + n * C;
    const T* y = out + n * C;
    Acc dot = 0;
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) dot += static_cast<Acc>(g[c]) * y[c];
    const T d = static_cast<T>(block_sum(dot, scratch));
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) dx[n * C + c] = y[c] * (g[c] - d);
  }
}

// log_softmax: out = x - lse, lse = max + log(sum(exp(x - max))) in double. A row of -inf
// has lse = -inf (and comes out NaN), as on the CPU.
template <class T>
__global__ void log_softmax_forward_kernel(T* out, const T* x, std::int64_t N, std::int64_t C) {
  __shared__ T max_scratch[32];
  __shared__ Acc sum_scratch[32];
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* row = x + n * C;
    const T m = row_max(row, C, max_scratch);
    Acc sum = 0;
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += ::exp(static_cast<Acc>(row[c] - m));
    sum = block_sum(sum, sum_scratch);
    const Acc lse = m == minus_infinity<T>() ? static_cast<Acc>(m) : static_cast<Acc>(m) + ::log(sum);
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) out[n * C + c] = static_cast<T>(row[c] - lse);
  }
}

// dx = dout - exp(out) * sum(dout), since exp(out) is the softmax.
template <class T>
__global__ void log_softmax_backward_kernel(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C) {
  __shared__ Acc scratch[32];
  for (std::int64_t n = blockIdx.x; n < N; n += gridDim.x) {
    const T* g = dout + n * C;
    const T* y = out + n * C;
    Acc sum = 0;
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x) sum += static_cast<Acc>(g[c]);
    sum = block_sum(sum, scratch);
    for (std::int64_t c = threadIdx.x; c < C; c += blockDim.x)
      dx[n * C + c] = static_cast<T>(g[c] - ::exp(static_cast<Acc>(y[c])) * sum);
  }
}

void check_rows(const char* op, std::int64_t N, std::int64_t C) {
  BRRR_CHECK(N >= 0 && C >= 0, op, ": sizes (N, C) = (", N, ", ", C, ") must not be negative");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The host functions: the registered signatures of kernels/signatures.h.

template <class T>
void embedding_forward_simple(T* out, const T* weight, const std::int32_t* idx, std::int64_t N, std::int64_t C,
                              Stream stream) {
  check_rows("embedding_forward", N, C);
  if (N == 0 || C == 0) return;
  const bool packed = C % Pack<T>::size == 0 && aligned16(out) && aligned16(weight);
  const int threads = row_threads(packed ? C / Pack<T>::size : C);
  BRRR_LAUNCH(embedding_forward_kernel<T>, grid_for(N, 1, kMaxRowBlocks), threads, 0, stream, out, weight, idx, N, C,
              packed);
}

template <class T>
void embedding_backward_simple(T* dweight, const T* dout, const std::int32_t* idx, std::int64_t N, std::int64_t V,
                               std::int64_t C, Stream stream) {
  check_rows("embedding_backward", N, C);
  BRRR_CHECK(V >= 0, "embedding_backward: V = ", V, " must not be negative");
  if (N == 0 || C == 0 || V == 0) return;
  const int threads = std::min(256, row_threads(C));
  const std::int64_t column_blocks = ceil_div(C, threads);
  BRRR_CHECK(column_blocks <= 65535, "embedding_backward: C = ", C, " needs ", column_blocks,
             " column blocks; a grid has at most 65535 in y");
  // Owners: enough blocks to fill an H100 (132 SMs, 8 blocks of 256 each) a few times over,
  // but no more than V.
  const std::int64_t owners = std::max<std::int64_t>(1, std::min<std::int64_t>(V, ceil_div(4096, column_blocks)));
  BRRR_LAUNCH(embedding_backward_kernel<T>, dim3(static_cast<unsigned>(owners), static_cast<unsigned>(column_blocks)),
              threads, 0, stream, dweight, dout, idx, N, C);
}

template <class T>
void softmax_forward_simple(T* out, const T* x, std::int64_t N, std::int64_t C, Stream stream) {
  check_rows("softmax_forward", N, C);
  if (N == 0 || C == 0) return;
  BRRR_LAUNCH(softmax_forward_kernel<T>, grid_for(N, 1, kMaxRowBlocks), row_threads(C), 0, stream, out, x, N, C);
}

template <class T>
void softmax_backward_simple(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C, Stream stream) {
  check_rows("softmax_backward", N, C);
  if (N == 0 || C == 0) return;
  BRRR_LAUNCH(softmax_backward_kernel<T>, grid_for(N, 1, kMaxRowBlocks), row_threads(C), 0, stream, dx, dout, out, N,
              C);
}

template <class T>
void log_softmax_forward_simple(T* out, const T* x, std::int64_t N, std::int64_t C, Stream stream) {
  check_rows("log_softmax_forward", N, C);
  if (N == 0 || C == 0) return;
  BRRR_LAUNCH(log_softmax_forward_kernel<T>, grid_for(N, 1, kMaxRowBlocks), row_threads(C), 0, stream, out, x, N, C);
}

template <class T>
void log_softmax_backward_simple(T* dx, const T* dout, const T* out, std::int64_t N, std::int64_t C, Stream stream) {
  check_rows("log_softmax_backward", N, C);
  if (N == 0 || C == 0) return;
  BRRR_LAUNCH(log_softmax_backward_kernel<T>, grid_for(N, 1, kMaxRowBlocks), row_threads(C), 0, stream, dx, dout, out,
              N, C);
}

#define BRRR_INSTANTIATE(T)                                                                                      \
  template void embedding_forward_simple<T>(T*, const T*, const std::int32_t*, std::int64_t, std::int64_t,      \
                                            Stream);                                                             \
  template void embedding_backward_simple<T>(T*, const T*, const std::int32_t*, std::int64_t, std::int64_t,     \
                                             std::int64_t, Stream);                                              \
  template void softmax_forward_simple<T>(T*, const T*, std::int64_t, std::int64_t, Stream);                    \
  template void softmax_backward_simple<T>(T*, const T*, const T*, std::int64_t, std::int64_t, Stream);         \
  template void log_softmax_forward_simple<T>(T*, const T*, std::int64_t, std::int64_t, Stream);                \
  template void log_softmax_backward_simple<T>(T*, const T*, const T*, std::int64_t, std::int64_t, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

namespace {
template <class T>
void register_nn() {
  const DeviceType cuda = DeviceType::CUDA;
  add(op::embedding_forward<T>, cuda, "simple", &embedding_forward_simple<T>, 10,
      about("one thread per output element"));
  add(op::embedding_backward<T>, cuda, "simple", &embedding_backward_simple<T>, 10,
      about("one thread per column, rows added in order (no atomics: deterministic)"));
  const VariantMeta row = about("one block per row, block reductions");
  add(op::softmax_forward<T>, cuda, "simple", &softmax_forward_simple<T>, 10, row);
  add(op::softmax_backward<T>, cuda, "simple", &softmax_backward_simple<T>, 10, row);
  add(op::log_softmax_forward<T>, cuda, "simple", &log_softmax_forward_simple<T>, 10, row);
  add(op::log_softmax_backward<T>, cuda, "simple", &log_softmax_backward_simple<T>, 10, row);
}
}  // namespace

void check_indices(std::int32_t* safe, std::int32_t* first_bad, const std::int32_t* idx, std::int64_t N,
                   std::int64_t limit, std::int64_t allowed, Stream stream) {
  if (N == 0) return;
  BRRR_LAUNCH(check_indices_kernel, grid_for(N, 256, 132 * 8), 256, 0, stream, safe, first_bad, idx, N, limit, allowed);
}

void register_nn_kernels() {
  register_nn<float>();
  register_nn<double>();
  add(op::check_indices, DeviceType::CUDA, "simple", &check_indices, 10,
      about("a grid-stride loop; atomicMin keeps the first bad position"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
