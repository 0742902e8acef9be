// kernels/cuda/cublas.cu: matmul through cuBLAS, the default on a GPU and the bar every
// hand-written matmul in kernels/cuda/matmul/ is measured against. GPU only (the emulator has no cuBLAS).
// Chapter 14 (matmul from naive to tensor cores). Read before: kernels/cuda/matmul/.
//
// cuBLAS is column-major; brrr is row-major. A row-major (M, N) matrix is the same bytes as a
// column-major (N, M) one, its transpose, so out = a @ b is computed as out^T = b^T @ a^T:
// cuBLAS gets b first, a second, and the sizes (N, M, K). An operand that brrr stores
// transposed (trans_a, trans_b) becomes CUBLAS_OP_T. A batch stride of 0 broadcasts, which
// cublas*gemmStridedBatched allows.
//
// TF32: Ampere and later can run float32 matmuls on tensor cores with 10-bit mantissas, ~7x
// faster and ~1e-3 relative error. brrr keeps full float32 unless asked
// (brrr::cuda::set_allow_tf32(true), which the op passes in MatmulShape::allow_tf32; `brrr train
// --tf32 true`), as PyTorch does for matmuls by default.
//
// Mixed precision (chapter 18): matmul:bf16, matmul's bf16-products slot, is what autocast calls, float32 in memory with the
// operands rounded to bf16. cuBLAS multiplies bf16 matrices (CUDA_R_16BF) on the tensor cores
// with float32 sums (CUBLAS_COMPUTE_32F) into a float32 out, so a and b are first rounded into
// bf16 copies in scratch memory by the BFloat16 dtype's conversion kernel (elementwise.cu's
// cast: round to nearest even, as brrr::bf16): a pass over the operands at 6 bytes an element,
// small beside the GEMM's K-fold reuse of them. matmul on bf16 data takes bf16 a and b as they
// are: the same GEMM without the copies, the peer of matmul's variant 12 (matmul/mma_sync.cu). (This file is host code, built for the GPU
// only: it launches no kernel of its own, which would need simt.h and the emulator's copy.)
#include <cstdint>
#include <mutex>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/registry.h"

