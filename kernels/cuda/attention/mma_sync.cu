// kernels/cuda/attention/mma_sync.cu: causal attention on Ampere's warp-level tensor cores
// (mma.sync, ldmatrix, cp.async; kernels/cuda/simt_tensor_cores.h), forward and backward:
// variant 3 (float32 in memory, q, k, v rounded to bf16 as they load: the slots autocast calls)
// and variant 4 (bf16 in memory, cp.async double buffering).
// Chapter 15 (flash attention) and 18 (mixed precision). Read before:
// kernels/cuda/attention/cuda_cores.cu (variants 1 and 2: the math and the tiles),
// kernels/cuda/matmul/mma_sync.cu (the same instructions in a GEMM).
// Read next: framework/src/ops_attention.cpp (the op that calls these through the registry).
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/common.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_tensor_cores.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// =============================================================================================
// Variant 3 forward: flash attention on tensor cores, bfloat16 inputs
//
// Variant 2 spends its time in two tile products, q k^T and p v, on the SIMT float32 units
// (about 67 TFLOP/s on an H100 SXM by the datasheet; cuBLAS's SGEMM measured 51.7 on ours).
// Tensor cores do a 16 x 8 x 16 product per warp and
// instruction, at up to 990 TFLOP/s in bfloat16. So here q, k and v are rounded to bfloat16
// as they are loaded (8 bits of mantissa: scores and outputs carry about 1e-2 relative
// error, which is why this is not the default) and the products run on mma.sync.m16n8k16,
// with float32 accumulation; the softmax stays in float32.
//
// A block is 4 warps and a 64-row query tile; each warp owns 16 query rows and keeps their q
// fragments in registers for the whole kernel. Per 64-key tile, a warp computes its 16 x 64
// scores as 8 m16n8 accumulators, does the online softmax on them in registers (the 4 lanes
// of a quad share a row), and multiplies by v: the accumulator layout of two adjacent 16 x 8
// score tiles is exactly the layout of a 16 x 16 A operand, so p goes from accumulator to
// operand without shared memory (FlashAttention-2's trick). The fragments of q, k and v come
// from shared memory by ldmatrix (chapter 14): four 8 x 8 matrices a warp and instruction, and
// for v, stored as it comes (keys x hs), ldmatrix .trans hands out the columns a B fragment
// needs, where an earlier version stored v transposed, with 4-way bank conflicts. Rows are
// padded by 8 bf16 (16 bytes), so the 8 rows an ldmatrix reads fall in different banks.
//
// Fragment layouts of m16n8k16 (lane = 4 g + t; PTX ISA, "Matrix fragments for mma.m16n8k16"):
//   A (16 x 16, row-major): a0 = A[g][2t, 2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   B (16 x 8, by column):  b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g]
//   C (16 x 8, float):      c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]
// Each 32-bit register holds two bf16, the lower index in the lower half.
//
// It runs in the emulator too: mma_m16n8k16_bf16 is simt.h's spelling of mma.sync (inline PTX
// under nvcc, a warp-collective operation under g++, chapter 10).
//
// Candid notes: the conversion happens on every load (k and v once per query tile); loads go
// through registers (to round to bf16), so there is no cp.async double buffering until the
// inputs are bf16 in memory. It has not been tuned against variant 2 on an H100 yet (the
// figures below are from the version before ldmatrix).
//
// Measured on an H100 80GB HBM3, 2026-11-23 (`scripts/gpu.sh`, docs/measurements.md). The
// lab checks it against the float64 reference computed on its inputs rounded to bfloat16 (the
// rounding of the inputs is the caller's choice of dtype, not the kernel's error). At
// (384, 256, 64): 0.0964 ms, 33.41 TFLOP/s, 2.9 times variant 2 (0.2811 ms), relative error
// 2.3e-2 within the lab's 3e-2. At T = 1024 it still fails that check: 13 of 25,165,824
// outputs exceed 3e-2 (the largest 3.7e-2), from the kernel's own rounding of the softmax
// weights p to bfloat16 before p v; so it was not timed there. It stays as it is: the
// tensor-core issue's bf16 flash attention replaces it.

constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = 32 * kMmaWarps;
constexpr std::int64_t kMmaMaxHeadSize = 128;  // its eligibility rule: tiles for 32, 64, 128

// Two floats as two bf16 in one 32-bit register (lo in the lower half).
__device__ inline unsigned pack_bf16(float lo, float hi) {
  const unsigned lo_bits = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const unsigned hi_bits = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return lo_bits | (hi_bits << 16);
}

// A lane's two neighbours (d, d + 1) of an accumulator row, stored into `row` (hs wide): one
// 8-byte store where the matrix allows it (`pairs`: hs even and the matrix 8-byte aligned, so
// every even d is), which fills the 8 sectors of a warp's request where two 4-byte stores
// would each use half of them; else each value inside hs on its own.
__device__ inline void store_two(float* row, int d, int hs, float a, float b, bool pairs) {
  if (pairs && d + 1 < hs) {
    *reinterpret_cast<float2*>(row + d) = make_float2(a, b);
  } else {
    if (d < hs) row[d] = a;
    if (d + 1 < hs) row[d + 1] = b;
  }
}
__device__ inline bool pairs_fit(const float* matrix, int hs) {
  return hs % 2 == 0 && reinterpret_cast<std::uintptr_t>(matrix) % 8 == 0;
}

// d (16 x 8) += a (16 x 16) b (16 x 8): bf16 operands, float32 accumulators (simt.h).
__device__ inline void mma_bf16_m16n8k16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  mma_m16n8k16_bf16(d, a, b, d);
}

// The pieces of the tensor-core flash attention that variants 3 and 4, forward and backward,
// share. A tile's rows are padded by 8 bf16 (ld = HS + 8); E, its element type, is one of the
// two 16-bit forms of bf16 (variant 3 rounds float32 into unsigned short, variant 4 copies
// __nv_bfloat16 as it is).
namespace {
// acc (16 x 8 NT) += A B: A = rows a_row0 .. a_row0 + 15 of a_tile (16, HS deep), B's n-th
// column = row n of b_tile (stored (n, k)); fragments by ldmatrix, as the forward's q k^T.
template <int HS, int NT, class E>
__device__ inline void mma_rows_ldmatrix(float (&acc)[NT][4], const E* a_tile, int a_row0, const E* b_tile,
                                         int lane) {
  constexpr int ld = HS + 8;
  const int piece = lane / 8, piece_row = lane % 8;
  const int a_row = piece_row + 8 * (piece % 2), a_col = 8 * (piece / 2);
  const int b_row = piece_row + 8 * (piece / 2), b_col = 8 * (piece % 2);
  for (int st = 0; st < HS / 16; ++st) {
    unsigned a[4];
    ldmatrix_x4(a, &a_tile[(a_row0 + a_row) * ld + 16 * st + a_col]);
    for (int n = 0; n < NT; n += 2) {
      unsigned r[4];
      ldmatrix_x4(r, &b_tile[(8 * n + b_row) * ld + 16 * st + b_col]);
      const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      mma_bf16_m16n8k16(acc[n], a, b0);
      mma_bf16_m16n8k16(acc[n + 1], a, b1);
    }
  }
}

// The same product with A's fragments already in registers (the forward's q, loaded once for
// every key tile): s (16 x 8 NT) = q k^T, k's rows the B operand's columns. One ldmatrix_x4 of k
// (stored (n, k)) gives the B fragments of two n-tiles: its four 8 x 8 matrices are keys 0-7
// with d 0-7, keys 0-7 with d 8-15, keys 8-15 with d 0-7, keys 8-15 with d 8-15.
template <int HS, int NT, class E>
__device__ inline void mma_fragments_rows(float (&acc)[NT][4], const unsigned (&a)[HS / 16][4], const E* b_tile,
                                          int lane) {
  constexpr int ld = HS + 8;
  const int piece = lane / 8, piece_row = lane % 8;
  const int b_row = piece_row + 8 * (piece / 2), b_col = 8 * (piece % 2);
  for (int n = 0; n < NT; n += 2)
    for (int st = 0; st < HS / 16; ++st) {
      unsigned r[4];  // the b fragments of n-tiles n and n + 1
      ldmatrix_x4(r, &b_tile[(8 * n + b_row) * ld + 16 * st + b_col]);
      const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      mma_bf16_m16n8k16(acc[n], a[st], b0);
      mma_bf16_m16n8k16(acc[n + 1], a[st], b1);
    }
}

// acc (16 x HS) += X B: X (16 x COLS) in accumulator tiles (the A operand, FA-2's trick), B
// (COLS, HS) stored row-major in b_tile; its fragments by ldmatrix .trans, as the forward's p v.
template <int COLS, int HS, class E>
__device__ inline void mma_accumulators_trans(float (&acc)[HS / 8][4], const float (&x)[COLS / 8][4],
                                              const E* b_tile, int lane) {
  constexpr int ld = HS + 8;
  const int piece = lane / 8, piece_row = lane % 8;
  const int b_row = piece_row + 8 * (piece % 2), b_col = 8 * (piece / 2);
  for (int kc = 0; kc < COLS / 16; ++kc) {
    // x's accumulators 2 kc and 2 kc + 1 are the A operand for its columns 16 kc .. 16 kc + 15.
    const unsigned a[4] = {pack_bf16(x[2 * kc][0], x[2 * kc][1]), pack_bf16(x[2 * kc][2], x[2 * kc][3]),
                           pack_bf16(x[2 * kc + 1][0], x[2 * kc + 1][1]),
                           pack_bf16(x[2 * kc + 1][2], x[2 * kc + 1][3])};
    for (int n = 0; n < HS / 8; n += 2) {
      unsigned r[4];
      ldmatrix_x4_trans(r, &b_tile[(16 * kc + b_row) * ld + 8 * n + b_col]);
      const unsigned b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
      mma_bf16_m16n8k16(acc[n], a, b0);
      mma_bf16_m16n8k16(acc[n + 1], a, b1);
    }
  }
}

// The forward's online softmax over one key tile (keys k0 .. k0 + 63), in base 2: scale_log2 =
// scale * log2(e), so exp(x) = exp2(x * log2(e)). A lane holds rows row[0] (accumulator values
// 0, 1) and row[1] (2, 3), keys 8 n + 2 t and + 1 of each n-tile. s: the tile's scores, turned
// into p = exp2(s - m'); m, l: the rows' running max (log2 units) and sum; o, rescaled.
template <int OUT_TILES>
__device__ inline void online_softmax(float (&s)[8][4], float (&m)[2], float (&l)[2], float (&o)[OUT_TILES][4],
                                      const int (&row)[2], int k0, int T_len, float scale_log2, int t) {
  for (int h = 0; h < 2; ++h) {
    float tile_max = -INFINITY;
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 2; ++e) {
        const int j = k0 + 8 * n + 2 * t + e;
        float& x = s[n][2 * h + e];
        x = j <= row[h] && j < T_len ? x * scale_log2 : -INFINITY;
        tile_max = fmaxf(tile_max, x);
      }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));  // the quad shares the row
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float m_new = fmaxf(m[h], tile_max);
    const float correction = exp2f(m[h] - m_new);
    m[h] = m_new;
    l[h] *= correction;
    for (int n = 0; n < OUT_TILES; ++n) {
      o[n][2 * h] *= correction;
      o[n][2 * h + 1] *= correction;
    }
    for (int n = 0; n < 8; ++n)
      for (int e = 0; e < 2; ++e) {
        float& x = s[n][2 * h + e];
        x = exp2f(x - m_new);
        l[h] += x;
      }
  }
}

