// kernels/cpu/rows/rows.cpp: the row kernels' dot-product tiles of a few rows (linear_rows below
// kGemmThreshold rows), LayerNorm and attention, declared in rows.h (chapter 08). Read before:
// rows.h, internal.h, team.cpp (the threads they share), cpu.h. Read next: gemm.cpp (the tiles
// of many rows), then models/gpt/decode.cpp (the Decoder that calls them).
//
// linear_rows is a matrix-vector product (a GEMV) when M = 1, generation's case: each row of
// W is read once, multiplied with x and summed, so the time is W's bytes over the memory
// bandwidth. Rows of W go to the threads in blocks of 48; within a block, a micro-kernel takes
// 4 rows of W against 1 or 2 rows of x when x has fewer than 3 rows (decoding: four independent
// sums per row), and 3 rows of W against 3 rows of x up to 47 rows (a batch of sequences: 9
// vector accumulators, 6 loads per 9 FMAs as written; GCC 12 folds each load of W into the
// FMAs that use it, so the compiled loop makes 12; with AVX-512, 8 x 4 tiles, two rows of W to a
// vector, up to 32 rows). From 48 rows (33 with AVX-512; a prefill) a GEMM's tile
// takes over that computes the very same sums (gemm.cpp, "Many rows"). A 4 x 3
// tile (12 sums) compiled to 15 or 16 loads per 12 FMAs: measured at 512 x 1536 x 384 on one
// thread, in a throwaway copy of these loops (docs/measurements.md), 3 x 3 ran 1.5-1.9x the
// 4 x 3's GFLOP/s. When decoding, each tile
// prefetches the rows of W two tiles on (see block). Both operands should start on 32-byte
// boundaries (the callers' buffers are brrr/aligned_vector.h's): a vector load that straddles
// two cache lines costs two, and with 16-byte aligned rows that was every other load (the same
// copy: 28-33 GFLOP/s against 47-60 with aligned rows).
// The vectors (8 floats with AVX2, or plain arrays of 8 with the same numbers) and what this file
// shares with gemm.cpp are in internal.h. With AVX-512 the weighted sums of values
// (and gemm.cpp's tiles) take 16 floats per vector: their vectors hold different outputs,
// never pieces of one sum, so the bits stay the same.
#include "kernels/cpu/rows/rows.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "brrr/aligned_vector.h"
#include "brrr/error.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows/internal.h"

// GCC 12 warns inside its own AVX-512 intrinsics where they are inlined here (dots_in_pairs): a
// false positive, GCC bug 105593 (as gemm_blocked.cpp says).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace brrr::kernels::cpu {

using namespace rows_detail;

