// kernels/matmul_epilogue.h: what matmul_epilogue on bf16 data (kernels/signatures.h) accepts,
// checked alike on every device before a kernel runs. Chapter 18, section 11 (the bf16 step's
// GEMMs with their epilogues). Read next: kernels/cpu/nn_bf16.cpp (the reference),
// kernels/cuda/matmul/epilogue.cu, kernels/cuda/cublaslt.cu.
#pragma once
#include <cstdint>

#include "brrr/error.h"
#include "kernels/signatures.h"

namespace brrr::kernels {

inline void check_matmul_epilogue(const char* op, const MatmulShape& s, const void* out, const void* a, const void* b) {
  BRRR_CHECK(s.M >= 0 && s.N >= 0 && s.K >= 0, op, ": sizes must not be negative, got M = ", s.M, ", N = ", s.N,
             ", K = ", s.K);
  BRRR_CHECK(s.batch == 1, op, ": one matrix only (batch 1), got batch ", s.batch);
  BRRR_CHECK(!s.accumulate, op, ": accumulate is not supported (out = act(a @ b + bias) overwrites)");
  if (s.M == 0 || s.N == 0) return;
  BRRR_CHECK(out != nullptr, op, ": out is null; it must hold M * N = ", s.M * s.N, " values");
  BRRR_CHECK(s.K == 0 || (a != nullptr && b != nullptr), op, ": a or b is null with K = ", s.K);
}

}  // namespace brrr::kernels
