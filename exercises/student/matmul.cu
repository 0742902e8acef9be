// exercises/student/matmul.cu: exercise ex14.1 (matmul_shared), a tiled matmul in shared memory
// on the GPU (chapter 14, docs/chapters/14-matmul-gpu.md).
// Read before: the chapter, kernels/cpu/matmul.cpp (matmul_naive: the contract in loops),
// exercises/student/matmul_tiled.cpp (ex04.1: the same idea for a CPU cache), kernels/signatures.h
// (MatmulShape). Read next: kernels/cuda/matmul/, the built-in variants.
//
// What to write: the classic shared-memory matmul. Each block computes one tile of out;
// its threads load a tile of a and a tile of b into __shared__ arrays together, wait
// (__syncthreads), multiply the tiles out of shared memory, wait again, and move along K.
// Each value loaded from global memory is then used kTile times instead of once. It is
// registered as matmul variant "student" on the CUDA device (exercises/student/student_cuda.cu),
// so once it passes every matmul of the model can run on it:
//   BRRR_KERNELS=matmul=student build/brrr train --device emulator ...
//
// Requirements (the MatmulShape contract of kernels/signatures.h: the model uses all of it)
//   - out (batch, M, N) = a (batch, M, K) @ b (batch, K, N), row-major, float32.
//   - trans_a: a is stored as (K, M); trans_b: b is stored as (N, K).
//   - Batch i reads a + i * stride_a, b + i * stride_b and writes out + i * stride_out; a
//     stride of 0 broadcasts that operand over the batch.
//   - accumulate: add the product to what out holds instead of overwriting it.
//   - Ragged sizes: M, N, K not multiples of the tile (pad the tiles with zeros when loading,
//     and do not write outside out). K == 0 gives zeros (or leaves out alone when
//     accumulating); M, N or batch == 0 does nothing.
//   - Within 1e-4 relative error of the float64 reference.
//   The grader checks the plain product at a ragged size through the kernel lab, then the
//   transposes, batch strides (0 included), accumulate and K == 0 against the naive CPU kernel.
//
// A plan
//   1. kTile = 16; a block of (16, 16) threads computes out[row0 .. row0+15][col0 .. col0+15]
//      with col0 = blockIdx.x * 16, row0 = blockIdx.y * 16, batch = blockIdx.z; thread
//      (threadIdx.y, threadIdx.x) owns one element.
//   2. `__shared__ float as[16][16], bs[16][16];` For k0 = 0, 16, 32, ... < K: thread (ty, tx)
//      loads as[ty][tx] = A(row0 + ty, k0 + tx) and bs[ty][tx] = B(k0 + ty, col0 + tx), 0 when
//      out of range, where A(i, k) is a[i * K + k], or a[k * M + i] with trans_a (B alike);
//      __syncthreads(); sum += as[ty][kk] * bs[kk][tx] for kk < 16; __syncthreads().
//   3. Write out (add to it with accumulate) if the element is inside (M, N).
//   4. Host: grid (ceil(N / 16), ceil(M / 16), batch) (gridDim.y and .z are at most 65535:
//      loop over batches in the kernel when there are more), block dim3(16, 16).
//   5. Grade, then try a 2D register tile per thread (chapter 14's next step) and compare.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

// TODO(ex14.1): matmul_shared_kernel here.

void matmul_shared(float* out, const float* a, const float* b, const MatmulShape& shape, Stream stream) {
  // TODO(ex14.1): launch your kernel (and delete this line).
  brrr::student::not_written("ex14.1", "matmul_shared");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