// A row's total over the quad of lanes that hold it.
__device__ inline float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
}  // namespace

// 32 bits (two bf16) at element `index` of a bf16 array in shared memory; index is even.
__device__ inline unsigned load_pair(const unsigned short* base, int index) {
  return *reinterpret_cast<const unsigned*>(base + index);
}

// The rows of a tile are padded by 8 bf16 (16 bytes): the 8 rows a fragment load touches
// then start in different banks.
template <int HS>
constexpr std::size_t mma_shared_bytes() {
  return 3 * kTile * (HS + 8) * sizeof(unsigned short);
}

template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_forward_bf16_mma_kernel(float* out, float* lse, const float* q, const float* k, const float* v,
                                      int T_len, int hs, float scale_log2) {
  constexpr int ld = HS + 8;        // q, k and v tiles (64, HS), bf16
  constexpr int kSteps = HS / 16;   // k-steps of q k^T
  constexpr int kOutTiles = HS / 8; // n-tiles of the output
  BRRR_DYNAMIC_SHARED(unsigned short, smem);
  unsigned short* q_tile = smem;
  unsigned short* k_tile = q_tile + kTile * ld;
  unsigned short* v_tile = k_tile + kTile * ld;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // The row this lane names to ldmatrix_x4: row lane % 8 of matrix lane / 8, the matrices
  // being (rows 0-7, columns 0-7), (rows 8-15, columns 0-7), (rows 0-7, 8-15), (rows 8-15, 8-15)
  // of a 16 x 16 piece of q: its A fragment. (k's and v's B fragments: mma_fragments_rows and
  // mma_accumulators_trans above.)
  const int piece = lane / 8, a_row = lane % 8 + 8 * (piece % 2), a_col = 8 * (piece / 2);
  const int query_tile = gridDim.y - 1 - blockIdx.y;
  const int q0 = query_tile * kTile;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * T_len * hs;

  for (int e = threadIdx.x; e < kTile * HS; e += kMmaThreads) {
    const int r = e / HS, d = e % HS;
    const float x = q0 + r < T_len && d < hs ? q[head + static_cast<std::int64_t>(q0 + r) * hs + d] : 0.0f;
    q_tile[r * ld + d] = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
  __syncthreads();
  const int r0 = warp * 16;  // this warp's rows of the tile
  unsigned q_frag[kSteps][4];
  for (int s = 0; s < kSteps; ++s) ldmatrix_x4(q_frag[s], &q_tile[(r0 + a_row) * ld + 16 * s + a_col]);

  // Rows g and g + 8 of the warp's 16: running max (in log2 units), partial sum, output.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kOutTiles][4] = {};
  const int row[2] = {q0 + r0 + g, q0 + r0 + g + 8};

  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile;
    __syncthreads();  // everyone is done with the previous k and v tiles
    for (int e = threadIdx.x; e < kTile * HS; e += kMmaThreads) {
      const int r = e / HS, d = e % HS;
      const bool inside = k0 + r < T_len && d < hs;
      const std::int64_t at = head + static_cast<std::int64_t>(k0 + r) * hs + d;
      k_tile[r * ld + d] = __bfloat16_as_ushort(__float2bfloat16_rn(inside ? k[at] : 0.0f));
      v_tile[r * ld + d] = __bfloat16_as_ushort(__float2bfloat16_rn(inside ? v[at] : 0.0f));
    }
    __syncthreads();

    float s[8][4] = {};  // s (16 x 64) = q k^T as 8 accumulator tiles of 16 x 8
    mma_fragments_rows<HS, 8>(s, q_frag, k_tile, lane);
    online_softmax(s, m, l, o, row, k0, T_len, scale_log2, t);
    mma_accumulators_trans<kTile, HS>(o, s, v_tile, lane);  // o += p v
  }

  for (int h = 0; h < 2; ++h) {
    const float row_l = quad_sum(l[h]);
    if (row[h] >= T_len) continue;
    float* out_row = out + head + static_cast<std::int64_t>(row[h]) * hs;
    const bool pairs = pairs_fit(out, hs);
    for (int n = 0; n < kOutTiles; ++n)
      store_two(out_row, 8 * n + 2 * t, hs, o[n][2 * h] / row_l, o[n][2 * h + 1] / row_l, pairs);
    // lse in natural log units: (m + log2(l)) * ln(2).
    if (t == 0) lse[blockIdx.x * static_cast<std::int64_t>(T_len) + row[h]] = (m[h] + log2f(row_l)) * 0.69314718f;
  }
}

template <int HS>
void launch_forward_bf16_mma(float* out, float* lse, const float* q, const float* k, const float* v, std::int64_t BH,
                             std::int64_t T_len, std::int64_t hs, float scale, Stream stream) {
  const dim3 grid(static_cast<unsigned>(BH), static_cast<unsigned>(ceil_div(T_len, kTile)));
  BRRR_LAUNCH(attention_forward_bf16_mma_kernel<HS>, grid, kMmaThreads, mma_shared_bytes<HS>(), stream, out, lse, q,
              k, v, static_cast<int>(T_len), static_cast<int>(hs), scale * 1.44269504f);
}

void attention_forward_bf16_mma(float* out, float* lse, const float* q, const float* k, const float* v,
                                const AttentionShape& shape, Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  check_sizes("attention_forward", BH, T_len, hs);
  check_head_size("attention_forward bf16_mma", hs, kMmaMaxHeadSize);
  if (BH == 0 || T_len == 0) return;
  BRRR_CHECK(BH <= INT32_MAX && ceil_div(T_len, kTile) <= 65535, "attention_forward: BH = ", BH, ", T = ", T_len,
             " is more blocks than a grid holds");
  switch (padded_head_size(hs)) {
    case 32: return launch_forward_bf16_mma<32>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
    case 64: return launch_forward_bf16_mma<64>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
    default: return launch_forward_bf16_mma<128>(out, lse, q, k, v, BH, T_len, hs, scale, stream);
  }
}

