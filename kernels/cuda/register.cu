// kernels/cuda/register.cu: registers every CUDA kernel file's variants (chapter 10).
// Compiled twice like the kernel files (see simt.h): the GPU's register_kernels and the
// emulator's. kernels/backend.cpp calls one of them, for the backend the process uses (the
// exercises' kernels join through a provider: exercises/install.cpp).
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/rows/rows.h"
#include "kernels/cuda/simt.h"
#include "kernels/transpose.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

void register_kernels() {
  register_elementwise_kernels();
  register_reduce_kernels();
  register_nn_kernels();
  register_matmul_cuda_core_kernels();
  register_matmul_tensor_core_kernels();
  register_matmul_wgmma_kernels();
  register_matmul_epilogue_kernels();
  register_gelu_kernels();
  register_layernorm_kernels();
  register_residual_layernorm_kernels();
  register_crossentropy_kernels();
  register_adamw_kernels();
  register_attention_cuda_core_kernels();
  register_attention_tensor_core_kernels();
  register_attention_wgmma_kernels();  // attention/wgmma.cu (declared in attention/attention.h)
  register_conv_kernels();
  register_transpose_kernels();  // transpose.cu (declared in kernels/transpose.h)
  register_linear_rows_kernels();   // rows/linear_rows.cu (declared in rows/rows.h)
  register_attend_cache_kernels();  // rows/attend_cache.cu
  register_sample_kernels();        // rows/sample.cu
#if !BRRR_EMULATOR
  register_cublas_kernels();    // the default matmul on a GPU; the emulator has no cuBLAS
  register_cublaslt_kernels();  // the default matmul_epilogue on a GPU
#endif
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
