// kernels/cuda/attention/wgmma.cu: causal attention on Hopper's warpgroup tensor cores, forward
// and backward, variant 5 ("wgmma"): TMA copies into a ring of shared-memory stages, a producer
// warpgroup and two consumer warpgroups meeting at mbarriers, every tile product a wgmma, the
// softmax weights handed from accumulators to the next wgmma in registers. bf16 q, k, v, out and
// dout in memory, float32 statistics (lse, D) and gradients: the slots of variant 4
// (op::attention_forward_on_bf16, op::attention_backward_on_bf16). Head sizes 64 and 128.
// Chapter 15 (flash attention), its Hopper section. Read before: kernels/cuda/matmul/wgmma.cu
// (the same ring in a GEMM: every Hopper instruction, the swizzled boxes and their
// descriptors) and kernels/cuda/attention/mma_sync.cu (variant 4: the same arithmetic one warp
// wide). Read next: framework/src/ops_attention.cpp (the op that calls these).
//
// The forward's picture (FlashAttention-3's structure). A block owns 128 query rows of one head
// and has three warpgroups: the producer, and two consumers of 64 rows each. Section j of a
// consumer issues S_j = q k_j^T and o += P_{j-1} v_{j-1} (wgmma), then does the softmax of S_j
// while o += P_{j-1} v_{j-1} is still on the tensor cores (the overlap within a warpgroup); the
// consumers issue their sections in turns (ping-pong), so one's softmax runs under the other's
// wgmmas (the overlap between warpgroups):
//
//   producer    TMA q | TMA k_0, v_0 | TMA k_1, v_1 | k_2 (once k_0 is released), v_2 (v_0) | ...
//   consumer 1  [S_0] softmax_0      [S_1, P_0 v_0] softmax_1 ...     [S_2, P_1 v_1] ...
//   consumer 2         [S_0] softmax_0             [S_1, P_0 v_0] softmax_1         [S_2, ...
//               ([...]: a section's wgmmas, issued in its turn; turn[c], an mbarrier per consumer)
//
// k and v have barriers of their own (k_full, v_full; k_empty, v_empty, named x and y below,
// which the backward shares): S_j starts while v_j is still landing, and k_j goes back to the
// producer as soon as S_j is done. The scores' accumulators are laid out as mma.m16n8k16's
// (simt_hopper.h), so two adjacent 8-column chunks of S are exactly the A fragment of a k16
// step of P v: P never goes through shared memory (FlashAttention-2's trick, as variant 3 does
// it). Key tiles are 128 keys; the block walks the tiles up to its diagonal, masking keys past
// the query (causal) and past T. FlashAttention-3 orders the turns with named barriers (bar.sync
// with an id), which the emulator does not have; two mbarriers do the same here.
//
// The backward (FlashAttention-2's loop order, on wgmma), after one pass that computes
// D_i = dout_i . out_i (common.h). Writing P = exp(S - lse) and dS = P (dP - D):
//   - dk, dv: a block owns 128 keys (64 a consumer, the wgmma's M) and streams the query tiles
//     that see them (64 queries, TMA: q and dout), computing S^T = k q^T and dP^T = v dout^T
//     with keys as rows, then dv += P^T dout and dk += dS^T q with P^T and dS^T from registers.
//     One shared tile of q serves both products: as a K-major B for k q^T, as an MN-major B for
//     dS^T q (the same swizzled bytes, two descriptors), and so does dout.
//   - dq: a block owns 128 queries and streams the key tiles up to its diagonal (64 keys),
//     recomputing S and dP, and accumulates dq += dS k.
// Each product is its own wgmma group, so the exponentials of P run while dP is still on the
// tensor cores, and (dk, dv) dS^T while dv += P^T dout is.
// Nothing is summed by atomics: every gradient is one block's registers, so two runs give the
// same bits (docs/design.md, reproducibility). The price is S and dP computed twice (in both
// kernels), 7 tile products per tile pair where FlashAttention-3 does 5 and adds dq by float
// atomics.
//
// Edges. The tensor maps are 2-D: (BH T rows, hs) for each of q, k, v, dout. A box that runs
// past a head's last row reads the next head's rows (past the last head: zeros); they are
// masked (keys past T get no weight, queries past T are not stored and their P and dS are 0),
// so any T works without padding. TMA needs the matrices 16-byte aligned (rows are 128 or 256
// bytes), the gradients' float2 stores dq, dk, dv 8-byte aligned; other pointers are refused.
//
// What awaits a GPU: everything about speed. The emulator has checked the layouts, phases and
// ordering rules (simt_hopper.cpp); nothing here has been timed. (Its counters mode counts the
// stores, whole sectors, but not TMA's copies.) Registered below variant 4
// ("Hopper only; untimed"), on a GPU only where the device is sm_90, as matmul's variant 14.
#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/common.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "kernels/registry.h"

#if !BRRR_EMULATOR
#include "kernels/cuda/check.h"  // BRRR_CUDA_CHECK
#include "kernels/cuda/hopper_device.h"
#endif

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

using brrr::simt::TensorMap;

// ---------------------------------------------------------------------------------------------
// What the kernels share: the block, the boxes, descriptors, fragments

constexpr int kConsumers = 2;                     // warpgroups of wgmma, 64 rows (M) each
constexpr int kThreads = 128 * (1 + kConsumers);  // the producer warpgroup, then the consumers
constexpr int kRows = 64 * kConsumers;            // the block's own rows: queries, or keys
constexpr int kBox = 64;                          // a box is 64 bf16 wide: one 128-byte swizzle row
constexpr int kStages = 2;
// setmaxnreg, as FlashAttention-3 sets it: 128 x 24 + 256 x 240 = 64,512 of the SM's 65,536. (With
// matmul's 40 and 232, ptxas spilled 8 bytes in the dk, dv kernel at hs = 128.)
constexpr int kProducerRegisters = 24, kConsumerRegisters = 240;
constexpr auto kSwizzle = brrr::simt::Swizzle::k128B;

