// tests/emulator/test_lab_table.cpp: the kernel lab's table on the SIMT emulator (chapters 10
// and 10): every CUDA variant of every case, on each of the case's shapes, aligned and
// misaligned, float32 and float64; then grad mode where the op has a backward. One test per
// chapter, so ctest runs them side by side. Read before: lab/kernel_lab.h. The CPU runs the
// same loop in tests/train/test_kernel_lab.cpp, a GPU in tests/cuda/test_gpu.cpp.
#include <doctest/doctest.h>

#include "brrr/cuda.h"
#include "brrr/strings.h"
#include "lab/kernel_lab.h"

using namespace brrr;

namespace {

// Returns how many variant runs were checked.
int check_chapter(const std::string& chapter) {
  cuda::use_emulator();
  int runs = 0, cases = 0;
  for (const lab::Case& c : lab::cases()) {
    if (c.chapter != chapter) continue;
    ++cases;
    std::vector<std::string> failures, notes;
    for (DType dtype : {kFloat32, kFloat64}) {
      for (const std::string& f : lab::run_shapes(c, lab::LabDevice::Emulator, lab::Mode::Check, dtype, &notes, &runs))
        failures.push_back(f);
      if (c.has_grad())
        for (const std::string& f : lab::run_shapes(c, lab::LabDevice::Emulator, lab::Mode::Grad, dtype, &notes, &runs))
          failures.push_back(f);
    }
    INFO(c.name, "\n", join(failures, "\n"));
    CHECK(failures.empty());
    INFO(join(notes, "\n"));
    CHECK(notes.empty());  // every op has CUDA kernels in float32 and float64
  }
  REQUIRE(cases > 0);
  return runs;
}

}  // namespace

TEST_CASE("kernel lab on the emulator: chapter 01 (random numbers)") { CHECK(check_chapter("01") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 02 (elementwise ops)") { CHECK(check_chapter("02") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 07 (embedding, and the ops whose variants are built from ops)") {
  CHECK(check_chapter("07") > 0);  // layer_norm, residual_layer_norm, gelu, cross_entropy: kernels or composed
}
TEST_CASE("kernel lab on the emulator: chapter 09 (convolution and pooling)") { CHECK(check_chapter("09") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 12 (GELU)") { CHECK(check_chapter("12") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 13 (reductions, LayerNorm, softmax, cross-entropy)") {
  CHECK(check_chapter("13") > 0);
}
TEST_CASE("kernel lab on the emulator: chapter 14 (matmul)") { CHECK(check_chapter("14") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 15 (attention)") { CHECK(check_chapter("15") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 16 (optimizers)") { CHECK(check_chapter("16") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 17 (device index checks)") { CHECK(check_chapter("17") > 0); }
TEST_CASE("kernel lab on the emulator: chapter 18 (mixed precision: matmul:bf16, attention_*:bf16, and the bf16 kernels of 12 and 13)") {
  cuda::use_emulator();
  int runs = 0;
  std::vector<std::string> failures, notes;
  // The bf16-products slots take float32 data (their inputs are rounded inside): matmul variant
  // 9, attention variants 3 and 1 on the emulator.
  for (const char* name : {"matmul:bf16", "attention_forward:bf16", "attention_backward:bf16"})
    for (const std::string& f :
         lab::run_shapes(lab::find_case(name), lab::LabDevice::Emulator, lab::Mode::Check, kFloat32, &notes, &runs))
      failures.push_back(f);
  // The ops with kernels on bf16 data, on the emulator and on the CPU (their references).
  // ... and the ops on bf16 data with float32 results: matmul variant 12, attention variant 4.
  for (const char* name : {"gelu_forward", "gelu_backward", "bias_gelu_forward", "bias_gelu_backward", "layernorm_forward",
                           "layernorm_backward", "cross_entropy_forward", "cross_entropy_backward",
                           "matmul/bf16", "attention_forward/bf16", "attention_backward/bf16",
                           "cross_entropy_fused/bf16", "residual_layernorm_forward/bf16",
                           "residual_layernorm_backward/bf16"})
    for (lab::LabDevice device : {lab::LabDevice::Emulator, lab::LabDevice::CPU})
      for (const std::string& f : lab::run_shapes(lab::find_case(name), device, lab::Mode::Check, kBFloat16, &notes, &runs))
        failures.push_back(f);
  INFO(join(failures, "\n"));
  CHECK(failures.empty());
  INFO(join(notes, "\n"));
  CHECK(notes.empty());  // every one of them has a bf16 kernel on both devices
  CHECK(runs >= 2 * 14 * 2);
}
