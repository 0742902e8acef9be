// kernels/cuda/runtime_cuda.cu: the GPU's runtime: cudaMalloc, cudaMemcpyAsync on brrr's one
// stream, CUDA events for timing. Built with CUDA only. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/runtime.h.
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/runtime.h"

namespace brrr::gpu {

namespace detail {
const char* file_name(const char* path) {
  const char* name = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/') name = p + 1;
  return name;
}
void cuda_failed(cudaError_t status, const char* call, const char* file, int line) {
  ::brrr::detail::fail("CUDA error at ", file_name(file), ":", line, ": ", call, " failed: ",
                       cudaGetErrorName(status), " (", cudaGetErrorString(status), ")");
}
void cublas_failed(cublasStatus_t status, const char* call, const char* file, int line) {
  ::brrr::detail::fail("cuBLAS error at ", file_name(file), ":", line, ": ", call, " failed: ",
                       cublasGetStatusName(status), " (", cublasGetStatusString(status), ")");
}
}  // namespace detail

namespace {

// An instantiated graph: one cudaGraphLaunch replays it on the stream it was captured from.
class CudaGraph final : public Graph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream, std::size_t nodes) : exec_(exec), stream_(stream), nodes_(nodes) {
    Runtime::graph_created();
  }
  ~CudaGraph() override {
    cudaGraphExecDestroy(exec_);  // not checked: a destructor must not throw
    Runtime::graph_destroyed();
  }
  void replay() override { BRRR_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }
  std::size_t nodes() const override { return nodes_; }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  std::size_t nodes_;
};

