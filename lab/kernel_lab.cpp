// lab/kernel_lab.cpp: the kernel lab: its table of ops, the checker and the timer.
// Chapter 10 (the roofline and the kernel lab). Read before: kernel_lab.h.
// Read next: cli_kernel_lab.cpp.
//
// The file runs top to bottom as the lab does: problems and random inputs, the check, the
// device the variants run on (memory, clock, cache flush), how the lab reaches each variant
// in the registry, the table of ops, the peaks, and run(), which puts them together.
#include "lab/kernel_lab.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include "brrr/cuda.h"
#include "brrr/error.h"
#include "brrr/kernels.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"

namespace brrr::lab {

using kernels::AnyFn;
using kernels::Stream;

namespace {

std::string format(const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  return text;
}

// printf to options.out, which may be nullptr (the tests run quietly).
void say(std::FILE* out, const char* fmt, ...) {
  if (!out) return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(out, fmt, args);
  va_end(args);
  std::fflush(out);
}

std::string bytes_text(double bytes) {
  if (bytes < (1 << 20)) return format("%.1f KiB", bytes / (1 << 10));
  if (bytes < (1 << 30)) return format("%.1f MiB", bytes / (1 << 20));
  return format("%.2f GiB", bytes / (1 << 30));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

std::vector<float> to_float(const std::vector<double>& v) {
  std::vector<float> f(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i]);
  return f;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Devices, problems, random inputs

LabDevice parse_device(const std::string& name) {
  if (name == "cpu") return LabDevice::CPU;
  if (name == "cuda") return LabDevice::CUDA;
  if (name == "emulator") return LabDevice::Emulator;
  detail::fail("kernel-lab: unknown device '", name, "' (devices: cpu, cuda, emulator)");
}

void Problem::input(const std::string& name, std::vector<float> values) {
  Array a;
  a.name = name;
  a.values = std::move(values);
  arrays.push_back(std::move(a));
}

void Problem::inout(const std::string& name, std::vector<float> values) {
  input(name, std::move(values));
  arrays.back().role = Array::kInOut;
}

void Problem::indices(const std::string& name, std::vector<std::int32_t> values) {
  Array a;
  a.name = name;
  a.index = true;
  a.indices = std::move(values);
  arrays.push_back(std::move(a));
}

void Problem::output(const std::string& name, std::int64_t count) {
  input(name, std::vector<float>(static_cast<std::size_t>(count), std::numeric_limits<float>::quiet_NaN()));
  arrays.back().role = Array::kOutput;
}

const Array& Problem::operator[](const std::string& name) const {
  for (const Array& a : arrays)
    if (a.name == name) return a;
  detail::fail("kernel-lab: the problem has no array '", name, "'");
}

// cpu::normal and cpu::uniform draw element i from philox(seed, counter + i / 4): one
// counter gives four floats, so the next draw starts (n + 3) / 4 counters further on.
std::vector<float> Random::normal(std::int64_t n, float mean, float stddev) {
  std::vector<float> v(static_cast<std::size_t>(n));
  kernels::cpu::normal<float>(v.data(), n, seed_, counter_, nullptr);
  counter_ += static_cast<std::uint64_t>((n + 3) / 4);
  if (mean != 0.0f || stddev != 1.0f)
    for (float& x : v) x = mean + stddev * x;
  return v;
}

std::vector<float> Random::uniform(std::int64_t n, float low, float high) {
  std::vector<float> v(static_cast<std::size_t>(n));
  kernels::cpu::uniform<float>(v.data(), n, seed_, counter_, nullptr);
  counter_ += static_cast<std::uint64_t>((n + 3) / 4);
  for (float& x : v) x = low + (high - low) * x;
  return v;
}

std::vector<std::int32_t> Random::integers(std::int64_t n, std::int32_t high) {
  const std::vector<float> u = uniform(n, 0.0f, 1.0f);
  std::vector<std::int32_t> v(u.size());
  for (std::size_t i = 0; i < u.size(); ++i)
    v[i] = std::min(static_cast<std::int32_t>(u[i] * static_cast<float>(high)), high - 1);
  return v;
}

void* Args::get(const char* name) const {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) return pointers[i];
  detail::fail("kernel-lab: the call asks for an array '", name, "' the problem does not have");
}

const Dims& Case::default_size(LabDevice device) const {
  return device == LabDevice::CPU ? cpu_size : device == LabDevice::Emulator ? emulator_size : gpu_size;
}

// ---------------------------------------------------------------------------------------------
// The check
//
// A float32 result can only be as close to the float64 reference as float32 rounding allows,
// so the lab measures relative error. But |got - ref| / |ref| explodes where the reference
// happens to be near zero (a matmul output of 1e-7 is not a bug), so each element's error is
// taken relative to the larger of |ref| and the output's typical size, its mean |ref|:
//
//   err[i] = |got[i] - ref[i]| / max(|ref[i]|, mean |ref|)
//
// An element fails when err[i] > tolerance, or when it is NaN or infinite. Outputs start as
// NaN, so an element the kernel never writes fails too, even with no reference to compare.

namespace {

struct Comparison {
  double max_abs = 0, max_rel = 0;
  std::int64_t bad = 0;       // elements that failed
  std::string first_failure;  // the first of them
};

Comparison compare(const std::string& name, const std::vector<float>& got, const std::vector<double>* ref,
                   double tolerance) {
  Comparison c;
  const std::size_t n = got.size();
  double scale = 0;
  if (ref) {
    for (double r : *ref) scale += std::isfinite(r) ? std::fabs(r) : 0.0;
    scale = n ? scale / static_cast<double>(n) : 0.0;
  }
  scale = std::max(scale, std::numeric_limits<double>::min());
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got[i];
    const double r = ref ? (*ref)[i] : 0.0;
    std::string why;
    if (!std::isfinite(g)) {
      if (!(ref && g == r)) why = ref ? format("%s[%zu] = %g (reference %.9g)", name.c_str(), i, g, r)
                                      : format("%s[%zu] = %g", name.c_str(), i, g);
    } else if (ref) {
      const double abs_error = std::fabs(g - r);
      const double rel_error = abs_error / std::max(std::fabs(r), scale);
      c.max_abs = std::max(c.max_abs, abs_error);
      c.max_rel = std::max(c.max_rel, rel_error);
      if (!(rel_error <= tolerance))  // also catches a NaN error from an infinite reference
        why = format("%s[%zu] = %.9g but the reference is %.9g (relative error %.3g > tolerance %.3g)",
                     name.c_str(), i, g, r, rel_error, tolerance);
    }
    if (!why.empty() && c.bad++ == 0) c.first_failure = why;
  }
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The device under test, as the lab sees it: memory, copies, a clock and a cache to flush.
//
// On the CUDA device (a GPU, or the emulator standing in for one) all of it goes through
// gpu::Runtime; on the CPU, memory is the heap and the clock the wall clock. Timings flush the
// last-level cache first by writing a buffer twice its size, so every timed run reads its
// inputs from memory, as it would inside a model where other layers ran in between.

namespace {

std::size_t cpu_cache_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  // Virtual machines report the whole socket's L3 (hundreds of MiB): cap what is flushed.
  return l3 > 0 ? std::min<std::size_t>(static_cast<std::size_t>(l3), std::size_t{64} << 20) : std::size_t{32} << 20;
}

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reaching the variants
//
// The lab asks the registry for each variant's function by name (kernels::lookup_variant),
// so it runs every variant without changing which one the rest of brrr selects.

namespace {

struct Variant {
  std::string name;
  bool is_default = false;  // what the registry selects now
  AnyFn fn = nullptr;
  kernels::VariantMeta meta;
};

// Every variant of op on device for dtype, highest priority (the fastest) first.
std::vector<Variant> variants_of(const std::string& op, DeviceType device, DType dtype) {
  std::vector<Variant> found;
  for (const kernels::VariantInfo& info : kernels::variants(op))
    if (info.device.type == device && info.dtype == dtype)
      found.push_back({info.variant, info.selected, kernels::lookup_variant(op, device, dtype, info.variant), info.meta});
  return found;
}

// The CPU kernel the case's outputs are checked against: the first of its reference
// variants registered in float64, else in float32.
struct Reference {
  AnyFn fn = nullptr;
  std::string variant;
  DType dtype = kFloat64;
  std::string describe() const {
    return fn ? format("cpu variant '%s', %s", variant.c_str(), dtype == kFloat64 ? "float64" : "float32") : "none";
  }
};

Reference find_reference(const Case& c) {
  for (DType dtype : {kFloat64, kFloat32}) {
    const std::vector<Variant> cpu = variants_of(c.op, DeviceType::CPU, dtype);
    for (const std::string& name : c.reference_variants)
      for (const Variant& v : cpu)
        if (v.name == name) return {v.fn, name, dtype};
  }
  return {};
}

// For inputs a forward pass would have produced (a layernorm's mean and rstd for its
// backward, attention's out and lse): the forward's CPU reference in float64.
AnyFn float64_reference(const char* op, const char* needed_by) {
  for (const Variant& v : variants_of(op, DeviceType::CPU, kFloat64))
    if (v.name == "cpu") return v.fn;
  detail::fail("kernel-lab: ", needed_by, "'s inputs come from the CPU reference ", op,
               " in float64, which is not registered (kernels/cpu)");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The table of ops
//
// Each case says what a call looks like through the op's kernels.h signature (call_<op>,
// once for float and once for double), how to make inputs of a size, and the bytes an ideal
// kernel moves: every input read once and every output written once, in float32. A kernel
// that reaches that bandwidth is as fast as the memory system allows; matmul and attention
// do so much arithmetic per byte that TFLOP/s is their measure instead.

namespace {

using kernels::MatmulShape;

// Constants the calls share: PyTorch's defaults, and an AdamW step late enough that the bias
// corrections are not 1.
constexpr double kLayernormEps = 1e-5;
constexpr std::int64_t kIgnoreIndex = -100;
const kernels::AdamWParams kAdamW{1e-3, 0.9, 0.999, 1e-8, 0.1, 10};

kernels::Loop flat_loop(std::int64_t n) {  // one dim, contiguous operands: no broadcasting
  kernels::Loop loop;
  loop.ndim = 1;
  loop.size[0] = n;
  loop.stride[0][0] = loop.stride[1][0] = loop.stride[2][0] = 1;
  return loop;
}

template <class T>
void call_matmul(AnyFn kernel, const Args& a) {
  MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  reinterpret_cast<kernels::matmul_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), s, a.stream);
}

template <class T>
void call_gelu_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::unary_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("x"), a.dims[0], a.stream);
}

template <class T>
void call_gelu_backward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::unary_backward_fn<T>>(kernel)(a.f<T>("dx"), a.f<T>("dout"), a.f<T>("x"), a.dims[0],
                                                          a.stream);
}

template <class T>
void call_bias_gelu_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::bias_gelu_forward_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("x"), a.f<T>("bias"), a.dims[0],
                                                             a.dims[1], a.stream);
}

