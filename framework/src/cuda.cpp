// framework/src/cuda.cpp: what backs Device::cuda() (the GPU or the emulator), its caching
// allocator, and the brrr::cuda API. Chapter 09 (the GPU and the emulator).
// Read before: brrr/cuda.h, kernels/cuda/runtime.h.
#include "brrr/cuda.h"

#include <cstdio>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "brrr/error.h"
#include "brrr/kernels.h"
#include "brrr/storage.h"
#include "internal.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/runtime.h"

namespace brrr {
namespace {

std::string mib(std::size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

// ---------------------------------------------------------------------------------------------
// The caching allocator
//
// Sizes are rounded up to a size class: multiples of 512 bytes up to 1 MiB, then four classes
// per power of two (1.25, 1.5, 1.75, 2 x 2^k), so a block wastes at most a fifth of itself. A
// freed block goes on its class's free list; the next allocation of that class takes it
// without asking the device. A training step allocates the same sizes every step, so after
// the first step every allocation is a cache hit. If the device is out of memory the cache is
// emptied and the allocation tried once more before it fails.

class CachingAllocator final : public Allocator {
 public:
  static std::size_t size_class(std::size_t nbytes) {
#if defined(__SANITIZE_ADDRESS__)
    // Sanitizer builds: exact sizes (cudaMalloc's 256-byte granularity), so that a kernel that
    // runs one element past a tensor leaves its allocation (compute-sanitizer, or
    // AddressSanitizer on the emulator's arena), rather than landing in a size class's slack.
    return std::max<std::size_t>((nbytes + 255) / 256 * 256, 256);
#endif
    if (nbytes <= (1u << 20)) return std::max<std::size_t>((nbytes + 511) / 512 * 512, 512);
    std::size_t power = 1u << 20;
    while (power * 2 < nbytes) power *= 2;  // power < nbytes <= 2 * power
    const std::size_t step = power / 4;
    return (nbytes + step - 1) / step * step;
  }

  void set_runtime(gpu::Runtime* runtime) {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached();
    runtime_ = runtime;
  }

  void* allocate(std::size_t nbytes) override {
    const std::size_t size = size_class(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.allocations;
    void* p = nullptr;
    auto& list = free_[size];
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
      ++stats_.cache_hits;
    } else {
      p = runtime_->malloc(size);
      if (!p) {
        release_cached();
        p = runtime_->malloc(size);
      }
      if (!p)
        detail::fail("CUDA out of memory: tried to allocate ", nbytes, " bytes (", mib(nbytes), ") on ",
                     runtime_->name(), ", which has ", runtime_->free_bytes(), " bytes (",
                     mib(runtime_->free_bytes()), ") free of ", runtime_->total_bytes(), "; brrr holds ",
                     stats_.allocated, " bytes in tensors (a smaller batch or model needs less)");
      stats_.reserved += size;
      ++stats_.device_allocations;
    }
    live_[p] = size;
    runtime_->tensor_allocated(p, nbytes);  // the emulator poisons it and learns the tensor's exact size
    stats_.allocated += size;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    return p;
  }

  void deallocate(void* ptr, std::size_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    BRRR_CHECK(it != live_.end(), "CUDA allocator: freeing a pointer it did not allocate");
    stats_.allocated -= it->second;
    runtime_->tensor_freed(ptr);
    free_[it->second].push_back(ptr);
    live_.erase(it);
  }

  void empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached();
  }

  cuda::MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated = stats_.allocated;
  }
  bool in_use() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !live_.empty();
  }

 private:
  void release_cached() {  // mutex_ held
    if (!runtime_) return;
    for (auto& [size, list] : free_) {
      for (void* p : list) runtime_->free(p);
      stats_.reserved -= size * list.size();
      list.clear();
    }
  }

  std::mutex mutex_;
  gpu::Runtime* runtime_ = nullptr;
  std::map<std::size_t, std::vector<void*>> free_;  // size class -> free blocks
  std::unordered_map<void*, std::size_t> live_;     // block -> size class
  cuda::MemoryStats stats_;
};

// ---------------------------------------------------------------------------------------------
// Which backend: decided when the kernel registry is first built (register_gpu_kernels), or
// later by use_emulator().

enum class Backend { Undecided, None, Gpu, Emulator };

struct State {
  std::mutex mutex;
  std::atomic<Backend> backend{Backend::Undecided};  // read without the mutex (decide_backend)
  bool emulator_requested = false;
  gpu::Runtime* runtime = nullptr;
  CachingAllocator allocator;
};

