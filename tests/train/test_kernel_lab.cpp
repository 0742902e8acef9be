// tests/train/test_kernel_lab.cpp: the kernel lab (chapter 11): its table covers every
// registered op, every CPU variant passes check and grad mode on every case's shapes (aligned
// and misaligned, float32 and float64), a wrong kernel or a wrong backward fails by name, and
// `brrr kernel-lab` and `brrr kernels` report clearly. Read before: lab/kernel_lab.h. The
// CUDA variants run the same loop in tests/emulator/test_lab_table.cpp and tests/cuda.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include "brrr/brrr.h"
#include "brrr/cuda.h"
#include "brrr/strings.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/emulator_memory.h"
#include "kernels/registry.h"
#include "lab/kernel_lab.h"
#include "tests/slow_cpu.h"

using namespace brrr;

namespace {

lab::Options quiet(lab::LabDevice device, lab::Mode mode = lab::Mode::Check) {
  lab::Options o;
  o.device = device;
  o.mode = mode;
  o.seed = 42;
  o.out = nullptr;
  return o;
}

std::string joined(const std::vector<std::string>& lines) { return join(lines, "\n"); }

// Test-only kernels under the op "lab_test_gelu": the real CPU GELU, and wrong ones. Their
// descriptors are the lab's way in, as kernels::op::gelu_forward is for the real op.
constexpr kernels::Op<kernels::unary_fn<float>> kTestGelu{"lab_test_gelu", kFloat32};
constexpr kernels::Op<kernels::unary_fn<double>> kTestGelu64{"lab_test_gelu", kFloat64};
constexpr kernels::Op<kernels::unary_backward_fn<float>> kTestGeluBackward{"lab_test_gelu_backward", kFloat32};
constexpr kernels::Op<kernels::unary_backward_fn<double>> kTestGeluBackward64{"lab_test_gelu_backward", kFloat64};

void broken_gelu(float* out, const float* x, std::int64_t n, kernels::Stream s) {  // one element off
  kernels::cpu::gelu_forward<float>(out, x, n, s);
  if (n > 0) out[n / 2] += 0.5f;
}
// The same as "kernels" of the emulated CUDA device: host code inside a (pretend) launch.
void host_gelu_on_device(float* out, const float* x, std::int64_t n, kernels::Stream s) {
  const simt::memory::Open launch;
  kernels::cpu::gelu_forward<float>(out, x, n, s);
}
void broken_gelu_on_device(float* out, const float* x, std::int64_t n, kernels::Stream s) {
  const simt::memory::Open launch;
  broken_gelu(out, x, n, s);
}
void nan_gelu(float* out, const float* x, std::int64_t n, kernels::Stream s) {  // a NaN at the end
  kernels::cpu::gelu_forward<float>(out, x, n, s);
  if (n > 0) out[n - 1] = std::numeric_limits<float>::quiet_NaN();
}
void lazy_gelu(float* out, const float* x, std::int64_t n, kernels::Stream s) {  // forgets the tail
  kernels::cpu::gelu_forward<float>(out, x, n - n / 4, s);
}
void stub_gelu(float*, const float*, std::int64_t, kernels::Stream) {  // an exercise not yet done
  throw Error("exercise ex99 (gelu): not written yet: fill in exercises/student/gelu.cpp");
}
// A backward that forgets the chain rule's inner factor d/dx of the cubic: a plausible slip,
// close enough to pass a glance, which finite differences catch.
template <class T>
void sloppy_gelu_backward(T* dx, const T* dout, const T* x, std::int64_t n, kernels::Stream) {
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = x[i], k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (v + 0.044715 * v * v * v));
    dx[i] = static_cast<T>(dout[i] * (0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * k));
  }
}

template <class T>
void call_test_gelu(kernels::unary_fn<T> f, const lab::Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), a.dims[0], a.stream);
}
template <class T>
void call_test_gelu_backward(kernels::unary_backward_fn<T> f, const lab::Args& a) {
  f(a.f<T>("dx"), a.f<T>("dout"), a.f<T>("x"), a.dims[0], a.stream);
}

lab::Case test_gelu_case() {
  lab::Case c = lab::find_case("gelu_forward");
  c.name = c.op = "lab_test_gelu";
  c.call = lab::call(kTestGelu, &call_test_gelu<float>, kTestGelu64, &call_test_gelu<double>);
  return c;
}

