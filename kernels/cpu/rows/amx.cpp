// kernels/cpu/rows/amx.cpp: linear_rows with bfloat16 weights on the tile unit of Intel's
// Advanced Matrix Extensions (AMX), on the CPUs that have one (chapter 08, "bf16 on the tile
// unit"). Read before: bf16.cpp (the same products on VDPBF16PS, and the pair panels both read).
// Read next: models/gpt/decode.cpp (the Decoder, whose --dtype bf16 calls it through
// linear_rows_panels).
//
// An AVX-512 core makes 32 float multiply-adds per cycle with its two FMA units. AMX's
// TDPBF16PS adds to a 16 x 16 tile of float sums the products of a 16 x 32 tile of bf16 and a
// 32 x 16 one: 8,192 multiply-adds per instruction, of bf16 operands only. On the Xeon of
// docs/measurements.md one took 7 to 15 ns (bench/bench_tile_unit.cpp): 540 to 1,150 billion
// multiply-adds a second per core, where its FMA loop made 60 to 85 billion. W is bf16 (--dtype
// bf16), and x is rounded to bf16 at the input, as autocast does (bf16.cpp): one instruction
// per 32 k of 16 rows of x and 16 outputs.
//
// The operands are the ones bf16.cpp uses. x rounded, row by row (a row's 32 k of a step are 64
// contiguous bytes: one tile row), and W's pair panels: a panel's 16 pairs of one step are 16
// rows of 16 outputs' pairs, 1 KiB in a row, the unit's second operand as stored, so nothing is
// packed per call. The sums come out as (row of x, output).
//
// The numbers: the tile unit sums the 32 products of a step its own way (not as a chain of
// float32 FMAs: on the Xeon of docs/measurements.md it matched neither a chain in order nor one
// rounding of the exact sum), so these outputs are not bf16.cpp's bits; they are within float32
// summation error of the same float64 sum (tests/core/test_decode_kernels.cpp holds both to one
// bound). Each output is the tile sums of its steps of 32 k in increasing k, from zero, then the
// bias; which rows of x share a tile, which thread runs it and how many rows there are do not
// change a bit (the tests check it), so batch invariance holds on the unit too, and a prefill
// and a step both run here while the switch is on. Off by default (rows.h's amx_enabled): a
// run's bits would otherwise depend on the CPU it lands on.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "brrr/error.h"
#include "kernels/cpu/rows/internal.h"

// AMX is x86-64's: elsewhere (arm64) the file is the four functions at its end, saying there is
// no tile unit, and the FMA path runs.
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

// GCC 12 warns inside its own AVX-512 intrinsics where they are inlined here: a false positive,
// GCC bug 105593 (as gemm_blocked.cpp says).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define BRRR_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

namespace brrr::kernels::cpu {

using namespace rows_detail;

namespace {

constexpr i64 kTileRows = 16;                 // rows of a tile, and float sums per tile row
constexpr i64 kStep = 32;                     // k per step: a tile row holds 32 bf16 (64 bytes)
constexpr i64 kTileElems = kTileRows * kStep;  // 512 bf16, 1 KiB
constexpr i64 kBlockTiles = 4;                // outputs per thread's block: 4 panels of 16

// What the OS must grant before a thread touches the tile registers (Linux's arch_prctl).
constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;

bool amx_supported() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool bf16_tiles = (d >> 22) & 1u, tiles = (d >> 24) & 1u;
  const bool avx512_bf16 = __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 5) & 1u);
  if (!bf16_tiles || !tiles || !avx512_bf16) return false;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

std::atomic<int>& amx_switch() {  // -1: not decided yet, 0: off, 1: on
  static std::atomic<int> on{-1};
  return on;
}

// Every tile register as 16 rows of 64 bytes (palette 1, the only one).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// rows: the rows of x a tile holds (tiles 4 and 5) and so of the sums (0..3), 16 or, for fewer
// rows of x than 16, that many; W's tiles (6 and 7) always 16 rows of 64 bytes.
BRRR_AMX_TARGET void configure_tiles(i64 rows) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(t < 6 ? rows : kTileRows);
    config.colsb[t] = 64;
  }
  // GCC 12's LDTILECFG builtin does not say that it reads the 64 bytes: built for another -march
  // (x86-64-v3), the stores above were dropped as dead, the unit was left with palette 1 and no
  // tile rows, and the first tile instruction faulted (SIGILL). This makes them happen first.
  asm volatile("" : : "m"(config) : "memory");
  _tile_loadconfig(&config);
}
BRRR_AMX_TARGET void release_tiles() { _tile_release(); }

