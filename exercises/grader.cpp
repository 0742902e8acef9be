// exercises/grader.cpp: the exercise table, and how a grader is run (docs/teaching.md).
// Read before: grader.h, exercises/student/student.h. Read next: grading.h, then the graders,
// one beside each stub (exercises/student/NAME_grader.cpp).
//
// A grader checks one variant of an exercise, "student" or "solution", and says why it
// failed in the words a learner needs next: which case, which element, the two values. It
// compares with something brrr already trusts: finite differences (brrr::gradcheck), the
// naive kernel, the real BPE trainer.
//
// Kernel exercises (chapters 12-16) plug in the same way. A stub in
// exercises/student/NAME.cu registers as variant "student" of its op in
// register_student_cuda_kernels() (exercises/student/student_cuda.cu), its solution as
// "solution" in exercises/solutions/; the table entry below names the op, and its grader calls
// grade_kernel(op, variant, kernel_device()): the kernel lab (lab/kernel_lab.h) checks the
// variant against the CPU reference on the GPU, or on the SIMT emulator when there is none,
// and times it beside the default variant, at a small ragged size (a few seconds on the
// emulator). An entry whose stub does not exist yet is "coming" (grade is null).
#include "exercises/grader.h"

#include <sstream>

#include "brrr/strings.h"
#include "brrr/brrr.h"
#include "exercises/grading.h"
#include "exercises/student/student.h"
#include "kernels/registry.h"
#include "lab/kernel_lab.h"

