// kernels/cuda/matmul/wgmma.cu: matmul on Hopper's warpgroup tensor cores, variant 14: TMA
// copies into a ring of shared-memory stages, a producer warpgroup and two consumer warpgroups
// that pass the stages between them through mbarriers, wgmma straight from shared memory, a
// persistent grid. bf16 a and b in memory, float32 sums and out (op::matmul_on_bf16, "wgmma"),
// and the same with variant 11's bias + GELU epilogue (op::matmul_bias_gelu_on_bf16, "wgmma").
// Chapter 14 (matmul from naive to tensor cores), its Hopper section, and chapter 21. Read before:
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
//
// Where the code is. The kernel, the consumers and the host side live in wgmma_ring.h, with the
// producer as a template parameter; this file holds the producer (RingProducer below), the host
// functions that need no template, and the registration. The split lets exercise ex21.1
// (chapter 21) hand the same kernel a learner's producer.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul/gemm.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/matmul/wgmma_ring.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "kernels/registry.h"

#if !BRRR_EMULATOR
#include "kernels/cuda/check.h"  // BRRR_CUDA_CHECK
#include "kernels/cuda/hopper_device.h"
#endif

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// ---------------------------------------------------------------------------------------------
// The producer: the ring's loop (the kernel, the consumers and the host side are wgmma_ring.h's)

namespace wgmma_ring {

// One thread walks the block's tiles and their k-tiles, filling the ring: it waits until both
// consumers have released the stage (its `empty` barrier's phase for this lap), announces the
// stage's bytes on `full`, and issues the copies, which complete `full` as they land. It never
// waits for the copies themselves: it runs up to kStages k-tiles ahead of the consumers, and
// on into the next tile while they still store this one's.
struct RingProducer {
  template <bool A_MN, bool B_MN>
  __device__ static void fill(const Ring& ring, const TileWalk& walk, const brrr::simt::TensorMap* a_map,
                              const brrr::simt::TensorMap* b_map) {
    int it = 0;  // k-tiles issued so far, over all tiles: stage it % kStages, lap it / kStages
    for (std::int64_t tile = walk.first; tile < walk.count; tile += walk.step) {
      const Tile t = walk.at(tile);
      for (int kt = 0; kt < walk.k_tiles; ++kt, ++it) {
        const int s = it % kStages, lap = it / kStages;
        mbarrier_wait_parity(&ring.empty[s], static_cast<unsigned>((lap & 1) ^ 1));  // both consumers released it
        mbarrier_arrive_expect_tx(&ring.full[s], kStageBytes);  // full boxes, zeros past the edges too
        copy_a_tile<A_MN>(ring.a_tile(s), a_map, t, kt * kBK, &ring.full[s]);
        copy_b_tile<B_MN>(ring.b_tile(s), b_map, t, kt * kBK, &ring.full[s]);
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// The host side's functions that need no template (declared in wgmma_ring.h)

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

namespace {

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

}  // namespace

void zero_product(const Gemm<float>& g, const Epilogue& epilogue, Stream stream) {
  BRRR_LAUNCH(zero_product_kernel, grid_for(g.batch * g.M * g.N, 256, 1024), 256, 0, stream, g, epilogue);
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
int persistent_blocks(const char* op) {
#if BRRR_EMULATOR
  // The emulator runs blocks one after another: a few blocks are enough to walk several tiles each.
  return 3;
#else
  const ComputeCapability cc = compute_capability();
  BRRR_CHECK(cc.is_sm90(), op, ": needs a Hopper GPU (sm_90: H100, H200); this device is sm_", cc.major, cc.minor,
             ", which has no wgmma (use bf16_pipelined or bf16_wide)");
  int device = 0, sms = 0;
  BRRR_CUDA_CHECK(cudaGetDevice(&device));
  BRRR_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
#endif
}

}  // namespace wgmma_ring

// ---------------------------------------------------------------------------------------------
// Variant 14: the ring with its producer

void matmul_wgmma(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& s, Stream stream) {
  wgmma_ring::gemm<wgmma_ring::RingProducer>("matmul wgmma", out, a, b, s, wgmma_ring::Epilogue{nullptr, nullptr},
                                              stream);
}

void matmul_bias_gelu_wgmma(float* out, float* pre, const brrr::bf16* a, const brrr::bf16* b, const float* bias,
                            const MatmulShape& s, Stream stream) {
  BRRR_CHECK(!s.accumulate, "matmul_bias_gelu wgmma: accumulate is not supported (out = gelu(a @ b + bias) overwrites)");
  BRRR_CHECK(bias != nullptr || s.N == 0, "matmul_bias_gelu wgmma: bias is null; it must hold N = ", s.N, " values");
  wgmma_ring::gemm<wgmma_ring::RingProducer>("matmul_bias_gelu wgmma", out, a, b, s, wgmma_ring::Epilogue{pre, bias},
                                              stream);
}

// ---------------------------------------------------------------------------------------------
// Registration

// Below variants 12 (10) and 13 (9) on bf16 data: never the default until a GPU has timed it.
// On the emulator always (the tests run it); on a GPU only where the device is sm_90, the one
// chip its sm_90a code runs on.
void register_matmul_wgmma_kernels() {
#if !BRRR_EMULATOR
  if (!device_is_sm90()) return;
#endif
  add(op::matmul_on_bf16, DeviceType::CUDA, "wgmma", &matmul_wgmma, 5,
      about("variant 14: TMA ring, producer and 2 consumer warpgroups, wgmma, persistent; Hopper only; untimed"));
  // The same kernel with variant 11's epilogue, on bf16 data: the only variant of that slot.
  add(op::matmul_bias_gelu_on_bf16, DeviceType::CUDA, "wgmma", &matmul_bias_gelu_wgmma, 5,
      about("variant 14 with bias and GELU in its epilogue (variant 11's), pre kept; Hopper only; untimed"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
