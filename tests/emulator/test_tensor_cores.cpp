// tests/emulator/test_tensor_cores.cpp: the emulator's mma.sync, ldmatrix and cp.async
// (kernels/cuda/simt_tensor_cores.cpp) against the PTX ISA. Each test writes the ISA's layout
// table down once more, in the ISA's own terms (element a_i of a lane sits at row ..., column
// ...), builds every lane's registers from it, and checks every lane's result register by
// register; then planted faults: a missing cp.async.wait_group, a missing __syncthreads between
// pipeline stages. Chapter 14 (tensor cores). The values are small multiples of 1/4, so every
// sum is exact and the checks are equalities.
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
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_tensor_cores.h"
#include "tests/emulator/emulator_test_util.h"

namespace {

brrr::gpu::Runtime& runtime() { return brrr::gpu::emulator_runtime(); }
brrr::kernels::Stream stream() { return runtime().stream(); }

using brrr::test::contains;
using brrr::test::DeviceArray;
using brrr::test::error_of;

// Random multiples of 1/4 in [-2, 2]: exact in bf16, f16 and tf32, and so are their sums here.
std::vector<float> quarters(int n, std::uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<float> values(static_cast<std::size_t>(n));
  for (auto& v : values) v = static_cast<float>(static_cast<int>(random() % 17) - 8) / 4.0f;
  return values;
}

// IEEE half bits of x, for values a half holds exactly (normal numbers and zero).
std::uint32_t half_bits(float x) {
  if (x == 0.0f) return std::signbit(x) ? 0x8000u : 0u;
  int exponent = 0;
  const float fraction = std::frexp(std::fabs(x), &exponent);  // |x| = fraction 2^exponent, fraction in [0.5, 1)
  const auto mantissa = static_cast<std::uint32_t>((fraction * 2.0f - 1.0f) * 1024.0f);
  return (x < 0 ? 0x8000u : 0u) | static_cast<std::uint32_t>(exponent - 1 + 15) << 10 | mantissa;
}

enum Shape { kBf16, kF16, kTf32 };

template <int S>
__global__ void mma_kernel(float* d, const unsigned* a, const unsigned* b, const float* c) {
  const int lane = static_cast<int>(threadIdx.x);
  unsigned ra[4], rb[2];
  float rc[4], rd[4];
  for (int r = 0; r < 4; ++r) ra[r] = a[lane * 4 + r], rc[r] = c[lane * 4 + r];
  for (int r = 0; r < 2; ++r) rb[r] = b[lane * 2 + r];
  if constexpr (S == kBf16) mma_m16n8k16_bf16(rd, ra, rb, rc);
  else if constexpr (S == kF16) mma_m16n8k16_f16(rd, ra, rb, rc);
  else mma_m16n8k8_tf32(rd, ra, rb, rc);
  for (int i = 0; i < 4; ++i) d[lane * 4 + i] = rd[i];
}

// The accumulator's table, for all shapes (PTX ISA, "Matrix fragments for mma.m16n8k*"):
// c_i of a lane sits at row groupID for c0 and c1, groupID + 8 for c2 and c3; column
// threadID_in_group * 2 + (i & 1).
int c_row(int lane, int i) { return i < 2 ? lane >> 2 : (lane >> 2) + 8; }
int c_col(int lane, int i) { return (lane % 4) * 2 + (i & 1); }

// Runs one mma on every lane's registers and checks every lane's d against a c + sum a b.
template <int S>
void check_mma(const std::vector<unsigned>& a, const std::vector<unsigned>& b, const std::vector<float>& A,
               const std::vector<float>& B, int K) {
  const std::vector<float> C = quarters(16 * 8, 3);
  std::vector<float> c(32 * 4);
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) c[lane * 4 + i] = C[c_row(lane, i) * 8 + c_col(lane, i)];
  DeviceArray<unsigned> a_dev(a), b_dev(b);
  DeviceArray<float> c_dev(c), d_dev(32 * 4);
  BRRR_LAUNCH(mma_kernel<S>, 1, 32, 0, stream(), d_dev.data, a_dev.data, b_dev.data, c_dev.data);
  const std::vector<float> d = d_dev.host();
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const int row = c_row(lane, i), col = c_col(lane, i);
      double expected = C[row * 8 + col];
      for (int k = 0; k < K; ++k) expected += double(A[row * K + k]) * B[k * 8 + col];
      INFO("lane " << lane << ", d" << i << " (row " << row << ", column " << col << ")");
      REQUIRE(d[lane * 4 + i] == expected);
    }
}

