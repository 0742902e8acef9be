// tests/train/test_lab_baseline.cpp: the kernel lab's judgement of low-precision variants
// (chapters 11 and 18): a bf16 or tf32 variant passes when its error against the float64
// reference is at most twice its baseline's (Case::baseline) plus the op's float32 tolerance.
// Here, on the CPU: test-only bf16 variants that round no more than the baseline pass near
// 1x, and planted losses of precision (an accumulator kept in bf16) fail by far; the lab's
// baselines agree with PyTorch's bf16 arithmetic on the same inputs. The 50 seeds of every
// shipped CUDA variant are tests/emulator/test_lab_table.cpp's. Read before: lab/kernel_lab.h.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "brrr/bfloat16.h"
#include "brrr/kernels.h"
#include "brrr/strings.h"
#include "kernels/registry.h"
#include "lab/kernel_lab.h"
#include "tests/models/test_util.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

float bf16(float x) { return round_to_bf16(x); }

// --- Test-only bf16 GEMMs: out (M, N) = bf16(a) @ bf16(b), float32 out ------------------------
// A slot of bf16 products (as matmul:bf16): its variants are judged against the bf16 baseline.
constexpr auto kTestMatmul = kernels::Op<kernels::matmul_fn<float>>{"lab_test_matmul", kFloat32}.autocast();

// BF16_SUM: the planted loss, the running sum rounded to bf16 after every product (a bf16
// accumulator) where a tensor core keeps float32.
template <bool BF16_SUM>
void test_matmul_bf16(float* out, const float* a, const float* b, const kernels::MatmulShape& s, kernels::Stream) {
  for (std::int64_t i = 0; i < s.M; ++i)
    for (std::int64_t j = 0; j < s.N; ++j) {
      float sum = 0.0f;
      for (std::int64_t k = 0; k < s.K; ++k) {
        sum += bf16(a[i * s.K + k]) * bf16(b[k * s.N + j]);
        if (BF16_SUM) sum = bf16(sum);
      }
      out[i * s.N + j] = sum;
    }
}

void call_test_matmul(kernels::matmul_fn<float> f, const lab::Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  f(a.f<float>("out"), a.f<float>("a"), a.f<float>("b"), s, a.stream);
}

// --- Test-only bf16 attention forwards (one head at a time, the causal mask) ------------------
constexpr auto kTestAttention = kernels::Op<kernels::attention_forward_fn<float>>{"lab_test_attention", kFloat32}.autocast();

enum class Loss { kNone, kBF16Accumulator, kScoresInBF16 };

// The baseline's recipe in float32: bf16 q, k, v; S in float32; P = softmax(S) rounded to bf16
// for P v; out summed in float32. kBF16Accumulator rounds out's running sums to bf16 (planted);
// kScoresInBF16 rounds S to bf16 before the softmax (what PyTorch's bf16 math path stores).
template <Loss LOSS>
void test_attention_bf16(float* out, float* lse, const float* q, const float* k, const float* v,
                         const kernels::AttentionShape& shape, kernels::Stream) {
  const std::int64_t BH = shape.BH, T = shape.T, hs = shape.hs;
  const float scale = static_cast<float>(shape.scale);
  std::vector<float> s(T), o(hs);
  for (std::int64_t b = 0; b < BH; ++b)
    for (std::int64_t i = 0; i < T; ++i) {
      const std::int64_t row = (b * T + i) * hs;
      float max = -INFINITY;
      for (std::int64_t j = 0; j <= i; ++j) {
        float dot = 0.0f;
        for (std::int64_t c = 0; c < hs; ++c) dot += bf16(q[row + c]) * bf16(k[(b * T + j) * hs + c]);
        s[j] = LOSS == Loss::kScoresInBF16 ? bf16(dot * scale) : dot * scale;
        max = std::max(max, s[j]);
      }
      float sum = 0.0f;
      for (std::int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - max);
      const float l = max + std::log(sum);
      lse[b * T + i] = l;
      std::fill(o.begin(), o.end(), 0.0f);
      for (std::int64_t j = 0; j <= i; ++j) {
        const float p = bf16(std::exp(s[j] - l));
        for (std::int64_t c = 0; c < hs; ++c) {
          o[c] += p * bf16(v[(b * T + j) * hs + c]);
          if (LOSS == Loss::kBF16Accumulator) o[c] = bf16(o[c]);
        }
      }
      std::copy(o.begin(), o.end(), out + row);
    }
}

