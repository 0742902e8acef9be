// lab/kernel_lab.h: the kernel lab: every registered op, checked against a float64 reference
// written apart from its kernels, its backward checked by finite differences, and timed
// against the device's measured peaks. Chapter 11 (the roofline and the kernel lab).
// Read before: kernels/signatures.h (the signatures and the ops' descriptors), brrr/kernels.h
// (the registry), kernels/cuda/runtime.h (device memory and timing). Read next:
// kernel_lab.cpp (run), device.h and the steps (check.cpp, timing.cpp, report.cpp), then a
// table file such as cases_nn.cpp, then cli_kernel_lab.cpp (`brrr kernel-lab`).
//
// After ggml's test-backend-ops and llm.c's dev/cuda: one table with a case per op (the
// files cases_*.cpp, one per chapter) says how to make inputs of a given size, how to
// compute the right answer in float64 with a plain loop straight from the formula, how to
// call a kernel of the op through its typed descriptor, and how many bytes and flops the op
// needs. run() does the rest, for every registered variant, in one of three modes:
//
//   check  fresh random inputs (seeded), outputs poisoned with NaN, every output element
//          compared with the float64 reference;
//   grad   for an op with a backward: a backward kernel's outputs compared with central
//          finite differences, in float64, of its forward's reference (a kernel-level
//          backward), or the op through brrr's gradcheck (an op built from ops);
//   perf   check, then time: warm-up, repeats with the device's cache flushed before each,
//          the median as GB/s or TFLOP/s and a percentage of the device's measured peak. A size
//          whose reference would take long is checked at a smaller size of the same shape
//          (Case::check_size) and timed at the size asked for;
//   reference  no kernel: the reference alone, timed (what a check at that size costs).
//
// The tests loop over the same table (tests/train/test_kernel_lab.cpp on the CPU,
// tests/emulator/test_lab_table.cpp, tests/cuda/test_gpu.cpp), so what the lab calls correct
// is what CI calls correct.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "brrr/autograd.h"
#include "brrr/kernels.h"
#include "brrr/tensor.h"
#include "kernels/registry.h"
#include "kernels/signatures.h"

namespace brrr::gpu {
class Runtime;
}

