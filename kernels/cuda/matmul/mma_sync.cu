// kernels/cuda/matmul/mma_sync.cu: matmul on the warp-level tensor cores of Volta to Ampere
// (and Hopper, which still runs them): variant 7 through WMMA, then variants 9 to 13 through
// their own instructions (mma.sync, ldmatrix, cp.async; kernels/cuda/simt_tensor_cores.h), which
// the emulator runs too: bf16 from padded tiles, a tf32 cp.async pipeline, that pipeline with a
// fused epilogue (bias, GELU), bf16 in memory through a pipeline, and that pipeline with a block
// twice as large each way.
// Chapter 14 (matmul from naive to tensor cores). Read before: kernels/cuda/matmul/cuda_cores.cu
// (variants 1 to 6 and 8, the CUDA cores), kernels/cuda/simt_tensor_cores.h (the instructions).
// Read next: kernels/cuda/cublas.cu (the bar every variant is measured against).
//
// `brrr kernel-lab matmul` checks and times them all (variant 9 under matmul:bf16, 11 under
// matmul_bias_gelu, 12 and 13 under matmul --dtype bfloat16). register_matmul_tensor_core_kernels,
// at the end, registers them. Variants 9 to 13 were written after the H100 run of 2026-11-23;
// docs/measurements.md, "Every CUDA variant: measured, or not yet", lists which have been timed.
// The tensor cores' products are of rounded operands (tf32 or bf16) with float32 sums, so these
// variants are checked against the reference on rounded inputs or with a looser tolerance.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul/gemm.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_tensor_cores.h"
#include "kernels/registry.h"

#if !BRRR_EMULATOR
#include <mma.h>  // WMMA (variant 7); the emulator's is in simt_tensor_cores.h
#endif

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// 7. tensorcore: TF32 tensor cores through WMMA
//
// An H100's float32 units are a small part of its arithmetic: its tensor cores multiply
// small matrices, a warp at a time, several times faster in TF32 (float32's 8-bit exponent
// with a 10-bit mantissa; inputs rounded, products summed in float32). CUDA's WMMA API is the
// portable way in: a warp loads a (16, 8) fragment of a and an (8, 16) fragment of b from
// shared memory (load_matrix_sync), multiplies them into a (16, 16) float32 accumulator
// (mma_sync), and each fragment's layout across the 32 lanes is the hardware's business.
// The block structure is variant 6's, with wider k-steps: 8 warps compute a (128, 128) tile of
// out, each warp a (64, 32) piece as 4 x 2 accumulator fragments, and the a tile is stored
// transposed as before, which is exactly a column-major fragment for WMMA. The tiles are
// copied with variant 6's loader, so transposes, ragged edges and misalignment work the same.
// At the end each warp stores its fragments one at a time through a (16, 16) staging area in
// shared memory, and its lanes copy (or add) them into out with bounds checks.
// Accuracy: TF32 rounds each input to 11 significant bits, a relative error of ~1e-3 in the
// result, too much for a float32 matmul that someone did not ask to be approximate. So unless
// the caller allows TF32 (MatmulShape::allow_tf32, from brrr::cuda::set_allow_tf32, the switch
// cuBLAS follows too), each input x is split into big = tf32(x) and small = tf32(x - big),
// and a @ b is computed as
// a_big @ b_big + a_big @ b_small + a_small @ b_big ("3xTF32", as in CUTLASS). What is lost
// (a_small @ b_small, and the rounding of the small parts) is ~2^-21 of each product, against
// float32's 2^-24: close to float32 accuracy, for three tensor-core products instead of one.
// One more thing decides the accuracy, and the first run on an H100 found it: the tensor
// cores add into their float32 accumulator with truncation, not rounding, so an accumulator
// carried across all of K collects a biased error that grows with K (at 4096^3: 6e-3 on
// outputs of ~50, about five times the largest error of cuBLAS's SGEMM, 1.1e-3, and a
// relative 1.2e-4, over the lab's 1e-4). So
// each k-tile's products go into a fresh fragment, which the warp then adds to its running
// sum with ordinary rounded float32 adds ("promotion", as DeepSeek-V3 does for FP8 and
// FlashAttention-3 for its accumulators): the truncation now acts on a 16-term partial, not
// on the whole sum.
// What limits it: the copies through registers into shared memory and the __syncthreads
// between them, with nothing overlapped (cp.async or TMA would copy the next tile while the
// tensor cores work on this one); WMMA itself, which hides the fragment layouts and costs
// shared-memory bandwidth (mma.sync with ldmatrix, or the H100's wgmma, go further); and in
// the accurate mode, three products and the splitting of every fragment.
// Measured on the H100 at 4096^3, in the accurate mode (TF32 off) with promotion: 8.157 ms,
// 16.85 TFLOP/s, 32.6% of cuBLAS's SGEMM, with a relative error of 3.3e-6 (cuBLAS: 1.1e-5).
// The tensor cores did not make it faster than the float32 units: it is behind variant 6
// (52.7%) and far behind variant 8 (85.4%), paying for everything the paragraph above lists.
// With TF32 allowed (one product) it was not measured.

namespace wmma = nvcuda::wmma;

constexpr int kTcBM = 128, kTcBN = 128, kTcBK = 16;
constexpr int kTcThreads = 256;  // 8 warps: 2 (rows) x 4 (columns), each (64, 32) of out

namespace {
// x = big + small with big and small TF32 numbers (big alone when not `precise`).
template <bool precise, class Fragment>
__device__ inline void split_tf32(Fragment& big, Fragment& small) {
  for (int t = 0; t < big.num_elements; ++t) {
    const float x = big.x[t];
    big.x[t] = wmma::__float_to_tf32(x);
    if constexpr (precise) small.x[t] = wmma::__float_to_tf32(x - big.x[t]);
  }
}
}  // namespace