void call_test_attention(kernels::attention_forward_fn<float> f, const lab::Args& a) {
  f(a.f<float>("out"), a.f<float>("lse"), a.f<float>("q"), a.f<float>("k"), a.f<float>("v"),
    kernels::AttentionShape::of(a.dims[0], a.dims[1], a.dims[2]), a.stream);
}

void register_test_variants() {
  static std::once_flag once;
  std::call_once(once, [] {
    kernels::ops();  // build the registry first
    const kernels::VariantMeta meta;  // bf16 inputs: the slot (autocast()) says so
    const DeviceType cpu = DeviceType::CPU;
    kernels::add(kTestMatmul, cpu, "rounded", &test_matmul_bf16<false>, 10, meta);
    kernels::add(kTestMatmul, cpu, "bf16_accumulator", &test_matmul_bf16<true>, 0, meta);
    kernels::add(kTestAttention, cpu, "rounded", &test_attention_bf16<Loss::kNone>, 10, meta);
    kernels::add(kTestAttention, cpu, "bf16_accumulator", &test_attention_bf16<Loss::kBF16Accumulator>, 0, meta);
    kernels::add(kTestAttention, cpu, "scores_in_bf16", &test_attention_bf16<Loss::kScoresInBF16>, -1, meta);
  });
}

lab::Case test_matmul_case() {
  lab::Case c = lab::find_case("matmul:bf16");
  c.call = lab::call(kTestMatmul, &call_test_matmul, kTestMatmul, &call_test_matmul);
  c.name = c.op = c.call.op;  // "lab_test_matmul:bf16"
  return c;
}

lab::Case test_attention_case() {
  lab::Case c = lab::find_case("attention_forward:bf16");
  c.call = lab::call(kTestAttention, &call_test_attention, kTestAttention, &call_test_attention);
  c.name = c.op = c.call.op;
  return c;
}

lab::Report check(const lab::Case& c, const lab::Dims& size, std::uint64_t seed, const std::string& variant = "all") {
  lab::Options o;
  o.device = lab::LabDevice::CPU;
  o.mode = lab::Mode::Check;
  o.size = size;
  o.seed = seed;
  o.variant = variant;
  o.out = nullptr;
  return lab::run(c, o);
}

const lab::VariantResult& result(const lab::Report& report, const std::string& variant) {
  for (const lab::VariantResult& r : report.results)
    if (r.variant == variant) return r;
  FAIL("no result for ", variant);
  return report.results.front();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("lab baseline: tf32 rounds to nearest with ties away from zero, keeping 10 bits of mantissa") {
  CHECK(lab::round_to_tf32(1.0f) == 1.0f);
  CHECK(lab::round_to_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f);  // the tie: away from zero
  CHECK(lab::round_to_tf32(-(1.0f + 0x1p-11f)) == -(1.0f + 0x1p-10f));
  CHECK(lab::round_to_tf32(1.0f + 0x1p-12f) == 1.0f);
  CHECK(lab::round_to_tf32(1.0f + 3 * 0x1p-12f) == 1.0f + 0x1p-10f);
  CHECK(std::isinf(lab::round_to_tf32(INFINITY)));
  CHECK(std::isnan(lab::round_to_tf32(NAN)));
}

TEST_CASE("lab baseline: a bf16 GEMM that sums in float32 passes, one whose accumulator is bf16 fails, on every seed") {
  register_test_variants();
  const lab::Case c = test_matmul_case();
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const lab::Report report = check(c, {33, 45, 128}, seed);
    const lab::VariantResult& good = result(report, "rounded");
    const lab::VariantResult& bad = result(report, "bf16_accumulator");
    INFO("seed ", seed, ": ", good.failure, " / ", bad.failure);
    CHECK(good.passed);
    CHECK(good.precision == "bf16");
    CHECK(good.max_rel_error < 1e-5);  // the baseline is the reference: float32's sums are all that differ
    CHECK_FALSE(bad.passed);
    CHECK(bad.max_rel_error > 1e-3);
    CHECK(contains(bad.failure, "x the bf16 baseline's"));
  }
}

