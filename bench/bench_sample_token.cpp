// bench/bench_sample_token.cpp: the time to draw one token from a vocabulary's logits
// (chapter 08, sampling), brrr's sampler beside the sort-everything sampler it replaced.
//   build/bench/bench_sample_token [V ...]      (default 4096 50257: gpt-12m's and GPT-2's)
// Logits: normal, standard deviation 3 (every token within the sampler's cut, its worst case),
// temperature 0.8, top_k 0 or 50, top_p 1 or 0.9. One thread; microseconds per token, the
// median of 5 runs. bench/sample_peer.py times transformers' sampling step on the same settings.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "bench/bench_util.h"
#include "brrr/brrr.h"
#include "brrr/models/generate.h"
#include "tests/sample_reference.h"

using namespace brrr;

namespace {
template <class Draw>
double microseconds_per_token(Draw draw, int tokens) {
  std::vector<double> runs;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < tokens; ++i) draw();
    runs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / tokens * 1e6);
  }
  std::sort(runs.begin(), runs.end());
  return runs[2];
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<long> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atol(argv[i]));
  if (sizes.empty()) sizes = {4096, 50257};
  std::printf("# bench_sample_token: temperature 0.8, normal logits (sd 3), one thread, %s\n", bench::cpu_model().c_str());
  std::printf("%7s %6s %6s %14s %14s %8s\n", "V", "top_k", "top_p", "brrr us/token", "sort-all us", "speedup");
  for (long V : sizes) {
    if (V < 1) {
      std::fprintf(stderr, "bench_sample_token: vocabulary sizes must be positive, got %ld\n", V);
      return 2;
    }
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(static_cast<std::size_t>(V));
    for (float& l : logits) l = normal(rng);
    const int tokens = static_cast<int>(std::max<long>(20, 2000000 / V));
    for (std::int64_t top_k : {0, 50})
      for (double top_p : {1.0, 0.9}) {
        models::GenerateOptions o;
        o.temperature = 0.8, o.top_k = top_k, o.top_p = top_p;
        Generator a(7), b(7);
        unsigned sink = 0;
        const double ours = microseconds_per_token([&] { sink += models::sample_token(logits, o, a); }, tokens);
        const double sorted = microseconds_per_token([&] { sink += test::reference_sample(logits, o, b); }, tokens);
        std::printf("%7ld %6lld %6.1f %14.1f %14.1f %7.1fx  (ids drawn summed: %u)\n", V, static_cast<long long>(top_k),
                    top_p, ours, sorted, sorted / ours, sink);
      }
  }
}
