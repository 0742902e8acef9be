// tests/emulator/test_hopper.cpp: the emulator's Hopper instructions (kernels/cuda/
// simt_hopper.cpp) against the PTX ISA: wgmma m64nNk16 for several N, every swizzle, K- and
// MN-major B and A from registers, checked against a float64 sum of the same bf16 values; TMA
// loads (ragged edges, every swizzle) against the shared-memory picture each swizzle draws, and
// stores; mbarrier phases; the sanitizer's rules, each with a planted fault; the counters (the
// bulk copies' bytes among the distinct sectors); and
// examples_hopper.cu's matmul end to end. Chapter 21 (Hopper). Small sizes: the file runs
// in seconds.
//
// The test draws shared memory its own way, as pictures rather than the emulator's address
// arithmetic: a swizzled tile is lines of 128 bytes in patterns of 8 lines, and the 16-byte
// chunk c of line L of a pattern sits at chunk c ^ (L & (chunks per swizzled row - 1)).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "brrr/bfloat16.h"
#include "kernels/cuda/examples_hopper.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_counters.h"
#include "kernels/cuda/simt_hopper.h"
#include "tests/emulator/emulator_test_util.h"

namespace {

using brrr::simt::Swizzle;
using brrr::simt::TensorMap;
using brrr::simt::TensorMapSwizzle;
using brrr::simt::TensorMapType;
using brrr::test::contains;
using brrr::test::DeviceArray;
using brrr::test::error_of;

brrr::kernels::Stream stream() { return brrr::gpu::emulator_runtime().stream(); }

#define REQUIRE_RACE_DETECTOR()                                                              \
  if (!brrr::simt::race_detection_available()) {                                             \
    MESSAGE("skipped: the race detector is not in the AddressSanitizer build");              \
    return;                                                                                  \
  }

std::vector<std::uint16_t> random_bf16(int n, std::uint32_t seed) {
  std::mt19937 random(seed);
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> values(static_cast<std::size_t>(n));
  for (auto& v : values) v = brrr::bf16(normal(random)).bits;
  return values;
}
float value_of(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

unsigned row_bytes_of(Swizzle s) { return brrr::simt::swizzle_row_bytes(s); }

// Where byte `offset` of an unswizzled picture goes under a swizzle of `row_bytes` (the picture
// starts at a multiple of 1024): chunk c of 128-byte line L moves to chunk c ^ (L % 8 & mask).
std::size_t swizzle_picture(std::size_t offset, unsigned row_bytes) {
  if (row_bytes == 16 || row_bytes == 0) return offset;
  const std::size_t line = offset / 128 % 8, chunk = offset / 16 % 8, mask = row_bytes / 16 - 1;
  return offset - chunk * 16 + ((chunk ^ (line & mask)) * 16);
}

// The picture of a rows x 16 bf16 operand (value(r, k)), with its descriptor's offsets.
struct Picture {
  std::vector<std::uint16_t> bytes;  // as 16-bit words
  unsigned leading = 0, stride = 0;
};

// K-major: each row's 16 values are 32 contiguous bytes. Without swizzle, 8 x 16-byte core
// matrices: [8-row group][k half][row] (leading 128, stride 256); with one, rows of row_bytes
// in 8-row groups of a pattern each (stride 8 row_bytes).
template <class Value>
Picture k_major(int rows, Swizzle s, Value value) {
  Picture p;
  const unsigned row = row_bytes_of(s);
  const bool plain = s == Swizzle::kNone;
  p.leading = plain ? 128 : 16;
  p.stride = plain ? 256 : 8 * row;
  p.bytes.assign(static_cast<std::size_t>(rows / 8 + 1) * p.stride / 2 + 512, 0);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < 16; ++k) {
      const std::size_t at = plain ? (r / 8) * 256 + (k / 8) * 128 + (r % 8) * 16 + (k % 8) * 2
                                   : (r / 8) * p.stride + (r % 8) * row + k * 2;
      p.bytes[swizzle_picture(at, row) / 2] = value(r, k);
    }
  return p;
}

// MN-major (B as K rows of N contiguous values): without swizzle, 8 k x 8 n core matrices
// (leading 128 between k halves, stride 256 between 8-column groups); with one, atoms of 8 k
// rows of row_bytes (row_bytes / 2 columns): the two k halves a pattern apart (stride), the
// atoms along N two patterns apart (leading).
template <class Value>
Picture mn_major(int columns, Swizzle s, Value value) {
  Picture p;
  const unsigned row = row_bytes_of(s), pattern = 8 * row;
  const bool plain = s == Swizzle::kNone;
  p.leading = plain ? 128 : 2 * pattern;
  p.stride = plain ? 256 : pattern;
  const int per_atom = static_cast<int>(row / 2);
  p.bytes.assign(plain ? static_cast<std::size_t>(columns / 8 + 1) * 128 + 512
                       : static_cast<std::size_t>((columns + per_atom - 1) / per_atom) * p.leading / 2 + 512,
                 0);
  for (int n = 0; n < columns; ++n)
    for (int k = 0; k < 16; ++k) {
      const std::size_t at = plain ? (n / 8) * 256 + (k / 8) * 128 + (k % 8) * 16 + (n % 8) * 2
                                   : (n / per_atom) * p.leading + (k / 8) * pattern + (k % 8) * row + (n % per_atom) * 2;
      p.bytes[swizzle_picture(at, row) / 2] = value(n, k);
    }
  return p;
}

constexpr int kBOffset = 16384;  // B's picture starts here in shared memory (a multiple of 1024)

// The accumulator layout, in the PTX ISA's words: warp w of the warpgroup holds rows 16 w ..;
// for each 8-column chunk j, value i of lane l is row l / 4 + 8 (i / 2), column 2 (l % 4) + (i % 2).
int d_row(int thread, int i) { return 16 * (thread / 32) + thread % 32 / 4 + 8 * (i % 4 / 2); }
int d_col(int thread, int i) { return 8 * (i / 4) + 2 * (thread % 4) + i % 2; }

// One warpgroup: both pictures into shared memory, a fence, then one wgmma (A from shared
// memory or from registers), c in and d out in the accumulator layout.
template <int N, bool TransA, bool TransB, bool Registers>
__global__ void wgmma_kernel(float* d_out, const std::uint16_t* a_picture, int a_words, const std::uint16_t* b_picture,
                             int b_words, const float* c, const unsigned* a_registers, unsigned a_leading,
                             unsigned a_stride, unsigned b_leading, unsigned b_stride, unsigned swizzle) {
  BRRR_DYNAMIC_SHARED(std::uint16_t, shared);
  const int thread = static_cast<int>(threadIdx.x);
  for (int i = thread; i < a_words; i += 128) shared[i] = a_picture[i];
  for (int i = thread; i < b_words; i += 128) shared[kBOffset / 2 + i] = b_picture[i];
  fence_proxy_async_shared_cta();
  __syncthreads();
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = c[thread * (N / 2) + i];
  const auto s = static_cast<Swizzle>(swizzle);
  const std::uint64_t b = wgmma_descriptor(shared + kBOffset / 2, b_leading, b_stride, s);
  wgmma_fence();
  if constexpr (Registers) {
    unsigned a[4];
    for (int r = 0; r < 4; ++r) a[r] = a_registers[thread * 4 + r];
    wgmma_m64nNk16_bf16<N, TransB>(d, a, b, 1);
  } else {
    wgmma_m64nNk16_bf16<N, TransA, TransB>(d, wgmma_descriptor(shared, a_leading, a_stride, s), b, 1);
  }
  wgmma_commit_group();
  wgmma_wait_group<0>();
  for (int i = 0; i < N / 2; ++i) d_out[thread * (N / 2) + i] = d[i];
}

template <int N, bool TransB, bool Registers, bool TransA = false>
void check_wgmma(Swizzle s, std::uint32_t seed) {
  INFO("N = " << N << ", A MN-major " << TransA << ", B MN-major " << TransB << ", A from registers " << Registers
              << ", swizzle mode " << static_cast<int>(s));
  const std::vector<std::uint16_t> A = random_bf16(64 * 16, seed), B = random_bf16(16 * N, seed + 1);
  const auto a_at = [&](int m, int k) { return A[static_cast<std::size_t>(m * 16 + k)]; };
  const auto b_at = [&](int k, int n) { return B[static_cast<std::size_t>(k * N + n)]; };
  const Picture a = TransA ? mn_major(64, s, a_at) : k_major(64, s, a_at);
  const Picture b = TransB ? mn_major(N, s, [&](int n, int k) { return b_at(k, n); })
                           : k_major(N, s, [&](int n, int k) { return b_at(k, n); });
  std::vector<float> c(128 * N / 2);
  std::vector<double> C(64 * N);
  std::mt19937 random(seed + 2);
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < N / 2; ++i) {
      const float v = static_cast<float>(static_cast<int>(random() % 64) - 32) / 8.0f;
      c[static_cast<std::size_t>(t * (N / 2) + i)] = v;
      C[static_cast<std::size_t>(d_row(t, i) * N + d_col(t, i))] = v;
    }
  // mma.m16n8k16's A fragment, per warp of 16 rows: register r of lane l holds row l / 4 +
  // 8 (r % 2), columns 2 (l % 4) + 8 (r / 2) and the next (the lower in the low half).
  std::vector<unsigned> registers(128 * 4);
  for (int t = 0; t < 128; ++t)
    for (int r = 0; r < 4; ++r) {
      const int row = 16 * (t / 32) + t % 32 / 4 + 8 * (r % 2), column = 2 * (t % 4) + 8 * (r / 2);
      registers[static_cast<std::size_t>(t * 4 + r)] = a_at(row, column) | static_cast<unsigned>(a_at(row, column + 1)) << 16;
    }
  REQUIRE(a.bytes.size() * 2 <= kBOffset);
  DeviceArray<std::uint16_t> a_dev(a.bytes), b_dev(b.bytes);
  DeviceArray<float> c_dev(c), d_dev(c.size());
  DeviceArray<unsigned> registers_dev(registers);
  BRRR_LAUNCH((wgmma_kernel<N, TransA, TransB, Registers>), 1, 128, kBOffset + b.bytes.size() * 2, stream(), d_dev.data,
              a_dev.data, static_cast<int>(a.bytes.size()), b_dev.data, static_cast<int>(b.bytes.size()), c_dev.data,
              registers_dev.data, a.leading, a.stride, b.leading, b.stride, static_cast<unsigned>(s));
  const std::vector<float> d = d_dev.host();
  int wrong = 0;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < N / 2; ++i) {
      const int m = d_row(t, i), n = d_col(t, i);
      double exact = C[static_cast<std::size_t>(m * N + n)], magnitude = std::fabs(exact);
      for (int k = 0; k < 16; ++k) {
        const double product = static_cast<double>(value_of(a_at(m, k))) * value_of(b_at(k, n));
        exact += product;
        magnitude += std::fabs(product);
      }
      // Two cuts toward zero below float32's 24 bits of the largest term, per block of 8.
      if (std::fabs(d[static_cast<std::size_t>(t * (N / 2) + i)] - exact) > magnitude * 0x1p-21 + 1e-30) ++wrong;
    }
  CHECK(wrong == 0);
}

