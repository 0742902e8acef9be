// kernels/cpu/gemm_blocked.cpp: float32 matmul written from scratch, BLIS-style, for AVX-512.
// Chapter 04 (matmul and the CPU backend). Read before: matmul.cpp (the naive and Eigen
// variants; "blocked" replaces "eigen" as the default where the CPU has AVX-512).
// Read next: nn.cpp.
//
// C (M, N) = A (M, K) @ B (K, N), row-major. The work is 2*M*N*K floating point operations,
// and one Zen 4 core does 32 per cycle: one 16-lane fused multiply-add (FMA) per cycle, 2 FLOPs
// a lane (measured: 117 GFLOP/s at 3.65 GHz). Memory cannot deliver an operand per FLOP, so
// every number loaded must be used many times: from registers first, then from L1, then L2.
// GEMM is five nested loops around a small "micro-kernel"; each loop keeps one block of one
// operand in one level of the memory hierarchy:
//
//   loop 5  for jc in N, step NC:       a block of C at most NC wide: a job for one thread
//   loop 4    for pc in K, step KC:     pack B[pc:pc+KC, jc:jc+NC] -> Bp, 512 KiB: lives in L2
//   loop 3      for ir in M, step MR:   pack A[ir:ir+MR, pc:pc+KC] -> Ap, 12 KiB: lives in L1
//   loop 2        for jr in NC, step NR:  one MR x NR tile of C
//   loop 1          for k in KC:          the micro-kernel: tile += A(:, k) * B(k, :)
//
// The micro-kernel (section 2) keeps a 12 x 32 tile of C in 24 of the 32 zmm registers
// (a row is two registers of 16 floats). Each step k loads one row of B's micro-panel (2
// loads), broadcasts 12 numbers of A (12 loads) and does 24 FMAs: 768 FLOPs for 14 loads,
// which the core's 2-3 loads per cycle sustain easily, and 24 independent accumulators
// cover the FMA latency (4 cycles, so at least 4 must be in flight).
//
// Packing (section 3) copies blocks of A and B into the order the micro-kernel reads them:
// B as NR-wide micro-panels (kc rows of 32 floats), A as MR-tall ones (kc columns of 12). The
// kernel then streams both with unit stride whatever the layout, so the four cases trans_a /
// trans_b differ only in the packing, and ragged edges are padded with zeros.
//
// The caches, per Zen 4 core (32 KiB L1d, 1 MiB L2): the packed B block, KC x NC = 256 x 512
// floats = 512 KiB, stays in L2 while every A micro-panel of the block sweeps it; each A
// micro-panel (12 x 256 floats = 12 KiB) is used against all NC/NR = 16 B micro-panels from
// L1. (BLIS and OpenBLAS also block M, packing MC x KC of A for L2; with the roles above
// there is no need: MC = MR, and a thread packs one A micro-panel just before using it.)
//
// Reproducibility. Each element of C is one chain of FMAs, c = fma(a[i,k], b[k,j], c) for
// k = 0, 1, ..., K-1 in order, starting from 0 (or from C when accumulating): between KC
// blocks the chain is stored to C and loaded back, which is exact. No blocking choice and no
// split of the blocks among threads changes that chain (threads never split the K loop,
// edge tiles run the same kernel through a padded temporary), so the result is bitwise
// identical for any thread count (tests/core/test_matmul_blocked.cpp checks 1 against 2).
//
// Measured (docs/measurements.md, "CPU matmul (issue 2)"): 101 GFLOP/s on one core at 1024^3
// and 2048^3 (87% of the FMA peak) and 205-207 on two: level with NumPy on OpenBLAS in the
// same run (0.98-1.04x), and 1.26-1.36x "eigen". The notes in each section say what each
// choice bought.

// GCC 12 warns inside its own AVX-512 shuffle intrinsics, where they are inlined into this
// file's micro-kernels: a false positive, GCC bug 105593 (as for matmul.cpp in
// kernels/CMakeLists.txt). A push/pop around the include would not reach the inlined code.
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gemm_grid.h"

