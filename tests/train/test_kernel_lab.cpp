// tests/train/test_kernel_lab.cpp: the kernel lab (chapter 10): its checker passes correct
// kernels, fails wrong ones by name, and `brrr kernel-lab` reports mistakes clearly.
// Read before: lab/kernel_lab.h.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>

#include "brrr/brrr.h"
#include "brrr/cuda.h"
#include "lab/kernel_lab.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/emulator_memory.h"
#include "kernels/registry.h"

using namespace brrr;

namespace {

// Small, ragged sizes (no multiple of 4 or 32 where the op allows), so the tests run in
// seconds on the emulator and exercise every kernel's tail handling.
lab::Dims test_size(const lab::Case& c) {
  static const std::map<std::string, lab::Dims> sizes = {
      {"matmul", {67, 45, 33}},
      {"gelu_forward", {1003}},
      {"gelu_backward", {1003}},
      {"bias_gelu_forward", {7, 100}},
      {"layernorm_forward", {9, 100}},
      {"layernorm_backward", {9, 100}},
      {"residual_layernorm_forward", {9, 100}},
      {"softmax_forward", {9, 100}},
      {"cross_entropy_forward", {9, 300}},
      {"cross_entropy_backward", {9, 300}},
      {"cross_entropy_fused", {9, 300}},
      {"adamw_step", {1003}},
      {"adamw_multi_step", {1003}},
      {"attention_forward", {2, 37, 64}},
      {"attention_backward", {2, 37, 64}},
      {"add", {1003}},
      {"copy", {1003}},
      {"sum_dim", {2, 37, 33}},
      {"embedding_forward", {9, 20, 50}},
  };
  auto it = sizes.find(c.op);
  return it != sizes.end() ? it->second : c.emulator_size;
}

lab::Options quiet(lab::LabDevice device) {
  lab::Options o;
  o.device = device;
  o.seed = 42;
  o.time = false;
  o.out = nullptr;
  return o;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

// Checks every variant of every op on one device, skipping (with a message) what is missing.
void check_every_op(lab::LabDevice device) {
  for (const lab::Case& c : lab::cases()) {
    lab::Options o = quiet(device);
    o.size = test_size(c);
    const lab::Report report = lab::run(c, o);
    if (!report.note.empty()) {
      MESSAGE("skipped: ", report.note);
      continue;
    }
    if (report.reference.empty()) MESSAGE(c.op, ": no CPU reference yet; only checked for NaN and inf");
    INFO(joined(report.failures()));
    CHECK(report.passed());
  }
}

// Test-only kernels under the op name "lab_test_gelu": the real CPU GELU, and three wrong ones.
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

lab::Case test_gelu_case() {
  lab::Case c = lab::find_case("gelu_forward");
  c.op = "lab_test_gelu";
  return c;
}

void register_test_gelu_on_cpu() {
  static std::once_flag once;
  std::call_once(once, [] {
    kernels::ops();  // build the registry first
    kernels::add("lab_test_gelu", DeviceType::CPU, kFloat32, "cpu", &kernels::cpu::gelu_forward<float>, 0);
    kernels::add("lab_test_gelu", DeviceType::CPU, kFloat64, "cpu", &kernels::cpu::gelu_forward<double>, 0);
    kernels::add("lab_test_gelu", DeviceType::CPU, kFloat32, "broken", &broken_gelu, -1);
    kernels::add("lab_test_gelu", DeviceType::CPU, kFloat32, "nan", &nan_gelu, -2);
    kernels::add("lab_test_gelu", DeviceType::CPU, kFloat32, "lazy", &lazy_gelu, -3);
    kernels::add("lab_test_gelu", DeviceType::CPU, kFloat32, "student", &stub_gelu, -10);
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

TEST_CASE("kernel lab: the table covers the ops and every case is complete") {
  for (const char* op : {"matmul", "gelu_forward", "gelu_backward", "bias_gelu_forward", "layernorm_forward",
                         "layernorm_backward", "residual_layernorm_forward", "softmax_forward", "cross_entropy_forward",
                         "cross_entropy_backward", "cross_entropy_fused", "adamw_step", "adamw_multi_step",
                         "attention_forward", "attention_backward", "add", "copy", "sum_dim", "embedding_forward"})
    CHECK(lab::find_case(op).op == op);
  for (const lab::Case& c : lab::cases()) {
    INFO(c.op);
    CHECK(bool(c.make));  // (function pointers: doctest cannot print them)
    CHECK(bool(c.call_float));
    CHECK(bool(c.call_double));
    CHECK(bool(c.bytes));
    CHECK(c.report_flops == bool(c.flops));
    for (lab::LabDevice d : {lab::LabDevice::CPU, lab::LabDevice::CUDA, lab::LabDevice::Emulator})
      CHECK(c.default_size(d).size() == c.dim_names.size());
  }
  // Byte counts are the minimal traffic: gelu reads x and writes out; AdamW moves 28 bytes a
  // parameter; the fused cross-entropy reads the logits once and writes dlogits once.
  CHECK(lab::find_case("gelu_forward").bytes({1000}) == 8000.0);
  CHECK(lab::find_case("adamw_step").bytes({1000}) == 28000.0);
  CHECK(lab::find_case("cross_entropy_fused").bytes({10, 100}) == 8.0 * 10 * 100 + 8.0 * 10);
  CHECK(lab::find_case("attention_backward").flops({1, 8, 4}) == 2.5 * lab::find_case("attention_forward").flops({1, 8, 4}));
  CHECK_THROWS_WITH_AS(lab::find_case("gelu"), doctest::Contains("unknown op 'gelu' (ops: matmul, gelu_forward"), Error);
}

TEST_CASE("kernel lab: sizes on the command line") {
  const lab::Case& ln = lab::find_case("layernorm_forward");
  CHECK(lab::parse_size(ln, "1024x768", {1, 1}) == lab::Dims{1024, 768});
  CHECK(lab::parse_size(ln, "1024,768", {1, 1}) == lab::Dims{1024, 768});
  CHECK(lab::parse_size(ln, "C=1024", {64, 768}) == lab::Dims{64, 1024});
  CHECK(lab::parse_size(ln, "c=2^10,N=3", {64, 768}) == lab::Dims{3, 1024});
  CHECK(lab::parse_size(lab::find_case("matmul"), "256", {}) == lab::Dims{256, 256, 256});
  CHECK(lab::size_string(ln, {64, 768}) == "N=64 C=768");
  CHECK_THROWS_WITH_AS(lab::parse_size(ln, "1x2x3", {1, 1}), doctest::Contains("takes 2 sizes (N, C)"), Error);
  CHECK_THROWS_WITH_AS(lab::parse_size(ln, "K=5", {1, 1}), doctest::Contains("has no size 'K' (sizes: N, C)"), Error);
  CHECK_THROWS_WITH_AS(lab::parse_size(ln, "12x", {1, 1}), doctest::Contains("size '' is not a positive integer"), Error);
  CHECK_THROWS_WITH_AS(lab::parse_size(ln, "0x5", {1, 1}), doctest::Contains("size '0'"), Error);
  CHECK(lab::parse_device("emulator") == lab::LabDevice::Emulator);
  CHECK_THROWS_WITH_AS(lab::parse_device("tpu"), doctest::Contains("unknown device 'tpu' (devices: cpu, cuda, emulator)"),
                       Error);
}

TEST_CASE("kernel lab: every CPU variant passes its check") {
  check_every_op(lab::LabDevice::CPU);
}

TEST_CASE("kernel lab: the emulator's CUDA variants pass their check (ops without one are skipped)") {
  cuda::use_emulator();
  check_every_op(lab::LabDevice::Emulator);
}

TEST_CASE("kernel lab: a wrong kernel fails the check, naming the variant and the element") {
  register_test_gelu_on_cpu();
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
  register_test_gelu_on_cpu();
  static std::once_flag once;
  std::call_once(once, [] {
    kernels::add("lab_test_gelu", DeviceType::CUDA, kFloat32, "host", &host_gelu_on_device, 1);
    kernels::add("lab_test_gelu", DeviceType::CUDA, kFloat32, "broken", &broken_gelu_on_device, 0);
  });
  lab::Options o = quiet(lab::LabDevice::Emulator);
  o.size = {2000};
  o.time = true;
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
  lab::Options o = quiet(lab::LabDevice::CPU);
  o.size = {1 << 16};
  o.time = true;
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

TEST_CASE("cli: brrr kernel-lab reports mistakes and runs small tables") {
  const std::string b = BRRR_CLI;
  std::string out;
  CHECK(run_command(b + " kernel-lab --help", &out) == 0);
  CHECK(contains(out, "layernorm_forward (N, C)"));
  CHECK(contains(out, "--variant"));

  CHECK(run_command(b + " kernel-lab gelu --device cpu", &out) == 1);
  CHECK(contains(out, "unknown op 'gelu' (ops: matmul, gelu_forward"));
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
