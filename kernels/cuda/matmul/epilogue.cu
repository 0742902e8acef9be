// kernels/cuda/matmul/epilogue.cu: matmul_epilogue on bf16 data, the GEMM of the bf16 step's
// linear layers with its bias and GELU, in two kernels: the registry's matmul on bf16 data into
// float32 sums, then one pass that adds the bias, applies GELU (keeping the pre-activation) and
// rounds to bf16. Chapter 18, section 11.
// Read before: kernels/cpu/nn_bf16.cpp (the reference, at its end), mma_sync.cu (variant 11,
// the same epilogue inside the GEMM). Read next: kernels/cuda/cublaslt.cu (the GPU's default).
//
// Why an op of its own: a linear layer on bf16 data used to be four passes over its (M, N)
// output around the GEMM: the bias copied into a float32 buffer (4 bytes an element), the GEMM
// reading and writing it (8), a cast reading it and writing bf16 (6), and for c_fc a GELU
// reading and writing bf16 (4 more): 18 or 22 bytes an element where the result is 2. For
// GPT-2's four linear layers at batch 16, T 1024 ((2304 + 768 + 768) x 18 + 3072 x 22 bytes for
// each of 16384 rows) that is 2.2 GB a layer in the forward alone. cuBLASLt does the bias, GELU
// and the rounding in its epilogue, from the accumulators (2 bytes an element, 4 with pre); this
// variant is the halfway step the emulator can run: the float32 sums are written once and read
// once (8 bytes), then 2 (or 4) bytes of bf16, the bias and GELU costing no pass of their own.
//
// The sums may differ from the CPU's in the last bit where the bias joins them: the CPU starts
// each row at the bias and the GEMM adds to it, here the bias is added to the finished product.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/simt.h"
#include "kernels/matmul_epilogue.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

constexpr int kEpilogueThreads = 256;
constexpr int kEpilogueBlocks = 132 * 8;  // one wave of an H100 or H200; the loop strides over the rest

// One pass over the float32 sums: + bias, GELU (pre kept) or not, each value rounded to bf16 once.
__global__ void epilogue_kernel(brrr::bf16* out, brrr::bf16* pre, const float* sums, const brrr::bf16* bias,
                                bool gelu, std::int64_t n, std::int64_t N) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float v = bias ? sums[i] + float_of(bias[i % N]) : sums[i];
    if (!gelu) {
      out[i] = bf16_of(v);
      continue;
    }
    if (pre) pre[i] = bf16_of(v);
    out[i] = bf16_of(gelu_tanh(v));
  }
}

}  // namespace

void matmul_epilogue_unfused(brrr::bf16* out, brrr::bf16* pre, const brrr::bf16* a, const brrr::bf16* b,
                             const brrr::bf16* bias, bool gelu, const MatmulShape& s, Stream stream) {
  check_matmul_epilogue("matmul_epilogue unfused", s, out, a, b);
  if (s.M == 0 || s.N == 0) return;
  const std::int64_t n = s.M * s.N;
  auto* sums = static_cast<float*>(workspace(static_cast<std::size_t>(n) * sizeof(float), stream));
  MatmulShape g = s;
  g.stride_out = n;
  static Kernel<matmul_on_bf16_fn> gemm(op::matmul_on_bf16);
  gemm(DeviceType::CUDA)(sums, a, b, g, stream);  // K = 0: zeros
  BRRR_LAUNCH(epilogue_kernel, grid_for(n, kEpilogueThreads, kEpilogueBlocks), kEpilogueThreads, 0, stream, out, pre,
              sums, bias, gelu, n, s.N);
}

void register_matmul_epilogue_kernels() {
  add(op::matmul_epilogue_on_bf16, DeviceType::CUDA, "unfused", &matmul_epilogue_unfused, 10,
      about("the registry's matmul on bf16 data into float32 sums, then one pass: + bias, GELU, rounded to bf16"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
