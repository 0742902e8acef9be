// kernels/cpu/rows/gemm.cpp: the Decoder's kernels for many rows (chapter 08): linear_rows
// from kGemmThreshold rows of x (a prefill, a step of many sequences) and a prefill's attention
// scores, as GEMM tiles that compute the dot products' very numbers. Read before: rows.cpp
// (the dot products, whose order these tiles keep). Read next: bf16.cpp (bf16 weights, x
// rounded to bf16, in an order of their own), then models/gpt/decode.cpp (the Decoder).
#include <algorithm>
#include <cstring>

#include "kernels/cpu/rows/internal.h"

namespace brrr::kernels::cpu::rows_detail {

namespace {

// ---------------------------------------------------------------------------------------------
// Many rows (a prefill, a step of many sequences): the same sums, computed as a GEMM computes
//
// dots keeps one output's 8 lane sums in a vector and adds the lanes at the end: per step of k, a
// 3 x 3 tile makes 9 FMAs from 6 loads as written (12 as compiled), and every output ends in a
// horizontal sum. A GEMM's micro-kernel holds 8 outputs in a vector instead and broadcasts x:
// a 6 x 16 tile makes 12 FMAs from 2 loads of W and 6 broadcasts of x, and 12 sums in flight keep
// both FMA units busy. It can make dots' very numbers. Lane l of an output's dot product is a
// chain of FMAs over k = l, l + 8, l + 16, ..., from zero: a dot product of its own, over the
// T = K / 8 values of k in lane class l. So the tile runs the 8 lane classes one after another
// (each a GEMM chain over its T values of k), keeps each output's 8 lane sums, adds them in
// dots' order, then the last K % 8 products, then the bias. Same additions, same order, same
// bits: so which of the two kernels a call takes (it depends on M) never changes a number, and
// a sequence's numbers stay the same alone or batched.
//
// W's rows are packed 16 at a time into a panel, wp[(l * T + t) * 16 + j] = W[n + j][8 t + l],
// widened to float32 (bfloat16 included), zeros past the last row, so that a lane class of the
// panel is one contiguous stream. x's rows are packed the same way, 6 at a time into a tile,
// xp[(l * T + t) * 6 + r] = x[m + r][8 t + l], zeros past the last row: a step of the tile reads
// the next 24 bytes of the tile, where x read in place took one float from each of 6 rows 8
// floats apart and came back to the same cache lines for each lane class. x is packed once per
// call, by the team; W a block of panels at a time, by the thread that uses them. Each tile of x then passes over every panel of the block while it is
// in L1 (the panels, up to 384 KiB, stay in L2), and every row of x passes over each block, so W
// is read from memory once per call. On one thread at 510 rows, in a throwaway copy of these
// loops, this ran at 60-80 GFLOP/s where x read in place and one panel at a time ran at 49-72
// (docs/measurements.md, "Packed tiles of x").
constexpr i64 kPanel = 16;     // outputs per panel: two vectors
// A thread's share of the work: a block of 2 to 4 panels (32 to 64 outputs), 4 while they take at
// most 192 KiB of packed W (K = 384 or 768), 2 above (384 KiB at K = 3072). Never one: the tiles
// take panels in pairs (a block of one panel at GPT-2's K = 3072 ran its quarter of the
// prefill's FLOPs at half the speed of the rest, measured in docs/measurements.md).
constexpr i64 kPanelsPerBlock = 4, kBlockBytes = 192 * 1024;

// One lane class of the tile, in L's vectors (internal.h): R (<= 6) rows of x (a: the lane
// class of a packed tile) against two vectors of outputs per step (b0 and b1, each a panel's
// lane class or one half of it), 12 chains of FMAs from zero; row r's sums go to d0 + r * kPanel
// and d1 + r * kPanel. Named accumulators: GCC 12 kept an array of 12 vectors on the stack.
template <int R, class L>
inline void lane_class_sums(float* d0, float* d1, const float* a, const float* b0, const float* b1, i64 T) {
  using V = typename L::V;
  V c00 = L::zero(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  V c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (i64 t = 0; t < T; ++t) {
    const V w0 = L::load(b0 + t * kPanel), w1 = L::load(b1 + t * kPanel);
#define BRRR_GEMM_ROW(r)                                                 \
  if constexpr (R > r) {                                                 \
    const V s = L::splat(a[t * kGemmRows + r]);                          \
    c##r##0 = L::fma(s, w0, c##r##0), c##r##1 = L::fma(s, w1, c##r##1); \
  }
    BRRR_GEMM_ROW(0) BRRR_GEMM_ROW(1) BRRR_GEMM_ROW(2) BRRR_GEMM_ROW(3) BRRR_GEMM_ROW(4) BRRR_GEMM_ROW(5)
#undef BRRR_GEMM_ROW
  }
  const V c[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
  for (int r = 0; r < R; ++r) L::store(d0 + r * kPanel, c[r][0]), L::store(d1 + r * kPanel, c[r][1]);
}

// One vector of outputs' 8 lane sums (lane class l's at part + l * stride) added in dots' order,
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), into dst.
template <class L>
inline void add_lane_classes(float* dst, const float* part, i64 stride) {
  const auto p = [&](int l) { return L::load(part + l * stride); };
  L::store(dst, L::add(L::add(L::add(p(0), p(4)), L::add(p(2), p(6))), L::add(L::add(p(1), p(5)), L::add(p(3), p(7)))));
}

// The tile: R (<= 6) rows of a packed tile of x against a panel, the lane classes one after
// another (8 outputs per vector: each step's two vectors are the panel's two halves), then each
// output's 8 lane sums added in dots' order into sum[r][j] (the last K % 8 products not yet).
template <int R>
inline void gemm_sums(float (&sum)[R][kPanel], const float* xp, const float* wp, i64 T) {
  float part[8][R][kPanel];
  for (int l = 0; l < 8; ++l) {
    const float* b = wp + l * T * kPanel;
    lane_class_sums<R, Lanes8>(part[l][0], part[l][0] + 8, xp + l * T * kGemmRows, b, b + 8, T);
  }
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < kPanel; h += 8) add_lane_classes<Lanes8>(sum[r] + h, &part[0][r][h], R * kPanel);
}

// Two panels at a time: the tile's sums for 32 outputs. With AVX-512, a panel's 16 outputs fill
// one 512-bit vector, so two panels side by side make a 6 x 32 tile of 12 vectors: 12 FMAs from
// 2 loads of W and 6 broadcasts of x, as gemm_sums, each FMA 16 products wide instead of 8. Each
// output is still its lane classes' chains of FMAs from zero, added in dots' order, so the
// numbers are gemm_sums' to the bit. Without AVX-512 it is gemm_sums twice.
template <int R>
inline void gemm_sums_pair(float (&sum)[2][R][kPanel], const float* xp, const float* wp0, const float* wp1, i64 T) {
#if BRRR_ROWS_AVX512
  alignas(64) float part[8][2][R][kPanel];
  for (int l = 0; l < 8; ++l)
    lane_class_sums<R, Lanes16>(part[l][0][0], part[l][1][0], xp + l * T * kGemmRows, wp0 + l * T * kPanel,
                                wp1 + l * T * kPanel, T);
  for (int q = 0; q < 2; ++q)
    for (int r = 0; r < R; ++r) add_lane_classes<Lanes16>(sum[q][r], part[0][q][r], 2 * R * kPanel);
#else
  gemm_sums<R>(sum[0], xp, wp0, T);
  gemm_sums<R>(sum[1], xp, wp1, T);
#endif
}

#if BRRR_ROWS_AVX512
// Two full tiles of x (12 rows) against two panels (32 outputs): 24 vectors of sums, 24 FMAs
// from 2 loads of W and 12 broadcasts of x, so each load of W serves 12 rows where
// gemm_sums_pair's serves 6: half the reads of W from L2. Same chains, same order, same bits.
inline void gemm_sums_quad(float (&sum)[2][2][kGemmRows][kPanel], const float* xp0, const float* xp1,
                           const float* wp0, const float* wp1, i64 T) {
  alignas(64) float part[8][2][2][kGemmRows][kPanel];
  for (int l = 0; l < 8; ++l) {
    const float* a = xp0 + l * T * kGemmRows;
    const float* a1 = xp1 + l * T * kGemmRows;
    const float* b0 = wp0 + l * T * kPanel;
    const float* b1 = wp1 + l * T * kPanel;
    __m512 c00 = _mm512_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
    __m512 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    __m512 d00 = c00, d01 = c00, d10 = c00, d11 = c00, d20 = c00, d21 = c00;
    __m512 d30 = c00, d31 = c00, d40 = c00, d41 = c00, d50 = c00, d51 = c00;
    for (i64 t = 0; t < T; ++t) {
      const __m512 w0 = _mm512_loadu_ps(b0 + t * kPanel), w1 = _mm512_loadu_ps(b1 + t * kPanel);
#define BRRR_GEMM_ROW(c, a, r)                                                           \
  {                                                                                      \
    const __m512 s = _mm512_set1_ps(a[t * kGemmRows + r]);                               \
    c##r##0 = _mm512_fmadd_ps(s, w0, c##r##0), c##r##1 = _mm512_fmadd_ps(s, w1, c##r##1); \
  }
      BRRR_GEMM_ROW(c, a, 0) BRRR_GEMM_ROW(c, a, 1) BRRR_GEMM_ROW(c, a, 2) BRRR_GEMM_ROW(c, a, 3)
      BRRR_GEMM_ROW(c, a, 4) BRRR_GEMM_ROW(c, a, 5) BRRR_GEMM_ROW(d, a1, 0) BRRR_GEMM_ROW(d, a1, 1)
      BRRR_GEMM_ROW(d, a1, 2) BRRR_GEMM_ROW(d, a1, 3) BRRR_GEMM_ROW(d, a1, 4) BRRR_GEMM_ROW(d, a1, 5)
#undef BRRR_GEMM_ROW
    }
    const __m512 c[2][6][2] = {{{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}},
                               {{d00, d01}, {d10, d11}, {d20, d21}, {d30, d31}, {d40, d41}, {d50, d51}}};
    for (int i = 0; i < 2; ++i)
      for (int r = 0; r < kGemmRows; ++r)
        _mm512_store_ps(part[l][i][0][r], c[i][r][0]), _mm512_store_ps(part[l][i][1][r], c[i][r][1]);
  }
  for (int i = 0; i < 2; ++i)
    for (int q = 0; q < 2; ++q)
      for (int r = 0; r < kGemmRows; ++r)
        add_lane_classes<Lanes16>(sum[i][q][r], part[0][i][q][r], 2 * 2 * kGemmRows * kPanel);
}
#endif

// Packs rows [0, J) of w (stride ldw; J <= 16) into a panel, rows past J as zeros. k = 8 t ..
// 8 t + 7 of 8 rows at a time are transposed in registers: lane class l of those rows. Meanwhile
// the rows of `next` (next_rows of them, stride ldw), the next panel's, are asked for at the same
// pace, a cache line of each every 64 bytes: 16 rows read side by side are 16 streams, more than
// the hardware prefetcher follows.
template <class W>
inline void pack_panel(float* wp, const W* w, i64 ldw, i64 J, i64 T, const W* next, i64 next_rows) {
  for (i64 t = 0; t < T; ++t) {
    if ((8 * t * static_cast<i64>(sizeof(W))) % 64 == 0)
      for (i64 j = 0; j < next_rows; ++j) prefetch(reinterpret_cast<const char*>(next + j * ldw + 8 * t));
    for (i64 h = 0; h < kPanel; h += 8) {
      Vec r[8];
      for (i64 j = 0; j < 8; ++j) r[j] = h + j < J ? load(w + (h + j) * ldw + 8 * t) : zero();
      transpose8(r);
      for (i64 l = 0; l < 8; ++l) store(wp + (l * T + t) * kPanel + h, r[l]);
    }
  }
}

// Packs rows [0, R) of x (stride ldx; R <= 6) into a tile, rows past R as zeros: 8 rows (the
// last two zeros) transposed in registers as pack_panel does, lane class l's 8 numbers stored
// at its step t, the 2 past the tile's 6 overwritten by step t + 1 (the last step stores 6).
inline void pack_tile(float* xp, const float* x, i64 ldx, i64 R, i64 T) {
  for (i64 t = 0; t < T; ++t) {
    Vec r[8];
    for (i64 j = 0; j < 8; ++j) r[j] = j < R ? load(x + j * ldx + 8 * t) : zero();
    transpose8(r);
    for (i64 l = 0; l < 8; ++l) {
      float* dst = xp + (l * T + t) * kGemmRows;
      if (t + 1 < T) {
        store(dst, r[l]);
      } else {
        float last[8];
        store(last, r[l]);
        std::memcpy(dst, last, kGemmRows * sizeof(float));
      }
    }
  }
}

// Rows [m, m + R) of y, the panel's outputs [n, n + J), from the tile's sums: the last K % 8
// products, the bias, the epilogue (store or add; a GELU comes after, along the row).
template <int R, class W>
inline void put_rows(float* y, const float* x, const W* w, const float (&sum)[R][kPanel], const float* bias, i64 m,
                     i64 n, i64 J, i64 N, i64 K, Epilogue e) {
  const i64 K8 = K - K % 8;
  for (int r = 0; r < R; ++r) {
    float* dst = y + (m + r) * N + n;
    if (J == kPanel && K8 == K) {  // a whole panel, no products left: 8 outputs at a time
      for (int h = 0; h < kPanel; h += 8) {
        Vec v = load(sum[r] + h);
        if (bias) v = add(v, load(bias + n + h));
        store(dst + h, e == Epilogue::kAdd ? add(load(dst + h), v) : v);
      }
      continue;
    }
    for (i64 j = 0; j < J; ++j) {
      const float s = last_products(sum[r][j], x + (m + r) * K, w + (n + j) * K, K8, K);
      put(e, dst[j], bias ? s + bias[n + j] : s);
    }
  }
}

// The tile's outputs are R short pieces of R rows of y, one or two cache lines each, which no
// hardware prefetcher foresees: asked for before the tile sums, they arrive while it does.
template <int R>
inline void prefetch_rows(float* y, i64 m, i64 n, i64 J, i64 N) {
  for (int r = 0; r < R; ++r) {
    prefetch_write(y + (m + r) * N + n);
    prefetch_write(y + (m + r) * N + n + J - 1);
  }
}

// Rows [m, m + R) of y against one panel (outputs [n, n + J)), or two (wp1: outputs [n + 16,
// n + 16 + J1)); xp is the rows' packed tile.
template <int R, class W>
inline void gemm_rows(float* y, const float* x, const W* w, const float* xp, const float* wp, const float* bias,
                      i64 m, i64 n, i64 J, i64 N, i64 K, Epilogue e, const float* wp1 = nullptr, i64 J1 = 0) {
  const i64 T = K / 8;
  prefetch_rows<R>(y, m, n, J, N);
  if (!wp1) {
    float sum[R][kPanel];
    gemm_sums<R>(sum, xp, wp, T);
    put_rows<R>(y, x, w, sum, bias, m, n, J, N, K, e);
    return;
  }
  prefetch_rows<R>(y, m, n + kPanel, J1, N);
  float sum[2][R][kPanel];
  gemm_sums_pair<R>(sum, xp, wp, wp1, T);
  put_rows<R>(y, x, w, sum[0], bias, m, n, J, N, K, e);
  put_rows<R>(y, x, w, sum[1], bias, m, n + kPanel, J1, N, K, e);
}

template <class W>
void gemm_impl(float* y, const float* x, const W* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e) {
  const i64 T = K / 8, tiles = (M + kGemmRows - 1) / kGemmRows, tile_floats = kGemmRows * 8 * T;
  const i64 panel_floats = kPanel * 8 * T;
  const bool gelu = e == Epilogue::kGeluTanh || e == Epilogue::kGeluErf;
  const Epilogue epilogue = gelu ? Epilogue::kStore : e;
  float* xp = scratch<float, Scratch::kTilesOfX>(tiles * tile_floats);
  share(tiles, 4, [&](i64 i0, i64 i1) {
    for (i64 i = i0; i < i1; ++i)
      pack_tile(xp + i * tile_floats, x + i * kGemmRows * K, K, std::min(kGemmRows, M - i * kGemmRows), T);
  });
  const i64 per_block =
      std::clamp<i64>(kBlockBytes / std::max<i64>(1, panel_floats * static_cast<i64>(sizeof(float))), 2, kPanelsPerBlock);
  share((N + kPanel - 1) / kPanel, per_block, [&](i64 p0, i64 p1) {
    float* wp = scratch<float, Scratch::kPanels>(per_block * panel_floats);
    for (i64 p = p0; p < p1; ++p) {
      const i64 n = p * kPanel, J = std::min(kPanel, N - n);
      const i64 next_rows = p + 1 < p1 ? std::min(kPanel, N - n - kPanel) : 0;
      pack_panel(wp + (p - p0) * panel_floats, w + n * K, K, J, T, next_rows > 0 ? w + (n + kPanel) * K : nullptr,
                 next_rows);
    }
    for (i64 i = 0; i < tiles; ++i) {
      const i64 m = i * kGemmRows;
#if BRRR_ROWS_AVX512
      if (M - m >= 2 * kGemmRows) {  // two full tiles at a time
        for (i64 p = p0; p < p1; p += 2) {
          const i64 n = p * kPanel;
          if (p + 1 == p1) {
            for (i64 ii = 0; ii < 2; ++ii)
              gemm_rows<kGemmRows>(y, x, w, xp + (i + ii) * tile_floats, wp + (p - p0) * panel_floats, bias,
                                   m + ii * kGemmRows, n, std::min(kPanel, N - n), N, K, epilogue);
            continue;
          }
          const i64 J = kPanel, J1 = std::min(kPanel, N - n - kPanel);
          for (i64 ii = 0; ii < 2; ++ii) {
            prefetch_rows<kGemmRows>(y, m + ii * kGemmRows, n, J, N);
            prefetch_rows<kGemmRows>(y, m + ii * kGemmRows, n + kPanel, J1, N);
          }
          float sum[2][2][kGemmRows][kPanel];
          gemm_sums_quad(sum, xp + i * tile_floats, xp + (i + 1) * tile_floats, wp + (p - p0) * panel_floats,
                         wp + (p + 1 - p0) * panel_floats, T);
          for (i64 ii = 0; ii < 2; ++ii) {
            put_rows<kGemmRows>(y, x, w, sum[ii][0], bias, m + ii * kGemmRows, n, J, N, K, epilogue);
            put_rows<kGemmRows>(y, x, w, sum[ii][1], bias, m + ii * kGemmRows, n + kPanel, J1, N, K, epilogue);
          }
        }
        ++i;
        continue;
      }
#endif
      with_rows(std::min(kGemmRows, M - m), [&]<int R>() {
        for (i64 p = p0; p < p1; p += 2) {  // two panels at a time, and the last alone
          const i64 n = p * kPanel;
          const bool pair = p + 1 < p1;
          gemm_rows<R>(y, x, w, xp + i * tile_floats, wp + (p - p0) * panel_floats, bias, m, n,
                       std::min(kPanel, N - n), N, K, epilogue, pair ? wp + (p + 1 - p0) * panel_floats : nullptr,
                       pair ? std::min(kPanel, N - n - kPanel) : 0);
        }
      });
    }
    if (gelu)
      for (i64 r = 0; r < M; ++r) gelu_row(y + r * N + p0 * kPanel, std::min(N, p1 * kPanel) - p0 * kPanel, e);
  });
}

}  // namespace

void gemm(float* y, const float* x, const float* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e) {
  gemm_impl(y, x, w, bias, M, N, K, e);
}

// The scores of rows [0, n) (row i's query at q + i * ldq, its keys 0 .. t0 + i) as GEMM tiles
// (gemm_sums_pair above): the keys 16 at a time packed into a panel, two panels against 6 rows of
// queries at a time. The numbers are tile_scores's (dots' order, then the last hs % 8 products, then the
// scale). A tile writes the scores of a panel's keys up to its last row's position; those past
// an earlier row's own position are never read.
void gemm_scores(float* scores, i64 lds, const float* q, i64 ldq, const float* keys, i64 stride, i64 hs, i64 t0,
                 i64 n, float scale) {
  const i64 K8 = hs - hs % 8, T = K8 / 8, keys_total = t0 + n;
  float* wp = scratch<float, Scratch::kPanels>(2 * kPanel * K8);
  float* qp = scratch<float, Scratch::kTilesOfQueries>((n + kGemmRows - 1) / kGemmRows * kGemmRows * K8);
  for (i64 m = 0; m < n; m += kGemmRows) pack_tile(qp + m * K8, q + m * ldq, ldq, std::min(kGemmRows, n - m), T);
  // Two panels of keys at a time (gemm_sums_pair: one 6 x 32 tile with AVX-512).
  for (i64 k0 = 0; k0 < keys_total; k0 += 2 * kPanel) {
    const i64 J0 = std::min(kPanel, keys_total - k0), J1 = std::clamp<i64>(keys_total - k0 - kPanel, 0, kPanel);
    pack_panel(wp, keys + k0 * stride, stride, J0, T, static_cast<const float*>(nullptr), 0);
    if (J1 > 0) pack_panel(wp + kPanel * K8, keys + (k0 + kPanel) * stride, stride, J1, T, static_cast<const float*>(nullptr), 0);
    // Tiles whose rows' last keys are all before these panels have all their scores already.
    for (i64 m = std::max<i64>(0, k0 - t0) / kGemmRows * kGemmRows; m < n; m += kGemmRows)
      with_rows(std::min(kGemmRows, n - m), [&]<int R>() {
        // The tile's scores land in R rows far apart (a row of scores per head is block_size
        // long): their cache lines, asked for now, arrive while the tile sums (as gemm_rows).
        for (int r = 0; r < R; ++r) {
          prefetch_write(scores + (m + r) * lds + k0);
          prefetch_write(scores + (m + r) * lds + k0 + J0 + J1 - 1);
        }
        float sum[2][R][kPanel];
        if (J1 > 0 && t0 + m + R > k0 + kPanel) gemm_sums_pair<R>(sum, qp + m * K8, wp, wp + kPanel * K8, T);
        else gemm_sums<R>(sum[0], qp + m * K8, wp, T);
        for (int h = 0; h < 2; ++h) {
          const i64 kh = k0 + h * kPanel;
          const i64 upto = std::min(h == 0 ? J0 : J1, t0 + m + R - kh);  // keys of the panel the tile's last row sees
          if (upto <= 0) break;
          if (upto == kPanel && K8 == hs) {  // 8 scores at a time (the sums read back as they were written)
            for (int r = 0; r < R; ++r)
              for (int c = 0; c < kPanel; c += 8)
                store(scores + (m + r) * lds + kh + c, mul(load(sum[h][r] + c), splat(scale)));
            continue;
          }
          for (int r = 0; r < R; ++r)
            for (i64 j = 0; j < upto; ++j) {
              float s = sum[h][r][j];
              for (i64 k = K8; k < hs; ++k) s = std::fma(q[(m + r) * ldq + k], keys[(kh + j) * stride + k], s);
              scores[(m + r) * lds + kh + j] = s * scale;
            }
        }
      });
  }
}

}  // namespace brrr::kernels::cpu::rows_detail
