// kernels/cuda/matmul/wgmma.cu: matmul on Hopper's warpgroup tensor cores, variant 14: TMA
// copies into a ring of shared-memory stages, a producer warpgroup and two consumer warpgroups
// that pass the stages between them through mbarriers, wgmma straight from shared memory, a
// persistent grid. bf16 a and b in memory, float32 sums and out (op::matmul_on_bf16, "wgmma"),
// and the same with variant 11's bias + GELU epilogue (op::matmul_bias_gelu_on_bf16, "wgmma").
// Chapter 14 (matmul from naive to tensor cores), its Hopper section. Read before:
// kernels/cuda/examples_hopper.cu (one warpgroup, one stage: every instruction once) and
// kernels/cuda/matmul/mma_sync.cu (variant 12, the same GEMM one warp wide). Read next:
// kernels/cuda/cublas.cu (the bar every variant is measured against).
//
// The picture. A block of 384 threads is three warpgroups. Warpgroup 0 is the producer: it
// gives most of its registers away (setmaxnreg) and one of its threads issues TMA copies.
// Warpgroups 1 and 2 are the consumers: each owns 64 rows of the block's (128, 128) tile of out
// and issues wgmma on them. Between them lies a ring of kStages shared-memory stages, each a
// (128, 64) tile of a and a (64, 128) tile of b, and two mbarriers a stage:
//
//                  full[s]: the stage's bytes have landed      empty[s]: both consumers are done
//   producer   wait empty[0] -> TMA a, b -> full[0] | wait empty[1] -> TMA -> full[1] | ...
//   consumer 1      wait full[0] -> 4 x wgmma m64n128k16 | wait full[1] -> 4 x wgmma -> wait for
//   consumer 2        (the same, on its own 64 rows)         stage 0's wgmmas -> arrive empty[0] | ...
//
//   time ->   stage:   0    1    2    3    0    1 ...      (the producer runs up to kStages ahead)
//
// So the copies of the next k-tiles (up to three) are in flight while the tensor cores work on one,
// the overlap variant 12 got from cp.async, now without a single consumer instruction spent on
// copying: one thread issues two or four TMA copies a stage, the hardware computes every
// address, and the consumers' issue slots are all wgmma and waits. The mbarriers' phases name
// the laps of the ring: pass n over stage s is phase n of its barriers, parity n % 2, and the
// producer's first wait on a fresh `empty` (parity 1, "the phase before phase 0") passes at
// once, which is how the ring starts full of free stages.
//
// Persistent: the grid has about as many blocks as the GPU has SMs, and each block walks the
// output tiles blockIdx.x, blockIdx.x + gridDim.x, ... (every matrix of the batch, tile by
// tile). The producer does not stop at a tile's end: it starts the next tile's copies while the
// consumers still store this one's, so the ring never drains between tiles.
//
// Layouts. Every shared tile is made of (64, 64) boxes of bf16 with the 128-byte swizzle (a box
// row of 64 values is one 128-byte swizzle row; 8 rows the 1024-byte pattern), which is what a
// TMA box of 64 along the contiguous dimension writes:
//   - a K-major operand (a stored (M, K), or b stored (N, K): trans_b) is one (128, 64) box,
//     K contiguous: descriptor stride offset 1024 (8 rows to the next 8), leading unused; the
//     k-th 16 of K is 32 k bytes into each row, descriptor + 2 k (examples_hopper.cu);
//   - an MN-major operand (a stored (K, M): trans_a, or b stored (K, N), the default) is two
//     (64 K, 64 MN) boxes side by side, MN contiguous: stride offset 1024 (8 k-rows to the next
//     8), leading offset 8192 (from the first 64 of MN to the next), and the k-th 16 of K is
//     16 rows of 128 bytes on, descriptor + 128 k.
// So all four layouts are one kernel template; the wgmma's imm-trans bits say which is which.
//
// Edges. A TMA box that hangs over the tensor's edge is filled with zeros, and the mbarrier
// still counts its full bytes: ragged M, N and K cost the kernel nothing. Stores to out are
// plain, bounded stores (store_out: accumulate supported), one float at a time; a TMA store
// through shared memory would coalesce them but refuses accumulate and needs N a multiple of 4.
// What TMA does require: a tensor that starts 16-byte aligned, with rows a multiple of 16 bytes
// apart. A matrix that is not so (K = 33 in (M, K), a view one value in) is first packed by
// pack_bf16 into the kernels' workspace with rows padded to a multiple of 8 values: one read and
// write of it, where variant 12 instead falls back to copies through registers.
// Batches: one 2-D tensor map holds the whole batch when its matrices lie one after another (or
// an operand is broadcast, stride 0): matrix z of a is rows z * rows .. of the map. Rows past a
// matrix's last row are then the next matrix's, not zeros; harmless for the rows of out they
// make (not stored), and for K past its end as long as one operand is K-major (its zeros beyond
// K cancel the other's values). The one layout with both MN-major (a transposed, b not) and K
// not a multiple of 64, and batches laid out otherwise, get one launch per matrix.
//
// What awaits a GPU: everything about speed. The emulator has checked the layouts, phases and
// ordering rules (simt_hopper.cpp's sanitizer); nothing here has been timed. Registered below
// variants 12 and 13 ("Hopper only; untimed"), on a GPU only where the device is sm_90.
// A consumer releases a stage one k-tile late (wgmma_wait_group<1>): it issues k-tile t's
// wgmmas before it waits for t - 1's, so the tensor cores always have a group queued, and each
// consumer holds two stages at a time (of four). Next steps once it runs: a (128, 256) tile, a
// TMA-store epilogue,
// clusters with TMA multicast.
// The epilogue is a parameter (Epilogue): plain stores (or adds) for matmul on bf16 data, or
// variant 11's bias + GELU with pre kept, for matmul_bias_gelu on bf16 data (the same kernel).
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul/gemm.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "kernels/registry.h"

