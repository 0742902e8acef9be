// kernels/cpu/rows/internal.h: what the files of the row kernels share (chapter 08): team.cpp
// (the thread team), rows.cpp (the dot-product tiles of a few rows, LayerNorm, attention),
// gemm.cpp (the GEMM tiles of many rows, and of a prefill's attention scores), bf16.cpp (bf16
// weights, x rounded to bf16) and amx.cpp (the same on AMX's tile unit). Not part of rows.h's
// interface: only those five files include it. Read before: rows.h. Read next: team.cpp,
// rows.cpp.
//
// With AVX2 and FMA (this build's -march says whether) a vector is 8 floats; otherwise a plain
// array of 8 that computes the same sums, so the numbers are the same bits either way.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "brrr/aligned_vector.h"
#include "kernels/cpu/rows/rows.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BRRR_ROWS_AVX2 1
#endif

namespace brrr::kernels::cpu::rows_detail {

using i64 = std::int64_t;

// Runs fn(ctx, b) for b in [0, blocks) on team.cpp's team of threads (see "The team" there).
void run_blocks(i64 blocks, void (*fn)(void*, i64), void* ctx);

// body(begin, end) over [0, n) in blocks of `grain`, on the team.
template <class Body>
void share(i64 n, i64 grain, const Body& body) {
  if (n <= 0) return;
  struct Job {
    const Body* body;
    i64 n, grain;
  } job{&body, n, grain};
  run_blocks((n + grain - 1) / grain, [](void* ctx, i64 b) {
    const Job& j = *static_cast<const Job*>(ctx);
    (*j.body)(b * j.grain, std::min(j.n, (b + 1) * j.grain));
  }, &job);
}

inline float widen(float x) { return x; }
inline float widen(std::uint16_t bits) {  // bfloat16 -> float32, exact
  const std::uint32_t u = std::uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// s plus the last products of a row of x and a row of W, k = K8 .. K - 1 in order, one FMA each:
// the step of rows.h's order after the 8 lanes are summed (K8 = K - K % 8), shared by the
// dot-product tiles (rows.cpp) and the GEMM's (gemm.cpp).
template <class W>
inline float last_products(float s, const float* x, const W* w, i64 K8, i64 K) {
  for (i64 k = K8; k < K; ++k) s = std::fma(x[k], widen(w[k]), s);
  return s;
}

#if BRRR_ROWS_AVX2
using Vec = __m256;
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline Vec load(const std::uint16_t* p) {  // 8 bfloat16: widen to 32 bits, shift into the top half
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline void prefetch(const char* p) { _mm_prefetch(p, _MM_HINT_T0); }
// Into L2, not L1: the dot-product tiles' stream of W (rows.cpp, Ahead). On the Xeon of
// docs/measurements.md ("Prefetching W into L2") GPT-2's decoding step ran 6% faster in bf16 and
// 6-16% in float32 than with prefetcht0 (bench/decode_ab.sh both ways round); the GEMM's packing
// was no faster with it and keeps prefetch.
inline void prefetch_l2(const char* p) { _mm_prefetch(p, _MM_HINT_T1); }
inline void prefetch_write(const float* p) { __builtin_prefetch(p, 1, 3); }
inline Vec splat(float a) { return _mm256_set1_ps(a); }
inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec vmax(Vec a, Vec b) { return _mm256_max_ps(a, b); }
// r[j][l] -> r[l][j]: 8 vectors of 8 as a matrix, transposed in registers (24 shuffles).
inline void transpose8(Vec (&r)[8]) {
  Vec t[8], u[8];
  for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20), r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
}
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as rows.h says.
inline float hsum(Vec v) {
  const __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l_i + l_{i+4}
  const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));                                  // a0 + a2, a1 + a3
  return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}
#else
struct Vec {
  float l[8];
};
inline Vec zero() { return Vec{}; }
template <class T>
inline Vec load(const T* p) {
  Vec v;
  for (int i = 0; i < 8; ++i) v.l[i] = widen(p[i]);
  return v;
}
inline Vec fma(Vec a, Vec b, Vec c) {
  for (int i = 0; i < 8; ++i) c.l[i] = std::fma(a.l[i], b.l[i], c.l[i]);
  return c;
}
inline void prefetch(const char* p) { __builtin_prefetch(p); }
inline void prefetch_l2(const char* p) { __builtin_prefetch(p, 0, 2); }
inline void prefetch_write(const float* p) { __builtin_prefetch(p, 1, 3); }
inline Vec splat(float a) {
  Vec v;
  for (float& l : v.l) l = a;
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, v.l, sizeof v.l); }
inline Vec add(Vec a, Vec b) {
  for (int i = 0; i < 8; ++i) a.l[i] += b.l[i];
  return a;
}
inline Vec mul(Vec a, Vec b) {
  for (int i = 0; i < 8; ++i) a.l[i] *= b.l[i];
  return a;
}
inline Vec vmax(Vec a, Vec b) {  // as _mm256_max_ps: b where either is NaN
  for (int i = 0; i < 8; ++i) a.l[i] = a.l[i] > b.l[i] ? a.l[i] : b.l[i];
  return a;
}
inline void transpose8(Vec (&r)[8]) {
  for (int i = 0; i < 8; ++i)
    for (int j = i + 1; j < 8; ++j) std::swap(r[i].l[j], r[j].l[i]);
}
inline float hsum(Vec v) {
  const float a0 = v.l[0] + v.l[4], a1 = v.l[1] + v.l[5], a2 = v.l[2] + v.l[6], a3 = v.l[3] + v.l[7];
  return (a0 + a2) + (a1 + a3);
}
#endif