// =============================================================================================
// Variant 3 backward: FlashAttention-2's backward on tensor cores, bfloat16 operands
//
// The backward of variant 2 (the float32 flash backward) with every tile product on
// mma.sync.m16n8k16: q, k, v, dout rounded to bfloat16 as they are loaded, the float32 lse of
// the forward, float32 accumulators. Writing P = exp(S - lse) for the recomputed probabilities
// and D_i = dout_i . out_i,
//   dv = P^T dout,   dP = dout v^T,   dS = P * (dP - D),   dk = scale dS^T q,   dq = scale dS k.
// Two kernels, as in variant 2, so that nothing is summed with atomics (deterministic):
//   - dk, dv: a block owns 64 keys, 16 a warp, and accumulates their dk and dv in registers
//     while it streams the query tiles that see them (32 queries at a time), recomputing the
//     transposed scores S^T = k q^T per tile. Keys are the rows of every product, so S^T, dP^T
//     and dS^T come out of the tensor cores in the accumulator layout, and (FlashAttention-2's
//     trick, as in the forward) two adjacent accumulator tiles are already the A operand of the
//     next product: dv += P^T dout and dk += dS^T q need no trip through shared memory.
//   - dq: a block owns 64 queries, 16 a warp, keeps their q and dout fragments in registers,
//     streams the key tiles up to the diagonal (32 keys at a time), recomputes S and dP, and
//     accumulates dq = dS k in registers.
// The B operands sit in shared memory in the layout that makes a fragment two adjacent bf16
// (one 32-bit load): q and dout row-major (queries, hs) for S^T and dP^T, transposed (hs,
// queries) for dk and dv; k and v row-major for S and dP, k transposed for dq. Rows are padded
// by 8 bf16 (16 bytes). Register budget at hs = 128: 128 accumulators for dk and dv, 32 for the
// two score tiles, addresses and fragments; the query tile is 32 (not 64) to stay under 255.
// D_i = dout_i . out_i is computed once for every row, before the two kernels
// (attention_backward_prepare_kernel), and read beside lse_i.
// Candid notes: loads are plain (no cp.async, no ldmatrix) and the transposed stores conflict in
// the banks, so at head sizes 64 and 128 (the GPTs') the backward rounds q, k, v and dout to
// bf16 once, in the pass that computes D, and runs variant 4's kernels on those copies: the
// same products of the same bf16 values. These kernels serve the other head sizes. The
// forward's p is rounded to bf16 for p v, the backward rounds P^T and dS^T for their products
// the same way. Measured on an H200 (2026-11-27, the lab at (96, 1024, 64)), before D was
// computed once and before the hand-over to variant 4: forward 0.188 ms (68.6 TFLOP/s),
// backward 2.09 ms (docs/measurements.md, "Every CUDA variant").

constexpr int kBwdQueries = 32;  // queries per tile of the dk, dv kernel; keys per tile of dq

template <int HS>
constexpr std::size_t bwd_mma_shared_bytes() {  // 64 rows + 32 rows + two transposed tiles, and D
  return ((kTile + kBwdQueries) * 2 * (HS + 8) + 2 * HS * (kBwdQueries + 8)) * sizeof(unsigned short) +
         2 * kTile * sizeof(float);
}

namespace {
// Rows row0 .. row0 + ROWS - 1 of x (T_len, hs) rounded to bf16, into tile (ROWS, HS + 8) and,
// if transposed is not null, into transposed (HS, ROWS + 8); zeros past T_len and hs.
template <int ROWS, int HS>
__device__ inline void load_rows_bf16(unsigned short* tile, unsigned short* transposed, const float* x, int row0,
                                      int T_len, int hs) {
  for (int e = threadIdx.x; e < ROWS * HS; e += blockDim.x) {
    const int r = e / HS, d = e % HS;
    const float value = row0 + r < T_len && d < hs ? x[static_cast<std::int64_t>(row0 + r) * hs + d] : 0.0f;
    const unsigned short bits = __bfloat16_as_ushort(__float2bfloat16_rn(value));
    tile[r * (HS + 8) + d] = bits;
    if (transposed) transposed[d * (ROWS + 8) + r] = bits;
  }
}

// D_i = dout_i . out_i: attention_backward_prepare_kernel (common.h), shared with wgmma.cu.

// acc (16 x 8 n) += A (16 x 16 per step, fragments from a row-major bf16 tile) B, where B's
// fragment for n-tile n, step s is two adjacent bf16 of row 8 n + g of b_tile (pitch ldb).
template <int STEPS, int NTILES>
__device__ inline void mma_rows(float (&acc)[NTILES][4], const unsigned short* a_tile, int lda, int a_row0,
                                const unsigned short* b_tile, int ldb, int g, int t) {
  for (int s = 0; s < STEPS; ++s) {
    const unsigned a[4] = {load_pair(a_tile, (a_row0 + g) * lda + 16 * s + 2 * t),
                           load_pair(a_tile, (a_row0 + g + 8) * lda + 16 * s + 2 * t),
                           load_pair(a_tile, (a_row0 + g) * lda + 16 * s + 8 + 2 * t),
                           load_pair(a_tile, (a_row0 + g + 8) * lda + 16 * s + 8 + 2 * t)};
    for (int n = 0; n < NTILES; ++n) {
      const unsigned b[2] = {load_pair(b_tile, (8 * n + g) * ldb + 16 * s + 2 * t),
                             load_pair(b_tile, (8 * n + g) * ldb + 16 * s + 8 + 2 * t)};
      mma_bf16_m16n8k16(acc[n], a, b);
    }
  }
}

// acc (16 x HS) += X (16 x COLS, in accumulator tiles: the A operand of COLS / 16 steps, FA-2's
// trick) times the rows of a transposed tile bt (HS, COLS + 8): B fragment = row 8 n + g.
template <int COLS, int HS>
__device__ inline void mma_from_accumulators(float (&acc)[HS / 8][4], const float (&x)[COLS / 8][4],
                                             const unsigned short* bt, int g, int t) {
  for (int kc = 0; kc < COLS / 16; ++kc) {
    const unsigned a[4] = {pack_bf16(x[2 * kc][0], x[2 * kc][1]), pack_bf16(x[2 * kc][2], x[2 * kc][3]),
                           pack_bf16(x[2 * kc + 1][0], x[2 * kc + 1][1]),
                           pack_bf16(x[2 * kc + 1][2], x[2 * kc + 1][3])};
    for (int n = 0; n < HS / 8; ++n) {
      const unsigned b[2] = {load_pair(bt, (8 * n + g) * (COLS + 8) + 16 * kc + 2 * t),
                             load_pair(bt, (8 * n + g) * (COLS + 8) + 16 * kc + 8 + 2 * t)};
      mma_bf16_m16n8k16(acc[n], a, b);
    }
  }
}

// Stores a warp's (16, HS) accumulators times `factor` into rows row0 + g, row0 + g + 8.
template <int HS>
__device__ inline void store_rows(float* x, const float (&acc)[HS / 8][4], int row0, int T_len, int hs, float factor,
                                  int g, int t) {
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    if (row >= T_len) continue;
    float* x_row = x + static_cast<std::int64_t>(row) * hs;
    const bool pairs = pairs_fit(x, hs);
    for (int n = 0; n < HS / 8; ++n)
      store_two(x_row, 8 * n + 2 * t, hs, acc[n][2 * h] * factor, acc[n][2 * h + 1] * factor, pairs);
  }
}
}  // namespace