// The bytes of a tile of `rows` rows of hs bf16, stored as hs / 64 boxes of (rows, 64) side by side.
__host__ __device__ constexpr int tile_bytes(int rows, int hs) { return rows * hs * 2; }

// The stages start at a multiple of 1024 bytes: the 128-byte swizzle's pattern.
__device__ inline unsigned char* aligned_1024(unsigned char* shared) {
  return reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(shared) + 1023) & ~std::uintptr_t{1023});
}

// The descriptor of the ks-th 16 columns of a tile read K-major (rows are M or N, the head
// dimension is K): box ks / 4, 32 bytes on per step within its 128-byte rows, 8 rows 1024
// bytes apart (matmul/wgmma.cu, "Layouts"). row0: the first of the 64 rows a wgmma reads (a
// multiple of 8).
__device__ inline std::uint64_t k_major(const unsigned char* tile, int rows, int row0, int ks) {
  return wgmma_descriptor(tile + (ks / 4) * rows * 128 + row0 * 128, 16, 1024, kSwizzle) + 2 * (ks % 4);
}

// The descriptor of the kk-th 16 rows of a tile read MN-major (rows are K, the head dimension
// is N): 16 rows of 128 bytes on per step, the next 64 of N one box (rows x 128 bytes) on.
__device__ inline std::uint64_t mn_major(const unsigned char* tile, int rows, int kk) {
  return wgmma_descriptor(tile, static_cast<unsigned>(rows * 128), 1024, kSwizzle) + 128 * kk;
}

// Two floats as two bf16 in one 32-bit register (lo in the lower half).
__device__ inline unsigned pack_two(float lo, float hi) {
  return static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(lo))) |
         static_cast<unsigned>(__bfloat16_as_ushort(__float2bfloat16_rn(hi))) << 16;
}

// Accumulators (64 x N) to A fragments of N / 16 k16 steps, rounded to bf16: step kk is
// chunks 2 kk and 2 kk + 1, register r of it values 2 r and 2 r + 1 of those 8 (mma.m16n8k16's
// a0 .. a3: rows g and g + 8, columns 2t and 2t + 8).
template <int N>
__device__ inline void to_fragments(const float (&acc)[N / 2], unsigned (&a)[N / 16][4]) {
  BRRR_UNROLL
  for (int kk = 0; kk < N / 16; ++kk)
    BRRR_UNROLL
    for (int r = 0; r < 4; ++r) a[kk][r] = pack_two(acc[8 * kk + 2 * r], acc[8 * kk + 2 * r + 1]);
}

// The row (0 or 1: g, g + 8 of the warp's 16) and column of accumulator value i of chunk j
// of lane 4 g + t.
__device__ inline int acc_half(int i) { return i / 2; }
__device__ inline int acc_column(int j, int i, int t) { return 8 * j + 2 * t + i % 2; }