TEST_CASE("wgmma m64nNk16 bf16: every swizzle, several N, both majors of A and B, A from registers") {
  for (Swizzle s : {Swizzle::kNone, Swizzle::k32B, Swizzle::k64B, Swizzle::k128B}) {
    check_wgmma<8, false, false>(s, 1);
    check_wgmma<64, false, false>(s, 2);
    check_wgmma<24, true, false>(s, 3);
    check_wgmma<64, true, false>(s, 4);
  }
  check_wgmma<256, false, false>(Swizzle::k128B, 5);
  check_wgmma<256, true, false>(Swizzle::k128B, 6);
  check_wgmma<16, false, true>(Swizzle::k64B, 7);
  check_wgmma<128, true, true>(Swizzle::k128B, 8);
  for (Swizzle s : {Swizzle::kNone, Swizzle::k32B, Swizzle::k128B}) check_wgmma<32, true, false, true>(s, 9);
  check_wgmma<16, false, false, true>(Swizzle::k64B, 10);
}

TEST_CASE("wgmma: scale-d 0 ignores the accumulators, and the sum is the tensor cores' (cut toward zero)") {
  // Every product is 2^-30, far below the 24 bits of an accumulator of 1: the tensor core drops
  // it (no guard bits), as simt_tensor_cores.cpp models mma.sync.
  struct Run {
    static void go(float* out, float start, int scale_d) {
      DeviceArray<float> d(128 * 4);
      const float start_host = start;
      BRRR_LAUNCH(scale_kernel, 1, 128, 4096, stream(), d.data, start_host, scale_d);
      const std::vector<float> h = d.host();
      std::copy(h.begin(), h.end(), out);
    }
    static void scale_kernel(float* out, float start, int scale_d) {
      BRRR_DYNAMIC_SHARED(std::uint16_t, shared);
      const int thread = static_cast<int>(threadIdx.x);
      // A = ones in column 0, B = 2^-30 in row 0: every product is 2^-30.
      for (int i = thread; i < 2048; i += 128) shared[i] = 0;
      __syncthreads();
      if (thread < 64) shared[(thread / 8) * 128 + (thread % 8) * 8] = brrr::bf16(1.0f).bits;  // A (m, 0)
      if (thread < 8) shared[1024 + thread * 8] = brrr::bf16(0x1p-30f).bits;                 // B (k 0, n)
      fence_proxy_async_shared_cta();
      __syncthreads();
      float d[4] = {start, start, start, start};
      wgmma_fence();
      wgmma_m64nNk16_bf16<8>(d, wgmma_descriptor(shared, 128, 256, Swizzle::kNone),
                             wgmma_descriptor(shared + 1024, 128, 256, Swizzle::kNone), scale_d);
      wgmma_commit_group();
      wgmma_wait_group<0>();
      for (int i = 0; i < 4; ++i) out[thread * 4 + i] = d[i];
    }
  };
  float out[512];
  Run::go(out, 1.0f, 1);
  CHECK(out[0] == 1.0f);  // 1 + 2^-30 cut to 1
  Run::go(out, -1.0f, 1);
  CHECK(out[0] == -1.0f);  // 2^-30 is below the last of -1's 24 bits: cut away, not rounded
  Run::go(out, NAN, 0);
  CHECK(out[0] == 0x1p-30f);  // scale-d 0: d = a b, the NaN never read
}

