// lab/kernel_lab.h: the kernel lab: check every variant of an op against the CPU reference,
// then time it against the device's measured peaks. Chapter 10 (the roofline and the kernel
// lab). Read before: kernels/signatures.h (the signatures), brrr/kernels.h (the registry),
// kernels/cuda/runtime.h (device memory and timing). Read next: kernel_lab.cpp, then
// cli_kernel_lab.cpp (`brrr kernel-lab`).
//
// After llm.c's dev/cuda and ggml's test-backend-ops: one table with one case per op says how
// to make inputs of a given size, how many bytes the op must move and how many flops it
// does, how close to the float64 reference a float32 result must be, and how to call a
// kernel through its kernels.h signature. run() does the rest, for every registered variant:
//
//   1. draw fresh random inputs (seeded), run the CPU reference once (float64 where the CPU
//      registers it), run the variant, and compare every output element;
//   2. time the variant: warm-up, then repeats with the device's cache flushed before each,
//      and report the median (and the min);
//   3. turn the time into GB/s (bandwidth-bound ops) or TFLOP/s (matmul, attention) and a
//      percentage of the peak measured on this device: a device-to-device copy (a parallel
//      memcpy on the CPU) for bandwidth; for FLOP/s, float32 matmul by cuBLAS on a GPU, else
//      the device's default matmul, which the registry makes its fastest.
//
// The tests call the same run(), so what the lab calls correct is what CI calls correct.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/signatures.h"
#include "kernels/registry.h"

namespace brrr::lab {

// Where the variants under test run. Emulator is the CUDA device backed by the SIMT emulator
// (run() calls brrr::cuda::use_emulator() for it, so call run() before making CUDA tensors).
enum class LabDevice { CPU, CUDA, Emulator };
LabDevice parse_device(const std::string& name);  // "cpu", "cuda", "emulator"

// An op's sizes, in the order its case names them (matmul: M, N, K).
using Dims = std::vector<std::int64_t>;

// One array an op reads or writes: float32 values, or int32 indices (targets, token ids).
// Outputs start as NaN, so an element the kernel forgets to write fails the check.
struct Array {
  enum Role { kInput, kOutput, kInOut };  // InOut: updated in place (AdamW's param, m, v)
  std::string name;                       // as in kernels/signatures.h: "x", "out", "dlogits"
  Role role = kInput;
  bool index = false;                     // int32 indices instead of floats
  std::vector<float> values;
  std::vector<std::int32_t> indices;
  bool compared() const { return role != kInput; }
};

// The arrays of one problem, in the order the case made them.
struct Problem {
  Dims dims;
  std::vector<Array> arrays;
  void input(const std::string& name, std::vector<float> values);
  void inout(const std::string& name, std::vector<float> values);
  void indices(const std::string& name, std::vector<std::int32_t> values);
  void output(const std::string& name, std::int64_t count);
  const Array& operator[](const std::string& name) const;
};

// Seeded random inputs (philox, as brrr's own random ops): the same seed, the same arrays.
class Random {
 public:
  explicit Random(std::uint64_t seed) : seed_(seed) {}
  std::vector<float> normal(std::int64_t n, float mean = 0.0f, float stddev = 1.0f);
  std::vector<float> uniform(std::int64_t n, float low, float high);
  std::vector<std::int32_t> integers(std::int64_t n, std::int32_t high);  // in [0, high)