__device__ inline float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ inline float quad_add(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Pins accumulators at this point of the instruction stream (CUTLASS's warpgroup_fence_operand):
// an empty asm that reads and writes each register. A wgmma_wait_group names no register, so
// nothing else keeps the compiler from moving a read of the scores above the wait that makes
// them valid, or a write of o into the wgmmas still adding to it. It emits no instruction; the
// emulator needs none (its wgmma is done when it returns). (What did make ptxas serialize every
// wgmma of the forward, its warning C7514, was a first version's one loop with the sections'
// products under branches; with the first and last sections peeled off, as below, it does not,
// with or without the pins.)
template <int N>
__device__ inline void pin(float (&x)[N]) {
#if defined(__CUDA_ARCH__)
  BRRR_UNROLL
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(x[i])::"memory");
#else
  (void)x;
#endif
}

// The mbarriers of a ring of kStages stages of two tiles (x, y: k and v, or q and dout), and
// of the block's own tiles, filled once. x and y are released apart (x_empty, y_empty): the
// forward is done with k before v. turn[c]: consumer c's turn to issue its wgmmas (the
// forward's ping-pong).
struct Barriers {
  std::uint64_t own, x_full[kStages], y_full[kStages], x_empty[kStages], y_empty[kStages], turn[kConsumers];
};

__device__ inline void init_barriers(Barriers& b) {
  mbarrier_init(&b.own, 1);  // the producer's arrive, plus the tiles' bytes
  for (int s = 0; s < kStages; ++s) {
    mbarrier_init(&b.x_full[s], 1);
    mbarrier_init(&b.y_full[s], 1);
    mbarrier_init(&b.x_empty[s], 128 * kConsumers);  // every consumer thread
    mbarrier_init(&b.y_empty[s], 128 * kConsumers);
  }
  for (int c = 0; c < kConsumers; ++c) mbarrier_init(&b.turn[c], 128);  // the other consumer's threads
  fence_proxy_async_shared_cta();  // the inits, visible to the TMA unit that counts bytes on them
}

// A backward consumer is done with stage s: both its tiles go back to the producer.
__device__ inline void release(Barriers& b, int s) {
  mbarrier_arrive(&b.x_empty[s]);
  mbarrier_arrive(&b.y_empty[s]);
}

// Issued by the producer's one thread: the block's own tiles (own_x and own_y, kRows rows from
// row `row`; own_y null: one tile) at `own`, then `tiles` streamed tiles of `stream_rows` rows
// from row `first` on, x into stage s's first tile, y after it.
template <int HS>
__device__ inline void produce(Barriers& b, unsigned char* own, const TensorMap* own_x, const TensorMap* own_y,
                               int row, unsigned char* stages, const TensorMap* x, const TensorMap* y, int first,
                               int stream_rows, int tiles) {
  constexpr int kOwn = tile_bytes(kRows, HS);
  const int stream_bytes = tile_bytes(stream_rows, HS);
  mbarrier_arrive_expect_tx(&b.own, static_cast<unsigned>(own_y ? 2 * kOwn : kOwn));
  for (int box = 0; box < HS / kBox; ++box) {
    cp_async_bulk_tensor_2d_global_to_shared(own + box * kRows * 128, own_x, kBox * box, row, &b.own);
    if (own_y) cp_async_bulk_tensor_2d_global_to_shared(own + kOwn + box * kRows * 128, own_y, kBox * box, row, &b.own);
  }
  for (int j = 0; j < tiles; ++j) {
    const int s = j % kStages, lap = j / kStages, r = first + j * stream_rows;
    const unsigned released = static_cast<unsigned>((lap & 1) ^ 1);  // lap 0: passes at once
    unsigned char* x_tile = stages + s * 2 * stream_bytes;
    mbarrier_wait_parity(&b.x_empty[s], released);  // both consumers released the stage's x
    mbarrier_arrive_expect_tx(&b.x_full[s], static_cast<unsigned>(stream_bytes));  // full boxes, zeros past the end
    for (int box = 0; box < HS / kBox; ++box)
      cp_async_bulk_tensor_2d_global_to_shared(x_tile + box * stream_rows * 128, x, kBox * box, r, &b.x_full[s]);
    mbarrier_wait_parity(&b.y_empty[s], released);
    mbarrier_arrive_expect_tx(&b.y_full[s], static_cast<unsigned>(stream_bytes));
    for (int box = 0; box < HS / kBox; ++box)
      cp_async_bulk_tensor_2d_global_to_shared(x_tile + stream_bytes + box * stream_rows * 128, y, kBox * box, r,
                                               &b.y_full[s]);
  }
}

// ---------------------------------------------------------------------------------------------
// The forward

constexpr int kKeys = 128;  // keys a stage (the forward)

template <int HS>
constexpr std::size_t forward_shared_bytes() {  // + slack to align to 1024
  return 1024 + tile_bytes(kRows, HS) + std::size_t{kStages} * 2 * tile_bytes(kKeys, HS);
}

// The online softmax of one key tile on a consumer's scores, as variant 3's, up to the weights:
// masks keys past the row and past T, takes the new row maxima (log2 units), turns the scores
// into exp2(s - m) in place and adds them to l. Returns by how much the rows' earlier sums (l
// here, o by the caller, once the wgmma still adding into it is done) shrink: correction.
__device__ inline void softmax_tile(float (&s)[kKeys / 2], float (&m)[2], float (&l)[2], float (&correction)[2],
                                    const int (&row)[2], int k0, int T_len, float scale_log2, int t) {
  const bool edge = k0 + kKeys - 1 > row[0] || k0 + kKeys > T_len;  // some key of the tile is masked
  float tile_max[2] = {-INFINITY, -INFINITY};
  BRRR_UNROLL
  for (int j = 0; j < kKeys / 8; ++j)
    BRRR_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int h = acc_half(i), key = k0 + acc_column(j, i, t);
      float& x = s[4 * j + i];
      x = !edge || (key <= row[h] && key < T_len) ? x * scale_log2 : -INFINITY;
      tile_max[h] = fmaxf(tile_max[h], x);
    }
  for (int h = 0; h < 2; ++h) {
    const float m_new = fmaxf(m[h], quad_max(tile_max[h]));  // the quad shares the row
    correction[h] = exp2f(m[h] - m_new);
    m[h] = m_new;
    l[h] *= correction[h];
  }
  BRRR_UNROLL
  for (int e = 0; e < kKeys / 2; ++e) {
    s[e] = exp2f(s[e] - m[acc_half(e % 4)]);
    l[acc_half(e % 4)] += s[e];
  }
}

// Ping-pong: the two consumers issue their wgmmas in turns, consumer 0's n-th section, then
// consumer 1's, then consumer 0's (n + 1)-th, ..., each arriving on the other's turn barrier
// when its section is issued. turn[c]'s phase n completes with the other consumer's section n
// (consumer 1) or n - 1 (consumer 0, whose first wait, parity 1, passes at once).
__device__ inline void wait_turn(Barriers& b, int consumer, int section) {
  mbarrier_wait_parity(&b.turn[consumer], static_cast<unsigned>((section & 1) ^ (consumer == 0 ? 1 : 0)));
}