namespace {

// What a tile asks for along its loop of `steps` steps (see block): without kShared, kBytes (the
// bytes of W it reads per step) from `at` on, at the pace it reads its own; with kShared, all of
// [at, end), spread evenly: a line every few steps, or several per step should the share have
// more lines than the loop has steps (none of block's tiles at GPT-2's shapes does: one of 4
// rows of x by 6 of W at K = 384, tried, had 72 lines over 48 steps), so no line is left out.
template <int kBytes, bool kShared>
struct Ahead {
  const char* at;
  const char* end;
  i64 every = 1, lines = 1, countdown = 1;
  Ahead(const char* begin, const char* stop, i64 steps) : at(begin), end(stop) {
    if (!kShared || !at) return;
    const i64 share = std::max<i64>(1, (end - at + 63) / 64);
    steps = std::max<i64>(1, steps);
    every = std::max<i64>(1, steps / share), lines = (share + steps - 1) / steps;
    countdown = every;
  }
  void step() {
    if (!at) return;
    if constexpr (!kShared) {
      for (int b = 0; b < kBytes; b += 64) prefetch_l2(at + b);
      at += kBytes;
    } else if (--countdown == 0) {
      countdown = every;
      for (i64 i = 0; i < lines && at < end; ++i) prefetch_l2(at), at += 64;
    }
  }
};

#if BRRR_ROWS_AVX512
// With AVX-512, an even J of W's rows go two to a 512-bit vector: rows j and j + 1's 8 numbers
// at k .. k + 7 side by side, against x's 8 broadcast to both halves. Each half is one output's
// 8 lane sums, the same chains of FMAs as dots' 8-wide vectors, so the same bits; one
// instruction now makes 16 products where it made 8. As 8 x 4 tiles (block<8, 4>) against the
// 3 x 3 tiles before, bench/decode_ab.sh both ways round on the Xeon of docs/measurements.md ("Two rows of
// W to a vector"): gpt-12m's linear layers 1.2-1.4x faster at 8 to 32 rows in float32 and
// 1.6-1.75x with bf16 weights; GPT-2's 1.1-1.3x and 1.45-1.6x; one row unchanged (decoding
// keeps its 1 x 4 tiles).
inline __m512 pair(const float* a, const float* b) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(_mm256_loadu_ps(a))),
                                             _mm256_castps_pd(_mm256_loadu_ps(b)), 1));
}
inline __m512 both_halves(const float* x) {
  return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(_mm256_loadu_ps(x))));
}

