// kernels/cpu/rows/bf16.cpp: linear_rows with bfloat16 weights as autocast means it (chapter 08,
// "bf16 generation"): x rounded to bf16 at the matmul's input, products of two bf16, sums in
// float32, on AVX512_BF16's dot-product instruction (VDPBF16PS), on plain AVX-512F FMAs that
// make the same bits, or on plain loops that make them too. Read before: rows.h (the layout of
// the pair panels and the order of the sums), gemm.cpp (the float32 GEMM tiles). Read next:
// amx.cpp (the same panels on AMX's tile unit), then models/gpt/decode.cpp.
//
// One sum per output. VDPBF16PS takes 16 lanes of float sums and two vectors of 32 bf16, and
// adds to lane j the products of their pair j: acc += a[2j+1] b[2j+1], then acc += a[2j] b[2j],
// each rounded to float32 (to nearest, ties to even), bf16 inputs that are subnormal read as 0
// and subnormal results flushed to 0 (checked on the Xeon of docs/measurements.md against that
// model: 3.2 million lanes, no difference; one rounding of the three-term sum differed in 72,182,
// the even product first in 92,419). A product of two bf16 (8 significant bits each) is exact in
// float32, so each step is one rounding of the sum, as an FMA makes it: the instruction is two
// FMAs with a flush. The panels put 16 outputs' pairs side by side, x's pair is broadcast, and
// each lane is one output's sum over the pairs of k in increasing order: a chain from 0, whatever
// M, the thread count or which of the three paths runs it.
//
// Tiles: R (<= 6) rows of x against P (<= 4) panels, 24 vectors of sums at most, each step 4
// loads of W, R broadcasts of x's pair, 4 R dot products. A thread takes 4 panels (64 outputs)
// and runs every row of x past them, 6 at a time, while they sit in its L2.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cstring>

#include "brrr/error.h"
#include "kernels/cpu/rows/internal.h"

// GCC 12 warns inside its own AVX-512 intrinsics where they are inlined here (Emulated::step): a
// false positive, GCC bug 105593 (as rows.cpp says).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace brrr::kernels::cpu {

using namespace rows_detail;

namespace {

constexpr i64 kPanelOutputs = 16;  // outputs per panel (16 float lanes)
constexpr i64 kPanelsPerBlock = 4;
constexpr i64 kTileRows = 6;

std::atomic<int>& path_switch() {  // Bf16Path, as an int
  static std::atomic<int> path{static_cast<int>(Bf16Path::kInstructions)};
  return path;
}

// The bf16 x's entries become: float32 subnormals read as 0 (VCVTNEPS2BF16 does; the products
// would read them as 0 anyway), then to nearest, ties to even; NaN stays NaN, made quiet.
inline std::uint16_t round_input(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7F800000u) == 0) u &= 0x80000000u;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// A stored weight: subnormal bf16 read as 0 by the instruction, so stored as 0 (sign kept).
inline std::uint16_t stored_weight(std::uint16_t b) { return (b & 0x7F80u) == 0 ? b & 0x8000u : b; }

inline float ftz(float v) { return std::abs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

// One step of the order, in plain C++: the pair (x0, x1) times the pair (w0, w1) into s.
inline float pair_step(float s, std::uint32_t xpair, std::uint32_t wpair) {
  const auto lo = [](std::uint32_t p) { return widen(static_cast<std::uint16_t>(p & 0xFFFFu)); };
  const auto hi = [](std::uint32_t p) { return widen(static_cast<std::uint16_t>(p >> 16)); };
  s = ftz(std::fma(hi(xpair), hi(wpair), s));
  return ftz(std::fma(lo(xpair), lo(wpair), s));
}

}  // namespace