class CudaRuntime final : public Runtime {
 public:
  CudaRuntime() {
    cudaDeviceProp prop{};
    BRRR_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    name_ = prop.name;
    l2_ = static_cast<std::size_t>(prop.l2CacheSize);
    BRRR_CUDA_CHECK(cudaSetDevice(0));
    BRRR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    BRRR_CUDA_CHECK(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking));
  }
  std::string name() const override { return name_; }
  bool emulated() const override { return false; }

  void* malloc(std::size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t status = cudaMalloc(&p, std::max<std::size_t>(nbytes, 1));
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it, and let the allocator report the sizes
      return nullptr;
    }
    BRRR_CUDA_CHECK(status);
    return p;
  }
  void free(void* ptr) override { BRRR_CUDA_CHECK(cudaFree(ptr)); }
  void copy(void* dst, const void* src, std::size_t nbytes, CopyKind kind) override {
    if (nbytes == 0) return;
    if (kind == CopyKind::HostToDevice) refuse_in_capture("a copy from the host to the device");
    if (kind == CopyKind::DeviceToHost) refuse_in_capture("a copy from the device to the host");
    if (kind == CopyKind::HostToDevice && nbytes <= kStagedCopyBytes) {
      copy_staged(dst, src, nbytes);
      return;
    }
    const cudaMemcpyKind k = kind == CopyKind::HostToDevice   ? cudaMemcpyHostToDevice
                             : kind == CopyKind::DeviceToHost ? cudaMemcpyDeviceToHost
                                                              : cudaMemcpyDeviceToDevice;
    BRRR_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, k, stream_));
    // Pageable host memory: the host side must be done before the caller touches it again.
    if (kind == CopyKind::DeviceToHost) count_device_to_host_copy();
    if (kind == CopyKind::HostToDevice) count_synchronization();
    if (kind != CopyKind::DeviceToDevice) BRRR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void memset(void* dst, int value, std::size_t nbytes) override {
    BRRR_CUDA_CHECK(cudaMemsetAsync(dst, value, nbytes, stream_));
  }
  void synchronize() override {
    refuse_in_capture("synchronize()");
    count_synchronization();
    BRRR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  std::size_t free_bytes() override {
    std::size_t free = 0, total = 0;
    BRRR_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return free;
  }
  std::size_t total_bytes() override {
    std::size_t free = 0, total = 0;
    BRRR_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return total;
  }
  kernels::Stream stream() override { return stream_; }
  kernels::Stream side_stream() override { return side_stream_; }
  void wait_for(kernels::Stream waiter, kernels::Stream producer) override {
    // The wait is enqueued on waiter at once, so the event may be destroyed right after (CUDA
    // frees it when the wait is done).
    cudaEvent_t done;
    BRRR_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    BRRR_CUDA_CHECK(cudaEventRecord(done, static_cast<cudaStream_t>(producer)));
    BRRR_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), done, 0));
    BRRR_CUDA_CHECK(cudaEventDestroy(done));
  }
  double time_ms(const std::function<void()>& work) override {
    refuse_in_capture("timing work on the device");
    cudaEvent_t start, stop;
    BRRR_CUDA_CHECK(cudaEventCreate(&start));
    BRRR_CUDA_CHECK(cudaEventCreate(&stop));
    BRRR_CUDA_CHECK(cudaEventRecord(start, stream_));
    work();
    BRRR_CUDA_CHECK(cudaEventRecord(stop, stream_));
    BRRR_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    BRRR_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    BRRR_CUDA_CHECK(cudaEventDestroy(start));
    BRRR_CUDA_CHECK(cudaEventDestroy(stop));
    return ms;
  }
  std::size_t l2_bytes() override { return l2_; }

  // Relaxed: the caching allocator may call cudaMalloc while the step is captured (the first
  // capture of a step allocates its graph's private pool); brrr's own checks refuse what
  // would break a capture (refuse_in_capture).
  void begin_capture() override {
    BRRR_CHECK(!capturing(), "begin_capture: a CUDA graph capture is already under way");
    BRRR_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    set_capturing(true);
  }
  std::unique_ptr<Graph> end_capture() override {
    BRRR_CHECK(capturing(), "end_capture: no CUDA graph capture is under way");
    set_capturing(false);
    cudaGraph_t graph = nullptr;
    BRRR_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    std::size_t nodes = 0;
    cudaGraphExec_t exec = nullptr;
    const cudaError_t counted = cudaGraphGetNodes(graph, nullptr, &nodes);
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);  // the executable graph is a copy
    BRRR_CUDA_CHECK(counted);
    BRRR_CUDA_CHECK(instantiated);
    return std::make_unique<CudaGraph>(exec, stream_, nodes);
  }
  void abort_capture() override {
    if (!capturing()) return;
    set_capturing(false);
    cudaGraph_t graph = nullptr;
    if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();  // an invalidated capture's error is not sticky; the caller reports the cause
  }

 private:
  // A small host-to-device copy (a batch of token ids) without a wait: the bytes go into a
  // pinned buffer of a ring, cudaMemcpyAsync takes them from there in stream order, and an
  // event marks when that buffer may be filled again. The host waits (and counts it) only
  // when the buffer it comes round to is still being copied from.
  void copy_staged(void* dst, const void* src, std::size_t nbytes) {
    std::lock_guard<std::mutex> lock(staging_mutex_);
    Staging& s = staging_[next_staging_];
    next_staging_ = (next_staging_ + 1) % staging_.size();
    if (!s.host) {
      BRRR_CUDA_CHECK(cudaMallocHost(&s.host, kStagedCopyBytes));
      BRRR_CUDA_CHECK(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
    } else if (cudaEventQuery(s.done) == cudaErrorNotReady) {
      count_synchronization();
      BRRR_CUDA_CHECK(cudaEventSynchronize(s.done));
    }
    std::memcpy(s.host, src, nbytes);
    BRRR_CUDA_CHECK(cudaMemcpyAsync(dst, s.host, nbytes, cudaMemcpyHostToDevice, stream_));
    BRRR_CUDA_CHECK(cudaEventRecord(s.done, stream_));
  }

  struct Staging {
    void* host = nullptr;
    cudaEvent_t done = nullptr;
  };
  std::string name_;
  std::size_t l2_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaStream_t side_stream_ = nullptr;  // NCCL's reductions beside the backward (chapter 19)
  std::mutex staging_mutex_;
  std::array<Staging, 8> staging_{};
  std::size_t next_staging_ = 0;
};

}  // namespace

Runtime* cuda_runtime() {
  static Runtime* runtime = []() -> Runtime* {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();  // no driver or no GPU: clear the error; the caller says what to do
      return nullptr;
    }
    static CudaRuntime instance;
    return &instance;
  }();
  return runtime;
}

}  // namespace brrr::gpu

// The GPU's workspace: one device buffer that grows. Growing waits for the stream, so no
// kernel still reads the old buffer when it is freed.
namespace brrr::kernels::cuda {
void* workspace(std::size_t bytes, Stream stream) {
  static std::mutex mutex;
  static void* buffer = nullptr;
  static std::size_t size = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (bytes > size) {
    BRRR_CHECK(!gpu::cuda_runtime()->capturing(), "the kernels' workspace must grow from ", size, " to ", bytes,
               " bytes inside a CUDA graph capture, which cannot wait for the device to free the old one; run the "
               "work once before capturing it");
    BRRR_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    // A graph's kernels keep the old address: while one exists, the old buffer stays.
    if (buffer && gpu::Runtime::live_graphs() == 0) BRRR_CUDA_CHECK(cudaFree(buffer));
    size = (bytes + 255) / 256 * 256;
    BRRR_CUDA_CHECK(cudaMalloc(&buffer, size));
  }
  return buffer;
}
}  // namespace brrr::kernels::cuda