template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dkdv_bf16_mma_kernel(float* dk, float* dv, const float* dout, const float* q, const float* k,
                                            const float* v, const float* Dg, const float* lse, int T_len, int hs,
                                            float scale) {
  constexpr int ld = HS + 8, ldt = kBwdQueries + 8, kQ = kBwdQueries;
  BRRR_DYNAMIC_SHARED(unsigned short, smem);
  unsigned short* k_tile = smem;                 // (64, HS) keys
  unsigned short* v_tile = k_tile + kTile * ld;  // (64, HS)
  unsigned short* q_tile = v_tile + kTile * ld;  // (32, HS) queries
  unsigned short* do_tile = q_tile + kQ * ld;    // (32, HS)
  unsigned short* qt_tile = do_tile + kQ * ld;   // (HS, 32): q transposed
  unsigned short* dot_tile = qt_tile + HS * ldt; // (HS, 32): dout transposed
  float* D = reinterpret_cast<float*>(dot_tile + HS * ldt);  // (32)
  float* L = D + kTile;                                        // (32): lse
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k0 = blockIdx.y * kTile, key0 = warp * 16;  // this block's keys; this warp's, in the tile
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * T_len * hs;
  load_rows_bf16<kTile, HS>(k_tile, nullptr, k + head, k0, T_len, hs);
  load_rows_bf16<kTile, HS>(v_tile, nullptr, v + head, k0, T_len, hs);
  float dk_acc[HS / 8][4] = {}, dv_acc[HS / 8][4] = {};
  const int key[2] = {k0 + key0 + g, k0 + key0 + g + 8};  // the keys of accumulator rows g, g + 8
  for (int q0 = k0; q0 < T_len; q0 += kQ) {  // the queries that see some of the block's keys
    __syncthreads();  // everyone is done with the previous query tile
    load_rows_bf16<kQ, HS>(q_tile, qt_tile, q + head, q0, T_len, hs);
    load_rows_bf16<kQ, HS>(do_tile, dot_tile, dout + head, q0, T_len, hs);
    for (int r = threadIdx.x; r < kQ; r += blockDim.x) {
      const bool inside = q0 + r < T_len;
      const std::int64_t at = blockIdx.x * static_cast<std::int64_t>(T_len) + q0 + r;
      L[r] = inside ? lse[at] : 0.0f;
      D[r] = inside ? Dg[at] : 0.0f;
    }
    __syncthreads();
    // S^T and dP^T (16 keys x 32 queries): k q^T and v dout^T.
    float p[kQ / 8][4] = {}, ds[kQ / 8][4] = {};
    mma_rows<HS / 16, kQ / 8>(p, k_tile, ld, key0, q_tile, ld, g, t);
    mma_rows<HS / 16, kQ / 8>(ds, v_tile, ld, key0, do_tile, ld, g, t);
    for (int n = 0; n < kQ / 8; ++n)
      for (int i = 0; i < 4; ++i) {
        const int query = 8 * n + 2 * t + i % 2, kk = key[i / 2];
        const bool seen = kk <= q0 + query && q0 + query < T_len;  // causal; rows past T are zero
        p[n][i] = seen ? __expf(p[n][i] * scale - L[query]) : 0.0f;
        ds[n][i] = p[n][i] * (ds[n][i] - D[query]);
      }
    mma_from_accumulators<kQ, HS>(dv_acc, p, dot_tile, g, t);  // dv += P^T dout
    mma_from_accumulators<kQ, HS>(dk_acc, ds, qt_tile, g, t);  // dk += dS^T q
  }
  store_rows<HS>(dk + head, dk_acc, k0 + key0, T_len, hs, scale, g, t);
  store_rows<HS>(dv + head, dv_acc, k0 + key0, T_len, hs, 1.0f, g, t);
}

template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dq_bf16_mma_kernel(float* dq, const float* dout, const float* q, const float* k,
                                          const float* v, const float* D, const float* lse, int T_len, int hs,
                                          float scale) {
  constexpr int ld = HS + 8, kK = kBwdQueries;
  BRRR_DYNAMIC_SHARED(unsigned short, smem);
  unsigned short* q_tile = smem;                 // (64, HS) queries
  unsigned short* do_tile = q_tile + kTile * ld; // (64, HS)
  unsigned short* k_tile = do_tile + kTile * ld; // (32, HS) keys
  unsigned short* v_tile = k_tile + kK * ld;     // (32, HS)
  unsigned short* kt_tile = v_tile + kK * ld;    // (HS, 32): k transposed
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int query_tile = gridDim.y - 1 - blockIdx.y;  // the longest rows first
  const int q0 = query_tile * kTile, row0 = warp * 16;
  const std::int64_t head = static_cast<std::int64_t>(blockIdx.x) * T_len * hs;
  load_rows_bf16<kTile, HS>(q_tile, nullptr, q + head, q0, T_len, hs);
  load_rows_bf16<kTile, HS>(do_tile, nullptr, dout + head, q0, T_len, hs);
  const int row[2] = {q0 + row0 + g, q0 + row0 + g + 8};
  float L[2], Drow[2];
  for (int h = 0; h < 2; ++h) {
    const std::int64_t at = blockIdx.x * static_cast<std::int64_t>(T_len) + row[h];
    L[h] = row[h] < T_len ? lse[at] : 0.0f;
    Drow[h] = row[h] < T_len ? D[at] : 0.0f;
  }
  float dq_acc[HS / 8][4] = {};
  const int key_end = min(T_len, q0 + kTile);  // keys up to the tile's last query
  for (int kb = 0; kb < key_end; kb += kK) {
    __syncthreads();  // everyone is done with the previous key tile
    load_rows_bf16<kK, HS>(k_tile, kt_tile, k + head, kb, T_len, hs);
    load_rows_bf16<kK, HS>(v_tile, nullptr, v + head, kb, T_len, hs);
    __syncthreads();
    // S and dP (16 queries x 32 keys): q k^T and dout v^T.
    float p[kK / 8][4] = {}, ds[kK / 8][4] = {};
    mma_rows<HS / 16, kK / 8>(p, q_tile, ld, row0, k_tile, ld, g, t);
    mma_rows<HS / 16, kK / 8>(ds, do_tile, ld, row0, v_tile, ld, g, t);
    for (int n = 0; n < kK / 8; ++n)
      for (int i = 0; i < 4; ++i) {
        const int key = kb + 8 * n + 2 * t + i % 2, h = i / 2;
        const bool seen = key <= row[h] && row[h] < T_len;
        p[n][i] = seen ? __expf(p[n][i] * scale - L[h]) : 0.0f;
        ds[n][i] = p[n][i] * (ds[n][i] - Drow[h]);
      }
    mma_from_accumulators<kK, HS>(dq_acc, ds, kt_tile, g, t);  // dq += dS k
  }
  store_rows<HS>(dq + head, dq_acc, q0 + row0, T_len, hs, scale, g, t);
}

template <int HS>
void launch_backward_bf16_mma(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                              const float* v, const float* D, const float* lse, std::int64_t BH, std::int64_t T_len,
                              std::int64_t hs, float scale, Stream stream) {
  const dim3 grid(static_cast<unsigned>(BH), static_cast<unsigned>(ceil_div(T_len, kTile)));
  const int T = static_cast<int>(T_len), h = static_cast<int>(hs);
  BRRR_LAUNCH(attention_backward_dkdv_bf16_mma_kernel<HS>, grid, kMmaThreads, bwd_mma_shared_bytes<HS>(), stream, dk,
              dv, dout, q, k, v, D, lse, T, h, scale);
  BRRR_LAUNCH(attention_backward_dq_bf16_mma_kernel<HS>, grid, kMmaThreads, bwd_mma_shared_bytes<HS>(), stream, dq,
              dout, q, k, v, D, lse, T, h, scale);
}

// Variant 4's launcher (below), which variant 3 hands head sizes 64 and 128 to.
template <int HS, class G>
void launch_backward_bf16_pipelined(G* dq, G* dk, G* dv, const __nv_bfloat16* dout, const __nv_bfloat16* q,
                                    const __nv_bfloat16* k, const __nv_bfloat16* v, const float* D, const float* lse,
                                    std::int64_t BH, std::int64_t T_len, float scale, HeadLayout in, HeadLayout io,
                                    HeadLayout grad, Stream stream);

