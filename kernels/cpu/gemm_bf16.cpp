// kernels/cpu/gemm_bf16.cpp: matmul with bfloat16 operands and float32 accumulation, the CPU
// side of mixed precision. Chapter 18 (mixed precision). Read before: gemm_blocked.cpp (this
// file is its twin: the same five loops, though in another order (section 5), the same
// packing idea, the same reproducibility argument, so only what differs is explained here). Read next: docs/chapters/18-mixed-precision.md.
//
// C (M, N) (+)= bf16(A) (M, K) @ bf16(B) (K, N): A, B and C are float32 in memory; the packing
// rounds A and B to bfloat16 (round to nearest, ties to even) on the way into the packed
// panels, and every product is added to a float32 accumulator. A bf16 number is the top half
// of a float32 (sign, the same 8 exponent bits, 7 mantissa bits), so the product of two of them
// (8 x 8 significant bits = 16) is exact in float32, and the only rounding is the float32 add,
// as in the float32 GEMM.
//
// Why it pays. AVX512-BF16's `vdpbf16ps` takes 32 bf16 pairs in each of two registers and does
// c[l] += a[2l+1] * b[2l+1], then c[l] += a[2l] * b[2l], in each of the 16 float32 lanes l: 64
// FLOPs per instruction where the float32 FMA does 32, and the packed panels are half the
// bytes. The micro-kernel (section 3) is the blocked GEMM's, with the FMA replaced: it works on
// pairs of consecutive k, so the packed panels hold 32-bit words that are (bf16(x[k]),
// bf16(x[k+1])), the even k in the low half, and an odd K is padded with a zero.
//
// Two variants, chosen at run time (register.cpp asks the CPU, with __builtin_cpu_supports):
//   "avx512bf16"  the vdpbf16ps micro-kernel and AVX-512 packing, where the CPU has AVX512-BF16;
//   "plain"       the same loops in portable C++, for every other CPU: the same packed words and
//                 the same chain of float32 FMAs in the same order (odd k of a pair, then even),
//                 so on this machine the two agree bit for bit (tests/core/test_matmul_bf16.cpp)
//                 except where a number is subnormal: vdpbf16ps and vcvtne2ps2bf16 treat
//                 subnormal inputs and results as zero, the plain variant keeps them (and a
//                 NaN, a NaN in both, may carry another payload).
// BRRR_KERNELS=matmul:bf16=plain forces the fallback on any machine.
//
// Reproducibility: as in gemm_blocked.cpp, each element of C is one chain of adds over k in a
// fixed order (pair by pair), never split among threads, so the bits do not depend on the
// thread count.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>
#include <type_traits>

#include "brrr/bfloat16.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_grid.h"

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 warns inside its own AVX-512 intrinsics (GCC bug 105593), as in gemm_blocked.cpp;
// clang, which defines __GNUC__ too, has no -Wmaybe-uninitialized and would warn about the name.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define BRRR_HAVE_X86 1
// The AVX-512 functions are compiled for these extensions whatever the build's -march, and
// called only after the CPU said it has them: one binary runs everywhere.
#define BRRR_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#endif

