// exercises/student/matmul_tiled.cpp: exercise ex04.1, a cache-tiled CPU matmul (chapter 04).
// Read before: docs/chapters/04-matmul-cpu.md, kernels/cpu/matmul.cpp (matmul_naive is the
// reference; matmul_eigen shows the tiling of the output into tasks), kernels/cpu/cpu.h.
//
// What to write: the step between "naive" and "blocked", in plain C++ (no intrinsics, no
// Eigen). It is registered as matmul variant "student" (exercises/student/register.cpp), so
// once it works it runs inside any model:
//
//   build/brrr exercises check ex04.1      (checks it, then times it against the default)
//   BRRR_KERNELS=matmul=student build/brrr mlp     (your kernel trains chapter 05's MLP)
//
// Requirements (the MatmulShape contract of kernels/signatures.h)
//   - out (batch, M, N) = a (batch, M, K) @ b (batch, K, N), row-major.
//   - trans_a: a is stored as (K, M); trans_b: b is stored as (N, K).
//   - Batch i reads a + i * stride_a, b + i * stride_b and writes out + i * stride_out; a
//     stride of 0 broadcasts that operand over the batch.
//   - accumulate: add the product to what out holds instead of overwriting it.
//   - K == 0 gives zeros (or leaves out alone when accumulating); M or N == 0 does nothing.
//   - Within 1e-5 * sqrt(K) of the naive kernel for randn inputs (so accumulate in T, as
//     "blocked" does, and the tolerance still holds), for float and double.
//   - The same bits for any number of threads: each output element is computed by one task,
//     in the same order, however the tasks are spread over threads.
//
// A plan
//   1. Cut C into kTile x kTile tiles (try 64) and make each (batch, tile) one task of
//      cpu::parallel_for(tasks, 1, ...), as matmul_eigen does.
//   2. In a task, start the tile from 0 (or leave C when accumulate), loop over K in blocks
//      (try 256), and inside use the i, k, j order, so the innermost loop runs along rows of
//      B and C with stride 1 and the compiler vectorizes it.
//   3. With trans_b a row of B is strided: copy each (K block) x kTile piece of B into a
//      small buffer first (your first packing). trans_a only changes how A[i, k] is read.
//   4. Time it: `brrr exercises check ex04.1` prints your time beside the default variant's.
#include "kernels/cpu/cpu.h"
#include "exercises/student/student.h"

namespace brrr::student {

template <class T>
void matmul_tiled(T* out, const T* a, const T* b, const kernels::MatmulShape& s, kernels::Stream) {
  // TODO(ex04.1): out = a @ b, tile by tile.
  not_written("ex04.1", "matmul_tiled");
}

template void matmul_tiled<float>(float*, const float*, const float*, const kernels::MatmulShape&, kernels::Stream);
template void matmul_tiled<double>(double*, const double*, const double*, const kernels::MatmulShape&,
                                   kernels::Stream);

}  // namespace brrr::student
