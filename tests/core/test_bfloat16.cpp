// tests/core/test_bfloat16.cpp: brrr::bf16 (base/include/brrr/bfloat16.h) converts as CUDA's
// __nv_bfloat16 does: widening is exact, narrowing rounds to nearest with ties to even, NaN
// stays NaN, infinities and signed zeros pass through. Every bf16 value is checked, and every
// float that lies on, just beside, or halfway between two bf16 values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ios>
#include <limits>
#include <random>

#include "brrr/bfloat16.h"

using brrr::bf16;

namespace {

float float_of(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

// The bf16 nearest to x, found by measuring: the two bf16 values around x (truncation, and the
// next one away from zero), their distances to x in double, the nearer one, on a tie the one
// whose last bit is 0. Independent of the header's add-and-shift.
std::uint16_t nearest_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const std::uint16_t down = static_cast<std::uint16_t>(bits >> 16);
  const std::uint16_t up = static_cast<std::uint16_t>(down + 1);  // the next magnitude (may be infinity)
  if ((bits & 0xFFFF) == 0) return down;
  const double below = float_of(std::uint32_t{down} << 16);
  const double above = (up & 0x7FFF) == 0x7F80 ? std::copysign(std::ldexp(1.0, 128), x)  // infinity's slot: 2^128
                                               : double(float_of(std::uint32_t{up} << 16));
  const double to_below = std::fabs(double(x) - below), to_above = std::fabs(above - double(x));
  if (to_below < to_above) return down;
  if (to_above < to_below) return up;
  return (down & 1) == 0 ? down : up;
}

}  // namespace

TEST_CASE("bf16: every bfloat16 widens exactly and narrows back to itself") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const bf16 value = bf16::from_bits(static_cast<std::uint16_t>(b));
    const float wide = static_cast<float>(value);
    std::uint32_t wide_bits;
    std::memcpy(&wide_bits, &wide, 4);
    REQUIRE(wide_bits == b << 16);  // the bits on top, zeros below
    const bool nan = (b & 0x7FFF) > 0x7F80;
    if (nan) REQUIRE(bf16(wide).bits == 0x7FFF);  // the canonical NaN, as CUDA
    else REQUIRE(bf16(wide).bits == b);
  }
}

TEST_CASE("bf16: floats between bfloat16 values round to nearest, ties to even") {
  std::mt19937 random(15);
  // Low halves: just above and below the bf16 value, just below, at and above the halfway point,
  // just below the next value, and a few at random.
  std::uint32_t lows[12] = {0x0001, 0x0002, 0x7FFF, 0x8000, 0x8001, 0xFFFE, 0xFFFF, 0, 0, 0, 0, 0};
  for (int i = 7; i < 12; ++i) lows[i] = random() & 0xFFFF;
  int ties_down = 0, ties_up = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    if ((b & 0x7FFF) >= 0x7F80) continue;  // infinities and NaN: below
    for (const std::uint32_t low : lows) {
      const float x = float_of(b << 16 | low);
      const std::uint16_t expected = nearest_bf16(x);
      INFO("x bits = 0x" << std::hex << (b << 16 | low));
      REQUIRE(bf16(x).bits == expected);
      if (low == 0x8000) ((b & 1) ? ties_up : ties_down) += 1;
    }
  }
  CHECK(ties_down > 0);  // both tie directions were exercised
  CHECK(ties_up > 0);
  // Two ties by hand: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7 (1's last bit is 0: stays 1);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6: goes up.
  CHECK(static_cast<float>(bf16(1.0f + 0x1p-8f)) == 1.0f);
  CHECK(static_cast<float>(bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  // The largest float rounds up to infinity; the largest bf16 stays.
  CHECK(std::isinf(static_cast<float>(bf16(std::numeric_limits<float>::max()))));
  CHECK(bf16(float_of(0x7F7F0000)).bits == 0x7F7F);
}

TEST_CASE("bf16: NaN stays NaN, infinities and signed zeros pass through") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(bf16(inf).bits == 0x7F80);
  CHECK(bf16(-inf).bits == 0xFF80);
  CHECK(bf16(0.0f).bits == 0x0000);
  CHECK(bf16(-0.0f).bits == 0x8000);
  // A NaN whose payload is only in the low bits would become infinity by plain rounding.
  for (const std::uint32_t nan : {0x7F800001u, 0xFF800001u, 0x7FC00000u, 0x7F80FFFFu, 0xFFFFFFFFu}) {
    CHECK(bf16(float_of(nan)).bits == 0x7FFF);
    CHECK(std::isnan(static_cast<float>(bf16(float_of(nan)))));
  }
  // Subnormals round like any other value (the GPU keeps them in cvt.rn.bf16.f32).
  CHECK(bf16(float_of(0x00008000)).bits == 0x0000);  // halfway to 0x0001, 0 is even
  CHECK(bf16(float_of(0x00018000)).bits == 0x0002);  // halfway, 1 is odd: up
}

TEST_CASE("bf16: packing two values into a 32-bit word, lo in the low half") {
  const std::uint32_t word = brrr::pack_bf16(1.0f, -2.5f);
  CHECK(word == (0x3F80u | 0xC020u << 16));
  CHECK(brrr::low_bf16(word) == 1.0f);
  CHECK(brrr::high_bf16(word) == -2.5f);
  CHECK(brrr::round_to_bf16(1.0f + 0x1p-9f) == 1.0f);
}