// dots' sums for R rows of x and J = 2P rows of W, P vectors of row pairs (the loop of dots,
// prefetches included, two rows of W per vector).
template <int R, int J, class W, bool kShared>
inline void dots_in_pairs(float (&out)[R][J], const float* x, i64 ldx, const W* w, i64 ldw, i64 K, const char* ahead,
                          const char* ahead_end) {
  constexpr int P = J / 2;
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < P; ++q) acc[r][q] = _mm512_setzero_ps();
  const i64 K8 = K - K % 8;
  Ahead<J * 8 * static_cast<int>(sizeof(W)), kShared> next(ahead, ahead_end, K8 / 8);
  for (i64 k = 0; k < K8; k += 8) {
    next.step();
    __m512 wv[P];
    for (int q = 0; q < P; ++q) wv[q] = pair(w + 2 * q * ldw + k, w + (2 * q + 1) * ldw + k);
    for (int r = 0; r < R; ++r) {
      const __m512 xv = both_halves(x + r * ldx + k);
      for (int q = 0; q < P; ++q) acc[r][q] = _mm512_fmadd_ps(xv, wv[q], acc[r][q]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      const __m512 a = acc[r][j / 2];
      const Vec half = j % 2 == 0 ? _mm512_castps512_ps256(a) : _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
      out[r][j] = last_products(hsum(half), x + r * ldx, w + j * ldw, K8, K);
    }
}
#endif

// out[r][j] = x_r . w_j over K numbers, for R rows of x (stride ldx) and J rows of w (stride
// ldw), in rows.h's order. `ahead`, when given, is prefetched along the way (Ahead above): at
// the pace W is read, or with kShared, [ahead, ahead_end) spread over the whole loop. With
// AVX-512, tiles of an even J and at least 12 sums take dots_in_pairs.
template <int R, int J, class W, bool kShared = false>
inline void dots(float (&out)[R][J], const float* x, i64 ldx, const W* w, i64 ldw, i64 K,
                 const char* ahead = nullptr, const char* ahead_end = nullptr) {
#if BRRR_ROWS_AVX512
  if constexpr (J % 2 == 0 && R * J >= 12) return dots_in_pairs<R, J, W, kShared>(out, x, ldx, w, ldw, K, ahead, ahead_end);
#endif
  Vec acc[R][J];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) acc[r][j] = zero();
  const i64 K8 = K - K % 8;
  Ahead<J * 8 * static_cast<int>(sizeof(W)), kShared> next(ahead, ahead_end, K8 / 8);
  for (i64 k = 0; k < K8; k += 8) {
    // J loads of W, then the rows of x one at a time: R x J sums + J + 1 registers (13 at 3 x 3).
    Vec wv[J];
    next.step();
    for (int j = 0; j < J; ++j) wv[j] = load(w + j * ldw + k);
    for (int r = 0; r < R; ++r) {
      const Vec xv = load(x + r * ldx + k);
      for (int j = 0; j < J; ++j) acc[r][j] = fma(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) out[r][j] = last_products(hsum(acc[r][j]), x + r * ldx, w + j * ldw, K8, K);
}

inline float gelu_tanh(float v) {  // 0.5 v (1 + tanh(u)) written as v / (1 + exp(-2u)), as nn.cpp's gelu_forward
  constexpr float k2 = static_cast<float>(-2.0 * 0.7978845608028654), c = 0.044715f;
  return v / (1.0f + exp_vec(k2 * (v + c * v * v * v)));
}

// Decoding (a few rows of x) streams W from memory once, J short rows at a time (768 bytes
// each at K = 384 in bf16), too short for the hardware's prefetcher to get ahead of: the first
// tile of each J rows of W asks for the rows two tiles on while it sums its own. Measured with
// bench_decode at gpt-12m in bf16 (2 threads, the two alternating, 3 runs each): 337-407
// tokens/s without, 589-693 with (docs/measurements.md); three, four or six tiles on were no
// faster than two. With more rows of x (a step of several sequences) the same J rows of W meet
// several tiles of x, and only the first reads them from memory: if that tile asked for all of
// the rows two on, the memory sat idle through the others. So there each tile asks for its
// share of those rows, spread over its loop: gpt-12m's 24 matrices 1.10-1.23x faster at 8 to
// 32 rows (bench/decode_ab.sh, both orders; docs/measurements.md, "The prefetches of a step of
// several sequences"). Decoding's one or two rows take the path they took before.
constexpr i64 kPrefetchTiles = 2;
constexpr i64 kStreamRows = 32;  // up to this many rows of x, W is read from memory rather than cache

// `ahead`, `ahead_end`, kShared: what dots prefetches (nullptr for nothing).
template <int R, int J, class W, bool kShared = false>
inline void tile(float* y, const float* x, const W* w, const float* bias, i64 m, i64 n, i64 N, i64 K, Epilogue e,
                 const char* ahead, const char* ahead_end = nullptr) {
  float out[R][J];
  dots<R, J, W, kShared>(out, x + m * K, K, w + n * K, K, K, ahead, ahead_end);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      const float v = bias ? out[r][j] + bias[n + j] : out[r][j];
      put(e, y[(m + r) * N + n + j], v);
    }
}

// One thread's block of W's rows [n0, n1) against every row of x, in tiles of RX rows of x by
// J rows of W (the edges in smaller tiles).
template <int RX, int J, class W>
void block(float* y, const float* x, const W* w, const float* bias, i64 M, i64 n0, i64 n1, i64 N, i64 K,
           Epilogue e) {
  // Rows of x in chunks of about 144 KiB, which stay in the core's L2 while the block's rows of
  // W pass over them J at a time (J rows of W, 9 KiB at K = 768 and J = 3, stay in L1 while the
  // chunk's rows go by RX at a time). Decode has one row: the chunk is x itself.
  const i64 chunk = std::max<i64>(RX, (i64{144} * 1024 / (K * static_cast<i64>(sizeof(float)))) / RX * RX);
  // The prefetch address for W's rows n onwards (see kPrefetchTiles), when x has few rows: an
  // address, never dereferenced (a prefetch past the end of W is dropped, not a fault), so
  // computed as an integer rather than as a pointer past the array.
  const auto ahead = [&](i64 n, i64 j) -> std::uintptr_t {
    if (M > kStreamRows) return 0;
    return reinterpret_cast<std::uintptr_t>(w) + sizeof(W) * static_cast<std::uintptr_t>((n + j * kPrefetchTiles) * K);
  };
  for (i64 m0 = 0; m0 < M; m0 += chunk) {
    const i64 m1 = std::min(M, m0 + chunk);
    // The tiles that each J rows of W meet below (RX rows of x at a time, then the rows left as
    // one tile) and, when there are several, each one's share of the J rows kPrefetchTiles on.
    const i64 rows = m1 - m0, tiles = rows / RX + (rows % RX != 0);
    const auto share = static_cast<std::uintptr_t>((J * K * static_cast<i64>(sizeof(W)) + tiles - 1) / tiles);
    i64 n = n0;
    for (; n + J <= n1; n += J) {
      std::uintptr_t next = ahead(n, J);
      i64 m = m0;
      if (tiles > 1 && next != 0) {
        const auto shared = [&]<int R>() {  // the next tile, with the next share
          tile<R, J, W, true>(y, x, w, bias, m, n, N, K, e, reinterpret_cast<const char*>(next),
                              reinterpret_cast<const char*>(next + share));
          next += share, m += R;
        };
        while (m + RX <= m1) shared.template operator()<RX>();
        // The rows left are one tile of that many rows (2 rows: 2J independent sums, not J twice:
        // an FMA's result is ready 4 cycles later, so a tile needs 8 sums in flight to keep both
        // FMA units busy).
        with_rows<RX - 1>(m1 - m, shared);
        continue;
      }
      // One tile (decoding): it prefetches the rows at the pace it reads its own.
      const char* first = reinterpret_cast<const char*>(next);
      for (; m + RX <= m1; m += RX) tile<RX, J>(y, x, w, bias, m, n, N, K, e, m == m0 ? first : nullptr);
      with_rows<RX - 1>(m1 - m, [&]<int R>() { tile<R, J>(y, x, w, bias, m, n, N, K, e, m == m0 ? first : nullptr); });
    }
    for (; n < n1; ++n) {
      i64 m = m0;
      for (; m + RX <= m1; m += RX) tile<RX, 1>(y, x, w, bias, m, n, N, K, e, nullptr);
      for (; m < m1; ++m) tile<1, 1>(y, x, w, bias, m, n, N, K, e, nullptr);
    }
  }
}

}  // namespace