// --- TMA -------------------------------------------------------------------------------------

template <class T>
__global__ void tma_load_kernel(T* out, const __grid_constant__ TensorMap map, int x, int y, int box_elements,
                                unsigned expect) {
  BRRR_DYNAMIC_SHARED(T, shared);
  __shared__ std::uint64_t bar;
  if (threadIdx.x == 0) mbarrier_init(&bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(&bar, expect);
    cp_async_bulk_tensor_2d_global_to_shared(shared, &map, x, y, &bar);
  }
  mbarrier_wait_parity(&bar, 0);
  for (int i = static_cast<int>(threadIdx.x); i < box_elements; i += static_cast<int>(blockDim.x)) out[i] = shared[i];
}

// The box at (x, y) of a dim0 x dim1 tensor of values 1 + index, as the swizzle draws it.
template <class T>
std::vector<T> expected_box(int dim0, int dim1, int box0, int box1, int x, int y, unsigned span) {
  std::vector<T> box(static_cast<std::size_t>(box0 * box1));
  for (int r = 0; r < box1; ++r)
    for (int e = 0; e < box0; ++e) {
      const int gx = x + e, gy = y + r;
      const T v = gx >= 0 && gx < dim0 && gy >= 0 && gy < dim1 ? static_cast<T>(1 + gy * dim0 + gx) : T(0);
      const std::size_t at = swizzle_picture(static_cast<std::size_t>(r * box0 + e) * sizeof(T), span == 0 ? 16 : span);
      box[at / sizeof(T)] = v;
    }
  return box;
}