void attention_backward_bf16_mma(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                                 const float* v, const float* out, const float* lse, const AttentionShape& shape,
                                 Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  check_sizes("attention_backward", BH, T_len, hs);
  check_head_size("attention_backward bf16_mma", hs, kMmaMaxHeadSize);
  if (BH == 0 || T_len == 0) return;
  BRRR_CHECK(BH <= INT32_MAX && ceil_div(T_len, kTile) <= 65535, "attention_backward: BH = ", BH, ", T = ", T_len,
             " is more blocks than a grid holds");
  const std::int64_t rows = BH * T_len;
  if (hs == 64 || hs == 128) {
    // q, k, v and dout rounded to bf16 once, into the workspace after D, then variant 4's
    // kernels: the same products on the same bf16 values, without variant 3's transposed
    // stores (their bank conflicts) and with its loads by cp.async, overlapped with the math.
    const std::int64_t n = rows * hs;
    const std::size_t d_bytes = (static_cast<std::size_t>(rows) * sizeof(float) + 255) / 256 * 256;
    auto* base = static_cast<unsigned char*>(workspace(d_bytes + 4 * static_cast<std::size_t>(n) * 2, stream));
    float* D = reinterpret_cast<float*>(base);
    auto* rounded = reinterpret_cast<__nv_bfloat16*>(base + d_bytes);  // q, k, v, dout
    prepare_backward(D, rounded, q, k, v, dout, out, rows, hs, stream);
    const HeadLayout own = contiguous_heads(hs);
    if (hs == 64)
      return launch_backward_bf16_pipelined<64>(dq, dk, dv, rounded + 3 * n, rounded, rounded + n, rounded + 2 * n, D,
                                                lse, BH, T_len, scale, own, own, own, stream);
    return launch_backward_bf16_pipelined<128>(dq, dk, dv, rounded + 3 * n, rounded, rounded + n, rounded + 2 * n, D,
                                               lse, BH, T_len, scale, own, own, own, stream);
  }
  auto* D = static_cast<float*>(workspace(static_cast<std::size_t>(rows) * sizeof(float), stream));
  prepare_backward<float>(D, nullptr, q, k, v, dout, out, rows, hs, stream);
  switch (padded_head_size(hs)) {
    case 32: return launch_backward_bf16_mma<32>(dq, dk, dv, dout, q, k, v, D, lse, BH, T_len, hs, scale, stream);
    case 64: return launch_backward_bf16_mma<64>(dq, dk, dv, dout, q, k, v, D, lse, BH, T_len, hs, scale, stream);
    default: return launch_backward_bf16_mma<128>(dq, dk, dv, dout, q, k, v, D, lse, BH, T_len, hs, scale, stream);
  }
}

// =============================================================================================
// Variant 4 forward: bf16 in memory, K and V streamed through cp.async double buffering
//
// Variant 3 reads float32 and rounds every value on its way through registers into shared
// memory, then waits at a barrier with nothing in flight. With q, k, v and out stored as
// bfloat16 the tiles need no conversion, so they can travel as they are: a 16-byte cp.async
// carries 8 values of a row from global to shared memory without registers, and the copy of
// the next key tile runs while the tensor cores work on this one. Two stages of k and v:
//
//   prologue:     copy the query tile and key tile 0 (one commit group)
//   key tile j:   start copying key tile j + 1 into the other stage (a group; an empty one
//                 after the last), wait until at most that group is in flight (tile j has
//                 landed), __syncthreads, compute on tile j, __syncthreads (everyone is done
//                 with tile j's stage before step j + 1 refills it)
//
// The arithmetic is variant 3's: each warp's 16 query rows as A fragments in registers
// (ldmatrix), s = q k^T on mma.sync (k by plain ldmatrix: keys are the rows of a B operand
// stored (n, k)), the online softmax in float32 registers, p turned from accumulators into an
// A operand in place, o += p v with v's B fragments by ldmatrix .trans. Rows of the tiles are
// padded by 16 bytes (conflict-free ldmatrix, and cp.async's 16-byte destinations stay
// aligned). Past the end of the sequence a copy reads nothing and zero-fills its 16 bytes;
// the causal mask and j < T do the rest. out is rounded to bfloat16 once, at the store; lse
// stays float32 (the backward's statistics). Where a head's rows are (HeadLayout, common.h)
// is an argument: (BH, T, hs) arrays, or the GPT's packed qkv and (B, T, C) out (chapter 18,
// section 12).
// Head sizes 64 and 128 (a row is 8 or 16 whole copies); the pointers must be 16-byte
// aligned (a bf16 tensor from brrr's allocator is). Shared memory: 5 tiles of (64, HS + 8)
// bf16, 45 KiB at hs = 64, 85 KiB at 128 (above the default 48 KiB: BRRR_LAUNCH asks for it).
// Measured on an H200 (2026-11-27, bench_tensor_cores, causal, BH = 96, hs = 64): 0.084 ms at
// T = 1024 (152.8 TFLOP/s) and 1.078 ms at T = 4096 (191.2), against PyTorch's SDPA in bf16
// 0.067 and 0.587 ms: 1.25x and 1.84x its time, where the bar is 1.2x
// (docs/measurements.md, "The GPU, second round").

template <int HS>
constexpr std::size_t pipelined_shared_bytes() {
  return 5 * kTile * (HS + 8) * sizeof(__nv_bfloat16);  // q, then k and v in two stages each
}

// Starts copying rows [r0, r0 + ROWS) of a (T_len, HS) bf16 matrix whose rows are ld apart (HS
// for a head of its own, 3 C in the packed qkv) into tile (pitch HS + 8), 16 bytes at a time;
// rows past T_len zero-filled.
template <int HS, int ROWS = kTile>
__device__ inline void copy_rows_async(__nv_bfloat16* tile, const __nv_bfloat16* matrix, int r0, int T_len,
                                       std::int64_t ld) {
  constexpr int kChunks = HS / 8;  // 16-byte copies a row
  // The same number of copies for every thread (2 to 8), counted as a constant and kept a loop.
  // Written `for (e = threadIdx.x; e < ROWS * kChunks; e += kMmaThreads)`, nvcc made it a loop
  // unrolled by 4 plus a remainder; unrolled whole, the addresses of every copy stayed live
  // across the kernel's loop, and the dk, dv kernel at hs = 128 spilled (ptxas, sm_90). Kept a
  // loop, ptxas gives the four backward kernels 10 to 34 registers fewer than the first form
  // (dq at hs = 64: 101, which fits 5 blocks an SM where 122 fit 4) and the copies take fewer
  // instructions in the PTX.
  static_assert(ROWS * kChunks % kMmaThreads == 0, "every thread makes the same number of copies");
  BRRR_NO_UNROLL
  for (int i = 0; i < ROWS * kChunks / kMmaThreads; ++i) {
    const int e = static_cast<int>(threadIdx.x) + i * kMmaThreads, r = e / kChunks, c = 8 * (e % kChunks);
    const bool inside = r0 + r < T_len;
    const __nv_bfloat16* source = inside ? matrix + static_cast<std::int64_t>(r0 + r) * ld + c : matrix;
    cp_async<16>(&tile[r * (HS + 8) + c], source, inside ? 16 : 0);
  }
}

template <int HS>
__global__ void __launch_bounds__(kMmaThreads)
    attention_forward_bf16_pipelined_kernel(__nv_bfloat16* out, float* lse, const __nv_bfloat16* q,
                                            const __nv_bfloat16* k, const __nv_bfloat16* v, int T_len,
                                            float scale_log2, HeadLayout in, HeadLayout out_layout) {
  constexpr int ld = HS + 8;
  constexpr int kSteps = HS / 16, kOutTiles = HS / 8;
  BRRR_DYNAMIC_SHARED(__nv_bfloat16, smem);
  __nv_bfloat16* q_tile = smem;
  __nv_bfloat16* k_stage[2] = {q_tile + kTile * ld, q_tile + 2 * kTile * ld};
  __nv_bfloat16* v_stage[2] = {q_tile + 3 * kTile * ld, q_tile + 4 * kTile * ld};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int piece = lane / 8, a_row = lane % 8 + 8 * (piece % 2), a_col = 8 * (piece / 2);  // q, as variant 3
  const int query_tile = gridDim.y - 1 - blockIdx.y;  // the longest rows first
  const int q0 = query_tile * kTile;
  const std::int64_t head = in.head(blockIdx.x, T_len, HS), out_head = out_layout.head(blockIdx.x, T_len, HS);

  copy_rows_async<HS>(q_tile, q + head, q0, T_len, in.ld);
  copy_rows_async<HS>(k_stage[0], k + head, 0, T_len, in.ld);
  copy_rows_async<HS>(v_stage[0], v + head, 0, T_len, in.ld);
  cp_async_commit_group();

  const int r0 = warp * 16;  // this warp's rows of the tile
  unsigned q_frag[kSteps][4];
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kOutTiles][4] = {};
  const int row[2] = {q0 + r0 + g, q0 + r0 + g + 8};

  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const int k0 = key_tile * kTile, stage = key_tile % 2;
    if (key_tile < query_tile) {  // the next tile, into the stage the previous step used
      copy_rows_async<HS>(k_stage[1 - stage], k + head, k0 + kTile, T_len, in.ld);
      copy_rows_async<HS>(v_stage[1 - stage], v + head, k0 + kTile, T_len, in.ld);
    }
    cp_async_commit_group();
    cp_async_wait_group<1>();  // all but the group just started: tile key_tile (and q) landed
    __syncthreads();
    if (key_tile == 0)
      for (int st = 0; st < kSteps; ++st) ldmatrix_x4(q_frag[st], &q_tile[(r0 + a_row) * ld + 16 * st + a_col]);
    const __nv_bfloat16* k_tile = k_stage[stage];
    const __nv_bfloat16* v_tile = v_stage[stage];

    float s[8][4] = {};  // s (16 x 64) = q k^T as 8 accumulator tiles of 16 x 8
    mma_fragments_rows<HS, 8>(s, q_frag, k_tile, lane);
    online_softmax(s, m, l, o, row, k0, T_len, scale_log2, t);
    mma_accumulators_trans<kTile, HS>(o, s, v_tile, lane);  // o += p v
    __syncthreads();  // everyone is done with this stage before the next step refills it
  }
  cp_async_wait_group<0>();  // (only an empty group is left)

  for (int h = 0; h < 2; ++h) {
    const float row_l = quad_sum(l[h]);
    if (row[h] >= T_len) continue;
    __nv_bfloat16* out_row = out + out_head + static_cast<std::int64_t>(row[h]) * out_layout.ld;
    const float inverse = 1.0f / row_l;
    for (int n = 0; n < kOutTiles; ++n)  // two neighbouring values, one 4-byte store
      *reinterpret_cast<__nv_bfloat162*>(&out_row[8 * n + 2 * t]) =
          __floats2bfloat162_rn(o[n][2 * h] * inverse, o[n][2 * h + 1] * inverse);
    if (t == 0) lse[blockIdx.x * static_cast<std::int64_t>(T_len) + row[h]] = (m[h] + log2f(row_l)) * 0.69314718f;
  }
}

