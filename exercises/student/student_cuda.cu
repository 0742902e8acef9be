// exercises/student/student_cuda.cu: registers the CUDA exercise stubs of exercises/student as
// variant "student" (compiled twice, like kernels/cuda: for the GPU and the emulator).
// Chapter 10 introduces the emulator; each exercise's chapter adds its stub.
//
// How a kernel exercise plugs in (docs/teaching.md, "Adding an exercise"): its stub,
// exercises/student/NAME.cu, has the op's signature from kernels/signatures.h and a host function
// that calls student::not_written("exNN", "NAME") (exercises/student/student.h) until it is
// written; it is registered below as
//   add(op::gelu_forward<float>, DeviceType::CUDA, "student", &student::gelu_forward, -10, stub);
// and its reference solution, exercises/solutions/NAME.cu (namespace ...::solution), is
// registered below as "solution" under #if BRRR_EXERCISE_SOLUTIONS. The exercises' provider
// (exercises/install.cpp) calls this each time the CUDA device's backend is installed, so the
// stubs follow a switch to the emulator. The grader, exercises/grader.cpp, checks the variant through the kernel lab.
// The functions are declared in exercises/student/student_cuda.h; they are float32 only, but for
// ex21.1's GEMM on bf16 data (Hopper's wgmma: run on the emulator, or on an sm_90 GPU).
#include "exercises/student/student_cuda.h"

#include "kernels/cuda/simt.h"
#include "kernels/registry.h"
#include "kernels/transpose.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

void register_student_cuda_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  const VariantMeta stub = about("an exercise stub: yours to write (exercises/student/)");
  // The stubs (exercises/student/*.cu), chapter by chapter.
  add(op::gelu_forward<float>, kCuda, "student", &student::gelu_forward, -10, stub);              // ex12.1
  add(op::gelu_backward<float>, kCuda, "student", &student::gelu_backward, -10, stub);            // ex12.2
  add(op::layernorm_forward<float>, kCuda, "student", &student::layernorm_forward, -10, stub);    // ex13.1
  add(op::layernorm_backward<float>, kCuda, "student", &student::layernorm_backward, -10, stub);  // ex13.2
  add(op::matmul<float>, kCuda, "student", &student::matmul_shared, -10, stub);                   // ex14.1
  add(op::transpose<float>, kCuda, "student", &student::transpose, -10, stub);                    // ex14.2
  add(op::attention_forward<float>, kCuda, "student", &student::flash_attention_forward, -10, stub);  // ex15.1
  add(op::cross_entropy_fused<float>, kCuda, "student", &student::cross_entropy_fused, -10, stub);    // ex16.1
  add(op::adamw_step<float>, kCuda, "student", &student::adamw_step, -10, stub);                      // ex16.2
  add(op::matmul_on_bf16, kCuda, "student", &student::tma_ring_matmul, -10, stub);                    // ex21.1
#if BRRR_EXERCISE_SOLUTIONS
  // The reference solutions (exercises/solutions/*.cu), as variant "solution".
  const VariantMeta answer = about("an exercise's reference solution (exercises/solutions/)");
  add(op::gelu_forward<float>, kCuda, "solution", &solution::gelu_forward, -20, answer);
  add(op::gelu_backward<float>, kCuda, "solution", &solution::gelu_backward, -20, answer);
  add(op::layernorm_forward<float>, kCuda, "solution", &solution::layernorm_forward, -20, answer);
  add(op::layernorm_backward<float>, kCuda, "solution", &solution::layernorm_backward, -20, answer);
  add(op::matmul<float>, kCuda, "solution", &solution::matmul_shared, -20, answer);
  add(op::transpose<float>, kCuda, "solution", &solution::transpose, -20, answer);
  add(op::attention_forward<float>, kCuda, "solution", &solution::flash_attention_forward, -20, answer);
  add(op::cross_entropy_fused<float>, kCuda, "solution", &solution::cross_entropy_fused, -20, answer);
  add(op::adamw_step<float>, kCuda, "solution", &solution::adamw_step, -20, answer);
  add(op::matmul_on_bf16, kCuda, "solution", &solution::tma_ring_matmul, -20, answer);
#endif
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