template <bool precise>
__global__ void __launch_bounds__(kTcThreads) matmul_tensorcore_kernel(Gemm<float> g) {
  // Row pitches: multiples of 4 floats (WMMA's rule for float), and every fragment's first
  // element 32-byte aligned (16 rows of 132 floats, or 8 rows, are multiples of 32 bytes).
  constexpr int kPitchA = kTcBM + 4, kPitchB = kTcBN + 4;
  __align__(32) __shared__ float a_tile[kTcBK * kPitchA];  // (16, 128): a transposed, a_tile[k][i]
  __align__(32) __shared__ float b_tile[kTcBK * kPitchB];  // (16, 128): b_tile[k][j]
  __align__(32) __shared__ float staging[kTcThreads / 32][16 * 16];
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int warp_i = (warp / 4) * 64, warp_j = (warp % 4) * 32;  // this warp's piece of the tile
  const int i0 = static_cast<int>(blockIdx.y) * kTcBM, j0 = static_cast<int>(blockIdx.x) * kTcBN;
  const Operand<float> a_t = transposed(g.a);  // (K, M)
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const float* a = matrix(a_t, z);
    const float* b = matrix(g.b, z);
    // Fragment f = 2 * fi + fj covers rows warp_i + 16 fi.., columns warp_j + 16 fj.. (fi < 4, fj < 2).
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> sum[8], tile_sum[8];
BRRR_UNROLL
    for (int f = 0; f < 8; ++f) wmma::fill_fragment(sum[f], 0.0f);
    for (int k0 = 0; k0 < g.K; k0 += kTcBK) {
      load_tile4<kTcBK, kTcBM, kTcThreads>(a_tile, kPitchA, a, a_t, k0, i0, tid);
      load_tile4<kTcBK, kTcBN, kTcThreads>(b_tile, kPitchB, b, g.b, k0, j0, tid);
      __syncthreads();
BRRR_UNROLL
      for (int f = 0; f < 8; ++f) wmma::fill_fragment(tile_sum[f], 0.0f);
BRRR_UNROLL
      for (int k = 0; k < kTcBK; k += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> a_big[4], a_small[4];
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b_big[2], b_small[2];
BRRR_UNROLL
        for (int fi = 0; fi < 4; ++fi) {
          wmma::load_matrix_sync(a_big[fi], &a_tile[k * kPitchA + warp_i + 16 * fi], kPitchA);
          split_tf32<precise>(a_big[fi], a_small[fi]);
        }
BRRR_UNROLL
        for (int fj = 0; fj < 2; ++fj) {
          wmma::load_matrix_sync(b_big[fj], &b_tile[k * kPitchB + warp_j + 16 * fj], kPitchB);
          split_tf32<precise>(b_big[fj], b_small[fj]);
        }
BRRR_UNROLL
        for (int f = 0; f < 8; ++f) {
          const int fi = f / 2, fj = f % 2;
          if constexpr (precise) {  // the small terms first, while the sum is small too
            wmma::mma_sync(tile_sum[f], a_small[fi], b_big[fj], tile_sum[f]);
            wmma::mma_sync(tile_sum[f], a_big[fi], b_small[fj], tile_sum[f]);
          }
          wmma::mma_sync(tile_sum[f], a_big[fi], b_big[fj], tile_sum[f]);
        }
      }
      // Promotion: the tile's partial joins the running sum with rounded float32 adds (an
      // accumulator fragment's elements may be read and written directly; both fragments
      // have the same layout).
BRRR_UNROLL
      for (int f = 0; f < 8; ++f)
BRRR_UNROLL
        for (int t = 0; t < sum[f].num_elements; ++t) sum[f].x[t] += tile_sum[f].x[t];
      __syncthreads();
    }
    float* out = g.out + z * g.stride_out;
    float* stage = staging[warp];
BRRR_UNROLL  // (a loop over fragments that is not unrolled would put sum in local memory)
    for (int f = 0; f < 8; ++f) {
      wmma::store_matrix_sync(stage, sum[f], 16, wmma::mem_row_major);
      __syncwarp();  // the fragment is in the staging area
      const int i = i0 + warp_i + 16 * (f / 2), j = j0 + warp_j + 16 * (f % 2);
      for (int e = lane; e < 16 * 16; e += 32) store_out(g, out, i + e / 16, j + e % 16, stage[e]);
      __syncwarp();  // every lane has read it before the next fragment overwrites it
    }
  }
}

