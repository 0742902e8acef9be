// framework/src/cuda.cpp: Device::cuda()'s memory (a caching allocator over the runtime that
// kernels/backend.h chose: the GPU or the emulator) and the brrr::cuda API. Chapter 10 (the GPU
// and the emulator). Read before: brrr/cuda.h, kernels/cuda/runtime.h, kernels/backend.h.
#include "brrr/cuda.h"

#include <cstdio>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "brrr/error.h"
#include "brrr/profiler.h"
#include "brrr/storage.h"
#include "dispatch.h"
#include "kernels/backend.h"
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
//
// CUDA graphs (chapter 17). A graph replays its kernels with the pointers they had when it
// was captured, so the blocks the captured work used must stay the graph's: a pool of their
// own. While a capture is under way every allocation comes from that pool (pool ids count
// from 1; 0 is everything else), and a block of a pool goes back to that pool's free lists
// when it is freed, then or later, never to another's. Inside the capture a freed block may
// serve a later allocation of the same capture (the replay runs the work in the same order,
// so the two uses never overlap). When the graph is destroyed its pool joins pool 0.

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
    auto& list = free_[{capture_pool_, size}];
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
      ++stats_.cache_hits;
    } else {
      p = runtime_->malloc(size);
      if (!p && capture_pool_ == 0) {  // inside a capture, freeing cached blocks would wait for the device
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
    live_[p] = {size, capture_pool_};
    runtime_->tensor_allocated(p, nbytes);  // the emulator poisons it and learns the tensor's exact size
    stats_.allocated += size;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    return p;
  }

  void deallocate(void* ptr, std::size_t) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    BRRR_CHECK(it != live_.end(), "CUDA allocator: freeing a pointer it did not allocate");
    const Block block = it->second;
    stats_.allocated -= block.size;
    runtime_->tensor_freed(ptr);
    free_[{block.pool, block.size}].push_back(ptr);
    live_.erase(it);
  }

  // From now on, allocations come from a new pool, whose id this returns.
  int begin_pool() {
    std::lock_guard<std::mutex> lock(mutex_);
    BRRR_CHECK(capture_pool_ == 0, "CUDA allocator: a graph's pool is already in use");
    capture_pool_ = ++pools_;
    return capture_pool_;
  }
  void end_pool() {
    std::lock_guard<std::mutex> lock(mutex_);
    capture_pool_ = 0;
  }
  // The graph that owned `pool` is gone: its blocks, free or held, are pool 0's.
  void release_pool(int pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->first.first != pool) continue;
      auto& general = free_[{0, it->first.second}];
      general.insert(general.end(), it->second.begin(), it->second.end());
      it->second.clear();
    }
    for (auto& [p, block] : live_)
      if (block.pool == pool) block.pool = 0;
  }
  // Bytes of free blocks that belong to graphs' pools.
  std::size_t pooled_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t bytes = 0;
    for (const auto& [key, list] : free_)
      if (key.first != 0) bytes += key.second * list.size();
    return bytes;
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
  struct Block {
    std::size_t size;  // its size class
    int pool;          // 0, or the graph whose pool it is in
  };

  void release_cached() {  // mutex_ held; a graph's pool keeps its blocks
    if (!runtime_) return;
    for (auto& [key, list] : free_) {
      if (key.first != 0) continue;
      for (void* p : list) runtime_->free(p);
      stats_.reserved -= key.second * list.size();
      list.clear();
    }
  }

  std::mutex mutex_;
  gpu::Runtime* runtime_ = nullptr;
  std::map<std::pair<int, std::size_t>, std::vector<void*>> free_;  // (pool, size class) -> free blocks
  std::unordered_map<void*, Block> live_;                          // blocks tensors hold
  int capture_pool_ = 0;                                           // where allocations come from now
  int pools_ = 0;                                                  // pools made so far
  cuda::MemoryStats stats_;
};

// ---------------------------------------------------------------------------------------------
// The state: one caching allocator, which follows the backend's runtime (kernels/backend.h
// chooses the backend: the GPU, the emulator or none).

struct State {
  std::mutex mutex;
  CachingAllocator allocator;
};

State& state() {
  static State* s = new State;  // never destroyed: tensors freed at exit still need it
  return *s;
}

std::atomic<bool> tf32{false};

}  // namespace