namespace brrr::lab {

// Where the variants under test run. Emulator is the CUDA device backed by the SIMT emulator
// (run() calls brrr::cuda::use_emulator() for it, so call run() before making CUDA tensors).
enum class LabDevice { CPU, CUDA, Emulator };
LabDevice parse_device(const std::string& name);  // "cpu", "cuda", "emulator"

enum class Mode { Check, Grad, Perf, Reference };
Mode parse_mode(const std::string& name);  // "check", "grad", "perf", "reference"
const char* mode_name(Mode mode);

// An op's sizes, in the order its case names them (matmul: M, N, K).
using Dims = std::vector<std::int64_t>;

// One array an op reads or writes. Values are kept in double whatever the kernel's dtype:
// inputs are drawn as float32 numbers (exact in both float32 and float64), so the kernel and
// the reference see the same values; outputs start as NaN (indices as -1), so an element the
// kernel forgets to write fails the check.
struct Array {
  enum Role { kInput, kOutput, kInOut };  // InOut: updated in place (AdamW's param, m, v)
  // kFloat: the dtype under test; kFloat32: float32 whatever it is (the float32 results and
  // statistics of a kernel on bf16 data, chapter 18); kFloat64: float64 whatever it is
  // (sample_rows's rules); indices otherwise.
  enum Type { kFloat, kFloat32, kFloat64, kInt32, kInt64 };
  std::string name;                       // as in kernels/signatures.h: "x", "out", "dlogits"
  Role role = kInput;
  Type type = kFloat;
  std::vector<double> values;
  bool compared() const { return role != kInput; }
};

// The arrays of one problem, in the order the case made them. A reference reads its inputs
// with in() and writes its outputs with out().
struct Problem {
  Dims dims;
  DType dtype = kFloat32;  // the dtype of the kernels under test (the random ops need it)
  std::vector<Array> arrays;
  void input(const std::string& name, const std::vector<float>& values, Array::Type type = Array::kFloat);
  void inout(const std::string& name, const std::vector<float>& values);
  void indices(const std::string& name, const std::vector<std::int32_t>& values);
  void output(const std::string& name, std::int64_t count, Array::Type type = Array::kFloat);
  const std::vector<double>& in(const std::string& name) const;
  std::vector<double>& out(const std::string& name);
  Array& array(const std::string& name);
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
// variant), looked up by name, in the dtype under test (int32 or int64 for indices).
struct Args {
  Dims dims;
  kernels::Stream stream = nullptr;
  Device device = kCPU;
  DType dtype = kFloat32;           // of the float arrays (the dtype under test)
  gpu::Runtime* runtime = nullptr;  // the CUDA device's, for tensor(); nullptr on the CPU
  std::vector<std::string> names;
  std::vector<void*> pointers;
  void* get(const char* name) const;
  template <class T> T* f(const char* name) const { return static_cast<T*>(get(name)); }
  const std::int32_t* idx(const char* name) const { return static_cast<const std::int32_t*>(get(name)); }
  // For ops whose variants take tensors (ops built from ops, framework/src/op_variants.cpp):
  // a copy of an array as a tensor on the device, and a tensor's values written into one.
  Tensor tensor(const char* name, const Shape& shape, DType dtype) const;
  void store(const char* name, const Tensor& t) const;
};

// How the lab calls one op's variants: the op's descriptors in float32 and float64 and, for
// each, a function that calls a kernel of that type with a problem's arrays. Both are checked
// by the compiler: lab::call(kernels::op::gelu_forward<float>, &call_gelu<float>, ...) does not
// compile when call_gelu takes another kind of kernel than gelu_forward's.
using Bound = std::function<void(const Args& args)>;  // one variant, ready to call
struct Call {
  std::string op;  // the registry slot's name: "matmul", or "matmul:bf16" for bf16 products
  // An op with one dtype of its own whatever the data's (check_indices: int32 indices) is
  // looked up in that dtype, whichever the lab checks.
  bool one_dtype = false;
  DType dtype = kFloat32;
  // The registered variant `variant` of the op on `device` in `dtype`, bound to its call;
  // empty when there is no such registration.
  std::function<Bound(DeviceType device, DType dtype, const std::string& variant)> bind;
};
template <class F32, class F64>
Call call(kernels::Op<F32> op32, void (*call32)(F32, const Args&), kernels::Op<F64> op64,
          void (*call64)(F64, const Args&)) {
  return {std::string(op32.name) + (op32.bf16_products ? kernels::kBf16Suffix : ""), op32.dtype == op64.dtype,
          op32.dtype,
          [=](DeviceType device, DType dtype, const std::string& variant) -> Bound {
            if (dtype == op32.dtype) {
              const F32 fn = kernels::lookup_variant(op32, device, variant);
              if (fn) return [=](const Args& args) { call32(fn, args); };
            } else if (dtype == op64.dtype) {
              const F64 fn = kernels::lookup_variant(op64, device, variant);
              if (fn) return [=](const Args& args) { call64(fn, args); };
            }
            return {};
          }};
}

// The same for an op with kernels on bfloat16 data as well (chapter 18): --dtype bfloat16
// checks those against the reference on the inputs rounded to bf16.
template <class F32, class F64, class F16>
Call call(kernels::Op<F32> op32, void (*call32)(F32, const Args&), kernels::Op<F64> op64,
          void (*call64)(F64, const Args&), kernels::Op<F16> op16, void (*call16)(F16, const Args&)) {
  Call c = call(op32, call32, op64, call64);
  c.bind = [=, wider = c.bind](DeviceType device, DType dtype, const std::string& variant) -> Bound {
    if (dtype != op16.dtype) return wider(device, dtype, variant);
    const F16 fn = kernels::lookup_variant(op16, device, variant);
    if (fn) return [=](const Args& args) { call16(fn, args); };
    return {};
  };
  return c;
}

// grad mode for a backward kernel: output `output` is d loss / d `input`, where loss is the
// case's loss(problem), sum(dout * forward(inputs)) from the forward's float64 reference.
// accumulates: the kernel adds the gradient to what output held (embedding_backward).
struct Grad {
  std::string output, input;
  bool accumulates = false;
};

// Perf mode checks an op of more FLOPs than this at a smaller size (Case::check_size).
constexpr double kCheckFlops = 4294967296.0;  // 2^32

// One row of the table, written with designated initializers (every member has a default,
// so a row names only what it needs).
struct Case {
  std::string name{};                    // the lab's name; "matmul", "matmul/nt" for a second layout
  std::string op{};                      // the registry's op (empty: the same as name)
  std::string what{};                    // one line: what the op computes, with shapes
  std::string chapter{};                 // where the op is taught, e.g. "12"
  std::vector<std::string> dim_names{};  // e.g. {"N", "C"}
  Dims gpu_size{}, emulator_size{}, cpu_size{};  // perf mode's default size on each device
  std::vector<Dims> shapes{};            // check mode's test shapes: small, ragged (and each
                                         // run aligned and misaligned by the tests)
  double tolerance = 1e-5;               // the largest relative error allowed in float32
  double tolerance64 = 1e-9;             // ... in float64
  // (In low precision, bf16 or tf32, `tolerance` is the floor of the baseline's judgement: below.)
  bool report_flops = false;             // TFLOP/s (matmul, attention) rather than GB/s
  // Its kernels copy 16 bytes at a time (cp.async): checked at aligned pointers only, never one
  // element off (they refuse a misaligned pointer with a message; tests check that apart).
  bool aligned_only = false;
  // The matmul slot whose best variant sets the FLOP/s peak: the float32 one, or "matmul:bf16"
  // for bf16 products (AVX512-BF16 does twice the float32 FMA's products per instruction).
  std::string peak_op = "matmul";
  // The least traffic the op needs (each input read once, each output written once), counted in
  // float32 bytes (traffic_bytes scales it to how the arrays are stored), and its floating-point
  // operations (nullptr where bandwidth is all that matters).
  double (*bytes)(const Dims&) = nullptr;
  double (*flops)(const Dims&) = nullptr;
  void (*make)(Problem& problem, Random& random) = nullptr;  // inputs, and outputs as NaN
  void (*reference)(Problem& problem) = nullptr;            // the outputs, in float64
  // A low-precision variant (bf16 data, bf16 inputs, tf32 products: chapter 18) has no fixed
  // tolerance: on the same inputs, the case's baseline computes the outputs the way a careful
  // library does in that precision, and the variant may have at most kBaselineFactor times the
  // baseline's error, plus `tolerance` above (what any float32 kernel of the op may add):
  //   err(variant) <= 2 err(baseline) + tolerance,   each output apart, both against float64.
  // baseline(problem, round) gets the inputs as the variant sees them and writes the outputs,
  // each matrix product taking its operands through `round` (round_to_bf16 or round_to_tf32)
  // and summing in float32 or better, as the tensor cores and PyTorch's bf16 matmul do; outputs
  // stored in bf16 are rounded by the lab afterwards. nullptr: the reference on the inputs
  // through `round` (enough for a GEMM, whose only rounded operands are its inputs, and for an
  // elementwise or reduction op, whose bf16 kernels round only what they store).
  void (*baseline)(Problem& problem, float (*round)(float)) = nullptr;
  // The variants of the op whose products take tf32 operands (10 bits of mantissa): judged
  // against the baseline with round_to_tf32. bf16 variants say so themselves (bf16_inputs, or
  // the op's bf16 data).
  std::vector<std::string> tf32_variants{};
  Call call{};
  // grad mode. A backward kernel: its gradients and the forward's loss. An op built from ops:
  // gradcheck(variant, device), brrr::gradcheck on the registered variant in float64.
  std::vector<Grad> grads{};
  double (*loss)(const Problem& problem) = nullptr;
  GradcheckResult (*gradcheck)(const std::string& variant, Device device) = nullptr;
  Dims grad_shape{};                     // grad mode's size (finite differences are slow)

