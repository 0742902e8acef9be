// brrr/storage.h: the flat buffer of bytes a tensor views.
// Chapter 01 (tensors and storage). Read before: dtype.h. Read next: tensor.h.
//
// Storage owns memory on one device. Many tensors (views) can share one Storage; it is
// freed when the last of them goes. A Storage can also wrap memory it does not own (a
// memory-mapped checkpoint, say), with a function that releases it.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>

#include "brrr/dtype.h"

namespace brrr {

// How a device's memory is obtained. The CPU allocator is built in; the CUDA backend
// installs its caching allocator with set_allocator.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* ptr, std::size_t nbytes) = 0;
};
void set_allocator(DeviceType device, Allocator* allocator);
// The CPU allocator keeps freed blocks of 1 MiB or more for reuse (no page faults on the next
// op's output). empty_cpu_cache() hands them back to the system; cpu_cache_bytes() says how
// much is held.
void empty_cpu_cache();
std::size_t cpu_cache_bytes();
Allocator& allocator_for(Device device);  // throws if the device has no backend

class Storage {
 public:
  // nbytes of uninitialised memory on device.
  static std::shared_ptr<Storage> allocate(std::size_t nbytes, Device device);
  // Memory owned elsewhere; release(data) runs when the last tensor lets go.
  static std::shared_ptr<Storage> wrap(void* data, std::size_t nbytes, Device device,
                                       std::function<void(void*)> release);

  Storage(void* data, std::size_t nbytes, Device device, std::function<void(void*)> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

 private:
  void* data_;
  std::size_t nbytes_;
  Device device_;
  std::function<void(void*)> release_;
};

}  // namespace brrr