lab::Case test_gelu_backward_case() {
  lab::Case c = lab::find_case("gelu_backward");
  c.name = c.op = "lab_test_gelu_backward";
  c.call = lab::call(kTestGeluBackward, &call_test_gelu_backward<float>, kTestGeluBackward64,
                     &call_test_gelu_backward<double>);
  return c;
}

void register_test_kernels_on_cpu() {
  static std::once_flag once;
  std::call_once(once, [] {
    kernels::ops();  // build the registry first
    const DeviceType cpu = DeviceType::CPU;
    kernels::add(kTestGelu, cpu, "cpu", &kernels::cpu::gelu_forward<float>, 0);
    kernels::add(kTestGelu64, cpu, "cpu", &kernels::cpu::gelu_forward<double>, 0);
    kernels::add(kTestGelu, cpu, "broken", &broken_gelu, -1);
    kernels::add(kTestGelu, cpu, "nan", &nan_gelu, -2);
    kernels::add(kTestGelu, cpu, "lazy", &lazy_gelu, -3);
    kernels::add(kTestGelu, cpu, "student", &stub_gelu, -10);
    kernels::add(kTestGeluBackward, cpu, "cpu", &kernels::cpu::gelu_backward<float>, 0);
    kernels::add(kTestGeluBackward64, cpu, "cpu", &kernels::cpu::gelu_backward<double>, 0);
    kernels::add(kTestGeluBackward, cpu, "sloppy", &sloppy_gelu_backward<float>, -1);
    kernels::add(kTestGeluBackward64, cpu, "sloppy", &sloppy_gelu_backward<double>, -1);
  });
}

