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

// What follows is compiled for CUDA kernels too (kernels/cuda/elementwise.cu), so that the
// GPU draws exactly the CPU's numbers from one definition.
#if defined(__CUDACC__)
#define BRRR_HOST_DEVICE __host__ __device__
#else
#define BRRR_HOST_DEVICE
#endif

struct PhiloxWords {
  std::uint32_t w[4];
};

// Constants from the Philox paper: two multipliers and two Weyl increments for the key.
struct Philox {
  static constexpr std::uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  static constexpr std::uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  static constexpr int kRounds = 10;
};

// The Philox 4x32-10 bijection: four random words for (key, counter).
BRRR_HOST_DEVICE inline PhiloxWords philox4x32(std::uint64_t key, std::uint64_t counter) {
  constexpr std::uint32_t kMul0 = Philox::kMul0, kMul1 = Philox::kMul1;
  constexpr std::uint32_t kWeyl0 = Philox::kWeyl0, kWeyl1 = Philox::kWeyl1;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
  std::uint32_t c2 = 0, c3 = 0;
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < Philox::kRounds; ++round) {
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
  return PhiloxWords{{c0, c1, c2, c3}};
}
inline std::array<std::uint32_t, 4> philox(std::uint64_t key, std::uint64_t counter) {
  const PhiloxWords r = philox4x32(key, counter);
  return {r.w[0], r.w[1], r.w[2], r.w[3]};
}
// 24 random bits to a float in [0, 1): exact, and identical on every machine.
BRRR_HOST_DEVICE inline float uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}
// 53 random bits (from two words) to a double in [0, 1).
BRRR_HOST_DEVICE inline double uniform_double_from_bits(std::uint32_t hi, std::uint32_t lo) {
  return static_cast<double>((static_cast<std::uint64_t>(hi) << 21) ^ (lo >> 11)) * (1.0 / 9007199254740992.0);
}

}  // namespace brrr
