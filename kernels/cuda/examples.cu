// kernels/cuda/examples.cu: four small kernels that use every feature of simt.h: a grid-stride
// loop with float4 loads, block reductions (warp shuffles, static and dynamic __shared__,
// __syncthreads) and atomics. They are the emulator's test cases, and a first read of CUDA.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt.h.
// Read next: tests/emulator/test_emulator.cpp.
//
// Compiled twice: by nvcc into brrr::kernels::cuda and by g++ into brrr::kernels::emu (see
// simt.h). Each kernel has a host function that picks the launch configuration.
#include "kernels/cuda/examples.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cuda/simt.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// Blocks of block_size threads for `work` items, at most max_blocks of them (0: no cap).
static int grid_size(const char* op, std::int64_t work, int block_size, int max_blocks) {
  BRRR_CHECK(block_size > 0, op, ": block_size ", block_size, " must be positive");
  std::int64_t blocks = (std::max<std::int64_t>(work, 1) + block_size - 1) / block_size;
  if (max_blocks > 0) blocks = std::min<std::int64_t>(blocks, max_blocks);
  return static_cast<int>(std::min<std::int64_t>(blocks, INT_MAX));
}

// ---------------------------------------------------------------------------------------------
// vector_add: out = a + b, (n)
//
// A grid-stride loop: thread t of the grid handles items t, t + T, t + 2T, ... where T is the
// number of threads in the grid, so any grid covers any n. Each item is four floats loaded as
// one 16-byte float4 (one instruction instead of four); the n % 4 floats left over are added
// one by one.

__global__ void vector_add_kernel(float* __restrict__ out, const float* __restrict__ a, const float* __restrict__ b,
                                  std::int64_t n, std::int64_t n4) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float4* out4 = reinterpret_cast<float4*>(out);
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  for (std::int64_t i = first; i < n4; i += stride) {
    const float4 x = __ldg(a4 + i);
    const float4 y = __ldg(b4 + i);
    out4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  for (std::int64_t i = 4 * n4 + first; i < n; i += stride) out[i] = a[i] + b[i];
}

void vector_add(float* out, const float* a, const float* b, std::int64_t n, int block_size, int max_blocks,
                Stream stream) {
  if (n == 0) return;
  // float4 loads need 16-byte aligned addresses (cudaMalloc's are; a view's may not be).
  const auto address = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p); };
  const bool aligned = (address(out) | address(a) | address(b)) % 16 == 0;
  const std::int64_t n4 = aligned ? n / 4 : 0;
  const int blocks = grid_size("vector_add", std::max(n4, n - 4 * n4), block_size, max_blocks);
  BRRR_LAUNCH(vector_add_kernel, blocks, block_size, 0, stream, out, a, b, n, n4);
}

// ---------------------------------------------------------------------------------------------
// row_sum: out[r] = sum of in[r, :], (N, C) -> (N), one block per row
//
// Each thread first sums a strided slice of the row (c = t, t + block_size, ...); then the
// block combines its block_size partial sums.

// The sum over the 32 lanes of a warp, in lane 0: lane l adds lane l + 16, then l + 8, ...
// (five steps, no shared memory, no __syncthreads).
__device__ float warp_sum_down(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_down_sync(0xffffffff, value, offset);
  return value;
}

// The same sum in every lane: lane l adds lane l ^ 16, then l ^ 8, ... (a butterfly).
__device__ float warp_sum_xor(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffff, value, offset);
  return value;
}

// Variant 1: each warp sums its 32 values with shuffles; lane 0 of each warp writes the warp's
// sum to shared memory; after one __syncthreads, warp 0 sums those (at most 32) with shuffles.
__global__ void row_sum_kernel1(float* out, const float* in, int C) {
  __shared__ float warp_sums[32];
  const float* row = in + static_cast<std::int64_t>(blockIdx.x) * C;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) sum += row[c];
  sum = warp_sum_down(sum);
  if (lane == 0) warp_sums[warp] = sum;
  __syncthreads();
  if (warp == 0) {
    sum = warp_sum_xor(lane < warps ? warp_sums[lane] : 0.0f);
    if (lane == 0) out[blockIdx.x] = sum;
  }
}

void row_sum1(float* out, const float* in, int N, int C, int block_size, Stream stream) {
  BRRR_CHECK(block_size % 32 == 0, "row_sum1: block_size ", block_size, " must be a multiple of 32");
  if (N == 0) return;
  BRRR_LAUNCH(row_sum_kernel1, N, block_size, 0, stream, out, in, C);
}

