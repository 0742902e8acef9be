// brrr/generator.h: a seeded, counter-based random number generator (Philox 4x32-10).
// Chapter 01 (tensors and storage). Read next: ops.h.
//
// Philox maps (key = seed, counter) to four random 32-bit words with a few rounds of
// multiplies and xors (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011).
// Because number i depends only on (seed, i), any thread can compute any element: the same
// seed gives the same tensor on every machine and for every thread count, and a CUDA kernel
// can produce the very same numbers. The generator's state is just (seed, offset).
#pragma once
#include <array>
#include <cstdint>

namespace brrr {

class Generator {
 public:
  explicit Generator(std::uint64_t seed = 1337) : seed_(seed) {}

  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }  // how many 4-word blocks were used
  void set_state(std::uint64_t seed, std::uint64_t offset) { seed_ = seed; offset_ = offset; }
  void manual_seed(std::uint64_t seed) { seed_ = seed; offset_ = 0; }

  // Reserve n blocks of four 32-bit words; returns the first block's counter. Kernels then
  // call philox(seed(), counter + i) for i < n.
  std::uint64_t reserve(std::uint64_t blocks) { std::uint64_t first = offset_; offset_ += blocks; return first; }

  // Convenience draws for scalar use (one block each).
  double uniform();  // [0, 1)
  double normal();   // mean 0, std 1
  std::uint64_t next_u64();

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

// The Philox 4x32-10 bijection: four random words for (key, counter).
std::array<std::uint32_t, 4> philox(std::uint64_t key, std::uint64_t counter);
// 24 random bits to a float in [0, 1): exact, and identical on every machine.
inline float uniform_from_bits(std::uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }
// 53 random bits (from two words) to a double in [0, 1).
inline double uniform_double_from_bits(std::uint32_t hi, std::uint32_t lo) {
  return static_cast<double>((static_cast<std::uint64_t>(hi) << 21) ^ (lo >> 11)) * (1.0 / 9007199254740992.0);
}

}  // namespace brrr
