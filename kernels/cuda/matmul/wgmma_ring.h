// kernels/cuda/matmul/wgmma_ring.h: the machinery of variant 14 (wgmma.cu), with the producer's
// loop left as a parameter: the stage ring, the walk over tiles, the consumers' wgmma, the
// epilogue, and the host side that builds the tensor maps and launches. wgmma.cu gives it the
// built-in producer; exercise ex21.1 (exercises/student/tma_ring.cu) gives it the learner's.
// Chapter 21 (Hopper: warpgroups, the tensor memory accelerator and mbarriers). Read before:
// kernels/cuda/matmul/wgmma.cu's head comment (the picture of the ring). Read next: wgmma.cu's
// producer, RingProducer.
//
// A producer is a type with one function, called by thread 0 of warpgroup 0 (the other 127
// threads of the producer warpgroup have returned):
//
//   struct MyProducer {
//     template <bool A_MN, bool B_MN>
//     __device__ static void fill(const Ring& ring, const TileWalk& walk, const brrr::simt::TensorMap* a_map,
//                                 const brrr::simt::TensorMap* b_map);
//   };
//
// It must fill the ring for every k-tile of every tile of `walk`, in the order the consumers
// take them: k-tile kt of the i-th tile is the (i * walk.k_tiles + kt)-th fill of the block,
// which goes to stage it % kStages on lap it / kStages. Before writing a stage it waits on the
// stage's `empty` barrier for the lap's parity (the first lap's wait, on parity 1, passes at
// once); it then announces kStageBytes on `full` (arrive.expect_tx) and issues the copies of
// copy_a_tile and copy_b_tile, which complete `full` when their bytes have landed.
//
// Included by wgmma.cu and by the exercise's stub and solution, so it is compiled wherever they
// are (twice each: for the GPU and for the emulator, simt.h). The host functions that need no
// template (tensor maps, packing) are defined once, in wgmma.cu.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"  // workspace
#include "kernels/cuda/matmul/gemm.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::wgmma_ring {

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

// The ring in shared memory: kStages stages, each a (128, 64) tile of a then a (64, 128) tile of
// b, and two mbarriers a stage. full[s]: the stage's bytes have landed (the producer's arrive
// and kStageBytes of copies); empty[s]: both consumers are done reading it (256 arrivals).
struct Ring {
  unsigned char* stages;
  std::uint64_t* full;
  std::uint64_t* empty;
  __device__ unsigned char* a_tile(int s) const { return stages + s * kStageBytes; }
  __device__ unsigned char* b_tile(int s) const { return stages + s * kStageBytes + kABytes; }
};

// One output tile: matrix z of the batch, rows m0.., columns n0.., and the rows of each tensor
// map where matrix z's operand starts.
struct Tile {
  std::int64_t z;
  int m0, n0, a_row, b_row;
};

// The tiles one block walks (persistent: first, first + step, ... below count) and the k-tiles
// of each.
struct TileWalk {
  std::int64_t first, step, count;
  int tiles_m, tiles_n, k_tiles;
  Batched a_batch, b_batch;
  __device__ Tile at(std::int64_t tile) const {
    const std::int64_t z = tile / (std::int64_t{tiles_m} * tiles_n);
    const std::int64_t in_matrix = tile % (std::int64_t{tiles_m} * tiles_n);
    return Tile{z, static_cast<int>(in_matrix / tiles_n) * kBM, static_cast<int>(in_matrix % tiles_n) * kBN,
                static_cast<int>(z * a_batch.rows_per_matrix), static_cast<int>(z * b_batch.rows_per_matrix)};
  }
};

// k-tile k0.. of one operand's tile into dst, completing on `bar`: the 128 rows (of a) or
// columns (of b) from mn0, of the matrix whose first row in the tensor map is `row`. Two (64 k,
// 64 mn) boxes when the operand is MN-major (stored (K, M) or (K, N)), one (128 mn, 64 k) box
// when K-major (a stored (M, K), or b (N, K): trans_b). 16 KiB either way.
template <bool MN>
__device__ inline void copy_operand_tile(unsigned char* dst, const brrr::simt::TensorMap* map, int mn0, int row, int k0,
                                         std::uint64_t* bar) {
  if (MN) {
    cp_async_bulk_tensor_2d_global_to_shared(dst, map, mn0, row + k0, bar);
    cp_async_bulk_tensor_2d_global_to_shared(dst + kBoxBytes, map, mn0 + kBox, row + k0, bar);
  } else {
    cp_async_bulk_tensor_2d_global_to_shared(dst, map, k0, row + mn0, bar);
  }
}