namespace brrr::exercises {
namespace {

// A kernel exercise grades any registered variant of its op (the registry names the ones there
// are when it has no such variant); the function exercises know only these two.
void check_variant(const Exercise& exercise, const std::string& variant) {
  BRRR_CHECK(variant == "student" || variant == "solution" || !exercise.op.empty(), "exercises: unknown variant '",
             variant, "' (variants: student, solution)");
  BRRR_CHECK(variant != "solution" || solutions_built(),
             "exercises: this build has no reference solutions (exercises/solutions is not there)");
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// Kernel exercises, through the kernel lab

lab::LabDevice kernel_device() { return cuda::gpu_available() ? lab::LabDevice::CUDA : lab::LabDevice::Emulator; }

Result grade_kernel(const std::string& op, const std::string& variant, lab::LabDevice device,
                    const std::vector<std::int64_t>& size) {
  install();
  const lab::Case& c = lab::find_case(op);
  lab::Options o;
  o.device = device;
  o.variant = variant;
  o.size = size;
  o.out = nullptr;
  const lab::Report report = lab::run(c, o);
  BRRR_CHECK(report.note.empty(), "exercises: ", report.note);
  const lab::VariantResult& r = report.results.at(0);
  if (!r.passed) {
    // A stub's own words ("exercise exNN.M (...): not written yet") make it "not started".
    if (r.failure.find(student::kNotWritten) != std::string::npos) throw Error(r.failure);
    fail(op, " variant '", variant, "' on ", report.device, " at ", report.size, ": ", r.failure);
  }
  std::ostringstream m;
  m << "agrees with the CPU reference on " << report.device << " at " << report.size << " (max relative error "
    << r.max_rel_error << ")";
  Result graded = result(Status::Passing, m.str());
  graded.seconds = r.median_ms / 1e3;
  // The default variant, timed the same way.
  o.variant = kernels::selected(op, device == lab::LabDevice::CPU ? DeviceType::CPU : DeviceType::CUDA, kFloat32);
  o.mode = lab::Mode::Perf;
  const lab::Report reference = lab::run(c, o);
  graded.reference_variant = o.variant;
  graded.reference_seconds = reference.results.at(0).median_ms / 1e3;
  return graded;
}

// ---------------------------------------------------------------------------------------------
// The table

const char* status_name(Status status) {
  switch (status) {
    case Status::NotStarted: return "not started";
    case Status::Failing: return "failing";
    case Status::Passing: return "passing";
    case Status::Coming: return "coming";
  }
  return "?";
}

// In the course's order; an id is its chapter and its place in the chapter (ex12.2: chapter
// 12's second), so the chapter field repeats the id's first number.
const std::vector<Exercise>& all() {
  static const std::vector<Exercise> table = {
      {"ex03.1", "div_backward", 3, "cpu", "exercises/student/div_backward.cpp",
       "the backward of a / b, broadcasting included", "", &grade_div_backward_variant},
      {"ex04.1", "matmul_tiled", 4, "cpu", "exercises/student/matmul_tiled.cpp",
       "a cache-tiled CPU matmul, registered as matmul variant \"student\"", "matmul", &grade_matmul_tiled},
      {"ex06.1", "bpe_merge", 6, "cpu", "exercises/student/bpe_merge.cpp",
       "one BPE merge step: the most frequent pair, and merging it", "", &grade_bpe_merge_variant},
      {"ex09.1", "im2col", 9, "cpu", "exercises/student/im2col.cpp",
       "im2col, inside conv2d_forward variant \"student\"", "conv2d_forward", &grade_im2col},
      // Kernel exercises (exercises/student/*.cu), graded on the GPU, or the emulator without one.
      {"ex12.1", "gelu_forward", 12, "cuda", "exercises/student/gelu.cu", "GELU forward kernel", "gelu_forward",
       &grade_gelu_forward},
      {"ex12.2", "gelu_backward", 12, "cuda", "exercises/student/gelu.cu", "GELU backward kernel", "gelu_backward",
       &grade_gelu_backward},
      {"ex13.1", "layernorm_forward", 13, "cuda", "exercises/student/layernorm.cu", "LayerNorm forward kernel",
       "layernorm_forward", &grade_layernorm_forward},
      {"ex13.2", "layernorm_backward", 13, "cuda", "exercises/student/layernorm.cu", "LayerNorm backward kernel",
       "layernorm_backward", &grade_layernorm_backward},
      {"ex14.1", "matmul_shared", 14, "cuda", "exercises/student/matmul.cu", "a tiled matmul in shared memory",
       "matmul", &grade_matmul_shared},
      {"ex14.2", "transpose", 14, "cuda", "exercises/student/transpose.cu",
       "a transpose graded on its counters: coalesced loads and stores, no bank conflicts", "transpose",
       &grade_transpose},
      {"ex15.1", "flash_attention_forward", 15, "cuda", "exercises/student/attention.cu",
       "flash attention forward (online softmax)", "attention_forward", &grade_flash_attention_forward},
      {"ex16.1", "cross_entropy_fused", 16, "cuda", "exercises/student/crossentropy.cu",
       "softmax + cross-entropy forward and gradient in one pass", "cross_entropy_fused", &grade_cross_entropy_fused},
      {"ex16.2", "adamw_step", 16, "cuda", "exercises/student/adamw.cu", "the AdamW update", "adamw_step",
       &grade_adamw_step},
      {"ex18.1", "bf16_round", 18, "cpu", "exercises/student/bf16_round.cpp",
       "float32 to bfloat16, round to nearest even, inside matmul:bf16 variant \"student\"", "",
       &grade_bf16_round_variant},
      {"ex21.1", "tma_ring_matmul", 21, "cuda", "exercises/student/tma_ring.cu",
       "the producer's loop of a Hopper GEMM's TMA ring, graded on the emulator by its results and the sanitizer",
       "matmul", &grade_tma_ring_matmul},
  };
  return table;
}

const Exercise& find(const std::string& id_or_name) {
  std::vector<std::string> ids;
  for (const Exercise& e : all()) {
    if (e.id == id_or_name || e.name == id_or_name) return e;
    ids.push_back(e.id + " " + e.name);
  }
  detail::fail("exercises: no exercise '", id_or_name, "' (exercises: ", join(ids), ")");
}

Result grade(const Exercise& exercise, const std::string& variant) {
  install();  // the variants it grades are the exercises' own
  if (!exercise.grade) return result(Status::Coming, "coming with chapter " + std::to_string(exercise.chapter));
  return guarded(exercise.id, [&] {
    check_variant(exercise, variant);
    return exercise.grade(variant);
  });
}

bool solutions_built() {
#if BRRR_EXERCISE_SOLUTIONS
  return true;
#else
  return false;
#endif
}

}  // namespace brrr::exercises
