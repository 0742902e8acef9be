// kernels/sample_rule.h: what sample_rows (kernels/signatures.h) draws, written once for its CPU
// kernel, its CUDA kernel and the kernel lab, so that all three give the same token. Chapter 20
// ("Sampling on the GPU"). Read before: models/gpt/generate.cpp (sample_token, the CPU's
// definition of a draw). Read next: kernels/cpu/rows/sample.cpp (this rule written plainly, by
// sorting), then kernels/cuda/rows/sample.cu (the same tokens without sorting).
//
// The CPU's definition (sample_token): rank the tokens by descending logit, ties by id; weigh
// each exp((logit - top) / temperature); keep the first top_k; keep the shortest prefix of those
// whose share of their weight reaches top_p; draw u uniform in [0, 1) and walk the prefix until
// the running weight passes u times the prefix's weight. The CPU adds its weights one after the
// other in float64. A GPU adds them in whatever order its threads meet, and a float64 sum
// depends on the order: the same logits could then give a different token run to run. So here
// every weight is an integer, exp(...) times 2^44 rounded down (kWeightBits), and every sum is
// an integer, exact in any order. The comparisons are exact too: "the running weight reaches
// top_p of the total" is running >= ceil(p * total), with p read to 53 bits (share_threshold);
// "passes u times the total" is running >= floor(u * total) + 1 (draw_threshold).
//
// What that changes against the CPU's float64 sums: a weight under 2^-44 of the top token's
// (a logit more than 30.5 temperatures below the top) becomes 0 and is never drawn (the CPU
// would draw such a token with a probability under V * 2^-44, about 3e-9 at GPT-2's
// vocabulary), and each weight loses less than 2^-44 of the top's. The draws differ from
// sample_token's only where u falls that close to the boundary between two tokens.
// tests/emulator/test_sample.cpp checks that they are sample_token's on random rows.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "brrr/error.h"
#include "brrr/generator.h"  // BRRR_HOST_DEVICE

namespace brrr::kernels::sample {

// A row's rule: four float64 numbers, in this order.
constexpr int kTemperature = 0;  // > 0 (greedy, temperature 0, is max_dim's job)
constexpr int kTopK = 1;         // 0: every token; else the count kept, a whole number
constexpr int kTopP = 2;         // in (0, 1]; 1 keeps every token top_k left
constexpr int kUniform = 3;      // u in [0, 1): the draw, from the caller's generator
constexpr int kRuleSize = 4;

constexpr int kWeightBits = 44;
using u128 = unsigned __int128;  // the products below (GCC, clang and nvcc have it)
// V weights of at most 2^44 each must add up below 2^64.
constexpr std::int64_t kMaxVocab = std::int64_t{1} << (64 - kWeightBits);

// Whether a rule is one sample_rows draws by (a row with another gets -1).
BRRR_HOST_DEVICE inline bool rule_ok(const double* rule) {
  const double t = rule[kTemperature], k = rule[kTopK], p = rule[kTopP], u = rule[kUniform];
  return t > 0.0 && k >= 0.0 && k == floor(k) && p > 0.0 && p <= 1.0 && u >= 0.0 && u < 1.0;
}

// A float's bits as an unsigned key whose ascending order is the floats' descending order, the
// largest logit first (as generate.cpp's ranking). -0 and +0 make one key, as they compare equal.
BRRR_HOST_DEVICE inline std::uint32_t descending_key(float v) {
  v += 0.0f;  // -0 + 0 is +0; every other float is itself
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const std::uint32_t negative = static_cast<std::uint32_t>(static_cast<std::int32_t>(u) >> 31);  // all ones if so
  return ~(u ^ (negative | 0x80000000u));  // inside the ~: ascending as the floats are
}

// A token's weight: exp((logit - top) / temperature) in float64, as sample_token computes it,
// then times 2^44 rounded down. The top token weighs exactly 2^44.
BRRR_HOST_DEVICE inline std::uint64_t weight(float logit, double top, double temperature) {
  return static_cast<std::uint64_t>(ldexp(exp((static_cast<double>(logit) - top) / temperature), kWeightBits));
}

// The least running weight that reaches the share p of total: ceil(p * total), p taken to 53 bits
// after the binary point (exact for p in [0.5, 1]).
BRRR_HOST_DEVICE inline std::uint64_t share_threshold(double p, std::uint64_t total) {
  const auto p53 = static_cast<u128>(ldexp(p, 53));
  return static_cast<std::uint64_t>((p53 * total + (u128{1} << 53) - 1) >> 53);
}

// The least running weight that passes u * total: floor(u * total) + 1, u taken to 53 bits (a
// generator's uniform double has no more). Below total whenever u < 1.
BRRR_HOST_DEVICE inline std::uint64_t draw_threshold(double u, std::uint64_t total) {
  const auto u53 = static_cast<u128>(ldexp(u, 53));
  return static_cast<std::uint64_t>((u53 * total) >> 53) + 1;
}

// The sizes and pointers every sample_rows kernel takes, checked alike on every device (the
// rules are in the device's memory: a kernel checks those row by row, rule_ok).
inline void check_sample_rows(const void* out, const void* logits, const void* rules, std::int64_t rows,
                              std::int64_t V) {
  BRRR_CHECK(rows >= 0, "sample_rows: rows must not be negative, got ", rows);
  BRRR_CHECK(V >= 1 && V <= kMaxVocab, "sample_rows: the vocabulary V must be in [1, ", kMaxVocab,
             "] (its weights are added in 64-bit integers), got ", V);
  BRRR_CHECK(rows == 0 || (out && logits && rules), "sample_rows: a null pointer: out, logits and rules must be given");
}

}  // namespace brrr::kernels::sample