#if !BRRR_EMULATOR
#include "kernels/cuda/check.h"  // BRRR_CUDA_CHECK
#endif

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

// ---------------------------------------------------------------------------------------------
// The tiles and the ring

constexpr int kBM = 128, kBN = 128, kBK = 64;  // the block's tile of out, and one k-tile
constexpr int kBox = 64;                       // a TMA box is 64 x 64 (or 64 x 128) bf16
constexpr int kStages = 4;
constexpr int kConsumers = 2;                        // warpgroups of wgmma, 64 rows of out each
constexpr int kThreads = 128 * (1 + kConsumers);     // the producer warpgroup, then the consumers
constexpr int kABytes = kBM * kBK * 2, kBBytes = kBN * kBK * 2;  // 16 KiB each
constexpr int kStageBytes = kABytes + kBBytes;                    // what full[s] expects
constexpr int kBoxBytes = kBox * kBox * 2;                        // 8 KiB: one 64 x 64 box
constexpr std::size_t kSharedBytes = 1024 + std::size_t{kStages} * kStageBytes;  // + alignment slack
static_assert(kSharedBytes == 132096, "4 stages of 32 KiB and the slack to align them to 1024 bytes");
// setmaxnreg: the producer keeps 40 registers, the consumers rise to 232 (128 x 40 + 256 x 232
// = 64,512 of the SM's 65,536), as CUTLASS's warp-specialized kernels do.
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;

// Where matrix z of an operand starts in its tensor map, in rows (0: broadcast).
struct Batched {
  int rows_per_matrix;
};

// The epilogue: bias == nullptr stores a @ b (or adds it, accumulating); otherwise out =
// gelu(a @ b + bias) and pre = a @ b unless nullptr (matmul_bias_gelu, variant 11's epilogue).
struct Epilogue {
  float* pre;         // (batch, M, N), or nullptr
  const float* bias;  // (N), or nullptr
};

