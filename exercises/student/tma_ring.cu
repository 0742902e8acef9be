// exercises/student/tma_ring.cu: exercise ex21.1 (tma_ring_matmul), the producer's loop of a
// Hopper GEMM's TMA ring, graded on the emulator by its results and by the sanitizer (chapter 21,
// docs/chapters/21-hopper.md).
// Read before: the chapter, kernels/cuda/examples_hopper.cu (every instruction once),
// kernels/cuda/matmul/wgmma.cu's head comment (the picture of the ring) and
// kernels/cuda/matmul/wgmma_ring.h (the kernel you plug into: Ring, TileWalk, copy_a_tile,
// copy_b_tile). Read next: kernels/cuda/matmul/wgmma.cu's RingProducer, once yours passes.
//
// What to write: RingProducer::fill below. Everything else of variant 14 is given: the block's
// two consumer warpgroups wait on full[s], issue wgmma on stage s and arrive on empty[s] when
// their wgmmas have read it; the host side builds the tensor maps and launches a persistent
// grid. Your function runs on one thread (thread 0 of warpgroup 0) and must keep the consumers
// fed: every k-tile of every tile this block walks, into the ring's stages in turn.
//
// Requirements (on the emulator, whose sanitizer enforces Hopper's ordering rules)
//   - out (batch, M, N) = a @ b for the whole MatmulShape contract (the given code handles
//     layouts and edges; you only choose which stage, when, and what to copy), within float32
//     summation error of the float64 product of the same bf16 values.
//   - No stage is overwritten while a consumer's wgmma may still read it: the sanitizer stops
//     a TMA write into shared memory an in-flight wgmma reads, and names your source line.
//   - The bytes announced on full[s] are the bytes that arrive: an expect_tx that differs is an
//     error; one that is never matched leaves the consumers waiting, which the emulator reports
//     as a deadlock, with each barrier's phase.
//   - Several laps of the ring (K > kStages * kBK) and several tiles per block (the emulator runs
//     3 persistent blocks): the phases must keep count across both.
//   The grader checks the kernel lab's case at a ragged size, then 7 problems through the
//   registry (the four layouts, batches with a broadcast operand, accumulate, K = 0, laps and
//   tiles as above) against the float64 product.
//
// A plan
//   1. Count the fills: it = 0 before the tiles; each k-tile is fill it, stage s = it % kStages,
//      lap = it / kStages. Walk the tiles as the consumers do: for (tile = walk.first; tile <
//      walk.count; tile += walk.step), t = walk.at(tile), then kt = 0 .. walk.k_tiles - 1.
//   2. Wait for the stage to be free: mbarrier_wait_parity(&ring.empty[s], parity). Lap 0's
//      stages are free from the start; a fresh barrier is in phase 0, and waiting for parity 1
//      ("the phase before") passes at once. Which parity does lap n wait for?
//   3. Announce the bytes on full[s] (mbarrier_arrive_expect_tx: the producer's one arrival and
//      kStageBytes to come), then issue the copies: copy_a_tile<A_MN>(ring.a_tile(s), a_map, t,
//      k0, &ring.full[s]) and copy_b_tile<B_MN> alike, k0 = kt * kBK.
//   4. Never wait for a copy to land: that is the consumers' wait on full[s]. Why may the
//      producer run kStages fills ahead, and no further?
//   5. Set kFillWritten to true, then grade: ctest --test-dir build -L ex21.1
//      Then break it on purpose: wait for the wrong parity, announce kABytes only, skip the wait
//      on empty. What does the emulator say each time?
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/matmul/wgmma_ring.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

namespace {

using namespace wgmma_ring;  // Ring, TileWalk, Tile, kStages, kBK, kStageBytes, copy_a_tile, copy_b_tile

// TODO(ex21.1): true once fill() below is written.
constexpr bool kFillWritten = false;

struct RingProducer {
  template <bool A_MN, bool B_MN>
  __device__ static void fill(const Ring& /*ring*/, const TileWalk& /*walk*/, const brrr::simt::TensorMap* /*a_map*/,
                              const brrr::simt::TensorMap* /*b_map*/) {
    // TODO(ex21.1): the producer's loop (name the parameters above).
  }
};

}  // namespace

void tma_ring_matmul(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape, Stream stream) {
  if (!kFillWritten) brrr::student::not_written("ex21.1", "tma_ring_matmul");
  gemm<RingProducer>("tma_ring_matmul (ex21.1)", out, a, b, shape, Epilogue{nullptr, nullptr}, stream);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