template <class T>
void call_layernorm_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::layernorm_forward_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("mean"), a.f<T>("rstd"),
                                                             a.f<T>("x"), a.f<T>("weight"), a.f<T>("bias"), a.dims[0],
                                                             a.dims[1], static_cast<T>(kLayernormEps), a.stream);
}

template <class T>
void call_layernorm_backward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::layernorm_backward_fn<T>>(kernel)(
      a.f<T>("dx"), a.f<T>("dweight"), a.f<T>("dbias"), a.f<T>("dout"), a.f<T>("x"), a.f<T>("weight"), a.f<T>("mean"),
      a.f<T>("rstd"), a.dims[0], a.dims[1], a.stream);
}

template <class T>
void call_residual_layernorm_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::residual_layernorm_forward_fn<T>>(kernel)(
      a.f<T>("sum"), a.f<T>("out"), a.f<T>("mean"), a.f<T>("rstd"), a.f<T>("x"), a.f<T>("residual"), a.f<T>("weight"),
      a.f<T>("bias"), a.dims[0], a.dims[1], static_cast<T>(kLayernormEps), a.stream);
}

template <class T>
void call_softmax_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::softmax_forward_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("x"), a.dims[0], a.dims[1], a.stream);
}

template <class T>
void call_cross_entropy_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::cross_entropy_forward_fn<T>>(kernel)(a.f<T>("losses"), a.f<T>("lse"), a.f<T>("logits"),
                                                                 a.idx("targets"), a.dims[0], a.dims[1], kIgnoreIndex,
                                                                 a.stream);
}

template <class T>
void call_cross_entropy_backward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::cross_entropy_backward_fn<T>>(kernel)(
      a.f<T>("dlogits"), a.f<T>("dlosses"), a.f<T>("logits"), a.f<T>("lse"), a.idx("targets"), a.dims[0], a.dims[1],
      kIgnoreIndex, a.stream);
}

template <class T>
void call_cross_entropy_fused(AnyFn kernel, const Args& a) {
  const T dloss = static_cast<T>(1.0 / static_cast<double>(std::max<std::int64_t>(a.dims[0], 1)));  // a mean over rows
  reinterpret_cast<kernels::cross_entropy_fused_fn<T>>(kernel)(a.f<T>("losses"), a.f<T>("dlogits"), a.f<T>("logits"),
                                                               a.idx("targets"), a.dims[0], a.dims[1], kIgnoreIndex,
                                                               dloss, a.stream);
}

template <class T>
void call_adamw_step(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::adamw_step_fn<T>>(kernel)(a.f<T>("param"), a.f<T>("grad"), a.f<T>("m"), a.f<T>("v"),
                                                      a.dims[0], kAdamW, a.stream);
}

// adamw_multi_step: the n parameters cut into tensors of ragged sizes, like a model's weight
// matrices and biases (most tensors start at an address that is not 16-byte aligned), with
// weight decay on every other one.
std::vector<std::int64_t> adamw_tensor_sizes(std::int64_t n) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t part : {n / 2 + 3, n / 4 - 1, n / 8 + 5, n / 16 + 2, n / 64 + 1}) {
    part = std::clamp<std::int64_t>(part, 0, n);
    sizes.push_back(part);
    n -= part;
  }
  sizes.push_back(n);  // the rest
  return sizes;
}

template <class T>
void call_adamw_multi_step(AnyFn kernel, const Args& a) {
  T *param = a.f<T>("param"), *m = a.f<T>("m"), *v = a.f<T>("v");
  const T* grad = a.f<T>("grad");
  std::vector<kernels::AdamWTensor<T>> tensors;
  std::int64_t offset = 0;
  for (std::int64_t size : adamw_tensor_sizes(a.dims[0])) {
    const double decay = tensors.size() % 2 == 0 ? kAdamW.weight_decay : 0.0;
    tensors.push_back({param + offset, grad + offset, m + offset, v + offset, size, decay});
    offset += size;
  }
  reinterpret_cast<kernels::adamw_multi_step_fn<T>>(kernel)(tensors.data(), static_cast<int>(tensors.size()), kAdamW,
                                                            a.stream);
}

template <class T>
T attention_scale(const Args& a) {
  return static_cast<T>(1.0 / std::sqrt(static_cast<double>(a.dims[2])));
}

