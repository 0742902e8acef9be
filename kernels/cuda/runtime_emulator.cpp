// kernels/cuda/runtime_emulator.cpp: the emulator's "device": host memory and the wall clock.
// Chapter 09 (the GPU and the emulator). Read before: kernels/cuda/runtime.h.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "brrr/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/runtime.h"

namespace brrr::gpu {
namespace {

class EmulatorRuntime final : public Runtime {
 public:
  std::string name() const override { return "SIMT emulator (CPU)"; }
  bool emulated() const override { return true; }

  void* malloc(std::size_t nbytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (limit_ && used_ + nbytes > limit_) return nullptr;
    void* p = std::aligned_alloc(256, (std::max<std::size_t>(nbytes, 1) + 255) / 256 * 256);  // cudaMalloc aligns to 256
    if (!p) return nullptr;
    sizes_[p] = nbytes;
    used_ += nbytes;
    return p;
  }
  void free(void* ptr) override {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(ptr);
    if (it != sizes_.end()) {
      used_ -= it->second;
      sizes_.erase(it);
    }
    std::free(ptr);
  }
  void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) override {
    if (nbytes == 0) return;
    // The waits a GPU's runtime would count for this copy (runtime.h).
    if (kind == CopyKind::DeviceToHost) count_device_to_host_copy();
    if (kind == CopyKind::HostToDevice && nbytes > kStagedCopyBytes) count_synchronization();
    std::memmove(dst, src, nbytes);
  }
  void memset(void* dst, int value, std::size_t nbytes) override { std::memset(dst, value, nbytes); }
  void synchronize() override { count_synchronization(); }
  std::size_t free_bytes() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_ ? limit_ - used_ : total_bytes();
  }
  std::size_t total_bytes() override { return limit_ ? limit_ : std::size_t{16} << 30; }
  kernels::Stream stream() override { return nullptr; }
  double time_ms(const std::function<void()>& work) override {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::size_t l2_bytes() override { return 0; }

  void set_limit(std::size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = nbytes;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t used_ = 0, limit_ = 0;
};

EmulatorRuntime& emulator() {
  static EmulatorRuntime runtime;
  return runtime;
}

}  // namespace

Runtime& emulator_runtime() { return emulator(); }
void set_emulator_memory_limit(std::size_t nbytes) { emulator().set_limit(nbytes); }

#ifndef BRRR_WITH_CUDA
Runtime* cuda_runtime() { return nullptr; }
#endif

}  // namespace brrr::gpu

// The emulator's workspace: one host buffer that grows.
namespace brrr::kernels::emu {
void* workspace(std::size_t bytes, Stream) {
  static std::mutex mutex;
  static void* buffer = nullptr;
  static std::size_t size = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (bytes > size) {
    std::free(buffer);
    size = (bytes + 255) / 256 * 256;
    buffer = std::aligned_alloc(256, size);
    BRRR_CHECK(buffer != nullptr, "emulator workspace: out of memory for ", bytes, " bytes");
  }
  return buffer;
}
}  // namespace brrr::kernels::emu
