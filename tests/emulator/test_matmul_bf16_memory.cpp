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
#include "bf16_gemm_check.h"
#include "emulator_test_util.h"
#include "kernels/cuda/matmul/matmul.h"

namespace emu = brrr::kernels::emu;
using brrr::bf16;
using brrr::kernels::MatmulShape;
using brrr::test::DeviceArray;
using brrr::test::Problem;
using brrr::test::describe;
using brrr::test::wrong_elements;

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
    CHECK(wrong_elements(p, rng, &emu::matmul_bf16_pipelined) == 0);
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