namespace brrr::kernels::cpu {

namespace {

using i64 = std::int64_t;
using u32 = std::uint32_t;

// ----------------------------------------------------------------------------------------
// 1. float32 -> bfloat16 is brrr/bfloat16.h's: round to nearest, ties to even, on the bits
// ("add 0x7FFF plus the last kept bit, drop the low 16"), a NaN becomes the canonical 0x7FFF.
// pack_bf16(x[k], x[k + 1]) is the packed word of two consecutive k, low_bf16 / high_bf16
// widen its halves back (exactly). Section 4 rounds 32 floats at a time with one instruction.

// ----------------------------------------------------------------------------------------
// 2. Blocking: gemm_blocked.cpp's, counted in k pairs. KC = 512 values of k is 256 packed
// words, so the A micro-panel (12 x 256 words) is 12 KiB and the B block (256 x 512 words)
// 512 KiB: the same bytes in L1 and L2 as the float32 GEMM, holding twice as many k.

constexpr i64 kMR = 12;
constexpr i64 kNR = 32;
constexpr i64 kKC = 512;  // values of k, even
constexpr i64 kNC = 512;
static_assert(kKC % 2 == 0 && kNC % kNR == 0, "KC counts pairs of k; NC whole micro-panels");

inline i64 pairs(i64 kc) { return (kc + 1) / 2; }

// Element (i, k) of A and (k, j) of B through the layouts the op passed (see MatmulShape).
// Src is float (autocast's operands, rounded by the packing) or bf16 (operands already bf16 in
// memory, chapter 18 section 10: widened here, exactly, and the packing's rounding keeps them).
template <class Src>
inline float a_at(const Src* a, i64 M, i64 K, bool trans_a, i64 i, i64 k) {
  return static_cast<float>(trans_a ? a[k * M + i] : a[i * K + k]);
}
template <class Src>
inline float b_at(const Src* b, i64 N, i64 K, bool trans_b, i64 k, i64 j) {
  return static_cast<float>(trans_b ? b[j * K + k] : b[k * N + j]);
}

// ----------------------------------------------------------------------------------------
// 3. The micro-kernels: C[0:MR, 0:NR] (+)= Ap (MR x kc, packed) @ Bp (kc x NR, packed), where
// ap[p * MR + i] is the pair (A(i, 2p), A(i, 2p + 1)) and bp[p * NR + j] the pair (B(2p, j),
// B(2p + 1, j)).

// The plain one: for each pair, the odd product and then the even one, each a float32 FMA
// (exact product, one rounding), which is what vdpbf16ps does in each lane.
void micro_kernel_plain(i64 kp, const u32* __restrict ap, const u32* __restrict bp, float* __restrict c, i64 ldc,
                        bool load_c) {
  float acc[kMR][kNR];
  for (i64 i = 0; i < kMR; ++i)
    for (i64 j = 0; j < kNR; ++j) acc[i][j] = load_c ? c[i * ldc + j] : 0.0f;
  for (i64 p = 0; p < kp; ++p, ap += kMR, bp += kNR)
    for (i64 i = 0; i < kMR; ++i) {
      const float a_even = low_bf16(ap[i]), a_odd = high_bf16(ap[i]);
      for (i64 j = 0; j < kNR; ++j) {
        const float t = std::fma(a_odd, high_bf16(bp[j]), acc[i][j]);
        acc[i][j] = std::fma(a_even, low_bf16(bp[j]), t);
      }
    }
  for (i64 i = 0; i < kMR; ++i)
    for (i64 j = 0; j < kNR; ++j) c[i * ldc + j] = acc[i][j];
}

#ifdef BRRR_HAVE_X86
// The AVX512-BF16 one: gemm_blocked.cpp's 12 x 32 register tile (24 accumulators), where each
// step is one pair of k: two loads of B's packed row, 12 broadcasts of A's pairs, 24 vdpbf16ps.
// vdpbf16ps has a latency of 6 cycles on Zen 4; 24 independent chains keep it busy.
BRRR_TARGET_BF16 void micro_kernel_dpbf16(i64 kp, const u32* __restrict ap, const u32* __restrict bp,
                                          float* __restrict c, i64 ldc, bool load_c) {
  __m512 acc0[kMR], acc1[kMR];
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    acc0[i] = load_c ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    acc1[i] = load_c ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
  }
  for (i64 p = 0; p < kp; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_load_si512(bp), b1 = (__m512bh)_mm512_load_si512(bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[i]));
      acc0[i] = _mm512_dpbf16_ps(acc0[i], a, b0);
      acc1[i] = _mm512_dpbf16_ps(acc1[i], a, b1);
    }
    ap += kMR;
    bp += kNR;
  }
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    _mm512_storeu_ps(c + i * ldc, acc0[i]);
    _mm512_storeu_ps(c + i * ldc + 16, acc1[i]);
  }
}
#endif

// ----------------------------------------------------------------------------------------
// 4. Packing, rounding to bf16 on the way. The plain version reads element by element; the
// AVX-512 one rounds 32 floats per instruction (vcvtne2ps2bf16) and moves the halves into
// pairs with word shuffles. It used to round as round_bits is written, with integer adds and
// masks on 16 floats (7 instructions) and a permute to gather the halves.

// rows x kc of A from row i0 and column p0 (zeros beyond), into ap[p * MR + i].
template <class Src>
void pack_a_plain(u32* ap, const Src* a, i64 M, i64 K, bool trans_a, i64 i0, i64 rows, i64 p0, i64 kc) {
  for (i64 p = 0; p < pairs(kc); ++p)
    for (i64 i = 0; i < kMR; ++i) {
      const i64 k = p0 + 2 * p;
      const float even = i < rows ? a_at(a, M, K, trans_a, i0 + i, k) : 0.0f;
      const float odd = i < rows && 2 * p + 1 < kc ? a_at(a, M, K, trans_a, i0 + i, k + 1) : 0.0f;
      ap[p * kMR + i] = pack_bf16(even, odd);
    }
}

