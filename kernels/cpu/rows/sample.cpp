// kernels/cpu/rows/sample.cpp: sample_rows on the CPU, kernels/sample_rule.h's draw written
// plainly: rank every token by sorting, then walk the ranking with integer sums. Chapter 20
// ("Sampling on the GPU"). The kernel lab's reference is this function too: the CUDA kernel
// (kernels/cuda/rows/sample.cu), which finds the same token without sorting, is checked
// against it. (The CPU's generate() keeps models::sample_token, which sorts only the tokens
// that matter; this one is the definition, not the fast path.)
// Read before: kernels/sample_rule.h. Read next: kernels/cuda/rows/sample.cu.
#include <algorithm>
#include <cmath>
#include <vector>

#include "brrr/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sample_rule.h"

namespace brrr::kernels::cpu {

std::int32_t sample_row(const float* logits, std::int64_t V, const double* rule) {
  namespace s = sample;
  if (!s::rule_ok(rule)) return -1;
  const double temperature = rule[s::kTemperature], top_k = rule[s::kTopK], top_p = rule[s::kTopP];
  const double u = rule[s::kUniform];
  float top = logits[0];
  for (std::int64_t i = 0; i < V; ++i) {
    if (std::isnan(logits[i])) return -1;
    top = std::max(top, logits[i]);
  }
  if (!std::isfinite(top)) return -1;
  // The ranking: (key, id) in one word, ascending.
  std::vector<std::uint64_t> ranked(static_cast<std::size_t>(V));
  for (std::int64_t i = 0; i < V; ++i)
    ranked[i] = std::uint64_t{s::descending_key(logits[i])} << 32 | static_cast<std::uint64_t>(i);
  std::sort(ranked.begin(), ranked.end());
  const auto weight = [&](std::size_t i) { return s::weight(logits[ranked[i] & 0xffffffffu], top, temperature); };
  std::size_t keep = ranked.size();
  if (top_k >= 1.0 && top_k < static_cast<double>(V)) keep = static_cast<std::size_t>(top_k);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < keep; ++i) total += weight(i);
  if (top_p < 1.0) {  // the shortest prefix whose weight reaches top_p of the total
    const std::uint64_t needed = s::share_threshold(top_p, total);
    std::uint64_t running = 0;
    std::size_t i = 0;
    while ((running += weight(i)) < needed) ++i;
    keep = i + 1, total = running;
  }
  const std::uint64_t needed = s::draw_threshold(u, total);
  std::uint64_t running = 0;
  std::size_t i = 0;
  while ((running += weight(i)) < needed) ++i;
  return static_cast<std::int32_t>(ranked[i] & 0xffffffffu);
}

void sample_rows(std::int32_t* out, const float* logits, const double* rules, std::int64_t rows, std::int64_t V,
                 Stream) {
  sample::check_sample_rows(out, logits, rules, rows, V);
  for (std::int64_t r = 0; r < rows; ++r) out[r] = sample_row(logits + r * V, V, rules + r * sample::kRuleSize);
}

}  // namespace brrr::kernels::cpu