  const std::string& op_name() const { return op.empty() ? name : op; }
  const Dims& default_size(LabDevice device) const;
  // The size perf mode checks `dims` at: dims, or, where the op's FLOPs exceed `max_flops`
  // (2^32 unless Options::check_flops says less; its traffic 2^28 bytes, for a bandwidth op
  // that counts no FLOPs), dims with the first size (independent rows, heads or images) halved
  // until they do not.
  Dims check_size(const Dims& dims, double max_flops = kCheckFlops) const;
  bool has_grad() const { return !grads.empty() || gradcheck != nullptr; }
};

const std::vector<Case>& cases();  // every case of the lab, in course order
// The case named `name` (an op's name finds its first case); throws brrr::Error listing them.
const Case& find_case(const std::string& name);
// A call's traffic as the problem stores its arrays: Case::bytes counts them as float32, and
// the arrays' bytes in the run's dtype (bf16 data, float32 results and statistics, int32
// indices) over the same arrays in float32 scale it: half for bf16 data, twice for float64.
double traffic_bytes(const Case& c, const Problem& problem);
// "N=1024 C=768". (Sizes as a user types them are the command line's: apps/brrr/lab_sizes.h.)
std::string size_string(const Case& c, const Dims& dims);
// The registered ops that no case covers (brrr kernels lists the registry; a test wants none).
std::vector<std::string> ops_without_a_case();

struct Options {
  LabDevice device = LabDevice::CUDA;
  Mode mode = Mode::Perf;
  DType dtype = kFloat32;       // the registrations checked: float32 (default) or float64
  std::string variant = "all";  // or one variant's name
  Dims size;                    // empty: the device's default size (grad mode: the case's)
  bool misaligned = false;      // every array starts one element past a 256-byte boundary
  int repeat = 0;               // timed runs; 0: the device's default (within a time budget)
  std::uint64_t seed = 1337;
  double tolerance = -1;        // < 0: the case's
  // Perf mode checks an op of more FLOPs at a smaller size (Case::check_size). Lowered only
  // where the float64 reference is far slower than on CI's CPU (a test under qemu,
  // tests/slow_cpu.h), to check the same rule at a smaller size.
  double check_flops = kCheckFlops;
  // Perf mode's percent of peak needs the device's peak, measured once per process: on the CPU
  // a 2048^3 float32 matmul run 7 times (120 GFLOP). A test that has no use for the percentage
  // under qemu (tests/slow_cpu.h) turns it off; the report then says "not measured".
  bool measure_peak = true;
  std::FILE* out = stdout;      // where the report is printed as it runs (nullptr: nowhere)
};

// The judgement of a low-precision variant (see Case::baseline): err <= 2 err(baseline) + floor.
constexpr double kBaselineFactor = 2.0;
// x rounded to tf32 (1 sign, 8 exponent, 10 mantissa bits), to nearest, ties away from zero: what
// cvt.rna.tf32.f32 hands the tensor cores (the CUDA matmul's variants 10 and 11). As float32.
float round_to_tf32(float x);

struct VariantResult {
  std::string variant;
  bool is_default = false;      // the variant the registry selects for the dtype
  bool checked = false;         // false for an exercise stub not written yet, or nothing to check
  bool passed = true;
  bool not_written = false;     // an exercise stub that throws "not written yet" (not checked)
  std::string passed_over;      // why the registry never runs it at this size (its eligibility
                                // rule: a head size past its tiles); not checked
  double max_abs_error = 0, max_rel_error = 0;
  // A low-precision variant (Case::baseline): "bf16" or "tf32", the baseline's largest relative
  // error over the outputs, and the largest of the variant's error over the baseline's, output
  // by output (1.1: 1.1 times the baseline's error). Empty, 0, 0 for a float32 or float64 check.
  std::string precision;
  double baseline_rel_error = 0, baseline_ratio = 0;
  std::string failure;          // why it failed: "out[17] = nan (reference 0.2517)"
  bool timed = false;
  double median_ms = 0, min_ms = 0;
  double rate = 0;              // GB/s or TFLOP/s at the median time
  double percent_of_peak = -1;  // < 0: no peak to compare with
};

struct Report {
  std::string op, device, size, reference;  // reference: what the outputs were compared with
  Mode mode = Mode::Perf;
  Dims dims;                                // the size, as numbers
  std::string check_size;                   // the size checked, where not `size` (perf mode)
  double reference_seconds = 0;             // what making the inputs and the reference took
  std::uint64_t seed = 0;
  std::string unit;                         // "GB/s" or "TFLOP/s": what rate and peak count
  double peak = 0;                          // the device's measured peak in that unit (0: none)
  std::vector<VariantResult> results;
  std::string note;                         // "no variant of gelu_forward on cuda", ...
  bool passed() const;
  // One line per failed variant: "gelu_forward variant 'broken' on cpu: out[17] = ...".
  std::vector<std::string> failures() const;
};

// Runs c in options.mode on every variant of its op on options.device.
Report run(const Case& c, const Options& options);

// What the tests run for one case: check mode on each of its shapes, aligned and then
// misaligned, or grad mode at its grad shape, quietly, in `dtype`. Returns one line per
// failed variant and shape; *notes gets why nothing ran where nothing did ("no variant of
// ... on cuda"), *runs how many variant runs were checked.
std::vector<std::string> run_shapes(const Case& c, LabDevice device, Mode mode, DType dtype,
                                    std::vector<std::string>* notes = nullptr, int* runs = nullptr);

// The report as JSON lines, one object per variant (op, device, size, dims, variant, default,
// passed, max_rel_error, median_ms, min_ms, rate, unit, peak, percent_of_peak), for scripts
// such as scripts/gpu.sh that turn the lab's figures into a report.
std::string json_lines(const Report& report);

// The roofline's two numbers, measured on the device (0 where not measured).
struct Peaks {
  double bandwidth_gbs = 0, tflops = 0;
  std::string bandwidth_how, flops_how;  // what was measured
};
// flops_op: the matmul op whose best variant is the FLOP/s peak (Case::peak_op).
Peaks measure_peaks(LabDevice device, bool bandwidth, bool flops, const std::string& flops_op = "matmul");

}  // namespace brrr::lab