// kc x cols of B from row p0 and column j0 (zeros beyond), into bp[p * NR + j].
template <class Src>
void pack_b_plain(u32* bp, const Src* b, i64 N, i64 K, bool trans_b, i64 j0, i64 cols, i64 p0, i64 kc) {
  for (i64 p = 0; p < pairs(kc); ++p)
    for (i64 j = 0; j < kNR; ++j) {
      const i64 k = p0 + 2 * p;
      const float even = j < cols ? b_at(b, N, K, trans_b, k, j0 + j) : 0.0f;
      const float odd = j < cols && 2 * p + 1 < kc ? b_at(b, N, K, trans_b, k + 1, j0 + j) : 0.0f;
      bp[p * kNR + j] = pack_bf16(even, odd);
    }
}

#ifdef BRRR_HAVE_X86
// vcvtne2ps2bf16 (_mm512_cvtne2ps_pbh(hi, lo)) rounds 32 floats, 16 from each of two
// registers, to 32 bf16 in one instruction: lo's 16 in the low half of the result, hi's in the
// high half. Its rounding is round_bits's, to nearest with ties to even, for every number that
// is neither subnormal nor NaN (an exhaustive check over all 2^32 floats agreed; the test
// "avx512bf16 and plain agree bit for bit" checks it through the GEMM): it flushes subnormal
// inputs to zero, as vdpbf16ps would treat them anyway, and keeps a NaN's sign and payload
// (quieted) where round_bits makes the canonical 0x7FFF; a NaN is a NaN either way.

// Consecutive k in two rows of the source (B not transposed, A transposed): 16 columns of rows
// k and k + 1 round into one register (row k's 16 bf16 low, row k + 1's high), and one word
// permute interleaves them into 16 pairs. dst[p * ld + j] for j < width (up to 16; lanes
// beyond `width` are zeros, stored where `store` says), from src[k * src_ld + j], kc rows.
// From bf16 in memory the two rows' 16 bf16 are loaded into the two halves instead: the same
// register, and the same permute.
template <class Src>
BRRR_TARGET_BF16 void pack_pairs_across(u32* dst, i64 ld, __mmask16 store, i64 width, const Src* src,
                                        i64 src_ld, i64 kc) {
  alignas(64) static constexpr std::uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                                21, 6, 22, 7, 23, 8,  24, 9,  25, 10, 26,
                                                                11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i interleave = _mm512_load_si512(kInterleave);
  const __mmask16 load = static_cast<__mmask16>((1u << width) - 1);
  for (i64 p = 0; p < pairs(kc); ++p) {
    __m512i both;
    if constexpr (std::is_same_v<Src, bf16>) {
      const __m256i even = _mm256_maskz_loadu_epi16(load, src + 2 * p * src_ld);
      const __m256i odd =
          2 * p + 1 < kc ? _mm256_maskz_loadu_epi16(load, src + (2 * p + 1) * src_ld) : _mm256_setzero_si256();
      both = _mm512_inserti64x4(_mm512_castsi256_si512(even), odd, 1);
    } else {
      const __m512 even = _mm512_maskz_loadu_ps(load, src + 2 * p * src_ld);
      const __m512 odd =
          2 * p + 1 < kc ? _mm512_maskz_loadu_ps(load, src + (2 * p + 1) * src_ld) : _mm512_setzero_ps();
      both = (__m512i)_mm512_cvtne2ps_pbh(odd, even);
    }
    _mm512_mask_storeu_epi32(dst + p * ld, store, _mm512_permutexvar_epi16(interleave, both));
  }
}

