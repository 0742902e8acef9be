// kernels/cpu/transpose.cpp: the transpose op on the CPU, out (N, M) = in (M, N)^T, the
// reference the GPU's kernels are compared with. Chapter 14 (the memory section).
// Read before: kernels/transpose.h. Read next: kernels/cuda/transpose.cu.
#include "kernels/transpose.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu.h"
#include "kernels/registry.h"

namespace brrr::kernels::cpu {

// Blocks of 32 rows of `in` over the cores; inside one, each column j of the block is written
// as a run of 32 consecutive floats of out, so both sides stay in a few cache lines.
template <class T>
void transpose(T* out, const T* in, std::int64_t M, std::int64_t N, Stream) {
  constexpr std::int64_t kRows = 32;
  const std::int64_t blocks = (M + kRows - 1) / kRows;
  parallel_for(blocks, grain(kRows * N, kElementwiseGrain), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t b = begin; b < end; ++b) {
      const std::int64_t i0 = b * kRows, i1 = std::min(M, i0 + kRows);
      for (std::int64_t j = 0; j < N; ++j)
        for (std::int64_t i = i0; i < i1; ++i) out[j * M + i] = in[i * N + j];
    }
  });
}

template void transpose<float>(float*, const float*, std::int64_t, std::int64_t, Stream);
template void transpose<double>(double*, const double*, std::int64_t, std::int64_t, Stream);

void register_transpose_kernels() {
  const VariantMeta blocked = about("blocks of 32 rows over the cores, each column written as one run");
  add(op::transpose<float>, DeviceType::CPU, "cpu", &transpose<float>, 0, blocked);
  add(op::transpose<double>, DeviceType::CPU, "cpu", &transpose<double>, 0, blocked);
}

}  // namespace brrr::kernels::cpu
