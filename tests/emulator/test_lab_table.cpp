// tests/emulator/test_lab_table.cpp: the kernel lab's table on the SIMT emulator (chapters 10
// and 10): every CUDA variant of every case, on each of the case's shapes, aligned and
// misaligned, float32 and float64; then grad mode where the op has a backward. One test per
// chapter, so ctest runs them side by side. Read before: lab/kernel_lab.h. The CPU runs the
// same loop in tests/train/test_kernel_lab.cpp, a GPU in tests/cuda/test_gpu.cpp.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string_view>

#include "brrr/cuda.h"
#include "brrr/strings.h"
#include "lab/kernel_lab.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

// The table once, on the first schedule. The extra schedules (BRRR_EMULATOR_SEED 2 and 3,
// CMakeLists.txt) are for the race detector, and the kernels the table runs have their own tests
// in this program, which run under them; the table again under both took 120 s of the Release
// pass's summed test time (2026-11-29, the 2-core machine), chapter 15 alone 64.
bool other_schedule() {
  const char* seed = std::getenv("BRRR_EMULATOR_SEED");
  return seed && std::string_view(seed) != "1";
}

// Checks every case of the chapter; returns how many variant runs were checked.
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

void lab_chapter(const std::string& chapter) {
  if (other_schedule()) return test::skip("the kernel lab's table runs on the first schedule; its kernels' own tests run on this one");
  CHECK(check_chapter(chapter) > 0);
}

}  // namespace

TEST_CASE("kernel lab on the emulator: chapter 01 (random numbers)") { lab_chapter("01"); }
TEST_CASE("kernel lab on the emulator: chapter 02 (elementwise ops)") { lab_chapter("02"); }
TEST_CASE("kernel lab on the emulator: chapter 07 (embedding, and the ops whose variants are built from ops)") {
  lab_chapter("07");  // layer_norm, residual_layer_norm, gelu, cross_entropy: kernels or composed
}
TEST_CASE("kernel lab on the emulator: chapter 09 (convolution and pooling)") { lab_chapter("09"); }
TEST_CASE("kernel lab on the emulator: chapter 12 (GELU)") { lab_chapter("12"); }
TEST_CASE("kernel lab on the emulator: chapter 13 (reductions, LayerNorm, softmax, cross-entropy)") {
  lab_chapter("13");
}
TEST_CASE("kernel lab on the emulator: chapter 14 (matmul)") { lab_chapter("14"); }
TEST_CASE("kernel lab on the emulator: chapter 15 (attention)") { lab_chapter("15"); }
TEST_CASE("kernel lab on the emulator: chapter 16 (optimizers)") { lab_chapter("16"); }
TEST_CASE("kernel lab on the emulator: chapter 17 (device index checks)") { lab_chapter("17"); }
TEST_CASE("kernel lab on the emulator: chapter 18 (mixed precision: matmul:bf16, attention_*:bf16, and the bf16 kernels of 12 and 13)") {
  if (other_schedule()) return test::skip("the kernel lab's table runs on the first schedule; its kernels' own tests run on this one");
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
                           "residual_layernorm_backward/bf16", "matmul_epilogue/bf16", "sum_dim/bf16",
                           "attention_forward_qkv/bf16", "attention_backward_qkv/bf16"})
    for (lab::LabDevice device : {lab::LabDevice::Emulator, lab::LabDevice::CPU})
      for (const std::string& f : lab::run_shapes(lab::find_case(name), device, lab::Mode::Check, kBFloat16, &notes, &runs))
        failures.push_back(f);
  INFO(join(failures, "\n"));
  CHECK(failures.empty());
  INFO(join(notes, "\n"));
  CHECK(notes.empty());  // every one of them has a bf16 kernel on both devices
  CHECK(runs >= 2 * 18 * 2);
}