template <class T>
void call_attention_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::attention_forward_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("lse"), a.f<T>("q"), a.f<T>("k"),
                                                             a.f<T>("v"), a.dims[0], a.dims[1], a.dims[2],
                                                             attention_scale<T>(a), a.stream);
}

template <class T>
void call_attention_backward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::attention_backward_fn<T>>(kernel)(
      a.f<T>("dq"), a.f<T>("dk"), a.f<T>("dv"), a.f<T>("dout"), a.f<T>("q"), a.f<T>("k"), a.f<T>("v"), a.f<T>("out"),
      a.f<T>("lse"), a.dims[0], a.dims[1], a.dims[2], attention_scale<T>(a), a.stream);
}

template <class T>
void call_add(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::binary_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), flat_loop(a.dims[0]),
                                                  a.stream);
}

template <class T>
void call_copy(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::copy_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("in"), flat_loop(a.dims[0]), a.stream);
}

template <class T>
void call_sum_dim(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::sum_dim_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("in"), a.dims[0], a.dims[1], a.dims[2],
                                                   a.stream);
}

template <class T>
void call_embedding_forward(AnyFn kernel, const Args& a) {
  reinterpret_cast<kernels::embedding_forward_fn<T>>(kernel)(a.f<T>("out"), a.f<T>("weight"), a.idx("idx"), a.dims[0],
                                                             a.dims[1], a.stream);
}

// Cross-entropy targets: uniform over the vocabulary, with every 16th row ignored (padding),
// so the ignore_index path is checked too.
std::vector<std::int32_t> targets_for(Random& r, std::int64_t N, std::int64_t V) {
  std::vector<std::int32_t> t = r.integers(N, static_cast<std::int32_t>(V));
  for (std::int64_t n = 5; n < N; n += 16) t[n] = static_cast<std::int32_t>(kIgnoreIndex);
  return t;
}