// The bug every CUDA course meets: variant 1 without its __syncthreads. Warp 0 reads the other
// warps' sums from shared memory with nothing to make it wait until they are written. In the
// emulator's old fixed order (warp 0 first, to its end) it read garbage by luck of the order;
// on a GPU it reads whatever is there. The emulator's race detector reports it (chapter 10's
// notebook runs it); nothing registers it as a variant.
__global__ void row_sum_racy_kernel(float* out, const float* in, int C) {
  __shared__ float warp_sums[32];
  const float* row = in + static_cast<std::int64_t>(blockIdx.x) * C;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  float sum = 0.0f;
  for (int c = threadIdx.x; c < C; c += blockDim.x) sum += row[c];
  sum = warp_sum_down(sum);
  if (lane == 0) warp_sums[warp] = sum;
  // __syncthreads() forgotten
  if (warp == 0) {
    sum = warp_sum_xor(lane < warps ? warp_sums[lane] : 0.0f);
    if (lane == 0) out[blockIdx.x] = sum;
  }
}

void row_sum_racy(float* out, const float* in, int N, int C, int block_size, Stream stream) {
  BRRR_CHECK(block_size % 32 == 0, "row_sum_racy: block_size ", block_size, " must be a multiple of 32");
  if (N == 0) return;
  BRRR_LAUNCH(row_sum_racy_kernel, N, block_size, 0, stream, out, in, C);
}

// Variant 2: the textbook tree in shared memory. Thread t adds partial[t + stride] to
// partial[t] for stride = block_size / 2, ..., 1, with a __syncthreads after every step:
// log2(block_size) barriers where variant 1 needs one. The shared array is sized by the launch
// (dynamic shared memory), since it holds one float per thread.
__global__ void row_sum_kernel2(float* out, const float* in, int C) {
  BRRR_DYNAMIC_SHARED(float, partial);  // (blockDim.x)
  const float* row = in + static_cast<std::int64_t>(blockIdx.x) * C;
  const int t = threadIdx.x;
  float sum = 0.0f;
  for (int c = t; c < C; c += blockDim.x) sum += row[c];
  partial[t] = sum;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = partial[0];
}

void row_sum2(float* out, const float* in, int N, int C, int block_size, Stream stream) {
  BRRR_CHECK(block_size > 0 && (block_size & (block_size - 1)) == 0, "row_sum2: block_size ", block_size,
             " must be a power of two");
  if (N == 0) return;
  BRRR_LAUNCH(row_sum_kernel2, N, block_size, block_size * sizeof(float), stream, out, in, C);
}

// ---------------------------------------------------------------------------------------------
// histogram: counts[v] += #{i : values[i] == v}, *largest = max(*largest, values)
//
// Thousands of threads adding to a few global counters would queue on them, so each block
// counts into its own copy in shared memory (atomicAdd on shared memory is cheap), then adds
// its counts to the global ones: one global atomicAdd per bin per block.

__global__ void histogram_kernel(int* counts, int* largest, const int* values, std::int64_t n, int bins) {
  BRRR_DYNAMIC_SHARED(int, block_counts);  // (bins)
  for (int b = threadIdx.x; b < bins; b += blockDim.x) block_counts[b] = 0;
  __syncthreads();
  int thread_largest = INT_MIN;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int v = values[i];
    if (v >= 0 && v < bins) atomicAdd(&block_counts[v], 1);
    thread_largest = v > thread_largest ? v : thread_largest;
  }
  __syncthreads();
  for (int b = threadIdx.x; b < bins; b += blockDim.x)
    if (block_counts[b] != 0) atomicAdd(&counts[b], block_counts[b]);
  atomicMax(largest, thread_largest);
}

void histogram(int* counts, int* largest, const int* values, std::int64_t n, int bins, int block_size,
               int max_blocks, Stream stream) {
  BRRR_CHECK(bins > 0, "histogram: bins ", bins, " must be positive");
  if (n == 0) return;
  const int blocks = grid_size("histogram", n, block_size, max_blocks);
  BRRR_LAUNCH(histogram_kernel, blocks, block_size, bins * sizeof(int), stream, counts, largest, values, n, bins);
}

// ---------------------------------------------------------------------------------------------
// array_sum: *out += sum of x, (n)
//
// Grid-stride partial sums, a warp sum with shuffles, then one float atomicAdd per warp. The
// order of the atomic adds differs from run to run on the GPU, so the last bits of the result
// do too: brrr's default kernels avoid float atomics for that reason (DESIGN.md).

__global__ void array_sum_kernel(float* out, const float* x, std::int64_t n) {
  float sum = 0.0f;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    sum += x[i];
  sum = warp_sum_down(sum);
  if (threadIdx.x % 32 == 0) atomicAdd(out, sum);
}

void array_sum(float* out, const float* x, std::int64_t n, int block_size, int max_blocks, Stream stream) {
  BRRR_CHECK(block_size % 32 == 0, "array_sum: block_size ", block_size, " must be a multiple of 32");
  if (n == 0) return;
  const int blocks = grid_size("array_sum", n, block_size, max_blocks);
  BRRR_LAUNCH(array_sum_kernel, blocks, block_size, 0, stream, out, x, n);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
