// kernels/cpu/rows/amx.cpp: linear_rows with bfloat16 weights on the tile unit of Intel's
// Advanced Matrix Extensions (AMX), on the CPUs that have one (chapter 08, "bf16 on the tile
// unit"). Read before: gemm.cpp (the same product on FMAs). Read next:
// models/gpt/decode.cpp (the Decoder, whose --dtype bf16 calls it through linear_rows).
//
// An AVX-512 core makes 32 float multiply-adds per cycle with its two FMA units. AMX's
// TDPBF16PS adds to a 16 x 16 tile of float sums the products of a 16 x 32 tile of bf16 and a
// 32 x 16 one: 8,192 multiply-adds per instruction, of bf16 operands only. On the Xeon of
// docs/measurements.md one took 7 to 15 ns (bench/bench_tile_unit.cpp): 540 to 1,150 billion
// multiply-adds a second per core, where its FMA loop made 60 to 85 billion. W is bf16 already (--dtype bf16). x is float32,
// and rounding it to bf16 (as a PyTorch model in bf16 does) would move every product by up to
// 2^-9 of itself. So x is split in two bf16: hi = x rounded to bf16, lo = (x - hi) rounded. hi +
// lo carries 16 of x's 24 significant bits (what is left is under 2^-17 of x), the products hi w
// and lo w are exact, and the tile unit sums them: two instructions per product.
//
// When it pays: the cost of a tile instruction does not depend on how many rows of x it serves,
// so a batch of rows is where the unit wins (measured: the linear layers 2.6 to 4.4 times the FMA
// tiles' speed at 8 to 64 rows, 2.7 times at 512) and one row is where it loses (decoding a
// single sequence: 0.5 to 0.95 times, each KiB of W two tile instructions for one useful column
// of sixteen). brrr sample decodes one sequence, where the unit loses; brrr serve batches its
// running sequences into one step, where it can win, but its sums are not the FMA tiles' (below),
// so a run's bits would depend on the CPU it lands on: the unit is off unless BRRR_AMX=1 asks for
// it (rows.h's amx_enabled).
//
// The numbers: the tile unit sums the 32 products of a step its own way (not as a chain of
// float32 FMAs: on the Xeon of docs/measurements.md it matched neither a chain in order nor one
// rounding of the exact sum), so these outputs are not rows.h's FMA sums. Against float64 they
// are within about 1e-5 of each output, where the FMA tiles are within about 1e-6 (the kernel
// lab's linear_rows/bf16 at its ragged shapes): most of it is the bits of x the split drops
// (tests/core/test_decode_kernels.cpp holds both to the same float64 bound). Each output is the tile sums of its steps of 32 k in
// increasing k, hi then lo, from zero, then the bias; which rows of x share a tile, which
// thread runs it, and which of the two layouts below computes it do not change a bit (the tests
// check all three), so batch invariance holds as on the FMA path.
//
// Two layouts, chosen by M alone:
// - Few rows (M < kAmxGemmRows, decoding): the tile's first operand is W itself, 16 of its rows
//   read in place (32 k of a row are 64 contiguous bytes, one tile row), the second is x's rows
//   in the pair layout the unit wants (32 k as 16 rows of k pairs, each row holding a pair of
//   every row of x). The sums come out as (output, row of x): read out one at a time.
// - Many rows (a prefill): the first operand is x (16 rows of 32 k, packed hi and lo once per
//   call), the second W, packed into the pair layout a block of 64 outputs at a time by the
//   thread that uses it (a 16 x 16 transpose of 32-bit pairs per tile), and 2 x 2 tiles of
//   sums, (row of x, output), come out as 16 outputs of a row of y at a time.
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
constexpr i64 kAmxGemmRows = 32;              // from this many rows of x, the many-rows layout
constexpr i64 kBlockTiles = 4;                // outputs per thread's block: 4 tiles of 16

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