TEST_CASE("lab baseline: bf16 attention with P rounded as the baseline passes near 1x, a bf16 accumulator fails") {
  register_test_variants();
  const lab::Case c = test_attention_case();
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    const lab::Report report = check(c, {2, 256, 32}, seed);  // rows of up to 256 keys
    const lab::VariantResult &good = result(report, "rounded"), &bad = result(report, "bf16_accumulator"),
                             &scores = result(report, "scores_in_bf16");
    INFO("seed ", seed, ": ratios ", good.baseline_ratio, ", ", bad.baseline_ratio, ", ", scores.baseline_ratio, ": ",
         bad.failure);
    CHECK(good.passed);
    CHECK(good.baseline_rel_error > 1e-3);  // bf16's own error: P rounded
    CHECK(good.baseline_ratio < 1.5);
    CHECK_FALSE(bad.passed);
    CHECK(bad.baseline_ratio > 2.0);
    MESSAGE("seed ", seed, ": S rounded to bf16 (PyTorch's bf16 math path) ", scores.baseline_ratio,
            "x the baseline's error, ", std::string(scores.passed ? "passes" : "fails"));
  }
}

TEST_CASE("lab baseline: the report and the table print both errors") {
  register_test_variants();
  const std::string path = std::filesystem::temp_directory_path() / "brrr_lab_baseline_report.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  lab::Options o;
  o.device = lab::LabDevice::CPU;
  o.mode = lab::Mode::Check;
  o.size = {2, 64, 32};
  o.out = f;
  const lab::Report report = lab::run(test_attention_case(), o);
  std::fclose(f);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  INFO(text);
  CHECK(contains(text, "judged against the bf16 baseline on the same inputs: err <= 2x the baseline's + 1.0e-04"));
  CHECK(contains(text, "  out: max rel err "));
  CHECK(contains(text, "x the bf16 baseline's "));
  CHECK(contains(text, "(passes at <= 2x + 1.0e-04): ok"));
  CHECK(contains(text, "x bf16)"));  // the table: "ok 9.1e-03 (1.00x bf16)"
  CHECK(contains(lab::json_lines(report), "\"baseline_ratio\":"));
  // --tolerance sets one absolute tolerance for every variant: no baseline then.
  o.out = nullptr;
  o.tolerance = 1.0;
  for (const lab::VariantResult& r : lab::run(test_attention_case(), o).results) {
    CHECK(r.passed);
    CHECK(r.precision.empty());
  }
}

namespace {

// The inputs of case `name` at `dims` as a bf16 variant sees them (rounded to bf16), and its
// baseline's outputs (Case::baseline, or the reference on the rounded inputs where it has none).
lab::Problem baseline_problem(const std::string& name, const lab::Dims& dims, std::uint64_t seed) {
  const lab::Case& c = lab::find_case(name);
  lab::Problem p;
  p.dims = dims;
  lab::Random random(seed);
  c.make(p, random);
  for (lab::Array& a : p.arrays)
    if (a.role == lab::Array::kInput && a.type == lab::Array::kFloat)
      for (double& x : a.values) x = bf16(static_cast<float>(x));
  if (c.baseline) c.baseline(p, &bf16);
  else c.reference(p);
  return p;
}

void write_f64(const std::string& path, const std::vector<double>& values) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(double)));
  REQUIRE(f.good());
}

}  // namespace

TEST_CASE("lab baseline: the bf16 baselines agree with PyTorch's bf16 matmul and attention on the same inputs") {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-lab-baseline-torch";
  std::filesystem::create_directories(dir);
  const lab::Dims gemm = {17, 33, 65}, attention = {2, 37, 16};
  const lab::Problem matmul = baseline_problem("matmul:bf16", gemm, 5);
  const lab::Problem forward = baseline_problem("attention_forward:bf16", attention, 6);
  const lab::Problem backward = baseline_problem("attention_backward:bf16", attention, 7);
  for (const char* name : {"a", "b", "out"}) write_f64(dir + "/matmul_" + name + ".f64", matmul[name].values);
  for (const char* name : {"q", "k", "v", "out"}) write_f64(dir + "/forward_" + name + ".f64", forward[name].values);
  for (const char* name : {"dout", "q", "k", "v", "out", "lse", "dq", "dk", "dv"})
    write_f64(dir + "/backward_" + name + ".f64", backward[name].values);
  std::ofstream(dir + "/dims.txt") << gemm[0] << " " << gemm[1] << " " << gemm[2] << " " << attention[0] << " "
                                   << attention[1] << " " << attention[2] << "\n";
  if (!test::python_has("torch")) return test::skip(BRRR_PYTHON " cannot import torch (scripts/setup.sh installs it)");
  std::string out;
  const int rc =
      test::run(std::string(BRRR_PYTHON) + " " + BRRR_SOURCE_DIR + "/tests/train/lab_baseline_in_torch.py " + dir, &out);
  MESSAGE(out);
  CHECK(rc == 0);
  CHECK(contains(out, "0 checks failed"));
}
