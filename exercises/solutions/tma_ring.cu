// exercises/solutions/tma_ring.cu: the reference solution of ex21.1 (chapter 21), the producer's
// loop of the TMA ring. The teacher's copy; the stub is exercises/student/tma_ring.cu.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/matmul/wgmma_ring.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution {

namespace {

using namespace wgmma_ring;

struct RingProducer {
  template <bool A_MN, bool B_MN>
  __device__ static void fill(const Ring& ring, const TileWalk& walk, const brrr::simt::TensorMap* a_map,
                              const brrr::simt::TensorMap* b_map) {
    int it = 0;  // fills so far: stage it % kStages, lap it / kStages
    for (std::int64_t tile = walk.first; tile < walk.count; tile += walk.step) {
      const Tile t = walk.at(tile);
      for (int kt = 0; kt < walk.k_tiles; ++kt, ++it) {
        const int s = it % kStages, lap = it / kStages;
        // Lap n waits for phase n - 1 of empty[s] to complete: parity (n - 1) % 2, that is 1 on
        // lap 0 (the phase before phase 0, complete from the start), 0 on lap 1, ...
        mbarrier_wait_parity(&ring.empty[s], static_cast<unsigned>((lap & 1) ^ 1));
        mbarrier_arrive_expect_tx(&ring.full[s], kStageBytes);
        copy_a_tile<A_MN>(ring.a_tile(s), a_map, t, kt * kBK, &ring.full[s]);
        copy_b_tile<B_MN>(ring.b_tile(s), b_map, t, kt * kBK, &ring.full[s]);
      }
    }
  }
};

}  // namespace

void tma_ring_matmul(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape, Stream stream) {
  gemm<RingProducer>("tma_ring_matmul (ex21.1)", out, a, b, shape, Epilogue{nullptr, nullptr}, stream);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::solution
