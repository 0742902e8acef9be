// bench/bench_serve_step.cpp: one batched step of brrr serve's forward pass (serve/model_runner.cpp,
// chapter 20) at R = 1, 2, 4, 8, 16, 32 sequences decoding one token each: the time per step
// and per token. A step reads every weight once whatever R is, so while the weights dominate,
// tokens per second grow with R (GEMV -> GEMM).
//   build/bench/bench_serve_step [preset=cpu-tiny] [threads] [R,R,...=1,2,4,8,16,32] [float32|bf16]
// bf16: the weights as brrr serve --dtype bf16 reads them (BRRR_AMX=1: on AMX's tile unit).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "brrr/parallel.h"
#include "serve/model_runner.h"

int main(int argc, char** argv) {
  using namespace brrr;
  const std::string preset = argc > 1 ? argv[1] : "cpu-tiny";
  if (argc > 2) set_num_threads(std::stoi(argv[2]));
  Generator gen(1);
  auto model = std::make_shared<models::GPT>(models::gpt_preset(preset), gen);
  model->eval();
  const std::string dtype = argc > 4 ? argv[4] : "float32";
  if (dtype != "float32" && dtype != "bf16") {
    std::fprintf(stderr, "usage: bench_serve_step [preset] [threads] [R,R,...] [float32|bf16]\n");
    return 2;
  }
  serve::ModelRunner runner(model, dtype == "bf16" ? kBFloat16 : kFloat32);
  const std::int64_t T = runner.config().block_size;
  std::printf("bench_serve_step %s, %d threads, %s weights: decode steps at position %lld\n", preset.c_str(),
              get_num_threads(), dtype.c_str(), static_cast<long long>(T / 2));
  std::printf("%4s | %10s | %12s | %10s\n", "R", "ms/step", "tokens/s", "vs R=1");
  double base = 0.0;
  std::vector<int> rows{1, 2, 4, 8, 16, 32};
  if (argc > 3) {
    rows.clear();
    for (std::string list = argv[3]; !list.empty();) {
      const std::size_t comma = list.find(',');
      rows.push_back(std::stoi(list.substr(0, comma)));
      list = comma == std::string::npos ? "" : list.substr(comma + 1);
    }
  }
  for (const int R : rows) {
    std::vector<serve::SequenceCache> caches;
    for (int r = 0; r < R; ++r) caches.push_back(runner.new_cache());
    for (auto& c : caches) c.cpu.length = T / 2;  // as if half the context were there (its keys: zeros)
    std::vector<double> times;
    for (int rep = 0; rep < 30; ++rep) {
      std::vector<serve::StepInput> in;
      for (auto& c : caches) {
        c.cpu.length = T / 2;
        in.push_back({&c, {1}, false});
      }
      const auto t0 = std::chrono::steady_clock::now();
      runner.step(in);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(times.begin(), times.end());
    const double ms = times[times.size() / 2] * 1e3, tps = R / (ms / 1e3);
    if (R == 1) base = tps;  // without R = 1 in the list the last column reads inf
    std::printf("%4d | %10.3f | %12.1f | %9.2fx\n", R, ms, tps, tps / base);
  }
}