#ifdef __AVX512F__  // the whole file: elsewhere (arm64, x86-64 without AVX-512) "eigen" is matmul's default
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

namespace brrr::kernels::cpu {

namespace {

using i64 = std::int64_t;

// ----------------------------------------------------------------------------------------
// 1. Blocking parameters, measured on Zen 4 at 1024^3 and 2048^3, one thread: KC = 128 is
// 3-5% slower (C is loaded and stored twice as often), 384 the same as 256; NC = 256 is 2%
// slower at 2048 (A is packed N/NC times), 768 the same as 512. MR = 8 measured the same as
// 12 (16 accumulators already hide the latency), MR = 14 (28 accumulators) 2% slower.

constexpr i64 kMR = 12;   // rows of the C tile held in registers
constexpr i64 kNR = 32;   // its columns: two zmm registers of 16 floats
constexpr i64 kKC = 256;  // depth of the packed blocks: the A micro-panel is 12 KiB (L1)
constexpr i64 kNC = 512;  // width of the packed B block: 256 x 512 floats = 512 KiB (L2)
static_assert(kNR == 32 && kNC % kNR == 0, "the micro-kernel is written for two zmm columns");

// ----------------------------------------------------------------------------------------
// 2. The micro-kernel: C[0:MR, 0:NR] (+)= Ap (MR x kc, stored k-major) @ Bp (kc x NR).
// `load_c` starts the accumulators from C (accumulating, or a later KC block) instead of 0,
// so each element is a single chain of FMAs from its first k to its last. Written with
// intrinsics, the compiler keeps acc0/acc1 in registers (no spills: check with -S) and folds
// nothing away. The loop over k needs no further unrolling: its 4 bookkeeping instructions
// issue in the shadow of the 24 FMAs, which take 24 cycles whatever else runs beside them.

inline void micro_kernel(i64 kc, const float* __restrict ap, const float* __restrict bp, float* __restrict c,
                         i64 ldc, bool load_c) {
  __m512 acc0[kMR], acc1[kMR];  // column halves 0-15 and 16-31 of each row: 24 registers
#pragma GCC unroll 12
  for (int i = 0; i < kMR; ++i) {
    acc0[i] = load_c ? _mm512_loadu_ps(c + i * ldc) : _mm512_setzero_ps();
    acc1[i] = load_c ? _mm512_loadu_ps(c + i * ldc + 16) : _mm512_setzero_ps();
  }
  for (i64 k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(bp), b1 = _mm512_load_ps(bp + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kMR; ++i) {
      const __m512 a = _mm512_set1_ps(ap[i]);
      acc0[i] = _mm512_fmadd_ps(a, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(a, b1, acc1[i]);
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

// A tile on the ragged edge (fewer than MR rows or NR columns of C left) goes through a
// zero-padded MR x NR temporary, so it runs the very same kernel as a full tile.
inline void edge_tile(i64 kc, const float* ap, const float* bp, float* c, i64 ldc, i64 rows, i64 cols,
                      bool load_c) {
  alignas(64) float tile[kMR * kNR] = {};
  if (load_c)
    for (i64 i = 0; i < rows; ++i) std::memcpy(tile + i * kNR, c + i * ldc, cols * sizeof(float));
  micro_kernel(kc, ap, bp, tile, kNR, load_c);
  for (i64 i = 0; i < rows; ++i) std::memcpy(c + i * ldc, tile + i * kNR, cols * sizeof(float));
}

// ----------------------------------------------------------------------------------------
// 3. Packing. A(i, k) and B(k, j) are read through the layouts the op passed (trans_a: A is
// stored (K, M); trans_b: B is stored (N, K)) and written in the order the kernel reads.
// Two of the four cases are plain copies of rows; the other two are transposes, and the
// commonest, A not transposed, is done 16 x 16 at a time in registers: a plain scalar loop
// (ap[k * MR + i] = a[i * K + k]) took 13% of the time at 2048^3, and the whole GEMM is 5%
// faster at 1024^3 and 11% at 2048^3 with the vector transpose below.

// Transposes a 16 x 16 block held in 16 registers (row i in r[i]) so that r[j] holds column j:
// the classic three rounds of shuffles (pairs of floats, pairs of pairs, 128-bit lanes).
inline void transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);  // per 128-bit lane: r0[0] r1[0] r0[1] r1[1]
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // per lane l: column 4l + m of rows i..i+3, in r[i + m]
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  for (int m = 0; m < 4; ++m) {  // gather lane l of r[m], r[4+m], r[8+m], r[12+m]: column 4l + m
    const __m512 u0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), u1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xdd);
    const __m512 u2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88), u3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xdd);
    t[m] = _mm512_shuffle_f32x4(u0, u2, 0x88);
    t[4 + m] = _mm512_shuffle_f32x4(u1, u3, 0x88);
    t[8 + m] = _mm512_shuffle_f32x4(u0, u2, 0xdd);
    t[12 + m] = _mm512_shuffle_f32x4(u1, u3, 0xdd);
  }
  for (int i = 0; i < 16; ++i) r[i] = t[i];
}

