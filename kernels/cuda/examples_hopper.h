// kernels/cuda/examples_hopper.h: the example kernel of examples_hopper.cu, callable with raw
// pointers. Chapter 21 (Hopper). Read before: kernels/cuda/simt_hopper.h.
// Read next: kernels/cuda/examples_hopper.cu.
//
// Compiled twice (see simt.h): brrr::kernels::emu runs on the emulator, brrr::kernels::cuda on
// an sm_90a GPU (elsewhere its kernel traps: wgmma and TMA are Hopper's).
#pragma once
#include "kernels/signatures.h"

// brrr::bf16 (brrr/bfloat16.h, C++20) by name only: nvcc compiles this header too.
namespace brrr {
struct bf16;
}

namespace brrr::kernels {

namespace emu {
// c (M, N) float32 = a (M, K) @ b (N, K)^T, a and b bf16 with K contiguous: one warpgroup per
// 64 x 64 tile of c, TMA loads of 64 x 64 tiles into 128-byte-swizzled shared memory, an
// mbarrier, four wgmma m64n64k16 per tile of K, and a TMA store. K and N multiples of 8 (the
// tensor maps' 16-byte rows); any M.
void wgmma_tma_matmul(float* c, const brrr::bf16* a, const brrr::bf16* b, int M, int N, int K, Stream stream);
}  // namespace emu

namespace cuda {
void wgmma_tma_matmul(float* c, const brrr::bf16* a, const brrr::bf16* b, int M, int N, int K, Stream stream);
}  // namespace cuda

}  // namespace brrr::kernels
