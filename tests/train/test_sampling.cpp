// tests/train/test_sampling.cpp: sample_token against its definition, written out plainly
// (chapter 08, sampling). The sampler ranks only the tokens whose weight can change its sums
// and sorts the rest only when a walk reaches them; the reference here sorts every token with
// std::stable_sort and weighs them all, as brrr's sampler did before. The same Generator state
// must give the same token, on every vocabulary size, temperature, top_k and top_p tried
// (the reference: tests/sample_reference.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/models/generate.h"
#include "tests/sample_reference.h"

using namespace brrr;
using brrr::test::reference_sample;

namespace {

// Logits of one of several kinds: spread normally, wide (most tokens negligible), few distinct
// values (many ties, -0 beside +0), or one far above the rest.
std::vector<float> make_logits(std::mt19937& rng, std::size_t V, int kind) {
  std::vector<float> l(V);
  std::normal_distribution<float> normal(0.0f, kind == 1 ? 30.0f : 3.0f);
  std::uniform_int_distribution<int> few(-3, 3);
  for (float& x : l) {
    if (kind == 2) x = few(rng) == 0 ? (rng() % 2 ? -0.0f : 0.0f) : static_cast<float>(few(rng)) * 0.5f;
    else x = normal(rng);
  }
  if (kind == 3) l[rng() % V] = 1000.0f;
  return l;
}

}  // namespace

TEST_CASE("sampling: sample_token draws what its definition draws") {
  std::mt19937 rng(20261128);
  int cases = 0;
  for (std::size_t V : {std::size_t{1}, std::size_t{2}, std::size_t{65}, std::size_t{300}, std::size_t{4096}, std::size_t{50257}}) {
    for (int kind = 0; kind < 4; ++kind) {
      const std::vector<float> logits = make_logits(rng, V, kind);
      for (double temperature : {1e-3, 0.8, 1.0, 100.0})
        for (std::int64_t top_k : {0, 1, 5, 50, 100000})
          for (double top_p : {1.0, 0.9, 0.5, 1e-9, 0.9999999999999999}) {
            if (V > 4096 && (top_k == 5 || top_k == 100000 || top_p == 0.5)) continue;  // keeps the test short
            models::GenerateOptions o;
            o.temperature = temperature, o.top_k = top_k, o.top_p = top_p;
            const std::uint64_t seed = rng();
            Generator a(seed), b(seed);
            for (int draw = 0; draw < (V > 4096 ? 1 : 12); ++draw) {
              const std::uint32_t got = models::sample_token(logits, o, a), want = reference_sample(logits, o, b);
              if (got != want) {
                INFO("V ", V, " kind ", kind, " temperature ", temperature, " top_k ", top_k, " top_p ", top_p, " draw ", draw);
                REQUIRE(got == want);
              }
              ++cases;
            }
          }
    }
  }
  CHECK(cases > 5000);
}

TEST_CASE("sampling: a top-p walk past every token of weight still finds the reference's") {
  // Seven tokens of logit 0 and three of -1000, whose weights (exp(-1000) = 0) fall under the
  // sampler's cut. Seven shares of 1/7 add up, in double, to 0.9999999999999998, below the
  // largest top_p under 1, so the nucleus loop walks on into the tokens below the cut: the
  // sampler must rank them then, in the reference's order, and still draw only the seven.
  const std::vector<float> logits = {-1000.0f, 0.0f, 0.0f, -1000.0f, 0.0f, 0.0f, 0.0f, -1000.0f, 0.0f, 0.0f};
  models::GenerateOptions o;
  o.temperature = 1.0, o.top_p = 0.9999999999999999;
  Generator a(5), b(5);
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 200; ++i) {
    const std::uint32_t got = models::sample_token(logits, o, a);
    CHECK(got == reference_sample(logits, o, b));
    seen.insert(got);
  }
  CHECK(seen == std::set<std::uint32_t>{1, 2, 4, 5, 6, 8, 9});
}