// gemm_blocked.cpp's 16 x 16 transpose, on 32-bit words.
BRRR_TARGET_BF16 void transpose16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i u0 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x88), u1 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xdd);
    const __m512i u2 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x88);
    const __m512i u3 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xdd);
    t[m] = _mm512_shuffle_i32x4(u0, u2, 0x88);
    t[4 + m] = _mm512_shuffle_i32x4(u1, u3, 0x88);
    t[8 + m] = _mm512_shuffle_i32x4(u0, u2, 0xdd);
    t[12 + m] = _mm512_shuffle_i32x4(u1, u3, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// Consecutive k along each row of the source (A not transposed, B transposed): 32 floats of
// a row round, in one vcvtne2ps2bf16, to 32 bf16 in k order, which read as 32-bit words are
// already the row's 16 pairs; a 16 x 16 transpose of 16 rows then puts pair p of every row
// into r[p]. dst[p * ld + i] for i < 16 (stored where `store` says; rows >= `rows` are zeros),
// from src[i * src_ld + k], kc values of k.
// From bf16 in memory a row's 32 bf16 are one load, already those pairs.
template <class Src>
BRRR_TARGET_BF16 void pack_pairs_along(u32* dst, i64 ld, __mmask16 store, const Src* src, i64 src_ld, i64 rows,
                                       i64 kc) {
  for (i64 k0 = 0; k0 < kc; k0 += 32) {
    const i64 n = std::min<i64>(32, kc - k0);
    const std::uint32_t bits = n >= 32 ? 0xffffffffu : (1u << n) - 1;
    const __mmask16 lo = static_cast<__mmask16>(bits), hi = static_cast<__mmask16>(bits >> 16);
    __m512i r[16];
    for (i64 i = 0; i < 16; ++i) {
      if (i >= rows) {
        r[i] = _mm512_setzero_si512();
        continue;
      }
      const Src* row = src + i * src_ld + k0;
      if constexpr (std::is_same_v<Src, bf16>) r[i] = _mm512_maskz_loadu_epi16(bits, row);
      else r[i] = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + 16), _mm512_maskz_loadu_ps(lo, row));
    }
    transpose16x16(r);
    for (i64 p = 0; p < pairs(n); ++p) _mm512_mask_storeu_epi32(dst + (k0 / 2 + p) * ld, store, r[p]);
  }
}

template <class Src>
BRRR_TARGET_BF16 void pack_a_avx512(u32* ap, const Src* a, i64 M, i64 K, bool trans_a, i64 i0, i64 rows, i64 p0,
                                    i64 kc) {
  if (trans_a) pack_pairs_across(ap, kMR, 0xfff, rows, a + p0 * M + i0, M, kc);
  else pack_pairs_along(ap, kMR, 0xfff, a + i0 * K + p0, K, rows, kc);
}

template <class Src>
BRRR_TARGET_BF16 void pack_b_avx512(u32* bp, const Src* b, i64 N, i64 K, bool trans_b, i64 j0, i64 cols, i64 p0,
                                    i64 kc) {
  const i64 lo = std::min<i64>(cols, 16), hi = std::max<i64>(cols - 16, 0);
  if (!trans_b) {
    const Src* src = b + p0 * N + j0;
    pack_pairs_across(bp, kNR, 0xffff, lo, src, N, kc);
    pack_pairs_across(bp + 16, kNR, 0xffff, hi, src + 16, N, kc);
    return;
  }
  const Src* src = b + j0 * K + p0;
  pack_pairs_along(bp, kNR, 0xffff, src, K, lo, kc);
  pack_pairs_along(bp + 16, kNR, 0xffff, src + 16 * K, K, hi, kc);
}
#endif

// ----------------------------------------------------------------------------------------
// 5. Loops 5 to 1. The float32 GEMM packs inside each job: a thread packs its block of B, then
// each A micro-panel just before using it. Then an A micro-panel is packed once per column
// block of C (N / NC times: 8 times for gpt-12m's vocabulary projection, 4096 wide) and a B
// block once per row block, and here, where packing also rounds, the packing was 15-20% of a
// bf16 training step. So here every micro-panel of A and B (of one KC block) is packed once
// per call, into memory all threads share, by whichever thread needs it first:
//
//   loop 5  for each job (block of C) of the grid, threads share them:
//     loop 4  for pc in K, step KC:
//               make sure the block's B micro-panels are packed (<= 512 KiB: L2)
//       loop 3  for each A micro-panel of the block: make sure it is packed (12 x KC: L1)
//         loop 2  for each B micro-panel of the block
//           loop 1  the micro-kernel
//
// "Make sure" is a small state per micro-panel (not packed, being packed, ready): the first
// thread to need a panel packs it, a thread that finds it being packed waits (a few
// microseconds), and one that finds it ready just reads it. The order of work is the float32
// GEMM's, so what is packed is still used while it is in the cache, and no thread ever waits
// for all the others: packing everything first, or each KC block first, with the threads
// waiting for each other in between, measured the same on an idle machine, but on a loaded
// one a thread the OS delays stalls the other at every wait, and some GEMMs of the step took
// 2x longer. The packed operands, (M + N) x K bf16 for each matrix of a batch (half the bytes
// of the float32 inputs), go into a buffer that each calling thread keeps between calls (up
// to kKeptWords), so the GEMMs of a training step reuse the same memory instead of faulting
// fresh pages in. Packing is exact and its result the same whoever does it, and each element
// of C is still one chain of adds in k order computed by one thread: the bits do not change.