TEST_CASE("TMA load: zeros past every edge, each swizzle's picture, float32 and bf16") {
  const int dim0 = 40, dim1 = 13;
  std::vector<float> tensor(static_cast<std::size_t>(dim0 * dim1));
  for (std::size_t i = 0; i < tensor.size(); ++i) tensor[i] = static_cast<float>(1 + i);
  DeviceArray<float> global(tensor);
  struct Case {
    TensorMapSwizzle swizzle;
    int box0, box1, x, y;
  };
  for (const Case& c : {Case{TensorMapSwizzle::kNone, 8, 4, 36, 11}, Case{TensorMapSwizzle::kNone, 12, 5, -4, -2},
                        Case{TensorMapSwizzle::k32B, 8, 16, 0, 0}, Case{TensorMapSwizzle::k64B, 16, 16, 28, -3},
                        Case{TensorMapSwizzle::k128B, 32, 16, 20, 4}}) {
    INFO("swizzle " << static_cast<int>(c.swizzle) << ", box at (" << c.x << ", " << c.y << ")");
    TensorMap map;
    brrr::simt::make_tensor_map_2d(&map, TensorMapType::kFloat32, global.data, dim0, dim1, dim0 * 4, c.box0, c.box1,
                                   c.swizzle);
    const int elements = c.box0 * c.box1;
    DeviceArray<float> out(static_cast<std::size_t>(elements));
    BRRR_LAUNCH(tma_load_kernel<float>, 1, 64, 8192, stream(), out.data, map, c.x, c.y, elements,
                static_cast<unsigned>(elements * 4));
    CHECK(out.host() == expected_box<float>(dim0, dim1, c.box0, c.box1, c.x, c.y,
                                            brrr::simt::tensor_map_swizzle_bytes(c.swizzle)));
  }
  // bf16, 128-byte rows: the tile wgmma's K-major 128-byte swizzle reads.
  std::vector<std::uint16_t> values(64 * 24);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint16_t>(1 + i);
  DeviceArray<std::uint16_t> bf(values);
  TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, TensorMapType::kBf16, bf.data, 64, 24, 128, 64, 16, TensorMapSwizzle::k128B);
  DeviceArray<std::uint16_t> out(64 * 16);
  BRRR_LAUNCH(tma_load_kernel<std::uint16_t>, 1, 64, 4096, stream(), out.data, map, 0, 16, 64 * 16, 64u * 16 * 2);
  CHECK(out.host() == expected_box<std::uint16_t>(64, 24, 64, 16, 0, 16, 128));
}

TEST_CASE("make_tensor_map_2d: cuTensorMapEncodeTiled's rules") {
  DeviceArray<float> global(64 * 64);
  TensorMap map;
  const auto make = [&](std::uint64_t stride, std::uint32_t box0, TensorMapSwizzle s) {
    return error_of([&] { brrr::simt::make_tensor_map_2d(&map, TensorMapType::kFloat32, global.data, 64, 64, stride, box0, 8, s); });
  };
  CHECK(make(256, 8, TensorMapSwizzle::kNone).empty());
  CHECK(contains(make(250, 8, TensorMapSwizzle::kNone), "multiple of 16"));
  CHECK(contains(make(256, 6, TensorMapSwizzle::kNone), "multiple of 16 bytes"));
  CHECK(contains(make(256, 32, TensorMapSwizzle::k64B), "wider than its 64-byte swizzle"));
  CHECK(contains(make(256, 300, TensorMapSwizzle::kNone), "1 to 256"));
}

__global__ void tma_store_kernel(const __grid_constant__ TensorMap map, int x, int y, int fence) {
  BRRR_DYNAMIC_SHARED(float, shared);
  for (int i = static_cast<int>(threadIdx.x); i < 8 * 4; i += static_cast<int>(blockDim.x)) shared[i] = 100.0f + i;
  if (fence) fence_proxy_async_shared_cta();
  __syncthreads();
  if (threadIdx.x == 0) {
    cp_async_bulk_tensor_2d_shared_to_global(&map, x, y, shared);
    cp_async_bulk_commit_group();
    cp_async_bulk_wait_group_read<0>();
  }
}

