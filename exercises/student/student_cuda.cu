// exercises/student/student_cuda.cu: registers the CUDA exercise stubs of exercises/student as
// variant "student" (compiled twice, like kernels/cuda: for the GPU and the emulator).
// Chapter 09 introduces the emulator; each exercise's chapter adds its stub.
//
// How a kernel exercise plugs in (docs/teaching.md, "Adding an exercise"): its stub,
// exercises/student/NAME.cu, has the op's signature from kernels/signatures.h and a host function
// that calls student::not_written("exNN", "NAME") (exercises/student/student.h) until it is
// written; it is registered below as
//   add("gelu_forward", DeviceType::CUDA, kFloat32, "student", &student::gelu_forward, -10);
// and its reference solution, exercises/solutions/NAME.cu (namespace ...::solution), is
// registered below as "solution" under #if BRRR_EXERCISE_SOLUTIONS. The exercises' provider
// (exercises/install.cpp) calls this each time the CUDA device's backend is installed, so the
// stubs follow a switch to the emulator. The grader, exercises/grader.cpp, checks the variant through the kernel lab.
// The functions are declared in exercises/student/student_cuda.h; they are float32 only.
#include "exercises/student/student_cuda.h"

#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

void register_student_cuda_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  // The stubs (exercises/student/*.cu), chapter by chapter.
  add("gelu_forward", kCuda, kFloat32, "student", &student::gelu_forward, -10);              // ex04
  add("gelu_backward", kCuda, kFloat32, "student", &student::gelu_backward, -10);            // ex05
  add("layernorm_forward", kCuda, kFloat32, "student", &student::layernorm_forward, -10);    // ex06
  add("layernorm_backward", kCuda, kFloat32, "student", &student::layernorm_backward, -10);  // ex07
  add("matmul", kCuda, kFloat32, "student", &student::matmul_shared, -10);                   // ex08
  add("attention_forward", kCuda, kFloat32, "student", &student::flash_attention_forward, -10);  // ex09
  add("cross_entropy_fused", kCuda, kFloat32, "student", &student::cross_entropy_fused, -10);    // ex10
  add("adamw_step", kCuda, kFloat32, "student", &student::adamw_step, -10);                      // ex11
#if BRRR_EXERCISE_SOLUTIONS
  // The reference solutions (exercises/solutions/*.cu), as variant "solution".
  add("gelu_forward", kCuda, kFloat32, "solution", &solution::gelu_forward, -20);
  add("gelu_backward", kCuda, kFloat32, "solution", &solution::gelu_backward, -20);
  add("layernorm_forward", kCuda, kFloat32, "solution", &solution::layernorm_forward, -20);
  add("layernorm_backward", kCuda, kFloat32, "solution", &solution::layernorm_backward, -20);
  add("matmul", kCuda, kFloat32, "solution", &solution::matmul_shared, -20);
  add("attention_forward", kCuda, kFloat32, "solution", &solution::flash_attention_forward, -20);
  add("cross_entropy_fused", kCuda, kFloat32, "solution", &solution::cross_entropy_fused, -20);
  add("adamw_step", kCuda, kFloat32, "solution", &solution::adamw_step, -20);
#endif
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