// m16n8k16's operand tables, for bf16 and f16 alike: element a_i (i = 0..7) of a lane at
//   row    groupID for a0, a1, a4, a5; groupID + 8 for a2, a3, a6, a7
//   column threadID_in_group * 2 + (i & 1) for i < 4; the same + 8 for i >= 4
// element b_i (i = 0..3) at row threadID_in_group * 2 + (i & 1) (+ 8 for i >= 2), column
// groupID. Register r holds elements 2r (low 16 bits) and 2r + 1 (high).
template <int S>
void check_m16n8k16(std::uint32_t (*bits16)(float)) {
  const std::vector<float> A = quarters(16 * 16, 1), B = quarters(16 * 8, 2);
  std::vector<unsigned> a(32 * 4), b(32 * 2);
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, in_group = lane % 4;
    for (int i = 0; i < 8; ++i) {
      const int row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
      const int col = in_group * 2 + (i & 1) + (i >= 4 ? 8 : 0);
      a[lane * 4 + i / 2] |= bits16(A[row * 16 + col]) << (16 * (i % 2));
    }
    for (int i = 0; i < 4; ++i) {
      const int row = in_group * 2 + (i & 1) + (i >= 2 ? 8 : 0), col = group;
      b[lane * 2 + i / 2] |= bits16(B[row * 8 + col]) << (16 * (i % 2));
    }
  }
  check_mma<S>(a, b, A, B, 16);
}

std::uint32_t bf16_bits(float x) { return brrr::bf16(x).bits; }

}  // namespace

TEST_CASE("tensor cores: mma.sync.m16n8k16 bf16 assembles every lane's fragments as the PTX ISA lays them out") {
  check_m16n8k16<kBf16>(bf16_bits);
}

TEST_CASE("tensor cores: mma.sync.m16n8k16 f16 assembles every lane's fragments as the PTX ISA lays them out") {
  CHECK(half_bits(1.0f) == 0x3C00);  // the test's own encoder
  CHECK(half_bits(-0.25f) == 0xB400);
  check_m16n8k16<kF16>(half_bits);
}

TEST_CASE("tensor cores: mma.sync.m16n8k8 tf32 reads the top 19 bits of each operand, in the ISA's layout") {
  // m16n8k8 .tf32: a_i (i = 0..3, one per register) at row groupID for a0 and a2, groupID + 8
  // for a1 and a3; column threadID_in_group for a0 and a1, threadID_in_group + 4 for a2 and a3.
  // b_i (i = 0, 1) at row threadID_in_group (+ 4 for b1), column groupID.
  const std::vector<float> A = quarters(16 * 8, 4), B = quarters(8 * 8, 5);
  std::vector<unsigned> a(32 * 4), b(32 * 2);
  std::mt19937 random(6);
  for (int lane = 0; lane < 32; ++lane) {
    const int group = lane >> 2, in_group = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = (i == 0 || i == 2) ? group : group + 8, col = i < 2 ? in_group : in_group + 4;
      // Garbage in the 13 bits the tensor core ignores must not change the result.
      a[lane * 4 + i] = std::bit_cast<std::uint32_t>(A[row * 8 + col]) | (random() & 0x1FFFu);
    }
    for (int i = 0; i < 2; ++i) b[lane * 2 + i] = std::bit_cast<std::uint32_t>(B[(in_group + 4 * i) * 8 + group]);
  }
  check_mma<kTf32>(a, b, A, B, 8);
}

TEST_CASE("tensor cores: float_to_tf32 rounds to nearest, ties away from zero (cvt.rna.tf32.f32)") {
  CHECK(std::bit_cast<float>(float_to_tf32(1.0f + 0x1p-11f)) == 1.0f + 0x1p-10f);  // tie: away from zero
  CHECK(std::bit_cast<float>(float_to_tf32(-(1.0f + 0x1p-11f))) == -(1.0f + 0x1p-10f));
  CHECK(std::bit_cast<float>(float_to_tf32(1.0f + 3 * 0x1p-11f)) == 1.0f + 0x1p-9f);  // odd below: still up
  CHECK(std::bit_cast<float>(float_to_tf32(1.0f + 0x1p-12f)) == 1.0f);
  CHECK(std::isinf(std::bit_cast<float>(float_to_tf32(INFINITY))));
  CHECK(std::isnan(std::bit_cast<float>(float_to_tf32(NAN))));
}

