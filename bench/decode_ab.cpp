// bench/decode_ab.cpp: two builds of the row kernels (kernels/cpu/rows/) in one process, taking turns
// (chapter 08). On a machine shared with other tenants, two programs run minutes apart can
// differ by 40% for no reason of their own (docs/measurements.md): so one program holds both
// builds, each compiled with its namespace renamed (bench/decode_ab.sh: -Dcpu=cpuA, -Dcpu=cpuB),
// and times linear_rows over every weight matrix of a GPT shape, A then B, pass after pass, in
// the same minutes and on the same data. It prints each build's fastest and median pass, the
// ratio of the medians (above 1: B is faster) and whether the two builds' outputs are the same
// bits, as they must be when only the speed changed.
//   decode_ab [--bf16] C LAYERS THREADS PASSES M [M ...]
// --bf16: the weights as bfloat16 bits (off the tile unit; BRRR_AMX=1 would put both builds on
// it), packed once into pair panels for a build that has them (rows.h), as the Decoder packs.
// C, LAYERS: the GPT's width and depth (gpt-12m: 384 6; cpu-tiny: 128 4; GPT-2: 768 12).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "brrr/aligned_vector.h"
#include "brrr/bfloat16.h"

// The two builds' entry points, as kernels/cpu/rows/rows.h declares them in namespace cpu.
namespace brrr::kernels {
namespace cpuA {
enum class Epilogue { kStore, kAdd, kGeluTanh, kGeluErf };
void linear_rows(float* y, const float* x, const float* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);
void linear_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);
// Builds since the pair panels (rows/bf16.cpp) hold bf16 weights packed: weak, so a build
// without them links and runs the row-major call above.
__attribute__((weak)) std::int64_t bf16_panels_size(std::int64_t N, std::int64_t K);
__attribute__((weak)) void pack_bf16_panels(std::uint16_t* panels, const std::uint16_t* w, std::int64_t N,
                                            std::int64_t K);
__attribute__((weak)) void linear_rows_panels(float* y, const float* x, const std::uint16_t* panels,
                                              const float* bias, std::int64_t M, std::int64_t N, std::int64_t K,
                                              Epilogue epilogue);
}  // namespace cpuA
namespace cpuB {
enum class Epilogue { kStore, kAdd, kGeluTanh, kGeluErf };
void linear_rows(float* y, const float* x, const float* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);
void linear_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, std::int64_t M, std::int64_t N,
                 std::int64_t K, Epilogue epilogue);
// Builds since the pair panels (rows/bf16.cpp) hold bf16 weights packed: weak, so a build
// without them links and runs the row-major call above.
__attribute__((weak)) std::int64_t bf16_panels_size(std::int64_t N, std::int64_t K);
__attribute__((weak)) void pack_bf16_panels(std::uint16_t* panels, const std::uint16_t* w, std::int64_t N,
                                            std::int64_t K);
__attribute__((weak)) void linear_rows_panels(float* y, const float* x, const std::uint16_t* panels,
                                              const float* bias, std::int64_t M, std::int64_t N, std::int64_t K,
                                              Epilogue epilogue);
}  // namespace cpuB
}  // namespace brrr::kernels

