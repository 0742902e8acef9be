// kernels/cuda/check.h: every CUDA runtime and cuBLAS call is checked, and a failure is a
// brrr::Error naming the call, the file and the line. GPU builds only (nvcc, or C++ compiled
// with the CUDA headers). Chapter 10 (the GPU and the emulator).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "brrr/error.h"

namespace brrr::gpu::detail {
const char* file_name(const char* path);
[[noreturn]] void cuda_failed(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void cublas_failed(cublasStatus_t status, const char* call, const char* file, int line);
}  // namespace brrr::gpu::detail

#define BRRR_CUDA_CHECK(call)                                                               \
  do {                                                                                      \
    const cudaError_t brrr_status_ = (call);                                                \
    if (brrr_status_ != cudaSuccess)                                                        \
      ::brrr::gpu::detail::cuda_failed(brrr_status_, #call, __FILE__, __LINE__);            \
  } while (0)

#define BRRR_CUBLAS_CHECK(call)                                                             \
  do {                                                                                      \
    const cublasStatus_t brrr_status_ = (call);                                             \
    if (brrr_status_ != CUBLAS_STATUS_SUCCESS)                                              \
      ::brrr::gpu::detail::cublas_failed(brrr_status_, #call, __FILE__, __LINE__);          \
  } while (0)