template <class Src>
struct Path {  // the variant's three pieces, for operands of type Src in memory
  void (*pack_a)(u32*, const Src*, i64, i64, bool, i64, i64, i64, i64);
  void (*pack_b)(u32*, const Src*, i64, i64, bool, i64, i64, i64, i64);
  void (*micro_kernel)(i64, const u32*, const u32*, float*, i64, bool);
};

constexpr i64 kKeptWords = i64{32} << 20;  // 128 MiB; a larger buffer is freed after its call

// A packing buffer of at least `words`: the calling thread's own, which only grows, or for a
// very large product one of its own, freed with the returned holder.
u32* packing_buffer(i64 words, std::unique_ptr<AlignedBuffer<u32>>& holder) {
  if (words > kKeptWords) {
    holder = std::make_unique<AlignedBuffer<u32>>(words);
    return holder->get();
  }
  thread_local std::unique_ptr<AlignedBuffer<u32>> kept;
  thread_local i64 capacity = 0;
  if (words > capacity) {
    kept = std::make_unique<AlignedBuffer<u32>>(words);
    capacity = words;
  }
  return kept->get();
}

// Where one operand's packed micro-panels are: for each matrix, KC block by KC block, panel by
// panel; micro-panel p of KC block q holds kp(q) pairs of k, `width` words each.
struct PackedOperand {
  u32* data;
  i64 panels, width, K;
  i64 matrix_words() const { return (panels * width * pairs(K) + 15) / 16 * 16; }  // whole cache lines
  u32* block(i64 matrix, i64 q) const { return data + matrix * matrix_words() + q * (kKC / 2) * panels * width; }
  u32* panel(i64 matrix, i64 q, i64 p) const { return block(matrix, q) + p * pairs(std::min(kKC, K - q * kKC)) * width; }
};

// Loop 2 and loop 1: rows [i0, i0 + rows) of C, columns [n0, n1), from one packed A
// micro-panel and the packed B panels of one KC block (the whole matrix's: `bp`), kp pairs.
template <class Src>
void compute_row(const Path<Src>& path, float* c, i64 N, const u32* a_panel, const u32* bp, i64 kp, bool load_c, i64 i0,
                 i64 rows, i64 n0, i64 n1) {
  for (i64 j0 = n0; j0 < n1; j0 += kNR) {  // loop 2
    const i64 cols = std::min(kNR, n1 - j0);
    const u32* b_panel = bp + j0 / kNR * kp * kNR;
    float* tile = c + i0 * N + j0;
    if (rows == kMR && cols == kNR) {
      path.micro_kernel(kp, a_panel, b_panel, tile, N, load_c);
      continue;
    }
    alignas(64) float edge[kMR * kNR] = {};  // a ragged tile: through a padded temporary
    if (load_c)
      for (i64 i = 0; i < rows; ++i) std::memcpy(edge + i * kNR, tile + i * N, cols * sizeof(float));
    path.micro_kernel(kp, a_panel, b_panel, edge, kNR, load_c);
    for (i64 i = 0; i < rows; ++i) std::memcpy(tile + i * N, edge + i * kNR, cols * sizeof(float));
  }
}