// y = gelu(y) over n numbers, in vectors: gelu_tanh above, or cpu.h's gelu_erf_value (as nn.cpp's
// gelu_erf_forward).
void rows_detail::gelu_row(float* y, i64 n, Epilogue e) {
  if (e == Epilogue::kGeluTanh) {
#pragma omp simd
    for (i64 i = 0; i < n; ++i) y[i] = gelu_tanh(y[i]);
  } else {
#pragma omp simd
    for (i64 i = 0; i < n; ++i) y[i] = gelu_erf_value(y[i]);
  }
}

namespace {

template <class W>
void linear_rows_impl(float* y, const float* x, const W* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e) {
  if (M >= kGemmThreshold) return gemm(y, x, w, bias, M, N, K, e);
  constexpr i64 kRowsOfW = 48;  // a block of W's rows (144 KiB at K = 768 in float32): one thread's share of work
  // A few rows (decoding): 1 x 4 or 2 x 4 tiles, four independent sums per row of x. Three rows
  // or more (a batch of sequences): 3 x 3 tiles, 9 sums from 6 loads; with AVX-512, 8 x 4 tiles
  // whose 4 rows of W go two to a vector (dots_in_pairs), 16 vectors of sums from 2 pairs of W
  // and 8 broadcasts of x. Either way, and in the GEMM above, every output is the same dot
  // product (the order above).
  // GELU is applied after the block, along each row's piece of y, 8 outputs at a time (the
  // tiles' outputs come one at a time, and GELU's exp costs more than a tile's sums at K = 128).
  const bool gelu = e == Epilogue::kGeluTanh || e == Epilogue::kGeluErf;
  share(N, kRowsOfW, [&](i64 n0, i64 n1) {
    const Epilogue tiles = gelu ? Epilogue::kStore : e;
    if (M >= 3)
#if BRRR_ROWS_AVX512
      block<8, 4>(y, x, w, bias, M, n0, n1, N, K, tiles);  // dots_in_pairs: 16 vectors of sums
#else
      block<3, 3>(y, x, w, bias, M, n0, n1, N, K, tiles);
#endif
    else
      block<2, 4>(y, x, w, bias, M, n0, n1, N, K, tiles);
    if (gelu)
      for (i64 m = 0; m < M; ++m) gelu_row(y + m * N + n0, n1 - n0, e);
  });
}

}  // namespace