// ---------------------------------------------------------------------------------------------
// ldmatrix

namespace {

constexpr int kPitch = 24;  // 16-bit values per row of the shared tile (padded: 48 bytes)

template <int Count, bool Transposed>
__global__ void ldmatrix_kernel(unsigned* out, const unsigned short* values, const int* physical_row) {
  __align__(16) __shared__ unsigned short tile[32 * kPitch];
  for (int i = static_cast<int>(threadIdx.x); i < 32 * kPitch; i += 32) tile[i] = values[i];
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x);
  // Lanes past the 8 Count that give rows pass a null address: ldmatrix ignores it.
  const void* row = lane < 8 * Count ? &tile[physical_row[lane] * kPitch] : nullptr;
  unsigned r[Count];
  if constexpr (Count == 1) Transposed ? ldmatrix_x1_trans(r, row) : ldmatrix_x1(r, row);
  if constexpr (Count == 2) Transposed ? ldmatrix_x2_trans(r, row) : ldmatrix_x2(r, row);
  if constexpr (Count == 4) Transposed ? ldmatrix_x4_trans(r, row) : ldmatrix_x4(r, row);
  for (int j = 0; j < Count; ++j) out[lane * 4 + j] = r[j];
}

// ldmatrix (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): for .x1 threads 0-7 give
// the addresses of the 8 rows, for .x2 threads 0-15 (matrix 1 from threads 8-15), for .x4 all
// 32. Each thread receives, in register j, two adjacent elements of matrix j: row laneid / 4,
// columns (laneid % 4) * 2 and the next, or with .trans, column laneid / 4 of rows
// (laneid % 4) * 2 and the next. The rows sit at scattered places of the tile here.
template <int Count, bool Transposed>
void check_ldmatrix() {
  const auto code = [](int matrix, int row, int col) { return static_cast<unsigned>(matrix << 8 | row << 4 | col); };
  std::vector<int> physical(32);
  for (int i = 0; i < 32; ++i) physical[static_cast<std::size_t>(i)] = (i * 13 + 5) % 32;  // a permutation
  std::vector<unsigned short> values(32 * kPitch, 0xDEAD);
  for (int lane = 0; lane < 32; ++lane)
    for (int col = 0; col < 8; ++col)
      values[static_cast<std::size_t>(physical[static_cast<std::size_t>(lane)] * kPitch + col)] =
          static_cast<unsigned short>(code(lane / 8, lane % 8, col));
  DeviceArray<unsigned short> values_dev(values);
  DeviceArray<int> physical_dev(physical);
  DeviceArray<unsigned> out(32 * 4);
  BRRR_LAUNCH((ldmatrix_kernel<Count, Transposed>), 1, 32, 0, stream(), out.data, values_dev.data, physical_dev.data);
  const std::vector<unsigned> r = out.host();
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < Count; ++j) {
      const unsigned expected = Transposed ? code(j, (lane % 4) * 2, lane / 4) | code(j, (lane % 4) * 2 + 1, lane / 4) << 16
                                           : code(j, lane / 4, (lane % 4) * 2) | code(j, lane / 4, (lane % 4) * 2 + 1) << 16;
      INFO("lane " << lane << ", register " << j);
      REQUIRE(r[static_cast<std::size_t>(lane * 4 + j)] == expected);
    }
}

}  // namespace

TEST_CASE("tensor cores: ldmatrix .x1, .x2, .x4 hand every lane its fragment as the PTX ISA says") {
  check_ldmatrix<1, false>();
  check_ldmatrix<2, false>();
  check_ldmatrix<4, false>();
}

TEST_CASE("tensor cores: ldmatrix .trans hands every lane the transposed fragment") {
  check_ldmatrix<1, true>();
  check_ldmatrix<2, true>();
  check_ldmatrix<4, true>();
}

// ---------------------------------------------------------------------------------------------
// cp.async

