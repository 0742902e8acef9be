// kernels/cuda/register.cu: registers the CUDA kernels (chapter 09, the GPU and the emulator).
// Compiled by nvcc when BRRR_CUDA is on. The CUDA backend (device memory, the caching
// allocator and one kernel per op) is added file by file next to this one; until then no
// CUDA kernel is registered and asking for a CUDA tensor is a clear brrr::Error.
#include <cuda_runtime.h>

#include "kernels/registry.h"

namespace brrr::kernels {

void register_cuda_kernels() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) {
    cudaGetLastError();  // no driver or no GPU: clear the sticky error and register nothing
    return;
  }
}

}  // namespace brrr::kernels
