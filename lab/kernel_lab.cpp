// lab/kernel_lab.cpp: the kernel lab's machinery: problems and random inputs, the check, the
// device the variants run on (memory, clock, cache flush), finite differences, the timer, the
// peaks, and run(), which puts them together. Chapter 11 (the roofline and the kernel lab).
// Read before: kernel_lab.h. Read next: the table, cases_elementwise.cpp to cases_optim.cpp
// (one file per chapter), then cli_kernel_lab.cpp.
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
#include <optional>
#include <set>
#include <tuple>

#include "brrr/bfloat16.h"
#include "brrr/cuda.h"
#include "brrr/error.h"
#include "brrr/kernels.h"
#include "brrr/ops.h"
#include "brrr/strings.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"
#include "lab/cases.h"

namespace brrr::lab {

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

}  // namespace

// ---------------------------------------------------------------------------------------------
// Devices, modes, problems, random inputs

LabDevice parse_device(const std::string& name) {
  if (name == "cpu") return LabDevice::CPU;
  if (name == "cuda") return LabDevice::CUDA;
  if (name == "emulator") return LabDevice::Emulator;
  detail::fail("kernel-lab: unknown device '", name, "' (devices: cpu, cuda, emulator)");
}

Mode parse_mode(const std::string& name) {
  if (name == "check") return Mode::Check;
  if (name == "grad") return Mode::Grad;
  if (name == "perf") return Mode::Perf;
  detail::fail("kernel-lab: unknown mode '", name, "' (modes: check, grad, perf)");
}

const char* mode_name(Mode mode) {
  return mode == Mode::Check ? "check" : mode == Mode::Grad ? "grad" : "perf";
}

void Problem::input(const std::string& name, const std::vector<float>& values, Array::Type type) {
  Array a;
  a.name = name;
  a.type = type;
  a.values.assign(values.begin(), values.end());
  arrays.push_back(std::move(a));
}

void Problem::inout(const std::string& name, const std::vector<float>& values) {
  input(name, values);
  arrays.back().role = Array::kInOut;
}

void Problem::indices(const std::string& name, const std::vector<std::int32_t>& values) {
  Array a;
  a.name = name;
  a.type = Array::kInt32;
  a.values.assign(values.begin(), values.end());
  arrays.push_back(std::move(a));
}

void Problem::output(const std::string& name, std::int64_t count, Array::Type type) {
  Array a;
  a.name = name;
  a.role = Array::kOutput;
  a.type = type;
  const bool floating = type == Array::kFloat || type == Array::kFloat32;
  const double poison = floating ? std::numeric_limits<double>::quiet_NaN() : -1.0;
  a.values.assign(static_cast<std::size_t>(count), poison);
  arrays.push_back(std::move(a));
}

Array& Problem::array(const std::string& name) {
  for (Array& a : arrays)
    if (a.name == name) return a;
  detail::fail("kernel-lab: the problem has no array '", name, "'");
}

const Array& Problem::operator[](const std::string& name) const { return const_cast<Problem*>(this)->array(name); }
const std::vector<double>& Problem::in(const std::string& name) const { return (*this)[name].values; }
std::vector<double>& Problem::out(const std::string& name) { return array(name).values; }

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

Tensor Args::tensor(const char* name, const Shape& shape, DType dtype) const {
  Tensor t = empty(shape, TensorOptions().dtype(dtype).device(device));
  const std::size_t bytes = static_cast<std::size_t>(t.numel()) * dtype_size(dtype);
  if (runtime) runtime->copy(t.raw_data(), get(name), bytes, gpu::CopyKind::DeviceToDevice);
  else std::memcpy(t.raw_data(), get(name), bytes);
  return t;
}

void Args::store(const char* name, const Tensor& t) const {
  const Tensor c = t.contiguous();
  const std::size_t bytes = static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype());
  if (runtime) runtime->copy(get(name), c.raw_data(), bytes, gpu::CopyKind::DeviceToDevice);
  else std::memcpy(get(name), c.raw_data(), bytes);
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
// NaN, so an element the kernel never writes fails too. Index outputs must match exactly.