void linear_rows(float* y, const float* x, const float* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e) {
  linear_rows_impl(y, x, w, bias, M, N, K, e);
}

void layer_norm_rows(float* y, const float* x, const float* w, const float* b, i64 M, i64 C, float eps) {
  share(M, 16, [&](i64 m0, i64 m1) {
    double mean, rstd;
    for (i64 m = m0; m < m1; ++m) layer_norm_row(y + m * C, mean, rstd, x + m * C, w, b, C, eps);
  });
}

namespace {

// The scores of R consecutive rows (queries q, stride ldq) against keys 0 .. t - 1, 3 keys at a
// time as R x 3 tiles of dot products, then the last keys 1 at a time: row r's score for key p
// goes to scores[r * lds + p], times scale. Every score is rows.h's dot product, whatever R.
template <int R>
void tile_scores(float* scores, i64 lds, const float* q, i64 ldq, const float* keys, i64 stride, i64 hs, i64 t,
                 float scale) {
  i64 p = 0;
  for (; p + 3 <= t; p += 3) {
    float s[R][3];
    dots<R, 3>(s, q, ldq, keys + p * stride, stride, hs);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 3; ++j) scores[r * lds + p + j] = s[r][j] * scale;
  }
  for (; p < t; ++p) {
    float s[R][1];
    dots<R, 1>(s, q, ldq, keys + p * stride, stride, hs);
    for (int r = 0; r < R; ++r) scores[r * lds + p] = s[r][0] * scale;
  }
}

}  // namespace

namespace {

// weigh_values's sums for d from d0 on, D vectors of L (internal.h) at a time while they
// fit in hs; returns where it stopped.
template <int R, int D, class L>
i64 weigh_blocks(float* out, i64 ldo, const float* scores, i64 lds, const float* values, i64 stride, i64 hs, i64 t0,
                 i64 d0) {
  using V = typename L::V;
  constexpr i64 kWidth = D * L::kLanes;
  for (; d0 + kWidth <= hs; d0 += kWidth) {
    V acc[R][D];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < D; ++j) acc[r][j] = L::zero();
    for (i64 p = 0; p < t0; ++p) {
      const float* v = values + p * stride + d0;
      V vj[D];
      for (int j = 0; j < D; ++j) vj[j] = L::load(v + L::kLanes * j);
      for (int r = 0; r < R; ++r) {
        const V a = L::splat(scores[r * lds + p]);
        for (int j = 0; j < D; ++j) acc[r][j] = L::fma(a, vj[j], acc[r][j]);
      }
    }
    for (int r = 1; r < R; ++r)  // the later rows' last positions
      for (i64 p = t0; p < t0 + r; ++p) {
        const float* v = values + p * stride + d0;
        const V a = L::splat(scores[r * lds + p]);
        for (int j = 0; j < D; ++j) acc[r][j] = L::fma(a, L::load(v + L::kLanes * j), acc[r][j]);
      }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < D; ++j) L::store(out + r * ldo + d0 + L::kLanes * j, acc[r][j]);
  }
  return d0;
}

