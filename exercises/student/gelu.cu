// exercises/student/gelu.cu: exercises ex12.1 (gelu_forward) and ex12.2 (gelu_backward), your first
// CUDA kernels (chapter 12, docs/chapters/12-elementwise-gelu.md).
// Read before: the chapter, kernels/cuda/examples.cu (vector_add: a grid-stride loop),
// kernels/cuda/common.h (grid_for), kernels/cpu/nn.cpp (gelu_forward, gelu_backward: the
// reference you are compared with). Read next: kernels/cuda/gelu.cu, the built-in variants.
//
// What to write: two elementwise kernels and their host functions. They are registered as
// variant "student" of gelu_forward and gelu_backward for the CUDA device
// (exercises/student/student_cuda.cu), so once they pass they run inside the model:
//
//   build/brrr exercises check ex12.1        (checks, then times it against the default)
//   BRRR_KERNELS=gelu_forward=student build/brrr train --device emulator ...
//
// This file is compiled twice: by nvcc for the GPU and by g++ for the SIMT emulator, so
// without a GPU your kernel runs (slowly) on the CPU, thread by thread, and is graded there.
//
// Requirements (the grader, through the kernel lab, checks them against the CPU kernels)
//   - ex12.1: out[i] = gelu(x[i]) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
//     for i < n; within 1e-4 relative error (tanhf is fine; the tanh.approx instruction is not).
//   - ex12.2: dx[i] = dout[i] * gelu'(x[i]),
//     gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
//   - Any n: 0 (launch nothing), and n not a multiple of the block size (the grader uses a
//     ragged n). Every element written: the outputs start as NaN.
//   - Pointers may be views (not 16-byte aligned): plain float loads are always safe.
//
// A plan
//   1. A kernel `__global__ void gelu_forward_kernel(float* out, const float* x, std::int64_t n)`:
//      i = blockIdx.x * blockDim.x + threadIdx.x (in int64: n can pass 2^31); then a
//      grid-stride loop `for (; i < n; i += gridDim.x * blockDim.x)` computing one element.
//   2. The host function: return if n == 0; pick 256 threads a block and
//      grid_for(n, 256, max_blocks) blocks; BRRR_LAUNCH(gelu_forward_kernel, blocks, 256, 0,
//      stream, out, x, n).
//   3. The same for the backward, with dout and x in, dx out.
//   4. `brrr exercises check ex12.1`, then ex12.2. Optional: float4 loads when aligned16(...)
//      holds for every pointer, and compare the times.
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "exercises/student/student_cuda.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student {

// TODO(ex12.1): gelu_forward_kernel here.

void gelu_forward(float* out, const float* x, std::int64_t n, Stream stream) {
  // TODO(ex12.1): launch your kernel (and delete this line).
  brrr::student::not_written("ex12.1", "gelu_forward");
}

// TODO(ex12.2): gelu_backward_kernel here.

void gelu_backward(float* dx, const float* dout, const float* x, std::int64_t n, Stream stream) {
  // TODO(ex12.2): launch your kernel (and delete this line).
  brrr::student::not_written("ex12.2", "gelu_backward");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE::student
