// kernels/cuda/cuda_kernels.h: what each CUDA kernel file offers the rest of brrr.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt.h.
//
// Every kernel file below is compiled twice (see simt.h): into brrr::kernels::cuda by nvcc
// and into brrr::kernels::emu by g++. Each file has one function that puts its kernels into
// the registry under DeviceType::CUDA; register_kernels() (register.cu) calls them all. The
// CUDA device of a process is backed either by the GPU or by the emulator (framework/src/
// cuda.cpp chooses), and only that namespace's kernels are registered.
#pragma once
#include <cstddef>

#include "kernels/signatures.h"

#define BRRR_CUDA_KERNEL_FILES(NS)                                                                      \
  namespace NS {                                                                                       \
  void register_kernels();              /* all of the below, in register.cu */                         \
  void register_elementwise_kernels();  /* elementwise.cu: fill, copy, cast, unary, binary, random */  \
  void register_reduce_kernels();       /* reduce.cu: sum_dim, max_dim, max_dim_backward */            \
  void register_nn_kernels();           /* nn.cu: embedding, softmax, log_softmax */                   \
  void register_matmul_cuda_core_kernels();   /* matmul/cuda_cores.cu: naive to warp tiles */       \
  void register_matmul_tensor_core_kernels(); /* matmul/mma_sync.cu: WMMA and mma.sync */           \
  void register_matmul_wgmma_kernels();       /* matmul/wgmma.cu: Hopper's wgmma, TMA, mbarriers */  \
  void register_matmul_epilogue_kernels();    /* matmul/epilogue.cu: bf16 GEMM + bias + GELU */     \
  void register_gelu_kernels();         /* gelu.cu */                                                  \
  void register_layernorm_kernels();    /* layernorm.cu */                                             \
  void register_residual_layernorm_kernels(); /* residual_layernorm.cu: on bf16 data */                \
  void register_crossentropy_kernels(); /* crossentropy.cu */                                          \
  void register_adamw_kernels();        /* adamw.cu: adamw_step, sgd_step */                           \
  void register_attention_cuda_core_kernels();   /* attention/cuda_cores.cu: naive, flash */        \
  void register_attention_tensor_core_kernels(); /* attention/mma_sync.cu: bf16 on mma.sync */      \
  void register_conv_kernels();         /* conv.cu: convolution (im2col + GEMM, direct) and pooling */  \
  /* Scratch memory on the device for kernels that need it (per process, grows, never shrinks; */      \
  /* stream-ordered, so a kernel may use it until its launch returns). */                              \
  void* workspace(std::size_t bytes, Stream stream);                                                   \
  }

namespace brrr::kernels {
BRRR_CUDA_KERNEL_FILES(emu)
BRRR_CUDA_KERNEL_FILES(cuda)
namespace cuda {
void register_cublas_kernels();    // cublas.cu: matmul through cuBLAS (GPU only)
void register_cublaslt_kernels();  // cublaslt.cu: matmul_epilogue through cuBLASLt (GPU only)
}
}  // namespace brrr::kernels