int main(int argc, char** argv) {
  namespace k = brrr::kernels;
  const bool bf16 = argc > 1 && std::strcmp(argv[1], "--bf16") == 0;
  if (bf16) --argc, ++argv;
  if (argc < 6) {
    std::fprintf(stderr, "usage: decode_ab [--bf16] C LAYERS THREADS PASSES M [M ...]\n");
    return 2;
  }
  const long C = std::atol(argv[1]), layers = std::atol(argv[2]);
  const int threads = std::atoi(argv[3]), passes = std::atoi(argv[4]);
  std::vector<long> rows;
  for (int a = 5; a < argc; ++a) rows.push_back(std::atol(argv[a]));
  if (C < 8 || layers < 1 || threads < 1 || passes < 1 ||
      std::any_of(rows.begin(), rows.end(), [](long m) { return m < 1 || m > 64; })) {
    std::fprintf(stderr, "decode_ab: C >= 8, LAYERS, THREADS and PASSES >= 1, M in 1 .. 64\n");
    return 2;
  }
  omp_set_num_threads(threads);  // both builds' teams follow OpenMP's thread count
  struct Matrix {
    long N, K;
    brrr::aligned_vector<float> w;
    brrr::aligned_vector<std::uint16_t> w16;        // --bf16: w rounded to bfloat16 (w is then emptied)
    brrr::aligned_vector<std::uint16_t> panels[2];  // --bf16: w16 as pair panels, for builds A, B that have them
  };
  std::vector<Matrix> matrices;  // a GPT block's four linear layers, LAYERS times
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (long l = 0; l < layers; ++l)
    for (auto [N, K] : {std::pair{3 * C, C}, std::pair{C, C}, std::pair{4 * C, C}, std::pair{C, 4 * C}}) {
      Matrix m{N, K, brrr::aligned_vector<float>(static_cast<std::size_t>(N * K)), {}};
      for (float& v : m.w) v = u(rng);
      if (bf16) {
        for (float v : m.w) m.w16.push_back(brrr::bf16::round_bits(v));
        m.w = {};
        if (k::cpuA::pack_bf16_panels) {
          m.panels[0].resize(static_cast<std::size_t>(k::cpuA::bf16_panels_size(N, K)));
          k::cpuA::pack_bf16_panels(m.panels[0].data(), m.w16.data(), N, K);
        }
        if (k::cpuB::pack_bf16_panels) {
          m.panels[1].resize(static_cast<std::size_t>(k::cpuB::bf16_panels_size(N, K)));
          k::cpuB::pack_bf16_panels(m.panels[1].data(), m.w16.data(), N, K);
        }
      }
      matrices.push_back(std::move(m));
    }
  brrr::aligned_vector<float> x(static_cast<std::size_t>(64 * 4 * C));
  brrr::aligned_vector<float> y[2] = {brrr::aligned_vector<float>(static_cast<std::size_t>(64 * 4 * C)),
                                      brrr::aligned_vector<float>(static_cast<std::size_t>(64 * 4 * C))};
  for (float& v : x) v = u(rng);
  const auto run = [&](int build, long M, const Matrix& m) {
    const auto a = k::cpuA::Epilogue::kStore;
    const auto b = k::cpuB::Epilogue::kStore;
    if (bf16 && build == 0 && k::cpuA::linear_rows_panels)
      k::cpuA::linear_rows_panels(y[0].data(), x.data(), m.panels[0].data(), nullptr, M, m.N, m.K, a);
    else if (bf16 && build == 0) k::cpuA::linear_rows(y[0].data(), x.data(), m.w16.data(), nullptr, M, m.N, m.K, a);
    else if (bf16 && k::cpuB::linear_rows_panels)
      k::cpuB::linear_rows_panels(y[1].data(), x.data(), m.panels[1].data(), nullptr, M, m.N, m.K, b);
    else if (bf16) k::cpuB::linear_rows(y[1].data(), x.data(), m.w16.data(), nullptr, M, m.N, m.K, b);
    else if (build == 0) k::cpuA::linear_rows(y[0].data(), x.data(), m.w.data(), nullptr, M, m.N, m.K, a);
    else k::cpuB::linear_rows(y[1].data(), x.data(), m.w.data(), nullptr, M, m.N, m.K, b);
  };
  std::printf("# decode_ab: C %ld, %ld layers, %d threads, %d passes per build, %s weights\n", C, layers, threads, passes,
              bf16 ? "bfloat16" : "float32");
  for (const long M : rows) {
    std::vector<double> ms[2];
    for (int p = 0; p < passes; ++p)
      for (int build = 0; build < 2; ++build) {
        const auto start = std::chrono::steady_clock::now();
        for (const Matrix& m : matrices) run(build, M, m);
        ms[build].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() * 1e3);
      }
    bool same = true;
    for (const Matrix& m : matrices) {
      run(0, M, m), run(1, M, m);
      same = same && std::equal(y[0].begin(), y[0].begin() + M * m.N, y[1].begin());
    }
    for (auto& v : ms) std::sort(v.begin(), v.end());
    const double a = ms[0][ms[0].size() / 2], b = ms[1][ms[1].size() / 2];
    std::printf("M %2ld  A: fastest %7.3f ms, median %7.3f   B: fastest %7.3f ms, median %7.3f   A/B %.2f  %s\n", M,
                ms[0][0], a, ms[1][0], b, a / b, same ? "same bits" : "OUTPUTS DIFFER");
  }
}
