// kernels/cpu/bf16_convert.h: bf16 <-> float32 over whole buffers, in parallel blocks: what the
// CPU kernels on bf16 data (nn_bf16.cpp, attention.cpp, matmul.cpp) do around their float32
// loops. Chapter 18 (mixed precision). Read before: brrr/bfloat16.h, kernels/cpu/cpu.h.
//
// Widening is exact (16 zero bits below); narrowing rounds to nearest, ties to even, once. Each
// element is converted on its own, so the blocks change no bit, whatever the thread count.
#pragma once
#include <cstdint>
#include <vector>

#include "brrr/bfloat16.h"
#include "kernels/cpu/cpu.h"

namespace brrr::kernels::cpu {

inline void widen_into(float* out, const bf16* x, std::int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = static_cast<float>(x[i]);
  });
}

inline std::vector<float> widen_all(const bf16* x, std::int64_t n) {
  std::vector<float> out(static_cast<std::size_t>(n));
  widen_into(out.data(), x, n);
  return out;
}

inline void narrow_into(bf16* out, const float* x, std::int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = bf16(x[i]);
  });
}

}  // namespace brrr::kernels::cpu
