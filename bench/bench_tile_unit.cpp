// bench/bench_tile_unit.cpp: what one core's AMX tile unit does, beside its FMA units (chapter
// 08, "bf16 on the tile unit"; kernels/cpu/rows/amx.cpp builds linear_rows on it). The figures
// that chapter and that file quote come from here.
//   build/bench/bench_tile_unit [MILLIONS]   (default 20 million instructions per timing)
// Timings, on one thread:
//   - TDPBF16PS (a 16 x 16 tile of float sums += a 16 x 32 bf16 tile times a 32 x 16 one: 8,192
//     multiply-adds) in a chain, each adding into the tile the previous one wrote: its latency;
//   - four independent ones at a time (four sum tiles): its throughput;
//   - the same four with their four operand tiles loaded from L1 before each group, as a kernel
//     does;
//   - LDTILECFG and TILERELEASE, the price of switching a thread's tile shapes;
//   - the core's FMA loop (bench_util.h), for the ratio.
// Then how the unit adds: one instruction from zero on random operands, each of its 256 sums
// against three ways of adding the same 32 exact products (a chain of float32 FMAs in k order;
// the pairs VDPBF16PS adds, odd element first; the float64 sum rounded once), and VDPBF16PS's
// sums against its documented pairs. On a CPU without the unit (or an OS that does not grant
// it) it says so and exits 0.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "bench/bench_util.h"
#include "brrr/bfloat16.h"
#include "kernels/cpu/rows/rows.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BRRR_TILE_BENCH 1
#define BRRR_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#else
#define BRRR_TILE_BENCH 0
#endif

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

#if BRRR_TILE_BENCH
// Palette 1: tiles 0-7, each 16 rows of 64 bytes (16 floats, or 32 bf16, or 16 bf16 pairs).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

BRRR_AMX_TARGET void configure() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  asm volatile("" : : "m"(c) : "memory");  // the builtin does not say it reads c (kernels/cpu/rows/amx.cpp)
  _tile_loadconfig(&c);
}

// Operand tiles: 4 and 5 are A (16 rows of 32 bf16), 6 and 7 are B (16 rows of 16 pairs).
alignas(64) std::uint16_t g_a[2][16 * 32], g_b[2][16 * 32];
alignas(64) float g_c[16 * 16];

BRRR_AMX_TARGET double chain_ns(long n) {
  _tile_zero(0);
  _tile_loadd(4, g_a[0], 64);
  _tile_loadd(6, g_b[0], 64);
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) _tile_dpbf16ps(0, 4, 6);
  const double s = seconds_since(start);
  _tile_stored(0, g_c, 64);
  return s / static_cast<double>(n) * 1e9;
}

BRRR_AMX_TARGET double independent_ns(long n, bool loads) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, g_a[0], 64);
  _tile_loadd(5, g_a[1], 64);
  _tile_loadd(6, g_b[0], 64);
  _tile_loadd(7, g_b[1], 64);
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i += 4) {
    if (loads) {
      _tile_loadd(4, g_a[0], 64);
      _tile_loadd(5, g_a[1], 64);
      _tile_loadd(6, g_b[0], 64);
      _tile_loadd(7, g_b[1], 64);
    }
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  const double s = seconds_since(start);
  _tile_stored(0, g_c, 64);
  return s / static_cast<double>(n) * 1e9;
}

BRRR_AMX_TARGET void release() { _tile_release(); }

BRRR_AMX_TARGET double configure_ns(long n) {
  const auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
    configure();
    _tile_release();
  }
  return seconds_since(start) / static_cast<double>(n) * 1e9;
}

// One TDPBF16PS from zero: c[m][n] = sum over k of a[m][k] b[k][n], a and b given as float
// values that bf16 holds exactly; b goes into the pair layout (row p: (b[2p][n], b[2p+1][n]) for
// each n).
BRRR_AMX_TARGET void tile_product(float (&c)[16][16], const float (&a)[16][32], const float (&b)[32][16]) {
  for (int m = 0; m < 16; ++m)
    for (int k = 0; k < 32; ++k) g_a[0][m * 32 + k] = brrr::bf16::round_bits(a[m][k]);
  for (int p = 0; p < 16; ++p)
    for (int n = 0; n < 16; ++n)
      for (int h = 0; h < 2; ++h) g_b[0][p * 32 + 2 * n + h] = brrr::bf16::round_bits(b[2 * p + h][n]);
  _tile_zero(0);
  _tile_loadd(4, g_a[0], 64);
  _tile_loadd(6, g_b[0], 64);
  _tile_dpbf16ps(0, 4, 6);
  _tile_stored(0, &c[0][0], 64);
}