// For the backward cases: mean and rstd from the float64 reference layernorm_forward.
void layernorm_statistics(Problem& p, const std::vector<float>& x, const std::vector<float>& weight,
                          const std::vector<float>& bias) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  const AnyFn forward = float64_reference("layernorm_forward", "layernorm_backward");
  std::vector<double> xd = to_double(x), wd = to_double(weight), bd = to_double(bias), out(xd.size()), mean(N), rstd(N);
  reinterpret_cast<kernels::layernorm_forward_fn<double>>(forward)(out.data(), mean.data(), rstd.data(), xd.data(),
                                                                   wd.data(), bd.data(), N, C, kLayernormEps, nullptr);
  p.input("mean", to_float(mean));
  p.input("rstd", to_float(rstd));
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> table = {
      // --- chapter 13: matmul ------------------------------------------------------------------
      Case{
          .op = "matmul",
          .what = "out (M, N) = a (M, K) @ b (K, N), row-major",
          .dim_names = {"M", "N", "K"},
          .gpu_size = {4096, 4096, 4096}, .emulator_size = {128, 128, 128}, .cpu_size = {1024, 1024, 1024},
          .tolerance = 1e-4,  // sums of K products: float32 rounding grows like sqrt(K)
          .report_flops = true,
          .bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[2] * d[1] + d[0] * d[1]); },
          .flops = [](const Dims& d) { return 2.0 * d[0] * d[1] * d[2]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
            p.input("a", r.normal(M * K));
            p.input("b", r.normal(K * N));
            p.output("out", M * N);
          },
          .call_float = &call_matmul<float>, .call_double = &call_matmul<double>,
          // Eigen in float64 is exact to ~1e-15 and fast at any size; the naive loop
          // (double accumulation) is as exact but takes minutes at 4096^3.
          .reference_variants = {"eigen", "naive"},
      },
      // --- chapter 11: GELU --------------------------------------------------------------------
      Case{
          .op = "gelu_forward",
          .what = "out (n) = gelu(x (n)), the tanh approximation",
          .dim_names = {"n"},
          .gpu_size = {1 << 26}, .emulator_size = {1 << 16}, .cpu_size = {1 << 24},
          .tolerance = 1e-4,  // tanhf is ~1e-7; the tanh.approx.f32 instruction (~5e-4) is not
          .bytes = [](const Dims& d) { return 8.0 * d[0]; },  // read x, write out
          .make = [](Problem& p, Random& r) {
            p.input("x", r.normal(p.dims[0], 0.0f, 2.0f));
            p.output("out", p.dims[0]);
          },
          .call_float = &call_gelu_forward<float>, .call_double = &call_gelu_forward<double>,
      },
      Case{
          .op = "gelu_backward",
          .what = "dx (n) = dout (n) * gelu'(x (n))",
          .dim_names = {"n"},
          .gpu_size = {1 << 26}, .emulator_size = {1 << 16}, .cpu_size = {1 << 24},
          .tolerance = 1e-4,
          .bytes = [](const Dims& d) { return 12.0 * d[0]; },  // read dout and x, write dx
          .make = [](Problem& p, Random& r) {
            p.input("dout", r.normal(p.dims[0]));
            p.input("x", r.normal(p.dims[0], 0.0f, 2.0f));
            p.output("dx", p.dims[0]);
          },
          .call_float = &call_gelu_backward<float>, .call_double = &call_gelu_backward<double>,
      },
      Case{
          .op = "bias_gelu_forward",
          .what = "out (N, C) = gelu(x (N, C) + bias (C)), fused",
          .dim_names = {"N", "C"},
          // GPT-2 small's MLP: B * T = 8 * 1024 rows of 4 * 768
          .gpu_size = {8192, 3072}, .emulator_size = {64, 384}, .cpu_size = {2048, 3072},
          .tolerance = 1e-4,
          .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 4.0 * d[1]; },  // x, out; bias once
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], C = p.dims[1];
            p.input("x", r.normal(N * C, 0.0f, 2.0f));
            p.input("bias", r.normal(C, 0.0f, 0.5f));
            p.output("out", N * C);
          },
          .call_float = &call_bias_gelu_forward<float>, .call_double = &call_bias_gelu_forward<double>,
      },
      // --- chapter 12: LayerNorm ---------------------------------------------------------------
      Case{
          .op = "layernorm_forward",
          .what = "out (N, C) = (x - mean) * rstd * weight (C) + bias (C); mean, rstd (N)",
          .dim_names = {"N", "C"},
          .gpu_size = {65536, 768}, .emulator_size = {128, 768}, .cpu_size = {16384, 768},
          .tolerance = 1e-4,
          // read x, write out, read weight and bias, write mean and rstd
          .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 8.0 * d[1] + 8.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], C = p.dims[1];
            p.input("x", r.normal(N * C, 0.5f, 2.0f));  // an offset, so the mean matters
            p.input("weight", r.normal(C, 1.0f, 0.2f));
            p.input("bias", r.normal(C, 0.0f, 0.2f));
            p.output("out", N * C);
            p.output("mean", N);
            p.output("rstd", N);
          },
          .call_float = &call_layernorm_forward<float>, .call_double = &call_layernorm_forward<double>,
      },
      Case{
          .op = "layernorm_backward",
          .what = "dx (N, C), dweight (C), dbias (C) from dout, x, weight and the forward's mean, rstd",
          .dim_names = {"N", "C"},
          .gpu_size = {65536, 768}, .emulator_size = {128, 768}, .cpu_size = {16384, 768},
          .tolerance = 1e-3,  // dweight and dbias are sums over all N rows
          // read dout, x, weight, mean, rstd; write dx, dweight, dbias
          .bytes = [](const Dims& d) { return 12.0 * d[0] * d[1] + 12.0 * d[1] + 8.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], C = p.dims[1];
            const std::vector<float> x = r.normal(N * C, 0.5f, 2.0f), weight = r.normal(C, 1.0f, 0.2f),
                                     bias = r.normal(C, 0.0f, 0.2f);
            p.input("dout", r.normal(N * C));
            p.input("x", x);
            p.input("weight", weight);
            layernorm_statistics(p, x, weight, bias);
            p.output("dx", N * C);
            p.output("dweight", C);
            p.output("dbias", C);
          },
          .call_float = &call_layernorm_backward<float>, .call_double = &call_layernorm_backward<double>,
      },
      Case{
          .op = "residual_layernorm_forward",
          .what = "sum (N, C) = x + residual; out = layernorm(sum); mean, rstd (N), fused",
          .dim_names = {"N", "C"},
          .gpu_size = {65536, 768}, .emulator_size = {128, 768}, .cpu_size = {16384, 768},
          .tolerance = 1e-4,
          // read x, residual; write sum, out; read weight, bias; write mean, rstd
          .bytes = [](const Dims& d) { return 16.0 * d[0] * d[1] + 8.0 * d[1] + 8.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], C = p.dims[1];
            p.input("x", r.normal(N * C, 0.5f, 2.0f));
            p.input("residual", r.normal(N * C));
            p.input("weight", r.normal(C, 1.0f, 0.2f));
            p.input("bias", r.normal(C, 0.0f, 0.2f));
            p.output("sum", N * C);
            p.output("out", N * C);
            p.output("mean", N);
            p.output("rstd", N);
          },
          .call_float = &call_residual_layernorm_forward<float>,
          .call_double = &call_residual_layernorm_forward<double>,
      },
      // --- softmax and cross-entropy -----------------------------------------------------------
      Case{
          .op = "softmax_forward",
          .what = "out (N, C) = softmax of each row of x (N, C)",
          .dim_names = {"N", "C"},
          // attention's scores: B * n_head * T rows of T
          .gpu_size = {65536, 1024}, .emulator_size = {64, 1000}, .cpu_size = {8192, 1024},
          .tolerance = 1e-4,
          .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1]; },  // read x, write out
          .make = [](Problem& p, Random& r) {
            p.input("x", r.normal(p.dims[0] * p.dims[1], 0.0f, 3.0f));
            p.output("out", p.dims[0] * p.dims[1]);
          },
          .call_float = &call_softmax_forward<float>, .call_double = &call_softmax_forward<double>,
      },
      Case{
          .op = "cross_entropy_forward",
          .what = "losses (N), lse (N) from logits (N, V) and targets (N)",
          .dim_names = {"N", "V"},
          // GPT-2's padded vocabulary, B * T = 8 * 1024 rows
          .gpu_size = {8192, 50304}, .emulator_size = {32, 1000}, .cpu_size = {512, 50304},
          .tolerance = 1e-4,
          // read logits and targets, write losses and lse
          .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] + 12.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], V = p.dims[1];
            p.input("logits", r.normal(N * V, 0.0f, 2.0f));
            p.indices("targets", targets_for(r, N, V));
            p.output("losses", N);
            p.output("lse", N);
          },
          .call_float = &call_cross_entropy_forward<float>, .call_double = &call_cross_entropy_forward<double>,
      },
      Case{
          .op = "cross_entropy_backward",
          .what = "dlogits (N, V) from dlosses (N), logits (N, V), the forward's lse (N), targets",
          .dim_names = {"N", "V"},
          .gpu_size = {8192, 50304}, .emulator_size = {32, 1000}, .cpu_size = {512, 50304},
          .tolerance = 1e-4,
          // read logits, write dlogits; read dlosses, lse, targets
          .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 12.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], V = p.dims[1];
            const std::vector<float> logits = r.normal(N * V, 0.0f, 2.0f);
            const std::vector<std::int32_t> targets = targets_for(r, N, V);
            const AnyFn forward = float64_reference("cross_entropy_forward", "cross_entropy_backward");
            std::vector<double> ld = to_double(logits), losses(N), lse(N);
            reinterpret_cast<kernels::cross_entropy_forward_fn<double>>(forward)(
                losses.data(), lse.data(), ld.data(), targets.data(), N, V, kIgnoreIndex, nullptr);
            p.input("dlosses", r.uniform(N, 0.5f / N, 1.5f / N));
            p.input("logits", logits);
            p.input("lse", to_float(lse));
            p.indices("targets", targets);
            p.output("dlogits", N * V);
          },
          .call_float = &call_cross_entropy_backward<float>, .call_double = &call_cross_entropy_backward<double>,
      },
      Case{
          .op = "cross_entropy_fused",
          .what = "losses (N) and dlogits (N, V) in one pass over logits (N, V), dloss = 1/N",
          .dim_names = {"N", "V"},
          .gpu_size = {8192, 50304}, .emulator_size = {32, 1000}, .cpu_size = {512, 50304},
          .tolerance = 1e-4,
          // one read of logits, one write of dlogits; read targets, write losses
          .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 8.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], V = p.dims[1];
            p.input("logits", r.normal(N * V, 0.0f, 2.0f));
            p.indices("targets", targets_for(r, N, V));
            p.output("losses", N);
            p.output("dlogits", N * V);
          },
          .call_float = &call_cross_entropy_fused<float>, .call_double = &call_cross_entropy_fused<double>,
      },
      // --- AdamW -------------------------------------------------------------------------------
      Case{
          .op = "adamw_step",
          .what = "param, m, v (n) updated in place from grad (n), step 10",
          .dim_names = {"n"},
          .gpu_size = {1 << 26}, .emulator_size = {1 << 16}, .cpu_size = {1 << 24},
          .tolerance = 1e-5,
          .bytes = [](const Dims& d) { return 28.0 * d[0]; },  // read param grad m v, write param m v
          .make = [](Problem& p, Random& r) {
            const std::int64_t n = p.dims[0];
            p.inout("param", r.normal(n));
            p.input("grad", r.normal(n));
            p.inout("m", r.normal(n, 0.0f, 0.1f));
            p.inout("v", r.uniform(n, 0.0f, 0.01f));  // a running mean of squares: >= 0
          },
          .call_float = &call_adamw_step<float>, .call_double = &call_adamw_step<double>,
      },
      Case{
          .op = "adamw_multi_step",
          .what = "adamw_step over 6 tensors of ragged sizes (n in all) in one launch",
          .dim_names = {"n"},
          .gpu_size = {1 << 26}, .emulator_size = {1 << 16}, .cpu_size = {1 << 24},
          .tolerance = 1e-5,
          .bytes = [](const Dims& d) { return 28.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t n = p.dims[0];
            p.inout("param", r.normal(n));
            p.input("grad", r.normal(n));
            p.inout("m", r.normal(n, 0.0f, 0.1f));
            p.inout("v", r.uniform(n, 0.0f, 0.01f));
          },
          .call_float = &call_adamw_multi_step<float>, .call_double = &call_adamw_multi_step<double>,
      },
      // --- chapter 14: attention ---------------------------------------------------------------
      Case{
          .op = "attention_forward",
          .what = "causal attention: out (BH, T, hs), lse (BH, T) from q, k, v (BH, T, hs)",
          .dim_names = {"BH", "T", "hs"},
          // GPT-2 small: batch 32 * 12 heads, T = 1024
          .gpu_size = {384, 1024, 64}, .emulator_size = {4, 64, 32}, .cpu_size = {48, 256, 64},
          .tolerance = 1e-4,
          .report_flops = true,
          .bytes = [](const Dims& d) { return 16.0 * d[0] * d[1] * d[2] + 4.0 * d[0] * d[1]; },  // q k v out, lse
          // q @ k^T and p @ v, 2 * T * T * hs flops each, over the causal half
          .flops = [](const Dims& d) { return 4.0 * d[0] * d[1] * d[1] * d[2] / 2; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t n = p.dims[0] * p.dims[1] * p.dims[2];
            p.input("q", r.normal(n));
            p.input("k", r.normal(n));
            p.input("v", r.normal(n));
            p.output("out", n);
            p.output("lse", p.dims[0] * p.dims[1]);
          },
          .call_float = &call_attention_forward<float>, .call_double = &call_attention_forward<double>,
      },
      Case{
          .op = "attention_backward",
          .what = "dq, dk, dv (BH, T, hs) from dout, q, k, v and the forward's out, lse",
          .dim_names = {"BH", "T", "hs"},
          .gpu_size = {384, 1024, 64}, .emulator_size = {4, 64, 32}, .cpu_size = {48, 256, 64},
          .tolerance = 1e-3,  // dk and dv are sums over every query that sees the key
          .report_flops = true,
          // read dout q k v out, lse; write dq dk dv
          .bytes = [](const Dims& d) { return 32.0 * d[0] * d[1] * d[2] + 4.0 * d[0] * d[1]; },
          // recomputing the scores and four more matmuls: 2.5x the forward's
          .flops = [](const Dims& d) { return 2.5 * 4.0 * d[0] * d[1] * d[1] * d[2] / 2; },
          .make = [](Problem& p, Random& r) {
            const std::int64_t BH = p.dims[0], T = p.dims[1], hs = p.dims[2], n = BH * T * hs;
            const std::vector<float> q = r.normal(n), k = r.normal(n), v = r.normal(n);
            const AnyFn forward = float64_reference("attention_forward", "attention_backward");
            std::vector<double> qd = to_double(q), kd = to_double(k), vd = to_double(v), out(n), lse(BH * T);
            reinterpret_cast<kernels::attention_forward_fn<double>>(forward)(
                out.data(), lse.data(), qd.data(), kd.data(), vd.data(), BH, T, hs, 1.0 / std::sqrt(double(hs)),
                nullptr);
            p.input("dout", r.normal(n));
            p.input("q", q);
            p.input("k", k);
            p.input("v", v);
            p.input("out", to_float(out));
            p.input("lse", to_float(lse));
            p.output("dq", n);
            p.output("dk", n);
            p.output("dv", n);
          },
          .call_float = &call_attention_backward<float>, .call_double = &call_attention_backward<double>,
      },
      // --- the plain ops of chapter 09 ---------------------------------------------------------
      Case{
          .op = "add",
          .what = "out (n) = a (n) + b (n), contiguous, no broadcasting",
          .dim_names = {"n"},
          .gpu_size = {1 << 26}, .emulator_size = {1 << 16}, .cpu_size = {1 << 24},
          .tolerance = 1e-6,  // one rounding
          .bytes = [](const Dims& d) { return 12.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            p.input("a", r.normal(p.dims[0]));
            p.input("b", r.normal(p.dims[0]));
            p.output("out", p.dims[0]);
          },
          .call_float = &call_add<float>, .call_double = &call_add<double>,
      },
      Case{
          .op = "copy",
          .what = "out (n) = in (n), contiguous",
          .dim_names = {"n"},
          .gpu_size = {1 << 26}, .emulator_size = {1 << 16}, .cpu_size = {1 << 24},
          .tolerance = 0,  // a copy is exact
          .bytes = [](const Dims& d) { return 8.0 * d[0]; },
          .make = [](Problem& p, Random& r) {
            p.input("in", r.normal(p.dims[0]));
            p.output("out", p.dims[0]);
          },
          .call_float = &call_copy<float>, .call_double = &call_copy<double>,
      },
      Case{
          .op = "sum_dim",
          .what = "out (outer, inner) = in (outer, R, inner) summed over R",
          .dim_names = {"outer", "R", "inner"},
          // a bias gradient: the sum over all rows
          .gpu_size = {1, 65536, 768}, .emulator_size = {2, 256, 96}, .cpu_size = {1, 16384, 768},
          .tolerance = 1e-4,
          .bytes = [](const Dims& d) { return 4.0 * d[0] * d[1] * d[2] + 4.0 * d[0] * d[2]; },
          .make = [](Problem& p, Random& r) {
            p.input("in", r.normal(p.dims[0] * p.dims[1] * p.dims[2]));
            p.output("out", p.dims[0] * p.dims[2]);
          },
          .call_float = &call_sum_dim<float>, .call_double = &call_sum_dim<double>,
      },
      Case{
          .op = "embedding_forward",
          .what = "out (N, C) = rows idx (N) of weight (V, C)",
          .dim_names = {"N", "C", "V"},
          .gpu_size = {8192, 768, 50304}, .emulator_size = {64, 96, 500}, .cpu_size = {8192, 768, 50304},
          .tolerance = 0,  // a gather is exact
          .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 4.0 * d[0]; },  // the rows read, out, idx
          .make = [](Problem& p, Random& r) {
            const std::int64_t N = p.dims[0], C = p.dims[1], V = p.dims[2];
            p.input("weight", r.normal(V * C));
            p.indices("idx", r.integers(N, static_cast<std::int32_t>(V)));
            p.output("out", N * C);
          },
          .call_float = &call_embedding_forward<float>, .call_double = &call_embedding_forward<double>,
      },
  };
  return table;
}

}  // namespace

