// exercises/solutions/register.cpp: registers the reference solutions' kernels as
// variant "solution" (called from exercises/student/register.cpp when they are built), so
// BRRR_KERNELS=matmul=solution runs them, and the grader compares them like a student's.
// (chapter 04 introduces the registry; docs/teaching.md lists the exercises).
#include "kernels/registry.h"
#include "exercises/solutions/solutions.h"
#include "exercises/student/student.h"  // conv2d_from_im2col and matmul_bf16_rounding, the given halves of ex09.1 and ex18.1

namespace brrr::kernels {

void register_solution_kernels() {
  const VariantMeta answer = about("an exercise's reference solution (exercises/solutions/)");
  add(op::matmul<float>, DeviceType::CPU, "solution", &solution::matmul_tiled<float>, -20, answer);
  add(op::matmul<double>, DeviceType::CPU, "solution", &solution::matmul_tiled<double>, -20, answer);
  add(op::conv2d_forward<float>, DeviceType::CPU, "solution",
      &student::conv2d_from_im2col<float, &solution::im2col<float>>, -20, answer);
  add(op::conv2d_forward<double>, DeviceType::CPU, "solution",
      &student::conv2d_from_im2col<double, &solution::im2col<double>>, -20, answer);
  // It rounds its inputs: matmul's bf16-products slot ("matmul:bf16"), for autocast only.
  add(op::matmul<float>.autocast(), DeviceType::CPU, "solution",
      &student::matmul_bf16_rounding<&solution::float_to_bf16>, -20, answer);
}

}  // namespace brrr::kernels