// gelu(x) = 0.5 x (1 + tanh u) = x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), as
// kernels/cpu/nn.cpp, gelu.cu and variant 11 (mma_sync.cu) compute it.
__device__ inline float gelu_tanh(float x) {
  return x / (1.0f + exp_of(-2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// Element (i, j) of matrix z's product, `sum`, through the epilogue into out (and pre); nothing
// outside (M, N).
__device__ inline void store_result(const Gemm<float>& g, const Epilogue& e, std::int64_t z, int i, int j, float sum) {
  if (e.bias == nullptr) {
    store_out(g, g.out + z * g.stride_out, i, j, sum);
    return;
  }
  if (i >= g.M || j >= g.N) return;
  const std::int64_t at = z * g.stride_out + static_cast<std::int64_t>(i) * g.N + j;
  if (e.pre) e.pre[at] = sum;
  g.out[at] = gelu_tanh(sum + e.bias[j]);
}

// ---------------------------------------------------------------------------------------------
// The kernel. A_MN: a is MN-major (stored (K, M)); B_MN: b is MN-major (stored (K, N)).

template <bool A_MN, bool B_MN>
__global__ void __launch_bounds__(kThreads, 1)
    matmul_wgmma_kernel(const __grid_constant__ brrr::simt::TensorMap a_map,
                        const __grid_constant__ brrr::simt::TensorMap b_map, Gemm<float> g, Batched a_batch,
                        Batched b_batch, Epilogue e) {
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  // The stages start at a multiple of 1024 bytes: the 128-byte swizzle's pattern.
  unsigned char* stages =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(shared) + 1023) & ~std::uintptr_t{1023});
  __shared__ std::uint64_t full[kStages], empty[kStages];
  const int thread = static_cast<int>(threadIdx.x), warpgroup = thread / 128;
  if (thread == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);                 // the producer's arrive, plus the stage's bytes
      mbarrier_init(&empty[s], 128 * kConsumers);  // every consumer thread, after its wgmma wait
    }
    fence_proxy_async_shared_cta();  // the inits, visible to the TMA unit that counts bytes on them
  }
  __syncthreads();  // the last block-wide barrier: from here on the roles meet only at mbarriers

  const int tiles_m = static_cast<int>(ceil_div(g.M, kBM)), tiles_n = static_cast<int>(ceil_div(g.N, kBN));
  const std::int64_t tiles = g.batch * tiles_m * tiles_n;
  const int k_tiles = static_cast<int>(ceil_div(g.K, kBK));

  if (warpgroup == 0) {
    // ---- the producer: one thread walks the tiles and k-tiles, filling the ring ----
    setmaxnreg_dec<kProducerRegisters>();
    if (thread != 0) return;
    int it = 0;  // k-tiles issued so far, over all tiles: stage it % kStages, lap it / kStages
    for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const std::int64_t z = tile / (tiles_m * tiles_n);
      const int m0 = static_cast<int>(tile % (tiles_m * tiles_n) / tiles_n) * kBM;
      const int n0 = static_cast<int>(tile % tiles_n) * kBN;
      const int a_row = static_cast<int>(z * a_batch.rows_per_matrix), b_row = static_cast<int>(z * b_batch.rows_per_matrix);
      for (int kt = 0; kt < k_tiles; ++kt, ++it) {
        const int s = it % kStages, lap = it / kStages, k0 = kt * kBK;
        mbarrier_wait_parity(&empty[s], static_cast<unsigned>((lap & 1) ^ 1));  // both consumers released it
        unsigned char* a_tile = stages + s * kStageBytes;
        unsigned char* b_tile = a_tile + kABytes;
        mbarrier_arrive_expect_tx(&full[s], kStageBytes);  // full boxes, zeros past the edges too
        if (A_MN) {  // two (64 k, 64 m) boxes
          cp_async_bulk_tensor_2d_global_to_shared(a_tile, &a_map, m0, a_row + k0, &full[s]);
          cp_async_bulk_tensor_2d_global_to_shared(a_tile + kBoxBytes, &a_map, m0 + kBox, a_row + k0, &full[s]);
        } else {  // one (128 m, 64 k) box
          cp_async_bulk_tensor_2d_global_to_shared(a_tile, &a_map, k0, a_row + m0, &full[s]);
        }
        if (B_MN) {
          cp_async_bulk_tensor_2d_global_to_shared(b_tile, &b_map, n0, b_row + k0, &full[s]);
          cp_async_bulk_tensor_2d_global_to_shared(b_tile + kBoxBytes, &b_map, n0 + kBox, b_row + k0, &full[s]);
        } else {
          cp_async_bulk_tensor_2d_global_to_shared(b_tile, &b_map, k0, b_row + n0, &full[s]);
        }
      }
    }
    return;
  }

  // ---- a consumer: 64 rows of each tile, wgmma over every stage the producer fills ----
  setmaxnreg_inc<kConsumerRegisters>();
  const int consumer = warpgroup - 1, lane = thread % 32, warp = thread % 128 / 32;
  const auto swizzle = brrr::simt::Swizzle::k128B;
  int it = 0;
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t z = tile / (tiles_m * tiles_n);
    const int m0 = static_cast<int>(tile % (tiles_m * tiles_n) / tiles_n) * kBM;
    const int n0 = static_cast<int>(tile % tiles_n) * kBN;
    float d[kBN / 2];  // this thread's 64 of the consumer's (64, 128) accumulators
    for (float& v : d) v = 0.0f;
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      const int s = it % kStages, lap = it / kStages;
      mbarrier_wait_parity(&full[s], static_cast<unsigned>(lap & 1));  // the stage's bytes have landed
      // This consumer's 64 rows of a: the second half of the (128, 64) box, or the second box.
      const unsigned char* a_tile = stages + s * kStageBytes + consumer * kBoxBytes;
      const unsigned char* b_tile = stages + s * kStageBytes + kABytes;
      const std::uint64_t a_desc =
          A_MN ? wgmma_descriptor(a_tile, kBoxBytes, 1024, swizzle) : wgmma_descriptor(a_tile, 16, 1024, swizzle);
      const std::uint64_t b_desc =
          B_MN ? wgmma_descriptor(b_tile, kBoxBytes, 1024, swizzle) : wgmma_descriptor(b_tile, 16, 1024, swizzle);
      wgmma_fence();  // the accumulators' last writes (zeros, the previous k-tile) before the wgmmas
      BRRR_UNROLL
      for (int k = 0; k < kBK / 16; ++k) {
        // The k-th 16 of the k-tile: 32 bytes along a K-major row, 16 rows of 128 bytes down an MN-major box.
        const std::uint64_t a_k = a_desc + (A_MN ? 128 : 2) * k, b_k = b_desc + (B_MN ? 128 : 2) * k;
        wgmma_m64nNk16_bf16<kBN, A_MN, B_MN>(d, a_k, b_k, 1);
      }
      wgmma_commit_group();
      // Wait for the previous k-tile's wgmmas only, not this one's: the tensor cores go on with
      // this stage while the previous one goes back to the producer.
      wgmma_wait_group<1>();
      if (kt > 0) mbarrier_arrive(&empty[(it + kStages - 1) % kStages]);
    }
    wgmma_wait_group<0>();  // the tile's last wgmmas: their stage, and the accumulators, are ready
    if (k_tiles > 0) mbarrier_arrive(&empty[(it + kStages - 1) % kStages]);
    // The accumulators into out, bounded: warp w of the consumer holds rows 16 w .. 16 w + 15,
    // value 4 j + i of lane 4 q + t at (16 w + q + 8 (i / 2), 8 j + 2 t + i % 2) (simt_hopper.h).
    const int row0 = m0 + 64 * consumer + 16 * warp + lane / 4, col0 = n0 + 2 * (lane % 4);
    BRRR_UNROLL
    for (int j = 0; j < kBN / 8; ++j)
      BRRR_UNROLL
      for (int i = 0; i < 4; ++i) store_result(g, e, z, row0 + 8 * (i / 2), col0 + 8 * j + i % 2, d[4 * j + i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Operands as stored, packing, tensor maps

// An operand as stored: element (r, c) of matrix z at data[z * batch_stride + r * leading + c],
// c along the contiguous dimension (a (M, K) or (K, M); b (K, N) or (N, K)).
struct Stored {
  const __nv_bfloat16* data;
  std::int64_t batch_stride, leading, rows, cols;
  std::int64_t matrices;  // the batch, or 1 when broadcast
};

Stored stored(const brrr::bf16* data, std::int64_t batch_stride, std::int64_t batch, std::int64_t rows,
              std::int64_t cols, bool transposed) {
  Stored m;
  m.data = reinterpret_cast<const __nv_bfloat16*>(data);
  m.batch_stride = batch == 1 ? 0 : batch_stride;
  m.rows = transposed ? cols : rows;
  m.cols = transposed ? rows : cols;
  m.leading = m.cols;
  m.matrices = m.batch_stride == 0 ? 1 : batch;
  return m;
}

// What a tensor map asks: a 16-byte aligned start, rows (and matrices) a multiple of 16 bytes apart.
bool tma_ready(const Stored& m) {
  return aligned16(m.data) && m.leading % 8 == 0 && m.batch_stride % 8 == 0;
}

// dst (matrices, rows, leading) = src, each row's values past cols zero: a matrix TMA can read.
__global__ void pack_bf16_kernel(__nv_bfloat16* dst, Stored src, std::int64_t leading) {
  const std::int64_t per_matrix = src.rows * leading, total = src.matrices * per_matrix;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const std::int64_t z = e / per_matrix, r = e % per_matrix / leading, c = e % leading;
    dst[e] = c < src.cols ? src.data[z * src.batch_stride + r * src.leading + c] : __ushort_as_bfloat16(0);
  }
}

// A product of 0 through the epilogue (out = 0, out += 0, or gelu(bias)): the product when K is 0.
__global__ void zero_product_kernel(Gemm<float> g, Epilogue epilogue) {
  const std::int64_t per_matrix = static_cast<std::int64_t>(g.M) * g.N, total = g.batch * per_matrix;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step)
    store_result(g, epilogue, e / per_matrix, static_cast<int>(e % per_matrix / g.N), static_cast<int>(e % g.N), 0.0f);
}

