// kernels/cuda/runtime.h: the few things brrr needs from a GPU: memory, copies, one stream,
// timing. Chapter 10 (the GPU and the emulator). Read next: framework/src/cuda.cpp (the
// caching allocator and the public brrr::cuda API built on this).
//
// Two implementations: runtime_cuda.cu (the CUDA runtime, every call checked with file and
// line; built with CUDA only) and runtime_emulator.cpp (an arena of host address space that
// host code cannot touch, for the SIMT emulator: emulator_memory.h).
// Pointers a runtime hands out are that device's: on a GPU only kernels may touch them, and
// brrr's code copies through copy() even under the emulator, so that what passes the
// emulator's tests also runs on a GPU.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/signatures.h"  // Stream

namespace brrr::gpu {

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice };

// A host-to-device copy of at most this many bytes does not make the host wait for the
// device: on a GPU it goes through a pinned staging buffer (runtime_cuda.cu). A larger one
// waits for the copy, as a copy from pageable memory must, and counts as a synchronisation.
constexpr std::size_t kStagedCopyBytes = std::size_t{4} << 20;

// What has made the host wait for the device so far. A training step that neither logs nor
// evaluates should add to neither (the profiler reports them per step; chapter 17).
struct Waits {
  std::uint64_t device_to_host_copies = 0;  // the host needs the bytes, so it waits for them
  std::uint64_t synchronizations = 0;       // synchronize(), and host-to-device copies too large to stage
};

// A CUDA graph (chapter 17): the work one stretch of host code enqueued on the stream,
// recorded once by stream capture and then enqueued again, all of it, by one call. A graph
// remembers every kernel's arguments, pointers included: a replay reads and writes the same
// addresses with the same scalars as the capture did.
class Graph {
 public:
  virtual ~Graph() = default;
  virtual void replay() = 0;  // enqueues the recorded work on the stream; the host does not wait
  virtual std::size_t nodes() const = 0;  // kernels, copies and memsets recorded
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  virtual std::string name() const = 0;  // "NVIDIA H100 80GB HBM3", "SIMT emulator (CPU)"
  virtual bool emulated() const = 0;
  // nbytes of device memory; nullptr when the device has not that much free.
  virtual void* malloc(std::size_t nbytes) = 0;
  virtual void free(void* ptr) = 0;
  // The caching allocator hands `block` (from malloc) to a tensor of `nbytes` bytes, or takes
  // it back to keep for reuse. The emulator poisons the bytes again, treats an access past
  // nbytes as out of bounds and a pointer into a block kept for reuse as freed; a GPU has
  // nothing to do.
  virtual void tensor_allocated(void* block, std::size_t nbytes) { (void)block, (void)nbytes; }
  virtual void tensor_freed(void* block) { (void)block; }
  // Copies in stream order; copies to or from the host return when the copy is done.
  virtual void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) = 0;
  virtual void memset(void* dst, int value, std::size_t nbytes) = 0;
  virtual void synchronize() = 0;  // waits for everything on the stream; reports kernel errors
  virtual std::size_t free_bytes() = 0;
  virtual std::size_t total_bytes() = 0;
  virtual kernels::Stream stream() = 0;  // the one stream every brrr kernel runs on
  // A second stream, for work that may run beside the kernels on stream(): NCCL's sums of the
  // gradients while the backward goes on (chapter 19). The two are ordered only by wait_for.
  // The emulator runs everything in launch order, so there its side stream is stream().
  virtual kernels::Stream side_stream() = 0;
  // What is enqueued on `waiter` from now on starts after all that `producer` has so far: a
  // CUDA event recorded on producer, which waiter waits on (the host does not wait).
  virtual void wait_for(kernels::Stream waiter, kernels::Stream producer) = 0;
  // Milliseconds that `work` (launches on the stream) takes on the device: CUDA events around
  // it on a GPU, the wall clock in the emulator.
  virtual double time_ms(const std::function<void()>& work) = 0;
  // The device's L2 cache in bytes (0 if unknown), so timings can flush it.
  virtual std::size_t l2_bytes() = 0;

  // Stream capture. Between begin_capture() and end_capture(), what is enqueued on stream()
  // (kernels, device-to-device copies, memsets) is recorded, not run: nothing it writes is
  // there until the graph is replayed. Anything that would make the host wait for the device
  // is an error inside a capture, in both runtimes with the same message: synchronize(), a
  // copy to the host, a copy from the host (a replay would read its source again, long after
  // the host has reused it), growing the kernels' workspace. On a GPU the capture runs in
  // cudaStreamCaptureModeRelaxed, so the caching allocator may still call cudaMalloc.
  // abort_capture() ends a capture that failed, dropping what it recorded.
  virtual void begin_capture() = 0;
  virtual std::unique_ptr<Graph> end_capture() = 0;
  virtual void abort_capture() = 0;
  bool capturing() const { return capturing_.load(); }
  // How many graphs exist. While one does, the workspace keeps every buffer it ever handed
  // out (a replay still uses the old address after the workspace has grown).
  static int live_graphs();
  static void graph_created();  // each runtime's Graph calls these from its constructor and destructor
  static void graph_destroyed();

  // Every implementation counts the same events, so the emulator's counts are a GPU's.
  Waits waits() const { return {device_to_host_.load(), synchronizations_.load()}; }

 protected:
  void set_capturing(bool on) { capturing_ = on; }
  // Fails, naming `what`, when a capture is under way (see begin_capture).
  void refuse_in_capture(const char* what) const;
  void count_device_to_host_copy() { ++device_to_host_; }
  void count_synchronization() { ++synchronizations_; }

 private:
  std::atomic<std::uint64_t> device_to_host_{0}, synchronizations_{0};
  std::atomic<bool> capturing_{false};
};

// The GPU's runtime, or nullptr when there is no GPU or driver, or brrr was built without
// CUDA. The first call initialises the device.
Runtime* cuda_runtime();
// The emulator's runtime: host memory, which it can cap (bytes, 0: no cap) so tests can run
// out of device memory on purpose.
Runtime& emulator_runtime();
void set_emulator_memory_limit(std::size_t nbytes);

}  // namespace brrr::gpu