// Row h (0: g, 1: g + 8) of a consumer's o into out, times `inverse`, rounded to bf16. Lane t of
// a quad holds columns 2t, 2t + 1 of each 8-column chunk; four shuffles give it columns 4t ..
// 4t + 3 of each 16, one 8-byte store, so a warp's store fills 8 whole 32-byte sectors (with a
// 4-byte store of each pair it filled half of 8 sectors per 64 bytes: `brrr kernel-lab
// attention_forward --dtype bfloat16 --device emulator --mode counters --variant wgmma` counted
// 1.97x the least bytes written). Every lane shuffles; `inside` (row < T) says who stores.
template <int HS>
__device__ inline void store_row(__nv_bfloat16* out_row, const float (&o)[HS / 2], int h, float inverse, bool inside,
                                 int t) {
  const int lane = static_cast<int>(threadIdx.x) % 32, from = (lane & ~3) + 2 * (t % 2);  // pairs 2t%4, +1
  BRRR_UNROLL
  for (int c = 0; c < HS / 16; ++c) {
    const float* lo = &o[8 * c + 2 * h];  // chunk 2c: o[8c + 2h], o[8c + 2h + 1]; chunk 2c + 1: 4 on
    const unsigned first = pack_two(lo[0] * inverse, lo[1] * inverse);
    const unsigned second = pack_two(lo[4] * inverse, lo[5] * inverse);
    const unsigned first_0 = __shfl_sync(0xffffffffu, first, from), first_1 = __shfl_sync(0xffffffffu, first, from + 1);
    const unsigned second_0 = __shfl_sync(0xffffffffu, second, from),
                   second_1 = __shfl_sync(0xffffffffu, second, from + 1);
    const std::uint64_t four = t < 2 ? std::uint64_t{first_0} | std::uint64_t{first_1} << 32
                                     : std::uint64_t{second_0} | std::uint64_t{second_1} << 32;
    if (inside) *reinterpret_cast<std::uint64_t*>(&out_row[16 * c + 4 * t]) = four;
  }
}

// A consumer's two products, issued as one commit group each: S (64 x 128) = q k^T (both
// K-major), and o (64 x HS) += P v (P from registers, v MN-major).
template <int HS>
__device__ inline void issue_scores(float (&scores)[kKeys / 2], const unsigned char* q_tile,
                                    const unsigned char* k_tile, int consumer) {
  BRRR_UNROLL
  for (int ks = 0; ks < HS / 16; ++ks)
    wgmma_m64nNk16_bf16<kKeys>(scores, k_major(q_tile, kRows, 64 * consumer, ks), k_major(k_tile, kKeys, 0, ks),
                               ks > 0);
  wgmma_commit_group();
}
template <int HS>
__device__ inline void issue_values(float (&o)[HS / 2], const unsigned (&p)[kKeys / 16][4],
                                    const unsigned char* v_tile) {
  BRRR_UNROLL
  for (int kk = 0; kk < kKeys / 16; ++kk) wgmma_m64nNk16_bf16<HS, true>(o, p[kk], mn_major(v_tile, kKeys, kk), 1);
  wgmma_commit_group();
}

// One consumer's 64 rows. Section 0 issues S_0; section j (1 .. key_tiles - 1) issues S_j and
// P_{j-1} v_{j-1}, then runs the softmax of S_j while P_{j-1} v_{j-1} is still on the tensor
// cores; section key_tiles issues the last P v. Sections alternate between the consumers
// (wait_turn), and k and v go back to the producer as soon as each is read.
template <int HS>
__device__ inline void forward_consumer(Barriers& b, const unsigned char* q_tile, const unsigned char* stages,
                                        __nv_bfloat16* out, float* lse, int head, int T_len, int q0, int key_tiles,
                                        float scale_log2) {
  constexpr int kStream = tile_bytes(kKeys, HS);
  const int consumer = static_cast<int>(threadIdx.x) / 128 - 1, warp = static_cast<int>(threadIdx.x) % 128 / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int row[2] = {q0 + 64 * consumer + 16 * warp + g, q0 + 64 * consumer + 16 * warp + g + 8};
  const auto k_tile = [&](int j) { return stages + j % kStages * 2 * kStream; };
  const auto v_tile = [&](int j) { return stages + j % kStages * 2 * kStream + kStream; };
  const auto lap = [](int j) { return static_cast<unsigned>(j / kStages & 1); };
  float o[HS / 2] = {}, scores[kKeys / 2] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float correction[2];
  unsigned p[kKeys / 16][4];  // the last tile's weights, waiting for its v
  mbarrier_wait_parity(&b.own, 0);  // q has landed

  mbarrier_wait_parity(&b.x_full[0], 0);  // section 0
  wait_turn(b, consumer, 0);
  pin(scores);
  wgmma_fence();
  issue_scores<HS>(scores, q_tile, k_tile(0), consumer);
  pin(scores);
  mbarrier_arrive(&b.turn[1 - consumer]);  // the other consumer's turn to issue
  wgmma_wait_group<0>();
  pin(scores);
  mbarrier_arrive(&b.x_empty[0]);  // k_0 is read
  softmax_tile(scores, m, l, correction, row, 0, T_len, scale_log2, t);
  to_fragments<kKeys>(scores, p);  // (o is still 0: nothing to rescale)

  for (int j = 1; j < key_tiles; ++j) {
    mbarrier_wait_parity(&b.x_full[j % kStages], lap(j));
    mbarrier_wait_parity(&b.y_full[(j - 1) % kStages], lap(j - 1));
    wait_turn(b, consumer, j);
    pin(scores), pin(o);
    wgmma_fence();  // o and p were written in registers: before the wgmmas that read them
    issue_scores<HS>(scores, q_tile, k_tile(j), consumer);
    issue_values<HS>(o, p, v_tile(j - 1));
    pin(scores), pin(o);
    mbarrier_arrive(&b.turn[1 - consumer]);
    wgmma_wait_group<1>();  // S_j is done; P_{j-1} v_{j-1} may still run
    pin(scores);
    mbarrier_arrive(&b.x_empty[j % kStages]);
    softmax_tile(scores, m, l, correction, row, j * kKeys, T_len, scale_log2, t);
    wgmma_wait_group<0>();
    pin(o);
    mbarrier_arrive(&b.y_empty[(j - 1) % kStages]);  // v_{j-1} is read
    BRRR_UNROLL
    for (int e = 0; e < HS / 2; ++e) o[e] *= correction[acc_half(e % 4)];  // o, to tile j's maxima
    to_fragments<kKeys>(scores, p);
  }

  const int last = key_tiles - 1;  // section key_tiles
  mbarrier_wait_parity(&b.y_full[last % kStages], lap(last));
  wait_turn(b, consumer, key_tiles);
  pin(o);
  wgmma_fence();
  issue_values<HS>(o, p, v_tile(last));
  pin(o);
  mbarrier_arrive(&b.turn[1 - consumer]);
  wgmma_wait_group<0>();
  pin(o);
  mbarrier_arrive(&b.y_empty[last % kStages]);
  for (int h = 0; h < 2; ++h) {
    const float row_l = quad_add(l[h]), inverse = 1.0f / row_l;
    const std::int64_t at = static_cast<std::int64_t>(head) * T_len + row[h];
    const bool inside = row[h] < T_len;
    store_row<HS>(inside ? out + at * HS : out, o, h, inverse, inside, t);
    if (t == 0 && inside) lse[at] = (m[h] + log2f(row_l)) * 0.69314718f;  // log2 units to natural log
  }
}

