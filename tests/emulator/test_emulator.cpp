// tests/emulator/test_emulator.cpp: the SIMT emulator runs CUDA kernels on the CPU: the
// example kernels against plain loops, the built-in variables, shuffles, barriers, atomics,
// and the errors a learner meets (a divergent __syncthreads, a bad launch).
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt.h, kernels/cuda/examples.cu.
//
// The kernels defined in this file are CUDA too: this file includes simt.h and is compiled by
// g++, so they run on the emulator exactly like the kernels in kernels/cuda.
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/examples.h"
#include "kernels/cuda/simt.h"
#include "tests/emulator/emulator_test_util.h"

namespace emu = brrr::kernels::emu;

namespace {

std::vector<float> random_floats(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

using brrr::test::contains;
using brrr::test::error_of;

}  // namespace

// ---------------------------------------------------------------------------------------------
// The example kernels against plain loops

TEST_CASE("vector_add: float4 grid-stride loop matches a plain loop, ragged n, few blocks, misaligned") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(1);
  for (std::int64_t n : {1, 3, 4, 5, 1000, 4099, 100003}) {
    const std::vector<float> a = random_floats(n + 1, rng), b = random_floats(n + 1, rng);
    for (int max_blocks : {0, 1, 3}) {
      for (int offset : {0, 1}) {  // offset 1: not 16-byte aligned, so the scalar loop does it all
        std::vector<float> out(n + 1, -7.0f);
        emu::vector_add(out.data() + offset, a.data() + offset, b.data() + offset, n, 128, max_blocks, nullptr);
        CAPTURE(n);
        CAPTURE(max_blocks);
        CAPTURE(offset);
        int wrong = 0;
        for (std::int64_t i = 0; i < n; ++i) wrong += out[i + offset] != a[i + offset] + b[i + offset];
        CHECK(wrong == 0);
        CHECK(out[offset ? 0 : n] == -7.0f);  // nothing written outside
      }
    }
  }
}

TEST_CASE("row_sum1 and row_sum2: block reductions match a double-precision loop") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(2);
  struct Case {
    int N, C, block;
  };
  for (const Case& c : {Case{37, 1000, 256}, Case{5, 5, 64}, Case{3, 0, 32}, Case{4, 3001, 1024}, Case{2, 77, 32}}) {
    const std::vector<float> in = random_floats(static_cast<std::size_t>(c.N) * c.C, rng);
    std::vector<float> out1(c.N, NAN), out2(c.N, NAN);
    emu::row_sum1(out1.data(), in.data(), c.N, c.C, c.block, nullptr);
    emu::row_sum2(out2.data(), in.data(), c.N, c.C, c.block, nullptr);
    for (int r = 0; r < c.N; ++r) {
      double expected = 0;
      for (int k = 0; k < c.C; ++k) expected += in[static_cast<std::size_t>(r) * c.C + k];
      CAPTURE(c.N);
      CAPTURE(c.C);
      CAPTURE(c.block);
      CAPTURE(r);
      CHECK(out1[r] == doctest::Approx(expected).epsilon(1e-5));
      CHECK(out2[r] == doctest::Approx(expected).epsilon(1e-5));
    }
  }
  CHECK(contains(error_of([] { emu::row_sum1(nullptr, nullptr, 1, 1, 48, nullptr); }), "multiple of 32"));
  CHECK(contains(error_of([] { emu::row_sum2(nullptr, nullptr, 1, 1, 96, nullptr); }), "power of two"));
}