// dst[k * ld + i] = src[i * src_ld + k] for k < kc and i < width (at most 16), with zeros for
// the rows i >= rows that do not exist: 16 columns of src at a time, through transpose16x16.
void pack_transposed(float* dst, i64 ld, i64 width, const float* src, i64 src_ld, i64 rows, i64 kc) {
  const __mmask16 store = static_cast<__mmask16>((1u << width) - 1);
  for (i64 k0 = 0; k0 < kc; k0 += 16) {
    const i64 n = std::min<i64>(16, kc - k0);
    const __mmask16 load = static_cast<__mmask16>((1u << n) - 1);
    __m512 r[16];
    for (i64 i = 0; i < 16; ++i) r[i] = i < rows ? _mm512_maskz_loadu_ps(load, src + i * src_ld + k0) : _mm512_setzero_ps();
    transpose16x16(r);
    for (i64 k = 0; k < n; ++k) _mm512_mask_storeu_ps(dst + (k0 + k) * ld, store, r[k]);
  }
}

// One A micro-panel: rows [i0, i0 + rows) x columns [p0, p0 + kc) -> ap[k * MR + i].
void pack_a(float* ap, const float* a, i64 M, i64 K, bool trans_a, i64 i0, i64 rows, i64 p0, i64 kc) {
  if (trans_a) {  // A(i, k) = a[k * M + i]: each k is MR contiguous floats, one masked copy
    const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
    for (i64 k = 0; k < kc; ++k)
      _mm512_mask_storeu_ps(ap + k * kMR, 0xfff, _mm512_maskz_loadu_ps(mask, a + (p0 + k) * M + i0));
    return;
  }
  pack_transposed(ap, kMR, kMR, a + i0 * K + p0, K, rows, kc);  // A(i, k) = a[i * K + k]
}

// One B micro-panel: rows [p0, p0 + kc) x columns [j0, j0 + cols) -> bp[k * NR + j].
void pack_b(float* bp, const float* b, i64 N, i64 K, bool trans_b, i64 j0, i64 cols, i64 p0, i64 kc) {
  if (!trans_b) {  // B(k, j) = b[k * N + j]: each k is one row of NR contiguous floats
    const std::uint32_t bits = cols >= 32 ? 0xffffffffu : (1u << cols) - 1;
    const __mmask16 lo = static_cast<__mmask16>(bits), hi = static_cast<__mmask16>(bits >> 16);
    for (i64 k = 0; k < kc; ++k) {
      const float* row = b + (p0 + k) * N + j0;
      _mm512_store_ps(bp + k * kNR, _mm512_maskz_loadu_ps(lo, row));
      _mm512_store_ps(bp + k * kNR + 16, _mm512_maskz_loadu_ps(hi, row + 16));
    }
    return;
  }
  // B(k, j) = b[j * K + k]: two transposed halves of 16 columns each.
  const float* src = b + j0 * K + p0;
  pack_transposed(bp, kNR, 16, src, K, std::min<i64>(cols, 16), kc);
  pack_transposed(bp + 16, kNR, 16, src + 16 * K, K, std::max<i64>(cols - 16, 0), kc);
}