// Runs a shell command; returns its exit status and, in *output, stdout and stderr.
int run_command(const std::string& command, std::string* output) {
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n;
  output->clear();
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output->append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("kernel lab: every registered op has a case, and every case is complete") {
  cuda::use_emulator();  // the CUDA device's registrations too (the emulator registers them all)
  CHECK(cuda::is_available());
  const std::vector<std::string> missing = lab::ops_without_a_case();
  INFO("registered ops the lab has no case for: ", join(missing));
  CHECK(missing.empty());
  CHECK(kernels::ops().size() >= 48);  // 46 kernel ops and 2 built from ops when this was written
  std::set<std::string> names;
  for (const lab::Case& c : lab::cases()) {
    INFO(c.name);
    CHECK(names.insert(c.name).second);  // names are unique
    CHECK_FALSE(c.what.empty());
    CHECK_FALSE(c.chapter.empty());
    CHECK(bool(c.make));  // (function pointers: doctest cannot print them)
    CHECK(bool(c.reference));
    CHECK(bool(c.call.bind));
    CHECK(c.call.op == c.op_name());  // the descriptor names the case's op
    CHECK(bool(c.bytes));
    CHECK(c.report_flops == bool(c.flops));
    CHECK(c.shapes.size() >= 2);  // several shapes, ragged ones among them
    for (const lab::Dims& shape : c.shapes) CHECK(shape.size() == c.dim_names.size());
    for (lab::LabDevice d : {lab::LabDevice::CPU, lab::LabDevice::CUDA, lab::LabDevice::Emulator})
      CHECK(c.default_size(d).size() == c.dim_names.size());
    if (!c.grads.empty()) {
      CHECK(bool(c.loss));
      CHECK(c.grad_shape.size() == c.dim_names.size());
    }
  }
  // Every op with a backward kernel has its gradient checked: the backward cases carry grads.
  for (const char* op : {"relu_backward", "gelu_backward", "bias_gelu_backward", "max_dim_backward", "softmax_backward",
                         "log_softmax_backward", "cross_entropy_backward", "cross_entropy_fused", "layernorm_backward",
                         "embedding_backward", "attention_backward", "causal_attention", "linear_gelu"}) {
    INFO(op);
    CHECK(lab::find_case(op).has_grad());
  }
  // Byte counts are the minimal traffic: gelu reads x and writes out; AdamW moves 28 bytes a
  // parameter; the fused cross-entropy reads the logits once and writes dlogits once.
  CHECK(lab::find_case("gelu_forward").bytes({1000}) == 8000.0);
  CHECK(lab::find_case("adamw_step").bytes({1000}) == 28000.0);
  CHECK(lab::find_case("cross_entropy_fused").bytes({10, 100}) == 8.0 * 10 * 100 + 8.0 * 10);
  // ... in float32 bytes: a bf16 run moves half of them, a float64 run twice, and an op on bf16
  // data with float32 results moves each array at its own size (GB/s and "% of copy bandwidth"
  // of the bf16 kernels were once twice the truth).
  const auto traffic = [](const char* name, const lab::Dims& dims, DType dtype) {
    const lab::Case& c = lab::find_case(name);
    lab::Problem problem;
    problem.dims = dims;
    problem.dtype = dtype;
    lab::Random random(1);
    c.make(problem, random);
    return lab::traffic_bytes(c, problem);
  };
  CHECK(traffic("gelu_forward", {1000}, kBFloat16) == 4000.0);
  CHECK(traffic("gelu_forward", {1000}, kFloat64) == 16000.0);
  CHECK(traffic("layernorm_forward", {10, 100}, kFloat32) == lab::find_case("layernorm_forward").bytes({10, 100}));
  CHECK(traffic("matmul/bf16", {3, 5, 7}, kBFloat16) == 2.0 * (3 * 7 + 7 * 5) + 4.0 * 3 * 5);
  CHECK(traffic("attention_forward/bf16", {2, 8, 64}, kBFloat16) == 2.0 * 4 * (2 * 8 * 64) + 4.0 * 2 * 8);
  CHECK(lab::find_case("attention_backward").flops({1, 8, 4}) == 2.5 * lab::find_case("attention_forward").flops({1, 8, 4}));
  CHECK(lab::find_case("matmul/transposed").op_name() == "matmul");
  CHECK_THROWS_WITH_AS(lab::find_case("gleu"), doctest::Contains("unknown op 'gleu' (ops: fill, copy, cast"), Error);
}

TEST_CASE("kernel lab: sizes, devices and modes by name") {
  // Sizes as a user types them are the command line's (tests/apps/test_lab_sizes.cpp).
  const lab::Case& ln = lab::find_case("layernorm_forward");
  CHECK(ln.dim_names == std::vector<std::string>{"N", "C"});
  CHECK(lab::size_string(ln, {64, 768}) == "N=64 C=768");
  CHECK(lab::parse_device("emulator") == lab::LabDevice::Emulator);
  CHECK_THROWS_WITH_AS(lab::parse_device("tpu"), doctest::Contains("unknown device 'tpu' (devices: cpu, cuda, emulator)"),
                       Error);
  CHECK(lab::parse_mode("grad") == lab::Mode::Grad);
  CHECK_THROWS_WITH_AS(lab::parse_mode("fast"), doctest::Contains("unknown mode 'fast' (modes: check, grad, perf, reference)"), Error);
}

// Every CPU variant of every case, on each of its shapes, aligned and misaligned, in float32
// and float64 (in float64 the references hold kernels to about 1e-9: a wrong formula cannot
// hide behind float32 rounding).
TEST_CASE("kernel lab: every CPU variant passes check mode on every shape") {
  int runs = 0;
  for (const lab::Case& c : lab::cases())
    for (DType dtype : {kFloat32, kFloat64}) {
      // matmul:bf16 (float32 data only); the ops on bf16 data are checked in bf16 beside the
      // emulator's (tests/emulator/test_lab_table.cpp)
      if (c.call.one_dtype && is_floating_point(c.call.dtype) && c.call.dtype != dtype) continue;
      std::vector<std::string> notes;
      const std::vector<std::string> failures =
          lab::run_shapes(c, lab::LabDevice::CPU, lab::Mode::Check, dtype, &notes, &runs);
      INFO(c.name, " ", dtype_name(dtype), "\n", joined(failures));
      CHECK(failures.empty());
      CHECK(notes.empty());  // every op has CPU kernels in both dtypes
    }
  CHECK(runs > 300);
}

// linear_rows/bf16 (bf16 weights, float32 x and y: the Decoder's --dtype bf16) has CPU kernels
// only, so the emulator's bf16 table does not run it: its variants here, every shape (the tile
// unit's `amx` where the CPU has one).
TEST_CASE("kernel lab: linear_rows/bf16's CPU variants pass check mode on every shape") {
  int runs = 0;
  std::vector<std::string> notes;
  const lab::Case& c = lab::find_case("linear_rows/bf16");
  const std::vector<std::string> failures = lab::run_shapes(c, lab::LabDevice::CPU, lab::Mode::Check, kBFloat16,
                                                            &notes, &runs);
  INFO(joined(failures));
  CHECK(failures.empty());
  CHECK(notes.empty());
  CHECK(runs >= static_cast<int>(c.shapes.size()));
}

TEST_CASE("kernel lab: every CPU backward passes grad mode (finite differences)") {
  for (const lab::Case& c : lab::cases()) {
    if (!c.has_grad()) continue;
    for (DType dtype : {kFloat32, kFloat64}) {
      int runs = 0;
      const std::vector<std::string> failures = lab::run_shapes(c, lab::LabDevice::CPU, lab::Mode::Grad, dtype, nullptr, &runs);
      INFO(c.name, " ", dtype_name(dtype), "\n", joined(failures));
      CHECK(failures.empty());
      CHECK(runs >= 1);
    }
  }
}

TEST_CASE("kernel lab: grad mode fails a backward that drops a term") {
  register_test_kernels_on_cpu();
  lab::Options o = quiet(lab::LabDevice::CPU, lab::Mode::Grad);
  o.dtype = kFloat64;
  const lab::Report report = lab::run(test_gelu_backward_case(), o);
  REQUIRE(report.results.size() == 2);
  CHECK(report.reference == "finite differences of the forward's float64 reference");
  CHECK(report.results[0].variant == "cpu");
  CHECK(report.results[0].passed);
  CHECK(report.results[0].max_rel_error < 1e-6);
  CHECK_FALSE(report.results[1].passed);
  CHECK(doctest::String(joined(report.failures()).c_str()) ==
        doctest::Contains("lab_test_gelu_backward variant 'sloppy' on cpu: dx["));
  // Check mode catches it too, against the reference written from gelu's derivative (at a
  // ragged size: the CPU's default is the bandwidth bar's, 31 s of this test on 2 cores).
  o.mode = lab::Mode::Check;
  o.size = {1003};
  CHECK_FALSE(lab::run(test_gelu_backward_case(), o).passed());
  // A forward op has no backward of its own to check: grad mode says so and passes.
  o.mode = lab::Mode::Grad;
  const lab::Report forward = lab::run(lab::find_case("gelu_forward"), o);
  CHECK(forward.results.empty());
  CHECK(forward.note == "gelu_forward has no backward of its own to check");
}

TEST_CASE("kernel lab: a wrong kernel fails the check, naming the variant and the element") {
  register_test_kernels_on_cpu();
  const lab::Case c = test_gelu_case();
  lab::Options o = quiet(lab::LabDevice::CPU);
  o.size = {1003};
  const lab::Report report = lab::run(c, o);
  REQUIRE(report.results.size() == 5);
  CHECK_FALSE(report.passed());
  std::map<std::string, lab::VariantResult> by_name;
  for (const lab::VariantResult& r : report.results) by_name[r.variant] = r;

  CHECK(by_name["cpu"].passed);
  CHECK(by_name["cpu"].is_default);
  CHECK(by_name["cpu"].max_rel_error < 1e-6);

  const lab::VariantResult& broken = by_name["broken"];
  CHECK_FALSE(broken.passed);
  CHECK(contains(broken.failure, "out[501] = "));
  CHECK(contains(broken.failure, "relative error"));
  CHECK(contains(broken.failure, "(1 of 1003 elements of out fail)"));
  CHECK(broken.max_abs_error == doctest::Approx(0.5).epsilon(1e-3));

  CHECK_FALSE(by_name["nan"].passed);
  CHECK(contains(by_name["nan"].failure, "out[1002] = nan"));
  CHECK_FALSE(by_name["lazy"].passed);  // outputs start as NaN: the unwritten tail shows
  CHECK(contains(by_name["lazy"].failure, "out[753] = nan"));

  // An exercise stub that is not written yet is listed, not failed (unless asked for by name).
  CHECK(by_name["student"].passed);
  CHECK(by_name["student"].not_written);
  CHECK_FALSE(by_name["student"].checked);

  const std::string failures = joined(report.failures());
  CHECK(contains(failures, "lab_test_gelu variant 'broken' on cpu: out[501]"));
  CHECK(contains(failures, "lab_test_gelu variant 'nan' on cpu: out[1002] = nan"));
  CHECK_FALSE(contains(failures, "variant 'cpu'"));
  CHECK_FALSE(contains(failures, "variant 'student'"));

  // One variant alone; an unknown one lists those that exist.
  o.variant = "cpu";
  CHECK(lab::run(c, o).passed());
  o.variant = "student";
  const lab::Report stub = lab::run(c, o);
  CHECK_FALSE(stub.passed());
  CHECK(contains(joined(stub.failures()), "variant 'student' on cpu: the call threw: exercise ex99 (gelu): not written yet"));
  o.variant = "fast";
  CHECK_THROWS_WITH_AS(lab::run(c, o),
                       doctest::Contains("has no variant 'fast' on cpu (variants: cpu, broken, nan, lazy, student)"), Error);
  // The lab leaves the registry's selection as it found it.
  CHECK(kernels::selected("lab_test_gelu", DeviceType::CPU, kFloat32) == "cpu");
  CHECK(kernels::selected("matmul", DeviceType::CPU, kFloat64) == "eigen");
}

TEST_CASE("kernel lab: CUDA variants on the emulator are uploaded, checked, downloaded and timed") {
  // A host function stands in for a CUDA kernel here, so this exercises the device path
  // whatever kernels/cuda holds today. The emulator's device memory is host address space
  // that host code may only touch while a launch or a copy runs, so the stand-ins open it, as
  // a launch does (kernels/cuda/emulator_memory.h).
  cuda::use_emulator();
  register_test_kernels_on_cpu();
  static std::once_flag once;
  std::call_once(once, [] {
    kernels::add(kTestGelu, DeviceType::CUDA, "host", &host_gelu_on_device, 1);
    kernels::add(kTestGelu, DeviceType::CUDA, "broken", &broken_gelu_on_device, 0);
  });
  lab::Options o = quiet(lab::LabDevice::Emulator, lab::Mode::Perf);
  o.size = {2000};
  o.repeat = 2;
  const lab::Report report = lab::run(test_gelu_case(), o);
  REQUIRE(report.results.size() == 2);
  CHECK(report.device == "cuda (emulator)");
  const lab::VariantResult& host = report.results[0];
  CHECK(host.variant == "host");
  CHECK(host.passed);
  CHECK(host.timed);
  CHECK(host.rate > 0);
  CHECK(host.percent_of_peak < 0);  // no peaks on the emulator
  CHECK_FALSE(report.results[1].passed);
  CHECK_FALSE(report.results[1].timed);  // a wrong kernel is not timed
  CHECK(contains(joined(report.failures()), "lab_test_gelu variant 'broken' on cuda (emulator): out[1000]"));
}

TEST_CASE("kernel lab: CPU timings and peaks") {
  lab::Options o = quiet(lab::LabDevice::CPU, lab::Mode::Perf);
  o.size = {1 << 16};
  o.repeat = 3;
  const lab::Report report = lab::run(lab::find_case("gelu_forward"), o);
  REQUIRE(report.results.size() >= 1);
  const lab::VariantResult& r = report.results[0];
  CHECK(r.passed);
  CHECK(r.timed);
  CHECK(r.min_ms > 0);
  CHECK(r.min_ms <= r.median_ms);
  CHECK(r.rate > 0);
  CHECK(r.percent_of_peak > 0);
  const lab::Peaks peaks = lab::measure_peaks(lab::LabDevice::CPU, true, false);
  CHECK(peaks.bandwidth_gbs > 0);
  CHECK(contains(peaks.bandwidth_how, "memcpy"));
}

TEST_CASE("kernel lab: a size whose reference would take long is checked smaller and timed at its own") {
  // The first size (independent rows, heads, images) is halved until the FLOPs are <= 2^32;
  // the others stay, so the check still sums over the bar's K and T.
  const lab::Case& matmul = lab::find_case("matmul");
  CHECK(matmul.check_size({4096, 4096, 4096}) == lab::Dims{128, 4096, 4096});
  CHECK(matmul.check_size({67, 45, 33}) == lab::Dims{67, 45, 33});
  CHECK(matmul.check_size({4096, 4096, 4096}, 67108864.0) == lab::Dims{2, 4096, 4096});  // a lower threshold: 2^26
  CHECK_THROWS_WITH_AS(matmul.check_size({67, 45, 33}, 0.0), doctest::Contains("must be at least 1, not 0"), Error);
  const lab::Case& attention = lab::find_case("attention_forward");
  const lab::Dims checked = attention.check_size({384, 1024, 64});
  CHECK(checked[0] < 384);
  CHECK(checked[1] == 1024);
  CHECK(checked[2] == 64);
  CHECK(attention.flops(checked) <= 4294967296.0);
  // Bandwidth ops count no FLOPs: their first size is halved until the traffic is <= 2^28 bytes.
  const lab::Case& gelu = lab::find_case("gelu_forward");
  CHECK(gelu.check_size({1 << 20}) == lab::Dims{1 << 20});
  const lab::Dims gelu_checked = gelu.check_size({1 << 26});
  CHECK(gelu_checked[0] < (1 << 26));
  CHECK(gelu.bytes(gelu_checked) <= 268435456.0);
  CHECK(gelu.bytes({gelu_checked[0] * 2}) > 268435456.0);  // halved no further than needed
  const lab::Dims ce = lab::find_case("cross_entropy_fused").check_size({8192, 50304});
  CHECK(ce[0] < 8192);
  CHECK(ce[1] == 50304);  // the row length the bar sums over stays

  lab::Options o = quiet(lab::LabDevice::CPU, lab::Mode::Perf);
  // Just over 2^32 FLOPs (2 * 2049 * 1024 * 1024), so checked at M = 1025, half the work of the
  // 2^33 it was timed at before (125 s of the sanitizer pass, 86% of it Eigen's kernel under
  // AddressSanitizer: perf, 2026-11-28), and an odd M on the way. Under BRRR_SLOW_CPU=1 (qemu,
  // tests/slow_cpu.h, where this size ran past ctest's 600 s) the same rule a 64th the size:
  // the threshold lowered to 2^26 and N = K = 128, just over it, so again checked at M = 1025.
  const std::int64_t nk = test::sized<std::int64_t>(1024, 128);
  if (test::slow_cpu()) {
    o.check_flops = 67108864.0;  // 2^26
    o.measure_peak = false;      // the CPU's peak: 120 GFLOP of matmul (kernel_lab.h)
  }
  o.size = {2049, nk, nk};
  o.repeat = 1;
  // One variant is enough to see where it is checked and timed; the naive loop alone took 15 s
  // at twice these FLOPs on 2 cores. `every CPU variant passes check mode` checks them all.
  o.variant = "eigen";
  const std::string n_k = " N=" + std::to_string(nk) + " K=" + std::to_string(nk);
  const lab::Report report = lab::run(matmul, o);
  CHECK(report.size == "M=2049" + n_k);
  CHECK(report.check_size == "M=1025" + n_k);
  REQUIRE(report.results.size() >= 1);
  for (const lab::VariantResult& r : report.results) {
    CHECK_MESSAGE(r.passed, r.variant, ": ", r.failure);
    CHECK(r.checked);
    CHECK(r.timed);
    // The rate is the timed size's FLOPs over the median time.
    CHECK(r.rate == doctest::Approx(2.0 * 2049 * nk * nk / (r.median_ms * 1e-3) / 1e12));
    CHECK((r.percent_of_peak > 0) == o.measure_peak);  // -1 where the peak was not measured
  }
  CHECK(contains(lab::json_lines(report), "\"check_size\":\"M=1025" + n_k + "\""));

  // Reference mode runs no kernel: it times the inputs and the reference a check would need.
  o.mode = lab::Mode::Reference;
  const lab::Report timed = lab::run(matmul, o);
  CHECK(timed.results.empty());
  CHECK(timed.reference_seconds > 0);
  CHECK(timed.check_size == "M=1025" + n_k);
}

TEST_CASE("cli: brrr kernel-lab reports mistakes and runs small tables") {
  const std::string b = BRRR_CLI;
  std::string out;
  CHECK(run_command(b + " kernel-lab --help", &out) == 0);
  CHECK(contains(out, "layernorm_forward (N, C)"));
  CHECK(contains(out, "--variant"));

  CHECK(run_command(b + " kernel-lab gleu --device cpu", &out) == 1);
  CHECK(contains(out, "unknown op 'gleu' (ops: fill, copy"));
  CHECK(run_command(b + " kernel-lab gelu_forward --device cpu --bogus", &out) != 0);
  CHECK(contains(out, "--bogus"));
  CHECK(run_command(b + " kernel-lab gelu_forward --device tpu", &out) != 0);
  CHECK(contains(out, "--device"));
  CHECK(run_command(b + " kernel-lab gelu_forward --device cpu --size 12k", &out) == 1);
  CHECK(contains(out, "not a positive integer"));
  CHECK(run_command(b + " kernel-lab gelu_forward --device cpu --variant fast", &out) == 1);
  CHECK(contains(out, "has no variant 'fast' on cpu (variants: cpu)"));

  // --device cuda without a GPU is a clear error (the ctest test labelled cuda is skipped on it).
  if (!cuda::gpu_available()) {
    CHECK(run_command(b + " kernel-lab gelu_forward --device cuda --size 1000", &out) == 1);
    CHECK(contains(out, "no CUDA GPU"));
    CHECK(contains(out, "--device emulator"));
  }

  CHECK(run_command(b + " kernel-lab gelu_forward --device cpu --size 2^14 --repeat 2 --seed 7", &out) == 0);
  CHECK(contains(out, "seed 7"));
  CHECK(contains(out, "GB/s |"));
  CHECK(contains(out, "cpu *"));
  CHECK(contains(out, "ok "));

  // The modes, the dtype and misaligned arrays from the command line.
  CHECK(run_command(b + " kernel-lab layernorm_backward --device cpu --mode grad", &out) == 0);
  CHECK(contains(out, "finite differences"));
  CHECK(run_command(b + " kernel-lab gelu_forward --device cpu --mode check --dtype float64 --misaligned --size 1003",
                    &out) == 0);
  CHECK(contains(out, "float64"));
  CHECK(contains(out, "misaligned"));
  CHECK_FALSE(contains(out, "GB/s |"));  // check mode times nothing

  // --list: the lab's cases; `brrr kernels`: the registry, with the default and the about lines.
  CHECK(run_command(b + " kernel-lab --list", &out) == 0);
  CHECK(contains(out, "check_indices (N, limit) [ch. 17]"));
  CHECK(contains(out, "layernorm_backward (N, C) [ch. 13, grad]"));
  CHECK(run_command(b + " kernels", &out) == 0);
  // A line per set of dtypes with the same variants, in DType's order: "cpu float32: " where an
  // AVX-512 variant is float32's alone, else "cpu float32, float64: ", on every machine first;
  // matmul on bf16 data after them; then the bf16 products autocast calls, matmul:bf16.
  CHECK(contains(out, "matmul\n  cpu float32"));
  CHECK(contains(out, "\n  cpu bfloat16: cpu*\n"));
  CHECK(contains(out, "matmul:bf16\n  cpu float32: "));
  CHECK(contains(out, "naive: the textbook triple loop"));
  CHECK(contains(out, "causal_attention\n"));
  CHECK(run_command(b + " kernels gelu_forward --emulator", &out) == 0);
  CHECK(contains(out, "cuda float32: float4*, naive"));
  CHECK(contains(out, "float4: variant 2"));
  CHECK(run_command(b + " kernels gleu", &out) == 1);
  CHECK(contains(out, "no op 'gleu' (ops: "));

  // The emulator: a table when the op has CUDA kernels, a clear note when it has none yet.
  for (const std::string op : {"matmul", "gelu_forward"}) {
    const std::string size = op == "matmul" ? "32x32x32" : "1000";
    CHECK(run_command(b + " kernel-lab " + op + " --device emulator --size " + size + " --repeat 2", &out) == 0);
    CHECK(contains(out, "SIMT emulator"));
    if (contains(out, "no variant of " + op + " on cuda")) {
      MESSAGE("no CUDA kernel of ", op, " yet: ", out);
    } else {
      CHECK(contains(out, "% of peak"));
      CHECK(contains(out, "not shown on the emulator"));
    }
  }
}