State& state() {
  static State* s = new State;  // never destroyed: tensors freed at exit still need it
  return *s;
}

bool env_asks_for_emulator() {
  const char* v = std::getenv("BRRR_CUDA_EMULATOR");
  return v && *v && std::string(v) != "0";
}

void install(State& s, Backend backend) {  // s.mutex held
  s.backend = backend;
  kernels::remove_device(DeviceType::CUDA);
  if (backend == Backend::None) {
    s.runtime = nullptr;
    set_allocator(DeviceType::CUDA, nullptr);
    return;
  }
  s.runtime = backend == Backend::Emulator ? &gpu::emulator_runtime() : gpu::cuda_runtime();
  s.allocator.set_runtime(s.runtime);
  set_allocator(DeviceType::CUDA, &s.allocator);
  if (backend == Backend::Emulator) kernels::emu::register_kernels();
#ifdef BRRR_WITH_CUDA
  else kernels::cuda::register_kernels();
#endif
}

std::atomic<bool> tf32{false};

// Building the kernel registry decides the backend (register_gpu_kernels); this builds it once
// if nothing has yet, and costs one load afterwards (it sits on every copy to and from the GPU).
void decide_backend() {
  if (state().backend == Backend::Undecided) kernels::ops();
}

}  // namespace

namespace kernels {
// Called by the registry once, when it is first built.
void register_gpu_kernels() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.backend != Backend::Undecided) return;
  if (s.emulator_requested) {
    install(s, Backend::Emulator);
  } else if (env_asks_for_emulator()) {
    // Said out loud: a variable left set in a shell would otherwise turn every later
    // `--device cuda` into the emulator without a word, slow and with no GPU in sight.
    std::fprintf(stderr, "brrr: BRRR_CUDA_EMULATOR is set: the CUDA device is the SIMT emulator on the CPU, not a "
                         "GPU (unset it to use a GPU)\n");
    install(s, Backend::Emulator);
  }
  else if (gpu::cuda_runtime()) install(s, Backend::Gpu);
  else install(s, Backend::None);
}
}  // namespace kernels

namespace detail {
kernels::Stream stream(Device device) {
  if (device.is_cpu()) return nullptr;
  gpu::Runtime* runtime = state().runtime;
  return runtime ? runtime->stream() : nullptr;
}

void synchronize_cuda_if_in_use() {
  if (state().backend == Backend::Undecided) return;
  if (gpu::Runtime* runtime = state().runtime) runtime->synchronize();
}

gpu::Runtime& cuda_runtime_for(const char* what) {
  decide_backend();
  gpu::Runtime* runtime = state().runtime;
  if (!runtime) {
#ifdef BRRR_WITH_CUDA
    fail(what, ": no CUDA GPU or driver was found (to run the CUDA kernels on the CPU, use the emulator: "
         "--device emulator or BRRR_CUDA_EMULATOR=1)");
#else
    fail(what, ": brrr was built without CUDA (BRRR_CUDA=OFF or no nvcc); the emulator still runs the CUDA "
         "kernels: --device emulator or BRRR_CUDA_EMULATOR=1");
#endif
  }
  return *runtime;
}
}  // namespace detail

namespace cuda {

bool is_available() {
  decide_backend();
  return state().runtime != nullptr;
}
bool gpu_available() { return gpu::cuda_runtime() != nullptr; }
bool is_emulated() {
  decide_backend();
  return state().backend == Backend::Emulator;
}

void use_emulator() {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.backend == Backend::Undecided) {
      s.emulator_requested = true;
      return;
    }
    if (s.backend == Backend::Emulator) return;
    BRRR_CHECK(!s.allocator.in_use(), "cuda::use_emulator: CUDA tensors exist on ", s.runtime->name(),
               "; choose the emulator before the first CUDA tensor is made");
    install(s, Backend::Emulator);
  }
}

std::string device_name() { return detail::cuda_runtime_for("cuda::device_name").name(); }
void synchronize() { detail::cuda_runtime_for("cuda::synchronize").synchronize(); }

MemoryStats memory_stats() { return state().allocator.stats(); }
void reset_peak_memory_stats() { state().allocator.reset_peak(); }
void empty_cache() { state().allocator.empty_cache(); }

void set_allow_tf32(bool allow) { tf32 = allow; }
bool allow_tf32() { return tf32; }

}  // namespace cuda
}  // namespace brrr