// cols: the float columns of the sums (tiles 0..3) and of the tiles of tile_cols (6 and 7 when
// few rows of x are their columns); every other tile 16 rows of 64 bytes.
BRRR_AMX_TARGET void configure_tiles(i64 cols = 16) {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTileRows;
    config.colsb[t] = static_cast<std::uint16_t>(t < 4 || t >= 6 ? 4 * cols : 64);
  }
  // GCC 12's LDTILECFG builtin does not say that it reads the 64 bytes: built for another -march
  // (x86-64-v3), the stores above were dropped as dead, the unit was left with palette 1 and no
  // tile rows, and the first tile instruction faulted (SIGILL). This makes them happen first.
  asm volatile("" : : "m"(config) : "memory");
  _tile_loadconfig(&config);
}
BRRR_AMX_TARGET void release_tiles() { _tile_release(); }

// x[0 .. n) split into hi and lo bf16 (above), 16 at a time; n <= 32 here (one step), the rest
// of the 32 as zeros. A hi that is not finite (x infinite, NaN, or rounding up past the largest
// float) keeps the value alone: its lo is 0.
BRRR_AMX_TARGET inline void split_step(std::uint16_t* hi, std::uint16_t* lo, const float* x, i64 n) {
  for (int h = 0; h < 2; ++h) {
    const i64 left = std::clamp<i64>(n - 16 * h, 0, 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << left) - 1u);
    const __m512 v = _mm512_maskz_loadu_ps(mask, x + 16 * h);
    const __m256i hb = (__m256i)_mm512_cvtneps_pbh(v);
    const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16));
    const __mmask16 finite = _mm512_cmp_ps_mask(_mm512_abs_ps(hf), _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
    const __m256i lb = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_sub_ps(finite, v, hf));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + 16 * h), hb);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + 16 * h), lb);
  }
}

// Rows [0, R) of x (R <= 16, row stride K) in the pair layout, one tile of 16 rows of R pairs
// per step s: t[s][r][m][q] = split x[m][32 s + 2 r + q], zeros past K. The tile has R columns
// (configure_tiles(R)), so decoding's one row is 64 bytes a step, not a 1 KiB tile of zeros.
BRRR_AMX_TARGET void pack_x_pairs(std::uint16_t* hi, std::uint16_t* lo, const float* x, i64 R, i64 K, i64 steps) {
  alignas(64) std::uint16_t h[kStep], l[kStep];
  const i64 tile = kTileRows * 2 * R;
  for (i64 m = 0; m < R; ++m)
    for (i64 s = 0; s < steps; ++s) {
      split_step(h, l, x + m * K + s * kStep, std::min(kStep, K - s * kStep));
      for (i64 r = 0; r < kStep / 2; ++r) {  // the pair (2 r, 2 r + 1) to tile row r, column m
        std::memcpy(hi + s * tile + r * 2 * R + 2 * m, h + 2 * r, 4);
        std::memcpy(lo + s * tile + r * 2 * R + 2 * m, l + 2 * r, 4);
      }
    }
}

// Rows [16 b, 16 b + 16) of x as tiles of rows, one per step: t[b][s][m][k] = split x[16 b +
// m][32 s + k], zeros past M and K.
BRRR_AMX_TARGET void pack_x_rows(std::uint16_t* hi, std::uint16_t* lo, const float* x, i64 b, i64 M, i64 K,
                                 i64 steps) {
  for (i64 s = 0; s < steps; ++s)
    for (i64 m = 0; m < kTileRows; ++m) {
      const i64 row = b * kTileRows + m, at = (b * steps + s) * kTileElems + m * kStep;
      split_step(hi + at, lo + at, x + row * K + s * kStep, row < M ? std::min(kStep, K - s * kStep) : 0);
    }
}

// r[i] = row i of a 16 x 16 matrix of 32-bit words; afterwards r[i] = its column i. Pairs of
// words, then of 64-bit pairs, then 128-bit lanes, then 256-bit halves change places.
BRRR_AMX_TARGET inline void transpose16(__m512i (&r)[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2)
    a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]), a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  for (int i = 0; i < 16; i += 4) {
    b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]), b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]), b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  for (int g = 0; g < 4; g += 2)
    for (int j = 0; j < 4; ++j) {
      a[4 * g + j] = _mm512_shuffle_i32x4(b[4 * g + j], b[4 * (g + 1) + j], 0x88);
      a[4 * (g + 1) + j] = _mm512_shuffle_i32x4(b[4 * g + j], b[4 * (g + 1) + j], 0xdd);
    }
  for (int j = 0; j < 4; ++j)
    for (int g = 0; g < 2; ++g) {
      r[4 * g + j] = _mm512_shuffle_i32x4(a[4 * g + j], a[4 * (g + 2) + j], 0x88);
      r[4 * (g + 2) + j] = _mm512_shuffle_i32x4(a[4 * g + j], a[4 * (g + 2) + j], 0xdd);
    }
}

