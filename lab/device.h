// lab/device.h: the device under test as the kernel lab sees it (memory, copies, a clock and a
// cache to flush), a problem's arrays on it, an op's variants, and the timer. Chapter 11 (the
// roofline and the kernel lab). Internal to lab/: kernel_lab.cpp and its steps include it.
// Read before: kernel_lab.h. Read next: device.cpp, then check.cpp.
#pragma once
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brrr/bfloat16.h"
#include "brrr/cuda.h"
#include "brrr/error.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"
#include "lab/kernel_lab.h"

namespace brrr::lab {

using kernels::Stream;

// Helpers every file of the lab uses (device.cpp).
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void say(std::FILE* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));  // printf to out, nullptr: nowhere
std::string bytes_text(double bytes);  // "1.5 MiB"
double seconds_since(std::chrono::steady_clock::time_point start);
std::size_t cpu_cache_bytes();  // the last-level cache's size, capped (what a CPU timing flushes)

// ---------------------------------------------------------------------------------------------
// The device under test, as the lab sees it: memory, copies, a clock and a cache to flush.
//
// On the CUDA device (a GPU, or the emulator standing in for one) all of it goes through
// gpu::Runtime; on the CPU, memory is the heap and the clock the wall clock. Timings flush the
// last-level cache first by writing a buffer twice its size, so every timed run reads its
// inputs from memory, as it would inside a model where other layers ran in between.

class Target {
 public:
  explicit Target(LabDevice device) {
    if (device == LabDevice::Emulator) {
      cuda::use_emulator();  // before anything else of the CUDA device is used
      BRRR_CHECK(cuda::is_emulated(), "kernel-lab: the CUDA device could not be switched to the emulator");
    }
    if (device != LabDevice::CPU) {
      BRRR_CHECK(cuda::is_available(), "kernel-lab --device cuda: no CUDA GPU (no GPU or driver was found, or brrr ",
                 "was built without CUDA); --device emulator runs the same CUDA kernels on the CPU");
      runtime_ = cuda::is_emulated() ? &gpu::emulator_runtime() : gpu::cuda_runtime();
      BRRR_CHECK(runtime_ != nullptr, "kernel-lab: the CUDA device has no runtime");
      flush_bytes_ = 2 * runtime_->l2_bytes();  // 0 on the emulator: nothing to flush
      if (flush_bytes_) flush_ = allocate(flush_bytes_);
    } else {
      flush_bytes_ = 2 * cpu_cache_bytes();
      flush_ = allocate(flush_bytes_);
    }
  }
  ~Target() {
    if (flush_) release(flush_);
  }
  Target(const Target&) = delete;
  Target& operator=(const Target&) = delete;

  DeviceType type() const { return runtime_ ? DeviceType::CUDA : DeviceType::CPU; }
  bool emulated() const { return runtime_ && runtime_->emulated(); }
  // "cuda" or "cpu", as the registry names devices (the emulator is the CUDA device).
  const char* registry_name() const { return runtime_ ? "cuda" : "cpu"; }
  std::string describe() const {
    if (!runtime_)
      return format("cpu, %d threads (%s written before every timed run to flush the caches)", omp_get_max_threads(),
                    bytes_text(static_cast<double>(flush_bytes_)).c_str());
    if (runtime_->emulated())
      return "cuda: " + runtime_->name() + ", one fiber per CUDA thread (times say nothing about a GPU)";
    return "cuda: " + runtime_->name() +
           format(", L2 %s (flushed before every timed run)", bytes_text(runtime_->l2_bytes()).c_str());
  }
  Stream stream() const { return runtime_ ? runtime_->stream() : nullptr; }
  gpu::Runtime* runtime() const { return runtime_; }