template <class Src>
void matmul_bf16(const Path<Src>& path, float* out, const Src* a, const Src* b, const MatmulShape& s) {
  if (gemm_trivial(out, s)) return;
  // The job grid, exactly as in gemm_blocked.cpp: it decides who computes a tile, never how.
  const GemmGrid grid(s, kMR, kNR, kNC);
  const i64 M = s.M, N = s.N, K = s.K, k_blocks = (K + kKC - 1) / kKC;
  // A batch operand with stride 0 is one matrix shared by all: packed once.
  const i64 a_mats = s.stride_a == 0 ? 1 : s.batch, b_mats = s.stride_b == 0 ? 1 : s.batch;
  std::unique_ptr<AlignedBuffer<u32>> holder;
  PackedOperand pa{nullptr, grid.m_panels, kMR, K}, pb{nullptr, grid.n_panels, kNR, K};
  pa.data = packing_buffer(a_mats * pa.matrix_words() + b_mats * pb.matrix_words(), holder);
  pb.data = pa.data + a_mats * pa.matrix_words();

  // Packing unit: one micro-panel of one KC block, A's first, then B's. Its state: 0 not
  // packed, 1 being packed, 2 ready.
  const i64 a_units = a_mats * grid.m_panels * k_blocks, units = a_units + b_mats * grid.n_panels * k_blocks;
  const std::unique_ptr<std::atomic<std::uint8_t>[]> state(new std::atomic<std::uint8_t>[units]());
  // Makes sure unit (matrix, panel, q) of A or B is packed: packs it, or waits for the thread
  // that is packing it.
  auto ready = [&](bool is_a, i64 mat, i64 panel, i64 q) {
    const i64 u = (is_a ? 0 : a_units) + ((mat * (is_a ? grid.m_panels : grid.n_panels)) + panel) * k_blocks + q;
    if (state[u].load(std::memory_order_acquire) == 2) return;
    std::uint8_t expected = 0;
    if (state[u].compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
      const i64 pc = q * kKC, kc = std::min(kKC, K - pc);
      if (is_a) {
        const i64 i0 = panel * kMR;
        path.pack_a(pa.panel(mat, q, panel), a + mat * s.stride_a, M, K, s.trans_a, i0, std::min(kMR, M - i0), pc, kc);
      } else {
        const i64 j0 = panel * kNR;
        path.pack_b(pb.panel(mat, q, panel), b + mat * s.stride_b, N, K, s.trans_b, j0, std::min(kNR, N - j0), pc,
                    kc);
      }
      state[u].store(2, std::memory_order_release);
      return;
    }
    while (state[u].load(std::memory_order_acquire) != 2) std::this_thread::yield();
  };

  grid.run([&](const GemmTile& t, int) {
    const i64 a_mat = s.stride_a == 0 ? 0 : t.bi, b_mat = s.stride_b == 0 ? 0 : t.bi;
    float* c = out + t.bi * s.stride_out;
    for (i64 q = 0; q < k_blocks; ++q) {  // loop 4
      const i64 kp = pairs(std::min(kKC, K - q * kKC));
      const bool load_c = s.accumulate || q > 0;
      for (i64 j0 = t.n0; j0 < t.n1; j0 += kNR) ready(false, b_mat, j0 / kNR, q);  // the block's B
      for (i64 i0 = t.m0; i0 < t.m1; i0 += kMR) {  // loop 3
        ready(true, a_mat, i0 / kMR, q);
        compute_row(path, c, N, pa.panel(a_mat, q, i0 / kMR), pb.block(b_mat, q), kp, load_c, i0,
                    std::min(kMR, t.m1 - i0), t.n0, t.n1);
      }
    }
  });
}

}  // namespace

void matmul_bf16_plain(float* out, const float* a, const float* b, const MatmulShape& s, Stream) {
  matmul_bf16<float>({&pack_a_plain<float>, &pack_b_plain<float>, &micro_kernel_plain}, out, a, b, s);
}

bool cpu_has_avx512_bf16() {
#ifdef BRRR_HAVE_X86
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

void matmul_bf16_avx512(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
#ifdef BRRR_HAVE_X86
  (void)stream;
  matmul_bf16<float>({&pack_a_avx512<float>, &pack_b_avx512<float>, &micro_kernel_dpbf16}, out, a, b, s);
#else
  matmul_bf16_plain(out, a, b, s, stream);  // never registered where it would run this
#endif
}

// On bf16 data (chapter 18, section 10): the same GEMM, its packing reading bf16 where the
// float32 one reads and rounds float32, so no widened copy of a or b is made; the bits are the
// float32 path's on the widened operands (a bf16 value rounds to itself).
void matmul_bf16_data_plain(float* out, const bf16* a, const bf16* b, const MatmulShape& s, Stream) {
  matmul_bf16<bf16>({&pack_a_plain<bf16>, &pack_b_plain<bf16>, &micro_kernel_plain}, out, a, b, s);
}

void matmul_bf16_data_avx512(float* out, const bf16* a, const bf16* b, const MatmulShape& s, Stream stream) {
#ifdef BRRR_HAVE_X86
  (void)stream;
  matmul_bf16<bf16>({&pack_a_avx512<bf16>, &pack_b_avx512<bf16>, &micro_kernel_dpbf16}, out, a, b, s);
#else
  matmul_bf16_data_plain(out, a, b, s, stream);
#endif
}

}  // namespace brrr::kernels::cpu