TEST_CASE("histogram and array_sum: atomicAdd (int, float, shared and global) and atomicMax") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(3);
  for (std::int64_t n : {1, 999, 20011}) {
    for (int max_blocks : {0, 2}) {
      const int bins = 37;
      std::uniform_int_distribution<int> pick(-3, bins + 2);  // a few out of range, not counted
      std::vector<int> values(n);
      for (int& v : values) v = pick(rng);
      std::vector<int> counts(bins, 0), expected(bins, 0);
      int largest = INT_MIN, expected_largest = INT_MIN;
      for (int v : values) {
        if (v >= 0 && v < bins) ++expected[v];
        expected_largest = std::max(expected_largest, v);
      }
      emu::histogram(counts.data(), &largest, values.data(), n, bins, 96, max_blocks, nullptr);
      CAPTURE(n);
      CHECK(counts == expected);
      CHECK(largest == expected_largest);

      const std::vector<float> x = random_floats(n, rng);
      float sum = 0.5f;
      emu::array_sum(&sum, x.data(), n, 64, max_blocks, nullptr);
      double expected_sum = 0.5;
      for (float v : x) expected_sum += v;
      CHECK(sum == doctest::Approx(expected_sum).epsilon(1e-4));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Kernels written here, to check one thing each

namespace {

// Each thread writes its coordinates: 12 ints per thread, at its global linear index.
__global__ void record_coordinates(int* out) {
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int* r = out + 12 * (block * blockDim.x * blockDim.y * blockDim.z + thread);
  const unsigned values[12] = {threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z,
                               blockDim.x,  blockDim.y,  blockDim.z,  gridDim.x,  gridDim.y,  gridDim.z};
  for (int k = 0; k < 12; ++k) r[k] = static_cast<int>(values[k]);
}

}  // namespace

TEST_CASE("threadIdx, blockIdx, blockDim and gridDim in a 3-D launch") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  std::vector<int> out(12 * 12 * 24, -1);
  BRRR_LAUNCH(record_coordinates, grid, block, 0, nullptr, out.data());
  int wrong = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx) {
              const unsigned b = bx + 3 * (by + 2 * bz), t = tx + 4 * (ty + 3 * tz);
              const int* r = out.data() + 12 * (b * 24 + t);
              const int expected[12] = {int(tx), int(ty), int(tz), int(bx), int(by), int(bz), 4, 3, 2, 3, 2, 2};
              for (int k = 0; k < 12; ++k) wrong += r[k] != expected[k];
            }
  CHECK(wrong == 0);
}

// A 96-thread block is 3 warps; each thread's value is its index in the block.
__global__ void warp_exchanges(int* out) {
  const int t = threadIdx.x, lane = t % 32;
  int butterfly = t, down = t, scan = t, groups_of_8 = t;
  for (int offset = 16; offset > 0; offset /= 2) butterfly += __shfl_xor_sync(0xffffffff, butterfly, offset);
  for (int offset = 16; offset > 0; offset /= 2) down += __shfl_down_sync(0xffffffff, down, offset);
  for (int offset = 1; offset < 32; offset *= 2) {  // inclusive prefix sum
    const int from_below = __shfl_up_sync(0xffffffff, scan, offset);
    if (lane >= offset) scan += from_below;
  }
  for (int offset = 4; offset > 0; offset /= 2) groups_of_8 += __shfl_xor_sync(0xffffffff, groups_of_8, offset, 8);
  const int broadcast = __shfl_sync(0xffffffff, t * 10, 3);  // lane 3's value to all
  const unsigned odd_lanes = __ballot_sync(0xffffffff, lane % 2);
  const int all_small = __all_sync(0xffffffff, lane < 32), any_zero = __any_sync(0xffffffff, lane == 0);
  int* r = out + 8 * (blockIdx.x * blockDim.x + t);
  r[0] = butterfly;
  r[1] = down;
  r[2] = scan;
  r[3] = groups_of_8;
  r[4] = broadcast;
  r[5] = static_cast<int>(odd_lanes);
  r[6] = all_small;
  r[7] = any_zero;
}

TEST_CASE("warp shuffles: xor butterfly and down give the exact warp sum, up scans, width, broadcast and votes") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::vector<int> out(8 * 2 * 96);
  BRRR_LAUNCH(warp_exchanges, 2, 96, 0, nullptr, out.data());
  int wrong = 0;
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 96; ++t) {
      const int* r = out.data() + 8 * (b * 96 + t);
      const int lane = t % 32, warp_first = t - lane, group_first = t - t % 8;
      const int warp_sum = 32 * warp_first + 31 * 32 / 2;
      int scan = 0;
      for (int k = warp_first; k <= t; ++k) scan += k;
      wrong += r[0] != warp_sum;
      if (lane == 0) wrong += r[1] != warp_sum;  // only lane 0 holds the whole sum
      wrong += r[2] != scan;
      wrong += r[3] != 8 * group_first + 28;
      wrong += r[4] != (warp_first + 3) * 10;
      wrong += static_cast<unsigned>(r[5]) != 0xaaaaaaaau;
      wrong += r[6] != 1 || r[7] != 1;
    }
  CHECK(wrong == 0);
}