void rows_detail::round_rows(std::uint16_t* xb, const float* x, i64 M, i64 K, i64 Kp, bool instructions) {
  share(M, 8, [&](i64 m0, i64 m1) {
    for (i64 m = m0; m < m1; ++m) {
      std::uint16_t* dst = xb + m * Kp;
      const float* src = x + m * K;
      i64 k = 0;
#if defined(__AVX512BF16__) && BRRR_ROWS_AVX512
      if (instructions)
        for (; k + 16 <= K; k += 16) {
          const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + k));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), h);
        }
#else
      (void)instructions;
#endif
      for (; k < K; ++k) dst[k] = round_input(src[k]);
      std::fill(dst + K, dst + Kp, std::uint16_t{0});
    }
  });
}

namespace {

#if BRRR_ROWS_AVX512
// The step on 16 outputs at once: as two FMAs and a flush each, or with the instruction.
struct Emulated {
  static __m512 flush(__m512 v) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(v), _mm512_set1_ps(FLT_MIN), _CMP_LT_OQ);
    const __m512i bits = _mm512_castps_si512(v);
    return _mm512_castsi512_ps(_mm512_mask_and_epi32(bits, tiny, bits, _mm512_set1_epi32(INT32_MIN)));
  }
  static __m512 step(__m512 acc, __m512i xpair, __m512i w) {
    const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m512 x1 = _mm512_castsi512_ps(_mm512_and_si512(xpair, top)), w1 = _mm512_castsi512_ps(_mm512_and_si512(w, top));
    const __m512 x0 = _mm512_castsi512_ps(_mm512_slli_epi32(xpair, 16)), w0 = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    acc = flush(_mm512_fmadd_ps(x1, w1, acc));
    return flush(_mm512_fmadd_ps(x0, w0, acc));
  }
};