// a's tile t and b's, by the rule above.
template <bool A_MN>
__device__ inline void copy_a_tile(unsigned char* dst, const brrr::simt::TensorMap* map, const Tile& t, int k0,
                                   std::uint64_t* bar) {
  copy_operand_tile<A_MN>(dst, map, t.m0, t.a_row, k0, bar);
}
template <bool B_MN>
__device__ inline void copy_b_tile(unsigned char* dst, const brrr::simt::TensorMap* map, const Tile& t, int k0,
                                   std::uint64_t* bar) {
  copy_operand_tile<B_MN>(dst, map, t.n0, t.b_row, k0, bar);
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

// A consumer: 64 rows of each tile, wgmma over every stage the producer fills.
template <bool A_MN, bool B_MN>
__device__ inline void consume(const Ring& ring, const TileWalk& walk, const Gemm<float>& g, const Epilogue& e,
                               int consumer) {
  const int thread = static_cast<int>(threadIdx.x), lane = thread % 32, warp = thread % 128 / 32;
  const auto swizzle = brrr::simt::Swizzle::k128B;
  int it = 0;
  for (std::int64_t tile = walk.first; tile < walk.count; tile += walk.step) {
    const Tile t = walk.at(tile);
    float d[kBN / 2];  // this thread's 64 of the consumer's (64, 128) accumulators
    for (float& v : d) v = 0.0f;
    for (int kt = 0; kt < walk.k_tiles; ++kt, ++it) {
      const int s = it % kStages, lap = it / kStages;
      mbarrier_wait_parity(&ring.full[s], static_cast<unsigned>(lap & 1));  // the stage's bytes have landed
      // This consumer's 64 rows of a: the second half of the (128, 64) box, or the second box.
      const unsigned char* a_tile = ring.a_tile(s) + consumer * kBoxBytes;
      const unsigned char* b_tile = ring.b_tile(s);
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
      if (kt > 0) mbarrier_arrive(&ring.empty[(it + kStages - 1) % kStages]);
    }
    wgmma_wait_group<0>();  // the tile's last wgmmas: their stage, and the accumulators, are ready
    if (walk.k_tiles > 0) mbarrier_arrive(&ring.empty[(it + kStages - 1) % kStages]);
    // The accumulators into out, bounded: warp w of the consumer holds rows 16 w .. 16 w + 15,
    // value 4 j + i of lane 4 q + t at (16 w + q + 8 (i / 2), 8 j + 2 t + i % 2) (simt_hopper.h).
    const int row0 = t.m0 + 64 * consumer + 16 * warp + lane / 4, col0 = t.n0 + 2 * (lane % 4);
    BRRR_UNROLL
    for (int j = 0; j < kBN / 8; ++j)
      BRRR_UNROLL
      for (int i = 0; i < 4; ++i) store_result(g, e, t.z, row0 + 8 * (i / 2), col0 + 8 * j + i % 2, d[4 * j + i]);
  }
}

template <bool A_MN, bool B_MN, class Producer>
__global__ void __launch_bounds__(kThreads, 1)
    ring_kernel(const __grid_constant__ brrr::simt::TensorMap a_map, const __grid_constant__ brrr::simt::TensorMap b_map,
                Gemm<float> g, TileWalk walk, Epilogue e) {
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  __shared__ std::uint64_t full[kStages], empty[kStages];
  // The stages start at a multiple of 1024 bytes: the 128-byte swizzle's pattern.
  const Ring ring{
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(shared) + 1023) & ~std::uintptr_t{1023}),
      full, empty};
  const int thread = static_cast<int>(threadIdx.x), warpgroup = thread / 128;
  if (thread == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);                 // the producer's arrive, plus the stage's bytes
      mbarrier_init(&empty[s], 128 * kConsumers);  // every consumer thread, after its wgmma wait
    }
    fence_proxy_async_shared_cta();  // the inits, visible to the TMA unit that counts bytes on them
  }
  __syncthreads();  // the last block-wide barrier: from here on the roles meet only at mbarriers
  walk.first = blockIdx.x;
  walk.step = gridDim.x;
  if (warpgroup == 0) {
    // The producer gives its registers away; one thread walks the tiles and k-tiles, filling the ring.
    setmaxnreg_dec<kProducerRegisters>();
    if (thread == 0) Producer::template fill<A_MN, B_MN>(ring, walk, &a_map, &b_map);
    return;
  }
  setmaxnreg_inc<kConsumerRegisters>();
  consume<A_MN, B_MN>(ring, walk, g, e, warpgroup - 1);
}

// ---------------------------------------------------------------------------------------------
// The host side: operands as stored, packing, tensor maps (defined in wgmma.cu), the launch

// An operand as stored: element (r, c) of matrix z at data[z * batch_stride + r * leading + c],
// c along the contiguous dimension (a (M, K) or (K, M); b (K, N) or (N, K)).
struct Stored {
  const __nv_bfloat16* data;
  std::int64_t batch_stride, leading, rows, cols;
  std::int64_t matrices;  // the batch, or 1 when broadcast
};