template <int HS>
__global__ void __launch_bounds__(kThreads, 1)
    attention_forward_wgmma_kernel(const __grid_constant__ TensorMap q_map, const __grid_constant__ TensorMap k_map,
                                   const __grid_constant__ TensorMap v_map, __nv_bfloat16* out, float* lse, int T_len,
                                   float scale_log2) {
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  unsigned char* q_tile = aligned_1024(shared);
  unsigned char* stages = q_tile + tile_bytes(kRows, HS);
  __shared__ Barriers barriers;
  const int head = static_cast<int>(blockIdx.x), q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kRows;
  const int key_tiles = static_cast<int>(ceil_div(min(T_len, q0 + kRows), kKeys));  // up to the diagonal
  if (threadIdx.x == 0) init_barriers(barriers);
  __syncthreads();  // the last block-wide barrier: from here on the roles meet only at mbarriers
  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == 0)
      produce<HS>(barriers, q_tile, &q_map, nullptr, head * T_len + q0, stages, &k_map, &v_map, head * T_len, kKeys,
                  key_tiles);
    return;
  }
  setmaxnreg_inc<kConsumerRegisters>();
  forward_consumer<HS>(barriers, q_tile, stages, out, lse, head, T_len, q0, key_tiles, scale_log2);
}

// ---------------------------------------------------------------------------------------------
// The backward

constexpr int kStreamed = 64;  // queries (dk, dv) or keys (dq) a stage

template <int HS>
constexpr std::size_t backward_shared_bytes() {  // own x, y; the stages; slack to align to 1024
  return 1024 + 2 * tile_bytes(kRows, HS) + std::size_t{kStages} * 2 * tile_bytes(kStreamed, HS);
}

// dk, dv: this consumer's 64 keys (its rows of the block's k and v) against the streamed
// query tiles (q, dout), keys as the wgmmas' rows.
template <int HS>
__device__ inline void dkdv_consumer(Barriers& b, const unsigned char* kv, const unsigned char* stages, float* dk,
                                     float* dv, const float* lse, const float* D, int head, int T_len, int k0,
                                     int tiles, float scale) {
  constexpr int kStream = tile_bytes(kStreamed, HS);
  const int consumer = static_cast<int>(threadIdx.x) / 128 - 1, warp = static_cast<int>(threadIdx.x) % 128 / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int key[2] = {k0 + 64 * consumer + 16 * warp + g, k0 + 64 * consumer + 16 * warp + g + 8};
  const unsigned char* k_tile = kv;
  const unsigned char* v_tile = kv + tile_bytes(kRows, HS);
  const float* lse_head = lse + static_cast<std::int64_t>(head) * T_len;
  const float* D_head = D + static_cast<std::int64_t>(head) * T_len;
  float dk_acc[HS / 2] = {}, dv_acc[HS / 2] = {};
  mbarrier_wait_parity(&b.own, 0);  // k and v have landed
  for (int j = 0; j < tiles; ++j) {
    const int s = j % kStages, q0 = k0 + j * kStreamed;
    const unsigned parity = static_cast<unsigned>(j / kStages & 1);
    const unsigned char* q_tile = stages + s * 2 * kStream;
    const unsigned char* do_tile = q_tile + kStream;
    float st[kStreamed / 2] = {}, dpt[kStreamed / 2] = {};
    mbarrier_wait_parity(&b.x_full[s], parity);
    mbarrier_wait_parity(&b.y_full[s], parity);
    pin(st), pin(dpt), pin(dk_acc), pin(dv_acc);
    wgmma_fence();
    BRRR_UNROLL
    for (int ks = 0; ks < HS / 16; ++ks)  // S^T = k q^T: both K-major
      wgmma_m64nNk16_bf16<kStreamed>(st, k_major(k_tile, kRows, 64 * consumer, ks),
                                     k_major(q_tile, kStreamed, 0, ks), ks > 0);
    wgmma_commit_group();
    BRRR_UNROLL
    for (int ks = 0; ks < HS / 16; ++ks)  // dP^T = v dout^T, its own group
      wgmma_m64nNk16_bf16<kStreamed>(dpt, k_major(v_tile, kRows, 64 * consumer, ks),
                                     k_major(do_tile, kStreamed, 0, ks), ks > 0);
    wgmma_commit_group();
    pin(st), pin(dpt);
    wgmma_wait_group<1>();  // S^T is done: P^T while dP^T runs
    pin(st);
    BRRR_UNROLL
    for (int e = 0; e < kStreamed / 2; ++e) {  // columns are queries
      const int query = q0 + acc_column(e / 4, e % 4, t), h = acc_half(e % 4);
      const bool seen = key[h] <= query && query < T_len;
      st[e] = seen ? __expf(st[e] * scale - lse_head[seen ? query : 0]) : 0.0f;
    }
    unsigned p[kStreamed / 16][4], ds[kStreamed / 16][4];
    to_fragments<kStreamed>(st, p);
    wgmma_fence();
    BRRR_UNROLL
    for (int kk = 0; kk < kStreamed / 16; ++kk)  // dv += P^T dout: dout MN-major
      wgmma_m64nNk16_bf16<HS, true>(dv_acc, p[kk], mn_major(do_tile, kStreamed, kk), 1);
    wgmma_commit_group();
    pin(dv_acc);
    wgmma_wait_group<1>();  // dP^T is done: dS^T while dv's wgmmas run
    pin(dpt);
    BRRR_UNROLL
    for (int e = 0; e < kStreamed / 2; ++e) {
      const int query = q0 + acc_column(e / 4, e % 4, t);
      dpt[e] = st[e] * (dpt[e] - (query < T_len ? D_head[query] : 0.0f));  // (P^T is 0 where unseen)
    }
    to_fragments<kStreamed>(dpt, ds);
    wgmma_fence();
    BRRR_UNROLL
    for (int kk = 0; kk < kStreamed / 16; ++kk)  // dk += dS^T q: q MN-major
      wgmma_m64nNk16_bf16<HS, true>(dk_acc, ds[kk], mn_major(q_tile, kStreamed, kk), 1);
    wgmma_commit_group();
    pin(dk_acc);
    wgmma_wait_group<0>();
    pin(dv_acc), pin(dk_acc);
    release(b, s);
  }
  for (int h = 0; h < 2; ++h) {
    if (key[h] >= T_len) continue;
    const std::int64_t at = (static_cast<std::int64_t>(head) * T_len + key[h]) * HS;
    BRRR_UNROLL
    for (int j = 0; j < HS / 8; ++j) {
      *reinterpret_cast<float2*>(&dk[at + 8 * j + 2 * t]) =
          make_float2(dk_acc[4 * j + 2 * h] * scale, dk_acc[4 * j + 2 * h + 1] * scale);
      *reinterpret_cast<float2*>(&dv[at + 8 * j + 2 * t]) =
          make_float2(dv_acc[4 * j + 2 * h], dv_acc[4 * j + 2 * h + 1]);
    }
  }
}