namespace {

constexpr int kHalf = 128;  // floats per group

// Two groups of 16-byte copies: floats 0..127 and 128..255 of `in` (only n of them exist: the
// copies past n read fewer source bytes, and the rest is zero-filled). Each thread reads a
// value another thread copied. `wait_before_second` = false plants the missing wait.
template <bool wait_before_second>
__global__ void copy_two_groups(float* out, const float* in, int n) {
  BRRR_DYNAMIC_SHARED(float, tile);
  const int t = static_cast<int>(threadIdx.x);
  for (int group = 0; group < 2; ++group) {
    const int first = group * kHalf + 4 * t;
    const int available = n - first < 0 ? 0 : (n - first > 4 ? 4 : n - first);
    cp_async<16>(&tile[first], in + (available > 0 ? first : 0), 4 * available);
    cp_async_commit_group();
  }
  cp_async_wait_group<1>();  // the first group has landed, the second may not have
  __syncthreads();
  for (int i = 0; i < 4; ++i) out[4 * t + i] = tile[(4 * t + 4 + i) % kHalf];
  if (wait_before_second) cp_async_wait_group<0>();
  __syncthreads();
  for (int i = 0; i < 4; ++i) out[kHalf + 4 * t + i] = tile[kHalf + (4 * t + 4 + i) % kHalf];
}

// A double-buffered loop over `tiles` tiles of 128 floats: copy tile i + 1 while summing tile
// i. `barrier_after_use` = false plants the classic pipelining bug: the next copy into a stage
// starts while other threads still read it.
template <bool barrier_after_use>
__global__ void pipelined_sum(float* out, const float* in, int tiles) {
  BRRR_DYNAMIC_SHARED(float, stage);  // 2 stages of 128 floats
  const int t = static_cast<int>(threadIdx.x);
  float sum = 0.0f;
  cp_async<16>(&stage[4 * t], &in[4 * t]);
  cp_async_commit_group();
  for (int i = 0; i < tiles; ++i) {
    if (i + 1 < tiles) {
      cp_async<16>(&stage[((i + 1) % 2) * kHalf + 4 * t], &in[(i + 1) * kHalf + 4 * t]);
      cp_async_commit_group();
      cp_async_wait_group<1>();
    } else {
      cp_async_wait_group<0>();
    }
    __syncthreads();
    for (int j = 0; j < 4; ++j) sum += stage[(i % 2) * kHalf + (4 * t + 4 + j) % kHalf];
    if (barrier_after_use) __syncthreads();
  }
  out[t] = sum;
}

// A zero fill of 16 bytes whose source pointer is one float past an aligned one: it reads no byte,
// but the PTX ISA still requires the address aligned, and a GPU may fault on it.
__global__ void zero_fill_from_misaligned(float* out, const float* in) {
  BRRR_DYNAMIC_SHARED(float, tile);
  const int t = static_cast<int>(threadIdx.x);
  cp_async<16>(&tile[4 * t], in + 1, 0);
  cp_async_commit_group();
  cp_async_wait_group<0>();
  __syncthreads();
  out[t] = tile[4 * t];
}

// A zero-filling copy of the last 2 floats of `in` (n floats, n % 4 == 2): it reads 8 source
// bytes, but its 16 bytes end 8 past the allocation, which compute-sanitizer reports on a GPU.
__global__ void partial_copy_at_the_end(float* out, const float* in, int n) {
  BRRR_DYNAMIC_SHARED(float, tile);
  cp_async<16>(&tile[0], in + (n - 2), 8);
  cp_async_commit_group();
  cp_async_wait_group<0>();
  out[0] = tile[0];
}

}  // namespace

TEST_CASE("planted: a partial cp.async whose 16 bytes end past the allocation is refused, as compute-sanitizer does") {
  DeviceArray<float> in(quarters(66, 5)), out(1);
  const std::string message = error_of(
      [&] { BRRR_LAUNCH(partial_copy_at_the_end, 1, 1, 4 * sizeof(float), stream(), out.data, in.data, 66); });
  CAPTURE(message);
  CHECK(contains(message, "cp.async of 16 bytes reading 8 source bytes"));
  CHECK(contains(message, "ends past the source's allocation"));
}

