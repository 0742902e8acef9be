// framework/src/storage.cpp: CPU memory and the per-device allocator table.
// Chapter 01 (tensors and storage).
#include "brrr/storage.h"
#include "brrr/memory.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <unordered_map>

#include "brrr/error.h"
#include "dispatch.h"

namespace brrr {
namespace {

// CPU memory is 64-byte aligned, so kernels can use aligned vector loads and rows never
// share a cache line with another tensor's data.
//
// Large blocks are cached: when a tensor of 1 MiB or more is freed its block goes on a free
// list by size instead of back to the OS, and the next allocation of a similar size reuses
// it. Without this, glibc returns every large buffer to the OS (munmap) and the next op's
// output takes a page fault on every 4 KiB page it touches: measured (docs/measurements.md,
// "Elementwise bandwidth"), a 16M-element ops::add then ran at 22% of memcpy speed; with the
// cache it runs at 76-104%. The cache holds at most
// kMaxCached bytes; empty_cpu_cache() releases everything.
class CpuAllocator final : public Allocator {
 public:
  static constexpr std::size_t kCacheFrom = 1u << 20;            // smaller blocks: plain malloc
  static constexpr std::size_t kMaxCached = std::size_t{4} << 30;  // 4 GiB

  void* allocate(std::size_t nbytes) override {
    const std::size_t rounded = round_up(nbytes);
    if (rounded >= kCacheFrom) {
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest cached block that fits and wastes at most a quarter of itself.
      auto it = free_.lower_bound(rounded);
      if (it != free_.end() && it->first <= rounded + rounded / 4) {
        void* p = it->second;
        cached_ -= it->first;
        sizes_[p] = it->first;
        free_.erase(it);
        return p;
      }
    }
    void* p = std::aligned_alloc(64, rounded);
    if (!p) {
      empty();  // give the cache back and try once more
      p = std::aligned_alloc(64, rounded);
    }
    BRRR_CHECK(p != nullptr, "out of CPU memory: could not allocate ", nbytes, " bytes");
    if (rounded >= kCacheFrom) {
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[p] = rounded;
    }
    return p;
  }

  void deallocate(void* ptr, std::size_t nbytes) override {
    if (round_up(nbytes) < kCacheFrom) return std::free(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t size = sizes_.at(ptr);
    sizes_.erase(ptr);
    if (cached_ + size > kMaxCached) return std::free(ptr);
    free_.emplace(size, ptr);
    cached_ += size;
  }

  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, p] : free_) std::free(p);
    free_.clear();
    cached_ = 0;
  }

  std::size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

  ~CpuAllocator() override { empty(); }

 private:
  static std::size_t round_up(std::size_t n) { return n == 0 ? 64 : (n + 63) / 64 * 64; }
  std::mutex mutex_;
  std::multimap<std::size_t, void*> free_;     // size -> block, ready for reuse
  std::unordered_map<void*, std::size_t> sizes_;  // the true size of each live large block
  std::size_t cached_ = 0;
};

CpuAllocator cpu_allocator;
Allocator* allocators[2] = {&cpu_allocator, nullptr};

}  // namespace

namespace {
// Bytes held by tensors' storage, now and at most, per device type (brrr/storage.h).
struct TensorBytes {
  std::atomic<std::size_t> now{0}, peak{0};
  void add(std::size_t n) {
    const std::size_t after = now.fetch_add(n) + n;
    std::size_t seen = peak.load();
    while (after > seen && !peak.compare_exchange_weak(seen, after)) {
    }
  }
};
TensorBytes tensor_bytes_of[2];
}  // namespace

void empty_cpu_cache() { cpu_allocator.empty(); }
std::size_t cpu_cache_bytes() { return cpu_allocator.cached(); }
std::size_t tensor_bytes(DeviceType device) { return tensor_bytes_of[static_cast<int>(device)].now.load(); }
std::size_t peak_tensor_bytes(DeviceType device) { return tensor_bytes_of[static_cast<int>(device)].peak.load(); }
void reset_peak_tensor_bytes(DeviceType device) {
  TensorBytes& b = tensor_bytes_of[static_cast<int>(device)];
  b.peak.store(b.now.load());
}

void set_allocator(DeviceType device, Allocator* allocator) {
  allocators[static_cast<int>(device)] = allocator;
}

Allocator& allocator_for(Device device) {
  if (device.is_cuda())
    BRRR_CHECK(device.index == 0, "device ", device.str(), " is not available: brrr uses one GPU, cuda:0");
  Allocator* a = allocators[static_cast<int>(device.type)];
  if (!a && device.is_cuda()) {
    detail::install_cuda_allocator();  // the first use: the CUDA backend is chosen now
    a = allocators[static_cast<int>(device.type)];
  }
  if (!a) {
#ifdef BRRR_WITH_CUDA
    detail::fail("device ", device.str(), " is not available: no CUDA GPU or driver was found (the emulator runs the "
                 "CUDA kernels on the CPU: --device emulator or BRRR_CUDA_EMULATOR=1)");
#else
    detail::fail("device ", device.str(), " is not available: brrr was built without CUDA (BRRR_CUDA=OFF or no nvcc); "
                 "the emulator runs the CUDA kernels on the CPU: --device emulator or BRRR_CUDA_EMULATOR=1");
#endif
  }
  return *a;
}

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, Device device) {
  Allocator& allocator = allocator_for(device);
  void* data = allocator.allocate(nbytes);
  TensorBytes& bytes = tensor_bytes_of[static_cast<int>(device.type)];
  bytes.add(nbytes);
  return std::make_shared<Storage>(data, nbytes, device, [&allocator, &bytes, nbytes](void* p) {
    allocator.deallocate(p, nbytes);
    bytes.now.fetch_sub(nbytes);
  });
}

std::shared_ptr<Storage> Storage::wrap(void* data, std::size_t nbytes, Device device,
                                       std::function<void(void*)> release) {
  return std::make_shared<Storage>(data, nbytes, device, std::move(release));
}

Storage::Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) release_(data_);
}

}  // namespace brrr