void matmul_tensorcore(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  const Gemm<float> g = describe("matmul tensorcore", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul tensorcore", ceil_div(g.N, kTcBN), ceil_div(g.M, kTcBM), g.batch);
  if (s.allow_tf32)
    BRRR_LAUNCH(matmul_tensorcore_kernel<false>, grid, kTcThreads, 0, stream, g);
  else
    BRRR_LAUNCH(matmul_tensorcore_kernel<true>, grid, kTcThreads, 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 9. bf16_mma: bfloat16 on the tensor cores with mma.sync, fragments loaded by ldmatrix from
//    padded tiles
//
// Variant 7 reached the tensor cores through WMMA, which hides where each value of a fragment
// lives. Here the warp speaks to them directly: mma.sync.m16n8k16 multiplies a (16, 16) tile
// of a by a (16, 8) tile of b, bfloat16 in, float32 out, each lane holding a few values of each
// as the PTX ISA's fragment tables place them (kernels/cuda/simt_tensor_cores.cpp lists them).
// A block of 128 threads (4 warps, 2 x 2) computes a (64, 64) tile of out; each warp (32, 32),
// that is 2 x 4 mma tiles of (16, 8), 32 float32 accumulators a lane.
//   - The operands go into shared memory as bfloat16, rounded when the tile is loaded (the
//     float32 a and b of the op stay as they are: the lab checks this variant against the
//     reference on its inputs rounded to bf16, where only the float32 sums differ).
//   - ldmatrix loads the fragments: each lane names one 16-byte row of an 8 x 8 matrix, and the
//     warp hands every lane exactly the two values its fragment needs, four matrices (a whole
//     a fragment) in one instruction. For b, stored (k, n) with n along a row, ldmatrix .trans
//     hands out columns instead: the fragment wants two consecutive k's of one n.
//   - padded rows. ldmatrix reads 8 rows of 16 bytes at once; with rows of 64 bytes (32 bf16)
//     rows 0, 2, 4, 6 would fall on the same banks. Eight more bf16 a row (80 and 144 bytes)
//     put the 8 rows on 8 different 16-byte bank groups: no conflict.
// What limits it: everything around the mma: the tile loads go through registers (to round to
// bf16) and wait at a __syncthreads, with no copy in flight while the tensor cores work; a
// small block tile (64, 64) reads each input element 2 x (M / 64) times from L2. Measured on
// an H200 (2026-11-27, the lab at 4096^3 under autocast): 6.04 ms, 22.8 TFLOP/s, against
// cuBLAS's bf16 GEMM on the same float32 data 525.2 (docs/measurements.md, "Every CUDA variant").

constexpr int kMmaBM = 64, kMmaBN = 64, kMmaBK = 32;
constexpr int kMmaThreads = 128;  // 4 warps: 2 (rows) x 2 (columns), each (32, 32) of out

namespace {
// Like load_tile, rounding each value to bfloat16 on its way into the tile.
template <int ROWS, int COLS, int THREADS>
__device__ inline void load_tile_bf16(__nv_bfloat16* tile, int pitch, const float* base, const Operand<float>& m,
                                      int r0, int c0, int tid) {
  const bool along_rows = m.col_stride == 1;
  for (int e = tid; e < ROWS * COLS; e += THREADS) {
    const int r = along_rows ? e / COLS : e % ROWS, c = along_rows ? e % COLS : e / ROWS;
    tile[r * pitch + c] = __float2bfloat16_rn(element_or_zero(base, m, r0 + r, c0 + c));
  }
}

// A warp tile's accumulators ((32, 32) in variants 9 to 12, (64, 32) in 13), acc[mi][nj][i],
// to out: value i of mma tile (mi, nj) is row 16 mi + g + 8 (i / 2), column 8 nj + 2 t + i % 2
// (lane = 4 g + t).
template <int MI, int NJ>
__device__ inline void store_warp_tile(const Gemm<float>& g, float* out, int i0, int j0, const float (&acc)[MI][NJ][4],
                                       int lane) {
  for (int mi = 0; mi < MI; ++mi)
    for (int nj = 0; nj < NJ; ++nj)
      for (int i = 0; i < 4; ++i)
        store_out(g, out, i0 + 16 * mi + lane / 4 + 8 * (i / 2), j0 + 8 * nj + 2 * (lane % 4) + i % 2, acc[mi][nj][i]);
}
}  // namespace

// Promotion, variant 7's lesson: the tensor cores add into their float32 accumulator with
// truncation, so an accumulator carried over all of K collects a one-sided error that grows with
// K (the emulator models the cut: kernels/cuda/simt_tensor_cores.cpp). Each k-tile's products go
// into a fresh accumulator, whose sum joins the running one with rounded float32 adds: the
// truncation then acts on one k-tile's partial, not on the whole sum. On the emulator
// (`brrr kernel-lab matmul --autocast --device emulator --size 64x64xK`, 2026-11-26) the largest
// relative error was 5.4e-6 at K = 4096 and 1.2e-5 at K = 16384 without promotion, 1.2e-6 and
// 1.9e-6 with it (variant 12 alike); the lab's check is 1e-4.
template <int MI, int NJ>
__device__ inline void promote(float (&acc)[MI][NJ][4], const float (&tile_sum)[MI][NJ][4]) {
  for (int mi = 0; mi < MI; ++mi)
    for (int nj = 0; nj < NJ; ++nj)
      for (int i = 0; i < 4; ++i) acc[mi][nj][i] += tile_sum[mi][nj][i];
}

__global__ void __launch_bounds__(kMmaThreads) matmul_bf16_mma_kernel(Gemm<float> g) {
  constexpr int kPitchA = kMmaBK + 8, kPitchB = kMmaBN + 8;  // bf16; rows of 80 and 144 bytes
  __align__(16) __shared__ __nv_bfloat16 a_tile[kMmaBM * kPitchA];  // (64, 32): a_tile[i][k]
  __align__(16) __shared__ __nv_bfloat16 b_tile[kMmaBK * kPitchB];  // (32, 64): b_tile[k][j]
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int warp_i = (warp / 2) * 32, warp_j = (warp % 2) * 32;
  const int i0 = static_cast<int>(blockIdx.y) * kMmaBM, j0 = static_cast<int>(blockIdx.x) * kMmaBN;
  // The row this lane names to ldmatrix: row lane % 8 of matrix lane / 8. For a, matrices 0..3
  // are the fragment's (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15,
  // k 8-15); for b (x4 .trans) (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15):
  // the two registers of two neighbouring n-tiles.
  const int piece = lane / 8, row = lane % 8;
  const int a_row = row + 8 * (piece % 2), a_col = 8 * (piece / 2);
  const int b_row = row + 8 * (piece % 2), b_col = 8 * (piece / 2);
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    const float* a = matrix(g.a, z);
    const float* b = matrix(g.b, z);
    float acc[2][4][4] = {};
    for (int k0 = 0; k0 < g.K; k0 += kMmaBK) {
      float tile_sum[2][4][4] = {};  // this k-tile's 32 products a value: promoted below
      load_tile_bf16<kMmaBM, kMmaBK, kMmaThreads>(a_tile, kPitchA, a, g.a, i0, k0, tid);
      load_tile_bf16<kMmaBK, kMmaBN, kMmaThreads>(b_tile, kPitchB, b, g.b, k0, j0, tid);
      __syncthreads();
      for (int k = 0; k < kMmaBK; k += 16) {
        unsigned a_frag[2][4], b_frag[4][2];
        for (int mi = 0; mi < 2; ++mi)
          ldmatrix_x4(a_frag[mi], &a_tile[(warp_i + 16 * mi + a_row) * kPitchA + k + a_col]);
        for (int nj = 0; nj < 4; nj += 2) {
          unsigned r[4];
          ldmatrix_x4_trans(r, &b_tile[(k + b_row) * kPitchB + warp_j + 8 * nj + b_col]);
          b_frag[nj][0] = r[0], b_frag[nj][1] = r[1], b_frag[nj + 1][0] = r[2], b_frag[nj + 1][1] = r[3];
        }
        for (int mi = 0; mi < 2; ++mi)
          for (int nj = 0; nj < 4; ++nj)
            mma_m16n8k16_bf16(tile_sum[mi][nj], a_frag[mi], b_frag[nj], tile_sum[mi][nj]);
      }
      promote(acc, tile_sum);
      __syncthreads();  // everyone is done with the tiles before the next ones overwrite them
    }
    store_warp_tile(g, g.out + z * g.stride_out, i0 + warp_i, j0 + warp_j, acc, lane);
  }
}

void matmul_bf16_mma(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  const Gemm<float> g = describe("matmul bf16_mma", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul bf16_mma", ceil_div(g.N, kMmaBN), ceil_div(g.M, kMmaBM), g.batch);
  BRRR_LAUNCH(matmul_bf16_mma_kernel, grid, kMmaThreads, 0, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 10. tf32_pipelined: tf32 mma.sync fed by a three-stage cp.async pipeline
//
// Variant 9 waits for every tile: load, __syncthreads, compute, __syncthreads. cp.async copies
// global memory straight into shared memory in the background, so the copies of the next two
// k-tiles can be in flight while the tensor cores work on this one. Three stages of shared
// memory, and one barrier per k-tile:
//
//   prologue:  copy k-tiles 0 and 1 (two commit groups)
//   step t:    wait until k-tile t has landed (cp_async_wait_group<1>: at most one group, t + 1,
//              still in flight), __syncthreads (it has landed for every thread, and everyone
//              is done with step t - 1), start copying k-tile t + 2 into the stage step t - 1
//              used, compute on k-tile t.
//
// cp.async moves bytes, so the tiles stay float32, and the tensor cores take them as tf32
// (mma.sync.m16n8k8.tf32; each value rounded with cvt.rna when its fragment is read): 10
// mantissa bits instead of bf16's 7, and a relative error near 1e-3 against the float32 inputs,
// which is why, like variant 7 with TF32 allowed, it is not a default. Rows are 16-byte copies
// where 4 neighbours are contiguous and aligned (Operand::vec4), 4-byte copies otherwise, and
// a copy that hangs over the matrix's edge reads fewer source bytes and zero-fills the rest.
// Padding again keeps the fragment reads conflict-free: a row pitch of 20 floats puts the 32
// (row g, column t) reads of an a fragment on 32 different banks, 72 does so for b's (k t, n g).
// (The tensor cores' truncating accumulation, variant 7's lesson, is not corrected here: one
// tf32 product per term is already a 1e-3 approximation.) Measured on an H200 (2026-11-27, the
// lab at 4096^3): 2.275 ms, 60.4 TFLOP/s, 1.18x cuBLAS's SGEMM with TF32 off (51.2)
// (docs/measurements.md, "Every CUDA variant").

constexpr int kPipeBM = 64, kPipeBN = 64, kPipeBK = 16, kPipeStages = 3;
constexpr int kPipeThreads = 128;  // 4 warps, 2 x 2, each (32, 32) of out, as in variant 9
constexpr int kPipePitchA = kPipeBK + 4, kPipePitchB = kPipeBN + 8;  // floats
constexpr int kPipeStageFloats = kPipeBM * kPipePitchA + kPipeBK * kPipePitchB;
constexpr std::size_t kPipeSharedBytes = sizeof(float) * kPipeStages * kPipeStageFloats;  // 29184

namespace {
// Starts copying the (ROWS, COLS) tile of a matrix of m at (r0, c0) into tile[r * pitch + c]
// with cp.async; zeros where it hangs over the edge. Consecutive threads copy consecutive
// addresses, 16 bytes at a time when four neighbours along a row are contiguous and aligned.
template <int ROWS, int COLS, int THREADS>
__device__ inline void copy_tile_async(float* tile, int pitch, const float* base, const Operand<float>& m, int r0,
                                       int c0, int tid) {
  if (m.col_stride == 1 && m.vec4) {
    for (int e = tid; e < ROWS * COLS / 4; e += THREADS) {
      const int r = e / (COLS / 4), c = 4 * (e % (COLS / 4)), row = r0 + r, col = c0 + c;
      const int inside = row < m.rows ? max(0, min(4, m.cols - col)) : 0;  // values of the 4 in the matrix
      const float* source = inside > 0 ? base + static_cast<std::int64_t>(row) * m.row_stride + col : base;
      cp_async<16>(&tile[r * pitch + c], source, 4 * inside);
    }
  } else {
    const bool along_rows = m.col_stride == 1;
    for (int e = tid; e < ROWS * COLS; e += THREADS) {
      const int r = along_rows ? e / COLS : e % ROWS, c = along_rows ? e % COLS : e / ROWS;
      const int row = r0 + r, col = c0 + c;
      const bool inside = row < m.rows && col < m.cols;
      const float* source = inside ? base + static_cast<std::int64_t>(row) * m.row_stride +
                                         static_cast<std::int64_t>(col) * m.col_stride
                                   : base;
      cp_async<4>(&tile[r * pitch + c], source, inside ? 4 : 0);
    }
  }
}
}  // namespace

namespace {
// The main loop of variant 10, shared with variant 11: matrix z's (64, 64) tile at (i0, j0),
// summed into this warp's (32, 32) accumulators acc (zeroed first). Leaves no copy in flight
// and every thread past its last read of the stages.
__device__ inline void tf32_pipelined_tile(const Gemm<float>& g, std::int64_t z, float* stages, int i0, int j0,
                                           float (&acc)[2][4][4]) {
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int warp_i = (warp / 2) * 32, warp_j = (warp % 2) * 32, group = lane / 4, in_group = lane % 4;
  const int k_tiles = static_cast<int>(ceil_div(g.K, kPipeBK));
  const float* a = matrix(g.a, z);
  const float* b = matrix(g.b, z);
  const auto copy_k_tile = [&](int t) {  // k-tile t into stage t % 3 (if there is one), as a group
    if (t < k_tiles) {
      float* stage = stages + (t % kPipeStages) * kPipeStageFloats;
      copy_tile_async<kPipeBM, kPipeBK, kPipeThreads>(stage, kPipePitchA, a, g.a, i0, t * kPipeBK, tid);
      copy_tile_async<kPipeBK, kPipeBN, kPipeThreads>(stage + kPipeBM * kPipePitchA, kPipePitchB, b, g.b,
                                                      t * kPipeBK, j0, tid);
    }
    cp_async_commit_group();  // an empty group past the end keeps the count of groups regular
  };
  copy_k_tile(0);
  copy_k_tile(1);
  for (int mi = 0; mi < 2; ++mi)
    for (int nj = 0; nj < 4; ++nj)
      for (int i = 0; i < 4; ++i) acc[mi][nj][i] = 0.0f;
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait_group<kPipeStages - 2>();
    __syncthreads();
    copy_k_tile(t + kPipeStages - 1);
    const float* a_tile = stages + (t % kPipeStages) * kPipeStageFloats;
    const float* b_tile = a_tile + kPipeBM * kPipePitchA;
    for (int k = 0; k < kPipeBK; k += 8) {
      // Fragments (m16n8k8 tf32): a value r at row g + 8 (r % 2), column t + 4 (r / 2);
      // b value r at row (k) t + 4 r, column (n) g.
      unsigned a_frag[2][4], b_frag[4][2];
      for (int mi = 0; mi < 2; ++mi)
        for (int r = 0; r < 4; ++r)
          a_frag[mi][r] = float_to_tf32(
              a_tile[(warp_i + 16 * mi + group + 8 * (r % 2)) * kPipePitchA + k + in_group + 4 * (r / 2)]);
      for (int nj = 0; nj < 4; ++nj)
        for (int r = 0; r < 2; ++r)
          b_frag[nj][r] = float_to_tf32(b_tile[(k + in_group + 4 * r) * kPipePitchB + warp_j + 8 * nj + group]);
      for (int mi = 0; mi < 2; ++mi)
        for (int nj = 0; nj < 4; ++nj) mma_m16n8k8_tf32(acc[mi][nj], a_frag[mi], b_frag[nj], acc[mi][nj]);
    }
  }
  cp_async_wait_group<0>();  // (only empty groups are left)
  __syncthreads();           // everyone is done with the stages before the next matrix's copies
}
}  // namespace

__global__ void __launch_bounds__(kPipeThreads) matmul_tf32_pipelined_kernel(Gemm<float> g) {
  BRRR_DYNAMIC_SHARED(float, stages);  // per stage: a (64, 16) a[i][k], then b (16, 64) b[k][j]
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i0 = static_cast<int>(blockIdx.y) * kPipeBM, j0 = static_cast<int>(blockIdx.x) * kPipeBN;
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    float acc[2][4][4];
    tf32_pipelined_tile(g, z, stages, i0, j0, acc);
    store_warp_tile(g, g.out + z * g.stride_out, i0 + (warp / 2) * 32, j0 + (warp % 2) * 32, acc, lane);
  }
}

void matmul_tf32_pipelined(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  const Gemm<float> g = describe("matmul tf32_pipelined", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul tf32_pipelined", ceil_div(g.N, kPipeBN), ceil_div(g.M, kPipeBM), g.batch);
  BRRR_LAUNCH(matmul_tf32_pipelined_kernel, grid, kPipeThreads, kPipeSharedBytes, stream, g);
}

// ---------------------------------------------------------------------------------------------
// 11. bias_gelu: variant 10 with a fused epilogue, out = gelu(a @ b + bias)
//
// A transformer is a series of GEMMs, each followed by something cheap: a bias, a GELU, a
// residual add. Done as separate kernels, the GEMM writes its (M, N) result to memory and the
// next kernel reads it back, once per elementwise step; for the MLP's first layer, (B T, 4C)
// floats each way, as many bytes as the GEMM's own inputs. The epilogue does the cheap part
// while the sums are still in registers: each lane adds the bias of its columns to its
// accumulators, applies GELU (brrr's tanh form, gelu.cu's formula) and stores out once.
// The backward needs the GELU's input; a non-null `pre` receives a @ b before the bias (what
// bias_gelu_backward takes as its x, with the bias beside it), one more store from the same
// registers, where the unfused path would have written it anyway.
// The main loop is variant 10's (tf32_pipelined_tile above), so the product has tf32's ~1e-3
// relative error; the epilogue itself is float32. Untimed on a GPU (docs/measurements.md,
// "Every CUDA variant"): the saving to
// expect is the elementwise pass, one read and one write of (M, N) float32, which for
// (8192, 768) @ (768, 3072) is ~200 MB, ~0.07 ms on an H100, beside a GEMM of ~0.3 ms.

namespace {
struct BiasGelu {
  float* pre;         // (batch, M, N), or nullptr
  const float* bias;  // (N)
};

// The epilogue: this warp's (32, 32) tile of accumulators, value i of mma tile (mi, nj) at row
// 16 mi + g + 8 (i / 2), column 8 nj + 2 t + i % 2 (lane = 4 g + t), as in store_warp_tile.
__device__ inline void store_warp_tile_bias_gelu(const Gemm<float>& g, const BiasGelu& e, std::int64_t z, int i0,
                                                 int j0, const float (&acc)[2][4][4], int lane) {
  float* out = g.out + z * g.stride_out;
  float* pre = e.pre ? e.pre + z * g.stride_out : nullptr;
  for (int nj = 0; nj < 4; ++nj)
    for (int c = 0; c < 2; ++c) {
      const int j = j0 + 8 * nj + 2 * (lane % 4) + c;
      if (j >= g.N) continue;
      const float bias = e.bias[j];  // read once for the 4 values of this column
      for (int mi = 0; mi < 2; ++mi)
        for (int h = 0; h < 2; ++h) {
          const int i = i0 + 16 * mi + lane / 4 + 8 * h;
          if (i >= g.M) continue;
          const float sum = acc[mi][nj][2 * h + c];
          const std::int64_t at = static_cast<std::int64_t>(i) * g.N + j;
          if (pre) pre[at] = sum;
          out[at] = gelu_tanh(sum + bias);
        }
    }
}
}  // namespace

__global__ void __launch_bounds__(kPipeThreads) matmul_bias_gelu_kernel(Gemm<float> g, BiasGelu e) {
  BRRR_DYNAMIC_SHARED(float, stages);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i0 = static_cast<int>(blockIdx.y) * kPipeBM, j0 = static_cast<int>(blockIdx.x) * kPipeBN;
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    float acc[2][4][4];
    tf32_pipelined_tile(g, z, stages, i0, j0, acc);
    store_warp_tile_bias_gelu(g, e, z, i0 + (warp / 2) * 32, j0 + (warp % 2) * 32, acc, lane);
  }
}

void matmul_bias_gelu(float* out, float* pre, const float* a, const float* b, const float* bias,
                      const MatmulShape& s, Stream stream) {
  BRRR_CHECK(!s.accumulate, "matmul_bias_gelu: accumulate is not supported (out = gelu(a @ b + bias) overwrites)");
  BRRR_CHECK(bias != nullptr || s.N == 0, "matmul_bias_gelu: bias is null; it must hold N = ", s.N, " values");
  const Gemm<float> g = describe("matmul_bias_gelu", out, a, b, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const dim3 grid = grid_of("matmul_bias_gelu", ceil_div(g.N, kPipeBN), ceil_div(g.M, kPipeBM), g.batch);
  BRRR_LAUNCH(matmul_bias_gelu_kernel, grid, kPipeThreads, kPipeSharedBytes, stream, g, BiasGelu{pre, bias});
}

// The same op unfused, the baseline variant 11 is measured against (and the float64 variant):
// the registry's matmul into pre (or out), then the registry's bias_gelu_forward, matrix by matrix.
template <class T>
void matmul_bias_gelu_unfused(T* out, T* pre, const T* a, const T* b, const T* bias, const MatmulShape& s,
                              Stream stream) {
  BRRR_CHECK(!s.accumulate, "matmul_bias_gelu: accumulate is not supported (out = gelu(a @ b + bias) overwrites)");
  BRRR_CHECK(bias != nullptr || s.N == 0, "matmul_bias_gelu: bias is null; it must hold N = ", s.N, " values");
  static Kernel<matmul_fn<T>> gemm(op::matmul<T>);
  static Kernel<bias_gelu_forward_fn<T>> epilogue(op::bias_gelu_forward<T>);
  T* product = pre ? pre : out;
  gemm(DeviceType::CUDA)(product, a, b, s, stream);
  if (s.M == 0 || s.N == 0) return;
  for (std::int64_t z = 0; z < s.batch; ++z)
    epilogue(DeviceType::CUDA)(out + z * s.stride_out, product + z * s.stride_out, bias, s.M, s.N, stream);
}

// ---------------------------------------------------------------------------------------------
// 12. bf16_pipelined: bfloat16 in memory, 16-byte cp.async copies, a three-stage pipeline,
//     ldmatrix fragments, mma.sync (the bf16 GEMM of mixed-precision training)
//
// Variant 9 has the right instructions and the wrong plumbing: float32 in memory, rounded on
// its way through registers, and no copy in flight while the tensor cores work. Variant 10
// has the plumbing for float32. This one stores a and b as bfloat16 (out stays float32, the
// sums too), and that changes the budget: an m16n8k16 needs 2 bytes an operand value instead
// of 4, so every byte moved from L2 or DRAM feeds twice the FLOPs, and one 16-byte cp.async
// carries 8 values of a row, straight into shared memory. With three stages in flight the
// copies of k-tiles t + 1 and t + 2 overlap the mma's on k-tile t: the loop is paced by the
// tensor cores, not by the latency of global memory, which is how cuBLAS-class kernels reach
// most of the tensor cores' peak.
//   - The shared tiles keep the operands' storage order (8 contiguous values are one copy):
//     a stored (M, K) gives a tile a[i][k], read by ldmatrix as a fragment; a stored
//     transposed, (K, M), a tile [k][i], read with ldmatrix .trans, which hands lane (g, t)
//     column g, rows 2t and 2t + 1 of each 8 x 8 matrix: again (row i = g, k = 2t, 2t + 1), the
//     fragment. b likewise, the other way round ([k][n] with .trans, as variant 9; [n][k]
//     without). Kernels for the four layouts are one template.
//   - Row pitches of 40 and 72 bf16 (80 and 144 bytes, multiples of 16 for cp.async's
//     destination) put the 8 rows an ldmatrix reads on 8 different 16-byte bank groups.
//   - Edges. 8 values whose row lies outside the matrix are 16 zero bytes, stored (not a
//     cp.async of 0 source bytes: its source address must still be aligned, and the matrix's
//     need not be). 8 values that straddle the end of a row (the last k's when K is not a
//     multiple of 8), and 8 whose source is not 16-byte aligned (when the row length is not a
//     multiple of 8, most rows start mid-way through 16 bytes), go through registers instead,
//     value by value with zeros past the edge (plain shared stores; they are complete before
//     the same barrier that publishes the cp.async copies). The straddling ones could be a
//     zero-filling cp.async of 2 x inside source bytes, which the PTX ISA says reads only
//     those; but on an H200 (2026-11-27) compute-sanitizer's memcheck reported such a copy at
//     the end of a matrix as a 16-byte read past its allocation, and initcheck as a read of
//     uninitialized bytes (the emulator now refuses it too). The pipeline is unchanged; only
//     such operands lose the asynchronous copies, and a caller wanting the fast path pads K
//     (and the leading dimensions) to multiples of 8.
// What limits it (read from nvcc's PTX, not yet profiled on a GPU): first, the issue of all
// that is not an mma. Per k-tile a warp issues 16 mma's; with every copy checked against the
// edges (about 48 instructions each, 4 copies a thread) the k-tile took some 300 instructions,
// and a scheduler issues one a cycle, so the tensor cores waited on the rest. Whole tiles of
// matrices with aligned rows now skip the checks (copy_tile_bf16): about 200 instructions a
// k-tile. Second, the (64, 64) block tile of variants 9 and 10, kept so the emulator tests stay
// small: a value of a is loaded again for every 64 columns of out, one of b for every 64 rows,
// and a warp does 8 mma's per 4 ldmatrix. cuBLAS-class kernels use (128, 128) or (128, 256)
// blocks of 8 warps, (64, 64) per warp, for twice to four times the reuse (and fewer
// instructions per mma). Variant 13 turns that knob (ptxas gives this one 96 registers: there
// is room).
// Registered as matmul's "bf16_pipelined" on bf16 data (op::matmul_on_bf16) (bf16 data, float32 out); no framework
// op calls it, since autocast's activations are float32. Measured on an H200 (2026-11-27,
// bench/tensor_cores.sh at 4096^3): 1.083 ms, 126.9 TFLOP/s, 19% of PyTorch's cuBLAS bf16 GEMM
// (672.8 TFLOP/s), where the tensor-core issue's bar is 50% (docs/measurements.md, "The GPU,
// second round").

// The block's shape, a template parameter so that variant 13 (below) is this kernel with a
// larger block. Variant 12: (64, 64), 4 warps, 2 x 2, each (32, 32) of out, as in variants 9
// and 10.
template <int BM_, int BN_, int WARPS_M, int WARPS_N>
struct BfTiles {
  static constexpr int BM = BM_, BN = BN_, BK = 32, kStages = 3;
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;  // a warp's tile of out
  static constexpr int MI = WM / 16, NJ = WN / 8;             // its m16n8 accumulator tiles
  static constexpr int kPitchK = BK + 8;                      // bf16: rows along k
  static constexpr int kPitchM = BM + 8, kPitchN = BN + 8;    // rows along m or n
  // A tile in either storage order fits its slot of the stage: a's, then b's.
  static constexpr int kAValues = BM * kPitchK > BK * kPitchM ? BM * kPitchK : BK * kPitchM;
  static constexpr int kBValues = BN * kPitchK > BK * kPitchN ? BN * kPitchK : BK * kPitchN;
  static constexpr int kStageValues = kAValues + kBValues;
  static constexpr std::size_t kSharedBytes = sizeof(__nv_bfloat16) * kStages * kStageValues;
  static_assert(WM % 16 == 0 && WN % 16 == 0, "a warp's tile is whole m16 rows and pairs of n8 columns");
  // Where warp `warp`'s tile starts in the block's: warps row by row, WARPS_N to a row.
  __device__ static int warp_row(int warp) { return (warp / WARPS_N) * WM; }
  __device__ static int warp_col(int warp) { return (warp % WARPS_N) * WN; }
};
using Bf12Tiles = BfTiles<64, 64, 2, 2>;  // 30,720 bytes of shared memory

namespace {
// The operands in the storage order of the shared tiles: element (r, c) of matrix z at
// data[z * batch_stride + r * leading + c], c along the contiguous dimension.
struct Bf16Matrix {
  const __nv_bfloat16* data;
  std::int64_t batch_stride, leading;
  int rows, cols;
};

// a stored (M, K) or (K, M), b stored (K, N) or (N, K): the matrix as stored.
Bf16Matrix stored_bf16(const __nv_bfloat16* data, std::int64_t batch_stride, std::int64_t rows, std::int64_t cols,
                       bool transposed) {
  Bf16Matrix m;
  m.data = data;
  m.batch_stride = batch_stride;
  m.rows = static_cast<int>(transposed ? cols : rows);
  m.cols = static_cast<int>(transposed ? rows : cols);
  m.leading = m.cols;
  return m;
}

// Starts copying the (ROWS, COLS) tile of m's matrix `base` at (r0, c0) into tile[r * pitch + c],
// zeros past the edges: 16-byte cp.async copies of 8 values inside the matrix from an aligned
// source, values through registers otherwise (see above).
template <int ROWS, int COLS, int THREADS>
__device__ inline void copy_tile_bf16(__nv_bfloat16* tile, int pitch, const __nv_bfloat16* base, const Bf16Matrix& m,
                                      int r0, int c0, int tid, bool aligned_rows) {
  // A tile wholly inside a matrix whose rows all start 16-byte aligned (every tile of a GEMM
  // whose sizes are multiples of the tile's, the bars' 4096^3 among them) needs none of the
  // checks below: each 8 values are one cp.async, its address one multiply-add. The checks cost
  // about 48 instructions a copy (nvcc's PTX), 4 copies a thread per k-tile, where a warp of
  // variant 12 issues 16 mma's per k-tile: enough to leave the tensor cores waiting on the
  // issue of everything else. The same values land either way.
  if (aligned_rows && r0 + ROWS <= m.rows && c0 + COLS <= m.cols) {
    static_assert(ROWS * COLS / 8 % THREADS == 0, "every thread makes the same number of copies");
    const __nv_bfloat16* corner = base + static_cast<std::int64_t>(r0) * m.leading + c0;
    BRRR_UNROLL
    for (int i = 0; i < ROWS * COLS / 8 / THREADS; ++i) {
      const int e = tid + i * THREADS, r = e / (COLS / 8), c = 8 * (e % (COLS / 8));
      cp_async<16>(&tile[r * pitch + c], corner + static_cast<std::int64_t>(r) * m.leading + c);
    }
    return;
  }
  for (int e = tid; e < ROWS * COLS / 8; e += THREADS) {
    const int r = e / (COLS / 8), c = 8 * (e % (COLS / 8)), row = r0 + r, col = c0 + c;
    __nv_bfloat16* destination = &tile[r * pitch + c];
    const int inside = row < m.rows ? max(0, min(8, m.cols - col)) : 0;  // values of the 8 in the matrix
    if (inside == 0) {  // past the edge: zeros, stored (a cp.async of 0 bytes still needs an
      // aligned source address on a GPU, and base need not be aligned)
      for (int x = 0; x < 8; ++x) destination[x] = __ushort_as_bfloat16(0);
      continue;
    }
    const __nv_bfloat16* source = base + static_cast<std::int64_t>(row) * m.leading + col;
    if (inside == 8 && reinterpret_cast<std::uintptr_t>(source) % 16 == 0) {
      cp_async<16>(destination, source);
    } else {
      for (int x = 0; x < 8; ++x) destination[x] = x < inside ? source[x] : __ushort_as_bfloat16(0);
    }
  }
}

// Matrix z's (BM, BN) tile of out at (i0, j0) into this warp's accumulators. TRANS_A: a is
// stored (K, M); TRANS_B: b is stored (N, K).
template <class Tiles, bool TRANS_A, bool TRANS_B>
__device__ inline void bf16_pipelined_tile(const Gemm<float>& g, const Bf16Matrix& ma, const Bf16Matrix& mb,
                                           std::int64_t z, __nv_bfloat16* stages, int i0, int j0,
                                           float (&acc)[Tiles::MI][Tiles::NJ][4]) {
  constexpr int BM = Tiles::BM, BN = Tiles::BN, BK = Tiles::BK, kStages = Tiles::kStages, MI = Tiles::MI,
                NJ = Tiles::NJ, kThreads = Tiles::kThreads;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int warp_i = Tiles::warp_row(warp), warp_j = Tiles::warp_col(warp);
  const int piece = lane / 8, row = lane % 8;  // the row this lane names to ldmatrix, of matrix `piece`
  const int k_tiles = static_cast<int>(ceil_div(g.K, BK));
  const __nv_bfloat16* a = ma.data + z * ma.batch_stride;
  const __nv_bfloat16* b = mb.data + z * mb.batch_stride;
  constexpr int kPitchA = TRANS_A ? Tiles::kPitchM : Tiles::kPitchK;
  constexpr int kPitchB = TRANS_B ? Tiles::kPitchK : Tiles::kPitchN;
  // Whether every row of a matrix starts 16-byte aligned: if so, copy_tile_bf16 copies its whole
  // tiles without checks.
  const bool a_aligned = ma.leading % 8 == 0 && reinterpret_cast<std::uintptr_t>(a) % 16 == 0;
  const bool b_aligned = mb.leading % 8 == 0 && reinterpret_cast<std::uintptr_t>(b) % 16 == 0;
  const auto copy_k_tile = [&](int t) {
    if (t < k_tiles) {
      __nv_bfloat16* stage = stages + (t % kStages) * Tiles::kStageValues;
      if (TRANS_A)
        copy_tile_bf16<BK, BM, kThreads>(stage, kPitchA, a, ma, t * BK, i0, tid, a_aligned);
      else
        copy_tile_bf16<BM, BK, kThreads>(stage, kPitchA, a, ma, i0, t * BK, tid, a_aligned);
      if (TRANS_B)
        copy_tile_bf16<BN, BK, kThreads>(stage + Tiles::kAValues, kPitchB, b, mb, j0, t * BK, tid, b_aligned);
      else
        copy_tile_bf16<BK, BN, kThreads>(stage + Tiles::kAValues, kPitchB, b, mb, t * BK, j0, tid, b_aligned);
    }
    cp_async_commit_group();
  };
  for (int t = 0; t < kStages - 1; ++t) copy_k_tile(t);
  for (int mi = 0; mi < MI; ++mi)
    for (int nj = 0; nj < NJ; ++nj)
      for (int i = 0; i < 4; ++i) acc[mi][nj][i] = 0.0f;
  for (int t = 0; t < k_tiles; ++t) {
    cp_async_wait_group<kStages - 2>();
    __syncthreads();
    copy_k_tile(t + kStages - 1);
    const __nv_bfloat16* a_tile = stages + (t % kStages) * Tiles::kStageValues;
    const __nv_bfloat16* b_tile = a_tile + Tiles::kAValues;
    float tile_sum[MI][NJ][4] = {};  // this k-tile's products, promoted into acc (variant 9)
    for (int k = 0; k < BK; k += 16) {
      // a's four 8 x 8 matrices: (i 0-7, k 0-7), (i 8-15, k 0-7), (i 0-7, k 8-15), (i 8-15, k 8-15).
      unsigned a_frag[MI][4], b_frag[NJ][2];
      for (int mi = 0; mi < MI; ++mi) {
        const int i = warp_i + 16 * mi + 8 * (piece % 2), kk = k + 8 * (piece / 2);
        if (TRANS_A)
          ldmatrix_x4_trans(a_frag[mi], &a_tile[(kk + row) * kPitchA + i]);
        else
          ldmatrix_x4(a_frag[mi], &a_tile[(i + row) * kPitchA + kk]);
      }
      // b's: (k 0-7, n-tile nj), (k 8-15, nj), (k 0-7, nj + 1), (k 8-15, nj + 1).
      for (int nj = 0; nj < NJ; nj += 2) {
        const int j = warp_j + 8 * nj + 8 * (piece / 2), kk = k + 8 * (piece % 2);
        unsigned r[4];
        if (TRANS_B)
          ldmatrix_x4(r, &b_tile[(j + row) * kPitchB + kk]);
        else
          ldmatrix_x4_trans(r, &b_tile[(kk + row) * kPitchB + j]);
        b_frag[nj][0] = r[0], b_frag[nj][1] = r[1], b_frag[nj + 1][0] = r[2], b_frag[nj + 1][1] = r[3];
      }
      for (int mi = 0; mi < MI; ++mi)
        for (int nj = 0; nj < NJ; ++nj)
          mma_m16n8k16_bf16(tile_sum[mi][nj], a_frag[mi], b_frag[nj], tile_sum[mi][nj]);
    }
    promote(acc, tile_sum);
  }
  cp_async_wait_group<0>();
  __syncthreads();
}
}  // namespace

template <class Tiles, bool TRANS_A, bool TRANS_B>
__global__ void __launch_bounds__(Tiles::kThreads) matmul_bf16_pipelined_kernel(Gemm<float> g, Bf16Matrix a,
                                                                                 Bf16Matrix b) {
  BRRR_DYNAMIC_SHARED(__nv_bfloat16, stages);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int i0 = static_cast<int>(blockIdx.y) * Tiles::BM, j0 = static_cast<int>(blockIdx.x) * Tiles::BN;
  const int warp_i = Tiles::warp_row(warp), warp_j = Tiles::warp_col(warp);
  for (std::int64_t z = blockIdx.z; z < g.batch; z += gridDim.z) {
    float acc[Tiles::MI][Tiles::NJ][4];
    bf16_pipelined_tile<Tiles, TRANS_A, TRANS_B>(g, a, b, z, stages, i0, j0, acc);
    store_warp_tile(g, g.out + z * g.stride_out, i0 + warp_i, j0 + warp_j, acc, lane);
  }
}

namespace {
template <class Tiles>
void launch_bf16_pipelined(const char* op, float* out, const brrr::bf16* a_bf16, const brrr::bf16* b_bf16,
                           const MatmulShape& s, Stream stream) {
  // The output side (sizes, out, accumulate) is every variant's; the operands are bf16.
  const Gemm<float> g = describe<float>(op, out, nullptr, nullptr, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  const auto* a = reinterpret_cast<const __nv_bfloat16*>(a_bf16);
  const auto* b = reinterpret_cast<const __nv_bfloat16*>(b_bf16);
  const Bf16Matrix ma = stored_bf16(a, s.stride_a, s.M, s.K, s.trans_a);
  const Bf16Matrix mb = stored_bf16(b, s.stride_b, s.K, s.N, s.trans_b);
  const dim3 grid = grid_of(op, ceil_div(g.N, Tiles::BN), ceil_div(g.M, Tiles::BM), g.batch);
  constexpr int threads = Tiles::kThreads;
  constexpr std::size_t shared = Tiles::kSharedBytes;
  if (!s.trans_a && !s.trans_b)
    BRRR_LAUNCH((matmul_bf16_pipelined_kernel<Tiles, false, false>), grid, threads, shared, stream, g, ma, mb);
  else if (!s.trans_a)
    BRRR_LAUNCH((matmul_bf16_pipelined_kernel<Tiles, false, true>), grid, threads, shared, stream, g, ma, mb);
  else if (!s.trans_b)
    BRRR_LAUNCH((matmul_bf16_pipelined_kernel<Tiles, true, false>), grid, threads, shared, stream, g, ma, mb);
  else
    BRRR_LAUNCH((matmul_bf16_pipelined_kernel<Tiles, true, true>), grid, threads, shared, stream, g, ma, mb);
}
}  // namespace

void matmul_bf16_pipelined(float* out, const brrr::bf16* a_bf16, const brrr::bf16* b_bf16, const MatmulShape& s,
                           Stream stream) {
  launch_bf16_pipelined<Bf12Tiles>("matmul bf16_pipelined", out, a_bf16, b_bf16, s, stream);
}

// ---------------------------------------------------------------------------------------------
// 13. bf16_wide: variant 12 with a (128, 128) block of 8 warps, 2 x 4, each (64, 32) of out
//
// Variant 12's (64, 64) block loads every value of a once for each 64 columns of out and every
// value of b once for each 64 rows: per k-tile of 32, 8 KiB of bf16 copied for 64 x 64 x 32
// multiply-adds, 32 FLOPs a byte from L2. A (128, 128) block halves the copies per FLOP (64
// FLOPs a byte), and a warp's (64, 32) tile takes 4 ldmatrix of a and 2 of b for 16 mma's per
// 16 of k, where variant 12's (32, 32) takes 2 and 2 for 8: the tensor cores wait less on
// shared memory. The price: 3 stages of (128, 40) and (32, 136) bf16 tiles are 61,440 bytes of
// shared memory (past the 48 KiB a block gets without opting in; BRRR_LAUNCH opts in), and 128
// accumulators a thread (64 running sums, 64 for the k-tile's products before promotion), where
// variant 12 has 64: ptxas gives it 128 to 166 registers (by layout; variant 12 72 to 80), so
// an SM holds one or two of its blocks, 8 or 16 warps (asking for two with __launch_bounds__
// made ptxas spill). This is the tile of cuBLAS-class kernels and of variant 8 on the float32
// units (kWtWM x kWtWN), and the first knob the H200 run pointed at (variant 12: 19% of
// cuBLAS's bf16 GEMM at 4096^3). Same code as variant 12 (the BfTiles parameter), so the same
// numerics, bit for bit. Ranked below variant 12 until a GPU has timed it.
using Bf13Tiles = BfTiles<128, 128, 2, 4>;  // 61,440 bytes of shared memory
static_assert(Bf13Tiles::kSharedBytes == 61440 && Bf12Tiles::kSharedBytes == 30720, "the sizes the comments give");

void matmul_bf16_wide(float* out, const brrr::bf16* a_bf16, const brrr::bf16* b_bf16, const MatmulShape& s,
                      Stream stream) {
  launch_bf16_pipelined<Bf13Tiles>("matmul bf16_wide", out, a_bf16, b_bf16, s, stream);
}

// ---------------------------------------------------------------------------------------------
// Registration

// The tensor-core variants change the numerics (3xTF32, bf16 or tf32 inputs), so in the float32
// slot they rank below every CUDA-core variant (priorities 10 to 65, cuda_cores.cu): selected by
// name, never by default. Variant 7's 3xTF32 is near float32 accuracy, not float32's own sums
// (and on the H100 it was slower than variants 6 and 8 anyway).
void register_matmul_tensor_core_kernels() {
  const DeviceType cuda = DeviceType::CUDA;
  add(op::matmul<float>, cuda, "tensorcore", &matmul_tensorcore, 7,
      about("variant 7: 3xTF32 on the tensor cores through WMMA, near float32 accuracy"));
  // Variant 9 rounds its operands to bf16: a variant of matmul's bf16-products slot
  // ("matmul:bf16", chapter 18), the one autocast calls, checked against the reference on the
  // rounded operands. The emulator's default (it has no cuBLAS); on a GPU cuBLAS's bf16 GEMM
  // outranks it (cublas.cu).
  VariantMeta autocast = about("variant 9: operands rounded to bf16 as the tiles load, mma.sync, float32 sums");
  autocast.tolerance = 1e-4;  // on the rounded operands only the float32 sums differ
  add(op::matmul<float>.autocast(), cuda, "bf16_mma", &matmul_bf16_mma, 10, autocast);
  VariantMeta tf32 = about("variant 10: tf32 mma.sync fed by a three-stage cp.async pipeline");
  tf32.tolerance = 5e-3;  // tf32 keeps 10 mantissa bits: ~5e-4 a product, more on cancelling sums
  add(op::matmul<float>, cuda, "tf32_pipelined", &matmul_tf32_pipelined, 9, tf32);
  VariantMeta bias_gelu = about("variant 11: variant 10 with bias and GELU fused into its epilogue");
  bias_gelu.tolerance = 5e-3;  // variant 10's tf32 products
  add(op::matmul_bias_gelu<float>, cuda, "tf32_epilogue", &matmul_bias_gelu, 5, bias_gelu);
  // The unfused pair ranks above it: float32 products, as every default.
  const VariantMeta unfused =
      about("the registry's matmul, then bias_gelu_forward: two kernels, (M, N) written and read back");
  add(op::matmul_bias_gelu<float>, cuda, "unfused", &matmul_bias_gelu_unfused<float>, 10, unfused);
  add(op::matmul_bias_gelu<double>, cuda, "unfused", &matmul_bias_gelu_unfused<double>, 10, unfused);
  // Variant 12 takes bf16 from memory: matmul on bf16 data (`brrr kernel-lab matmul
  // --dtype bfloat16`); float32 sums and out, as variant 9.
  add(op::matmul_on_bf16, cuda, "bf16_pipelined", &matmul_bf16_pipelined, 10,
      about("variant 12: bf16 tiles by a three-stage cp.async pipeline, ldmatrix, mma.sync, float32 out"));
  add(op::matmul_on_bf16, cuda, "bf16_wide", &matmul_bf16_wide, 9,
      about("variant 13: variant 12 with a (128, 128) block of 8 warps, each (64, 32) of out"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
