// exercises/solutions/bf16_round.cpp: the reference solution of ex18.1 (chapter 18).
#include <bit>

#include "exercises/solutions/solutions.h"

namespace brrr::solution {

std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  // A NaN first: the rounding below could carry its payload away and leave infinity.
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  // Adding 0x7FFF rounds up exactly when the low half is above 0x8000; adding the last kept
  // bit too makes a tie (exactly 0x8000) round up only when that bit is 1, to the even value.
  const std::uint32_t last_kept = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + last_kept) >> 16);
}

}  // namespace brrr::solution
