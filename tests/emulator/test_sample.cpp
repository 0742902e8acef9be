// tests/emulator/test_sample.cpp: sample_rows, a sampled decoding step's draw on the GPU
// (kernels/cuda/rows/sample.cu, chapter 20), on the emulator: the tokens models::sample_token (the
// CPU's generate) draws from the same logits and uniform numbers, on fresh random rows with
// ties, masked tokens and every kind of rule; a row's token alone or beside others; -1 for a bad
// row, its neighbours untouched. (The lab's check against the definition written plainly,
// kernels/cpu/rows/sample.cpp, is in test_rows.cpp with the other row kernels'.) Read before:
// kernels/sample_rule.h.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string_view>
#include <vector>

#include "brrr/cuda.h"
#include "brrr/generator.h"
#include "brrr/models/generate.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"
#include "kernels/sample_rule.h"
#include "tests/emulator/emulator_test_util.h"
#include "tests/skip.h"

using namespace brrr;
using brrr::test::DeviceArray;

namespace {

namespace rule = kernels::sample;

bool other_schedule() {
  const char* seed = std::getenv("BRRR_EMULATOR_SEED");
  return seed && std::string_view(seed) != "1";
}

// Rows of V logits (fresh random numbers): every third rounded to halves (many ties, ranked by
// id), every fourth with a few tokens masked to -infinity, as a padded vocabulary is.
std::vector<float> random_rows(std::int64_t rows, std::int64_t V, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> x(static_cast<std::size_t>(rows * V));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t v = 0; v < V; ++v) {
      float& l = x[r * V + v];
      l = normal(rng);
      if (r % 3 == 1) l = std::round(l * 2.0f) / 2.0f;
      if (r % 4 == 2 && v % 7 == 3 && v > 0) l = -INFINITY;
    }
  return x;
}

// Row r's sampling options: temperatures, top_k and top_p in turn.
models::GenerateOptions options_of(std::int64_t r, std::int64_t V) {
  const double temperatures[] = {1.0, 0.35, 0.8, 1.9};
  const std::int64_t top_k[] = {0, 1, 3, 40, V};
  const double top_p[] = {1.0, 0.95, 0.5, 0.05, 1.0, 0.999};
  models::GenerateOptions o;
  o.temperature = temperatures[r % 4];
  o.top_k = top_k[r % 5];
  o.top_p = top_p[r % 6];
  return o;
}

std::vector<std::int32_t> sample_on_device(const std::vector<float>& logits, const std::vector<double>& rules,
                                           std::int64_t rows, std::int64_t V) {
  static kernels::Kernel sample(kernels::op::sample_rows);
  DeviceArray<float> x(logits);
  DeviceArray<double> r(rules);
  DeviceArray<std::int32_t> out(static_cast<std::size_t>(rows));
  sample(DeviceType::CUDA)(out.data, x.data, r.data, rows, V, gpu::emulator_runtime().stream());
  return out.host();
}

}  // namespace

TEST_CASE("sample_rows on the emulator draws sample_token's tokens, a row's token alone or beside others") {
  cuda::use_emulator();
  const unsigned seed = std::random_device{}();
  INFO("seed ", seed);
  std::mt19937 rng(seed);
  for (const std::int64_t V : {1, 2, 61, 700}) {
    const std::int64_t rows = V == 700 ? 24 : 60;
    INFO("V ", V);
    const std::vector<float> logits = random_rows(rows, V, rng);
    std::vector<double> rules(static_cast<std::size_t>(rows * rule::kRuleSize));
    std::vector<std::int32_t> expected(static_cast<std::size_t>(rows));
    for (std::int64_t r = 0; r < rows; ++r) {
      const models::GenerateOptions o = options_of(r, V);
      const std::uint64_t draw_seed = rng();
      Generator gen(draw_seed);
      double* rl = rules.data() + r * rule::kRuleSize;
      rl[rule::kTemperature] = o.temperature, rl[rule::kTopK] = static_cast<double>(o.top_k);
      rl[rule::kTopP] = o.top_p, rl[rule::kUniform] = gen.uniform();
      Generator same(draw_seed);  // sample_token draws the same uniform number
      const std::vector<float> row(logits.begin() + r * V, logits.begin() + (r + 1) * V);
      expected[r] = static_cast<std::int32_t>(models::sample_token(row, o, same));
    }
    const std::vector<std::int32_t> got = sample_on_device(logits, rules, rows, V);
    CHECK(got == expected);
    // Rows 5 and 6 alone: their tokens in the batch.
    const std::vector<float> two(logits.begin() + 5 * V, logits.begin() + 7 * V);
    const std::vector<double> two_rules(rules.begin() + 5 * rule::kRuleSize, rules.begin() + 7 * rule::kRuleSize);
    const std::vector<std::int32_t> alone = sample_on_device(two, two_rules, 2, V);
    CHECK((alone[0] == got[5] && alone[1] == got[6]));
  }
}

TEST_CASE("sample_rows on the emulator gives -1 for a bad rule or a row with a NaN or an infinity, and its "
          "neighbours their tokens") {
  if (other_schedule()) return test::skip("one schedule suffices for the error rows");
  cuda::use_emulator();
  const std::int64_t V = 9, rows = 6;
  std::vector<float> logits(static_cast<std::size_t>(rows * V), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) logits[r * V + 4] = 3.0f;  // token 4 is most likely
  logits[2 * V + 1] = NAN;
  logits[3 * V + 7] = INFINITY;
  std::vector<double> rules;
  for (std::int64_t r = 0; r < rows; ++r) rules.insert(rules.end(), {1.0, 1.0, 1.0, 0.5});  // top_k 1: token 4
  rules[0 * rule::kRuleSize + rule::kTemperature] = 0.0;  // greedy is max_dim's, not a rule
  rules[1 * rule::kRuleSize + rule::kTopP] = 1.5;
  rules[4 * rule::kRuleSize + rule::kUniform] = 1.0;
  const std::vector<std::int32_t> got = sample_on_device(logits, rules, rows, V);
  CHECK(got == std::vector<std::int32_t>{-1, -1, -1, -1, -1, 4});
  static kernels::Kernel sample(kernels::op::sample_rows);
  CHECK_THROWS_WITH_AS(sample(DeviceType::CUDA)(nullptr, nullptr, nullptr, 1, (std::int64_t{1} << 20) + 1,
                                                gpu::emulator_runtime().stream()),
                       "sample_rows: the vocabulary V must be in [1, 1048576] (its weights are added in 64-bit "
                       "integers), got 1048577",
                       Error);
}