// ----------------------------------------------------------------------------------------
// 4. Loops 4 to 1 for one block of C: rows [m0, m1) and columns [n0, n1) of one matrix (at
// most NC columns), over all of K. bp and ap are the calling thread's own packing buffers.
// Software prefetching (the next A micro-panel into L2, the next C tile into L1) was tried
// and gained nothing measurable: the hardware prefetchers follow these streams on their own.

void gemm_block(float* c, const float* a, const float* b, const MatmulShape& s, i64 m0, i64 m1, i64 n0, i64 n1,
                float* bp, float* ap) {
  const i64 M = s.M, N = s.N, K = s.K;
  const i64 n_panels = (n1 - n0 + kNR - 1) / kNR;
  for (i64 pc = 0; pc < K; pc += kKC) {  // loop 4
    const i64 kc = std::min(kKC, K - pc);
    const bool load_c = s.accumulate || pc > 0;
    for (i64 p = 0; p < n_panels; ++p)
      pack_b(bp + p * kc * kNR, b, N, K, s.trans_b, n0 + p * kNR, std::min(kNR, n1 - n0 - p * kNR), pc, kc);
    for (i64 i0 = m0; i0 < m1; i0 += kMR) {  // loop 3
      const i64 rows = std::min(kMR, m1 - i0);
      pack_a(ap, a, M, K, s.trans_a, i0, rows, pc, kc);
      for (i64 p = 0; p < n_panels; ++p) {  // loop 2
        const i64 j0 = n0 + p * kNR, cols = std::min(kNR, n1 - j0);
        float* tile = c + i0 * N + j0;
        if (rows == kMR && cols == kNR) micro_kernel(kc, ap, bp + p * kc * kNR, tile, N, load_c);
        else edge_tile(kc, ap, bp + p * kc * kNR, tile, N, rows, cols, load_c);
      }
    }
  }
}

}  // namespace

// ----------------------------------------------------------------------------------------
// 5. Loop 5 and the threads. C (every matrix of the batch) is cut into a grid of blocks at
// most NC columns wide, and each block is an independent job: its thread packs its own B
// and A, so threads never wait for each other. Splitting C along N at NC costs nothing (a
// single thread packs A once per NC columns anyway); only when the blocks do not share out
// evenly are they cut along M too, and then B is packed once per row block.
// The first version shared one packed B block among the threads (BLIS's way: each packs
// part, then all wait at a barrier, twice per KC step). It was as fast on an idle machine,
// but when another process held one of the two cores, every barrier waited for a time
// slice: 30 GFLOP/s at 1024^3 with 2 threads against 104 for this version.

template <>
void matmul_blocked<float>(float* out, const float* a, const float* b, const MatmulShape& s, Stream) {
  if (gemm_trivial(out, s)) return;
  // The grid of jobs (kernels/cpu/gemm_grid.h) decides who computes a tile, never how.
  const GemmGrid grid(s, kMR, kNR, kNC);
  // Each thread's packing buffers: a B block and an A micro-panel, 64-byte aligned.
  const i64 kc = std::min(kKC, s.K), width = grid.block_width();
  const i64 per_thread = (kc * width + kMR * kc + 15) / 16 * 16;
  AlignedBuffer<float> buffers(grid.team * per_thread);
  grid.run([&](const GemmTile& t, int tid) {
    float* bp = buffers.get() + tid * per_thread;
    gemm_block(out + t.bi * s.stride_out, a + t.bi * s.stride_a, b + t.bi * s.stride_b, s, t.m0, t.m1, t.n0, t.n1,
               bp, bp + kc * width);
  });
}

}  // namespace brrr::kernels::cpu

#endif  // __AVX512F__
