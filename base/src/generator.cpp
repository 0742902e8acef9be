// base/src/generator.cpp: the scalar draws of a Generator (Philox itself is in generator.h).
// Chapter 01 (tensors and storage).
#include "brrr/generator.h"

#include <cmath>

namespace brrr {

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
