// lab/kernel_lab.cpp: the kernel lab's own part: devices, modes, problems and random inputs,
// the table and its sizes, and run(), which puts the steps together (check.cpp, timing.cpp,
// report.cpp; the device in device.h). Chapter 11 (the roofline and the kernel lab).
// Read before: kernel_lab.h. Read next: device.h, then the table, cases_elementwise.cpp to
// cases_optim.cpp (one file per chapter), then cli_kernel_lab.cpp.
#include "lab/kernel_lab.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "brrr/bfloat16.h"
#include "brrr/error.h"
#include "brrr/kernels.h"
#include "brrr/ops.h"
#include "brrr/parallel.h"
#include "brrr/strings.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lab/cases.h"
#include "lab/steps.h"

namespace brrr::lab {

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
  if (name == "reference") return Mode::Reference;
  detail::fail("kernel-lab: unknown mode '", name, "' (modes: check, grad, perf, reference)");
}

const char* mode_name(Mode mode) {
  return mode == Mode::Check ? "check" : mode == Mode::Grad ? "grad" : mode == Mode::Perf ? "perf" : "reference";
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
  const bool floating = type == Array::kFloat || type == Array::kFloat32 || type == Array::kFloat64;
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
// The table: one file per chapter (cases_*.cpp), in course order

const std::vector<Case>& cases() {
  static const std::vector<Case> table = [] {
    std::vector<Case> all;
    for (auto part : {elementwise_cases, random_cases, reduction_cases, matmul_cases, decode_cases, nn_cases, conv_cases,
                      attention_cases, optim_cases})
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

std::string size_string(const Case& c, const Dims& dims) {
  std::vector<std::string> parts;
  for (std::size_t d = 0; d < dims.size() && d < c.dim_names.size(); ++d)
    parts.push_back(c.dim_names[d] + "=" + std::to_string(dims[d]));
  return join(parts, " ");
}

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

// The reference for a variant that rounds its inputs to bfloat16 (VariantMeta::bf16_inputs)
// is computed on the inputs rounded the same way: that rounding is the dtype's (the caller
// chose bf16), not the kernel's error, and what remains is the kernel's own arithmetic (its
// bf16 intermediates, float32 sums). Against the float32 inputs' reference, bf16_mma attention
// failed 3e-2 at T = 1024 on an H100 on a few thousand of 25 million outputs: scores of q.k
// with bf16 inputs move by ~0.4%, which moves the softmax weights of a long row by as much.
// The rounding is brrr::round_to_bf16 (brrr/bfloat16.h): to nearest even, as __float2bfloat16_rn.

// Perf mode at a size whose float64 reference would take long (matmul at 4096^3 is 1.4e11
// multiply-adds) checks the variants at a smaller size of the same shape and times them at the
// size asked for. The first size is halved until the op's FLOPs are at most 2^32 (or the
// Options::check_flops a test under qemu sets lower), or, for the bandwidth ops that count no
// FLOPs, until its traffic is at most 2^28 bytes (256 MiB: the cross-entropy bar's 8192 x 50304
// logits are 1.6 GB, whose float64 reference alone needs 3.3 GB of page faults). In every case the first size is a count of independent problems
// (matmul's rows M, attention's BH, the rows of a reduction, the batch of images), so the other
// sizes (K, T, the row length) stay, and with them the sums and tiles the bar's size exercises.
Dims Case::check_size(const Dims& dims, double max_flops) const {
  constexpr double kCheckBytes = 268435456.0;  // 2^28
  BRRR_CHECK(max_flops >= 1, "kernel-lab ", name, ": the FLOPs above which a smaller size is checked must be at least 1, not ",
             max_flops);
  Dims d = dims;
  if (d.empty()) return d;
  const auto too_big = [&] { return flops ? flops(d) > max_flops : bytes && bytes(d) > kCheckBytes; };
  while (d[0] > 1 && too_big()) d[0] = (d[0] + 1) / 2;
  return d;
}

namespace {

// What a run has settled before any variant runs.
struct Plan {
  Dims dims, check_dims;  // timed at dims, checked at check_dims (perf mode: Case::check_size)
  double tolerance = 0;
  DType registry_dtype = kFloat32;
  std::vector<Variant> variants;
};

// The settings, the report's header and the variants to run. Returns false when there is
// nothing to run (the report's note says why).
bool plan_run(const Case& c, const Options& options, Target& target, Report& report, Plan& plan) {
  std::FILE* out = options.out;
  report.op = c.name;
  report.mode = options.mode;
  report.device = std::string(target.registry_name()) + (target.emulated() ? " (emulator)" : "");
  report.seed = options.seed;
  const bool grad = options.mode == Mode::Grad;
  plan.dims = !options.size.empty()           ? options.size
              : grad && !c.grad_shape.empty() ? c.grad_shape
                                              : c.default_size(options.device);
  BRRR_CHECK(plan.dims.size() == c.dim_names.size(), "kernel-lab ", c.name, ": ", plan.dims.size(), " sizes given, ",
             c.dim_names.size(), " expected");
  const bool checks_apart = options.mode == Mode::Perf || options.mode == Mode::Reference;
  plan.check_dims = checks_apart ? c.check_size(plan.dims, options.check_flops) : plan.dims;
  report.size = size_string(c, plan.dims);
  report.dims = plan.dims;
  if (plan.check_dims != plan.dims) report.check_size = size_string(c, plan.check_dims);
  report.unit = c.report_flops ? "TFLOP/s" : "GB/s";
  const bool f64 = options.dtype == kFloat64, in_bf16 = options.dtype == kBFloat16;
  // In bf16 the case's float32 tolerance is the floor of the baseline's judgement (Case::baseline).
  const double case_tolerance = f64 ? c.tolerance64 : c.tolerance;
  // Finite differences are good to about 1e-9 (see above): a float64 gradient is held to 1e-6.
  plan.tolerance = options.tolerance >= 0 ? options.tolerance
                   : grad                 ? std::max(case_tolerance, 1e-6)
                                          : case_tolerance;
  say(out, "kernel-lab %s: %s\n", c.name.c_str(), c.what.c_str());
  say(out, "device: %s\n", target.describe().c_str());

  if (grad && in_bf16) {
    report.note = "grad mode checks float32 and float64 kernels (finite differences need the precision)";
    say(out, "mode grad: %s\n", report.note.c_str());
    return false;
  }
  if (grad && !c.has_grad()) {
    report.note = c.name + " has no backward of its own to check";
    say(out, "mode grad: %s (check mode checks its outputs)\n", report.note.c_str());
    return false;
  }
  // The variants to run: every registration of the op on the device in the dtype, or one.
  plan.registry_dtype = c.call.one_dtype ? c.call.dtype : options.dtype;
  if (c.call.one_dtype && is_floating_point(c.call.dtype) && c.call.dtype != options.dtype) {
    // An op whose data has one floating dtype (matmul:bf16: float32) has nothing in another.
    report.note = c.op_name() + " takes " + dtype_name(c.call.dtype) + " data only";
    say(out, "%s (nothing to check or time in %s)\n", report.note.c_str(), dtype_name(options.dtype));
    return false;
  }
  plan.variants = variants_of(c.op_name(), target.type(), plan.registry_dtype);
  if (options.mode == Mode::Reference) return true;  // the references only: no variant runs
  if (plan.variants.empty()) {
    report.note = "no variant of " + c.op_name() + " on " + report.device + (f64 ? " in float64" : "");
    say(out, "%s (nothing to check or time)\n", report.note.c_str());
    return false;
  }
  plan.variants = pick_variants(plan.variants, options.variant, c.name, report.device);
  return true;
}

// grad mode for an op built from ops: brrr's gradcheck on each variant, in float64.
void run_gradcheck(const Case& c, Target& target, const Plan& plan, Report& report, std::FILE* out) {
  report.reference = "finite differences (brrr::gradcheck, float64)";
  say(out, "mode grad: brrr::gradcheck of each variant in float64 (autograd against finite differences)\n");
  const Device device = target.type() == DeviceType::CUDA ? Device::cuda() : kCPU;
  for (const Variant& v : plan.variants) {
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
}

// The inputs at one size, drawn from the seed (outputs NaN); in bf16, rounded to it: the
// kernels and the reference see the same values.
Problem make_problem(const Case& c, const Dims& dims, const Options& options) {
  Problem problem;
  problem.dims = dims;
  problem.dtype = options.dtype;
  Random random(options.seed);
  c.make(problem, random);
  if (options.dtype == kBFloat16)
    for (Array& a : problem.arrays)
      if (a.type == Array::kFloat)
        for (double& x : a.values) x = round_to_bf16(static_cast<float>(x));
  return problem;
}

// A problem and what its outputs must be: the float64 reference (grad mode: finite differences),
// and for variants that round their inputs to bf16, the reference on those rounded inputs; and
// the baselines the low-precision variants are judged against (Case::baseline).
struct Expected {
  Problem problem, rounded;  // rounded: empty unless a variant rounds its inputs to bf16
  std::vector<std::vector<double>> outputs, outputs_bf16;
  std::vector<std::string> which;  // the outputs compared (grad mode: the gradients only)
  std::optional<Baseline> bf16, tf32;
};

// The precision a variant is judged in: "bf16" (bf16 data, or inputs it rounds to bf16), "tf32"
// (Case::tf32_variants), or "" (float32 or float64: the case's tolerance).
std::string precision_of(const Case& c, const Variant& v, DType dtype) {
  if (dtype == kBFloat16 || v.meta.bf16_inputs) return "bf16";
  if (std::find(c.tf32_variants.begin(), c.tf32_variants.end(), v.name) != c.tf32_variants.end()) return "tf32";
  return "";
}

}  // namespace

float round_to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits = (bits + 0x1000u) & 0xFFFFE000u;  // add half of the 13 dropped bits' place: ties away from zero
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

namespace {

float bf16_rounding(float x) { return round_to_bf16(x); }

// The baseline's outputs on `p`, the inputs as the variant sees them: the case's baseline, or
// the reference on the inputs through `round`; in bf16 data, the outputs stored in bf16 rounded.
Baseline baseline_outputs(const Case& c, Problem p, const char* precision, float (*round)(float)) {
  if (c.baseline) {
    c.baseline(p, round);
  } else {
    for (Array& a : p.arrays)
      if (a.role == Array::kInput && a.type == Array::kFloat)  // not what an in-place op adds to
        for (double& x : a.values) x = round(static_cast<float>(x));
    c.reference(p);
  }
  Baseline b;
  b.precision = precision;
  b.outputs.resize(p.arrays.size());
  for (std::size_t i = 0; i < p.arrays.size(); ++i) {
    Array& a = p.arrays[i];
    if (!a.compared()) continue;
    if (p.dtype == kBFloat16 && a.type == Array::kFloat)
      for (double& x : a.values) x = round_to_bf16(static_cast<float>(x));
    b.outputs[i] = std::move(a.values);
  }
  return b;
}

Expected expected_outputs(const Case& c, Problem problem, bool grad, bool any_bf16_inputs,
                          const std::set<std::string>& precisions, Report& report, std::FILE* out) {
  Expected e;
  e.problem = std::move(problem);
  if (grad) {
    report.reference = "finite differences of the forward's float64 reference";
    for (const Grad& g : c.grads) e.which.push_back(g.output);
    e.outputs = gradient_outputs(c, e.problem);
    return e;
  }
  report.reference = "the float64 reference (a loop from the formula of chapter " + c.chapter + ")";
  e.outputs = reference_outputs(c, e.problem);
  if (any_bf16_inputs) {
    e.rounded = e.problem;
    for (Array& a : e.rounded.arrays)
      if (a.role == Array::kInput && a.type == Array::kFloat)
        for (double& x : a.values) x = round_to_bf16(static_cast<float>(x));
    e.outputs_bf16 = reference_outputs(c, e.rounded);
    say(out, "bf16 variants are checked against the reference on their inputs rounded to bfloat16\n");
  }
  if (precisions.count("bf16")) e.bf16 = baseline_outputs(c, any_bf16_inputs ? e.rounded : e.problem, "bf16", &bf16_rounding);
  if (precisions.count("tf32")) e.tf32 = baseline_outputs(c, e.problem, "tf32", &round_to_tf32);
  if (!precisions.empty())
    say(out, "%s variants are judged against the %s baseline on the same inputs: err <= %gx the baseline's + %.1e\n",
        join(std::vector<std::string>(precisions.begin(), precisions.end()), " and ").c_str(),
        join(std::vector<std::string>(precisions.begin(), precisions.end()), " or ").c_str(), kBaselineFactor,
        c.tolerance);
  return e;
}

// The precisions of the variants that are judged against a baseline (none in grad mode, or
// where --tolerance sets one for every variant).
std::set<std::string> precisions_of(const Case& c, const std::vector<Variant>& variants, const Options& options) {
  std::set<std::string> p;
  if (options.mode == Mode::Grad || options.tolerance >= 0) return p;
  for (const Variant& v : variants) {
    const std::string precision = precision_of(c, v, options.dtype);
    if (!precision.empty()) p.insert(precision);
  }
  return p;
}

bool any_bf16_inputs(const std::vector<Variant>& variants) {
  return std::any_of(variants.begin(), variants.end(), [](const Variant& v) { return v.meta.bf16_inputs; });
}

// Reference mode: what a check costs before any kernel runs, timed (the inputs at the timed size
// and the check size, and the references at the check size). For a GPU's list, run on any
// device: the bf16 references and the baselines are computed when the op has such variants on the GPU.
void run_reference_only(const Case& c, const Options& options, const Plan& plan, Report& report) {
  std::FILE* out = options.out;
  const auto t0 = std::chrono::steady_clock::now();
  if (plan.check_dims != plan.dims) make_problem(c, plan.dims, options);
  const double make_full = seconds_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<Variant> both = variants_of(c.op_name(), DeviceType::CUDA, plan.registry_dtype);
  both.insert(both.end(), plan.variants.begin(), plan.variants.end());
  expected_outputs(c, make_problem(c, plan.check_dims, options), false, any_bf16_inputs(both),
                   precisions_of(c, both, options), report, out);
  const double reference = seconds_since(t1);
  report.reference_seconds = make_full + reference;
  say(out, "size: %s%s\n", report.size.c_str(),
      report.check_size.empty() ? "" : (", checked at " + report.check_size).c_str());
  say(out, "reference: %.2f s on %d threads (inputs at the timed size %.2f s; inputs and %s at the checked size "
           "%.2f s)\n",
      report.reference_seconds, get_num_threads(), make_full,
      any_bf16_inputs(both) || !precisions_of(c, both, options).empty() ? "the references and baselines"
                                                                         : "the reference",
      reference);
}

// One variant: checked at the check size; then, in perf mode, timed at the size asked for.
struct Arrays {  // the problem's arrays on the target, and those of its bf16-rounded inputs
  DeviceProblem plain;
  std::optional<DeviceProblem> bf16;
};

VariantResult run_variant(const Case& c, const Variant& v, const Options& options, const Plan& plan, Target& target,
                          const Expected& e, Arrays& check, Arrays* timed, double traffic, const Peaks& peaks) {
  std::FILE* out = options.out;
  const bool grad = options.mode == Mode::Grad, timing = options.mode == Mode::Perf;
  VariantResult r;
  r.variant = v.name;
  r.is_default = v.is_default;
  say(out, "\n%s%s:\n", v.name.c_str(), v.is_default ? " (default)" : "");
  // A size its eligibility rule excludes (a head size, the last size of every attention case,
  // past its tiles) is one the registry never runs it at: passed over, with the rule's reason.
  if (v.meta.max_head_size > 0 && !e.problem.dims.empty()) {
    kernels::Call call;
    call.head_size = e.problem.dims.back();
    call.bf16_compute = v.meta.bf16_inputs;  // its own precision: only the head size is asked
    r.passed_over = kernels::why_not(v.meta, call);
    if (!r.passed_over.empty()) {
      say(out, "  passed over: %s\n", r.passed_over.c_str());
      return r;
    }
  }
  const Bound kernel = c.call.bind(target.type(), plan.registry_dtype, v.name);
  BRRR_CHECK(kernel != nullptr, "kernel-lab: ", c.name, " variant '", v.name, "' could not be bound");
  // A bf16 variant runs on the rounded inputs themselves. A forward would round them anyway;
  // a backward is also handed the forward's out and lse, and those must be the ones its
  // reference sees, or P = exp(S - lse) is off by the rounding of the scores (~1%).
  const bool bf16 = v.meta.bf16_inputs && !grad && check.bf16.has_value();
  std::vector<std::vector<double>> got;
  if (!call_variant(r, target, bf16 ? e.rounded : e.problem, bf16 ? *check.bf16 : check.plain, kernel,
                    options.variant != "all", out, &got))
    return r;
  // A low-precision variant is judged against its precision's baseline, with the case's float32
  // tolerance as the floor; the others against the tolerance (a variant's own, if looser).
  const std::string precision = options.tolerance >= 0 || grad ? "" : precision_of(c, v, options.dtype);
  const Baseline* baseline = precision == "bf16" ? &*e.bf16 : precision == "tf32" ? &*e.tf32 : nullptr;
  const double allowed = options.tolerance >= 0 || baseline ? plan.tolerance : std::max(plan.tolerance, v.meta.tolerance);
  compare_outputs(r, e.problem, got, v.meta.bf16_inputs && !grad ? e.outputs_bf16 : e.outputs, allowed, e.which,
                  target.type() == DeviceType::CUDA, out, baseline);
  if (!timing || !r.passed) return r;  // a wrong kernel's speed means nothing
  const bool gpu = target.type() == DeviceType::CUDA && !target.emulated();
  const int repeats = options.repeat > 0 ? options.repeat : gpu ? 50 : options.device == LabDevice::CPU ? 10 : 3;
  const double budget_seconds = options.repeat > 0 ? 0.0 : 2.0;  // an explicit --repeat is obeyed
  Arrays& arrays = timed ? *timed : check;
  time_variant(r, target, c, traffic, bf16 && arrays.bf16 ? *arrays.bf16 : arrays.plain, kernel, peaks, repeats,
               budget_seconds, out);
  return r;
}

}  // namespace

Report run(const Case& c, const Options& options) {
  std::FILE* out = options.out;
  Target target(options.device);  // first: --device emulator must switch before the registry is used
  Report report;
  Plan plan;
  if (!plan_run(c, options, target, report, plan)) return report;
  const bool grad = options.mode == Mode::Grad;
  if (grad && c.gradcheck) {  // an op built from ops
    run_gradcheck(c, target, plan, report, out);
    return report;
  }
  if (options.mode == Mode::Reference) {
    run_reference_only(c, options, plan, report);
    return report;
  }

  // The inputs and what the outputs should be, at the check size.
  Problem problem = make_problem(c, plan.check_dims, options);
  const bool apart = plan.check_dims != plan.dims;
  const bool f64 = options.dtype == kFloat64, in_bf16 = options.dtype == kBFloat16;
  std::optional<Problem> timed_problem;  // the inputs at the timed size, when it is not the check size
  if (apart) timed_problem = make_problem(c, plan.dims, options);
  const double traffic = traffic_bytes(c, apart ? *timed_problem : problem);
  say(out, "size: %s, seed %llu, %s moved per call", report.size.c_str(),
      static_cast<unsigned long long>(options.seed), bytes_text(traffic).c_str());
  if (c.flops) say(out, ", %.3g GFLOP", c.flops(plan.dims) / 1e9);
  say(out, "%s%s\n", f64 ? ", float64" : in_bf16 ? ", bfloat16" : "",
      options.misaligned ? ", misaligned (every array one element off)" : "");
  if (apart)
    say(out, "checked at %s (the float64 reference at the timed size would take long), timed at %s\n",
        report.check_size.c_str(), report.size.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const Expected e = expected_outputs(c, std::move(problem), grad, any_bf16_inputs(plan.variants),
                                      precisions_of(c, plan.variants, options), report, out);
  report.reference_seconds = seconds_since(t0);
  say(out, "mode %s: against %s (%.2f s)\n", mode_name(options.mode), report.reference.c_str(),
      report.reference_seconds);
  Peaks peaks;
  const bool timing = options.mode == Mode::Perf;
  if (timing) {
    if (options.measure_peak)
      peaks = measure_peaks(options.device, !c.report_flops, c.report_flops, c.peak_op);
    else
      peaks.bandwidth_how = peaks.flops_how = "not measured (Options::measure_peak off)";
    report.peak = c.report_flops ? peaks.tflops : peaks.bandwidth_gbs;
    print_peak(out, c, peaks);
  }

  // Each variant: check, then time what passed.
  Arrays check{DeviceProblem(target, e.problem, options.misaligned), std::nullopt};
  if (!e.rounded.arrays.empty()) check.bf16.emplace(target, e.rounded, options.misaligned);
  std::optional<Arrays> timed;
  if (timing && apart) {  // uploaded once: timing needs sizes, not the values a check compares
    timed.emplace(Arrays{DeviceProblem(target, *timed_problem, options.misaligned), std::nullopt});
    timed->plain.upload(target, *timed_problem);
  }
  for (const Variant& v : plan.variants)
    report.results.push_back(
        run_variant(c, v, options, plan, target, e, check, timed ? &*timed : nullptr, traffic, peaks));

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

}  // namespace brrr::lab
