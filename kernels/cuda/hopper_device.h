// kernels/cuda/hopper_device.h: which compute capability the current GPU has, asked once in one
// place for the kernels that run only on sm_90 (wgmma, TMA: Hopper's sm_90a code traps on any
// other chip). nvcc only: the emulator runs them everywhere. Chapter 21 (Hopper). Read before:
// kernels/cuda/simt_hopper.h. Read next: kernels/cuda/matmul/wgmma.cu.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/check.h"  // BRRR_CUDA_CHECK

namespace brrr::kernels::cuda {

struct ComputeCapability {
  int major = 0, minor = 0;
  bool is_sm90() const { return major == 9 && minor == 0; }
};

// The current device's; a failed query is an error (BRRR_CUDA_CHECK).
inline ComputeCapability compute_capability() {
  int device = 0;
  ComputeCapability cc;
  BRRR_CUDA_CHECK(cudaGetDevice(&device));
  BRRR_CUDA_CHECK(cudaDeviceGetAttribute(&cc.major, cudaDevAttrComputeCapabilityMajor, device));
  BRRR_CUDA_CHECK(cudaDeviceGetAttribute(&cc.minor, cudaDevAttrComputeCapabilityMinor, device));
  return cc;
}

// For registration: whether the current device is sm_90, false when there is none or a query
// fails (leaving no error behind for the next call).
inline bool device_is_sm90() {
  int device = 0;
  ComputeCapability cc;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&cc.major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&cc.minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return cc.is_sm90();
}

}  // namespace brrr::kernels::cuda