// The partial last warp of a 40-thread block: the xor butterfly over its 8 lanes.
__global__ void partial_warp_sum(int* out) {
  int sum = 1;
  for (int offset = 4; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffff, sum, offset);
  out[threadIdx.x] = sum;
}

TEST_CASE("a block that is not a whole number of warps: the last warp has fewer lanes") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::vector<int> out(40);
  BRRR_LAUNCH(partial_warp_sum, 1, 40, 0, nullptr, out.data());
  for (int t = 0; t < 40; ++t) CHECK(out[t] == 8);
}

// static __shared__ is one instance per block, and every thread of the block sees it.
__global__ void shared_per_block(int* out) {
  __shared__ int block_value;
  __shared__ int values[64];
  if (threadIdx.x == 0) block_value = 1000 * blockIdx.x;
  values[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = block_value + values[blockDim.x - 1 - threadIdx.x];
}

// Dynamic shared memory, sized by the launch: reverse each block's slice of the input.
__global__ void reverse_in_blocks(float* out, const float* in) {
  BRRR_DYNAMIC_SHARED(float, tile);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = in[i];
  __syncthreads();
  out[i] = tile[blockDim.x - 1 - threadIdx.x];
}

TEST_CASE("__shared__: static is one instance per block, dynamic is sized by the launch") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::vector<int> out(3 * 64);
  BRRR_LAUNCH(shared_per_block, 3, 64, 0, nullptr, out.data());
  for (int b = 0; b < 3; ++b)
    for (int t = 0; t < 64; ++t) CHECK(out[b * 64 + t] == 1000 * b + 63 - t);

  std::mt19937 rng(4);
  const std::vector<float> in = random_floats(5 * 200, rng);
  std::vector<float> reversed(in.size());
  BRRR_LAUNCH(reverse_in_blocks, 5, 200, 200 * sizeof(float), nullptr, reversed.data(), in.data());
  for (int b = 0; b < 5; ++b)
    for (int t = 0; t < 200; ++t) CHECK(reversed[b * 200 + t] == in[b * 200 + 199 - t]);
}

// Local variables live on each fiber's own stack and survive every barrier.
__global__ void locals_survive_barriers(int* out) {
  int local[8];
  for (int k = 0; k < 8; ++k) {
    local[k] = threadIdx.x * 8 + k;
    __syncthreads();
  }
  int sum = 0;
  for (int k = 0; k < 8; ++k) sum += local[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

TEST_CASE("a 1024-thread block: locals survive barriers") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::vector<int> out(2 * 1024);
  BRRR_LAUNCH(locals_survive_barriers, 2, 1024, 0, nullptr, out.data());
  for (int t = 0; t < 2 * 1024; ++t) CHECK(out[t] == 64 * (t % 1024) + 28);
}

// common.h's block reductions may follow each other on one scratch array: the barrier each
// opens with keeps a call's writes from racing with the previous call's reads.
__global__ void block_reductions_back_to_back(float* out, const float* in) {
  __shared__ float scratch[32];
  const float x = in[threadIdx.x];
  const float max1 = brrr::kernels::emu::block_max(x, scratch);
  const float max2 = brrr::kernels::emu::block_max(-x, scratch);
  const float sum1 = brrr::kernels::emu::block_sum(x, scratch);
  const float sum2 = brrr::kernels::emu::block_sum(2 * x, scratch);
  if (threadIdx.x == 0) {
    out[0] = max1;
    out[1] = max2;
    out[2] = sum1;
    out[3] = sum2;
  }
}

TEST_CASE("block_max and block_sum called back to back on one scratch array") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::vector<float> in(256), out(4);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<float>((i * 37) % 101) - 50.0f;
  BRRR_LAUNCH(block_reductions_back_to_back, 1, 256, 0, nullptr, out.data(), in.data());
  float largest = -1e30f, smallest = 1e30f, sum = 0.0f;
  for (float v : in) largest = std::max(largest, v), smallest = std::min(smallest, v), sum += v;
  CHECK(out[0] == largest);
  CHECK(out[1] == -smallest);
  CHECK(out[2] == sum);
  CHECK(out[3] == 2 * sum);
}