// dq: this consumer's 64 queries (its rows of the block's q and dout) against the streamed key
// tiles (k, v) up to the block's diagonal.
template <int HS>
__device__ inline void dq_consumer(Barriers& b, const unsigned char* q_do, const unsigned char* stages, float* dq,
                                   const float* lse, const float* D, int head, int T_len, int q0, int tiles,
                                   float scale) {
  constexpr int kStream = tile_bytes(kStreamed, HS);
  const int consumer = static_cast<int>(threadIdx.x) / 128 - 1, warp = static_cast<int>(threadIdx.x) % 128 / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int row[2] = {q0 + 64 * consumer + 16 * warp + g, q0 + 64 * consumer + 16 * warp + g + 8};
  const unsigned char* q_tile = q_do;
  const unsigned char* do_tile = q_do + tile_bytes(kRows, HS);
  float L[2], Drow[2];
  for (int h = 0; h < 2; ++h) {
    const std::int64_t at = static_cast<std::int64_t>(head) * T_len + row[h];
    L[h] = row[h] < T_len ? lse[at] : 0.0f;
    Drow[h] = row[h] < T_len ? D[at] : 0.0f;
  }
  float dq_acc[HS / 2] = {};
  mbarrier_wait_parity(&b.own, 0);  // q and dout have landed
  for (int j = 0; j < tiles; ++j) {
    const int s = j % kStages, kb = j * kStreamed;
    const unsigned parity = static_cast<unsigned>(j / kStages & 1);
    const unsigned char* k_tile = stages + s * 2 * kStream;
    const unsigned char* v_tile = k_tile + kStream;
    float sc[kStreamed / 2] = {}, dp[kStreamed / 2] = {};
    mbarrier_wait_parity(&b.x_full[s], parity);
    mbarrier_wait_parity(&b.y_full[s], parity);
    pin(sc), pin(dp), pin(dq_acc);
    wgmma_fence();
    BRRR_UNROLL
    for (int ks = 0; ks < HS / 16; ++ks)  // S = q k^T: both K-major
      wgmma_m64nNk16_bf16<kStreamed>(sc, k_major(q_tile, kRows, 64 * consumer, ks),
                                     k_major(k_tile, kStreamed, 0, ks), ks > 0);
    wgmma_commit_group();
    BRRR_UNROLL
    for (int ks = 0; ks < HS / 16; ++ks)  // dP = dout v^T, its own group
      wgmma_m64nNk16_bf16<kStreamed>(dp, k_major(do_tile, kRows, 64 * consumer, ks),
                                     k_major(v_tile, kStreamed, 0, ks), ks > 0);
    wgmma_commit_group();
    pin(sc), pin(dp);
    wgmma_wait_group<1>();  // S is done: P while dP runs
    pin(sc);
    BRRR_UNROLL
    for (int e = 0; e < kStreamed / 2; ++e) {  // columns are keys
      const int key = kb + acc_column(e / 4, e % 4, t), h = acc_half(e % 4);
      const bool seen = key <= row[h] && row[h] < T_len;
      sc[e] = seen ? __expf(sc[e] * scale - L[h]) : 0.0f;
    }
    wgmma_wait_group<0>();
    pin(dp);
    BRRR_UNROLL
    for (int e = 0; e < kStreamed / 2; ++e) dp[e] = sc[e] * (dp[e] - Drow[acc_half(e % 4)]);  // dS
    unsigned ds[kStreamed / 16][4];
    to_fragments<kStreamed>(dp, ds);
    wgmma_fence();
    BRRR_UNROLL
    for (int kk = 0; kk < kStreamed / 16; ++kk)  // dq += dS k: k MN-major
      wgmma_m64nNk16_bf16<HS, true>(dq_acc, ds[kk], mn_major(k_tile, kStreamed, kk), 1);
    wgmma_commit_group();
    pin(dq_acc);
    wgmma_wait_group<0>();
    pin(dq_acc);
    release(b, s);
  }
  for (int h = 0; h < 2; ++h) {
    if (row[h] >= T_len) continue;
    const std::int64_t at = (static_cast<std::int64_t>(head) * T_len + row[h]) * HS;
    BRRR_UNROLL
    for (int j = 0; j < HS / 8; ++j)
      *reinterpret_cast<float2*>(&dq[at + 8 * j + 2 * t]) =
          make_float2(dq_acc[4 * j + 2 * h] * scale, dq_acc[4 * j + 2 * h + 1] * scale);
  }
}

