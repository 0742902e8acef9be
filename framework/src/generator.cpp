// framework/src/generator.cpp: Philox 4x32-10 and the scalar draws of a Generator.
// Chapter 01 (tensors and storage).
#include "brrr/generator.h"

#include <cmath>

namespace brrr {

std::array<std::uint32_t, 4> philox(std::uint64_t key, std::uint64_t counter) {
  // Constants from the Philox paper: two multipliers and two Weyl increments for the key.
  constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = 0, c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kMul0) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(kMul1) * c2;
    const std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    const std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {c0, c1, c2, c3};
}

std::uint64_t Generator::next_u64() {
  const auto w = philox(seed_, reserve(1));
  return (static_cast<std::uint64_t>(w[0]) << 32) | w[1];
}

double Generator::uniform() {
  const auto w = philox(seed_, reserve(1));
  return uniform_double_from_bits(w[0], w[1]);
}

double Generator::normal() {
  // Box-Muller: two uniforms (u1 in (0, 1]) give one normal.
  const auto w = philox(seed_, reserve(1));
  const double u1 = 1.0 - uniform_double_from_bits(w[0], w[1]);
  const double u2 = uniform_double_from_bits(w[2], w[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace brrr