// VDPBF16PS on one lane: s + a0 b0 + a1 b1, the lane's pair.
BRRR_AMX_TARGET float dot_pair(float s, float a0, float a1, float b0, float b1) {
  const __m512 as = _mm512_set_ps(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a1, a0);
  const __m512 bs = _mm512_set_ps(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b1, b0);
  const __m512 r = _mm512_dpbf16_ps(_mm512_set1_ps(s), _mm512_cvtne2ps_pbh(as, as), _mm512_cvtne2ps_pbh(bs, bs));
  return _mm512_cvtss_f32(r);
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const long millions = argc > 1 ? std::atol(argv[1]) : 20;
  if (millions < 1) {
    std::fprintf(stderr, "usage: bench_tile_unit [MILLIONS (>= 1) of instructions per timing]\n");
    return 2;
  }
#if BRRR_TILE_BENCH
  if (!brrr::kernels::cpu::amx_available()) {
    std::printf("# bench_tile_unit: %s has no AMX tile unit this process may use\n", brrr::bench::cpu_model().c_str());
    return 0;
  }
  const long n = millions * 1'000'000;
  std::printf("# bench_tile_unit %ld: 1 thread, %s\n", millions, brrr::bench::cpu_model().c_str());
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);  // magnitudes spread, so roundings differ
  const auto bf = [&] { return brrr::round_to_bf16(std::ldexp(normal(rng), exponent(rng))); };
  for (auto* t : {g_a[0], g_a[1], g_b[0], g_b[1]})
    for (int i = 0; i < 16 * 32; ++i) t[i] = brrr::bf16::round_bits(1.0f / 1024);  // sums stay finite
  // Each timing five times over a fifth of the instructions: the fastest and the slowest (on a
  // shared machine the slowest can be twice the fastest, the unit's core busy elsewhere).
  struct Span {
    double best = 1e300, worst = 0;
  };
  const auto five = [&](auto&& timing) {
    Span s;
    for (int i = 0; i < 5; ++i) {
      const double ns = timing();
      s.best = std::min(s.best, ns), s.worst = std::max(s.worst, ns);
    }
    return s;
  };
  configure();
  const Span chain = five([&] { return chain_ns(n / 5); });
  const Span free = five([&] { return independent_ns(n / 5, false); });
  const Span loaded = five([&] { return independent_ns(n / 5, true); });
  release();
  const Span config = five([&] { return configure_ns(n / 500); });
  release();
  const double fma_madds = brrr::bench::fma_peak_gflops(1) / 2;  // multiply-adds per ns
  const auto line = [&](const char* what, Span ns) {
    std::printf("%-44s %6.2f to %6.2f ns: %5.0f to %5.0f billion multiply-adds/s, %4.1f to %4.1fx the FMA loop's\n",
                what, ns.best, ns.worst, 8192 / ns.worst, 8192 / ns.best, 8192 / ns.worst / fma_madds,
                8192 / ns.best / fma_madds);
  };
  line("TDPBF16PS, a chain of dependent ones", chain);
  line("TDPBF16PS, four independent", free);
  line("TDPBF16PS, four independent + 4 tile loads", loaded);
  std::printf("%-44s %6.1f to %6.1f ns\n", "LDTILECFG + TILERELEASE", config.best, config.worst);
  std::printf("%-44s         %5.0f billion multiply-adds/s\n", "the FMA loop (2 FMA units, 16 lanes)", fma_madds);

  // How the unit adds its 32 products.
  constexpr int kTrials = 64;
  long in_order = 0, pairs = 0, once = 0, total = 0;
  float a[16][32], b[32][16], c[16][16];
  configure();
  for (int trial = 0; trial < kTrials; ++trial) {
    for (auto& row : a)
      for (float& v : row) v = bf();
    for (auto& row : b)
      for (float& v : row) v = bf();
    tile_product(c, a, b);
    for (int m = 0; m < 16; ++m)
      for (int j = 0; j < 16; ++j) {
        float chain_sum = 0, pair_sum = 0;
        double exact = 0;
        for (int k = 0; k < 32; ++k) chain_sum = std::fma(a[m][k], b[k][j], chain_sum);
        for (int k = 0; k < 32; k += 2) pair_sum = std::fma(a[m][k], b[k][j], std::fma(a[m][k + 1], b[k + 1][j], pair_sum));
        for (int k = 0; k < 32; ++k) exact += static_cast<double>(a[m][k]) * b[k][j];
        in_order += c[m][j] == chain_sum, pairs += c[m][j] == pair_sum, once += c[m][j] == static_cast<float>(exact);
        ++total;
      }
  }
  release();
  std::printf("TDPBF16PS from zero, %ld sums of 32 products of random bf16 numbers (normal, times 2^-8 to 2^8): equal to\n", total);
  std::printf("  a chain of float32 FMAs in k order            %6ld (%.0f%%)\n", in_order, 100.0 * in_order / total);
  std::printf("  VDPBF16PS's pairs (odd element first), chained %6ld (%.0f%%)\n", pairs, 100.0 * pairs / total);
  std::printf("  the float64 sum rounded once                  %6ld (%.0f%%)\n", once, 100.0 * once / total);
  long dp_equal = 0, dp_total = 0;
  for (int i = 0; i < 16000; ++i) {
    const float s = bf() * 4, a0 = bf(), a1 = bf(), b0 = bf(), b1 = bf();
    dp_equal += dot_pair(s, a0, a1, b0, b1) == std::fma(a0, b0, std::fma(a1, b1, s));
    ++dp_total;
  }
  std::printf("VDPBF16PS (s + a0 b0 + a1 b1) equal to fma(a0, b0, fma(a1, b1, s)) in %ld of %ld cases\n", dp_equal,
              dp_total);
#else
  (void)millions;
  std::printf("# bench_tile_unit: not an x86-64 build; AMX is an x86 unit\n");
#endif
  return 0;
}