// The maps of the backward: q, k, v, dout.
struct BackwardMaps {
  TensorMap q, k, v, dout;
};

// Blocks (head, tile of 128 keys): dk and dv.
template <int HS>
__global__ void __launch_bounds__(kThreads, 1)
    attention_backward_dkdv_wgmma_kernel(const __grid_constant__ BackwardMaps maps, float* dk, float* dv,
                                         const float* lse, const float* D, int T_len, float scale) {
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  unsigned char* kv = aligned_1024(shared);
  unsigned char* stages = kv + 2 * tile_bytes(kRows, HS);
  __shared__ Barriers barriers;
  const int head = static_cast<int>(blockIdx.x), k0 = static_cast<int>(blockIdx.y) * kRows;
  const int tiles = static_cast<int>(ceil_div(T_len - k0, kStreamed));  // the queries from k0 on
  if (threadIdx.x == 0) init_barriers(barriers);
  __syncthreads();
  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == 0)
      produce<HS>(barriers, kv, &maps.k, &maps.v, head * T_len + k0, stages, &maps.q, &maps.dout, head * T_len + k0,
                  kStreamed, tiles);
    return;
  }
  setmaxnreg_inc<kConsumerRegisters>();
  dkdv_consumer<HS>(barriers, kv, stages, dk, dv, lse, D, head, T_len, k0, tiles, scale);
}

// Blocks (head, tile of 128 queries, the longest rows first): dq.
template <int HS>
__global__ void __launch_bounds__(kThreads, 1)
    attention_backward_dq_wgmma_kernel(const __grid_constant__ BackwardMaps maps, float* dq, const float* lse,
                                       const float* D, int T_len, float scale) {
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  unsigned char* q_do = aligned_1024(shared);
  unsigned char* stages = q_do + 2 * tile_bytes(kRows, HS);
  __shared__ Barriers barriers;
  const int head = static_cast<int>(blockIdx.x), q0 = static_cast<int>(gridDim.y - 1 - blockIdx.y) * kRows;
  const int tiles = static_cast<int>(ceil_div(min(T_len, q0 + kRows), kStreamed));  // keys up to the diagonal
  if (threadIdx.x == 0) init_barriers(barriers);
  __syncthreads();
  if (threadIdx.x < 128) {
    setmaxnreg_dec<kProducerRegisters>();
    if (threadIdx.x == 0)
      produce<HS>(barriers, q_do, &maps.q, &maps.dout, head * T_len + q0, stages, &maps.k, &maps.v, head * T_len,
                  kStreamed, tiles);
    return;
  }
  setmaxnreg_inc<kConsumerRegisters>();
  dq_consumer<HS>(barriers, q_do, stages, dq, lse, D, head, T_len, q0, tiles, scale);
}

// ---------------------------------------------------------------------------------------------
// The launchers

// A (BH T, hs) bf16 matrix as a tensor map read in boxes of 64 columns by box_rows rows.
TensorMap rows_map(const brrr::bf16* x, std::int64_t rows, std::int64_t hs, std::uint32_t box_rows) {
  TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, brrr::simt::TensorMapType::kBf16, x, static_cast<std::uint64_t>(hs),
                                 static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(hs) * 2, kBox, box_rows,
                                 brrr::simt::TensorMapSwizzle::k128B);
  return map;
}

// The checks of both directions: sizes, head size 64 or 128, a grid and tensor maps that hold
// the problem, 16-byte aligned operands (TMA), and (on a GPU) a Hopper device. False: nothing to do.
bool check_call(const char* op, const AttentionShape& shape, std::initializer_list<const brrr::bf16*> operands,
                const char* names) {
  const std::int64_t BH = shape.BH, T_len = shape.T, hs = shape.hs;
  check_sizes(op, BH, T_len, hs);
  BRRR_CHECK(hs == 64 || hs == 128, op, ": head size ", hs, "; this kernel is written for 64 and 128");
  if (BH == 0 || T_len == 0) return false;
  BRRR_CHECK(BH * T_len < (std::int64_t{1} << 31) && ceil_div(T_len, kRows) <= 65535, op, ": BH = ", BH, ", T = ",
             T_len, " is more rows than a tensor map's int coordinates reach, or more blocks than a grid holds");
  for (const brrr::bf16* p : operands)
    BRRR_CHECK(aligned16(p), op, ": ", names, " must start 16-byte aligned (TMA reads them)");
#if !BRRR_EMULATOR
  const ComputeCapability cc = compute_capability();
  BRRR_CHECK(cc.is_sm90(), op, ": needs a Hopper GPU (sm_90: H100, H200); this device is sm_", cc.major, cc.minor,
             ", which has no wgmma (use bf16_pipelined)");
#endif
  return true;
}

}  // namespace

