// kernels/cuda/examples_hopper.cu: the smallest Hopper matmul that uses every piece of
// simt_hopper.h once: TMA loads of two tiles into swizzled shared memory, an mbarrier that
// counts their bytes, warpgroup MMAs through matrix descriptors, and a TMA store. It is the
// emulator's end-to-end test of those pieces (tests/emulator/test_hopper.cpp) and a first
// read of a Hopper kernel; the course's wgmma GEMM builds on it. Chapter 21 (Hopper).
// Read before: kernels/cuda/simt_hopper.h. Read next: kernels/cuda/simt_hopper.cpp.
//
// The picture, for one 64 x 64 tile of c and one 64-wide step of K:
//
//   thread 0:   expect 16 KiB on `full` | TMA a[64 x 64] -> a_tile | TMA b[64 x 64] -> b_tile
//   all 128:    wait on `full` (phase k % 2) | fence | 4 x wgmma m64n64k16 | commit | wait 0
//
// Both tiles are K-major with the 128-byte swizzle: a row of 64 bf16 is one 128-byte row of
// the pattern, and 8 rows make the 1024-byte pattern, so the descriptor's stride offset (from
// one 8-row group to the next) is 1024 and the leading offset is unused. The k-th 16-wide
// slice of K starts 32 k bytes into each row: descriptor + 2 k (the start is kept in 16-byte
// units). One warpgroup, one stage: the next tile's TMA waits until every thread has passed
// the wgmma wait (__syncthreads), since it overwrites the tiles the wgmmas read.
#include "kernels/cuda/examples_hopper.h"

#include <cstdint>

#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

constexpr int kTile = 64;                                     // rows, columns and K of a step
constexpr int kTileBytes = kTile * kTile * 2;                 // a bf16 tile: 8 KiB
constexpr int kSharedBytes = 1024 + 2 * kTileBytes + kTile * kTile * 4;  // alignment slack, a, b, c

__global__ void __launch_bounds__(128) wgmma_tma_matmul_kernel(const __grid_constant__ brrr::simt::TensorMap a_map,
                                                              const __grid_constant__ brrr::simt::TensorMap b_map,
                                                              const __grid_constant__ brrr::simt::TensorMap c_map,
                                                              int K) {
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  // The tiles start at a multiple of 1024 bytes: the 128-byte swizzle's pattern.
  auto* a_tile = reinterpret_cast<__nv_bfloat16*>((reinterpret_cast<std::uintptr_t>(shared) + 1023) & ~std::uintptr_t{1023});
  __nv_bfloat16* b_tile = a_tile + kTile * kTile;
  auto* c_tile = reinterpret_cast<float*>(b_tile + kTile * kTile);
  __shared__ std::uint64_t full;  // the tiles of this step have landed
  const int thread = static_cast<int>(threadIdx.x);
  if (thread == 0) {
    mbarrier_init(&full, 1);
    fence_proxy_async_shared_cta();  // the init, visible to the TMA unit that will count bytes on it
  }
  __syncthreads();

  float d[kTile / 2];  // this thread's 32 of the tile's 64 x 64 accumulators
  for (float& v : d) v = 0.0f;
  const auto swizzle = brrr::simt::Swizzle::k128B;
  for (int k0 = 0, phase = 0; k0 < K; k0 += kTile, phase ^= 1) {
    if (thread == 0) {
      mbarrier_arrive_expect_tx(&full, 2 * kTileBytes);  // full boxes, zeros past the edges too
      cp_async_bulk_tensor_2d_global_to_shared(a_tile, &a_map, k0, static_cast<int>(blockIdx.x) * kTile, &full);
      cp_async_bulk_tensor_2d_global_to_shared(b_tile, &b_map, k0, static_cast<int>(blockIdx.y) * kTile, &full);
    }
    mbarrier_wait_parity(&full, static_cast<unsigned>(phase));
    wgmma_fence();
    for (int k = 0; k < kTile / 16; ++k) {
      const std::uint64_t a = wgmma_descriptor(a_tile, 16, 1024, swizzle) + 2 * k;
      const std::uint64_t b = wgmma_descriptor(b_tile, 16, 1024, swizzle) + 2 * k;
      wgmma_m64nNk16_bf16<kTile>(d, a, b, 1);
    }
    wgmma_commit_group();
    wgmma_wait_group<0>();
    __syncthreads();  // nobody reads the tiles any more: the next step's TMA may overwrite them
  }

  // The accumulators to shared memory as a row-major 64 x 64 tile (the layout of simt_hopper.h),
  // then one thread stores it with TMA, which drops what lies past the edges of c.
  const int w = thread / 32, q = thread % 32 / 4, t = thread % 4;
  for (int j = 0; j < kTile / 8; ++j)
    for (int i = 0; i < 4; ++i) c_tile[(16 * w + q + 8 * (i / 2)) * kTile + 8 * j + 2 * t + i % 2] = d[4 * j + i];
  fence_proxy_async_shared_cta();  // our stores, then the async proxy's read of them
  __syncthreads();
  if (thread == 0) {
    cp_async_bulk_tensor_2d_shared_to_global(&c_map, static_cast<int>(blockIdx.y) * kTile,
                                             static_cast<int>(blockIdx.x) * kTile, c_tile);
    cp_async_bulk_commit_group();
    cp_async_bulk_wait_group_read<0>();
  }
}

}  // namespace

void wgmma_tma_matmul(float* c, const brrr::bf16* a, const brrr::bf16* b, int M, int N, int K, Stream stream) {
  BRRR_CHECK(M > 0 && N > 0 && K > 0 && N % 8 == 0 && K % 8 == 0, "wgmma_tma_matmul: (", M, ", ", K, ") @ (", N, ", ",
             K, ")^T: N and K must be positive multiples of 8 (a tensor map's rows are multiples of 16 bytes)");
  using brrr::simt::TensorMapSwizzle;
  using brrr::simt::TensorMapType;
  brrr::simt::TensorMap a_map, b_map, c_map;
  const auto rows = [](int n) { return static_cast<std::uint64_t>(n); };
  brrr::simt::make_tensor_map_2d(&a_map, TensorMapType::kBf16, a, rows(K), rows(M), rows(K) * 2, kTile, kTile,
                                 TensorMapSwizzle::k128B);
  brrr::simt::make_tensor_map_2d(&b_map, TensorMapType::kBf16, b, rows(K), rows(N), rows(K) * 2, kTile, kTile,
                                 TensorMapSwizzle::k128B);
  brrr::simt::make_tensor_map_2d(&c_map, TensorMapType::kFloat32, c, rows(N), rows(M), rows(N) * 4, kTile, kTile,
                                 TensorMapSwizzle::kNone);
  const dim3 grid((M + kTile - 1) / kTile, (N + kTile - 1) / kTile);
  BRRR_LAUNCH(wgmma_tma_matmul_kernel, grid, 128, kSharedBytes, stream, a_map, b_map, c_map, K);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