std::int64_t packed_bytes(const Stored& m) {
  return (m.matrices * m.rows * ceil_div(m.cols, 8) * 8 * 2 + 255) / 256 * 256;
}

Stored pack(const Stored& m, void* buffer, Stream stream) {
  Stored p = m;
  p.data = static_cast<const __nv_bfloat16*>(buffer);
  p.leading = ceil_div(m.cols, 8) * 8;
  p.batch_stride = m.matrices == 1 ? 0 : m.rows * p.leading;
  BRRR_LAUNCH(pack_bf16_kernel, grid_for(m.matrices * m.rows * p.leading, 256, 1024), 256, 0, stream,
              static_cast<__nv_bfloat16*>(buffer), m, p.leading);
  return p;
}

// The tensor map of `matrices` consecutive matrices of m (rows_per_matrix rows apart), read in
// boxes of 64 along the contiguous dimension by box_rows rows.
brrr::simt::TensorMap tensor_map(const Stored& m, std::int64_t matrices, std::int64_t rows_per_matrix,
                                 std::uint32_t box_rows) {
  brrr::simt::TensorMap map;
  const std::int64_t rows = (matrices - 1) * rows_per_matrix + m.rows;
  brrr::simt::make_tensor_map_2d(&map, brrr::simt::TensorMapType::kBf16, m.data, static_cast<std::uint64_t>(m.cols),
                                 static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(m.leading) * 2, kBox,
                                 box_rows, brrr::simt::TensorMapSwizzle::k128B);
  return map;
}

