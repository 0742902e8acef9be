// tests/emulator/test_sanitizer.cpp: planted faults. Each kernel here has one bug a GPU
// punishes (a missing barrier, two blocks writing one element, a stale shared read, a host
// read of device memory, a launch on a foreign stream, a divergent shuffle, ...), and each
// test checks that the emulator reports it, naming the kernel, the threads, the buffer and the
// source line. The real kernels of kernels/cuda run clean under the same checks in the other
// files of tests/emulator. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/simt_race_detector.cpp, kernels/cuda/emulator_memory.h.
//
// Device memory comes from the emulator's runtime, as brrr's tensors' does, and every launch
// is on the runtime's stream: no HostMemoryKernels here, so the checks are the strict ones.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/simt.h"
#include "tests/emulator/emulator_test_util.h"

namespace {

brrr::gpu::Runtime& runtime() { return brrr::gpu::emulator_runtime(); }
brrr::kernels::Stream stream() { return runtime().stream(); }

using brrr::test::contains;
using brrr::test::DeviceArray;
using brrr::test::error_of;

// The race detector is not in the AddressSanitizer build (it cannot be combined with it).
#define REQUIRE_RACE_DETECTOR()                                                            \
  if (!brrr::simt::race_detection_available()) {                                           \
    MESSAGE("SKIPPED: no race detector in this build (AddressSanitizer)");                 \
    return;                                                                                \
  }

// ---------------------------------------------------------------------------------------------
// Races on shared memory

// Thread 0 writes, everyone reads: the __syncthreads between them is missing (read after write).
__global__ void broadcast_without_barrier(float* out, const float* in) {
  __shared__ float value;
  if (threadIdx.x == 0) value = in[blockIdx.x];
  out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}

// Each thread reads its neighbour's slot, then overwrites its own: the barrier between the
// read and the write is missing (write after read).
__global__ void shift_without_barrier(float* out, const float* in) {
  __shared__ float tile[64];
  tile[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  const float left = tile[(threadIdx.x + 63) % 64];
  tile[threadIdx.x] = 2 * left;  // another thread may not have read its left neighbour yet
  out[threadIdx.x] = left;
}

// A block reduction whose warps read each other's partial sums with no barrier after the
// partials are written.
__global__ void reduction_without_barrier(float* out, const float* in) {
  __shared__ float partial[32];
  float value = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = value;
  // __syncthreads() missing here
  if (threadIdx.x < 32) {
    value = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    if (threadIdx.x == 0) out[blockIdx.x] = value;
  }
}

// Shared memory is only written by block 0, read by all: the other blocks read garbage (on the
// old emulator, block 0's values, since `static` is one variable for all blocks).
__global__ void stale_static_shared(float* out) {
  __shared__ float table[32];
  if (blockIdx.x == 0) table[threadIdx.x] = 1.0f + threadIdx.x;
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = table[(threadIdx.x + 1) % 32];
}

TEST_CASE("planted: a read after write with the barrier missing is a data race on shared memory") {
  REQUIRE_RACE_DETECTOR();
  DeviceArray<float> in(std::vector<float>{1, 2}), out(2 * 64);
  const std::string message =
      error_of([&] { BRRR_LAUNCH(broadcast_without_barrier, 2, 64, 0, stream(), out.data, in.data); });
  CAPTURE(message);
  CHECK(contains(message, "kernel broadcast_without_barrier (test_sanitizer.cpp:"));
  CHECK(contains(message, "`value` (static __shared__ in broadcast_without_barrier)"));
  CHECK(contains(message, "at test_sanitizer.cpp:"));  // the source line
  CHECK(contains(message, "BRRR_EMULATOR_SEED="));
  // Which report depends on the schedule: if warp 0 runs first, thread 0's write and another
  // thread's read race; if another warp runs first, it reads before anyone wrote.
  if (contains(message, "data race")) {
    CHECK(contains(message, "data race on shared memory"));
    CHECK(contains(message, "thread (0,0,0) of block"));  // the writer
    CHECK(contains(message, "no barrier orders the two"));
  } else {
    CHECK(contains(message, "which no thread of this block has written"));
  }
}

TEST_CASE("planted: a write after read with the barrier missing is a data race on shared memory") {
  REQUIRE_RACE_DETECTOR();
  std::vector<float> values(64);
  for (int i = 0; i < 64; ++i) values[i] = static_cast<float>(i);
  DeviceArray<float> in(values), out(64);
  const std::string message =
      error_of([&] { BRRR_LAUNCH(shift_without_barrier, 1, 64, 0, stream(), out.data, in.data); });
  CAPTURE(message);
  CHECK(contains(message, "kernel shift_without_barrier"));
  CHECK(contains(message, "data race on shared memory"));
  CHECK(contains(message, "of `tile` (static __shared__ in shift_without_barrier)"));
  // A write and a read of one slot by two threads (which came first depends on the schedule).
  CHECK(((contains(message, "writes it") && contains(message, "read it")) ||
         (contains(message, "reads it") && contains(message, "wrote it"))));
}

TEST_CASE("planted: warps reading each other's partial sums without a barrier is a race") {
  REQUIRE_RACE_DETECTOR();
  DeviceArray<float> in(std::vector<float>(4 * 256, 1.0f)), out(4);
  const std::string message =
      error_of([&] { BRRR_LAUNCH(reduction_without_barrier, 4, 256, 0, stream(), out.data, in.data); });
  CAPTURE(message);
  CHECK(contains(message, "kernel reduction_without_barrier"));
  // Depending on which warp runs first: a race, or a read of a partial no warp has written yet.
  CHECK((contains(message, "data race on shared memory") || contains(message, "which no thread of this block has written")));
  CHECK(contains(message, "`partial`"));
}

TEST_CASE("planted: reading static __shared__ memory the block did not write is reported") {
  REQUIRE_RACE_DETECTOR();
  DeviceArray<float> out(3 * 32);
  const std::string message = error_of([&] { BRRR_LAUNCH(stale_static_shared, 3, 32, 0, stream(), out.data); });
  CAPTURE(message);
  CHECK(contains(message, "kernel stale_static_shared"));
  CHECK(contains(message, "of `table` (static __shared__ in stale_static_shared)"));
  CHECK(contains(message, "which no thread of this block has written"));
}

// A student's tiled transpose (chapter 10's exercise) with the __syncthreads between writing
// the tile and reading it forgotten: thread (x, y) reads tile[x][y + k], which thread
// (y + k, x), of another warp, writes.
__global__ void transpose_forgot_barrier(float* out, const float* in, int rows, int cols) {
  __shared__ float tile[32][33];
  const int x = blockIdx.x * 32 + threadIdx.x;
  for (int k = 0; k < 32; k += 8) {
    const int y = blockIdx.y * 32 + threadIdx.y + k;
    if (x < cols && y < rows) tile[threadIdx.y + k][threadIdx.x] = in[y * cols + x];
  }
  // __syncthreads() forgotten here
  const int ox = blockIdx.y * 32 + threadIdx.x;
  for (int k = 0; k < 32; k += 8) {
    const int oy = blockIdx.x * 32 + threadIdx.y + k;
    if (ox < rows && oy < cols) out[oy * rows + ox] = tile[threadIdx.x][threadIdx.y + k];
  }
}

TEST_CASE("planted: a student's transpose that forgot its __syncthreads (chapter 10) is caught") {
  REQUIRE_RACE_DETECTOR();
  std::vector<float> values(64 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  DeviceArray<float> in(values), out(64 * 64);
  const std::string message = error_of(
      [&] { BRRR_LAUNCH(transpose_forgot_barrier, dim3(2, 2), dim3(32, 8), 0, stream(), out.data, in.data, 64, 64); });
  MESSAGE(message);
  CHECK(contains(message, "kernel transpose_forgot_barrier (test_sanitizer.cpp:"));
  CHECK(contains(message, "of `tile` (static __shared__ in transpose_forgot_barrier)"));
  CHECK((contains(message, "data race on shared memory") ||
         contains(message, "which no thread of this block has written")));
}

// ---------------------------------------------------------------------------------------------
// Races on global memory

// Every block adds its sum into out[0] with a plain +=: two blocks write one element.
__global__ void blocks_share_an_element(float* out, const float* in) {
  if (threadIdx.x == 0) out[0] += in[blockIdx.x];
}

// The same with atomicAdd: correct.
__global__ void blocks_share_an_element_atomically(float* out, const float* in) {
  if (threadIdx.x == 0) atomicAdd(out, in[blockIdx.x]);
}

// Block b reads what block b - 1 wrote: a dependency between blocks of one launch.
__global__ void reads_previous_block(float* data) {
  if (threadIdx.x == 0 && blockIdx.x > 0) data[blockIdx.x] = data[blockIdx.x - 1] + 1.0f;
}

TEST_CASE("planted: two blocks writing one global element is a data race, and with atomicAdd it is not") {
  REQUIRE_RACE_DETECTOR();
  DeviceArray<float> in(std::vector<float>{1, 2, 3, 4}), out(std::vector<float>{0});
  std::string message =
      error_of([&] { BRRR_LAUNCH(blocks_share_an_element, 4, 32, 0, stream(), out.data, in.data); });
  CAPTURE(message);
  CHECK(contains(message, "kernel blocks_share_an_element"));
  CHECK(contains(message, "data race on global memory, byte 0 of a 4-byte device allocation"));
  CHECK(contains(message, "(kernel argument 1 + 0 bytes)"));
  CHECK(contains(message, "two blocks of one launch are never ordered"));

  DeviceArray<float> sum(std::vector<float>{0});
  CHECK(error_of([&] {
          BRRR_LAUNCH(blocks_share_an_element_atomically, 4, 32, 0, stream(), sum.data, in.data);
        }) == "");
  CHECK(sum.host()[0] == 10.0f);

  DeviceArray<float> chain(std::vector<float>{0, 0, 0, 0, 0});
  message = error_of([&] { BRRR_LAUNCH(reads_previous_block, 5, 32, 0, stream(), chain.data); });
  CHECK(contains(message, "data race on global memory"));
}

// ---------------------------------------------------------------------------------------------
// Device memory as a GPU has it

__global__ void copy_one_too_many(float* out, const float* in, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = in[i];  // <= : one past the end
}

__global__ void read_first(float* out, const float* in) { out[0] = in[0]; }
__global__ void reads_nothing(const float*) {}  // n = 0: a kernel given an empty tensor

TEST_CASE("planted: a kernel reading one element past a device allocation is reported") {
  REQUIRE_RACE_DETECTOR();
  DeviceArray<float> in(std::vector<float>(100, 1.0f)), out(100);
  const std::string message =
      error_of([&] { BRRR_LAUNCH(copy_one_too_many, 1, 128, 0, stream(), out.data, in.data, 100); });
  CAPTURE(message);
  CHECK(contains(message, "kernel copy_one_too_many"));
  CHECK(contains(message, "thread (100,0,0) of block (0,0,0)"));
  CHECK(contains(message, "outside every live device allocation: 0 bytes past the end of a 400-byte device allocation"));
}

TEST_CASE("planted: fresh device memory reads as NaN, not zero") {
  DeviceArray<float> fresh(10);
  for (float v : fresh.host()) CHECK(std::isnan(v));
}

TEST_CASE("planted: pointer arguments must point into live device memory") {
  DeviceArray<float> out(4);
  std::vector<float> host(4, 1.0f);
  std::string message = error_of([&] { BRRR_LAUNCH(read_first, 1, 1, 0, stream(), out.data, host.data()); });
  CHECK(contains(message, "kernel read_first (test_sanitizer.cpp:"));
  CHECK(contains(message, "pointer argument 2"));
  CHECK(contains(message, "points at host memory, not device memory"));

  float* freed = static_cast<float*>(runtime().malloc(16));
  runtime().free(freed);
  message = error_of([&] { BRRR_LAUNCH(read_first, 1, 1, 0, stream(), out.data, freed); });
  CHECK(contains(message, "pointer argument 2 points at device memory at"));
  CHECK(contains(message, "that no live allocation holds"));
}

TEST_CASE("planted: a block the caching allocator keeps for reuse is freed memory, an empty tensor's is not") {
  // What framework/src/cuda.cpp's caching allocator tells the runtime.
  void* block = runtime().malloc(512);
  DeviceArray<float> out(1);
  runtime().tensor_allocated(block, 0);  // an empty tensor: its pointer is still a valid argument
  CHECK(error_of([&] { BRRR_LAUNCH(reads_nothing, 1, 1, 0, stream(), static_cast<float*>(block)); }) == "");
  runtime().tensor_freed(block);  // the tensor is gone; the block waits in the cache
  CHECK(contains(error_of([&] { BRRR_LAUNCH(read_first, 1, 1, 0, stream(), out.data, static_cast<float*>(block)); }),
                 "a block the caching allocator holds for reuse"));
  runtime().free(block);
}

TEST_CASE("planted: copies check their direction") {
  DeviceArray<float> device(4);
  std::vector<float> host(4, 1.0f);
  using brrr::gpu::CopyKind;
  CHECK(contains(error_of([&] { runtime().copy(host.data(), device.data, 16, CopyKind::HostToDevice); }),
                 "copy (host to device): the destination"));
  CHECK(contains(error_of([&] { runtime().copy(host.data(), device.data, 16, CopyKind::HostToDevice); }),
                 "is host memory, but a host to device copy's destination is device memory"));
  CHECK(contains(error_of([&] { runtime().copy(device.data, host.data(), 16, CopyKind::DeviceToHost); }),
                 "copy (device to host): the destination"));
  CHECK(contains(error_of([&] { runtime().copy(device.data, device.data, 32, CopyKind::DeviceToDevice); }),
                 "copy (device to device) of 32 bytes"));
}

TEST_CASE("planted: the host reading device memory stops the program with a message") {
  DeviceArray<float> device(std::vector<float>{1, 2, 3});
  int pipe_ends[2];
  REQUIRE(pipe(pipe_ends) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // the child reads a device pointer on the host
    dup2(pipe_ends[1], STDERR_FILENO);
    brrr::simt::memory::install_fault_handler();  // doctest replaced it for this test case
    volatile float value = device.data[1];
    (void)value;
    _exit(0);  // not reached
  }
  close(pipe_ends[1]);
  std::string output;
  char buffer[1024];
  for (ssize_t n; (n = read(pipe_ends[0], buffer, sizeof(buffer))) > 0;) output.append(buffer, n);
  close(pipe_ends[0]);
  int status = 0;
  waitpid(child, &status, 0);
  CAPTURE(output);
  CHECK(WIFSIGNALED(status));
  CHECK(contains(output, "brrr: the host touched device memory (byte 4 of a 12-byte device allocation"));
}

// ---------------------------------------------------------------------------------------------
// Streams, barriers, shuffles, limits

__global__ void fill(float* out, float value) { out[threadIdx.x] = value; }

TEST_CASE("planted: a launch on a stream that is not the runtime's is an error") {
  DeviceArray<float> out(32);
  std::string message = error_of([&] { BRRR_LAUNCH(fill, 1, 32, 0, nullptr, out.data, 1.0f); });
  CHECK(contains(message, "kernel fill (test_sanitizer.cpp:"));
  CHECK(contains(message, "launched on stream 0 (the legacy default stream), not on the runtime's stream"));
  int other_stream = 0;
  message = error_of([&] { BRRR_LAUNCH(fill, 1, 32, 0, &other_stream, out.data, 1.0f); });
  CHECK(contains(message, "not on the runtime's stream"));
  CHECK(error_of([&] { BRRR_LAUNCH(fill, 1, 32, 0, stream(), out.data, 1.0f); }) == "");
}

// The upper half-warp takes one shuffle, the lower half another.
__global__ void shuffle_in_divergent_branch(float* out) {
  float value = threadIdx.x;
  if (threadIdx.x % 32 < 16) value = __shfl_down_sync(0xffffffffu, value, 1);
  else value = __shfl_up_sync(0xffffffffu, value, 1);
  out[threadIdx.x] = value;
}

// Half the block waits at one __syncthreads, half at another.
__global__ void two_different_barriers(float* out) {
  if (threadIdx.x < 32) {
    out[threadIdx.x] = 1.0f;
    __syncthreads();
  } else {
    __syncthreads();
    out[threadIdx.x] = 2.0f;
  }
}

TEST_CASE("planted: lanes meeting at two different shuffles, threads at two different barriers") {
  DeviceArray<float> out(64);
  std::string message = error_of([&] { BRRR_LAUNCH(shuffle_in_divergent_branch, 1, 32, 0, stream(), out.data); });
  CAPTURE(message);
  CHECK(contains(message, "kernel shuffle_in_divergent_branch"));
  CHECK(contains(message, "meet at two different warp operations"));
  CHECK(contains(message, "__shfl_down_sync (test_sanitizer.cpp:"));
  CHECK(contains(message, "__shfl_up_sync (test_sanitizer.cpp:"));

  message = error_of([&] { BRRR_LAUNCH(two_different_barriers, 1, 64, 0, stream(), out.data); });
  CAPTURE(message);
  CHECK(contains(message, "wait at two different __syncthreads"));
}

// 64 KiB of static __shared__: nvcc refuses it; the emulator counts the bytes a block touches.
__global__ void too_much_static_shared(float* out) {
  __shared__ float big[16384];
  for (int i = threadIdx.x; i < 16384; i += blockDim.x) big[i] = i;
  __syncthreads();
  out[threadIdx.x] = big[threadIdx.x];
}

__global__ void uses_dynamic_shared(float* out) {
  BRRR_DYNAMIC_SHARED(float, buffer);
  buffer[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = buffer[(threadIdx.x + 1) % blockDim.x];
}

TEST_CASE("planted: shared memory limits: 48 KiB static, and dynamic above 48 KiB after the kernel opted in") {
  DeviceArray<float> out(256);
  if (brrr::simt::race_detection_available()) {
    const std::string message = error_of([&] { BRRR_LAUNCH(too_much_static_shared, 1, 256, 0, stream(), out.data); });
    CHECK(contains(message, "touches more than 49152 bytes of static __shared__ memory"));
  }
  // launch() opts the kernel in as the nvcc path does (cudaFuncSetAttribute), so 100 KiB runs.
  CHECK(error_of([&] { BRRR_LAUNCH(uses_dynamic_shared, 1, 256, 100 * 1024, stream(), out.data); }) == "");
  CHECK(contains(error_of([&] { BRRR_LAUNCH(uses_dynamic_shared, 1, 256, 228 * 1024, stream(), out.data); }),
                 "a block may have at most 232448"));
}

// ---------------------------------------------------------------------------------------------
// The schedule

// Each block appends its index to `order` as it runs.
__global__ void record_block_order(int* order, int* count) {
  if (threadIdx.x == 0) order[atomicAdd(count, 1)] = blockIdx.x;
}

std::vector<int> block_order(std::uint64_t seed) {
  const std::uint64_t saved = brrr::simt::schedule_seed();
  brrr::simt::set_schedule_seed(seed);
  DeviceArray<int> order(16), count(std::vector<int>{0});
  BRRR_LAUNCH(record_block_order, 16, 32, 0, stream(), order.data, count.data);
  brrr::simt::set_schedule_seed(saved);
  return order.host();
}

TEST_CASE("schedule: blocks run in a shuffled order that the seed fixes") {
  const std::vector<int> a = block_order(1), b = block_order(2);
  std::vector<int> in_order(16);
  for (int i = 0; i < 16; ++i) in_order[i] = i;
  CHECK(a != in_order);
  CHECK(a != b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == in_order);  // every block ran once
}

}  // namespace

TEST_CASE("device memory: freeing a block leaves the blocks that share its pages as they were") {
  // Small blocks share pages (they are 256-byte aligned). Freeing one gives back only the pages
  // it covers wholly; a page it shares with a live block keeps that block's bytes. (The kernel
  // lab found this: a freed 1 KiB workspace zeroed the gradient allocated after it.)
  namespace mem = brrr::simt::memory;
  std::vector<void*> small;
  for (int i = 0; i < 64; ++i) small.push_back(mem::allocate(1000));
  std::vector<double> expected(125);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = 1.5 + static_cast<double>(i);
  {
    const mem::Open open;
    for (void* p : small) std::memcpy(p, expected.data(), 1000);
  }
  for (std::size_t i = 0; i < small.size(); i += 2) mem::release(small[i]);  // every other block
  {
    const mem::Open open;
    for (std::size_t i = 1; i < small.size(); i += 2) {
      INFO("block ", i);
      CHECK(std::memcmp(small[i], expected.data(), 1000) == 0);
    }
  }
  for (std::size_t i = 1; i < small.size(); i += 2) mem::release(small[i]);
}