 private:
  std::uint64_t seed_, counter_ = 0;  // every draw takes fresh counters
};

// What a kernel call sees: one pointer per array of the problem (device memory for a device
// variant, host memory for the CPU reference), looked up by name.
struct Args {
  Dims dims;
  kernels::Stream stream = nullptr;
  std::vector<std::string> names;
  std::vector<void*> pointers;
  void* get(const char* name) const;
  template <class T> T* f(const char* name) const { return static_cast<T*>(get(name)); }
  const std::int32_t* idx(const char* name) const { return static_cast<const std::int32_t*>(get(name)); }
};
// Calls `kernel` (a registered function of the case's op) with T = float or double.
using CallFn = void (*)(kernels::AnyFn kernel, const Args& args);

// One op of the lab: a row of the table in kernel_lab.cpp, written with designated
// initializers (every member has a default, so a row names only what it needs).
struct Case {
  std::string op{};                      // the registry's name, e.g. "layernorm_forward"
  std::string what{};                    // one line: what the op computes, with shapes
  std::vector<std::string> dim_names{};  // e.g. {"N", "C"}
  Dims gpu_size{}, emulator_size{}, cpu_size{};  // the default size on each device
  double tolerance = 1e-5;               // the largest relative error allowed (kernel_lab.cpp)
  bool report_flops = false;             // TFLOP/s (matmul, attention) rather than GB/s
  // The least traffic the op needs (each input read once, each output written once), and
  // its floating-point operations (0 where bandwidth is all that matters).
  double (*bytes)(const Dims&) = nullptr;
  double (*flops)(const Dims&) = nullptr;
  void (*make)(Problem& problem, Random& random) = nullptr;  // fills problem.arrays
  CallFn call_float = nullptr, call_double = nullptr;
  // CPU variants tried as the reference, in this order, each in float64 before float32.
  std::vector<std::string> reference_variants{"cpu"};

  const Dims& default_size(LabDevice device) const;
};

const std::vector<Case>& cases();  // every op of the lab, in course order
// The case of `op`; throws brrr::Error listing the known ops.
const Case& find_case(const std::string& op);
// "1024x768", "1024,768", "C=1024" (the other sizes from `defaults`), or "4096" for every size.
Dims parse_size(const Case& c, const std::string& text, const Dims& defaults);
std::string size_string(const Case& c, const Dims& dims);  // "N=1024 C=768"

struct Options {
  LabDevice device = LabDevice::CUDA;
  std::string variant = "all";  // or one variant's name
  Dims size;                    // empty: the device's default size for the op
  int repeat = 0;               // timed runs; 0: the device's default (within a time budget)
  std::uint64_t seed = 1337;
  bool time = true;             // false: check only
  double tolerance = -1;        // < 0: the case's
  std::FILE* out = stdout;      // where the report is printed as it runs (nullptr: nowhere)
};

struct VariantResult {
  std::string variant;
  bool is_default = false;      // the variant the registry selects for float32
  bool checked = false;         // false when the op has no CPU reference
  bool passed = true;
  bool not_written = false;     // an exercise stub that throws "not written yet" (not checked)
  double max_abs_error = 0, max_rel_error = 0;
  std::string failure;          // why it failed: "out[17] = nan (reference 0.2517)"
  bool timed = false;
  double median_ms = 0, min_ms = 0;
  double rate = 0;              // GB/s or TFLOP/s at the median time
  double percent_of_peak = -1;  // < 0: no peak to compare with
};

struct Report {
  std::string op, device, size, reference;  // reference: "cpu 'cpu' float64", or empty
  Dims dims;                                // the size, as numbers
  std::uint64_t seed = 0;
  std::string unit;                         // "GB/s" or "TFLOP/s": what rate and peak count
  double peak = 0;                          // the device's measured peak in that unit (0: none)
  std::vector<VariantResult> results;
  std::string note;                         // "no variant of gelu_forward on cuda", ...
  bool passed() const;
  // One line per failed variant: "gelu_forward variant 'broken' on cpu: out[17] = ...".
  std::vector<std::string> failures() const;
};

// Checks (and unless !options.time, times) every variant of c.op on options.device.
Report run(const Case& c, const Options& options);

// The report as JSON lines, one object per variant (op, device, size, dims, variant, default,
// passed, max_rel_error, median_ms, min_ms, rate, unit, peak, percent_of_peak), for scripts
// such as scripts/gpu.sh that turn the lab's figures into a report.
std::string json_lines(const Report& report);

// The roofline's two numbers, measured on the device (0 where not measured).
struct Peaks {
  double bandwidth_gbs = 0, tflops = 0;
  std::string bandwidth_how, flops_how;  // what was measured
};
Peaks measure_peaks(LabDevice device, bool bandwidth, bool flops);

}  // namespace brrr::lab