const std::vector<Case>& cases() { return all_cases(); }

const Case& find_case(const std::string& op) {
  std::string known;
  for (const Case& c : cases()) {
    if (c.op == op) return c;
    known += (known.empty() ? "" : ", ") + c.op;
  }
  detail::fail("kernel-lab: unknown op '", op, "' (ops: ", known, ")");
}

// ---------------------------------------------------------------------------------------------
// Sizes on the command line

namespace {

std::int64_t parse_dim(const std::string& op, const std::string& text) {
  // "65536", or "2^16" for a power of two
  std::size_t used = 0;
  std::int64_t value = -1;
  try {
    const std::size_t caret = text.find('^');
    if (caret != std::string::npos) {
      const long long base = std::stoll(text.substr(0, caret), &used);
      BRRR_CHECK(used == caret, "");
      const std::string exponent_text = text.substr(caret + 1);
      const long long exponent = std::stoll(exponent_text, &used);
      BRRR_CHECK(used == exponent_text.size() && exponent >= 0 && exponent < 63, "");
      value = 1;
      for (long long i = 0; i < exponent; ++i) value *= base;
    } else {
      value = std::stoll(text, &used);
      BRRR_CHECK(used == text.size(), "");
    }
  } catch (const std::exception&) {
    value = -1;
  }
  BRRR_CHECK(value >= 1, "kernel-lab ", op, ": size '", text, "' is not a positive integer (or 2^k)");
  return value;
}

std::vector<std::string> split(const std::string& text, const std::string& separators) {
  std::vector<std::string> parts;
  std::string part;
  for (char ch : text) {
    if (separators.find(ch) != std::string::npos) {
      parts.push_back(part);
      part.clear();
    } else {
      part += ch;
    }
  }
  parts.push_back(part);
  return parts;
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

Dims parse_size(const Case& c, const std::string& text, const Dims& defaults) {
  std::string names;
  for (const std::string& n : c.dim_names) names += (names.empty() ? "" : ", ") + n;
  if (text.find('=') != std::string::npos) {  // "C=1024,N=64": by name, the rest from defaults
    Dims dims = defaults;
    for (const std::string& item : split(text, ", ")) {
      if (item.empty()) continue;
      const std::size_t eq = item.find('=');
      BRRR_CHECK(eq != std::string::npos, "kernel-lab ", c.op, ": size '", item, "' is not NAME=VALUE (sizes: ", names,
                 ")");
      const std::string name = item.substr(0, eq);
      std::size_t d = 0;
      while (d < c.dim_names.size() && lower(c.dim_names[d]) != lower(name)) ++d;
      BRRR_CHECK(d < c.dim_names.size(), "kernel-lab ", c.op, " has no size '", name, "' (sizes: ", names, ")");
      dims[d] = parse_dim(c.op, item.substr(eq + 1));
    }
    return dims;
  }
  const std::vector<std::string> parts = split(text, "x,");
  BRRR_CHECK(parts.size() == 1 || parts.size() == c.dim_names.size(), "kernel-lab ", c.op, " takes ",
             c.dim_names.size(), c.dim_names.size() == 1 ? " size (" : " sizes (", names, "), not '", text, "'");
  Dims dims;
  for (std::size_t d = 0; d < c.dim_names.size(); ++d)
    dims.push_back(parse_dim(c.op, parts[parts.size() == 1 ? 0 : d]));  // one size: every dim
  return dims;
}

std::string size_string(const Case& c, const Dims& dims) {
  std::string s;
  for (std::size_t d = 0; d < dims.size() && d < c.dim_names.size(); ++d)
    s += (s.empty() ? "" : " ") + c.dim_names[d] + "=" + std::to_string(dims[d]);
  return s;
}

// ---------------------------------------------------------------------------------------------
// The peaks: the roofline's two numbers, measured here rather than read from a datasheet
//
// Bandwidth: copy a buffer much larger than any cache, device to device, and count each byte
// twice (read and written), as the ops' byte counts do. FLOP/s: float32 matmul at a size
// large enough to run at full speed, by cuBLAS when the device has it, else the device's
// default matmul (the registry's default is its fastest variant). On the emulator the numbers
// would describe the emulator, so no peak is measured there and no percentage is shown.

namespace {

// The median and the min of `repeats` timed calls of `work`, after `warmup` untimed ones.
struct Timing {
  double median_ms = 0, min_ms = 0;
  int runs = 0;
};

Timing time_calls(Target& target, const std::function<void()>& work, int warmup, int repeats,
                  double budget_seconds) {
  for (int i = 0; i < warmup; ++i) work();
  target.synchronize();
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    target.flush_cache();
    times.push_back(target.time_ms(work));
    // A slow variant (a naive kernel on a large size) stops early; three runs give a median.
    if (budget_seconds > 0 && times.size() >= 3 && seconds_since(start) > budget_seconds) break;
  }
  std::sort(times.begin(), times.end());
  Timing t;
  t.runs = static_cast<int>(times.size());
  t.min_ms = times.front();
  const std::size_t half = times.size() / 2;
  t.median_ms = times.size() % 2 ? times[half] : 0.5 * (times[half - 1] + times[half]);
  return t;
}

double bandwidth_peak(Target& target, bool gpu, std::string* how) {
  std::size_t bytes = gpu ? std::size_t{1} << 30 : std::size_t{256} << 20;
  Buffer a(target, bytes), b(target, bytes);
  target.copy_on_device(b.get(), a.get(), bytes);  // touch both: first-touch page faults are not bandwidth
  const Timing t = time_calls(target, [&] { target.copy_on_device(b.get(), a.get(), bytes); }, 2, gpu ? 20 : 10, 0);
  *how = format("%s of %s, read + write", gpu ? "device-to-device copy" : "parallel memcpy", bytes_text(bytes).c_str());
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e-3) / 1e9;
}

double flops_peak(Target& target, bool gpu, std::string* how) {
  const std::vector<Variant> matmuls = variants_of("matmul", target.type(), kFloat32);
  if (matmuls.empty()) {
    *how = "no float32 matmul on this device";
    return 0;
  }
  const Variant* best = &matmuls.front();  // highest priority
  for (const Variant& v : matmuls)
    if (v.name == "cublas") best = &v;
  const std::int64_t n = gpu ? 4096 : 2048;
  const Case& c = find_case("matmul");
  Problem p;
  p.dims = {n, n, n};
  Random random(1);
  c.make(p, random);  // random values: zeros would draw less power and run at a higher clock
  std::vector<std::unique_ptr<Buffer>> buffers;
  Args args;
  args.dims = p.dims;
  args.stream = target.stream();
  for (const Array& a : p.arrays) {
    buffers.push_back(std::make_unique<Buffer>(target, a.values.size() * sizeof(float)));
    target.upload(buffers.back()->get(), a.values.data(), a.values.size() * sizeof(float));
    args.names.push_back(a.name);
    args.pointers.push_back(buffers.back()->get());
  }
  const Timing t = time_calls(target, [&] { c.call_float(best->fn, args); }, 2, gpu ? 20 : 5, 0);
  *how = format("matmul '%s', %lld^3 float32", best->name.c_str(), static_cast<long long>(n));
  return c.flops(p.dims) / (t.median_ms * 1e-3) / 1e12;
}

}  // namespace