void attention_forward_wgmma(brrr::bf16* out, float* lse, const brrr::bf16* q, const brrr::bf16* k,
                             const brrr::bf16* v, const AttentionShape& shape, Stream stream) {
  if (!check_call("attention_forward wgmma", shape, {q, k, v, out}, "q, k, v and out")) return;
  const std::int64_t rows = shape.BH * shape.T;
  const TensorMap q_map = rows_map(q, rows, shape.hs, kRows), k_map = rows_map(k, rows, shape.hs, kKeys),
                  v_map = rows_map(v, rows, shape.hs, kKeys);
  const dim3 grid(static_cast<unsigned>(shape.BH), static_cast<unsigned>(ceil_div(shape.T, kRows)));
  const float scale_log2 = static_cast<float>(shape.scale) * 1.44269504f;
  auto* o = reinterpret_cast<__nv_bfloat16*>(out);
  const int T = static_cast<int>(shape.T);
  if (shape.hs == 64)
    BRRR_LAUNCH(attention_forward_wgmma_kernel<64>, grid, kThreads, forward_shared_bytes<64>(), stream, q_map, k_map,
                v_map, o, lse, T, scale_log2);
  else
    BRRR_LAUNCH(attention_forward_wgmma_kernel<128>, grid, kThreads, forward_shared_bytes<128>(), stream, q_map,
                k_map, v_map, o, lse, T, scale_log2);
}

void attention_backward_wgmma(float* dq, float* dk, float* dv, const brrr::bf16* dout, const brrr::bf16* q,
                              const brrr::bf16* k, const brrr::bf16* v, const brrr::bf16* out, const float* lse,
                              const AttentionShape& shape, Stream stream) {
  if (!check_call("attention_backward wgmma", shape, {q, k, v, dout}, "q, k, v and dout")) return;
  for (const float* p : {dq, dk, dv})  // each thread stores two neighbours as one float2
    BRRR_CHECK(reinterpret_cast<std::uintptr_t>(p) % 8 == 0,
               "attention_backward wgmma: dq, dk and dv must start 8-byte aligned");
  const std::int64_t rows = shape.BH * shape.T, hs = shape.hs;
  using In = __nv_bfloat16;
  auto* D = static_cast<float*>(workspace(static_cast<std::size_t>(rows) * sizeof(float), stream));
  prepare_backward<In>(D, nullptr, reinterpret_cast<const In*>(q), reinterpret_cast<const In*>(k),
                       reinterpret_cast<const In*>(v), reinterpret_cast<const In*>(dout),
                       reinterpret_cast<const In*>(out), rows, hs, stream);
  // The block's own tiles are 128 rows; the streamed ones 64.
  BackwardMaps own{rows_map(q, rows, hs, kRows), rows_map(k, rows, hs, kRows), rows_map(v, rows, hs, kRows),
                   rows_map(dout, rows, hs, kRows)};
  BackwardMaps streamed{rows_map(q, rows, hs, kStreamed), rows_map(k, rows, hs, kStreamed),
                        rows_map(v, rows, hs, kStreamed), rows_map(dout, rows, hs, kStreamed)};
  // dk, dv own k, v and stream q, dout; dq owns q, dout and streams k, v.
  const BackwardMaps dkdv_maps{streamed.q, own.k, own.v, streamed.dout};
  const BackwardMaps dq_maps{own.q, streamed.k, streamed.v, own.dout};
  const dim3 grid(static_cast<unsigned>(shape.BH), static_cast<unsigned>(ceil_div(shape.T, kRows)));
  const float scale = static_cast<float>(shape.scale);
  const int T = static_cast<int>(shape.T);
  if (hs == 64) {
    BRRR_LAUNCH(attention_backward_dkdv_wgmma_kernel<64>, grid, kThreads, backward_shared_bytes<64>(), stream,
                dkdv_maps, dk, dv, lse, D, T, scale);
    BRRR_LAUNCH(attention_backward_dq_wgmma_kernel<64>, grid, kThreads, backward_shared_bytes<64>(), stream, dq_maps,
                dq, lse, D, T, scale);
  } else {
    BRRR_LAUNCH(attention_backward_dkdv_wgmma_kernel<128>, grid, kThreads, backward_shared_bytes<128>(), stream,
                dkdv_maps, dk, dv, lse, D, T, scale);
    BRRR_LAUNCH(attention_backward_dq_wgmma_kernel<128>, grid, kThreads, backward_shared_bytes<128>(), stream,
                dq_maps, dq, lse, D, T, scale);
  }
}

// ---------------------------------------------------------------------------------------------
// Registration

// Below variant 4 (10) on bf16 data: listed and checked, never the default until a GPU has
// timed it. On the emulator always (the tests run it); on a GPU only where the device is sm_90,
// the one chip its sm_90a code runs on.
void register_attention_wgmma_kernels() {
#if !BRRR_EMULATOR
  if (!device_is_sm90()) return;
#endif
  VariantMeta meta;
  meta.tolerance = 3e-2;  // variant 4's arithmetic: the softmax weights (and dS) rounded to bf16 for their products
  meta.about = "variant 5: TMA ring, producer and 2 consumer warpgroups, wgmma, P in registers (hs 64 or 128); "
               "Hopper only; untimed";
  add(op::attention_forward_on_bf16, DeviceType::CUDA, "wgmma", &attention_forward_wgmma, 5, meta);
  meta.about = "variant 5: dk, dv then dq on wgmma from TMA rings, no atomics (hs 64 or 128); Hopper only; untimed";
  add(op::attention_backward_on_bf16, DeviceType::CUDA, "wgmma", &attention_backward_wgmma, 5, meta);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
