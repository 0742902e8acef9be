// kernels/backend.cpp: the CUDA device's backend, chosen once (see kernels/backend.h).
// Chapter 10 (the GPU and the emulator).
#include "kernels/backend.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"

namespace brrr::kernels {
namespace {

struct State {
  std::mutex mutex;
  std::atomic<bool> chosen{false};
  CudaBackend backend = CudaBackend::None;
  gpu::Runtime* runtime = nullptr;
  bool emulator_requested = false;
};

State& state() {
  static State* s = new State;  // never destroyed: device memory freed at exit still needs it
  return *s;
}

bool env_asks_for_emulator() {
  const char* v = std::getenv("BRRR_CUDA_EMULATOR");
  return v && *v && std::string(v) != "0";
}

void install(State& s, CudaBackend backend) {  // s.mutex held
  s.backend = backend;
  s.runtime = backend == CudaBackend::Emulator ? &gpu::emulator_runtime()
              : backend == CudaBackend::Gpu   ? gpu::cuda_runtime()
                                              : nullptr;
  remove_device(DeviceType::CUDA);
  if (backend == CudaBackend::Emulator) emu::register_kernels();
#ifdef BRRR_WITH_CUDA
  else if (backend == CudaBackend::Gpu) cuda::register_kernels();
#endif
  if (backend != CudaBackend::None) run_providers(DeviceType::CUDA, backend == CudaBackend::Emulator);
  s.chosen = true;
}

void choose(State& s) {  // s.mutex held
  if (s.chosen) return;
  if (s.emulator_requested) {
    install(s, CudaBackend::Emulator);
  } else if (env_asks_for_emulator()) {
    std::fprintf(stderr, "brrr: BRRR_CUDA_EMULATOR is set: the CUDA device is the SIMT emulator on the CPU, not a "
                         "GPU (unset it to use a GPU)\n");
    install(s, CudaBackend::Emulator);
  } else {
    install(s, gpu::cuda_runtime() ? CudaBackend::Gpu : CudaBackend::None);
  }
}

}  // namespace

CudaBackend cuda_backend() {
  State& s = state();
  if (!s.chosen) {
    std::lock_guard<std::mutex> lock(s.mutex);
    choose(s);
  }
  return s.backend;
}

gpu::Runtime* cuda_runtime() {
  cuda_backend();
  return state().runtime;
}

bool cuda_backend_chosen() { return state().chosen; }

void use_emulator_backend() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.chosen) {
    s.emulator_requested = true;
    return;
  }
  if (s.backend != CudaBackend::Emulator) install(s, CudaBackend::Emulator);
}

// The registry calls this when it is first built (kernels/registry.h).
void register_gpu_kernels() { cuda_backend(); }

}  // namespace brrr::kernels