// ---------------------------------------------------------------------------------------------
// Errors: the emulator reports the bugs a GPU would hang on or silently get wrong

// The classic bug: a __syncthreads that only some threads reach.
__global__ void divergent_syncthreads(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

// Returning early before a barrier, in one block only.
__global__ void early_return(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  __syncthreads();
  out[i] = 1;
}

// Returning early before a warp shuffle.
__global__ void early_return_before_shuffle(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = __shfl_down_sync(0xffffffff, i, 1);
}

__global__ void half_warp_mask(int* out) { out[threadIdx.x] = __shfl_xor_sync(0x0000ffff, 1, 1); }

__global__ void fill_ones(int* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1; }

__global__ void launches_a_kernel(int* out) {
  if (threadIdx.x == 0) BRRR_LAUNCH(fill_ones, 1, 1, 0, nullptr, out);
}

TEST_CASE("a divergent __syncthreads is a brrr::Error naming the kernel and the block, not a hang") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::vector<int> out(3 * 64, 0);
  std::string message = error_of([&] { BRRR_LAUNCH(divergent_syncthreads, 1, 32, 0, nullptr, out.data()); });
  CHECK(contains(message,
                 "kernel divergent_syncthreads: __syncthreads reached by only 16 of 32 threads of block (0,0,0)"));
  CHECK(contains(message, "16 returned without reaching it"));

  message = error_of([&] { BRRR_LAUNCH(early_return, 3, 64, 0, nullptr, out.data(), 100); });
  CHECK(contains(message, "kernel early_return: __syncthreads reached by only 36 of 64 threads of block (1,0,0)"));

  message = error_of([&] { BRRR_LAUNCH(early_return_before_shuffle, 1, 64, 0, nullptr, out.data(), 40); });
  CHECK(contains(message, "kernel early_return_before_shuffle: "
                          "__shfl_down_sync reached by only 8 of 32 lanes of warp 1 of block (0,0,0)"));

  message = error_of([&] { BRRR_LAUNCH(half_warp_mask, 1, 32, 0, nullptr, out.data()); });
  CHECK(contains(message, "kernel half_warp_mask (test_emulator.cpp:"));
  CHECK(contains(message, "__shfl_xor_sync with mask 0xffff in warp 0 of block (0,0,0)"));

  message = error_of([&] { BRRR_LAUNCH(launches_a_kernel, 1, 32, 0, nullptr, out.data()); });
  CHECK(contains(message, "dynamic parallelism"));

  CHECK(contains(error_of([] { __syncthreads(); }), "__syncthreads called outside a kernel"));

  // After each error the emulator is ready for the next launch.
  std::vector<int> ones(4 * 256, 0);
  BRRR_LAUNCH(fill_ones, 4, 256, 0, nullptr, ones.data());
  CHECK(std::count(ones.begin(), ones.end(), 1) == 4 * 256);
}

TEST_CASE("a bad launch configuration is a brrr::Error that says what is allowed") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  int* out = nullptr;
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, 1, 0, 0, nullptr, out); }),
                 "kernel fill_ones (test_emulator.cpp:"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, 1, 0, 0, nullptr, out); }),
                 "a block of (0, 1, 1) = 0 threads; a block has 1 to 1024 threads"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, 1, 1025, 0, nullptr, out); }), "= 1025 threads"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, 1, dim3(64, 4, 8), 0, nullptr, out); }), "= 2048 threads"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, 1, dim3(1, 1, 65), 0, nullptr, out); }),
                 "at most (1024, 1024, 64)"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, dim3(0, 1, 1), 32, 0, nullptr, out); }),
                 "a grid of (0, 1, 1) blocks"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, dim3(1, 70000, 1), 32, 0, nullptr, out); }),
                 "a grid has 1 to (2147483647, 65535, 65535) blocks"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(fill_ones, 1, 32, 228 * 1024, nullptr, out); }),
                 "233472 bytes of dynamic shared memory; a block may have at most 232448"));
  CHECK(contains(error_of([] { emu::vector_add(nullptr, nullptr, nullptr, 10, 0, 0, nullptr); }),
                 "vector_add: block_size 0 must be positive"));
}
