// kernels/cuda/runtime_emulator.cpp: the emulator's "device": the device memory arena, copies
// that check their direction, one stream, and the wall clock. Chapter 10 (the GPU and the
// emulator). Read before: kernels/cuda/runtime.h, kernels/cuda/emulator_memory.h.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "brrr/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/runtime.h"

namespace brrr::gpu {
namespace {

const char* kind_name(CopyKind kind) {
  switch (kind) {
    case CopyKind::HostToDevice: return "host to device";
    case CopyKind::DeviceToHost: return "device to host";
    case CopyKind::DeviceToDevice: return "device to device";
  }
  return "?";
}

// A copy's device side must lie inside one live allocation, its host side outside the arena:
// cudaMemcpy with the wrong kind fails or corrupts memory on a GPU.
void check_side(const char* what, const void* p, std::size_t nbytes, bool device, CopyKind kind) {
  namespace memory = simt::memory;
  if (!device) {
    BRRR_CHECK(!memory::in_arena(p), "copy (", kind_name(kind), "): the ", what, " is device memory (",
               memory::describe(p), "), but a ", kind_name(kind), " copy's ", what, " is host memory");
    return;
  }
  memory::Allocation allocation;
  BRRR_CHECK(memory::in_arena(p), "copy (", kind_name(kind), "): the ", what, " ", p,
             " is host memory, but a ", kind_name(kind), " copy's ", what, " is device memory");
  BRRR_CHECK(memory::find(p, allocation) &&
                 reinterpret_cast<std::uintptr_t>(p) + nbytes <= allocation.begin + allocation.bytes,
             "copy (", kind_name(kind), ") of ", nbytes, " bytes: the ", what, " is ", memory::describe(p),
             ", and the copy does not fit in a live allocation");
}

class EmulatorRuntime final : public Runtime {
 public:
  std::string name() const override { return "SIMT emulator (CPU)"; }
  bool emulated() const override { return true; }

  void* malloc(std::size_t nbytes) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (limit_ && used_ + nbytes > limit_) return nullptr;
    }
    void* p = simt::memory::allocate(nbytes);
    if (!p) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    sizes_[p] = nbytes;
    used_ += nbytes;
    return p;
  }
  void free(void* ptr) override {
    if (!ptr) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = sizes_.find(ptr);
      if (it != sizes_.end()) {
        used_ -= it->second;
        sizes_.erase(it);
      }
    }
    simt::memory::release(ptr);
  }
  void tensor_allocated(void* block, std::size_t nbytes) override { simt::memory::set_in_use(block, nbytes); }
  void tensor_freed(void* block) override { simt::memory::set_cached(block); }
  void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) override {
    if (nbytes == 0) return;
    check_side("destination", dst, nbytes, kind != CopyKind::DeviceToHost, kind);
    check_side("source", src, nbytes, kind != CopyKind::HostToDevice, kind);
    // The waits a GPU's runtime would count for this copy (runtime.h).
    if (kind == CopyKind::DeviceToHost) count_device_to_host_copy();
    if (kind == CopyKind::HostToDevice && nbytes > kStagedCopyBytes) count_synchronization();
    const simt::memory::Open open;
    std::memmove(dst, src, nbytes);
  }
  void memset(void* dst, int value, std::size_t nbytes) override {
    if (nbytes == 0) return;
    check_side("destination", dst, nbytes, true, CopyKind::HostToDevice);
    const simt::memory::Open open;
    std::memset(dst, value, nbytes);
  }
  void synchronize() override { count_synchronization(); }
  std::size_t free_bytes() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_ ? limit_ - used_ : total_bytes();
  }
  std::size_t total_bytes() override { return limit_ ? limit_ : std::size_t{16} << 30; }
  kernels::Stream stream() override { return simt::memory::stream(); }
  kernels::Stream side_stream() override { return simt::memory::stream(); }
  void wait_for(kernels::Stream, kernels::Stream) override {}  // launches run in order already
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

// The emulator's workspace: one device buffer that grows (in the arena, like every buffer a
// kernel is given).
namespace brrr::kernels::emu {
void* workspace(std::size_t bytes, Stream) {
  static std::mutex mutex;
  static void* buffer = nullptr;
  static std::size_t size = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (bytes > size) {
    simt::memory::release(buffer);
    size = (bytes + 255) / 256 * 256;
    buffer = simt::memory::allocate(size);
    BRRR_CHECK(buffer != nullptr, "emulator workspace: out of device memory for ", bytes, " bytes");
  }
  return buffer;
}
}  // namespace brrr::kernels::emu