// W's rows [n, n + J) (J <= 16) as the pair layout's tiles, one per step: the 16 rows' 32 k of
// the step are a 16 x 16 matrix of k pairs (32-bit words), transposed. Zeros past J and K.
BRRR_AMX_TARGET void pack_w_pairs(std::uint16_t* wp, const std::uint16_t* w, i64 J, i64 K, i64 steps) {
  for (i64 s = 0; s < steps; ++s) {
    const i64 left = std::min(kStep, K - s * kStep);
    const __mmask32 mask = left >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << left) - 1u);
    __m512i r[16];
    for (i64 j = 0; j < 16; ++j)
      r[j] = j < J ? _mm512_maskz_loadu_epi16(mask, w + j * K + s * kStep) : _mm512_setzero_si512();
    transpose16(r);
    for (int i = 0; i < 16; ++i) _mm512_storeu_si512(wp + s * kTileElems + i * kStep, r[i]);
  }
}

// y[m][n] for the tile's rows and outputs: the sum, the bias, the epilogue (GELU after, along
// the row). sums[a][b]: a indexes rows of x and b outputs (rows_first) or the other way round.
inline void put_tile(float* y, const float (&sums)[16][16], bool rows_first, const float* bias, i64 m0, i64 R,
                     i64 n0, i64 J, i64 N, Epilogue e) {
  for (i64 m = 0; m < R; ++m)
    for (i64 j = 0; j < J; ++j) {
      const float s = rows_first ? sums[m][j] : sums[j][m];
      put(e, y[(m0 + m) * N + n0 + j], bias ? s + bias[n0 + j] : s);
    }
}

// Few rows (R <= 16 of them, packed in pairs; the tiles configured for R columns): outputs [n0,
// n0 + 16 NB) against the rows, W's tiles read in place (through `pad` where they run past N or
// K). Tiles 0..3 hold the sums, 4 and 5 W, 6 and 7 x's hi and lo. Decoding streams W from
// memory: each row of W is asked for 8 steps ahead (4 left it at 22 GB/s of W on two threads at
// K = 768, where 8 gives about 30).
template <int NB>
BRRR_AMX_TARGET void few_rows_tiles(float* y, const std::uint16_t* xh, const std::uint16_t* xl,
                                    const std::uint16_t* w, const float* bias, i64 m0, i64 R, i64 n0, i64 N,
                                    i64 K, i64 steps, Epilogue e) {
  alignas(64) std::uint16_t pad[kTileElems];
  const auto w_tile = [&](i64 block, i64 s, i64& stride) -> const std::uint16_t* {
    const i64 n = n0 + block * kTileRows, J = std::min(kTileRows, N - n), k = s * kStep;
    if (J == kTileRows && k + kStep <= K) {
      stride = K * 2;
      return w + n * K + k;
    }
    std::memset(pad, 0, sizeof pad);
    for (i64 j = 0; j < J; ++j) std::memcpy(pad + j * kStep, w + (n + j) * K + k, std::min(kStep, K - k) * 2);
    stride = kStep * 2;
    return pad;
  };
  _tile_zero(0);
  if constexpr (NB > 1) _tile_zero(1);
  if constexpr (NB > 2) _tile_zero(2);
  if constexpr (NB > 3) _tile_zero(3);
  const i64 tile = kTileRows * 2 * R;  // bf16 per packed tile of x
  for (i64 s = 0; s < steps; ++s) {
    _tile_loadd(6, xh + s * tile, 4 * R);
    _tile_loadd(7, xl + s * tile, 4 * R);
    if (s + 8 < steps)
      for (i64 j = 0; j < NB * kTileRows && n0 + j < N; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(w + (n0 + j) * K + (s + 8) * kStep), _MM_HINT_T0);
    // Block b's W tile into register reg (4 and 5 in turn), times x's hi and lo into sums b. A
    // macro, not a template: the intrinsics spell their register numbers into the instruction's
    // text, so they take literal numbers only.
#define BRRR_AMX_W_TILE(b, reg)                        \
  if constexpr (NB > b) {                              \
    i64 stride = 0;                                    \
    const std::uint16_t* a = w_tile(b, s, stride);     \
    _tile_loadd(reg, a, stride);                       \
    _tile_dpbf16ps(b, reg, 6);                         \
    _tile_dpbf16ps(b, reg, 7);                         \
  }
    BRRR_AMX_W_TILE(0, 4) BRRR_AMX_W_TILE(1, 5) BRRR_AMX_W_TILE(2, 4) BRRR_AMX_W_TILE(3, 5)
#undef BRRR_AMX_W_TILE
  }
  alignas(64) float sums[NB][16][16];
  _tile_stored(0, sums[0], 64);
  if constexpr (NB > 1) _tile_stored(1, sums[1], 64);
  if constexpr (NB > 2) _tile_stored(2, sums[2], 64);
  if constexpr (NB > 3) _tile_stored(3, sums[3], 64);
  for (int b = 0; b < NB; ++b) {
    const i64 n = n0 + b * kTileRows;
    put_tile(y, sums[b], false, bias, m0, R, n, std::min(kTileRows, N - n), N, e);
  }
}