TEST_CASE("TMA store: writes the box inside the tensor, nothing past its edges") {
  const int dim0 = 12, dim1 = 6;
  DeviceArray<float> global(std::vector<float>(dim0 * dim1, -1.0f));
  TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, TensorMapType::kFloat32, global.data, dim0, dim1, dim0 * 4, 8, 4,
                                 TensorMapSwizzle::kNone);
  BRRR_LAUNCH(tma_store_kernel, 1, 32, 1024, stream(), map, 8, 4, 1);
  const std::vector<float> h = global.host();
  for (int gy = 0; gy < dim1; ++gy)
    for (int gx = 0; gx < dim0; ++gx) {
      const bool inside = gx >= 8 && gy >= 4;
      CHECK(h[static_cast<std::size_t>(gy * dim0 + gx)] == (inside ? 100.0f + (gy - 4) * 8 + (gx - 8) : -1.0f));
    }
}

// --- mbarriers -------------------------------------------------------------------------------

// Warp 0 produces three rounds into `slot`, warp 1 consumes them: `full` (32 arrivals) says a
// round is written, `empty` (32) that it has been read. The phases alternate 0, 1, 0.
__global__ void ping_pong_kernel(int* out, int* parity_one_first) {
  __shared__ int slot[32];
  __shared__ std::uint64_t full, empty;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (threadIdx.x == 0) mbarrier_init(&full, 32), mbarrier_init(&empty, 32);
  __syncthreads();
  for (int round = 0; round < 3; ++round) {
    const auto parity = static_cast<unsigned>(round % 2);
    if (warp == 0) {
      // A fresh mbarrier's "previous phase" (parity 1) counts as complete: the first wait passes.
      const bool passed = mbarrier_try_wait_parity(&empty, parity ^ 1u);
      if (round == 0 && lane == 0) *parity_one_first = passed;
      slot[lane] = 10 * round + lane;
      mbarrier_arrive(&full);
    } else {
      mbarrier_wait_parity(&full, parity);
      out[round * 32 + lane] = slot[31 - lane];  // another lane's write: ordered by the mbarrier
      mbarrier_arrive(&empty);
    }
  }
}

TEST_CASE("mbarrier: phases alternate parity, a wait orders the arrivals' writes before the waiter's reads") {
  DeviceArray<int> out(96), first(1);
  BRRR_LAUNCH(ping_pong_kernel, 1, 64, 0, stream(), out.data, first.data);
  const std::vector<int> h = out.host();
  for (int round = 0; round < 3; ++round)
    for (int lane = 0; lane < 32; ++lane) CHECK(h[static_cast<std::size_t>(round * 32 + lane)] == 10 * round + 31 - lane);
  CHECK(first.host()[0] == 1);
}

// fault 1: no mbarrier_init; 2: 33 arrivals on a count of 32 in one phase; 3: the init's
// write not ordered before another thread's arrival (no __syncthreads).
__global__ void mbarrier_fault_kernel(int fault) {
  __shared__ std::uint64_t bar;
  if (fault != 1 && threadIdx.x == 0) mbarrier_init(&bar, fault == 2 ? 1 : 32);
  if (fault != 3) __syncthreads();
  if (fault == 2) {
    if (threadIdx.x == 0) mbarrier_arrive_expect_tx(&bar, 16);  // waits for 16 bytes ...
    __syncthreads();
    if (threadIdx.x == 1) mbarrier_arrive(&bar);  // ... so a second arrival is one too many
    return;
  }
  mbarrier_arrive(&bar);
  mbarrier_wait_parity(&bar, 0);
}

TEST_CASE("sanitizer: an mbarrier used before its init, or given more arrivals than its count") {
  CHECK(error_of([&] { BRRR_LAUNCH(mbarrier_fault_kernel, 1, 32, 0, stream(), 0); }).empty());
  CHECK(contains(error_of([&] { BRRR_LAUNCH(mbarrier_fault_kernel, 1, 32, 0, stream(), 1); }),
                 "which no thread of this block has initialized"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(mbarrier_fault_kernel, 1, 32, 0, stream(), 2); }),
                 "more arrivals than the count"));
  REQUIRE_RACE_DETECTOR();
  CHECK(contains(error_of([&] { BRRR_LAUNCH(mbarrier_fault_kernel, 1, 32, 0, stream(), 3); }),
                 "with no barrier between"));
}

// --- the sanitizer: planted faults -------------------------------------------------------------

