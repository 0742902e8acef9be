// exercises/student/tma_ring_grader.cpp: the grader of ex21.1 (chapter 21), the producer's loop
// of the TMA ring, on the emulator: its results and, through them, the sanitizer's ordering
// rules (a stage overwritten while a wgmma reads it, bytes announced that never arrive). Read
// before: the stub beside it, exercises/grading.h, exercises/student/matmul_grader.cpp (ex14.1:
// the same contract in float32). Read next: docs/teaching.md.
//
// Always on the emulator: wgmma and TMA exist on sm_90 only, and the emulator's sanitizer is
// what names an ordering mistake (on a GPU it would be a wrong number, or a hang).
#include <cmath>

#include "exercises/grading.h"
#include "exercises/student/student.h"
#include "kernels/cuda/runtime.h"
#include "kernels/registry.h"

namespace brrr::exercises {

namespace {

// The lab's matmul on bf16 data at one ragged size: the results against the float64 product,
// then the variant timed beside the default one (on the emulator a time says how much work
// the emulator did, not what a chip would take: chapter 10).
void check_lab(const std::string& variant, Result* graded) {
  const lab::Case& c = lab::find_case("matmul/bf16");
  lab::Options o;
  o.device = lab::LabDevice::Emulator;
  o.mode = lab::Mode::Check;
  o.variant = variant;
  o.dtype = kBFloat16;
  o.size = {150, 70, 130};  // M, N, K: two tiles of rows, ragged everywhere, three k-tiles
  o.out = nullptr;
  const lab::Report report = lab::run(c, o);
  BRRR_CHECK(report.note.empty(), "exercises: ", report.note);
  const lab::VariantResult& r = report.results.at(0);
  if (r.not_written) brrr::student::not_written("ex21.1", "tma_ring_matmul");  // the lab passes over a stub
  if (!r.passed) {
    if (r.failure.find(student::kNotWritten) != std::string::npos) throw Error(r.failure);
    fail("matmul on bf16 data, variant '", variant, "' on the emulator at ", report.size, ": ", r.failure);
  }
  o.mode = lab::Mode::Perf;
  graded->seconds = lab::run(c, o).results.at(0).median_ms / 1e3;
  o.variant = kernels::selected("matmul", DeviceType::CUDA, kBFloat16);
  graded->reference_variant = o.variant;
  graded->reference_seconds = lab::run(c, o).results.at(0).median_ms / 1e3;
}

// Problem p through fn on the emulator, against the float64 product of the same bf16 values.
void check_problem(kernels::matmul_on_bf16_fn fn, kernels::matmul_fn<double> naive, const MatmulProblem& p,
                   const std::string& variant, Generator& gen) {
  const kernels::MatmulShape s = p.shape();
  // The operands rounded to bf16 once; the reference multiplies those very values in float64.
  const Tensor a = random_matrix(p.batch, p.M * p.K, gen).to(kBFloat16);
  const Tensor b = random_matrix(p.broadcast_b ? 1 : p.batch, p.K * p.N, gen).to(kBFloat16);
  const Tensor init = random_matrix(p.batch, p.M * p.N, gen);
  Tensor ref = init.clone();
  naive(ref.data_ptr<double>(), a.to(kFloat64).data_ptr<double>(), b.to(kFloat64).data_ptr<double>(), s, nullptr);
  const Device device = Device::cuda();
  const Tensor a_dev = a.to(device), b_dev = b.to(device);
  Tensor got = init.to(kFloat32).to(device);
  fn(got.data_ptr<float>(), a_dev.data_ptr<bf16>(), b_dev.data_ptr<bf16>(), s, gpu::emulator_runtime().stream());
  // The products of bf16 values are exact in float32; what is left is float32 summation.
  check_matmul_out(got.to(kCPU).to_vector<float>(), ref.to_vector<double>(), p,
                   "matmul on bf16 data, variant '" + variant + "'", "the float64 product of the same bf16 values is");
}

}  // namespace

// ex21.1: the lab's case, then the MatmulShape contract and the ring's laps, on the emulator.
Result grade_tma_ring_matmul(const std::string& variant) {
  install();
  cuda::use_emulator();  // before any CUDA tensor: wgmma and TMA are graded on the emulator
  Result graded = result(Status::Passing,
                         "agrees with the float64 product on the emulator at (M, N, K) = (150, 70, 130) and in 7 "
                         "problems (the layouts, the ring's laps, tiles across persistent blocks, a batch with b "
                         "broadcast, accumulate, K = 0), with the sanitizer's ordering rules on");
  check_lab(variant, &graded);
  const DeviceType cuda = DeviceType::CUDA;
  kernels::matmul_on_bf16_fn fn = nullptr;
  with_kernel_variant("matmul", variant, [&] { fn = kernels::lookup(kernels::op::matmul_on_bf16, cuda); }, cuda);
  kernels::matmul_fn<double> naive = nullptr;
  with_kernel_variant("matmul", "naive", [&] { naive = kernels::lookup(kernels::op::matmul<double>, DeviceType::CPU); });
  const std::vector<MatmulProblem> problems = {
      {1, 70, 90, 40, true, false, false, false, "a stored transposed: two boxes of a a stage"},
      {1, 60, 75, 48, false, true, false, false, "b stored transposed"},
      {1, 40, 50, 72, true, true, false, false, "both transposed"},
      {1, 20, 30, 300, false, false, true, false, "5 k-tiles: the ring's second lap, accumulating"},
      {1, 260, 390, 24, false, false, false, false, "6 tiles over 3 persistent blocks: the phases across tiles"},
      {3, 30, 20, 80, false, true, false, true, "a batch, b broadcast (stride 0)"},
      {2, 9, 13, 0, false, false, true, false, "K = 0: out unchanged when accumulating"},
  };
  Generator gen(21);
  for (const MatmulProblem& p : problems) check_problem(fn, naive, p, variant, gen);
  return graded;
}

}  // namespace brrr::exercises