Stored stored(const brrr::bf16* data, std::int64_t batch_stride, std::int64_t batch, std::int64_t rows,
              std::int64_t cols, bool transposed);
// What a tensor map asks: a 16-byte aligned start, rows (and matrices) a multiple of 16 bytes apart.
bool tma_ready(const Stored& m);
// The bytes pack(m) needs in the workspace.
std::int64_t packed_bytes(const Stored& m);
// m copied into buffer with rows padded to a multiple of 8 values (zeros past cols): a matrix TMA can read.
Stored pack(const Stored& m, void* buffer, Stream stream);
// out = 0, out += 0 or gelu(bias) through the epilogue: the product when K is 0.
void zero_product(const Gemm<float>& g, const Epilogue& epilogue, Stream stream);
// The tensor map of `matrices` consecutive matrices of m (rows_per_matrix rows apart), read in
// boxes of 64 along the contiguous dimension by box_rows rows.
brrr::simt::TensorMap tensor_map(const Stored& m, std::int64_t matrices, std::int64_t rows_per_matrix,
                                 std::uint32_t box_rows);
// The SMs of the device (the persistent grid's size), after checking that it runs sm_90a code;
// `op` names the caller in the error.
int persistent_blocks(const char* op);

template <bool A_MN, bool B_MN, class Producer>
void launch(const char* op, const Gemm<float>& g, const Stored& a, const Stored& b, std::int64_t batch,
            const Epilogue& e, Stream stream) {
  TileWalk walk{};
  walk.tiles_m = static_cast<int>(ceil_div(g.M, kBM));
  walk.tiles_n = static_cast<int>(ceil_div(g.N, kBN));
  walk.count = batch * walk.tiles_m * walk.tiles_n;
  walk.k_tiles = static_cast<int>(ceil_div(g.K, kBK));
  walk.a_batch = Batched{a.batch_stride == 0 ? 0 : static_cast<int>(a.rows)};
  walk.b_batch = Batched{b.batch_stride == 0 ? 0 : static_cast<int>(b.rows)};
  const brrr::simt::TensorMap a_map = tensor_map(a, a.batch_stride == 0 ? 1 : batch, a.rows, A_MN ? kBox : kBM);
  const brrr::simt::TensorMap b_map = tensor_map(b, b.batch_stride == 0 ? 1 : batch, b.rows, B_MN ? kBox : kBN);
  Gemm<float> one = g;
  one.batch = batch;
  const int blocks = static_cast<int>(std::min<std::int64_t>(walk.count, persistent_blocks(op)));
  BRRR_LAUNCH((ring_kernel<A_MN, B_MN, Producer>), blocks, kThreads, kSharedBytes, stream, a_map, b_map, one, walk, e);
}

// out (batch, M, N) = a @ b through the epilogue, the whole MatmulShape contract, with Producer
// filling the ring. `op` names the caller in errors.
template <class Producer>
void gemm(const char* op, float* out, const brrr::bf16* a_bf16, const brrr::bf16* b_bf16, const MatmulShape& s,
          const Epilogue& epilogue, Stream stream) {
  const Gemm<float> g = describe<float>(op, out, nullptr, nullptr, s);
  if (g.M == 0 || g.N == 0 || g.batch == 0) return;
  Stored a = stored(a_bf16, s.stride_a, s.batch, s.M, s.K, s.trans_a);
  Stored b = stored(b_bf16, s.stride_b, s.batch, s.K, s.N, s.trans_b);
  if (g.K == 0) {  // no k-tiles, and no tensor map of 0 columns: out = 0 (+= 0 when accumulating)
    zero_product(g, epilogue, stream);
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
  // broadcast), except where rows past K of both operands would meet (wgmma.cu's head comment).
  const auto consecutive = [&](const Stored& m) { return m.batch_stride == 0 || m.batch_stride == m.rows * m.leading; };
  const bool one_launch =
      g.batch == 1 || (consecutive(a) && consecutive(b) && !(a_mn && b_mn && g.K % kBK != 0));
  BRRR_CHECK(g.batch * (a.rows + b.rows) < (std::int64_t{1} << 31), op, ": a batch of ", g.batch, " (", g.M, ", ",
             g.K, ") @ (", g.K, ", ", g.N, ") has more rows than a tensor map's int coordinates reach");
  const auto run = [&](const Gemm<float>& gz, const Stored& az, const Stored& bz, std::int64_t batch,
                       const Epilogue& ez) {
    if (!a_mn && !b_mn) launch<false, false, Producer>(op, gz, az, bz, batch, ez, stream);
    else if (!a_mn) launch<false, true, Producer>(op, gz, az, bz, batch, ez, stream);
    else if (!b_mn) launch<true, false, Producer>(op, gz, az, bz, batch, ez, stream);
    else launch<true, true, Producer>(op, gz, az, bz, batch, ez, stream);
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

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::wgmma_ring