  void* allocate(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 16);
    void* p = runtime_ ? runtime_->malloc(bytes) : std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    BRRR_CHECK(p != nullptr, "kernel-lab: out of memory allocating ", bytes_text(static_cast<double>(bytes)), " on ",
               registry_name(), " (try a smaller --size)");
    return p;
  }
  void release(void* p) {
    if (runtime_) runtime_->free(p);
    else std::free(p);
  }
  void upload(void* dst, const void* src, std::size_t bytes) {
    if (runtime_) runtime_->copy(dst, src, bytes, gpu::CopyKind::HostToDevice);
    else std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) {
    if (runtime_) runtime_->copy(dst, src, bytes, gpu::CopyKind::DeviceToHost);
    else std::memcpy(dst, src, bytes);
  }
  // What the bandwidth peak times: the fastest way the device knows to move memory.
  void copy_on_device(void* dst, const void* src, std::size_t bytes) {
    if (runtime_) {
      runtime_->copy(dst, src, bytes, gpu::CopyKind::DeviceToDevice);
      return;
    }
    // One memcpy per 1 MiB block, blocks spread over the cores: one core alone cannot use
    // all of a memory system's bandwidth, and the CPU kernels use every core.
    constexpr std::int64_t kBlock = 1 << 20;
    auto* d = static_cast<char*>(dst);
    const auto* s = static_cast<const char*>(src);
    const auto n = static_cast<std::int64_t>(bytes);
    kernels::cpu::parallel_for((n + kBlock - 1) / kBlock, 1, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t block = b; block < e; ++block) {
        const std::int64_t begin = block * kBlock, size = std::min(kBlock, n - begin);
        std::memcpy(d + begin, s + begin, static_cast<std::size_t>(size));
      }
    });
  }
  void synchronize() {
    if (runtime_) runtime_->synchronize();
  }
  // Milliseconds `work` takes: CUDA events on a GPU, the wall clock elsewhere.
  double time_ms(const std::function<void()>& work) {
    if (runtime_) return runtime_->time_ms(work);
    const auto start = std::chrono::steady_clock::now();
    work();
    return seconds_since(start) * 1e3;
  }
  // Evicts the kernel's data from the last-level cache. Queued on the stream before the timed
  // work, outside the events, so it is not counted.
  void flush_cache() {
    if (!flush_) return;
    const int value = ++flushes_ & 0xff;  // a new value each time, so nothing can skip the write
    if (runtime_) runtime_->memset(flush_, value, flush_bytes_);
    else std::memset(flush_, value, flush_bytes_);
  }

 private:
  gpu::Runtime* runtime_ = nullptr;  // nullptr: the CPU
  void* flush_ = nullptr;
  std::size_t flush_bytes_ = 0;
  int flushes_ = 0;
};