TEST_CASE("planted: a cp.async of 0 source bytes from a misaligned address is refused, as on a GPU") {
  DeviceArray<float> in(quarters(64, 3)), out(32);
  const std::string message =
      error_of([&] { BRRR_LAUNCH(zero_fill_from_misaligned, 1, 32, 128 * sizeof(float), stream(), out.data, in.data); });
  CAPTURE(message);
  CHECK(contains(message, "cp.async of 16 bytes"));
  CHECK(contains(message, "must be multiples of the copy's size"));
}

TEST_CASE("tensor cores: cp.async copies at its wait_group, in commit groups, zero-filling past the source") {
  const int n = kHalf + 50;  // the second group is ragged: 50 floats, then zeros
  std::vector<float> values(2 * kHalf);
  for (int i = 0; i < 2 * kHalf; ++i) values[static_cast<std::size_t>(i)] = i < n ? 1.0f + static_cast<float>(i) : -1.0f;
  DeviceArray<float> in(values), out(2 * kHalf);
  BRRR_LAUNCH(copy_two_groups<true>, 1, 32, 2 * kHalf * sizeof(float), stream(), out.data, in.data, n);
  const std::vector<float> result = out.host();
  for (int t = 0; t < 32; ++t)
    for (int i = 0; i < 4; ++i)
      for (int group = 0; group < 2; ++group) {
        const int source = group * kHalf + (4 * t + 4 + i) % kHalf;
        REQUIRE(result[static_cast<std::size_t>(group * kHalf + 4 * t + i)] ==
                (source < n ? values[static_cast<std::size_t>(source)] : 0.0f));
      }
}

TEST_CASE("tensor cores: a double-buffered cp.async pipeline gives the plain sum") {
  const int tiles = 3;
  const std::vector<float> values = quarters(tiles * kHalf, 7);
  DeviceArray<float> in(values), out(32);
  BRRR_LAUNCH(pipelined_sum<true>, 1, 32, 2 * kHalf * sizeof(float), stream(), out.data, in.data, tiles);
  const std::vector<float> result = out.host();
  for (int t = 0; t < 32; ++t) {
    float expected = 0.0f;
    for (int i = 0; i < tiles; ++i)
      for (int j = 0; j < 4; ++j) expected += values[static_cast<std::size_t>(i * kHalf + (4 * t + 4 + j) % kHalf)];
    REQUIRE(result[static_cast<std::size_t>(t)] == expected);
  }
}

TEST_CASE("planted: reading a cp.async destination before its wait_group is reported") {
  const int n = 2 * kHalf;
  DeviceArray<float> in(quarters(n, 8)), out(n);
  if (brrr::simt::race_detection_available()) {
    const std::string message = error_of(
        [&] { BRRR_LAUNCH(copy_two_groups<false>, 1, 32, n * sizeof(float), stream(), out.data, in.data, n); });
    CAPTURE(message);
    CHECK(contains(message, "kernel copy_two_groups<false>"));
    CHECK(contains(message, "is still copying"));
    CHECK(contains(message, "byte "));  // where, in dynamic shared memory
    CHECK(contains(message, "test_tensor_cores.cpp:"));
  }
  // Without the detector the copy has not happened either: the reads see the poison (NaN).
  const bool was = brrr::simt::race_detection();
  brrr::simt::set_race_detection(false);
  BRRR_LAUNCH(copy_two_groups<false>, 1, 32, n * sizeof(float), stream(), out.data, in.data, n);
  brrr::simt::set_race_detection(was);
  const std::vector<float> result = out.host();
  CHECK(!std::isnan(result[0]));      // the first group was waited for
  CHECK(std::isnan(result[kHalf]));  // the second was not
}

TEST_CASE("planted: a cp.async into a stage other threads still read (no __syncthreads) is a data race") {
  if (!brrr::simt::race_detection_available()) return;  // AddressSanitizer build
  const int tiles = 3;
  DeviceArray<float> in(quarters(tiles * kHalf, 9)), out(32);
  const std::string message = error_of(
      [&] { BRRR_LAUNCH(pipelined_sum<false>, 1, 32, 2 * kHalf * sizeof(float), stream(), out.data, in.data, tiles); });
  CAPTURE(message);
  CHECK(contains(message, "kernel pipelined_sum<false>"));
  CHECK(contains(message, "data race on shared memory"));
  CHECK(contains(message, "no barrier orders the two"));
}