// The SMs of the device (the persistent grid's size), after checking that it runs sm_90a code.
int persistent_blocks() {
#if BRRR_EMULATOR
  // The emulator runs blocks one after another: a few blocks are enough to walk several tiles each.
  return 3;
#else
  int device = 0, major = 0, minor = 0, sms = 0;
  BRRR_CUDA_CHECK(cudaGetDevice(&device));
  BRRR_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  BRRR_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  BRRR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  BRRR_CHECK(major == 9 && minor == 0, "matmul wgmma: needs a Hopper GPU (sm_90: H100, H200); this device is sm_",
             major, minor, ", which has no wgmma (use bf16_pipelined or bf16_wide)");
  return sms;
#endif
}

template <bool A_MN, bool B_MN>
void launch(const Gemm<float>& g, const Stored& a, const Stored& b, std::int64_t batch, const Epilogue& e,
            Stream stream) {
  const int tiles_m = static_cast<int>(ceil_div(g.M, kBM)), tiles_n = static_cast<int>(ceil_div(g.N, kBN));
  const std::int64_t tiles = batch * tiles_m * tiles_n;
  const Batched a_batch{a.batch_stride == 0 ? 0 : static_cast<int>(a.rows)};
  const Batched b_batch{b.batch_stride == 0 ? 0 : static_cast<int>(b.rows)};
  const brrr::simt::TensorMap a_map = tensor_map(a, a.batch_stride == 0 ? 1 : batch, a.rows, A_MN ? kBox : kBM);
  const brrr::simt::TensorMap b_map = tensor_map(b, b.batch_stride == 0 ? 1 : batch, b.rows, B_MN ? kBox : kBN);
  Gemm<float> one = g;
  one.batch = batch;
  const int blocks = static_cast<int>(std::min<std::int64_t>(tiles, persistent_blocks()));
  BRRR_LAUNCH((matmul_wgmma_kernel<A_MN, B_MN>), blocks, kThreads, kSharedBytes, stream, a_map, b_map, one, a_batch,
              b_batch, e);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The launcher

namespace {
void gemm_wgmma(const char* op, float* out, const brrr::bf16* a_bf16, const brrr::bf16* b_bf16, const MatmulShape& s,
                const Epilogue& epilogue, Stream stream) {
  const Gemm<float> g = describe<float>(op, out, nullptr, nullptr, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  Stored a = stored(a_bf16, s.stride_a, s.batch, s.M, s.K, s.trans_a);
  Stored b = stored(b_bf16, s.stride_b, s.batch, s.K, s.N, s.trans_b);
  if (g.K == 0) {  // no k-tiles, and no tensor map of 0 columns: out = 0 (+= 0 when accumulating)
    BRRR_LAUNCH(zero_product_kernel, grid_for(g.batch * g.M * g.N, 256, 1024), 256, 0, stream, g, epilogue);
    return;
  }
  // Matrices TMA cannot read as they are (misaligned, rows not a multiple of 16 bytes) are packed.
  const bool pack_a = !tma_ready(a), pack_b = !tma_ready(b);
  if (pack_a || pack_b) {
    const std::int64_t a_bytes = pack_a ? packed_bytes(a) : 0, b_bytes = pack_b ? packed_bytes(b) : 0;
    auto* buffer = static_cast<unsigned char*>(workspace(static_cast<std::size_t>(a_bytes + b_bytes), stream));
    if (pack_a) a = pack(a, buffer, stream);
    if (pack_b) b = pack(b, buffer + a_bytes, stream);
  }
  const bool a_mn = s.trans_a, b_mn = !s.trans_b;
  // One map for the whole batch when each operand's matrices lie one after another (or it is
  // broadcast), except where rows past K of both operands would meet (see the file's head).
  const auto consecutive = [&](const Stored& m) { return m.batch_stride == 0 || m.batch_stride == m.rows * m.leading; };
  const bool one_launch =
      g.batch == 1 || (consecutive(a) && consecutive(b) && !(a_mn && b_mn && g.K % kBK != 0));
  BRRR_CHECK(g.batch * (a.rows + b.rows) < (std::int64_t{1} << 31), op, ": a batch of ", g.batch, " (", g.M, ", ",
             g.K, ") @ (", g.K, ", ", g.N, ") has more rows than a tensor map's int coordinates reach");
  const auto run = [&](const Gemm<float>& gz, const Stored& az, const Stored& bz, std::int64_t batch,
                       const Epilogue& ez) {
    if (!a_mn && !b_mn) launch<false, false>(gz, az, bz, batch, ez, stream);
    else if (!a_mn) launch<false, true>(gz, az, bz, batch, ez, stream);
    else if (!b_mn) launch<true, false>(gz, az, bz, batch, ez, stream);
    else launch<true, true>(gz, az, bz, batch, ez, stream);
  };
  if (one_launch) {
    run(g, a, b, g.batch, epilogue);
    return;
  }
  for (std::int64_t z = 0; z < g.batch; ++z) {
    Gemm<float> gz = g;
    gz.out = g.out + z * g.stride_out;
    Epilogue ez = epilogue;
    if (ez.pre) ez.pre += z * g.stride_out;
    Stored az = a, bz = b;
    az.data = a.data + z * a.batch_stride, bz.data = b.data + z * b.batch_stride;
    az.batch_stride = bz.batch_stride = 0;
    run(gz, az, bz, 1, ez);
  }
}
}  // namespace

void matmul_wgmma(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& s, Stream stream) {
  gemm_wgmma("matmul wgmma", out, a, b, s, Epilogue{nullptr, nullptr}, stream);
}

void matmul_bias_gelu_wgmma(float* out, float* pre, const brrr::bf16* a, const brrr::bf16* b, const float* bias,
                            const MatmulShape& s, Stream stream) {
  BRRR_CHECK(!s.accumulate, "matmul_bias_gelu wgmma: accumulate is not supported (out = gelu(a @ b + bias) overwrites)");
  BRRR_CHECK(bias != nullptr || s.N == 0, "matmul_bias_gelu wgmma: bias is null; it must hold N = ", s.N, " values");
  gemm_wgmma("matmul_bias_gelu wgmma", out, a, b, s, Epilogue{pre, bias}, stream);
}

// ---------------------------------------------------------------------------------------------
// Registration

// Below variants 12 (10) and 13 (9) on bf16 data: never the default until a GPU has timed it.
// On the emulator always (the tests run it); on a GPU only where the device is sm_90, the one
// chip its sm_90a code runs on.
void register_matmul_wgmma_kernels() {
#if !BRRR_EMULATOR
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess || major != 9 ||
      minor != 0) {
    (void)cudaGetLastError();  // a failed query leaves no error behind for the next call
    return;
  }
#endif
  add(op::matmul_on_bf16, DeviceType::CUDA, "wgmma", &matmul_wgmma, 5,
      about("variant 14: TMA ring, producer and 2 consumer warpgroups, wgmma, persistent; Hopper only; untimed"));
  // The same kernel with variant 11's epilogue, on bf16 data: the only variant of that slot.
  add(op::matmul_bias_gelu_on_bf16, DeviceType::CUDA, "wgmma", &matmul_bias_gelu_wgmma, 5,
      about("variant 14 with bias and GELU in its epilogue (variant 11's), pre kept; Hopper only; untimed"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
