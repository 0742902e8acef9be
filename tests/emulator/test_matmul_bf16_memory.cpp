// tests/emulator/test_matmul_bf16_memory.cpp: matmul's variant 12, bf16_pipelined (a and b
// stored as bfloat16, 16-byte cp.async copies in a three-stage pipeline, ldmatrix, mma.sync,
// float32 out), run on the SIMT emulator against the triple loop in float64 on the same bf16
// values. Chapter 14. Read before: kernels/cuda/matmul/mma_sync.cu (variant 12).
//
// The shapes walk the kernel's three ways of filling a shared tile: 16-byte copies of aligned
// rows (K = 40, 64), copies that straddle the end of a row and zero-fill the rest (K = 33:
// every 8th row starts 16-byte aligned and ends one value into its last 8), and rows that
// start mid-way through 16 bytes, loaded through registers (odd leading dimensions, and a
// problem whose pointers all start one value past a 16-byte boundary). All four layouts, a
// batch with b broadcast, accumulate, more k-tiles than stages, ragged M and N (N odd).
// Variant 13 (bf16_wide) is variant 12's code with a (128, 128) block of 8 warps: the same
// problems, some larger than its block both ways, against the loop and against variant 12's bits.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "brrr/bfloat16.h"
#include "emulator_test_util.h"
#include "kernels/cuda/matmul/matmul.h"

namespace emu = brrr::kernels::emu;
using brrr::bf16;
using brrr::kernels::MatmulShape;
using brrr::test::DeviceArray;

namespace {

struct Problem {
  std::int64_t batch, M, N, K;
  bool trans_a, trans_b, broadcast_b, accumulate, misaligned;
};

std::string describe(const Problem& p) {
  std::ostringstream text;
  text << "batch " << p.batch << ", (" << p.M << ", " << p.K << ") @ (" << p.K << ", " << p.N << ")"
       << (p.trans_a ? ", a transposed" : "") << (p.trans_b ? ", b transposed" : "")
       << (p.broadcast_b ? ", b broadcast" : "") << (p.accumulate ? ", accumulate" : "")
       << (p.misaligned ? ", misaligned" : "");
  return text.str();
}

using GemmFn = void (*)(float*, const bf16*, const bf16*, const MatmulShape&, brrr::kernels::Stream);

// Runs `gemm` (variant 12 unless told) on device buffers; returns the number of elements of out
// that differ from the float64 loop by more than 1e-5 (1 + |want|), or that changed past the
// end. `result`, if given, receives out as the kernel left it.
int wrong_elements(const Problem& p, std::mt19937& rng, GemmFn gemm = &emu::matmul_bf16_pipelined,
                   std::vector<float>* result = nullptr) {
  const std::int64_t offset = p.misaligned ? 1 : 0;
  MatmulShape s;
  s.batch = p.batch, s.M = p.M, s.N = p.N, s.K = p.K;
  s.trans_a = p.trans_a, s.trans_b = p.trans_b, s.accumulate = p.accumulate;
  s.stride_a = p.batch == 1 ? 0 : p.M * p.K;
  s.stride_b = p.batch == 1 || p.broadcast_b ? 0 : p.K * p.N;
  s.stride_out = p.M * p.N;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto bf16_values = [&](std::int64_t n) {
    std::vector<bf16> v(static_cast<std::size_t>(offset + n));
    for (bf16& x : v) x = bf16(uniform(rng));
    return v;
  };
  const std::vector<bf16> a = bf16_values(p.batch * p.M * p.K);
  const std::vector<bf16> b = bf16_values((s.stride_b ? p.batch : 1) * p.K * p.N);
  std::vector<float> out(static_cast<std::size_t>(offset + p.batch * p.M * p.N + 1));
  for (float& x : out) x = uniform(rng);
  const DeviceArray<bf16> a_device(a), b_device(b);
  DeviceArray<float> out_device(out);
  gemm(out_device.data + offset, a_device.data + offset, b_device.data + offset, s,
       brrr::gpu::emulator_runtime().stream());
  const std::vector<float> got = out_device.host();
  if (result) *result = got;

  int wrong = 0;
  for (std::int64_t z = 0; z < p.batch; ++z)
    for (std::int64_t i = 0; i < p.M; ++i)
      for (std::int64_t j = 0; j < p.N; ++j) {
        double sum = 0.0;
        for (std::int64_t k = 0; k < p.K; ++k) {
          const bf16 x = a[offset + z * s.stride_a + (p.trans_a ? k * p.M + i : i * p.K + k)];
          const bf16 y = b[offset + z * s.stride_b + (p.trans_b ? j * p.K + k : k * p.N + j)];
          sum += static_cast<double>(static_cast<float>(x)) * static_cast<double>(static_cast<float>(y));
        }
        const std::int64_t at = offset + z * s.stride_out + i * p.N + j;
        const double want = p.accumulate ? out[at] + sum : sum;
        if (std::abs(got[at] - want) > 1e-5 * (1.0 + std::abs(want)) && wrong++ < 3)
          MESSAGE("out[" << z << ", " << i << ", " << j << "] = " << got[at] << ", want " << want);
      }
  const std::size_t last = out.size() - 1;
  if (got[last] != out[last] || (offset && got[0] != out[0])) {
    MESSAGE("an element outside out changed");
    ++wrong;
  }
  return wrong;
}

}  // namespace