// o_r (hs) = sum over p < t0 + r of sc_r[p] v_p, for R consecutive rows r of one sequence (row r
// sees t0 + r positions; its scores at scores + r * lds, its output at out + r * ldo): each o[d]
// one FMA per p in increasing p, from 0, as attend_rows has always summed it. D vectors of d at
// a time for all R rows, R x D = 8 to 12 sums in flight (with AVX-512, 4 vectors: a head of 64
// numbers at once, up to 24 sums): each load of v serves R rows.
template <int R>
void weigh_values(float* out, i64 ldo, const float* scores, i64 lds, const float* values, i64 stride, i64 hs, i64 t0) {
  i64 d0 = 0;
#if BRRR_ROWS_AVX512  // 16 numbers of d per vector: the same chains, twice as wide
  d0 = weigh_blocks<R, 4, Lanes16>(out, ldo, scores, lds, values, stride, hs, t0, d0);
#endif
  d0 = weigh_blocks<R, (R <= 2 ? 4 : 2), Lanes8>(out, ldo, scores, lds, values, stride, hs, t0, d0);
  for (int r = 0; r < R; ++r) {
    float* o = out + r * ldo;
    std::fill(o + d0, o + hs, 0.0f);
    for (i64 p = 0; p < t0 + r; ++p) {
      const float a = scores[r * lds + p];
      const float* v = values + p * stride;
      for (i64 d = d0; d < hs; ++d) o[d] = std::fma(a, v[d], o[d]);
    }
  }
}

}  // namespace

float row_max(const float* v, i64 n) {
  float top = -INFINITY;
  i64 p = 0;
  if (n >= 8) {
    Vec m = load(v);
    for (p = 8; p + 8 <= n; p += 8) m = vmax(load(v + p), m);
    float lanes[8];
    store(lanes, m);
    for (const float l : lanes) top = std::max(top, l);
  }
  for (; p < n; ++p) top = std::max(top, v[p]);
  return top;
}

float softmax_total(const float* e, i64 n) {
  Vec lanes = zero();
  i64 p = 0;
  for (; p + 8 <= n; p += 8) lanes = add(lanes, load(e + p));
  float total = hsum(lanes);
  for (; p < n; ++p) total += e[p];
  return total;
}

void attend_rows(float* out, i64 ldo, const float* q, i64 ldq, const float* keys, const float* values, i64 t0,
                 i64 n, i64 stride, i64 hs, float* scores, i64 lds) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  if (n >= kGemmRows) {
    gemm_scores(scores, lds, q, ldq, keys, stride, hs, t0, n, scale);
  } else {
    // A few rows: 3 x 3 tiles of dot products (6 loads per 9 products, where one row's dots take
    // 2 per product), then the rows left (a decoding step's one row) as 1 x 3 tiles, 3 sums in
    // flight, not 1. A tile's keys run to its last row's position.
    i64 i0 = 0;
    for (; i0 + 3 <= n; i0 += 3)
      tile_scores<3>(scores + i0 * lds, lds, q + i0 * ldq, ldq, keys, stride, hs, t0 + i0 + 3, scale);
    for (i64 i = i0; i < n; ++i)
      tile_scores<1>(scores + i * lds, lds, q + i * ldq, ldq, keys, stride, hs, t0 + i + 1, scale);
  }
  // Each row's softmax over its own positions 0 .. t0 + i, then the weighted sums of values 6
  // rows at a time, then each row divided by its total.
  for (i64 i0 = 0; i0 < n; i0 += kGemmRows) {
    const i64 rows = std::min(kGemmRows, n - i0);
    float inv[kGemmRows];
    for (i64 i = i0; i < i0 + rows; ++i) {
      const i64 t = t0 + i + 1;
      float* sc = scores + i * lds;
      const float top = row_max(sc, t);
#pragma omp simd
      for (i64 p = 0; p < t; ++p) sc[p] = exp_vec(sc[p] - top);
      inv[i - i0] = 1.0f / softmax_total(sc, t);
    }
    float* o = out + i0 * ldo;
    const float* sc = scores + i0 * lds;
    with_rows(rows, [&]<int R>() { weigh_values<R>(o, ldo, sc, lds, values, stride, hs, t0 + i0 + 1); });
    for (i64 r = 0; r < rows; ++r)
      for (i64 d = 0; d < hs; ++d) o[r * ldo + d] *= inv[r];
  }
}

