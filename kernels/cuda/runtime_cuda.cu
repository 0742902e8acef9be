// kernels/cuda/runtime_cuda.cu: the GPU's runtime: cudaMalloc, cudaMemcpyAsync on brrr's one
// stream, CUDA events for timing. Built with CUDA only. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/runtime.h.
#include <array>
#include <cstring>
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
    BRRR_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    if (buffer) BRRR_CUDA_CHECK(cudaFree(buffer));
    size = (bytes + 255) / 256 * 256;
    BRRR_CUDA_CHECK(cudaMalloc(&buffer, size));
  }
  return buffer;
}
}  // namespace brrr::kernels::cuda
