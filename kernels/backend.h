// kernels/backend.h: what runs the CUDA device's kernels: a GPU through the CUDA runtime, the
// SIMT emulator on the CPU, or nothing. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/runtime.h. Read next: framework/src/cuda.cpp, which builds
// Device::cuda()'s memory and the public brrr::cuda API on this.
//
// The choice is made once, the first time anything asks (the registry asks when it is first
// built): the emulator if use_emulator_backend() came first or BRRR_CUDA_EMULATOR=1 is set
// (said on stderr, since a variable left set in a shell would otherwise turn every later
// `--device cuda` into the emulator without a word); else the GPU when the CUDA runtime finds
// one; else none. Choosing registers that backend's CUDA kernels, and every provider's
// (kernels/registry.h).
#pragma once

namespace brrr::gpu {
class Runtime;
}

namespace brrr::kernels {

enum class CudaBackend { None, Gpu, Emulator };

// The backend, chosen now if it was not yet.
CudaBackend cuda_backend();
// The runtime behind the CUDA device: nullptr when the backend is None.
gpu::Runtime* cuda_runtime();
// Whether the choice has been made (asking nothing of the GPU).
bool cuda_backend_chosen();
// Asks for the emulator: chosen now if nothing was yet; otherwise the GPU backend is replaced
// (its kernels unregistered, the emulator's registered). The caller makes sure no device
// memory of the old runtime is still in use (framework/src/cuda.cpp's use_emulator does).
void use_emulator_backend();

}  // namespace brrr::kernels