// Device memory that frees itself.
class Buffer {
 public:
  Buffer(Target& target, std::size_t bytes) : target_(target), ptr_(target.allocate(bytes)), bytes_(bytes) {}
  ~Buffer() { target_.release(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  Target& target_;
  void* ptr_;
  std::size_t bytes_;
};

// The device's copy of a problem: one buffer per array, in the dtype under test, which
// upload() (re)fills from the problem's values, so every variant starts from the same inputs
// and poisoned outputs. Misaligned: each array starts one element past the buffer's (256-byte
// aligned) start, so no pointer is 16-byte aligned and every float4 path must fall back.
struct DeviceProblem {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::size_t> element_bytes;
  Args args;

  static std::size_t bytes_of(const Array& a, DType dtype) {
    if (a.type == Array::kInt32 || a.type == Array::kFloat32) return 4;
    return a.type == Array::kInt64 || a.type == Array::kFloat64 ? 8 : dtype_size(dtype);
  }
  DeviceProblem(Target& target, const Problem& p, bool misaligned) {
    args.dims = p.dims;
    args.stream = target.stream();
    args.device = target.type() == DeviceType::CUDA ? Device::cuda() : kCPU;
    args.dtype = p.dtype;
    args.runtime = target.runtime();
    for (const Array& a : p.arrays) {
      element_bytes.push_back(bytes_of(a, p.dtype));
      // Misaligned: one element past the aligned start, as a view such as x[1:] begins. (Not
      // 4 bytes for every dtype: a double 4 bytes off is an address the GPU refuses.)
      const std::size_t offset = misaligned ? element_bytes.back() : 0;
      buffers.push_back(std::make_unique<Buffer>(target, a.values.size() * element_bytes.back() + offset));
      args.names.push_back(a.name);
      args.pointers.push_back(static_cast<char*>(buffers.back()->get()) + offset);
    }
  }
  void upload(Target& target, const Problem& p) {
    for (std::size_t i = 0; i < p.arrays.size(); ++i) {
      const std::vector<char> host = encode(p.arrays[i], p.dtype);
      target.upload(args.pointers[i], host.data(), host.size());
    }
  }
  std::vector<double> download(Target& target, const Problem& p, std::size_t i) {
    const Array& a = p.arrays[i];
    std::vector<char> host(a.values.size() * element_bytes[i]);
    target.download(host.data(), args.pointers[i], host.size());
    return decode(a, p.dtype, host);
  }
  // The values of one array as the kernel sees them: float32 or float64, int32 or int64.
  static std::vector<char> encode(const Array& a, DType dtype) {
    std::vector<char> bytes(a.values.size() * bytes_of(a, dtype));
    for (std::size_t j = 0; j < a.values.size(); ++j) {
      const double v = a.values[j];
      if (a.type == Array::kInt32) put(bytes, j, static_cast<std::int32_t>(v));
      else if (a.type == Array::kInt64) put(bytes, j, static_cast<std::int64_t>(v));
      else if (a.type == Array::kFloat32) put(bytes, j, static_cast<float>(v));
      else if (a.type == Array::kFloat64 || dtype == kFloat64) put(bytes, j, v);
      else if (dtype == kBFloat16) put(bytes, j, bf16(static_cast<float>(v)));
      else put(bytes, j, static_cast<float>(v));
    }
    return bytes;
  }
  static std::vector<double> decode(const Array& a, DType dtype, const std::vector<char>& bytes) {
    std::vector<double> values(a.values.size());
    for (std::size_t j = 0; j < values.size(); ++j) {
      if (a.type == Array::kInt32) values[j] = get<std::int32_t>(bytes, j);
      else if (a.type == Array::kInt64) values[j] = static_cast<double>(get<std::int64_t>(bytes, j));
      else if (a.type == Array::kFloat32) values[j] = get<float>(bytes, j);
      else if (a.type == Array::kFloat64 || dtype == kFloat64) values[j] = get<double>(bytes, j);
      else if (dtype == kBFloat16) values[j] = static_cast<float>(get<bf16>(bytes, j));
      else values[j] = get<float>(bytes, j);
    }
    return values;
  }
  template <class T>
  static void put(std::vector<char>& bytes, std::size_t j, T v) {
    std::memcpy(bytes.data() + j * sizeof(T), &v, sizeof(T));
  }
  template <class T>
  static T get(const std::vector<char>& bytes, std::size_t j) {
    T v;
    std::memcpy(&v, bytes.data() + j * sizeof(T), sizeof(T));
    return v;
  }
};

// ---------------------------------------------------------------------------------------------
// Reaching the variants
//
// The lab lists an op's registrations (kernels::variants) and binds each through the case's
// Call, which looks the function up by its typed descriptor: it runs every variant without
// changing which one the rest of brrr selects.

struct Variant {
  std::string name;
  bool is_default = false;  // what the registry selects now
  kernels::VariantMeta meta;
};

// Every variant of op on device for dtype, highest priority (the fastest) first (device.cpp).
std::vector<Variant> variants_of(const std::string& op, DeviceType device, DType dtype);
// The variants a run takes from `all`: every one (`wanted` is "all"), or the one named `wanted`;
// a name that is not there is an error naming the case, the device (`where`) and the variants
// there are. Every mode of the lab picks its variants here.
std::vector<Variant> pick_variants(const std::vector<Variant>& all, const std::string& wanted,
                                   const std::string& case_name, const std::string& where);

// The median and the min of `repeats` timed calls of `work`, after `warmup` untimed ones.
struct Timing {
  double median_ms = 0, min_ms = 0;
  int runs = 0;
};

Timing time_calls(Target& target, const std::function<void()>& work, int warmup, int repeats,
                  double budget_seconds);  // timing.cpp

}  // namespace brrr::lab