// The vector a loop's sums run in, as a type: Lanes8 (Vec above) and, with AVX-512, Lanes16. A
// loop written once over L computes the same chains at either width; only how many outputs one
// instruction serves changes.
struct Lanes8 {
  using V = Vec;
  static constexpr int kLanes = 8;
  static V zero() { return rows_detail::zero(); }
  static V load(const float* p) { return rows_detail::load(p); }
  static V fma(V a, V b, V c) { return rows_detail::fma(a, b, c); }
  static V splat(float a) { return rows_detail::splat(a); }
  static V add(V a, V b) { return rows_detail::add(a, b); }
  static void store(float* p, V v) { rows_detail::store(p, v); }
};
#if BRRR_ROWS_AVX2 && defined(__AVX512F__)
#define BRRR_ROWS_AVX512 1
struct Lanes16 {
  using V = __m512;
  static constexpr int kLanes = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V splat(float a) { return _mm512_set1_ps(a); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
};
#endif

// What a tile does with an output: store it or add it to y (the GELUs are stored, then applied
// along the row by gelu_row). y is read only to add to it.
inline void put(Epilogue e, float& dst, float v) {
  if (e == Epilogue::kAdd) dst += v;
  else dst = v;
}

// The registry ops' check of their int epilogue (rows.cpp).
void check_epilogue(int epilogue);

// y = gelu(y) over n numbers, in vectors (rows.cpp).
void gelu_row(float* y, i64 n, Epilogue e);

// Calls f.template operator()<R>() with R = rows as a constant, for rows in 1 .. kMax; nothing
// otherwise (a tile's rows of x as a template argument, so its sums live in registers).
template <int kMax = 6, int R = 1, class F>
inline void with_rows(i64 rows, F&& f) {
  if (rows == R) return f.template operator()<R>();
  if constexpr (R < kMax) with_rows<kMax, R + 1>(rows, f);
}

// Scratch a thread keeps for as long as it lives, one for each use and element type: the panels
// of W a thread packs or widens and uses, the rows of x a call packs, rounds or widens (the
// calling thread's, read by the team), the tiles of queries attend_rows packs (gemm.cpp's).
enum class Scratch { kPanels, kTilesOfX, kTilesOfQueries };
template <class T, Scratch S>
T* scratch(i64 n) {
  thread_local aligned_vector<T> room;
  if (room.size() < static_cast<std::size_t>(n)) room.resize(static_cast<std::size_t>(n));
  return room.data();
}

// Rows of x per tile of the GEMM (gemm.cpp), and per group of attention's weighted sums.
constexpr i64 kGemmRows = 6;
// From this many rows of x on, linear_rows takes the GEMM. Below it, packing W costs more than
// the GEMM's tile saves: gpt-12m's 24 matrices on 2 threads (docs/measurements.md) took 4.7-7.3
// ms at 8 rows against the 3 x 3 dot products' 3.8-4.1, 12.4-13.0 against 13.0-15.2 at 48 rows,
// and 0.73-0.86 of the dot products' time at 64 to 256 rows. With AVX-512's 8 x 4 tiles the
// GEMM wins from 33 rows, where the tiles stop prefetching W (kStreamRows in rows.cpp): 1.2-1.4x
// at 33 to 47 rows, gpt-12m and GPT-2, float32 and bf16; the two even at 28 and 32
// (docs/measurements.md, "Two rows of W to a vector").
#if BRRR_ROWS_AVX512
constexpr i64 kGemmThreshold = 33;
#else
constexpr i64 kGemmThreshold = 48;
#endif

// The GEMM of many rows (gemm.cpp): linear_rows's numbers, for M >= kGemmThreshold.
void gemm(float* y, const float* x, const float* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e);

// x (M, K) rounded to bf16 as bf16.cpp says, into xb (M, Kp), zeros past K: with
// VCVTNEPS2BF16 where `instructions` and the build has AVX512_BF16, else in plain C++ (the same
// bits).
void round_rows(std::uint16_t* xb, const float* x, i64 M, i64 K, i64 Kp, bool instructions);

// A prefill's attention scores as GEMM tiles (gemm.cpp): attend_rows's scores of rows
// [0, n), for n >= kGemmRows.
void gemm_scores(float* scores, i64 lds, const float* q, i64 ldq, const float* keys, i64 stride, i64 hs, i64 t0,
                 i64 n, float scale);

}  // namespace brrr::kernels::cpu::rows_detail
