// kernels/transpose.h: the transpose op's kernels, out (N, M) = in (M, N)^T (its signature
// and descriptor are kernels/signatures.h's, op::transpose, as every op's). Chapter 14 (the
// memory section and exercise ex14.2), where a transpose is the smallest kernel whose loads
// and stores cannot both be coalesced without shared memory. Read before:
// kernels/signatures.h. Read next: kernels/cuda/transpose.cu, then
// exercises/student/transpose.cu.
//
// The framework transposes by copying with strides (op::copy, kernels/signatures.h's Loop);
// this op is the same copy for one contiguous (M, N) matrix, with the kernels that the
// counters of the emulator (kernels/cuda/simt_counters.h) tell apart.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

namespace brrr::kernels {

namespace cpu {
// The CPU's kernel (kernels/cpu/transpose.cpp): the two loops, in blocks of rows over the cores.
template <class T>
void transpose(T* out, const T* in, std::int64_t M, std::int64_t N, Stream stream);
void register_transpose_kernels();  // called by kernels/cpu/register.cpp
}  // namespace cpu

// kernels/cuda/transpose.cu, compiled twice (see kernels/cuda/simt.h): the GPU's and the
// emulator's. transpose_naive: one thread per element; register_transpose_kernels is called by
// kernels/cuda/register.cu.
#define BRRR_TRANSPOSE_VARIANTS(NS)                                                                 \
  namespace NS {                                                                                   \
  template <class T> void transpose_naive(T* out, const T* in, std::int64_t M, std::int64_t N, Stream stream); \
  void register_transpose_kernels();                                                               \
  }

BRRR_TRANSPOSE_VARIANTS(emu)
BRRR_TRANSPOSE_VARIANTS(cuda)
#undef BRRR_TRANSPOSE_VARIANTS

}  // namespace brrr::kernels
