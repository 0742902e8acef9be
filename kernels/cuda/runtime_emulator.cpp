// kernels/cuda/runtime_emulator.cpp: the emulator's "device": the device memory arena, copies
// that check their direction, one stream, and the wall clock. Chapter 10 (the GPU and the
// emulator). Read before: kernels/cuda/runtime.h, kernels/cuda/emulator_memory.h.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "brrr/error.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/runtime.h"

namespace brrr::gpu {

// What both runtimes share (this file is built in every configuration).
namespace {
std::atomic<int> graphs{0};
}  // namespace
int Runtime::live_graphs() { return graphs.load(); }
void Runtime::graph_created() { ++graphs; }
void Runtime::graph_destroyed() { --graphs; }
void Runtime::refuse_in_capture(const char* what) const {
  BRRR_CHECK(!capturing(), what, " inside a CUDA graph capture: a graph replays work on the device without the host, "
             "so nothing in it may make the host wait for the device or read host memory (chapter 17)");
}

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

// The emulator's graph: what the capture enqueued, as closures run again in the same order.
// It also replays the allocator's hand-outs and returns (tensor_allocated, tensor_freed) of
// the graph's own blocks during the capture, in their places: a block a captured kernel used and the capture then freed is
// a live tensor again while the replay's kernels use it, as the graph's private pool keeps it
// for them on a GPU; and the checks of every replayed kernel and copy run again.
class EmulatorGraph final : public Graph {
 public:
  EmulatorGraph(std::vector<std::function<void()>> work, std::size_t nodes) : work_(std::move(work)), nodes_(nodes) {
    Runtime::graph_created();
  }
  ~EmulatorGraph() override { Runtime::graph_destroyed(); }
  void replay() override {
    for (const auto& w : work_) w();
  }
  std::size_t nodes() const override { return nodes_; }

 private:
  std::vector<std::function<void()>> work_;
  std::size_t nodes_;
};

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
  void tensor_allocated(void* block, std::size_t nbytes) override {
    simt::memory::set_in_use(block, nbytes);
    if (!capturing()) return;
    captured_blocks_.insert(block);
    record([block, nbytes] { simt::memory::set_in_use(block, nbytes); }, false);
  }
  // Only the graph's own blocks (handed out during the capture) are freed again by a replay. A
  // tensor from before the capture that the capture released went back to the general pool
  // (framework/src/cuda.cpp): another tensor may hold that block when the graph replays.
  void tensor_freed(void* block) override {
    simt::memory::set_cached(block);
    if (capturing() && captured_blocks_.count(block)) record([block] { simt::memory::set_cached(block); }, false);
  }
  void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) override {
    if (nbytes == 0) return;
    if (kind == CopyKind::HostToDevice) refuse_in_capture("a copy from the host to the device");
    if (kind == CopyKind::DeviceToHost) refuse_in_capture("a copy from the device to the host");
    check_side("destination", dst, nbytes, kind != CopyKind::DeviceToHost, kind);
    check_side("source", src, nbytes, kind != CopyKind::HostToDevice, kind);
    if (capturing()) {
      record([this, dst, src, nbytes, kind] { copy(dst, src, nbytes, kind); }, true);
      return;
    }
    // The waits a GPU's runtime would count for this copy (runtime.h).
    if (kind == CopyKind::DeviceToHost) count_device_to_host_copy();
    if (kind == CopyKind::HostToDevice && nbytes > kStagedCopyBytes) count_synchronization();
    const simt::memory::Open open;
    std::memmove(dst, src, nbytes);
  }
  void memset(void* dst, int value, std::size_t nbytes) override {
    if (nbytes == 0) return;
    check_side("destination", dst, nbytes, true, CopyKind::HostToDevice);
    if (capturing()) {
      record([this, dst, value, nbytes] { memset(dst, value, nbytes); }, true);
      return;
    }
    const simt::memory::Open open;
    std::memset(dst, value, nbytes);
  }
  void synchronize() override {
    refuse_in_capture("synchronize()");
    count_synchronization();
  }
  std::size_t free_bytes() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_ ? limit_ - used_ : total_bytes();
  }
  std::size_t total_bytes() override { return limit_ ? limit_ : std::size_t{16} << 30; }
  kernels::Stream stream() override { return simt::memory::stream(); }
  kernels::Stream side_stream() override { return simt::memory::stream(); }
  void wait_for(kernels::Stream, kernels::Stream) override {}  // launches run in order already
  double time_ms(const std::function<void()>& work) override {
    refuse_in_capture("timing work on the device");
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  std::size_t l2_bytes() override { return 0; }

  void begin_capture() override {
    BRRR_CHECK(!capturing(), "begin_capture: a CUDA graph capture is already under way");
    recording_.clear();
    captured_blocks_.clear();
    recorded_nodes_ = 0;
    set_capturing(true);
  }
  std::unique_ptr<Graph> end_capture() override {
    BRRR_CHECK(capturing(), "end_capture: no CUDA graph capture is under way");
    set_capturing(false);
    auto graph = std::make_unique<EmulatorGraph>(std::move(recording_), recorded_nodes_);
    recording_.clear();
    return graph;
  }
  void abort_capture() override {
    set_capturing(false);
    recording_.clear();
  }
  // A kernel launch, a copy or a memset (node), or an allocator event, in capture order.
  void record(std::function<void()> work, bool node) {
    recording_.push_back(std::move(work));
    if (node) ++recorded_nodes_;
  }

  void set_limit(std::size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    limit_ = nbytes;
  }

 private:
  std::vector<std::function<void()>> recording_;
  std::unordered_set<void*> captured_blocks_;  // handed out by the allocator during the capture
  std::size_t recorded_nodes_ = 0;
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

}  // namespace brrr::gpu

// simt.h's launch() asks these before it runs a kernel: under a capture it records it instead
// (declared in simt.h).
namespace brrr::simt::detail {
bool capturing();
void record_launch(std::function<void()> run);
bool capturing() { return gpu::emulator_runtime().capturing(); }
void record_launch(std::function<void()> run) { gpu::emulator().record(std::move(run), true); }
}  // namespace brrr::simt::detail

namespace brrr::gpu {
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
    BRRR_CHECK(!gpu::emulator_runtime().capturing(), "the kernels' workspace must grow from ", size, " to ", bytes,
               " bytes inside a CUDA graph capture, which cannot wait for the device to free the old one; run the "
               "work once before capturing it");
    // A graph's kernels keep the old address: while one exists, the old buffer stays.
    if (gpu::Runtime::live_graphs() == 0) simt::memory::release(buffer);
    size = (bytes + 255) / 256 * 256;
    buffer = simt::memory::allocate(size);
    BRRR_CHECK(buffer != nullptr, "emulator workspace: out of device memory for ", bytes, " bytes");
  }
  return buffer;
}
}  // namespace brrr::kernels::emu
