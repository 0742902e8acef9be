// kernels/cpu/bf16_convert.h: bf16 <-> float32 for one row at a time, as the CPU kernels on bf16
// data (nn_bf16.cpp) use them: a row is widened into a small float32 buffer that stays in the
// L1 cache, the float32 row code runs on it, and its results are rounded as they are stored.
// So an array is read from memory once, in bf16, and written once, in bf16: no widened copy of a
// whole tensor. Chapter 18 (mixed precision). Read before: brrr/bfloat16.h, kernels/cpu/cpu.h.
//
// Widening is exact (16 zero bits below); rounding is to nearest, ties to even, once, as
// brrr::bf16 does it (NaN kept a NaN). Both are plain loops that the compiler vectorizes
// (AVX-512 in a -march=native build: a shift to widen; to round, an add, a shift and a select
// for NaN); a build without AVX-512 runs the same source as scalar code, with the same bits.
#pragma once
#include <cstdint>

#include "brrr/bfloat16.h"

namespace brrr::kernels::cpu {

// out = bf16(x), written as its bits: a loop that stores bf16 temporaries (a struct) does not
// vectorize, one that stores the bits does.
inline void store_rounded(bf16& out, float x) { out.bits = bf16::round_bits(x); }

inline void widen_row(float* out, const bf16* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i]);
}

inline void round_row(bf16* out, const float* x, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) store_rounded(out[i], x[i]);
}

}  // namespace brrr::kernels::cpu
