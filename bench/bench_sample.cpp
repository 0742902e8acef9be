// bench/bench_sample.cpp: generation speed with and without the KV cache (chapter 08).
//   build/bench/bench_sample [PRESET] [TOKENS]     (default shakespeare-char, 256)
// Weights are random (speed does not depend on them); the prompt is one token, so the
// context grows from 1 to TOKENS + 1 positions, all within block_size.
#include <chrono>
#include <cstdlib>
#include <string>

#include "bench/bench_util.h"
#include "brrr/brrr.h"
#include "brrr/models/generate.h"

using namespace brrr;

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "shakespeare-char";
  const std::int64_t tokens = argc > 2 ? std::atoll(argv[2]) : 256;
  models::GPTConfig c = models::gpt_preset(preset);
  Generator g(1);
  models::GPT model(c, g);
  std::printf("# sampling %lld tokens from %s (%lld parameters), %d threads, %s\n", static_cast<long long>(tokens),
              preset.c_str(), static_cast<long long>(model.num_parameters()), get_num_threads(), bench::cpu_model().c_str());
  double rate[2];
  for (int cached = 1; cached >= 0; --cached) {
    models::GenerateOptions o;
    o.max_new_tokens = tokens;
    o.kv_cache = cached;
    const auto start = std::chrono::steady_clock::now();
    models::generate(model, {0}, o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rate[cached] = static_cast<double>(tokens) / s;
    std::printf("%-14s %8.2f s  %8.1f tokens/s\n", cached ? "KV cache" : "no KV cache", s, rate[cached]);
  }
  std::printf("speed-up with the cache: %.1fx\n", rate[1] / rate[0]);
  return 0;
}