// Variant 4's checks, forward and backward: the sizes, head size 64 or 128 (a row is 8 or 16
// whole 16-byte copies), a grid that holds the problem, and 16-byte aligned operands (named in
// `names`) for cp.async. False when there is nothing to compute.
namespace {
bool check_pipelined(const char* op, const AttentionShape& shape, std::initializer_list<const brrr::bf16*> operands,
                     const char* names) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  check_sizes(op, BH, T_len, hs);
  BRRR_CHECK(hs == 64 || hs == 128, op, ": head size ", hs, "; this kernel is written for 64 and 128");
  if (BH == 0 || T_len == 0) return false;
  BRRR_CHECK(BH <= INT32_MAX && ceil_div(T_len, kTile) <= 65535, op, ": BH = ", BH, ", T = ", T_len,
             " is more blocks than a grid holds");
  for (const brrr::bf16* p : operands)
    BRRR_CHECK(aligned16(p), op, ": ", names, " must start 16-byte aligned (cp.async copies 16 bytes)");
  return true;
}
}  // namespace

namespace {
// The forward's launch, q, k, v where `in` says and out where `out_layout` says.
void launch_forward_bf16_pipelined(brrr::bf16* out, float* lse, const brrr::bf16* q, const brrr::bf16* k,
                                   const brrr::bf16* v, const AttentionShape& shape, HeadLayout in,
                                   HeadLayout out_layout, Stream stream) {
  auto* o = reinterpret_cast<__nv_bfloat16*>(out);
  const auto* qq = reinterpret_cast<const __nv_bfloat16*>(q);
  const auto* kk = reinterpret_cast<const __nv_bfloat16*>(k);
  const auto* vv = reinterpret_cast<const __nv_bfloat16*>(v);
  const dim3 grid(static_cast<unsigned>(shape.BH), static_cast<unsigned>(ceil_div(shape.T, kTile)));
  const float scale_log2 = static_cast<float>(shape.scale) * 1.44269504f;
  const int T = static_cast<int>(shape.T);
  if (shape.hs == 64)
    BRRR_LAUNCH(attention_forward_bf16_pipelined_kernel<64>, grid, kMmaThreads, pipelined_shared_bytes<64>(), stream,
                o, lse, qq, kk, vv, T, scale_log2, in, out_layout);
  else
    BRRR_LAUNCH(attention_forward_bf16_pipelined_kernel<128>, grid, kMmaThreads, pipelined_shared_bytes<128>(),
                stream, o, lse, qq, kk, vv, T, scale_log2, in, out_layout);
}

// The packed forms' checks: heads divides BH, and C = heads hs (so each row of qkv and out
// starts 16-byte aligned when hs is 64 or 128).
bool check_packed(const char* op, const AttentionShape& shape, std::int64_t heads,
                  std::initializer_list<const brrr::bf16*> operands, const char* names) {
  BRRR_CHECK(heads >= 1 && shape.BH % heads == 0, op, ": heads must be positive and divide BH = ", shape.BH,
             ", got ", heads);
  return check_pipelined(op, shape, operands, names);
}
}  // namespace

void attention_forward_bf16_pipelined(brrr::bf16* out, float* lse, const brrr::bf16* q, const brrr::bf16* k,
                                      const brrr::bf16* v, const AttentionShape& shape, Stream stream) {
  if (!check_pipelined("attention_forward bf16_pipelined", shape, {q, k, v, out}, "q, k, v and out")) return;
  const HeadLayout own = contiguous_heads(shape.hs);
  launch_forward_bf16_pipelined(out, lse, q, k, v, shape, own, own, stream);
}

// The same kernel on the packed qkv (B, T, 3 C), out (B, T, C): only where each head's rows
// start and how far apart they are change (HeadLayout), so the results are the bits of the
// unpacked call on copies.
void attention_forward_qkv_bf16_pipelined(brrr::bf16* out, float* lse, const brrr::bf16* qkv,
                                          const AttentionShape& shape, std::int64_t heads, Stream stream) {
  if (!check_packed("attention_forward_qkv bf16_pipelined", shape, heads, {qkv, out}, "qkv and out")) return;
  const std::int64_t C = heads * shape.hs;
  launch_forward_bf16_pipelined(out, lse, qkv, qkv + C, qkv + 2 * C, shape, HeadLayout{heads, 3 * C},
                                HeadLayout{heads, C}, stream);
}

// =============================================================================================
// Variant 4 backward: variant 3's backward with bf16 in memory, cp.async double buffering and
// ldmatrix
//
// Variant 3's backward stores its tiles twice, once transposed, through registers, because its
// fragment loads read two adjacent bf16 of a row. ldmatrix .trans hands out columns instead, so
// one row-major copy of each tile serves every product: k q^T and v dout^T read q and dout as
// B operands stored (n, k), ldmatrix without .trans; P^T dout and dS^T q (and dS k in the dq
// kernel) read them as B operands stored (k, n), ldmatrix .trans, as the forward reads v. With
// only row-major tiles, every load is a 16-byte cp.async, and the streamed tiles (queries in
// the dk, dv kernel, keys in the dq kernel, 32 at a time) are double-buffered as in the
// forward: the copy of tile j + 1 runs while tile j is computed. D = dout . out, computed once
// per row before the kernels, and lse are read through registers (a few floats a row). The
// same two kernels and the same loop order as variant 3 otherwise (deterministic: no atomics),
// dq, dk and dv written in float32 (or, on the packed layouts, rounded to bf16 into dqkv:
// attention_backward_qkv_bf16_pipelined below). Variant 3 runs these kernels too, on bf16 copies, for head
// sizes 64 and 128. Head sizes 64 and 128; 16-byte aligned pointers. Measured on an H200
// (2026-11-27, same shapes as the forward), when the dk, dv kernel still computed D itself for
// every query tile (a thread per row, reading 32 sectors a request: `brrr kernel-lab
// attention_backward --dtype bfloat16 --device emulator --mode counters` read 25.1x the least
// bytes at (2, 256, 64), 3.4x now): 0.924 ms at T = 1024 and 12.61 ms at T = 4096, 11.7 times
// the forward there, where SDPA's backward is 2.4 times its forward: forward + backward 2.17x
// and 6.88x SDPA's (docs/measurements.md, "The GPU, second round").

template <int HS>
constexpr std::size_t bwd_pipelined_shared_bytes() {  // 2 fixed (64, HS) tiles, 4 streamed (32, HS)
  return (2 * kTile + 4 * kBwdQueries) * (HS + 8) * sizeof(__nv_bfloat16);
}

// A warp's (16, HS) accumulators times `factor` into rows row0 + g and row0 + g + 8 of x, rows
// ld apart: float32 (8-byte pairs where x and ld allow, as store_rows), or bf16, each value
// rounded once, two neighbours a 4-byte store (the packed gradient dqkv: ld and the head's
// offset are even, so every even column is 4-byte aligned).
template <int HS>
__device__ inline void store_rows_ld(float* x, const float (&acc)[HS / 8][4], int row0, int T_len, std::int64_t ld,
                                     float factor, int g, int t) {
  const bool pairs = ld % 2 == 0 && reinterpret_cast<std::uintptr_t>(x) % 8 == 0;
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    if (row >= T_len) continue;
    float* x_row = x + static_cast<std::int64_t>(row) * ld;
    for (int n = 0; n < HS / 8; ++n)
      store_two(x_row, 8 * n + 2 * t, HS, acc[n][2 * h] * factor, acc[n][2 * h + 1] * factor, pairs);
  }
}
template <int HS>
__device__ inline void store_rows_ld(__nv_bfloat16* x, const float (&acc)[HS / 8][4], int row0, int T_len,
                                     std::int64_t ld, float factor, int g, int t) {
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + g + 8 * h;
    if (row >= T_len) continue;
    __nv_bfloat16* x_row = x + static_cast<std::int64_t>(row) * ld;
    for (int n = 0; n < HS / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(&x_row[8 * n + 2 * t]) =
          __floats2bfloat162_rn(acc[n][2 * h] * factor, acc[n][2 * h + 1] * factor);
  }
}


