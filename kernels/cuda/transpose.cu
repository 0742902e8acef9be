// kernels/cuda/transpose.cu: the transpose op on the GPU, out (N, M) = in (M, N)^T, one thread
// per element. Chapter 14 (the memory section). Read before: kernels/transpose.h, chapter 14's
// "What the memory does, without a GPU". Read next: exercises/student/transpose.cu (ex14.2).
//
// A warp is 32 threads along N, so its load reads 32 consecutive floats of a row of `in`
// (4 sectors: coalesced), and its store writes 32 floats of a column of `out`, each M floats
// apart: 32 sectors of which each is used for 4 bytes (8 times the least). The counters show
// it (brrr kernel-lab transpose --device emulator --mode counters). Exercise ex14.2 writes the
// kernel whose loads and stores are both coalesced, by going through a tile in shared memory,
// with no bank conflicts.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"
#include "kernels/transpose.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

constexpr int kWidth = 32, kHeight = 8;  // a block: 32 threads along N (a warp), 8 rows
constexpr std::int64_t kMaxGridYZ = 65535;  // CUDA's limit on gridDim.y

template <class T>
__global__ void transpose_naive_kernel(T* out, const T* in, std::int64_t M, std::int64_t N) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * kWidth + threadIdx.x;
  if (j >= N) return;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.y) * kHeight + threadIdx.y; i < M;
       i += static_cast<std::int64_t>(gridDim.y) * kHeight)
    out[j * M + i] = in[i * N + j];
}

template <class T>
void transpose_naive(T* out, const T* in, std::int64_t M, std::int64_t N, Stream stream) {
  if (M == 0 || N == 0) return;
  BRRR_CHECK(ceil_div(N, kWidth) <= 0x7fffffff, "transpose: N = ", N, " needs more than 2^31 - 1 blocks");
  const dim3 grid(static_cast<unsigned>(ceil_div(N, kWidth)),
                  static_cast<unsigned>(std::min<std::int64_t>(ceil_div(M, kHeight), kMaxGridYZ)));
  BRRR_LAUNCH((transpose_naive_kernel<T>), grid, dim3(kWidth, kHeight), 0, stream, out, in, M, N);
}

template void transpose_naive<float>(float*, const float*, std::int64_t, std::int64_t, Stream);
template void transpose_naive<double>(double*, const double*, std::int64_t, std::int64_t, Stream);

void register_transpose_kernels() {
  const VariantMeta naive = about("one thread per element: loads coalesced, stores 32 sectors per request");
  add(op::transpose<float>, DeviceType::CUDA, "naive", &transpose_naive<float>, 0, naive);
  add(op::transpose<double>, DeviceType::CUDA, "naive", &transpose_naive<double>, 0, naive);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
