// bench/bench_linear_rows.cpp: the Decoder's linear layer (kernels/cpu/rows/rows.h, chapter 08) on
// its own, over every weight matrix of a GPT shape, at M rows of x: decoding (M = 1), a step of
// M sequences, a prefill of M tokens. Tiles of dot products run below 48 rows (33 with
// AVX-512), the GEMM tile from there (kernels/cpu/rows/internal.h, kGemmThreshold): the
// figures around it are where one hands over to the other.
//   build/bench/bench_linear_rows [--bf16] [gpt-12m|gpt2] [THREADS] [M ...]
// Defaults: gpt-12m, 2 threads, M = 1 8 16 32 48 64 128 512. Random float32 weights (42.5 MB
// at gpt-12m, 340 MB at gpt2, so W comes from memory each pass); the fastest of 6 to 30 passes.
// --bf16: the weights as bfloat16 (half the bytes), each M on the FMA tiles and, where the CPU
// has AMX's tile unit, on it (kernels/cpu/rows/amx.cpp), one after the other.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "brrr/aligned_vector.h"
#include "brrr/bfloat16.h"
#include "brrr/parallel.h"
#include "kernels/cpu/rows/rows.h"

using brrr::kernels::cpu::Epilogue;

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const bool bf16 = !args.empty() && args[0] == "--bf16";
  if (bf16) args.erase(args.begin());
  const std::string shape = args.size() > 0 ? args[0] : "gpt-12m";
  const int threads = args.size() > 1 ? std::atoi(args[1].c_str()) : 2;
  std::vector<long> rows = {1, 8, 16, 32, 48, 64, 128, 512};
  if (args.size() > 2) {
    rows.clear();
    for (std::size_t i = 2; i < args.size(); ++i) rows.push_back(std::atol(args[i].c_str()));
  }
  if ((shape != "gpt-12m" && shape != "gpt2") || threads < 1 ||
      std::any_of(rows.begin(), rows.end(), [](long m) { return m < 1 || m > 1024; })) {
    std::fprintf(stderr, "usage: bench_linear_rows [--bf16] [gpt-12m|gpt2] [THREADS] [M (1 .. 1024) ...]\n");
    return 2;
  }
  brrr::set_num_threads(threads);
  const long C = shape == "gpt2" ? 768 : 384, layers = shape == "gpt2" ? 12 : 6;
  struct Matrix {
    long N, K;
    brrr::aligned_vector<float> w;
    brrr::aligned_vector<std::uint16_t> w16;  // --bf16: w's bfloat16 bits (w is then emptied)
  };
  std::vector<Matrix> matrices;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  double flop_per_row = 0, bytes = 0;
  for (long l = 0; l < layers; ++l)
    for (auto [N, K] : {std::pair{3 * C, C}, std::pair{C, C}, std::pair{4 * C, C}, std::pair{C, 4 * C}}) {
      Matrix m{N, K, brrr::aligned_vector<float>(static_cast<std::size_t>(N * K)), {}};
      for (float& v : m.w) v = u(rng);
      if (bf16) {
        m.w16.resize(m.w.size());
        for (std::size_t i = 0; i < m.w.size(); ++i) m.w16[i] = brrr::bf16::round_bits(m.w[i]);
        m.w = {};
      }
      flop_per_row += 2.0 * N * K, bytes += (bf16 ? 2.0 : 4.0) * N * K;
      matrices.push_back(std::move(m));
    }
  brrr::aligned_vector<float> x(static_cast<std::size_t>(1024 * 4 * C)), y(x.size());
  for (float& v : x) v = u(rng);
  std::printf("# bench_linear_rows %s: %zu matrices, %.1f MB of %s weights, %d threads, %s\n", shape.c_str(),
              matrices.size(), bytes / 1e6, bf16 ? "bfloat16" : "float32", threads, brrr::bench::cpu_model().c_str());
  namespace kc = brrr::kernels::cpu;
  const bool amx = bf16 && kc::amx_available();
  if (bf16 && !amx) std::printf("# no AMX tile unit here (or the OS refuses it): the FMA tiles only\n");
  for (long M : rows)
    for (int on_tiles = 0; on_tiles <= (amx ? 1 : 0); ++on_tiles) {
      kc::set_amx_enabled(on_tiles == 1);
      double best = 1e30;
      for (int pass = 0; pass < (M >= 64 ? 6 : 30); ++pass) {
        const auto start = std::chrono::steady_clock::now();
        for (const Matrix& m : matrices)
          if (bf16) kc::linear_rows(y.data(), x.data(), m.w16.data(), nullptr, M, m.N, m.K, Epilogue::kStore);
          else kc::linear_rows(y.data(), x.data(), m.w.data(), nullptr, M, m.N, m.K, Epilogue::kStore);
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
      std::printf("M %4ld  %-4s %9.3f ms  %6.1f GFLOP/s  %5.1f GB/s of weights\n", M,
                  on_tiles ? "amx" : M >= 48 ? "gemm" : "dots", best * 1e3,
                  flop_per_row * static_cast<double>(M) / best / 1e9, bytes / best / 1e9);
    }
}