// fault 1: read the box before waiting; 2: thread 0 waits, the other lanes read without.
__global__ void early_read_kernel(float* out, const __grid_constant__ TensorMap map, int fault) {
  BRRR_DYNAMIC_SHARED(float, shared);
  __shared__ std::uint64_t bar;
  if (threadIdx.x == 0) mbarrier_init(&bar, 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(&bar, 8 * 4 * 4);
    cp_async_bulk_tensor_2d_global_to_shared(shared, &map, 0, 0, &bar);
  }
  if (fault == 1) out[threadIdx.x] = shared[threadIdx.x];
  if (threadIdx.x == 0) mbarrier_wait_parity(&bar, 0);  // the copy lands; only thread 0 has seen it
  out[threadIdx.x] = shared[threadIdx.x];
}

TEST_CASE("sanitizer: a read of shared memory a bulk copy is still filling, or before its mbarrier's wait") {
  REQUIRE_RACE_DETECTOR();
  DeviceArray<float> global(8 * 8), out(32);
  TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, TensorMapType::kFloat32, global.data, 8, 8, 32, 8, 4, TensorMapSwizzle::kNone);
  const std::string filling = error_of([&] { BRRR_LAUNCH(early_read_kernel, 1, 32, 1024, stream(), out.data, map, 1); });
  CHECK(contains(filling, "still filling"));
  CHECK(contains(filling, "test_hopper.cpp"));
  const std::string unwaited = error_of([&] { BRRR_LAUNCH(early_read_kernel, 1, 32, 1024, stream(), out.data, map, 2); });
  CHECK(contains(unwaited, "data race"));
  CHECK(contains(unwaited, "a bulk copy"));
  CHECK(contains(unwaited, "mbarrier"));
}

// fault 1: write B's tile before the wgmma's wait; 2: no fence.proxy.async after the writes;
// 3: only warps 0 and 1 issue the wgmma; 4: no wgmma.fence before it; 5 and 6: two commit
// groups (B at 4096, then B at 6144 bytes), wait_group<1>, then a write to the first group's B
// (done: fine) or to the second's (still in flight).
__global__ void wgmma_fault_kernel(float* out, int fault) {
  BRRR_DYNAMIC_SHARED(std::uint16_t, shared);
  const int thread = static_cast<int>(threadIdx.x);
  for (int i = thread; i < 4096; i += static_cast<int>(blockDim.x)) shared[i] = brrr::bf16(1.0f).bits;
  if (fault != 2) fence_proxy_async_shared_cta();
  __syncthreads();
  float d[4] = {0, 0, 0, 0};
  if (fault == 3 && thread >= 64) return;
  if (fault != 4) wgmma_fence();
  wgmma_m64nNk16_bf16<8>(d, wgmma_descriptor(shared, 128, 256, Swizzle::kNone),
                         wgmma_descriptor(shared + 2048, 128, 256, Swizzle::kNone), 0);
  wgmma_commit_group();
  if (fault == 1 && thread == 5) shared[2048 + 3] = 0;  // B, still being read
  if (fault == 5 || fault == 6) {
    float e[4];
    wgmma_m64nNk16_bf16<8>(e, wgmma_descriptor(shared, 128, 256, Swizzle::kNone),
                           wgmma_descriptor(shared + 3072, 128, 256, Swizzle::kNone), 0);
    wgmma_commit_group();
    wgmma_wait_group<1>();  // the first group is done, the second may not be
    if (thread == 7) shared[fault == 5 ? 2048 + 3 : 3072 + 3] = 0;
  }
  wgmma_wait_group<0>();
  out[thread] = d[0];
}

TEST_CASE("sanitizer: wgmma's operands written too early, without the proxy fence, by part of a warpgroup") {
  DeviceArray<float> out(256);
  CHECK(error_of([&] { BRRR_LAUNCH(wgmma_fault_kernel, 1, 128, 8192, stream(), out.data, 0); }).empty());
  CHECK(out.host()[0] == 16.0f);
  const std::string partial = error_of([&] { BRRR_LAUNCH(wgmma_fault_kernel, 1, 128, 8192, stream(), out.data, 3); });
  CHECK(contains(partial, "reached by only 64 of the 128 threads of warpgroup 0"));
  CHECK(contains(partial, "test_hopper.cpp"));
  CHECK(contains(error_of([&] { BRRR_LAUNCH(wgmma_fault_kernel, 1, 128, 8192, stream(), out.data, 4); }),
                 "before any wgmma.fence"));
  REQUIRE_RACE_DETECTOR();
  const std::string early = error_of([&] { BRRR_LAUNCH(wgmma_fault_kernel, 1, 128, 8192, stream(), out.data, 1); });
  CHECK(contains(early, "wgmma.mma_async issued at test_hopper.cpp"));
  CHECK(contains(early, "may still be reading"));
  CHECK(error_of([&] { BRRR_LAUNCH(wgmma_fault_kernel, 1, 128, 8192, stream(), out.data, 5); }) == "");
  CHECK(contains(error_of([&] { BRRR_LAUNCH(wgmma_fault_kernel, 1, 128, 8192, stream(), out.data, 6); }),
                 "may still be reading"));
  const std::string unfenced = error_of([&] { BRRR_LAUNCH(wgmma_fault_kernel, 1, 128, 8192, stream(), out.data, 2); });
  CHECK(contains(unfenced, "fence.proxy.async"));
  CHECK(contains(unfenced, "test_hopper.cpp"));
}