namespace {
__global__ void mma_in_a_partial_warp(float* d) {
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0};
  mma_m16n8k16_bf16(c, a, b, c);
  d[threadIdx.x] = c[0];
}
}  // namespace

TEST_CASE("planted: an mma in a warp of fewer than 32 threads is an error, not a hang") {
  DeviceArray<float> d(48);
  const std::string message = error_of([&] { BRRR_LAUNCH(mma_in_a_partial_warp, 1, 48, 0, stream(), d.data); });
  CAPTURE(message);
  CHECK(contains(message, "need all 32 lanes"));
}

// ---------------------------------------------------------------------------------------------
// How the tensor cores add: toward zero (simt_tensor_cores.cpp, tensor_core_sum)

namespace {
__global__ void one_tf32_mma(float* d, float a00, float b00, float c00) {
  const int lane = static_cast<int>(threadIdx.x);
  // Only a[0][0] (lane 0, register 0), b[0][0] (lane 0, register 0) and c[0][0] (lane 0, c0).
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  float c[4] = {0, 0, 0, 0};
  if (lane == 0) a[0] = float_to_tf32(a00), b[0] = float_to_tf32(b00), c[0] = c00;
  mma_m16n8k8_tf32(c, a, b, c);
  d[lane] = c[0];
}
}  // namespace

TEST_CASE("tensor cores: a sum that float32 would round up is cut toward zero") {
  // 1 + 3 2^-24 lies between 1 + 2^-23 and 1 + 2^-22, nearer the second: float32 adds give
  // 1 + 2^-22, a tensor core 1 + 2^-23 (and the mirror image for negative numbers).
  DeviceArray<float> d(32);
  BRRR_LAUNCH(one_tf32_mma, 1, 32, 0, stream(), d.data, 3 * 0x1p-12f, 0x1p-12f, 1.0f);
  CHECK(1.0f + 3 * 0x1p-24f == 1.0f + 0x1p-22f);  // what float32 does
  CHECK(d.host()[0] == 1.0f + 0x1p-23f);
  BRRR_LAUNCH(one_tf32_mma, 1, 32, 0, stream(), d.data, -3 * 0x1p-12f, 0x1p-12f, -1.0f);
  CHECK(d.host()[0] == -(1.0f + 0x1p-23f));
  BRRR_LAUNCH(one_tf32_mma, 1, 32, 0, stream(), d.data, 2.0f, 0.25f, 1.0f);  // exact sums stay exact
  CHECK(d.host()[0] == 1.5f);
  BRRR_LAUNCH(one_tf32_mma, 1, 32, 0, stream(), d.data, INFINITY, 1.0f, 1.0f);
  CHECK(std::isinf(d.host()[0]));
}

namespace {
// One warp, out (16 x 8) = a (16 x K) @ b (K x 8) with m16n8k8 tf32 mma, a and b already tf32.
// `promote`: each 16-deep slice of k into a fresh accumulator, added to the running sum with
// float32 adds (what matmul variant 7 does); otherwise one accumulator carried over all of K.
template <bool promote>
__global__ void long_sum_kernel(float* out, const float* a, const float* b, int K) {
  const int lane = static_cast<int>(threadIdx.x), g = lane / 4, t = lane % 4;
  float sum[4] = {0, 0, 0, 0}, slice[4] = {0, 0, 0, 0};
  for (int k0 = 0; k0 < K; k0 += 8) {
    unsigned ra[4], rb[2];
    for (int r = 0; r < 4; ++r) ra[r] = __float_as_uint(a[(g + 8 * (r % 2)) * K + k0 + t + 4 * (r / 2)]);
    for (int r = 0; r < 2; ++r) rb[r] = __float_as_uint(b[(k0 + t + 4 * r) * 8 + g]);
    if (promote) mma_m16n8k8_tf32(slice, ra, rb, slice);
    else mma_m16n8k8_tf32(sum, ra, rb, sum);
    if (promote && (k0 + 8) % 16 == 0)
      for (int i = 0; i < 4; ++i) sum[i] += slice[i], slice[i] = 0.0f;
  }
  for (int i = 0; i < 4; ++i) out[(g + 8 * (i / 2)) * 8 + 2 * t + i % 2] = sum[i];
}
}  // namespace