namespace {

struct Comparison {
  double max_abs = 0, max_rel = 0;
  std::int64_t bad = 0;       // elements that failed
  std::string first_failure;  // the first of them
};

// The mean magnitude of the finite values of a reference.
double mean_magnitude(const std::vector<double>& ref) {
  double sum = 0;
  for (double r : ref) sum += std::isfinite(r) ? std::fabs(r) : 0.0;
  return ref.empty() ? 0.0 : sum / static_cast<double>(ref.size());
}

// `zero_scale`: what an error is relative to where the whole reference is 0 (no scale of its
// own): the mean magnitude of the op's other outputs.
Comparison compare(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref,
                   double tolerance, double zero_scale) {
  Comparison c;
  const std::size_t n = got.size();
  double scale = mean_magnitude(ref);
  if (scale == 0.0) scale = zero_scale;
  scale = std::max(scale, std::numeric_limits<double>::min());
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got[i], r = ref[i];
    std::string why;
    if (!std::isfinite(g)) {
      if (g != r) why = format("%s[%zu] = %g (reference %.9g)", name.c_str(), i, g, r);
    } else {
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
    return a.type == Array::kInt32 || a.type == Array::kFloat32 ? 4 : a.type == Array::kInt64 ? 8 : dtype_size(dtype);
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
      else if (dtype == kFloat64) put(bytes, j, v);
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
      else if (dtype == kFloat64) values[j] = get<double>(bytes, j);
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

// Every variant of op on device for dtype, highest priority (the fastest) first.
std::vector<Variant> variants_of(const std::string& op, DeviceType device, DType dtype) {
  ops::register_op_variants();  // the framework's ops built from ops join the registry
  std::vector<Variant> found;
  for (const kernels::VariantInfo& info : kernels::variants(op))
    if (info.device.type == device && info.dtype == dtype) found.push_back({info.variant, info.selected, info.meta});
  return found;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The table: one file per chapter (cases_*.cpp), in course order

const std::vector<Case>& cases() {
  static const std::vector<Case> table = [] {
    std::vector<Case> all;
    for (auto part : {elementwise_cases, random_cases, reduction_cases, matmul_cases, nn_cases, conv_cases, attention_cases,
                      optim_cases})
      for (Case& c : part()) all.push_back(std::move(c));
    return all;
  }();
  return table;
}

const Case& find_case(const std::string& name) {
  std::vector<std::string> known;
  for (const Case& c : cases())
    if (c.name == name) return c;
  for (const Case& c : cases()) {
    if (c.op_name() == name) return c;
    known.push_back(c.name);
  }
  detail::fail("kernel-lab: unknown op '", name, "' (ops: ", join(known), ")");
}

std::vector<std::string> ops_without_a_case() {
  ops::register_op_variants();
  std::set<std::string> covered;
  for (const Case& c : cases()) covered.insert(c.op_name());
  std::vector<std::string> missing;
  for (const std::string& op : kernels::ops())
    if (!covered.count(op) && op.rfind("lab_test_", 0) != 0) missing.push_back(op);  // tests' own ops aside
  return missing;
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
  const std::string names = join(c.dim_names);
  if (text.find('=') != std::string::npos) {  // "C=1024,N=64": by name, the rest from defaults
    Dims dims = defaults;
    for (const std::string& item : split(text, ", ")) {
      if (item.empty()) continue;
      const std::size_t eq = item.find('=');
      BRRR_CHECK(eq != std::string::npos, "kernel-lab ", c.name, ": size '", item, "' is not NAME=VALUE (sizes: ", names,
                 ")");
      const std::string name = item.substr(0, eq);
      std::size_t d = 0;
      while (d < c.dim_names.size() && lower(c.dim_names[d]) != lower(name)) ++d;
      BRRR_CHECK(d < c.dim_names.size(), "kernel-lab ", c.name, " has no size '", name, "' (sizes: ", names, ")");
      dims[d] = parse_dim(c.name, item.substr(eq + 1));
    }
    return dims;
  }
  const std::vector<std::string> parts = split(text, "x,");
  BRRR_CHECK(parts.size() == 1 || parts.size() == c.dim_names.size(), "kernel-lab ", c.name, " takes ",
             c.dim_names.size(), c.dim_names.size() == 1 ? " size (" : " sizes (", names, "), not '", text, "'");
  Dims dims;
  for (std::size_t d = 0; d < c.dim_names.size(); ++d)
    dims.push_back(parse_dim(c.name, parts[parts.size() == 1 ? 0 : d]));  // one size: every dim
  return dims;
}

std::string size_string(const Case& c, const Dims& dims) {
  std::vector<std::string> parts;
  for (std::size_t d = 0; d < dims.size() && d < c.dim_names.size(); ++d)
    parts.push_back(c.dim_names[d] + "=" + std::to_string(dims[d]));
  return join(parts, " ");
}

// ---------------------------------------------------------------------------------------------
// The peaks: the roofline's two numbers, measured here rather than read from a datasheet
//
// Bandwidth: copy a buffer much larger than any cache, device to device, and count each byte
// twice (read and written), as the ops' byte counts do. FLOP/s: float32 matmul at a size
// large enough to run at full speed, by cuBLAS when the device has it, else the device's
// default matmul (the registry's default is its fastest variant); for a case in bf16
// arithmetic (Case::peak_op), the same with matmul_bf16, whose products come twice as fast. On the emulator the numbers
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

double flops_peak(Target& target, bool gpu, const std::string& op, std::string* how) {
  const std::vector<Variant> matmuls = variants_of(op, target.type(), kFloat32);
  if (matmuls.empty()) {
    *how = "no " + op + " on this device";
    return 0;
  }
  const Variant* best = &matmuls.front();  // highest priority
  for (const Variant& v : matmuls)
    if (v.name == "cublas") best = &v;
  const std::int64_t n = gpu ? 4096 : 2048;
  const Case& c = find_case(op);
  Problem p;
  p.dims = {n, n, n};
  Random random(1);
  c.make(p, random);  // random values: zeros would draw less power and run at a higher clock
  DeviceProblem device(target, p, false);
  device.upload(target, p);
  const Bound kernel = c.call.bind(target.type(), kFloat32, best->name);
  const Timing t = time_calls(target, [&] { kernel(device.args); }, 2, gpu ? 20 : 5, 0);
  *how = format("%s '%s', %lld^3%s", op.c_str(), best->name.c_str(), static_cast<long long>(n),
                op == "matmul" ? " float32" : "");
  return c.flops(p.dims) / (t.median_ms * 1e-3) / 1e12;
}

}  // namespace

Peaks measure_peaks(LabDevice device, bool bandwidth, bool flops, const std::string& flops_op) {
  // Measured once per process, device and op: several sizes of one op share them.
  static std::map<std::pair<LabDevice, std::string>, std::pair<double, std::string>> measured;
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
    auto it = measured.find({device, ""});
    if (it == measured.end()) {
      std::string how;
      const double value = bandwidth_peak(target, gpu, &how);
      it = measured.insert({{device, ""}, {value, how}}).first;
    }
    std::tie(peaks.bandwidth_gbs, peaks.bandwidth_how) = it->second;
  }
  if (flops) {
    auto it = measured.find({device, flops_op});
    if (it == measured.end()) {
      std::string how;
      const double value = flops_peak(target, gpu, flops_op, &how);
      it = measured.insert({{device, flops_op}, {value, how}}).first;
    }
    std::tie(peaks.tflops, peaks.flops_how) = it->second;
  }
  return peaks;
}

// ---------------------------------------------------------------------------------------------
// Finite differences (grad mode, for a backward kernel)
//
// A backward kernel computes d loss / d input for loss = sum(dout * forward(inputs)). The
// case's loss() is that sum, from the forward's float64 reference. Central differences,
//
//   d loss / d x[j] ~ (loss(x + h e_j) - loss(x - h e_j)) / 2h,   h = 1e-5 max(1, |x[j]|),
//
// are good to about h^2 (truncation) plus 1e-16 |loss| / h (rounding): 1e-9 or so here, far
// below float32's rounding, and they know nothing of how the backward was derived.

namespace {

std::vector<double> numeric_gradient(const Case& c, Problem p, const std::string& input) {
  std::vector<double>& x = p.array(input).values;
  std::vector<double> g(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double saved = x[j], h = 1e-5 * std::max(1.0, std::fabs(saved));
    x[j] = saved + h;
    const double plus = c.loss(p);
    x[j] = saved - h;
    const double minus = c.loss(p);
    x[j] = saved;
    g[j] = (plus - minus) / (2 * h);
  }
  return g;
}

}  // namespace

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
  say(out, "* the default variant (what the registry selects in this dtype)\n");
}

// Runs one variant on the problem: upload, call, download the compared outputs. An exercise
// stub that is not written yet (variant "student") throws "not written yet": among all the
// variants it is listed and passed over; asked for by name, it fails.
bool call_variant(VariantResult& r, Target& target, const Problem& problem, DeviceProblem& device, const Bound& kernel,
                  bool asked_by_name, std::FILE* out, std::vector<std::vector<double>>* got) {
  try {
    device.upload(target, problem);
    kernel(device.args);
    target.synchronize();
    got->assign(problem.arrays.size(), {});
    for (std::size_t i = 0; i < problem.arrays.size(); ++i)
      if (problem.arrays[i].compared()) (*got)[i] = device.download(target, problem, i);
    return true;
  } catch (const std::exception& e) {
    r.failure = std::string("the call threw: ") + e.what();
    if (!asked_by_name && std::strstr(e.what(), kernels::kNotWrittenYet)) {
      r.not_written = true;
      r.checked = false;
      say(out, "  %s\n", r.failure.c_str());
    } else {
      r.passed = false;
      say(out, "  FAIL: %s\n", r.failure.c_str());
    }
    return false;
  }
}

// Compares the outputs named in `which` (all compared arrays when empty) with `expected`.
void compare_outputs(VariantResult& r, const Problem& problem, const std::vector<std::vector<double>>& got,
                     const std::vector<std::vector<double>>& expected, double tolerance,
                     const std::vector<std::string>& which, bool on_gpu, std::FILE* out) {
  bool printed_pairs = false;
  r.checked = true;
  // An output that is exactly 0 (attention's dq and dk at T = 1: one key, weight 1, nothing
  // through the softmax) is judged against the other outputs' scale: a kernel whose sums run
  // in another order (tensor cores, which truncate) leaves ~1e-8 there, which no relative
  // error to 0 can pass.
  double outputs_scale = 0.0;
  int outputs = 0;
  for (std::size_t i = 0; i < problem.arrays.size(); ++i)
    if (problem.arrays[i].compared() && !expected[i].empty()) {
      outputs_scale += mean_magnitude(expected[i]);
      ++outputs;
    }
  if (outputs) outputs_scale /= outputs;
  for (std::size_t i = 0; i < problem.arrays.size(); ++i) {
    const Array& a = problem.arrays[i];
    if (!a.compared() || expected[i].empty()) continue;
    if (!which.empty() && std::find(which.begin(), which.end(), a.name) == which.end()) continue;
    if (!printed_pairs) {  // the first few pairs of the first output, as llm.c prints them
      printed_pairs = true;
      for (std::size_t k = 0; k < std::min<std::size_t>(5, got[i].size()); ++k)
        say(out, "  %s[%zu]  %s %14.8f  %s %14.8f\n", a.name.c_str(), k, "ref", expected[i][k],
            on_gpu ? "gpu" : "cpu", got[i][k]);
    }
    const bool floating = a.type == Array::kFloat || a.type == Array::kFloat32;
    const Comparison cmp = compare(a.name, got[i], expected[i], floating ? tolerance : 0.0, outputs_scale);
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
  else
    say(out, "  max abs err %.3e, max rel err %.3e (tolerance %.1e): ok\n", r.max_abs_error, r.max_rel_error,
        tolerance);
}

// The expected outputs: the reference on the problem (or on its bf16-rounded inputs).
std::vector<std::vector<double>> reference_outputs(const Case& c, Problem p) {
  c.reference(p);
  std::vector<std::vector<double>> expected(p.arrays.size());
  for (std::size_t i = 0; i < p.arrays.size(); ++i)
    if (p.arrays[i].compared()) expected[i] = std::move(p.arrays[i].values);
  return expected;
}

// The expected gradients: finite differences of the case's loss (added to what the output
// held for a kernel that accumulates).
std::vector<std::vector<double>> gradient_outputs(const Case& c, const Problem& p) {
  std::vector<std::vector<double>> expected(p.arrays.size());
  for (const Grad& g : c.grads)
    for (std::size_t i = 0; i < p.arrays.size(); ++i) {
      if (p.arrays[i].name != g.output) continue;
      expected[i] = numeric_gradient(c, p, g.input);
      if (g.accumulates)
        for (std::size_t j = 0; j < expected[i].size(); ++j) expected[i][j] += p.arrays[i].values[j];
    }
  return expected;
}

}  // namespace

double traffic_bytes(const Case& c, const Problem& problem) {
  double stored = 0.0, as_float32 = 0.0;
  for (const Array& a : problem.arrays) {
    const auto n = static_cast<double>(a.values.size());
    stored += n * static_cast<double>(DeviceProblem::bytes_of(a, problem.dtype));
    as_float32 += n * static_cast<double>(DeviceProblem::bytes_of(a, kFloat32));
  }
  const double bytes = c.bytes(problem.dims);
  return as_float32 > 0.0 ? bytes * stored / as_float32 : bytes;
}

namespace {

// The timing of one variant that passed: warm-up, then repeats with the cache flushed.
// `traffic`: the bytes of one call (traffic_bytes).
void time_variant(VariantResult& r, Target& target, const Case& c, double traffic, DeviceProblem& device,
                  const Bound& kernel, const Peaks& peaks, int repeats, double budget_seconds, std::FILE* out) {
  const bool gpu = target.type() == DeviceType::CUDA && !target.emulated();
  const Timing t = time_calls(target, [&] { kernel(device.args); }, gpu ? 2 : 0, repeats, budget_seconds);
  r.timed = true;
  r.median_ms = t.median_ms;
  r.min_ms = t.min_ms;
  const double seconds = t.median_ms * 1e-3;
  r.rate = c.report_flops ? c.flops(device.args.dims) / seconds / 1e12 : traffic / seconds / 1e9;
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
// The rounding is brrr::round_to_bf16 (brrr/bfloat16.h): to nearest even, as __float2bfloat16_rn.

Report run(const Case& c, const Options& options) {
  std::FILE* out = options.out;
  Target target(options.device);  // first: --device emulator must switch before the registry is used
  Report report;
  report.op = c.name;
  report.mode = options.mode;
  report.device = std::string(target.registry_name()) + (target.emulated() ? " (emulator)" : "");
  report.seed = options.seed;
  const bool grad = options.mode == Mode::Grad;
  const Dims dims = !options.size.empty()              ? options.size
                    : grad && !c.grad_shape.empty()    ? c.grad_shape
                                                       : c.default_size(options.device);
  BRRR_CHECK(dims.size() == c.dim_names.size(), "kernel-lab ", c.name, ": ", dims.size(), " sizes given, ",
             c.dim_names.size(), " expected");
  report.size = size_string(c, dims);
  report.dims = dims;
  report.unit = c.report_flops ? "TFLOP/s" : "GB/s";
  const bool f64 = options.dtype == kFloat64, in_bf16 = options.dtype == kBFloat16;
  const double case_tolerance = f64 ? c.tolerance64 : in_bf16 ? c.tolerance_bf16 : c.tolerance;
  // Finite differences are good to about 1e-9 (see above): a float64 gradient is held to 1e-6.
  const double tolerance = options.tolerance >= 0 ? options.tolerance
                           : grad                 ? std::max(case_tolerance, 1e-6)
                                                  : case_tolerance;
  say(out, "kernel-lab %s: %s\n", c.name.c_str(), c.what.c_str());
  say(out, "device: %s\n", target.describe().c_str());

  if (grad && in_bf16) {
    report.note = "grad mode checks float32 and float64 kernels (finite differences need the precision)";
    say(out, "mode grad: %s\n", report.note.c_str());
    return report;
  }
  if (grad && !c.has_grad()) {
    report.note = c.name + " has no backward of its own to check";
    say(out, "mode grad: %s (check mode checks its outputs)\n", report.note.c_str());
    return report;
  }

  // The variants to run: every registration of the op on the device in the dtype, or one.
  const DType registry_dtype = c.call.one_dtype ? c.call.dtype : options.dtype;
  if (c.call.one_dtype && is_floating_point(c.call.dtype) && c.call.dtype != options.dtype) {
    // An op whose data has one floating dtype (matmul_bf16: float32) has nothing in another.
    report.note = c.op_name() + " takes " + dtype_name(c.call.dtype) + " data only";
    say(out, "%s (nothing to check or time in %s)\n", report.note.c_str(), dtype_name(options.dtype));
    return report;
  }
  std::vector<Variant> variants = variants_of(c.op_name(), target.type(), registry_dtype);
  if (variants.empty()) {
    report.note = "no variant of " + c.op_name() + " on " + report.device + (f64 ? " in float64" : "");
    say(out, "%s (nothing to check or time)\n", report.note.c_str());
    return report;
  }
  if (options.variant != "all") {
    std::vector<std::string> names;
    for (const Variant& v : variants) names.push_back(v.name);
    auto it = std::find_if(variants.begin(), variants.end(),
                           [&](const Variant& v) { return v.name == options.variant; });
    BRRR_CHECK(it != variants.end(), "kernel-lab: ", c.name, " has no variant '", options.variant, "' on ",
               report.device, " (variants: ", join(names), ")");
    variants = {*it};
  }

  // An op built from ops: grad mode is brrr's gradcheck on each variant, in float64.
  if (grad && c.gradcheck) {
    report.reference = "finite differences (brrr::gradcheck, float64)";
    say(out, "mode grad: brrr::gradcheck of each variant in float64 (autograd against finite differences)\n");
    const Device device = target.type() == DeviceType::CUDA ? Device::cuda() : kCPU;
    for (const Variant& v : variants) {
      VariantResult r;
      r.variant = v.name;
      r.is_default = v.is_default;
      r.checked = true;
      say(out, "\n%s%s:\n", v.name.c_str(), v.is_default ? " (default)" : "");
      const GradcheckResult g = c.gradcheck(v.name, device);
      r.max_abs_error = g.max_abs_error;
      r.max_rel_error = g.max_rel_error;
      r.passed = g.ok;
      if (!g.ok) r.failure = "gradcheck: " + g.message;
      say(out, "  %s (max abs err %.3e)\n", g.ok ? "ok" : r.failure.c_str(), g.max_abs_error);
      report.results.push_back(r);
    }
    print_table(out, c, report, false);
    return report;
  }

  // The inputs and what the outputs should be.
  Problem problem;
  problem.dims = dims;
  problem.dtype = options.dtype;
  Random random(options.seed);
  c.make(problem, random);
  if (in_bf16)  // the data are bf16: the kernels and the reference see the inputs rounded to it
    for (Array& a : problem.arrays)
      if (a.type == Array::kFloat)
        for (double& x : a.values) x = round_to_bf16(static_cast<float>(x));
  const double traffic = traffic_bytes(c, problem);
  say(out, "size: %s, seed %llu, %s moved per call", report.size.c_str(),
      static_cast<unsigned long long>(options.seed), bytes_text(traffic).c_str());
  if (c.flops) say(out, ", %.3g GFLOP", c.flops(dims) / 1e9);
  say(out, "%s%s\n", f64 ? ", float64" : in_bf16 ? ", bfloat16" : "", options.misaligned ? ", misaligned (every array one element off)" : "");
  std::vector<std::vector<double>> expected, expected_bf16;
  Problem rounded;  // the inputs rounded to bf16: what a bf16 variant is given (below)
  std::vector<std::string> which;  // the outputs compared (grad mode: the gradients only)
  if (grad) {
    report.reference = "finite differences of the forward's float64 reference";
    for (const Grad& g : c.grads) which.push_back(g.output);
    expected = gradient_outputs(c, problem);
  } else {
    report.reference = "the float64 reference (a loop from the formula of chapter " + c.chapter + ")";
    expected = reference_outputs(c, problem);
    if (std::any_of(variants.begin(), variants.end(), [](const Variant& v) { return v.meta.bf16_inputs; })) {
      rounded = problem;
      for (Array& a : rounded.arrays)
        if (a.role == Array::kInput && a.type == Array::kFloat)
          for (double& x : a.values) x = round_to_bf16(static_cast<float>(x));
      expected_bf16 = reference_outputs(c, rounded);
      say(out, "bf16 variants are checked against the reference on their inputs rounded to bfloat16\n");
    }
  }
  say(out, "mode %s: against %s\n", mode_name(options.mode), report.reference.c_str());
  Peaks peaks;
  const bool timing = options.mode == Mode::Perf;
  if (timing) {
    peaks = measure_peaks(options.device, !c.report_flops, c.report_flops, c.peak_op);
    report.peak = c.report_flops ? peaks.tflops : peaks.bandwidth_gbs;
    print_peak(out, c, peaks);
  }

  // Each variant: check, then time what passed (a wrong kernel's speed means nothing).
  DeviceProblem device(target, problem, options.misaligned);
  // A bf16 variant runs on the rounded inputs themselves. A forward would round them anyway;
  // a backward is also handed the forward's out and lse, and those must be the ones its
  // reference sees, or P = exp(S - lse) is off by the rounding of the scores (~1%).
  const bool any_bf16 = !rounded.arrays.empty();
  std::optional<DeviceProblem> device_bf16;
  if (any_bf16) device_bf16.emplace(target, rounded, options.misaligned);
  const bool gpu = target.type() == DeviceType::CUDA && !target.emulated();
  const bool on_gpu = target.type() == DeviceType::CUDA;
  const int repeats = options.repeat > 0 ? options.repeat : gpu ? 50 : options.device == LabDevice::CPU ? 10 : 3;
  const double budget_seconds = options.repeat > 0 ? 0.0 : 2.0;  // an explicit --repeat is obeyed
  for (const Variant& v : variants) {
    VariantResult r;
    r.variant = v.name;
    r.is_default = v.is_default;
    say(out, "\n%s%s:\n", v.name.c_str(), v.is_default ? " (default)" : "");
    const Bound kernel = c.call.bind(target.type(), registry_dtype, v.name);
    BRRR_CHECK(kernel != nullptr, "kernel-lab: ", c.name, " variant '", v.name, "' could not be bound");
    std::vector<std::vector<double>> got;
    const bool bf16 = v.meta.bf16_inputs && !grad && any_bf16;
    DeviceProblem& arrays = bf16 ? *device_bf16 : device;
    if (call_variant(r, target, bf16 ? rounded : problem, arrays, kernel, options.variant != "all", out, &got)) {
      const double allowed = options.tolerance >= 0 ? tolerance : std::max(tolerance, v.meta.tolerance);
      compare_outputs(r, problem, got, v.meta.bf16_inputs && !grad ? expected_bf16 : expected, allowed, which, on_gpu,
                      out);
      if (timing && r.passed) time_variant(r, target, c, traffic, arrays, kernel, peaks, repeats, budget_seconds, out);
    }
    report.results.push_back(r);
  }

  print_table(out, c, report, timing);
  if (timing && target.emulated())
    say(out, "%% of peak: not shown on the emulator (its times measure the emulator, not a GPU)\n");
  return report;
}

std::vector<std::string> run_shapes(const Case& c, LabDevice device, Mode mode, DType dtype,
                                    std::vector<std::string>* notes, int* runs) {
  std::vector<std::string> failures;
  auto once = [&](const Dims& size, bool misaligned) {
    Options o;
    o.device = device;
    o.mode = mode;
    o.dtype = dtype;
    o.size = size;
    o.misaligned = misaligned;
    o.seed = 42;
    o.out = nullptr;
    const Report report = run(c, o);
    if (!report.note.empty() && notes) notes->push_back(c.name + ": " + report.note);
    for (const VariantResult& r : report.results)
      if (runs && r.checked) ++*runs;
    for (const std::string& f : report.failures())
      failures.push_back(f + " [" + report.size + (misaligned ? ", misaligned" : "") + ", " + dtype_name(dtype) + "]");
  };
  if (mode == Mode::Grad) {
    once(c.grad_shape.empty() ? Dims{} : c.grad_shape, false);
  } else {
    for (const Dims& size : c.shapes)
      for (bool misaligned : {false, true})
        if (!misaligned || !c.aligned_only) once(size, misaligned);
  }
  return failures;
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
