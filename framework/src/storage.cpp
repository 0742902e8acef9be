// framework/src/storage.cpp: CPU memory and the per-device allocator table.
// Chapter 01 (tensors and storage).
#include "brrr/storage.h"

#include <cstdlib>
#include <new>

#include "brrr/error.h"

namespace brrr {
namespace {

// CPU memory is 64-byte aligned, so kernels can use aligned vector loads and rows never
// share a cache line with another tensor's data.
class CpuAllocator final : public Allocator {
 public:
  void* allocate(std::size_t nbytes) override {
    const std::size_t rounded = (nbytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    BRRR_CHECK(p != nullptr, "out of CPU memory: could not allocate ", nbytes, " bytes");
    return p;
  }
  void deallocate(void* ptr, std::size_t) override { std::free(ptr); }
};

CpuAllocator cpu_allocator;
Allocator* allocators[2] = {&cpu_allocator, nullptr};

}  // namespace

void set_allocator(DeviceType device, Allocator* allocator) {
  allocators[static_cast<int>(device)] = allocator;
}

Allocator& allocator_for(Device device) {
  Allocator* a = allocators[static_cast<int>(device.type)];
  if (!a) {
#ifdef BRRR_WITH_CUDA
    detail::fail("device ", device.str(), " is not available: no CUDA GPU or driver was found");
#else
    detail::fail("device ", device.str(), " is not available: brrr was built without CUDA (BRRR_CUDA=OFF or no nvcc)");
#endif
  }
  return *a;
}

std::shared_ptr<Storage> Storage::allocate(std::size_t nbytes, Device device) {
  Allocator& allocator = allocator_for(device);
  void* data = allocator.allocate(nbytes);
  return std::make_shared<Storage>(data, nbytes, device,
                                   [&allocator, nbytes](void* p) { allocator.deallocate(p, nbytes); });
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