TEST_CASE("sanitizer: a TMA store of shared memory written without the proxy fence") {
  REQUIRE_RACE_DETECTOR();
  DeviceArray<float> global(16 * 8);
  TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, TensorMapType::kFloat32, global.data, 16, 8, 64, 8, 4, TensorMapSwizzle::kNone);
  CHECK(error_of([&] { BRRR_LAUNCH(tma_store_kernel, 1, 32, 1024, stream(), map, 0, 0, 1); }).empty());
  CHECK(contains(error_of([&] { BRRR_LAUNCH(tma_store_kernel, 1, 32, 1024, stream(), map, 0, 0, 0); }),
                 "fence.proxy.async"));
}

// Warps 1 to 4 take themselves for a warpgroup (threads 32 to 159 issue; the rest return).
__global__ void shifted_warpgroup_kernel(float* out) {
  BRRR_DYNAMIC_SHARED(std::uint16_t, shared);
  for (int i = static_cast<int>(threadIdx.x); i < 4096; i += static_cast<int>(blockDim.x)) shared[i] = 0;
  fence_proxy_async_shared_cta();
  __syncthreads();
  if (threadIdx.x < 32 || threadIdx.x >= 160) return;
  float d[4] = {0, 0, 0, 0};
  wgmma_fence();
  out[threadIdx.x] = d[0];
}

__global__ void setmaxnreg_kernel(int uniform) {
  if (uniform || threadIdx.x >= 32) setmaxnreg_dec<40>();
  else setmaxnreg_dec<232>();
}

TEST_CASE("sanitizer: a warpgroup must be four whole warps from a multiple of 4, and setmaxnreg warpgroup-uniform") {
  DeviceArray<float> out(160);
  const std::string shifted = error_of([&] { BRRR_LAUNCH(shifted_warpgroup_kernel, 1, 160, 8192, stream(), out.data); });
  CHECK(contains(shifted, "is not whole"));  // warp 4 is in warpgroup 1, of which the block has 32 threads
  DeviceArray<float> out2(256);
  const std::string partial = error_of([&] { BRRR_LAUNCH(shifted_warpgroup_kernel, 1, 256, 8192, stream(), out2.data); });
  CHECK(contains(partial, "reached by only 96 of the 128 threads of warpgroup 0"));
  CHECK(contains(partial, "first warp index is a multiple of 4"));
  const std::string small = error_of([&] { BRRR_LAUNCH(setmaxnreg_kernel, 1, 64, 0, stream(), 1); });
  CHECK(contains(small, "make the block a multiple of 128 threads"));
  CHECK(error_of([&] { BRRR_LAUNCH(setmaxnreg_kernel, 1, 256, 0, stream(), 1); }).empty());
  CHECK(contains(error_of([&] { BRRR_LAUNCH(setmaxnreg_kernel, 1, 128, 0, stream(), 0); }),
                 "two different warpgroup instructions"));
}

TEST_CASE("sanitizer: expect_tx must count the bytes that arrive") {
  std::vector<float> zeros(16 * 16, 0.0f);
  DeviceArray<float> global(zeros), out(64);
  TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, TensorMapType::kFloat32, global.data, 16, 16, 64, 8, 4, TensorMapSwizzle::kNone);
  // Past the edge the box still counts in full (zeros): 128 bytes, not the 32 inside.
  CHECK(error_of([&] { BRRR_LAUNCH(tma_load_kernel<float>, 1, 32, 1024, stream(), out.data, map, 12, 14, 32, 128u); })
            .empty());
  const std::string fewer = error_of([&] { BRRR_LAUNCH(tma_load_kernel<float>, 1, 32, 1024, stream(), out.data, map, 0, 0, 32, 64u); });
  CHECK(contains(fewer, "received 128 bytes"));
  CHECK(contains(fewer, "expected 64"));
  const std::string more = error_of([&] { BRRR_LAUNCH(tma_load_kernel<float>, 1, 32, 1024, stream(), out.data, map, 0, 0, 32, 256u); });
  CHECK(contains(more, "never completes"));
  CHECK(contains(more, "expect_tx counted more bytes than the bulk copies bring"));
  CHECK(contains(more, "test_hopper.cpp"));
}

// fault 1: a 128B-swizzled tile 128 bytes past its pattern; 2: a stride offset that is no
// multiple of the pattern; 3: a misaligned start; 4: a base offset; 5: A's last rows past the
// shared memory.
__global__ void descriptor_fault_kernel(float* out, int fault) {
  BRRR_DYNAMIC_SHARED(std::uint16_t, shared);
  for (int i = static_cast<int>(threadIdx.x); i < 8192; i += static_cast<int>(blockDim.x)) shared[i] = 0;
  fence_proxy_async_shared_cta();
  __syncthreads();
  float d[4] = {0, 0, 0, 0};
  const auto s = Swizzle::k128B;
  std::uint64_t a = wgmma_descriptor(shared, 16, 1024, s), b = wgmma_descriptor(shared + 4096, 16, 1024, s);
  if (fault == 1) a = wgmma_descriptor(shared + 64, 16, 1024, s);
  if (fault == 2) b = wgmma_descriptor(shared + 4096, 16, 640, s);
  if (fault == 3) a = wgmma_descriptor(shared + 4, 16, 1024, s);
  if (fault == 4) a |= std::uint64_t{1} << 49;
  if (fault == 5) a = wgmma_descriptor(shared, 16, 3072, s);
  wgmma_fence();
  wgmma_m64nNk16_bf16<8>(d, a, b, 0);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  out[threadIdx.x] = d[0];
}

