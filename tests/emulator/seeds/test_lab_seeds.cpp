// tests/emulator/seeds/test_lab_seeds.cpp: every shipped low-precision variant (bf16 and tf32:
// chapter 18) passes the kernel lab's check on many seeds, at the lab's emulator sizes: judged
// against its baseline (Case::baseline: err <= 2x the baseline's + the op's float32 tolerance),
// a check that a kernel as accurate as its precision allows cannot fail by chance. The seeds
// are BRRR_LAB_SEEDS (10 in the default test set; 50 under the label `slow`, CMakeLists.txt).
// That the check fails for real is tests/train/test_lab_baseline.cpp's (planted losses).
// Read before: lab/kernel_lab.h, lab/check.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "brrr/cuda.h"
#include "brrr/kernels.h"
#include "brrr/strings.h"
#include "lab/kernel_lab.h"

using namespace brrr;

namespace {

int seeds() {
  const char* text = std::getenv("BRRR_LAB_SEEDS");
  return text ? std::max(1, std::atoi(text)) : 10;
}

// The variants of c's op on `device` in `dtype` that the lab judges against a baseline: bf16
// data, bf16 inputs, or tf32 products (Case::tf32_variants).
std::vector<std::string> low_precision_variants(const lab::Case& c, DeviceType device, DType dtype) {
  std::vector<std::string> names;
  for (const kernels::VariantInfo& v : kernels::variants(c.op_name())) {
    // (an exercise's stub, "student", is the learner's to write: tests/exercises check it)
    if (v.device.type != device || v.dtype != dtype || v.meta.gpu_only || v.variant == "student") continue;
    if (!c.call.bind(device, dtype, v.variant)) continue;  // a kernel of the op the case does not call in this dtype
    const bool tf32 = std::find(c.tf32_variants.begin(), c.tf32_variants.end(), v.variant) != c.tf32_variants.end();
    if (dtype == kBFloat16 || v.meta.bf16_inputs || tf32) names.push_back(v.variant);
  }
  return names;
}

// Checks every low-precision variant of the cases `pick` selects, on `device`, in float32 and
// bf16, at the emulator's default size, on seeds 1 .. seeds(). Returns the variant runs checked;
// the worst ratio to its baseline each variant reached is printed.
int check_seeds(lab::LabDevice device, bool (*pick)(const lab::Case& c)) {
  if (device == lab::LabDevice::Emulator) cuda::use_emulator();
  const DeviceType type = device == lab::LabDevice::CPU ? DeviceType::CPU : DeviceType::CUDA;
  kernels::ops();  // the registry, before its variants are listed
  int runs = 0;
  std::vector<std::string> failures;
  for (const lab::Case& c : lab::cases()) {
    if (!pick(c)) continue;
    for (DType dtype : {kFloat32, kBFloat16}) {
      if (c.call.one_dtype && c.call.dtype != dtype) continue;
      for (const std::string& variant : low_precision_variants(c, type, dtype)) {
        double worst = 0, worst_error = 0;
        int checked = 0;
        for (int seed = 1; seed <= seeds(); ++seed) {
          lab::Options o;
          o.device = device;
          o.mode = lab::Mode::Check;
          o.dtype = dtype;
          o.variant = variant;
          o.seed = static_cast<std::uint64_t>(seed);
          o.size = c.emulator_size;  // the emulator's (on the CPU too: its perf sizes take seconds a check)
          o.out = nullptr;
          const lab::Report report = lab::run(c, o);
          for (const lab::VariantResult& r : report.results) {
            if (!r.checked) continue;
            ++checked;
            ++runs;
            worst = std::max(worst, r.baseline_ratio);
            worst_error = std::max(worst_error, r.max_rel_error);
            if (!r.passed)
              failures.push_back(c.name + " " + variant + " seed " + std::to_string(seed) + ": " + r.failure);
          }
        }
        MESSAGE(c.name, " ", variant, " (", std::string(dtype_name(dtype)), "): ", checked, " seeds, largest error ", worst_error,
                ", at most ", worst, "x its baseline's");
      }
    }
  }
  INFO(join(failures, "\n"));
  CHECK(failures.empty());
  return runs;
}

bool is_matmul(const lab::Case& c) { return c.chapter == "14" || c.name.rfind("matmul", 0) == 0; }
bool is_attention_forward(const lab::Case& c) { return c.name.rfind("attention_forward", 0) == 0; }
bool is_attention_backward(const lab::Case& c) { return c.name.rfind("attention_backward", 0) == 0; }
bool is_elementwise_or_reduction(const lab::Case& c) { return c.chapter == "12" || c.chapter == "13"; }

}  // namespace

TEST_CASE("lab seeds: the bf16 and tf32 GEMMs on the emulator (matmul variants 7 to 12)") {
  CHECK(check_seeds(lab::LabDevice::Emulator, &is_matmul) >= 5 * seeds());
}
// Four bf16 kernels each way: in attention_*:bf16 variant 1 rounding its inputs ("naive") and
// variant 3 ("bf16_mma"), on bf16 data variants 4 ("bf16_pipelined") and 5 ("wgmma"); variant 2
// is float32 only.
TEST_CASE("lab seeds: the bf16 attention forwards on the emulator (variants 1 to 5)") {
  CHECK(check_seeds(lab::LabDevice::Emulator, &is_attention_forward) >= 4 * seeds());
}
TEST_CASE("lab seeds: the bf16 attention backwards on the emulator (variants 1 to 5)") {
  CHECK(check_seeds(lab::LabDevice::Emulator, &is_attention_backward) >= 4 * seeds());
}
TEST_CASE("lab seeds: the bf16 elementwise and reduction kernels on the emulator (chapters 12 and 13)") {
  CHECK(check_seeds(lab::LabDevice::Emulator, &is_elementwise_or_reduction) >= 8 * seeds());
}
TEST_CASE("lab seeds: the CPU's bf16 variants (GEMMs, attention, the ops on bf16 data)") {
  CHECK(check_seeds(lab::LabDevice::CPU, [](const lab::Case&) { return true; }) >= 10 * seeds());
}
