// brrr/memory.h: how many bytes tensors hold on a device, now and at most. Chapter 18 (mixed
// precision) measures a training step's activations with it. Read before: brrr/storage.h.
//
// Counted where Storage::allocate hands out memory and where that memory is released: what
// tensors hold, not what an allocator's cache keeps (as PyTorch's torch.cuda.memory_allocated
// and max_memory_allocated). Memory a Storage only wraps (a checkpoint read by mmap) is not
// counted.
#pragma once
#include <cstddef>

#include "brrr/dtype.h"

namespace brrr {

// The bytes of every tensor's storage alive now on this device type.
std::size_t tensor_bytes(DeviceType device);
// The most alive at once since the last reset_peak_tensor_bytes (or the start).
std::size_t peak_tensor_bytes(DeviceType device);
// Starts a new peak from what is alive now.
void reset_peak_tensor_bytes(DeviceType device);

}  // namespace brrr
