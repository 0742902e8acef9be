// exercises/student/attention.cu: exercise ex15.1 (flash_attention_forward), causal attention
// with an online softmax, never storing the (T, T) scores (chapter 15,
// docs/chapters/15-flash-attention.md).
// Read before: the chapter (the online softmax), kernels/cpu/nn.cpp (attention_forward: the
// reference), exercises/student/matmul.cu (ex14.1: tiles in shared memory).
// Read next: kernels/cuda/attention/, the built-in variants.
//
// What to write: attention_forward for BH independent (T, hs) problems, one pass over the
// keys per query row. It is registered as variant "student" of attention_forward on the
// CUDA device (exercises/student/student_cuda.cu).
//
// Requirements (checked against the CPU kernel within 1e-4 relative error, at a ragged size:
// T not a multiple of your tile, hs not a power of two)
//   - q, k, v, out (BH, T, hs), row-major; lse (BH, T). The sizes and the scale come in an
//     AttentionShape (kernels/signatures.h): shape.BH, shape.T, shape.hs, shape.scale.
//   - Causal: query t sees keys 0..t. s_j = scale * q_t . k_j;
//     out_t = sum_j softmax(s)_j v_j; lse_t = log(sum_{j <= t} exp(s_j)) (natural log).
//   - Never materialize the (T, T) scores in global memory; numerically safe for large
//     scores (subtract a running max before exp).
//   - hs up to 128 at least; BH or T == 0 does nothing.
//
// A plan (one simple flash kernel; the chapter builds the fast one)
//   1. A block of kBr = 32 threads handles 32 query rows of one (bh): thread i owns row
//      t = blockIdx.x * 32 + i; blockIdx.y = bh. Each thread keeps a running max m = -inf,
//      a running sum l = 0, and its output row (accumulate it in place in out, zeroed first:
//      only this thread touches that row).
//   2. Loop over key tiles of kBc = 32 keys, up to the tile holding the block's last query
//      (the same bound for every thread). All threads load the tile's k and v rows into
//      dynamic shared memory (2 * kBc * hs floats, BRRR_DYNAMIC_SHARED); __syncthreads().
//   3. Each thread whose row is real: the scores s_j of its row for the keys j <= t of the
//      tile; m_new = max(m, max_j s_j); c = exp(m - m_new); l = l * c + sum_j exp(s_j - m_new);
//      out_row = out_row * c + sum_j exp(s_j - m_new) v_j; m = m_new. Then __syncthreads()
//      (outside any `if`) before the next tile overwrites shared memory.
//   4. At the end: out_row /= l; lse = m + log(l).
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

// TODO(ex15.1): flash_attention_forward_kernel here.

void flash_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionShape& shape, Stream stream) {
  // TODO(ex15.1): launch your kernel (and delete this line).
  brrr::student::not_written("ex15.1", "flash_attention_forward");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
