// tests/sample_reference.h: sample_token's definition (chapter 08, sampling) written out
// plainly, the way models/gpt/generate.cpp sampled before it stopped sorting the whole
// vocabulary: every token ranked by std::stable_sort, every weight computed.
// tests/train/test_sampling.cpp holds the sampler to it; bench/bench_sample_token.cpp times both.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/models/generate.h"

namespace brrr::test {

inline std::uint32_t reference_sample(const std::vector<float>& logits, const models::GenerateOptions& o, Generator& gen) {
  std::vector<std::uint32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return logits[a] > logits[b]; });
  std::size_t keep = o.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(o.top_k), order.size()) : order.size();
  std::vector<double> p(keep);
  const double top = logits[order[0]];
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) total += p[i] = std::exp((logits[order[i]] - top) / o.temperature);
  if (o.top_p < 1.0) {
    double cumulative = 0.0;
    std::size_t cut = keep;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += p[i] / total;
      if (cumulative >= o.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  double u = gen.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0.0) return order[i];
  }
  return order[keep - 1];
}

}  // namespace brrr::test