// in: where q, k and v are; io: dout; grad: dk and dv (G float: (BH, T, hs); bf16: in dqkv).
template <int HS, class G>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dkdv_bf16_pipelined_kernel(G* dk, G* dv, const __nv_bfloat16* dout,
                                                  const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                  const __nv_bfloat16* v, const float* D, const float* lse,
                                                  int T_len, float scale, HeadLayout in, HeadLayout io,
                                                  HeadLayout grad) {
  constexpr int ld = HS + 8, kQ = kBwdQueries;
  BRRR_DYNAMIC_SHARED(__nv_bfloat16, smem);
  __nv_bfloat16* k_tile = smem;                 // (64, HS) this block's keys
  __nv_bfloat16* v_tile = k_tile + kTile * ld;  // (64, HS)
  __nv_bfloat16* streamed = v_tile + kTile * ld;
  __nv_bfloat16* q_stage[2] = {streamed, streamed + kQ * ld};              // (32, HS) queries, two stages
  __nv_bfloat16* do_stage[2] = {streamed + 2 * kQ * ld, streamed + 3 * kQ * ld};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int k0 = blockIdx.y * kTile, key0 = warp * 16;
  const std::int64_t head = in.head(blockIdx.x, T_len, HS), do_head = io.head(blockIdx.x, T_len, HS);
  copy_rows_async<HS>(k_tile, k + head, k0, T_len, in.ld);
  copy_rows_async<HS>(v_tile, v + head, k0, T_len, in.ld);
  copy_rows_async<HS, kQ>(q_stage[0], q + head, k0, T_len, in.ld);
  copy_rows_async<HS, kQ>(do_stage[0], dout + do_head, k0, T_len, io.ld);
  cp_async_commit_group();
  float dk_acc[HS / 8][4] = {}, dv_acc[HS / 8][4] = {};
  const int key[2] = {k0 + key0 + g, k0 + key0 + g + 8};
  for (int q0 = k0, j = 0; q0 < T_len; q0 += kQ, ++j) {  // the queries that see some of the block's keys
    const int stage = j % 2;
    if (q0 + kQ < T_len) {  // the next query tile, into the stage the previous step used
      copy_rows_async<HS, kQ>(q_stage[1 - stage], q + head, q0 + kQ, T_len, in.ld);
      copy_rows_async<HS, kQ>(do_stage[1 - stage], dout + do_head, q0 + kQ, T_len, io.ld);
    }
    cp_async_commit_group();
    // lse and D of the queries this thread's accumulator columns hold (8 of each), read while
    // the copies land: a lane's 8 are 4 pairs of neighbours, the same for the 8 lanes of a column.
    float Lq[kQ / 8][2], Dq[kQ / 8][2];
    for (int n = 0; n < kQ / 8; ++n)
      for (int e = 0; e < 2; ++e) {
        const int query = q0 + 8 * n + 2 * t + e;
        const std::int64_t at = blockIdx.x * static_cast<std::int64_t>(T_len) + query;
        Lq[n][e] = query < T_len ? lse[at] : 0.0f;
        Dq[n][e] = query < T_len ? D[at] : 0.0f;
      }
    cp_async_wait_group<1>();  // this query tile (and k, v) have landed
    __syncthreads();
    float p[kQ / 8][4] = {}, ds[kQ / 8][4] = {};
    mma_rows_ldmatrix<HS, kQ / 8>(p, k_tile, key0, q_stage[stage], lane);     // S^T = k q^T
    mma_rows_ldmatrix<HS, kQ / 8>(ds, v_tile, key0, do_stage[stage], lane);   // dP^T = v dout^T
    for (int n = 0; n < kQ / 8; ++n)
      for (int i = 0; i < 4; ++i) {
        const int query = 8 * n + 2 * t + i % 2, kk = key[i / 2];
        const bool seen = kk <= q0 + query && q0 + query < T_len;
        p[n][i] = seen ? __expf(p[n][i] * scale - Lq[n][i % 2]) : 0.0f;
        ds[n][i] = p[n][i] * (ds[n][i] - Dq[n][i % 2]);
      }
    mma_accumulators_trans<kQ, HS>(dv_acc, p, do_stage[stage], lane);  // dv += P^T dout
    mma_accumulators_trans<kQ, HS>(dk_acc, ds, q_stage[stage], lane);  // dk += dS^T q
    __syncthreads();  // everyone is done with this stage before the next step refills it
  }
  cp_async_wait_group<0>();
  const std::int64_t grad_head = grad.head(blockIdx.x, T_len, HS);
  store_rows_ld<HS>(dk + grad_head, dk_acc, k0 + key0, T_len, grad.ld, scale, g, t);
  store_rows_ld<HS>(dv + grad_head, dv_acc, k0 + key0, T_len, grad.ld, 1.0f, g, t);
}

template <int HS, class G>
__global__ void __launch_bounds__(kMmaThreads)
    attention_backward_dq_bf16_pipelined_kernel(G* dq, const __nv_bfloat16* dout, const __nv_bfloat16* q,
                                                const __nv_bfloat16* k, const __nv_bfloat16* v, const float* D,
                                                const float* lse, int T_len, float scale, HeadLayout in,
                                                HeadLayout io, HeadLayout grad) {
  constexpr int ld = HS + 8, kK = kBwdQueries;
  BRRR_DYNAMIC_SHARED(__nv_bfloat16, smem);
  __nv_bfloat16* q_tile = smem;                  // (64, HS) this block's queries
  __nv_bfloat16* do_tile = q_tile + kTile * ld;  // (64, HS)
  __nv_bfloat16* streamed = do_tile + kTile * ld;
  __nv_bfloat16* k_stage[2] = {streamed, streamed + kK * ld};  // (32, HS) keys, two stages
  __nv_bfloat16* v_stage[2] = {streamed + 2 * kK * ld, streamed + 3 * kK * ld};
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int query_tile = gridDim.y - 1 - blockIdx.y;  // the longest rows first
  const int q0 = query_tile * kTile, row0 = warp * 16;
  const std::int64_t head = in.head(blockIdx.x, T_len, HS), do_head = io.head(blockIdx.x, T_len, HS);
  copy_rows_async<HS>(q_tile, q + head, q0, T_len, in.ld);
  copy_rows_async<HS>(do_tile, dout + do_head, q0, T_len, io.ld);
  copy_rows_async<HS, kK>(k_stage[0], k + head, 0, T_len, in.ld);
  copy_rows_async<HS, kK>(v_stage[0], v + head, 0, T_len, in.ld);
  cp_async_commit_group();
  const int row[2] = {q0 + row0 + g, q0 + row0 + g + 8};
  float L[2], Drow[2];
  for (int h = 0; h < 2; ++h) {
    const std::int64_t at = blockIdx.x * static_cast<std::int64_t>(T_len) + row[h];
    L[h] = row[h] < T_len ? lse[at] : 0.0f;
    Drow[h] = row[h] < T_len ? D[at] : 0.0f;
  }
  float dq_acc[HS / 8][4] = {};
  const int key_end = min(T_len, q0 + kTile);  // keys up to the tile's last query
  for (int kb = 0, j = 0; kb < key_end; kb += kK, ++j) {
    const int stage = j % 2;
    if (kb + kK < key_end) {
      copy_rows_async<HS, kK>(k_stage[1 - stage], k + head, kb + kK, T_len, in.ld);
      copy_rows_async<HS, kK>(v_stage[1 - stage], v + head, kb + kK, T_len, in.ld);
    }
    cp_async_commit_group();
    cp_async_wait_group<1>();
    __syncthreads();
    float p[kK / 8][4] = {}, ds[kK / 8][4] = {};
    mma_rows_ldmatrix<HS, kK / 8>(p, q_tile, row0, k_stage[stage], lane);    // S = q k^T
    mma_rows_ldmatrix<HS, kK / 8>(ds, do_tile, row0, v_stage[stage], lane);  // dP = dout v^T
    for (int n = 0; n < kK / 8; ++n)
      for (int i = 0; i < 4; ++i) {
        const int key = kb + 8 * n + 2 * t + i % 2, h = i / 2;
        const bool seen = key <= row[h] && row[h] < T_len;
        p[n][i] = seen ? __expf(p[n][i] * scale - L[h]) : 0.0f;
        ds[n][i] = p[n][i] * (ds[n][i] - Drow[h]);
      }
    mma_accumulators_trans<kK, HS>(dq_acc, ds, k_stage[stage], lane);  // dq += dS k
    __syncthreads();  // everyone is done with this stage before the next step refills it
  }
  cp_async_wait_group<0>();
  store_rows_ld<HS>(dq + grad.head(blockIdx.x, T_len, HS), dq_acc, q0 + row0, T_len, grad.ld, scale, g, t);
}