namespace brrr::kernels::cuda {
namespace {

cublasHandle_t handle_for(Stream stream, bool allow_tf32) {
  // cuBLAS's workspace is brrr's, given once, so that no GEMM asks the driver for memory while
  // the step is captured as a CUDA graph (chapter 17); 32 MiB is NVIDIA's advice for Hopper.
  // cublasSetStream puts cuBLAS back on its own workspace pool, so the stream is set only when
  // it changes, and the workspace again after it.
  constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;
  static void* workspace = nullptr;
  static cudaStream_t current = nullptr;
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    BRRR_CUBLAS_CHECK(cublasCreate(&h));
    BRRR_CUDA_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    BRRR_CUBLAS_CHECK(cublasSetStream(h, current));
    BRRR_CUBLAS_CHECK(cublasSetWorkspace(h, workspace, kWorkspaceBytes));
    return h;
  }();
  if (static_cast<cudaStream_t>(stream) != current) {
    current = static_cast<cudaStream_t>(stream);
    BRRR_CUBLAS_CHECK(cublasSetStream(handle, current));
    BRRR_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace, kWorkspaceBytes));
  }
  BRRR_CUBLAS_CHECK(cublasSetMathMode(handle, allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  return handle;
}

// cuBLAS's arguments for a row-major out = a @ b, computed as the column-major out^T = b^T a^T
// (the comment at the top of this file): b first, m = N, n = M.
struct ColumnMajor {
  explicit ColumnMajor(const MatmulShape& s)
      : op_b(s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N), op_a(s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N),
        m(static_cast<int>(s.N)), n(static_cast<int>(s.M)), k(static_cast<int>(s.K)),
        // Leading dimensions of the row-major storage: b is (K, N) or, transposed, (N, K).
        ldb(static_cast<int>(s.trans_b ? s.K : s.N)), lda(static_cast<int>(s.trans_a ? s.M : s.K)),
        batch(static_cast<int>(s.batch)) {}
  cublasOperation_t op_b, op_a;
  int m, n, k, ldb, lda, batch;
};

template <class T>
void matmul_cublas(T* out, const T* a, const T* b, const MatmulShape& s, Stream stream) {
  if (s.M == 0 || s.N == 0 || s.batch == 0) return;
  cublasHandle_t handle = handle_for(stream, s.allow_tf32);
  const T alpha = 1, beta = s.accumulate ? 1 : 0;
  const ColumnMajor g(s);
  if (s.K == 0) {  // an empty sum: out = 0 (or unchanged when accumulating)
    if (!s.accumulate)
      for (std::int64_t i = 0; i < s.batch; ++i)
        BRRR_CUDA_CHECK(cudaMemsetAsync(out + i * s.stride_out, 0, sizeof(T) * s.M * s.N,
                                        static_cast<cudaStream_t>(stream)));
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    BRRR_CUBLAS_CHECK(cublasSgemmStridedBatched(handle, g.op_b, g.op_a, g.m, g.n, g.k, &alpha, b, g.ldb, s.stride_b, a,
                                                g.lda, s.stride_a, &beta, out, g.m, s.stride_out, g.batch));
  } else {
    BRRR_CUBLAS_CHECK(cublasDgemmStridedBatched(handle, g.op_b, g.op_a, g.m, g.n, g.k, &alpha, b, g.ldb, s.stride_b, a,
                                                g.lda, s.stride_a, &beta, out, g.m, s.stride_out, g.batch));
  }
}

// The elements a batched operand spans: one matrix when its batch stride is 0 (broadcast),
// else batch matrices `stride` apart.
std::int64_t operand_span(std::int64_t batch, std::int64_t stride, std::int64_t matrix) {
  return stride == 0 ? matrix : (batch - 1) * stride + matrix;
}

// One strided-batched GEMM on bf16 operands already in device memory (bf16 bits), float32 sums
// and out; shapes as matmul_cublas, K > 0.
void gemm_bf16(float* out, const void* a16, const void* b16, const MatmulShape& s, Stream stream) {
  // bf16 products are exact in float32 and the tensor cores add them in float32 whatever the
  // math mode, so allow_tf32 changes nothing here.
  cublasHandle_t handle = handle_for(stream, false);
  const float alpha = 1, beta = s.accumulate ? 1 : 0;
  const ColumnMajor g(s);
  BRRR_CUBLAS_CHECK(cublasGemmStridedBatchedEx(handle, g.op_b, g.op_a, g.m, g.n, g.k, &alpha, b16, CUDA_R_16BF, g.ldb,
                                               s.stride_b, a16, CUDA_R_16BF, g.lda, s.stride_a, &beta, out, CUDA_R_32F,
                                               g.m, s.stride_out, g.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// matmul:bf16 on cuBLAS: a and b rounded into bf16 scratch copies (same layout, same strides),
// then one strided-batched GEMM, bf16 in, float32 sums and out. Shapes as matmul_cublas.
void matmul_bf16_cublas(float* out, const float* a, const float* b, const MatmulShape& s, Stream stream) {
  if (s.M == 0 || s.N == 0 || s.batch == 0) return;
  if (s.K == 0) return matmul_cublas<float>(out, a, b, s, stream);  // an empty sum: no operand is read
  const std::int64_t na = operand_span(s.batch, s.stride_a, s.M * s.K);
  const std::int64_t nb = operand_span(s.batch, s.stride_b, s.K * s.N);
  // One workspace holds both copies; b's starts 256 bytes aligned, as cuBLAS likes its operands.
  const std::int64_t b_offset = (na + 127) / 128 * 128;
  auto* scratch = static_cast<std::uint16_t*>(workspace(static_cast<std::size_t>(b_offset + nb) * 2, stream));
  std::uint16_t *a16 = scratch, *b16 = scratch + b_offset;  // bf16 bits
  static Kernel to_bf16(op::cast<brrr::bf16>);
  to_bf16(DeviceType::CUDA)(a16, DType::BFloat16, a, DType::Float32, na, stream);
  to_bf16(DeviceType::CUDA)(b16, DType::BFloat16, b, DType::Float32, nb, stream);
  gemm_bf16(out, a16, b16, s, stream);
}

// matmul on bf16 data on cuBLAS: a and b are bf16 in memory already, so the GEMM alone: the peer
// the kernel lab times matmul's variant 12 beside (the bar: at least 50% of it at 4096^3).
void matmul_bf16_memory_cublas(float* out, const brrr::bf16* a, const brrr::bf16* b, const MatmulShape& s,
                               Stream stream) {
  if (s.M == 0 || s.N == 0 || s.batch == 0) return;
  if (s.K == 0) return matmul_cublas<float>(out, nullptr, nullptr, s, stream);  // an empty sum: nothing is read
  gemm_bf16(out, a, b, s, stream);
}

}  // namespace

void register_cublas_kernels() {
  const VariantMeta cublas = about("NVIDIA's cuBLAS GEMM: the bar every hand-written variant is measured against");
  add(op::matmul<float>, DeviceType::CUDA, "cublas", &matmul_cublas<float>, 100, cublas);
  add(op::matmul<double>, DeviceType::CUDA, "cublas", &matmul_cublas<double>, 100, cublas);
  // It rounds a and b: the bf16-products slot ("matmul:bf16"), for autocast's calls only.
  add(op::matmul<float>.autocast(), DeviceType::CUDA, "cublas", &matmul_bf16_cublas, 100,
      about("cuBLAS's bf16 GEMM (cublasGemmStridedBatchedEx, float32 sums) on bf16 copies of a and b"));
  add(op::matmul_on_bf16, DeviceType::CUDA, "cublas", &matmul_bf16_memory_cublas, 100,
      about("cuBLAS's bf16 GEMM (cublasGemmStridedBatchedEx, float32 sums) on a and b as they are"));
}

}  // namespace brrr::kernels::cuda