// Many rows: rows [16 a, 16 a + 16 MB) of x (MB <= 2 tiles of rows, packed) against the packed
// panels p and p + 1 (NP <= 2 of them) of a block whose first output is n0. Tiles 0..3 hold the
// sums (row tile i, panel j at 2 i + j), 4 and 5 x, 6 and 7 W.
template <int MB, int NP>
BRRR_AMX_TARGET void many_rows_tiles(float* y, const std::uint16_t* xh, const std::uint16_t* xl,
                                     const std::uint16_t* wp, const float* bias, i64 a, i64 M, i64 n0, i64 N,
                                     i64 steps, Epilogue e) {
  _tile_zero(0);
  if constexpr (NP > 1) _tile_zero(1);
  if constexpr (MB > 1) _tile_zero(2);
  if constexpr (MB > 1 && NP > 1) _tile_zero(3);
  const i64 row_tile = steps * kTileElems;  // one tile of rows of x, all its steps
  for (i64 s = 0; s < steps; ++s) {
    _tile_loadd(6, wp + s * kTileElems, 64);
    if constexpr (NP > 1) _tile_loadd(7, wp + row_tile + s * kTileElems, 64);
    for (int part = 0; part < 2; ++part) {  // hi, then lo
      const std::uint16_t* x = (part == 0 ? xh : xl) + a * row_tile + s * kTileElems;
      _tile_loadd(4, x, 64);
      if constexpr (MB > 1) _tile_loadd(5, x + row_tile, 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (NP > 1) _tile_dpbf16ps(1, 4, 7);
      if constexpr (MB > 1) _tile_dpbf16ps(2, 5, 6);
      if constexpr (MB > 1 && NP > 1) _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float sums[4][16][16];
  _tile_stored(0, sums[0], 64);
  if constexpr (NP > 1) _tile_stored(1, sums[1], 64);
  if constexpr (MB > 1) _tile_stored(2, sums[2], 64);
  if constexpr (MB > 1 && NP > 1) _tile_stored(3, sums[3], 64);
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NP; ++j) {
      const i64 m = (a + i) * kTileRows, n = n0 + j * kTileRows;
      if (m < M && n < N)
        put_tile(y, sums[2 * i + j], true, bias, m, std::min(kTileRows, M - m), n, std::min(kTileRows, N - n), N, e);
    }
}

void few_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, i64 M, i64 N, i64 K,
              Epilogue tiles, Epilogue e) {
  const i64 steps = (K + kStep - 1) / kStep, row_tiles = (M + kTileRows - 1) / kTileRows;
  const i64 packed = steps * kTileRows * 2 * kTileRows;  // room for a tile of rows of x, all its steps
  std::uint16_t* xh = scratch<std::uint16_t, Scratch::kTilesOfX>(2 * row_tiles * packed);
  std::uint16_t* xl = xh + row_tiles * packed;
  for (i64 b = 0; b < row_tiles; ++b)
    pack_x_pairs(xh + b * packed, xl + b * packed, x + b * kTileRows * K, std::min(kTileRows, M - b * kTileRows), K,
                 steps);
  share(N, kBlockTiles * kTileRows, [&](i64 n0, i64 n1) {
    for (i64 b = 0; b < row_tiles; ++b) {
      const i64 m0 = b * kTileRows, R = std::min(kTileRows, M - m0);
      configure_tiles(R);
      const std::uint16_t *h = xh + b * packed, *l = xl + b * packed;
      switch ((n1 - n0 + kTileRows - 1) / kTileRows) {
        case 4: few_rows_tiles<4>(y, h, l, w, bias, m0, R, n0, N, K, steps, tiles); break;
        case 3: few_rows_tiles<3>(y, h, l, w, bias, m0, R, n0, N, K, steps, tiles); break;
        case 2: few_rows_tiles<2>(y, h, l, w, bias, m0, R, n0, N, K, steps, tiles); break;
        default: few_rows_tiles<1>(y, h, l, w, bias, m0, R, n0, N, K, steps, tiles); break;
      }
    }
    release_tiles();
    if (e != tiles)
      for (i64 m = 0; m < M; ++m) gelu_row(y + m * N + n0, n1 - n0, e);
  });
}

void many_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, i64 M, i64 N, i64 K,
               Epilogue tiles, Epilogue e) {
  const i64 steps = (K + kStep - 1) / kStep, row_tiles = (M + kTileRows - 1) / kTileRows;
  const i64 row_tile = steps * kTileElems;
  std::uint16_t* xh = scratch<std::uint16_t, Scratch::kTilesOfX>(2 * row_tiles * row_tile);
  std::uint16_t* xl = xh + row_tiles * row_tile;
  share(row_tiles, 4, [&](i64 b0, i64 b1) {
    for (i64 b = b0; b < b1; ++b) pack_x_rows(xh, xl, x, b, M, K, steps);
  });
  share(N, kBlockTiles * kTileRows, [&](i64 n0, i64 n1) {
    const i64 panels = (n1 - n0 + kTileRows - 1) / kTileRows;
    std::uint16_t* wp = scratch<std::uint16_t, Scratch::kPanels>(kBlockTiles * row_tile);
    for (i64 p = 0; p < panels; ++p)
      pack_w_pairs(wp + p * row_tile, w + (n0 + p * kTileRows) * K, std::min(kTileRows, N - n0 - p * kTileRows), K,
                   steps);
    configure_tiles();
    for (i64 a = 0; a < row_tiles; a += 2)
      for (i64 p = 0; p < panels; p += 2) {
        const bool two_rows = a + 1 < row_tiles, two_panels = p + 1 < panels;
        const std::uint16_t* panel = wp + p * row_tile;
        const i64 n = n0 + p * kTileRows;
        if (two_rows && two_panels) many_rows_tiles<2, 2>(y, xh, xl, panel, bias, a, M, n, N, steps, tiles);
        else if (two_rows) many_rows_tiles<2, 1>(y, xh, xl, panel, bias, a, M, n, N, steps, tiles);
        else if (two_panels) many_rows_tiles<1, 2>(y, xh, xl, panel, bias, a, M, n, N, steps, tiles);
        else many_rows_tiles<1, 1>(y, xh, xl, panel, bias, a, M, n, N, steps, tiles);
      }
    release_tiles();
    if (e != tiles)
      for (i64 m = 0; m < M; ++m) gelu_row(y + m * N + n0, n1 - n0, e);
  });
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

void linear_rows_amx(float* y, const float* x, const std::uint16_t* w, const float* bias, i64 M, i64 N, i64 K,
                     Epilogue e) {
  BRRR_CHECK(amx_available(), "linear_rows_amx: this CPU has no AMX bf16 tile unit the OS lets brrr use");
  if (M <= 0 || N <= 0) return;
  const bool gelu = e == Epilogue::kGeluTanh || e == Epilogue::kGeluErf;
  const Epilogue tiles = gelu ? Epilogue::kStore : e;
  if (M >= kAmxGemmRows) many_rows(y, x, w, bias, M, N, K, tiles, e);
  else few_rows(y, x, w, bias, M, N, K, tiles, e);
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