TEST_CASE("sanitizer: a descriptor that does not fit its tile") {
  DeviceArray<float> out(128);
  const auto run = [&](int fault) {
    return error_of([&] { BRRR_LAUNCH(descriptor_fault_kernel, 1, 128, 16384, stream(), out.data, fault); });
  };
  CHECK(run(0).empty());
  CHECK(contains(run(1), "past its first row"));
  CHECK(contains(run(2), "stride offset that is not a multiple of the 1024-byte pattern"));
  CHECK(contains(run(3), "multiples of 16"));
  CHECK(contains(run(4), "base offset"));
  CHECK(contains(run(5), "past the launch's 16384 bytes"));
  CHECK(contains(run(1), "test_hopper.cpp"));
}

// --- the example kernel end to end, and its counters ---------------------------------------------

void check_example(int M, int N, int K) {
  INFO("(" << M << ", " << K << ") @ (" << N << ", " << K << ")^T");
  const std::vector<std::uint16_t> a = random_bf16(M * K, 11), b = random_bf16(N * K, 12);
  DeviceArray<std::uint16_t> a_dev(a), b_dev(b);
  DeviceArray<float> c(static_cast<std::size_t>(M * N));
  brrr::kernels::emu::wgmma_tma_matmul(c.data, reinterpret_cast<const brrr::bf16*>(a_dev.data),
                                       reinterpret_cast<const brrr::bf16*>(b_dev.data), M, N, K, stream());
  const std::vector<float> h = c.host();
  int wrong = 0;
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double exact = 0, magnitude = 0;
      for (int k = 0; k < K; ++k) {
        const double p = static_cast<double>(value_of(a[static_cast<std::size_t>(m * K + k)])) *
                         value_of(b[static_cast<std::size_t>(n * K + k)]);
        exact += p, magnitude += std::fabs(p);
      }
      if (std::fabs(h[static_cast<std::size_t>(m * N + n)] - exact) > magnitude * 0x1p-19) ++wrong;
    }
  CHECK(wrong == 0);
}

TEST_CASE("examples_hopper.cu: TMA, mbarrier, wgmma and a TMA store make a matmul, ragged edges included") {
  check_example(64, 64, 64);
  check_example(100, 72, 80);
}

TEST_CASE("counters: wgmma instructions and FLOPs, bulk copies and their bytes, mbarrier waits") {
  if (!brrr::simt::memory_counting_available()) {
    MESSAGE("skipped: the counters are not in the AddressSanitizer build");
    return;
  }
  const int M = 100, N = 72, K = 80;  // 2 x 2 blocks, 2 steps of K each
  DeviceArray<std::uint16_t> a(std::vector<std::uint16_t>(M * K, 0)), b(std::vector<std::uint16_t>(N * K, 0));
  DeviceArray<float> c(static_cast<std::size_t>(M * N));
  brrr::simt::set_memory_counting(true);
  brrr::simt::take_memory_counts();
  brrr::kernels::emu::wgmma_tma_matmul(c.data, reinterpret_cast<const brrr::bf16*>(a.data),
                                       reinterpret_cast<const brrr::bf16*>(b.data), M, N, K, stream());
  brrr::simt::set_memory_counting(false);
  const std::vector<brrr::simt::LaunchCounts> launches = brrr::simt::take_memory_counts();
  REQUIRE(launches.size() == 1);
  const brrr::simt::LaunchCounts& t = launches[0];
  CHECK(t.wgmma_instructions == 4 * 2 * 4);  // blocks x steps x k16 slices
  CHECK(t.wgmma_flops == 32ull * 2 * 64 * 64 * 16);
  CHECK(t.bulk_load_requests == 4 * 2 * 2);
  CHECK(t.bulk_load_bytes == 16ull * 8192);  // full boxes, zeros included
  CHECK(t.bulk_store_requests == 4);
  CHECK(t.bulk_store_bytes == 4ull * 64 * 64 * 4);
  CHECK(t.mbarrier_waits == 4ull * 2 * 128);
  // The bulk copies' global bytes are the DRAM floor's: a and b read, c written, each sector
  // once (rows of 160, 160 and 288 bytes: whole sectors), the boxes' zeros past the edges not.
  CHECK(t.distinct_sectors_read * 32 == 2ull * (M * K + N * K));
  CHECK(t.distinct_sectors_written * 32 == 4ull * M * N);
}

}  // namespace
