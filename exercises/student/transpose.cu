// exercises/student/transpose.cu: exercise ex14.2 (transpose), a matrix transpose on the GPU
// graded on its memory counters as well as its results (chapter 14,
// docs/chapters/14-matmul-gpu.md, "What the memory does, without a GPU").
// Read before: the chapter, kernels/transpose.h (the op), kernels/cuda/transpose.cu (the naive
// kernel, one thread per element), kernels/cuda/simt_counters.h (what is counted, as Nsight
// Compute counts it). Read next: exercises/student/attention.cu (ex15.1).
//
// What to write: out (N, M) = in (M, N)^T whose global loads AND stores are fully coalesced
// and whose shared memory has no bank conflicts. The naive kernel reads a row of `in` per warp
// (4 sectors per request, the least) but writes a column of `out`: 32 sectors per request, 8
// times the least. No arrangement of threads makes both sides rows, so go through shared
// memory: a block reads a 32 x 32 tile of `in` by rows, and writes it to `out` by rows of the
// transposed tile, reading the shared tile by columns. Read a column of a `float tile[32][32]`
// and the 32 lanes all hit one bank (word 32 r + c is in bank c): a 32-way conflict. Make it
// conflict-free. It is registered as transpose variant "student" on the CUDA device
// (exercises/student/student_cuda.cu); compare it with the naive one:
//   build/brrr kernel-lab transpose --device emulator --mode counters
//
// Requirements
//   - out (N, M) = in (M, N)^T, both row-major float32: out[j * M + i] = in[i * N + j].
//   - Any M, N >= 0: ragged edges (M, N no multiple of the tile) neither read nor write
//     outside the matrices; M or N == 0 does nothing. Exact (a copy: no rounding).
//   - On the emulator at (M, N) = (64, 96) and (96, 64), 256-byte aligned (every row starts
//     on a 32-byte sector): every global load and store at the ideal sectors per request
//     (l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum over ..._requests_..., 4 for a warp of
//     floats), `in` read once and `out` written once (sectors x 32 bytes = 4 M N bytes each),
//     and no shared-memory bank conflicts
//     (l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum and _st.sum both 0).
//   The grader checks the results at ragged sizes through the kernel lab, then counts the
//   kernel's memory on the emulator and prints what it counted, with Nsight Compute's names.
//
// A plan
//   1. kTile = 32, a block of (32, 8) threads: block (bx, by) owns in's rows by*32 .. by*32+31
//      and columns bx*32 .. bx*32+31; each thread moves 4 elements, rows ty, ty+8, ty+16, ty+24.
//   2. Load: tile[ty + r][tx] = in[(by*32 + ty + r) * N + bx*32 + tx] (inside the matrix only).
//      __syncthreads().
//   3. Store: out[(bx*32 + ty + r) * M + by*32 + tx] = tile[tx][ty + r] (inside only). The warp
//      writes 32 consecutive floats of a row of out, and reads a column of the tile.
//   4. Count it: the loads and stores at 4.00 (4.00) sectors per request, and the shared
//      loads with 31 conflicts per request. One more column in the tile's declaration moves
//      each row's words one bank along: why does that remove them?
//   5. Host: grid (ceil(N / 32), ceil(M / 32)), block dim3(32, 8) (gridDim.y is at most
//      65535: loop over the row tiles in the kernel when M needs more).
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

// TODO(ex14.2): transpose_kernel here.

void transpose(float* out, const float* in, std::int64_t M, std::int64_t N, Stream stream) {
  // TODO(ex14.2): launch your kernel (and delete this line).
  brrr::student::not_written("ex14.2", "transpose");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