template <int HS, class G>
void launch_backward_bf16_pipelined(G* dq, G* dk, G* dv, const __nv_bfloat16* dout, const __nv_bfloat16* q,
                                    const __nv_bfloat16* k, const __nv_bfloat16* v, const float* D, const float* lse,
                                    std::int64_t BH, std::int64_t T_len, float scale, HeadLayout in, HeadLayout io,
                                    HeadLayout grad, Stream stream) {
  const dim3 grid(static_cast<unsigned>(BH), static_cast<unsigned>(ceil_div(T_len, kTile)));
  const int T = static_cast<int>(T_len);
  BRRR_LAUNCH((attention_backward_dkdv_bf16_pipelined_kernel<HS, G>), grid, kMmaThreads,
              bwd_pipelined_shared_bytes<HS>(), stream, dk, dv, dout, q, k, v, D, lse, T, scale, in, io, grad);
  BRRR_LAUNCH((attention_backward_dq_bf16_pipelined_kernel<HS, G>), grid, kMmaThreads,
              bwd_pipelined_shared_bytes<HS>(), stream, dq, dout, q, k, v, D, lse, T, scale, in, io, grad);
}

void attention_backward_bf16_pipelined(float* dq, float* dk, float* dv, const brrr::bf16* dout, const brrr::bf16* q,
                                       const brrr::bf16* k, const brrr::bf16* v, const brrr::bf16* out,
                                       const float* lse, const AttentionShape& shape, Stream stream) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  if (!check_pipelined("attention_backward bf16_pipelined", shape, {q, k, v, dout}, "q, k, v and dout")) return;
  using In = __nv_bfloat16;
  const auto* d_out = reinterpret_cast<const In*>(dout);
  const auto* qq = reinterpret_cast<const In*>(q);
  const auto* kk = reinterpret_cast<const In*>(k);
  const auto* vv = reinterpret_cast<const In*>(v);
  const auto* oo = reinterpret_cast<const In*>(out);
  const std::int64_t rows = BH * T_len;
  auto* D = static_cast<float*>(workspace(static_cast<std::size_t>(rows) * sizeof(float), stream));
  prepare_backward<In>(D, nullptr, qq, kk, vv, d_out, oo, rows, hs, stream);
  const HeadLayout own = contiguous_heads(hs);
  if (hs == 64)
    launch_backward_bf16_pipelined<64>(dq, dk, dv, d_out, qq, kk, vv, D, lse, BH, T_len, scale, own, own, own, stream);
  else
    launch_backward_bf16_pipelined<128>(dq, dk, dv, d_out, qq, kk, vv, D, lse, BH, T_len, scale, own, own, own,
                                        stream);
}

// The backward on the packed layouts: q, k, v read from qkv, dout and out from (B, T, C), and
// dq, dk, dv rounded to bf16 straight into their columns of dqkv: each block's sums are
// complete when it stores them (no atomics), so the float32 (BH, T, hs) arrays, their rounding
// and their copy into the packed gradient are not needed.
void attention_backward_qkv_bf16_pipelined(brrr::bf16* dqkv, const brrr::bf16* dout, const brrr::bf16* qkv,
                                           const brrr::bf16* out, const float* lse, const AttentionShape& shape,
                                           std::int64_t heads, Stream stream) {
  if (!check_packed("attention_backward_qkv bf16_pipelined", shape, heads, {qkv, dout, out, dqkv},
                    "qkv, dout, out and dqkv"))
    return;
  using In = __nv_bfloat16;
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs, C = heads * hs;
  const float scale = static_cast<float>(shape.scale);
  const auto* d_out = reinterpret_cast<const In*>(dout);
  const auto* q = reinterpret_cast<const In*>(qkv);
  const auto* oo = reinterpret_cast<const In*>(out);
  auto* dq = reinterpret_cast<In*>(dqkv);
  const HeadLayout in{heads, 3 * C}, io{heads, C};
  auto* D = static_cast<float*>(workspace(static_cast<std::size_t>(BH * T_len) * sizeof(float), stream));
  prepare_backward<In>(D, nullptr, q, q, q, d_out, oo, BH * T_len, hs, stream, T_len, io);
  if (hs == 64)
    launch_backward_bf16_pipelined<64>(dq, dq + C, dq + 2 * C, d_out, q, q + C, q + 2 * C, D, lse, BH, T_len, scale,
                                       in, io, in, stream);
  else
    launch_backward_bf16_pipelined<128>(dq, dq + C, dq + 2 * C, d_out, q, q + C, q + 2 * C, D, lse, BH, T_len,
                                        scale, in, io, in, stream);
}

// =============================================================================================
// Registration

void register_attention_tensor_core_kernels() {
  // Mixed precision (chapter 18): the bf16-products slots ("attention_forward:bf16"), which
  // ops::flash_attention calls under Autocast(kBFloat16). Variant 3 is their default for head
  // sizes up to 128 (its rule); above that the registry runs variant 1 rounding its inputs.
  VariantMeta bf16;  // bfloat16 keeps 8 bits of mantissa: an error near 1e-2 is its design
  bf16.tolerance = 3e-2, bf16.max_head_size = kMmaMaxHeadSize;
  bf16.about = "variant 3: q, k, v rounded to bf16 as loaded, mma.sync, float32 softmax";
  add(op::attention_forward<float>.autocast(), DeviceType::CUDA, "bf16_mma", &attention_forward_bf16_mma, 10, bf16);
  bf16.about = "variant 3's backward on the tensor cores, dq in a second pass (hs 64, 128: variant 4's kernels)";
  add(op::attention_backward<float>.autocast(), DeviceType::CUDA, "bf16_mma", &attention_backward_bf16_mma, 10, bf16);
  // float32 arithmetic on rounded inputs: held to the op's own tolerance
  add(op::attention_forward<float>.autocast(), DeviceType::CUDA, "naive", &attention_forward_naive_bf16, 0,
      about("variant 1, every q, k, v it reads rounded to bf16"));
  add(op::attention_backward<float>.autocast(), DeviceType::CUDA, "naive", &attention_backward_naive_bf16, 0,
      about("variant 1, every q, k, v and dout it reads rounded to bf16"));
  // Variant 4 on bf16 data (`brrr kernel-lab attention_forward/bf16 --dtype bfloat16`):
  // head sizes 64 and 128 only, 16-byte aligned pointers; other calls are refused with a message.
  VariantMeta pipelined;
  pipelined.tolerance = 3e-2;  // variant 3's arithmetic: the softmax weights rounded to bf16 too
  pipelined.about = "variant 4: bf16 tiles by cp.async, double buffered, ldmatrix, mma.sync (hs 64 or 128)";
  add(op::attention_forward_on_bf16, DeviceType::CUDA, "bf16_pipelined", &attention_forward_bf16_pipelined, 10,
      pipelined);
  pipelined.about = "variant 4: variant 3's backward on bf16 tiles by cp.async and ldmatrix (hs 64 or 128)";
  add(op::attention_backward_on_bf16, DeviceType::CUDA, "bf16_pipelined", &attention_backward_bf16_pipelined, 10,
      pipelined);
  // The same kernels on the GPT's packed qkv and (B, T, C) out (chapter 18, section 12).
  pipelined.about = "variant 4 reading q, k, v from the packed qkv and writing out as (B, T, C) (hs 64 or 128)";
  add(op::attention_forward_qkv_on_bf16, DeviceType::CUDA, "bf16_pipelined", &attention_forward_qkv_bf16_pipelined,
      10, pipelined);
  pipelined.about = "variant 4's backward from the packed layouts, dq, dk, dv rounded into dqkv (hs 64 or 128)";
  add(op::attention_backward_qkv_on_bf16, DeviceType::CUDA, "bf16_pipelined",
      &attention_backward_qkv_bf16_pipelined, 10, pipelined);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE