// kernels/cuda/examples.h: the example kernels of examples.cu, callable with raw pointers.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt.h.
// Read next: kernels/cuda/examples.cu.
//
// examples.cu is compiled twice (see simt.h), so each function exists twice, with the same
// signature: in brrr::kernels::emu (g++, runs on the emulator, takes CPU pointers) and in
// brrr::kernels::cuda (nvcc, runs on the GPU, takes device pointers; only in CUDA builds).
// block_size is the threads per block; max_blocks caps the grid (0: as many blocks as the
// data needs), and the kernels' grid-stride loops cover whatever the blocks do not.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

namespace brrr::kernels {

namespace emu {
// out = a + b, (n). Loads float4s when all three pointers are 16-byte aligned.
void vector_add(float* out, const float* a, const float* b, std::int64_t n, int block_size, int max_blocks,
                Stream stream);
// out[r] = sum of in[r, :], (N, C) -> (N), one block per row. block_size: a multiple of 32.
// Variant 1: warp shuffles, then static __shared__ across warps.
void row_sum1(float* out, const float* in, int N, int C, int block_size, Stream stream);
// Variant 2: a tree in dynamic shared memory. block_size: a power of two.
void row_sum2(float* out, const float* in, int N, int C, int block_size, Stream stream);
// Variant 1 with its __syncthreads forgotten: the classic race, for chapter 10 to show what the
// emulator says about it. Registered nowhere; do not use.
void row_sum_racy(float* out, const float* in, int N, int C, int block_size, Stream stream);
// counts[v] += how many values equal v, for v in [0, bins); *largest = max(*largest, values).
// Adds to counts and largest: set them first (0 and INT_MIN).
void histogram(int* counts, int* largest, const int* values, std::int64_t n, int bins, int block_size,
               int max_blocks, Stream stream);
// *out += sum of x, (n), with one float atomicAdd per warp. Set *out first. block_size: a
// multiple of 32.
void array_sum(float* out, const float* x, std::int64_t n, int block_size, int max_blocks, Stream stream);
}  // namespace emu

namespace cuda {
void vector_add(float* out, const float* a, const float* b, std::int64_t n, int block_size, int max_blocks,
                Stream stream);
void row_sum1(float* out, const float* in, int N, int C, int block_size, Stream stream);
void row_sum2(float* out, const float* in, int N, int C, int block_size, Stream stream);
void row_sum_racy(float* out, const float* in, int N, int C, int block_size, Stream stream);
void histogram(int* counts, int* largest, const int* values, std::int64_t n, int bins, int block_size,
               int max_blocks, Stream stream);
void array_sum(float* out, const float* x, std::int64_t n, int block_size, int max_blocks, Stream stream);
}  // namespace cuda

}  // namespace brrr::kernels