struct WithInstruction {
  static __m512 step(__m512 acc, __m512i xpair, __m512i w) {
#if defined(__AVX512BF16__)
    return _mm512_dpbf16_ps(acc, (__m512bh)xpair, (__m512bh)w);
#else
    return Emulated::step(acc, xpair, w);
#endif
  }
};
// R rows of xb (stride Kp) against P panels from wp (panel stride ps), all Kp / 2 pairs: sums
// into out[r][16 p + j]. With few rows the panels stream from memory: each is asked for 16
// steps (1 KiB) ahead.
template <int R, int P, class S>
void tile(float (&out)[R][kPanelsPerBlock * kPanelOutputs], const std::uint16_t* xb, i64 Kp, const std::uint16_t* wp,
          i64 ps, bool stream) {
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
  const i64 pairs = Kp / 2;
  for (i64 i = 0; i < pairs; ++i) {
    __m512i w[P];
    for (int p = 0; p < P; ++p) {
      const std::uint16_t* at = wp + p * ps + i * 2 * kPanelOutputs;
      if (stream && i % 2 == 0) prefetch_l2(reinterpret_cast<const char*>(at + 16 * 2 * kPanelOutputs));
      w[p] = _mm512_loadu_si512(at);
    }
    for (int r = 0; r < R; ++r) {
      std::uint32_t pair;
      std::memcpy(&pair, xb + r * Kp + 2 * i, sizeof pair);
      const __m512i xp = _mm512_set1_epi32(static_cast<int>(pair));
      for (int p = 0; p < P; ++p) acc[r][p] = S::step(acc[r][p], xp, w[p]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(out[r] + p * kPanelOutputs, acc[r][p]);
}
#endif

#if BRRR_ROWS_AVX512
// Many rows, on FMAs. VDPBF16PS makes 32 products per instruction, but on the Xeon of
// docs/measurements.md one issued a quarter as often as an FMA of 16 (1.25 against 4.8-5.2
// billion a second on one core, a loop of 24 independent ones of each): half the FMAs' products
// a second. It stays where W comes from memory (a few rows); for many rows the same steps run
// as two FMAs each, W's block widened to float32 once (a shift, or a mask: bf16 is a float32's
// top half) and x too, in the order of the steps (k = 1, 0, 3, 2, ...), and the flush of a
// subnormal result done by the core's flush-to-zero mode (MXCSR.FTZ), set around the tile: the
// same bits as VDPBF16PS (4.8 million lanes near float32's smallest normal, no difference).
constexpr i64 kWideRows = 24;  // from this many rows of x (below it VDPBF16PS was as fast or faster)

// xf (M, Kp) = xb widened, each pair's two numbers swapped: the order of the steps.
void widen_rows(float* xf, const std::uint16_t* xb, i64 M, i64 Kp) {
  share(M, 8, [&](i64 m0, i64 m1) {
    for (i64 m = m0; m < m1; ++m)
      for (i64 k = 0; k < Kp; ++k) xf[m * Kp + k] = widen(xb[m * Kp + (k ^ 1)]);
  });
}

// wf (Kp, 64) = the P (<= 4) panels from wp (stride ps) widened, in the order of the steps;
// zeros past P.
void widen_block(float* wf, const std::uint16_t* wp, i64 ps, i64 P, i64 Kp) {
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (i64 i = 0; i < Kp / 2; ++i)
    for (i64 p = 0; p < kPanelsPerBlock; ++p) {
      const __m512i v = p < P ? _mm512_loadu_si512(wp + p * ps + i * 2 * kPanelOutputs) : _mm512_setzero_si512();
      _mm512_storeu_si512(wf + (2 * i) * 64 + p * kPanelOutputs, _mm512_and_si512(v, top));
      _mm512_storeu_si512(wf + (2 * i + 1) * 64 + p * kPanelOutputs, _mm512_slli_epi32(v, 16));
    }
}

// Sets MXCSR's flush-to-zero bit for a scope, and puts back what was there.
struct FlushToZero {
  unsigned was = _mm_getcsr();
  FlushToZero() { _mm_setcsr(was | 0x8000u); }
  ~FlushToZero() { _mm_setcsr(was); }
  FlushToZero(const FlushToZero&) = delete;
  FlushToZero& operator=(const FlushToZero&) = delete;
};

// R (<= 12) rows of xf against two panels of a widened block (outputs q0 .. q0 + 31 of its 64):
// 24 vectors of sums, per step 2 loads of W, R broadcasts of x, 2 R FMAs, so that each load of W
// from L2 serves 12 rows (as gemm.cpp's gemm_sums_quad). The caller sets flush-to-zero: with
// MXCSR written inside, GCC 12 kept the 24 sums on the stack (half the speed, measured).
template <int R>
__attribute__((noinline)) void wide_tile(float* out, i64 ldo, const float* xf, i64 Kp, const float* wf) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (i64 k = 0; k < Kp; ++k) {
    const __m512 w0 = _mm512_loadu_ps(wf + k * 64), w1 = _mm512_loadu_ps(wf + k * 64 + kPanelOutputs);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(xf[r * Kp + k]);
      acc[r][0] = _mm512_fmadd_ps(a, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(a, w1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(out + r * ldo, acc[r][0]);
    _mm512_storeu_ps(out + r * ldo + kPanelOutputs, acc[r][1]);
  }
}
#endif

// The same sums in plain loops: what a CPU without AVX-512 runs, and the tests' third path.
template <int R, int P>
void tile_loops(float (&out)[R][kPanelsPerBlock * kPanelOutputs], const std::uint16_t* xb, i64 Kp,
                const std::uint16_t* wp, i64 ps) {
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p)
      for (i64 j = 0; j < kPanelOutputs; ++j) {
        float s = 0.0f;
        for (i64 i = 0; i < Kp / 2; ++i) {
          std::uint32_t xpair, wpair;
          std::memcpy(&xpair, xb + r * Kp + 2 * i, 4);
          std::memcpy(&wpair, wp + p * ps + (i * kPanelOutputs + j) * 2, 4);
          s = pair_step(s, xpair, wpair);
        }
        out[r][p * kPanelOutputs + j] = s;
      }
}

template <int R, int P>
void run_tile(float (&out)[R][kPanelsPerBlock * kPanelOutputs], const std::uint16_t* xb, i64 Kp,
              const std::uint16_t* wp, i64 ps, bool stream, Bf16Path path) {
#if BRRR_ROWS_AVX512
  if (path == Bf16Path::kInstructions) return tile<R, P, WithInstruction>(out, xb, Kp, wp, ps, stream);
  if (path == Bf16Path::kEmulated) return tile<R, P, Emulated>(out, xb, Kp, wp, ps, stream);
#else
  (void)stream, (void)path;
#endif
  tile_loops<R, P>(out, xb, Kp, wp, ps);
}

}  // namespace

Bf16Path bf16_path() { return static_cast<Bf16Path>(path_switch().load(std::memory_order_acquire)); }
void set_bf16_path(Bf16Path path) { path_switch().store(static_cast<int>(path), std::memory_order_release); }

std::int64_t bf16_panels_size(std::int64_t N, std::int64_t K) {
  return (N + kPanelOutputs - 1) / kPanelOutputs * kPanelOutputs * bf16_panel_k(K);
}

void pack_bf16_panels(std::uint16_t* panels, const std::uint16_t* w, i64 N, i64 K) {
  const i64 Kp = bf16_panel_k(K), count = (N + kPanelOutputs - 1) / kPanelOutputs;
  share(count, 8, [&](i64 p0, i64 p1) {
    for (i64 p = p0; p < p1; ++p) {
      std::uint16_t* dst = panels + p * kPanelOutputs * Kp;
      for (i64 k = 0; k < Kp; ++k)
        for (i64 j = 0; j < kPanelOutputs; ++j) {
          const i64 n = p * kPanelOutputs + j;
          // pair k / 2 of output j: dst[(k / 2 * 16 + j) * 2 + k % 2]
          dst[(k / 2 * kPanelOutputs + j) * 2 + k % 2] = n < N && k < K ? stored_weight(w[n * K + k]) : 0;
        }
    }
  });
}

void pack_bf16_panels(std::uint16_t* panels, const float* w, i64 N, i64 K) {
  aligned_vector<std::uint16_t> bits(static_cast<std::size_t>(N * K));
  share(N * K, 1 << 16, [&](i64 b, i64 e) {
    for (i64 i = b; i < e; ++i) bits[i] = bf16::round_bits(w[i]);
  });
  pack_bf16_panels(panels, bits.data(), N, K);
}

namespace {

// linear_rows_panels off the tile unit.
void dot_products(float* y, const float* x, const std::uint16_t* panels, const float* bias, i64 M, i64 N, i64 K,
                  Epilogue e) {
  if (M <= 0 || N <= 0) return;
  const Bf16Path path = bf16_path();
  const i64 Kp = bf16_panel_k(K), ps = kPanelOutputs * Kp;
  std::uint16_t* xb = scratch<std::uint16_t, Scratch::kTilesOfX>(M * Kp);
  round_rows(xb, x, M, K, Kp, path == Bf16Path::kInstructions);
  const bool gelu = e == Epilogue::kGeluTanh || e == Epilogue::kGeluErf;
  const Epilogue put_as = gelu ? Epilogue::kStore : e;
  const i64 count = (N + kPanelOutputs - 1) / kPanelOutputs;
  const bool stream = M < kTileRows;  // few rows: W comes from memory once
#if BRRR_ROWS_AVX512
  const bool wide = path == Bf16Path::kInstructions && M >= kWideRows;
  float* xf = wide ? scratch<float, Scratch::kTilesOfX>(M * Kp) : nullptr;
  if (wide) widen_rows(xf, xb, M, Kp);
#endif
  share(count, kPanelsPerBlock, [&](i64 p0, i64 p1) {
    const i64 n0 = p0 * kPanelOutputs, n1 = std::min(N, p1 * kPanelOutputs);
#if BRRR_ROWS_AVX512
    if (wide) {
      float* wf = scratch<float, Scratch::kPanels>(Kp * 64);
      widen_block(wf, panels + p0 * ps, ps, p1 - p0, Kp);
      for (i64 m = 0; m < M; m += 2 * kTileRows)
        with_rows<2 * kTileRows>(std::min(2 * kTileRows, M - m), [&]<int R>() {
          float out[R][kPanelsPerBlock * kPanelOutputs];
          {
            const FlushToZero ftz;  // the sums' flush, not the epilogue's
            for (i64 q = 0; q < p1 - p0; q += 2)
              wide_tile<R>(out[0] + q * kPanelOutputs, kPanelsPerBlock * kPanelOutputs, xf + m * Kp, Kp,
                           wf + q * kPanelOutputs);
          }
          for (int r = 0; r < R; ++r) {
            float* dst = y + (m + r) * N;
            for (i64 n = n0; n < n1; ++n) put(put_as, dst[n], bias ? out[r][n - n0] + bias[n] : out[r][n - n0]);
          }
        });
      if (gelu)
        for (i64 m = 0; m < M; ++m) gelu_row(y + m * N + n0, n1 - n0, e);
      return;
    }
#endif
    for (i64 m = 0; m < M; m += kTileRows)
      with_rows<kTileRows>(std::min(kTileRows, M - m), [&]<int R>() {
        float out[R][kPanelsPerBlock * kPanelOutputs];
        const std::uint16_t* xr = xb + m * Kp;
        const std::uint16_t* wp = panels + p0 * ps;
        switch (p1 - p0) {
          case 4: run_tile<R, 4>(out, xr, Kp, wp, ps, stream, path); break;
          case 3: run_tile<R, 3>(out, xr, Kp, wp, ps, stream, path); break;
          case 2: run_tile<R, 2>(out, xr, Kp, wp, ps, stream, path); break;
          default: run_tile<R, 1>(out, xr, Kp, wp, ps, stream, path); break;
        }
        for (int r = 0; r < R; ++r) {
          float* dst = y + (m + r) * N;
          for (i64 n = n0; n < n1; ++n) put(put_as, dst[n], bias ? out[r][n - n0] + bias[n] : out[r][n - n0]);
        }
      });
    if (gelu)
      for (i64 m = 0; m < M; ++m) gelu_row(y + m * N + n0, n1 - n0, e);
  });
}

// W (N, K) bf16 bits, row-major, as pair panels in the calling thread's scratch.
const std::uint16_t* packed(const std::uint16_t* w, i64 N, i64 K) {
  std::uint16_t* panels = scratch<std::uint16_t, Scratch::kPanels>(bf16_panels_size(N, K));
  pack_bf16_panels(panels, w, N, K);
  return panels;
}

}  // namespace

void linear_rows_panels(float* y, const float* x, const std::uint16_t* panels, const float* bias, i64 M, i64 N,
                        i64 K, Epilogue e) {
  if (amx_enabled()) return linear_rows_amx(y, x, panels, bias, M, N, K, e);
  dot_products(y, x, panels, bias, M, N, K, e);
}

void linear_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, i64 M, i64 N, i64 K,
                 Epilogue e) {
  linear_rows_panels(y, x, packed(w, N, K), bias, M, N, K, e);
}

// The registry's (rows.h): W packed on each call, so the lab's times include packing it.
void linear_rows_bf16_op(float* y, const float* x, const bf16* w, const float* bias, i64 M, i64 N, i64 K,
                         int epilogue, void*) {
  check_epilogue(epilogue);
  dot_products(y, x, packed(reinterpret_cast<const std::uint16_t*>(w), N, K), bias, M, N, K,
               static_cast<Epilogue>(epilogue));
}

void linear_rows_bf16_amx_op(float* y, const float* x, const bf16* w, const float* bias, i64 M, i64 N, i64 K,
                             int epilogue, void*) {
  check_epilogue(epilogue);
  linear_rows_amx(y, x, packed(reinterpret_cast<const std::uint16_t*>(w), N, K), bias, M, N, K,
                  static_cast<Epilogue>(epilogue));
}

}  // namespace brrr::kernels::cpu