// Rows of x as tiles of rows: xb holds M rows of Kp bf16 (rounded by bf16.cpp's rules), row
// tiles of 16 (the last padded with zero rows by the caller). Tiles 0..3 hold the sums (row tile
// i, panel j at 2 i + j), 4 and 5 x, 6 and 7 W; rows of a step's x tile: `rows`.
template <int MB, int NP>
BRRR_AMX_TARGET void tiles(float* y, const std::uint16_t* xb, const std::uint16_t* wp, i64 ps, const float* bias,
                           i64 m0, i64 M, i64 n0, i64 N, i64 Kp, Epilogue e) {
  _tile_zero(0);
  if constexpr (NP > 1) _tile_zero(1);
  if constexpr (MB > 1) _tile_zero(2);
  if constexpr (MB > 1 && NP > 1) _tile_zero(3);
  const i64 ldx = Kp * 2;  // bytes from one row of x to the next
  const std::uint16_t* x0 = xb + m0 * Kp;
  const std::uint16_t* x1 = x0 + kTileRows * Kp;
  for (i64 s = 0; s < Kp / kStep; ++s) {
    _tile_loadd(6, wp + s * kTileElems, 64);
    if constexpr (NP > 1) _tile_loadd(7, wp + ps + s * kTileElems, 64);
    _tile_loadd(4, x0 + s * kStep, ldx);
    if constexpr (MB > 1) _tile_loadd(5, x1 + s * kStep, ldx);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NP > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (MB > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (MB > 1 && NP > 1) _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float sums[4][16][16];
  _tile_stored(0, sums[0], 64);
  if constexpr (NP > 1) _tile_stored(1, sums[1], 64);
  if constexpr (MB > 1) _tile_stored(2, sums[2], 64);
  if constexpr (MB > 1 && NP > 1) _tile_stored(3, sums[3], 64);
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NP; ++j) {
      const i64 m = m0 + i * kTileRows, n = n0 + j * kTileRows;
      if (m >= M || n >= N) continue;
      for (i64 r = 0; r < std::min(kTileRows, M - m); ++r)
        for (i64 c = 0; c < std::min(kTileRows, N - n); ++c) {
          const float v = sums[2 * i + j][r][c];
          put(e, y[(m + r) * N + n + c], bias ? v + bias[n + c] : v);
        }
    }
}

}  // namespace

bool amx_available() {
  static const bool supported = amx_supported();
  return supported;
}

bool amx_enabled() {
  int on = amx_switch().load(std::memory_order_acquire);
  if (on < 0) {
    const char* env = std::getenv("BRRR_AMX");
    on = amx_available() && env && std::strcmp(env, "1") == 0 ? 1 : 0;
    amx_switch().store(on, std::memory_order_release);
  }
  return on == 1;
}

void set_amx_enabled(bool on) { amx_switch().store(on && amx_available() ? 1 : 0, std::memory_order_release); }

void linear_rows_amx(float* y, const float* x, const std::uint16_t* panels, const float* bias, i64 M, i64 N, i64 K,
                     Epilogue e) {
  BRRR_CHECK(amx_available(), "linear_rows_amx: this CPU has no AMX bf16 tile unit the OS lets brrr use");
  if (M <= 0 || N <= 0) return;
  const bool gelu = e == Epilogue::kGeluTanh || e == Epilogue::kGeluErf;
  const Epilogue put_as = gelu ? Epilogue::kStore : e;
  const i64 Kp = bf16_panel_k(K), ps = kTileRows * Kp;
  // x rounded, in whole tiles of rows (zero rows past M) once there are 16 rows or more.
  const i64 rows = std::min(M, kTileRows), row_tiles = (M + kTileRows - 1) / kTileRows;
  std::uint16_t* xb = scratch<std::uint16_t, Scratch::kTilesOfX>(row_tiles * kTileRows * Kp);
  round_rows(xb, x, M, K, Kp, true);
  std::fill(xb + M * Kp, xb + row_tiles * kTileRows * Kp, std::uint16_t{0});
  share((N + kTileRows - 1) / kTileRows, kBlockTiles, [&](i64 p0, i64 p1) {
    configure_tiles(rows);
    for (i64 a = 0; a < row_tiles; a += 2)
      for (i64 p = p0; p < p1; p += 2) {
        const bool two_rows = a + 1 < row_tiles, two_panels = p + 1 < p1;
        const std::uint16_t* wp = panels + p * ps;
        const i64 m0 = a * kTileRows, n0 = p * kTileRows;
        if (two_rows && two_panels) tiles<2, 2>(y, xb, wp, ps, bias, m0, M, n0, N, Kp, put_as);
        else if (two_rows) tiles<2, 1>(y, xb, wp, ps, bias, m0, M, n0, N, Kp, put_as);
        else if (two_panels) tiles<1, 2>(y, xb, wp, ps, bias, m0, M, n0, N, Kp, put_as);
        else tiles<1, 1>(y, xb, wp, ps, bias, m0, M, n0, N, Kp, put_as);
      }
    release_tiles();
    if (gelu) {
      const i64 n0 = p0 * kTileRows, n1 = std::min(N, p1 * kTileRows);
      for (i64 m = 0; m < M; ++m) gelu_row(y + m * N + n0, n1 - n0, e);
    }
  });
}

}  // namespace brrr::kernels::cpu

#else  // not x86-64: no tile unit

namespace brrr::kernels::cpu {

bool amx_available() { return false; }
bool amx_enabled() { return false; }
void set_amx_enabled(bool) {}
void linear_rows_amx(float*, const float*, const std::uint16_t*, const float*, std::int64_t, std::int64_t,
                     std::int64_t, Epilogue) {
  BRRR_CHECK(false, "linear_rows_amx: AMX's tile unit is x86-64's; this CPU has none");
}

}  // namespace brrr::kernels::cpu

#endif  // defined(__x86_64__)