namespace detail {
void install_cuda_allocator() {
  gpu::Runtime* runtime = kernels::cuda_runtime();
  if (!runtime) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.allocator.set_runtime(runtime);
  set_allocator(DeviceType::CUDA, &s.allocator);
}

kernels::Stream stream(Device device) {
  if (device.is_cpu()) return nullptr;
  gpu::Runtime* runtime = kernels::cuda_runtime();
  return runtime ? runtime->stream() : nullptr;
}

bool cuda_in_use() { return kernels::cuda_backend_chosen() && kernels::cuda_runtime() != nullptr; }

void synchronize_cuda_if_in_use() {
  if (cuda_in_use()) kernels::cuda_runtime()->synchronize();
}

void refuse_random_in_capture(const char* op, Device device) {
  if (device.is_cpu()) return;
  BRRR_CHECK(!cuda::capturing(), op, " inside a CUDA graph capture: the random numbers' Philox offset is a kernel "
             "argument, so every replay would draw the same numbers (train with dropout 0 to use a CUDA graph; "
             "chapter 17)");
}

gpu::Runtime& cuda_runtime_for(const char* what) {
  gpu::Runtime* runtime = kernels::cuda_runtime();
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

bool is_available() { return kernels::cuda_runtime() != nullptr; }
bool gpu_available() { return gpu::cuda_runtime() != nullptr; }
bool is_emulated() { return kernels::cuda_backend() == kernels::CudaBackend::Emulator; }

void use_emulator() {
  if (!kernels::cuda_backend_chosen()) {
    kernels::use_emulator_backend();
    return;
  }
  if (is_emulated()) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  BRRR_CHECK(!s.allocator.in_use(), "cuda::use_emulator: CUDA tensors exist on ", kernels::cuda_runtime()->name(),
             "; choose the emulator before the first CUDA tensor is made");
  kernels::use_emulator_backend();
  s.allocator.set_runtime(kernels::cuda_runtime());  // gives the old runtime's cached blocks back first
  set_allocator(DeviceType::CUDA, &s.allocator);
}

std::string device_name() { return detail::cuda_runtime_for("cuda::device_name").name(); }
void synchronize() {
  detail::cuda_runtime_for("cuda::synchronize").synchronize();
  detail::raise_device_errors();
}

MemoryStats memory_stats() { return state().allocator.stats(); }
void reset_peak_memory_stats() { state().allocator.reset_peak(); }

Waits waits() {
  if (!kernels::cuda_backend_chosen()) return {};
  gpu::Runtime* runtime = kernels::cuda_runtime();
  if (!runtime) return {};
  const gpu::Waits w = runtime->waits();
  return {w.device_to_host_copies, w.synchronizations};
}
void empty_cache() { state().allocator.empty_cache(); }

// ---------------------------------------------------------------------------------------------
// Graphs

struct Graph::State {
  std::unique_ptr<gpu::Graph> graph;
  int pool = 0;
  ~State() {
    graph.reset();
    detail::drop_graph_checks(pool);
    brrr::state().allocator.release_pool(pool);
  }
};

Graph Graph::capture(const std::function<void()>& work) {
  gpu::Runtime& runtime = detail::cuda_runtime_for("cuda::Graph::capture");
  CachingAllocator& allocator = brrr::state().allocator;
  auto state = std::make_shared<State>();
  state->pool = allocator.begin_pool();
  const auto end = [&] {
    detail::end_graph_checks();
    allocator.end_pool();
  };
  try {
    // The device's index checks from before are read first (and may throw), while reading may
    // still wait.
    detail::begin_graph_checks(state->pool);
    runtime.begin_capture();
    work();
  } catch (...) {
    runtime.abort_capture();
    end();
    throw;  // state's destructor hands the pool back
  }
  end();
  state->graph = runtime.end_capture();
  Graph g;
  g.state_ = std::move(state);
  return g;
}

void Graph::replay() const {
  BRRR_CHECK(state_, "cuda::Graph::replay: this graph is empty (make one with cuda::Graph::capture)");
  BRRR_PROFILE("cuda graph replay");
  state_->graph->replay();
}

std::size_t Graph::nodes() const { return state_ ? state_->graph->nodes() : 0; }

bool capturing() {
  if (!kernels::cuda_backend_chosen()) return false;
  gpu::Runtime* runtime = kernels::cuda_runtime();
  return runtime && runtime->capturing();
}

std::size_t graph_pool_free_bytes() { return brrr::state().allocator.pooled_bytes(); }

void set_allow_tf32(bool allow) { tf32 = allow; }
bool allow_tf32() { return tf32; }

}  // namespace cuda
}  // namespace brrr
