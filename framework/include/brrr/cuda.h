// brrr/cuda.h: the CUDA device: is there one, its memory, and the emulator that stands in for it.
// Chapter 10 (the GPU and the emulator). Read before: storage.h. Read next: kernels/cuda/simt.h.
//
// Tensors on Device::cuda() live in GPU memory and run the kernels of kernels/cuda. When
// there is no GPU, the same device can be backed by the SIMT emulator: the same kernel
// source compiled for the CPU (slow, but exact). Choose it with use_emulator(), the
// environment variable BRRR_CUDA_EMULATOR=1, or `--device emulator` on the command line.
//
//   brrr::cuda::use_emulator();                 // no GPU here; run the CUDA kernels anyway
//   Tensor x = brrr::randn({4, 8}).to(Device::cuda());
//   Tensor y = brrr::ops::gelu(x).to(kCPU);
//
// Memory comes from a caching allocator, as in PyTorch: a freed block is kept for the next
// allocation of the same size class instead of going back to the driver (cudaMalloc and
// cudaFree synchronise the device and cost far more than a kernel). memory_stats() says what
// is in use; empty_cache() gives the cached blocks back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace brrr::cuda {

// Whether Device::cuda() can be used in this process: a GPU, or the emulator when chosen.
bool is_available();
// Whether a real GPU and driver are present (whatever backs Device::cuda()).
bool gpu_available();
// Whether Device::cuda() is the SIMT emulator.
bool is_emulated();
// Back Device::cuda() by the emulator, even if a GPU is present. Allowed while no CUDA
// tensor exists; throws brrr::Error otherwise.
void use_emulator();
// "NVIDIA H100 80GB HBM3", "SIMT emulator (CPU)"; throws if !is_available().
std::string device_name();
// Wait for every kernel queued on the device; reports errors of kernels that already ran.
void synchronize();

struct MemoryStats {
  std::size_t allocated = 0;       // bytes in blocks tensors hold now (rounded to size classes)
  std::size_t reserved = 0;        // bytes obtained from the device: allocated + cached
  std::size_t peak_allocated = 0;  // the most `allocated` has been since the last reset
  std::size_t allocations = 0;     // blocks handed out since the start
  std::size_t cache_hits = 0;      // ... of which came from the cache
  std::size_t device_allocations = 0;  // calls to cudaMalloc (or the emulator's malloc)
};
MemoryStats memory_stats();
void reset_peak_memory_stats();
// Hands every cached (free) block back to the device.
void empty_cache();

// What has made the host wait for the CUDA device so far: copies from the device to the host
// and synchronisations (both 0 while no CUDA backend is in use). Every wait stalls the queue
// of kernels, and a step with none can be captured as a CUDA graph: chapter 17.
struct Waits {
  std::uint64_t device_to_host_copies = 0;
  std::uint64_t synchronizations = 0;
  std::uint64_t total() const { return device_to_host_copies + synchronizations; }
};
Waits waits();

// A CUDA graph (chapter 17): Graph::capture(work) runs `work` with the device's stream
// captured. Its kernels, device-to-device copies and memsets are recorded, not run (what they
// write is not there yet), and the tensors it allocates come from a memory pool of the graph's
// own, so that no other tensor ever gets a block a replay writes. replay() enqueues all of it
// again with one call, on the same addresses with the same arguments: inputs that change go
// into tensors made before the capture (copy_ into them between replays), and outputs are
// read from the tensors the captured work made. Inside `work`, anything that would make the
// host wait for the device or read host memory (a copy to or from the host, synchronize,
// item()) throws brrr::Error, on a GPU and in the emulator alike. Run the work once before
// capturing it, so that the kernels' workspace and cuBLAS are set up. A graph may be moved
// and copied (copies share it); the last copy's destruction gives its pool back.
class Graph {
 public:
  Graph() = default;
  static Graph capture(const std::function<void()>& work);
  void replay() const;
  std::size_t nodes() const;  // kernels, copies and memsets recorded (0 for an empty graph)
  bool defined() const { return state_ != nullptr; }

 private:
  struct State;
  std::shared_ptr<State> state_;
};
// Whether a capture is under way (for code that must act differently inside one).
bool capturing();
// Bytes of the free blocks held in graphs' private pools (for tests and the profiler).
std::size_t graph_pool_free_bytes();

// Whether float32 matmuls may use TF32 tensor cores (faster, ~1e-3 relative error). Off by
// default, as in PyTorch.
void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace brrr::cuda