TEST_CASE("tensor cores: an accumulator carried over a long K drifts toward zero, and promotion stops it") {
  // What the first H100 run of matmul variant 7 found (chapter 14), now seen in the emulator:
  // every tensor-core sum is cut toward zero, so one accumulator carried over K = 4096 of
  // positive products loses a little at each of its 1024 blocks, all in one direction.
  constexpr int K = 4096;
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<float> a(16 * K), b(K * 8);
  for (auto& v : a) v = std::bit_cast<float>(float_to_tf32(uniform(random)));
  for (auto& v : b) v = std::bit_cast<float>(float_to_tf32(uniform(random)));
  const DeviceArray<float> da(a), db(b);
  DeviceArray<float> out(16 * 8);
  const auto worst_error = [&](auto kernel) {
    BRRR_LAUNCH(kernel, 1, 32, 0, stream(), out.data, da.data, db.data, K);
    const std::vector<float> got = out.host();
    double worst = 0.0;
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        double want = 0.0;
        for (int k = 0; k < K; ++k) want += static_cast<double>(a[i * K + k]) * b[k * 8 + j];
        worst = std::max(worst, std::fabs(got[i * 8 + j] - want) / want);
        CHECK(got[i * 8 + j] <= want * (1.0 + 1e-6));  // never above: every cut is toward zero
      }
    return worst;
  };
  const double carried = worst_error(long_sum_kernel<false>), promoted = worst_error(long_sum_kernel<true>);
  CAPTURE(carried);
  CAPTURE(promoted);
  CHECK(carried > 1e-5);   // a rounding float32 accumulator would be near 1e-6
  CHECK(promoted < 3e-6);  // float32's rounded adds, on 16-product slices
}

// ---------------------------------------------------------------------------------------------
// WMMA (nvcuda::wmma in simt.h): the layout is the emulator's own, the arithmetic the tensor cores'

namespace {
namespace wmma = nvcuda::wmma;

// d (16 x 16) = a (16 x 8) @ b (8 x 16) + c, a column major (ld 16), b row major (ld 16), c and d
// row major (ld 16). `offset` moves the pointer of a, `divergent` gives lane 5 another stride.
__global__ void wmma_tile(float* d, const float* a, const float* b, const float* c, int offset, bool divergent) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
  const unsigned stride = divergent && threadIdx.x == 5 ? 32 : 16;
  wmma::load_matrix_sync(fa, a + offset, stride);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(fc, c, 16, wmma::mem_row_major);
  for (float& x : fa.x) x = wmma::__float_to_tf32(x);
  for (float& x : fb.x) x = wmma::__float_to_tf32(x);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(d, fc, 16, wmma::mem_row_major);
}
}  // namespace

TEST_CASE("wmma: a 16 x 16 x 8 tf32 product with column- and row-major operands") {
  const std::vector<float> a = quarters(16 * 16, 31), b = quarters(8 * 16, 32), c = quarters(16 * 16, 33);
  const DeviceArray<float> da(a), db(b), dc(c);
  DeviceArray<float> d(16 * 16);
  BRRR_LAUNCH(wmma_tile, 1, 32, 0, stream(), d.data, da.data, db.data, dc.data, 0, false);
  const std::vector<float> got = d.host();
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double want = c[i * 16 + j];
      for (int k = 0; k < 8; ++k) want += static_cast<double>(a[k * 16 + i]) * b[k * 16 + j];  // a col major
      REQUIRE(got[i * 16 + j] == want);
    }
}

TEST_CASE("planted: WMMA from a misaligned pointer, or with lanes that disagree, is an error") {
  const std::vector<float> values = quarters(16 * 17, 34);
  const DeviceArray<float> a(values), b(values), c(values);
  DeviceArray<float> d(16 * 16);
  std::string message =
      error_of([&] { BRRR_LAUNCH(wmma_tile, 1, 32, 0, stream(), d.data, a.data, b.data, c.data, 4, false); });
  CAPTURE(message);
  CHECK(contains(message, "wmma::load_matrix_sync"));
  CHECK(contains(message, "not 32-byte aligned"));
  message = error_of([&] { BRRR_LAUNCH(wmma_tile, 1, 32, 0, stream(), d.data, a.data, b.data, c.data, 0, true); });
  CHECK(contains(message, "all 32 lanes must give the same"));
}