Peaks measure_peaks(LabDevice device, bool bandwidth, bool flops) {
  // Measured once per process and device: several sizes of one op share them.
  static std::map<std::pair<LabDevice, int>, std::pair<double, std::string>> measured;
  Peaks peaks;
  if (device == LabDevice::Emulator) {
    peaks.bandwidth_how = peaks.flops_how = "not measured on the emulator";
    return peaks;
  }
  Target target(device);
  if (target.emulated()) {  // --device cuda, with BRRR_CUDA_EMULATOR=1
    peaks.bandwidth_how = peaks.flops_how = "not measured on the emulator";
    return peaks;
  }
  const bool gpu = device == LabDevice::CUDA;
  if (bandwidth) {
    auto it = measured.find({device, 0});
    if (it == measured.end()) {
      std::string how;
      const double value = bandwidth_peak(target, gpu, &how);
      it = measured.insert({{device, 0}, {value, how}}).first;
    }
    std::tie(peaks.bandwidth_gbs, peaks.bandwidth_how) = it->second;
  }
  if (flops) {
    auto it = measured.find({device, 1});
    if (it == measured.end()) {
      std::string how;
      const double value = flops_peak(target, gpu, &how);
      it = measured.insert({{device, 1}, {value, how}}).first;
    }
    std::tie(peaks.tflops, peaks.flops_how) = it->second;
  }
  return peaks;
}

// ---------------------------------------------------------------------------------------------
// run(): the lab itself

bool Report::passed() const {
  for (const VariantResult& r : results)
    if (!r.passed) return false;
  return true;
}

std::vector<std::string> Report::failures() const {
  std::vector<std::string> lines;
  for (const VariantResult& r : results)
    if (!r.passed) lines.push_back(op + " variant '" + r.variant + "' on " + device + ": " + r.failure);
  return lines;
}