TEST_CASE("matmul_bf16_memory: 12 bf16_pipelined matches the float64 loop on the same bf16 values") {
  std::mt19937 rng(12);
  const Problem problems[] = {
      {1, 1, 1, 1, false, false, false, false, false},     // one element
      {1, 67, 45, 40, false, true, false, false, false},   // aligned rows: 16-byte copies only
      {1, 17, 131, 33, false, false, false, false, false}, // straddling copies, odd N
      {1, 70, 24, 130, true, true, false, true, false},    // 5 k-tiles through 3 stages, accumulate
      {3, 19, 40, 64, true, false, true, false, true},     // a batch, b broadcast, misaligned
      {1, 33, 9, 7, true, false, false, false, false},     // K < 8: a single ragged chunk
      {2, 5, 6, 0, false, true, false, true, false},       // K = 0: out unchanged when accumulating
      // Whole tiles with aligned rows take copy_tile_bf16's unchecked path; edge tiles and
      // misaligned matrices the checked one, in the same GEMM.
      {1, 128, 64, 96, false, false, false, false, false},  // every tile whole
      {2, 64, 128, 64, true, true, false, true, false},     // whole, both transposed, accumulate
      {1, 136, 72, 80, false, true, false, false, false},   // whole tiles and edges
      {1, 64, 64, 64, true, false, false, false, true},     // whole tiles of a misaligned matrix
  };
  for (const Problem& p : problems) {
    INFO(describe(p));
    CHECK(wrong_elements(p, rng) == 0);
  }
}

TEST_CASE("matmul_bf16_memory: 13 bf16_wide matches the float64 loop, and variant 12 bit for bit") {
  const Problem problems[] = {
      {1, 1, 1, 1, false, false, false, false, false},       // one element
      {1, 67, 45, 40, false, true, false, false, false},     // inside one block
      {1, 150, 131, 33, false, false, false, false, false},  // two blocks each way, straddling copies
      {1, 130, 260, 100, true, true, false, true, false},    // 4 k-tiles through 3 stages, accumulate
      {2, 129, 40, 64, true, false, true, false, true},      // a batch, b broadcast, misaligned
      {1, 200, 9, 7, false, true, false, false, false},      // K < 8, N < one warp's columns
      {1, 256, 128, 64, false, false, false, false, false},  // every (128, 128) tile whole
      {1, 136, 264, 80, true, true, false, true, false},     // whole tiles and edges, accumulate
      {1, 128, 128, 32, false, true, false, false, true},    // a whole tile of a misaligned matrix
  };
  std::uint32_t seed = 13;
  for (const Problem& p : problems) {
    INFO(describe(p));
    std::mt19937 rng13(seed), rng12(seed);
    ++seed;
    std::vector<float> wide, narrow;
    CHECK(wrong_elements(p, rng13, &emu::matmul_bf16_wide, &wide) == 0);
    CHECK(wrong_elements(p, rng12, &emu::matmul_bf16_pipelined, &narrow) == 0);
    CHECK(wide == narrow);  // the same sums in the same order: the block's shape changes no bits
  }
}

TEST_CASE("matmul_bf16_memory: a negative size is refused with a message naming it") {
  MatmulShape s;
  s.M = -1, s.N = 2, s.K = 2;
  float out[4];
  const bf16 a[4] = {}, b[4] = {};
  CHECK(brrr::test::contains(brrr::test::error_of([&] { emu::matmul_bf16_pipelined(out, a, b, s, nullptr); }),
                             "negative size"));
}