void attend_row(float* out, const float* q, const float* keys, const float* values, i64 t, i64 stride, i64 hs,
                float* scores) {
  attend_rows(out, hs, q, hs, keys, values, t - 1, 1, stride, hs, scores, t);
}

// ---------------------------------------------------------------------------------------------
// As registry ops (kernels/signatures.h), for the kernel lab (chapter 11). The float64 loops are
// the formulas as written, no tiles: the lab checks them against its own reference too.

void rows_detail::check_epilogue(int epilogue) {
  BRRR_CHECK(epilogue >= 0 && epilogue <= 3, "linear_rows: epilogue ", epilogue,
             " is not 0 (store), 1 (add), 2 (GELU, tanh) or 3 (GELU, erf)");
}

void linear_rows_op(float* y, const float* x, const float* w, const float* bias, i64 M, i64 N, i64 K, int epilogue,
                    void*) {
  check_epilogue(epilogue);
  linear_rows(y, x, w, bias, M, N, K, static_cast<Epilogue>(epilogue));
}

void linear_rows_loop(double* y, const double* x, const double* w, const double* bias, i64 M, i64 N, i64 K,
                      int epilogue, void*) {
  check_epilogue(epilogue);
  rows_parallel(M, 1, [&](i64 begin, i64 end) {
    for (i64 m = begin; m < end; ++m)
      for (i64 n = 0; n < N; ++n) {
        double s = bias ? bias[n] : 0.0;
        for (i64 k = 0; k < K; ++k) s += x[m * K + k] * w[n * K + k];
        double& out = y[m * N + n];
        if (epilogue == 0) out = s;
        else if (epilogue == 1) out += s;
        else if (epilogue == 2) out = 0.5 * s * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s)));
        else out = gelu_erf_value(s);
      }
  });
}

void attend_rows_op(float* out, const float* q, const float* k, const float* v, i64 t0, i64 n, i64 hs) {
  if (n <= 0) return;
  // The Decoder's groups of rows (models/gpt/decode.cpp), one after the other.
  std::vector<float> scores(static_cast<std::size_t>(std::min(n, kAttendGroup) * (t0 + n)));
  for (i64 g = 0; g < n; g += kAttendGroup)
    attend_rows(out + g * hs, hs, q + g * hs, hs, k, v, t0 + g, std::min(kAttendGroup, n - g), hs, hs,
                scores.data(), t0 + n);
}

void attend_rows_loop(double* out, const double* q, const double* k, const double* v, i64 t0, i64 n, i64 hs) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  rows_parallel(n, 1, [&](i64 begin, i64 end) {
    std::vector<double> s(static_cast<std::size_t>(t0 + n));
    for (i64 i = begin; i < end; ++i) {
      const i64 t = t0 + i + 1;  // positions 0 .. t0 + i
      double top = -INFINITY;
      for (i64 p = 0; p < t; ++p) {
        double dot = 0;
        for (i64 d = 0; d < hs; ++d) dot += q[i * hs + d] * k[p * hs + d];
        s[p] = dot * scale;
        top = std::max(top, s[p]);
      }
      double total = 0;
      for (i64 p = 0; p < t; ++p) total += s[p] = std::exp(s[p] - top);
      for (i64 d = 0; d < hs; ++d) {
        double sum = 0;
        for (i64 p = 0; p < t; ++p) sum += s[p] * v[p * hs + d];
        out[i * hs + d] = sum / total;
      }
    }
  });
}

}  // namespace brrr::kernels::cpu