namespace {

// The reference's outputs, in double: one vector per compared array (empty for inputs).
std::vector<std::vector<double>> reference_outputs(const Case& c, const Problem& p, const Reference& ref) {
  Args args;
  args.dims = p.dims;
  std::vector<std::vector<double>> doubles(p.arrays.size());
  std::vector<std::vector<float>> floats(p.arrays.size());
  for (std::size_t i = 0; i < p.arrays.size(); ++i) {
    const Array& a = p.arrays[i];
    args.names.push_back(a.name);
    if (a.index) {
      args.pointers.push_back(const_cast<std::int32_t*>(a.indices.data()));
    } else if (ref.dtype == kFloat64) {
      doubles[i] = to_double(a.values);
      args.pointers.push_back(doubles[i].data());
    } else {
      floats[i] = a.values;
      args.pointers.push_back(floats[i].data());
    }
  }
  if (ref.dtype == kFloat64) c.call_double(ref.fn, args);
  else c.call_float(ref.fn, args);
  std::vector<std::vector<double>> out(p.arrays.size());
  for (std::size_t i = 0; i < p.arrays.size(); ++i) {
    if (!p.arrays[i].compared()) continue;
    out[i] = ref.dtype == kFloat64 ? std::move(doubles[i]) : to_double(floats[i]);
  }
  return out;
}

// The device's copy of a problem: one buffer per array, which upload() (re)fills from the
// problem's values, so every variant starts from the same inputs and NaN-filled outputs.
struct DeviceProblem {
  std::vector<std::unique_ptr<Buffer>> buffers;
  Args args;

  DeviceProblem(Target& target, const Problem& p) {
    args.dims = p.dims;
    args.stream = target.stream();
    for (const Array& a : p.arrays) {
      const std::size_t bytes = a.index ? a.indices.size() * sizeof(std::int32_t) : a.values.size() * sizeof(float);
      buffers.push_back(std::make_unique<Buffer>(target, bytes));
      args.names.push_back(a.name);
      args.pointers.push_back(buffers.back()->get());
    }
  }
  void upload(Target& target, const Problem& p) {
    for (std::size_t i = 0; i < p.arrays.size(); ++i) {
      const Array& a = p.arrays[i];
      if (a.index) target.upload(buffers[i]->get(), a.indices.data(), a.indices.size() * sizeof(std::int32_t));
      else target.upload(buffers[i]->get(), a.values.data(), a.values.size() * sizeof(float));
    }
  }
};

void print_table(std::FILE* out, const Case& c, const Report& report, bool timed) {
  const char* unit = c.report_flops ? "TFLOP/s" : "GB/s";
  std::size_t width = 7;
  for (const VariantResult& r : report.results) width = std::max(width, r.variant.size() + 2);
  const int w = static_cast<int>(width);
  if (timed)
    say(out, "\n%-*s | %9s | %9s | %9s | %9s | %s\n", w, "variant", "time (ms)", "min (ms)", unit, "% of peak",
        "check (max rel err)");
  else
    say(out, "\n%-*s | %s\n", w, "variant", "check (max rel err)");
  for (const VariantResult& r : report.results) {
    const std::string name = r.variant + (r.is_default ? " *" : "");
    const std::string check = !r.passed      ? (r.checked ? format("FAIL %.2e", r.max_rel_error) : "FAIL")
                              : r.not_written ? "not written yet (an exercise stub)"
                              : r.checked     ? format("ok %.2e", r.max_rel_error)
                                              : "unchecked (no reference)";
    if (!timed) {
      say(out, "%-*s | %s\n", w, name.c_str(), check.c_str());
      continue;
    }
    std::string time = "-", min = "-", rate = "-", percent = "-";
    if (r.timed) {
      time = format("%.4f", r.median_ms);
      min = format("%.4f", r.min_ms);
      rate = r.rate >= 100 ? format("%.0f", r.rate) : r.rate >= 1 ? format("%.2f", r.rate) : format("%.3g", r.rate);
      if (r.percent_of_peak >= 0) percent = format("%.1f %%", r.percent_of_peak);
    }
    say(out, "%-*s | %9s | %9s | %9s | %9s | %s\n", w, name.c_str(), time.c_str(), min.c_str(), rate.c_str(),
        percent.c_str(), check.c_str());
  }
  say(out, "* the default variant (what the registry selects for float32)\n");
}

// The check of one variant: one call on fresh inputs, every output compared with the
// reference (or, with none, checked for NaN and inf).
void check_variant(VariantResult& r, Target& target, const Case& c, const Problem& problem, DeviceProblem& device,
                   AnyFn fn, const std::vector<std::vector<double>>& expected, double tolerance, bool asked_by_name,
                   std::FILE* out) {
  const bool on_gpu = target.type() == DeviceType::CUDA;
  std::vector<std::vector<float>> got(problem.arrays.size());
  try {
    device.upload(target, problem);
    c.call_float(fn, device.args);
    target.synchronize();
    for (std::size_t i = 0; i < problem.arrays.size(); ++i) {
      if (!problem.arrays[i].compared()) continue;
      got[i].resize(problem.arrays[i].values.size());
      target.download(got[i].data(), device.buffers[i]->get(), got[i].size() * sizeof(float));
    }
  } catch (const std::exception& e) {
    // An exercise stub (variant "student") that is not written yet is not a failing kernel:
    // among all the variants it is listed and passed over; asked for by name, it fails.
    r.failure = std::string("the call threw: ") + e.what();
    if (!asked_by_name && std::strstr(e.what(), kernels::kNotWrittenYet)) {
      r.not_written = true;
      r.checked = false;
      say(out, "  %s\n", r.failure.c_str());
    } else {
      r.passed = false;
      say(out, "  FAIL: %s\n", r.failure.c_str());
    }
    return;
  }
  bool printed_pairs = false;
  for (std::size_t i = 0; i < problem.arrays.size(); ++i) {
    const Array& a = problem.arrays[i];
    if (!a.compared()) continue;
    const std::vector<double>* want = r.checked ? &expected[i] : nullptr;
    if (want && !printed_pairs) {  // the first few pairs of the first output, as llm.c prints them
      printed_pairs = true;
      for (std::size_t k = 0; k < std::min<std::size_t>(5, got[i].size()); ++k)
        say(out, "  %s[%zu]  %s %14.8f  %s %14.8f\n", a.name.c_str(), k, on_gpu ? "cpu" : "ref", (*want)[k],
            on_gpu ? "gpu" : "cpu", static_cast<double>(got[i][k]));
    }
    const Comparison cmp = compare(a.name, got[i], want, tolerance);
    r.max_abs_error = std::max(r.max_abs_error, cmp.max_abs);
    r.max_rel_error = std::max(r.max_rel_error, cmp.max_rel);
    if (cmp.bad && r.passed) {
      r.passed = false;
      r.failure = cmp.first_failure + format(" (%lld of %zu elements of %s fail)", static_cast<long long>(cmp.bad),
                                             got[i].size(), a.name.c_str());
    }
  }
  if (!r.passed)
    say(out, "  FAIL: %s\n", r.failure.c_str());
  else if (r.checked)
    say(out, "  max abs err %.3e, max rel err %.3e (tolerance %.1e): ok\n", r.max_abs_error, r.max_rel_error,
        tolerance);
  else
    say(out, "  no reference: every output is finite, the values are unchecked\n");
}

// The timing of one variant that passed: warm-up, then repeats with the cache flushed.
void time_variant(VariantResult& r, Target& target, const Case& c, DeviceProblem& device, AnyFn fn,
                  const Peaks& peaks, int repeats, double budget_seconds, std::FILE* out) {
  const bool gpu = target.type() == DeviceType::CUDA && !target.emulated();
  const Timing t = time_calls(target, [&] { c.call_float(fn, device.args); }, gpu ? 2 : 0, repeats, budget_seconds);
  r.timed = true;
  r.median_ms = t.median_ms;
  r.min_ms = t.min_ms;
  const double seconds = t.median_ms * 1e-3;
  r.rate = c.report_flops ? c.flops(device.args.dims) / seconds / 1e12 : c.bytes(device.args.dims) / seconds / 1e9;
  const double peak = c.report_flops ? peaks.tflops : peaks.bandwidth_gbs;
  if (peak > 0) r.percent_of_peak = 100.0 * r.rate / peak;
  say(out, "  %.4f ms median, %.4f ms min over %d runs\n", t.median_ms, t.min_ms, t.runs);
}

void print_peak(std::FILE* out, const Case& c, const Peaks& peaks) {
  if (c.report_flops && peaks.tflops > 0)
    say(out, "peak: %.2f TFLOP/s (%s)\n", peaks.tflops, peaks.flops_how.c_str());
  else if (!c.report_flops && peaks.bandwidth_gbs > 0)
    say(out, "peak: %.1f GB/s (%s)\n", peaks.bandwidth_gbs, peaks.bandwidth_how.c_str());
  else
    say(out, "peak: %s\n", (c.report_flops ? peaks.flops_how : peaks.bandwidth_how).c_str());
}

}  // namespace

