// kernels/cuda/matmul/matmul.h: the hand-written CUDA matmuls of kernels/cuda/matmul/, callable
// with raw pointers. Chapter 14 (matmul from naive to tensor cores).
// Read next: kernels/cuda/matmul/gemm.h, then cuda_cores.cu, mma_sync.cu and wgmma.cu.
//
// The folder's files are compiled twice (see simt.h), so each function exists twice with the
// same signature, the matmul signature of kernels/signatures.h: in brrr::kernels::emu (g++,
// runs on the emulator, takes CPU pointers) and in brrr::kernels::cuda (nvcc, runs on the GPU,
// takes device pointers; only in CUDA builds). Every variant implements the whole MatmulShape
// contract: batch strides (0 broadcasts), trans_a / trans_b, accumulate, any M, N, K.
// The numbers are the variants' numbers, slowest first: 1 to 6 and 8 in cuda_cores.cu (the
// float32 units), 7 and 9 to 13 in mma_sync.cu (the tensor cores), 14 in wgmma.cu (Hopper's).
#pragma once
#include "kernels/signatures.h"

// brrr::bf16 (brrr/bfloat16.h, C++20) by name only: nvcc compiles this header too, and a
// pointer needs no definition.
namespace brrr {
struct bf16;
}

namespace brrr::kernels {

namespace emu {
template <class T>  // float and double
void matmul_naive(T* out, const T* a, const T* b, const MatmulShape& shape, Stream stream);      // 1
template <class T>
void matmul_coalesced(T* out, const T* a, const T* b, const MatmulShape& shape, Stream stream);  // 2
template <class T>
void matmul_smem(T* out, const T* a, const T* b, const MatmulShape& shape, Stream stream);       // 3
void matmul_blocking1d(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);  // 4
void matmul_blocking2d(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);  // 5
void matmul_vectorized(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);  // 6
void matmul_tensorcore(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);  // 7
void matmul_warptiling(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);  // 8
void matmul_bf16_mma(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);    // 9
void matmul_tf32_pipelined(float* out, const float* a, const float* b, const MatmulShape& shape,
                           Stream stream);  // 10
void matmul_bias_gelu(float* out, float* pre, const float* a, const float* b, const float* bias,
                      const MatmulShape& shape, Stream stream);  // 11
void matmul_bf16_pipelined(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape,
                           Stream stream);  // 12
void matmul_bf16_wide(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape,
                      Stream stream);  // 13
void matmul_wgmma(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape,
                  Stream stream);  // 14
void matmul_bias_gelu_wgmma(float* out, float* pre, const brrr::bf16* a, const brrr::bf16* b, const float* bias,
                            const MatmulShape& shape, Stream stream);  // 14 with 11's epilogue
void matmul_epilogue_unfused(brrr::bf16* out, brrr::bf16* pre, const brrr::bf16* a, const brrr::bf16* b,
                             const brrr::bf16* bias, bool gelu, const MatmulShape& shape, Stream stream);
}  // namespace emu

namespace cuda {
template <class T>
void matmul_naive(T* out, const T* a, const T* b, const MatmulShape& shape, Stream stream);
template <class T>
void matmul_coalesced(T* out, const T* a, const T* b, const MatmulShape& shape, Stream stream);
template <class T>
void matmul_smem(T* out, const T* a, const T* b, const MatmulShape& shape, Stream stream);
void matmul_blocking1d(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);
void matmul_blocking2d(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);
void matmul_vectorized(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);
// 7: TF32 tensor cores through WMMA. Full float32 accuracy (three TF32 products per product,
// "3xTF32") unless brrr::cuda::set_allow_tf32(true), then one (faster, ~1e-3 relative error).
void matmul_tensorcore(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);
// 8: variant 6 with warp tiles and double-buffered shared memory (float32 units, no tensor cores).
void matmul_warptiling(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);
// 9: bf16 tensor cores through mma.sync and ldmatrix (inputs rounded to bf16, float32 sums).
void matmul_bf16_mma(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);
// 10: tf32 mma.sync fed by a three-stage cp.async pipeline (~1e-3 relative error).
void matmul_tf32_pipelined(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream);
// 11: variant 10 with a fused epilogue: out = gelu(a @ b + bias), and pre = a @ b unless pre is
// nullptr (the op matmul_bias_gelu of kernels/signatures.h; accumulate is refused).
void matmul_bias_gelu(float* out, float* pre, const float* a, const float* b, const float* bias,
                      const MatmulShape& shape, Stream stream);
// 12: a and b stored as bfloat16 (brrr::bf16, the bits of __nv_bfloat16), out float32: 16-byte
// cp.async copies, a three-stage pipeline, ldmatrix, mma.sync, float32 sums. Every MatmulShape
// (transposes, batches, accumulate, any M, N, K). Registered as matmul's on bf16 data (op::matmul_on_bf16),
// "bf16_pipelined" (bf16 data, float32 out), which the kernel lab checks and times.
void matmul_bf16_pipelined(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape,
                           Stream stream);
// 13: variant 12 with a (128, 128) block of 8 warps (each (64, 32) of out): the same contract
// and the same bits, "bf16_wide" on bf16 data.
void matmul_bf16_wide(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape,
                      Stream stream);
// 14: Hopper's warpgroup MMA (wgmma.cu): TMA copies into a four-stage ring guarded by mbarriers,
// a producer warpgroup and two consumer warpgroups, a persistent grid; bf16 data, float32 out,
// every MatmulShape (matrices TMA cannot read as they are are packed first). sm_90 only: it
// refuses any other device. "wgmma" on bf16 data.
void matmul_wgmma(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& shape, Stream stream);
// 14 with variant 11's epilogue: out = gelu(a @ b + bias), pre = a @ b unless nullptr, on bf16
// data (op::matmul_bias_gelu_on_bf16, "wgmma"); accumulate is refused.
void matmul_bias_gelu_wgmma(float* out, float* pre, const brrr::bf16* a, const brrr::bf16* b, const float* bias,
                            const MatmulShape& shape, Stream stream);
// matmul_epilogue on bf16 data (epilogue.cu): the registry's matmul on bf16 data into float32
// sums, then one pass for the bias, GELU and the rounding; cublaslt.cu's fallback.
void matmul_epilogue_unfused(brrr::bf16* out, brrr::bf16* pre, const brrr::bf16* a, const brrr::bf16* b,
                             const brrr::bf16* bias, bool gelu, const MatmulShape& shape, Stream stream);
}  // namespace cuda

}  // namespace brrr::kernels