// The reference for a variant that rounds its inputs to bfloat16 (VariantMeta::bf16_inputs)
// is computed on the inputs rounded the same way: that rounding is the dtype's (the caller
// chose bf16), not the kernel's error, and what remains is the kernel's own arithmetic (its
// bf16 intermediates, float32 sums). Against the float32 inputs' reference, bf16_mma attention
// failed 3e-2 at T = 1024 on an H100 on a few thousand of 25 million outputs: scores of q.k
// with bf16 inputs move by ~0.4%, which moves the softmax weights of a long row by as much.
static float round_to_bf16(float x) {  // round to nearest even, as __float2bfloat16 does
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return x;  // inf and NaN as they are
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

Report run(const Case& c, const Options& options) {
  std::FILE* out = options.out;
  Target target(options.device);  // first: --device emulator must switch before the registry is used
  Report report;
  report.op = c.op;
  report.device = std::string(target.registry_name()) + (target.emulated() ? " (emulator)" : "");
  report.seed = options.seed;
  const Dims dims = options.size.empty() ? c.default_size(options.device) : options.size;
  BRRR_CHECK(dims.size() == c.dim_names.size(), "kernel-lab ", c.op, ": ", dims.size(), " sizes given, ",
             c.dim_names.size(), " expected");
  report.size = size_string(c, dims);
  report.dims = dims;
  report.unit = c.report_flops ? "TFLOP/s" : "GB/s";
  const double tolerance = options.tolerance >= 0 ? options.tolerance : c.tolerance;
  say(out, "kernel-lab %s: %s\n", c.op.c_str(), c.what.c_str());
  say(out, "device: %s\n", target.describe().c_str());

  // The variants to run: every float32 registration of the op on the device, or one.
  std::vector<Variant> variants = variants_of(c.op, target.type(), kFloat32);
  if (variants.empty()) {
    report.note = "no variant of " + c.op + " on " + report.device;
    say(out, "%s (nothing to check or time)\n", report.note.c_str());
    return report;
  }
  if (options.variant != "all") {
    std::string names;
    for (const Variant& v : variants) names += (names.empty() ? "" : ", ") + v.name;
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const Variant& v) { return v.name == options.variant; });
    BRRR_CHECK(it != variants.end(), "kernel-lab: ", c.op, " has no variant '", options.variant, "' on ",
               report.device, " (variants: ", names, ")");
    variants = {*it};
  }

  // The inputs, the reference's outputs, and the peaks.
  Problem problem;
  problem.dims = dims;
  Random random(options.seed);
  c.make(problem, random);
  say(out, "size: %s, seed %llu, %s moved per call", report.size.c_str(),
      static_cast<unsigned long long>(options.seed), bytes_text(c.bytes(dims)).c_str());
  if (c.flops) say(out, ", %.3g GFLOP", c.flops(dims) / 1e9);
  say(out, "\n");
  const Reference ref = find_reference(c);
  report.reference = ref.fn ? ref.describe() : "";
  if (ref.fn)
    say(out, "reference: %s\n", ref.describe().c_str());
  else
    say(out, "reference: none (no CPU kernel of %s is registered): outputs are only checked for NaN and inf\n",
        c.op.c_str());
  std::vector<std::vector<double>> expected, expected_bf16;
  if (ref.fn) expected = reference_outputs(c, problem, ref);
  if (ref.fn && std::any_of(variants.begin(), variants.end(),
                            [](const Variant& v) { return v.meta.bf16_inputs; })) {
    Problem rounded = problem;
    for (Array& a : rounded.arrays)
      if (a.role == Array::kInput && !a.index)
        for (float& x : a.values) x = round_to_bf16(x);
    expected_bf16 = reference_outputs(c, rounded, ref);
    say(out, "bf16 variants are checked against the reference on their inputs rounded to bfloat16\n");
  }
  Peaks peaks;
  if (options.time) {
    peaks = measure_peaks(options.device, !c.report_flops, c.report_flops);
    report.peak = c.report_flops ? peaks.tflops : peaks.bandwidth_gbs;
    print_peak(out, c, peaks);
  }

  // Each variant: check, then time what passed (a wrong kernel's speed means nothing).
  DeviceProblem device(target, problem);
  const bool gpu = target.type() == DeviceType::CUDA && !target.emulated();
  const int repeats = options.repeat > 0 ? options.repeat : gpu ? 50 : options.device == LabDevice::CPU ? 10 : 3;
  const double budget_seconds = options.repeat > 0 ? 0.0 : 2.0;  // an explicit --repeat is obeyed
  for (const Variant& v : variants) {
    VariantResult r;
    r.variant = v.name;
    r.is_default = v.is_default;
    r.checked = ref.fn != nullptr;
    say(out, "\n%s%s:\n", v.name.c_str(), v.is_default ? " (default)" : "");
    check_variant(r, target, c, problem, device, v.fn, v.meta.bf16_inputs ? expected_bf16 : expected,
                  options.tolerance >= 0 ? tolerance : std::max(tolerance, v.meta.tolerance),
                  options.variant != "all", out);
    if (options.time && r.passed && !r.not_written)
      time_variant(r, target, c, device, v.fn, peaks, repeats, budget_seconds, out);
    report.results.push_back(r);
  }

  print_table(out, c, report, options.time);
  if (options.time && target.emulated())
    say(out, "%% of peak: not shown on the emulator (its times measure the emulator, not a GPU)\n");
  return report;
}

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) out += format("\\u%04x", ch);
    else out += ch;
  }
  return out + "\"";
}

}  // namespace

std::string json_lines(const Report& report) {
  std::string dims;
  for (std::int64_t d : report.dims) {
    if (!dims.empty()) dims += ',';
    dims += std::to_string(d);
  }
  std::string lines;
  for (const VariantResult& r : report.results) {
    lines += format("{\"op\":%s,\"device\":%s,\"size\":%s,\"dims\":[%s],\"variant\":%s,\"default\":%s,"
                    "\"passed\":%s,\"checked\":%s,\"max_rel_error\":%.4g",
                    json_string(report.op).c_str(), json_string(report.device).c_str(),
                    json_string(report.size).c_str(), dims.c_str(), json_string(r.variant).c_str(),
                    r.is_default ? "true" : "false", r.passed ? "true" : "false", r.checked ? "true" : "false",
                    r.max_rel_error);
    if (r.timed)
      lines += format(",\"median_ms\":%.6g,\"min_ms\":%.6g,\"rate\":%.6g,\"unit\":%s,\"peak\":%.6g,"
                      "\"percent_of_peak\":%.4g",
                      r.median_ms, r.min_ms, r.rate, json_string(report.unit).c_str(), report.peak,
                      r.percent_of_peak);
    lines += "}\n";
  }
  return lines;
}

}  // namespace brrr::lab
