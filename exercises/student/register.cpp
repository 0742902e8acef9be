// exercises/student/register.cpp: registers the CPU exercise kernels of exercises/student as
// variant "student", and the reference solutions as variant "solution" when they are built
// (chapter 04 introduces the registry; docs/teaching.md lists the exercises).
// The CUDA exercise stubs register in student_cuda.cu, for the GPU and the emulator.
//
// A student variant has a negative priority, so it is never the default: it runs only when
// chosen, e.g. BRRR_KERNELS=matmul=student.
#include <string>

#include "brrr/error.h"
#include "kernels/registry.h"
#include "exercises/student/student.h"

namespace brrr::student {

void not_written(const char* id, const char* name) {
  throw Error(std::string("exercise ") + id + " (" + name + "): " + kNotWritten +
              ": read its requirements and plan, fill it in (exercises/student/), then run `brrr exercises check " + id +
              "`");
}

}  // namespace brrr::student

namespace brrr::kernels {

#if BRRR_EXERCISE_SOLUTIONS
void register_solution_kernels();  // exercises/solutions/register.cpp
#endif

void register_student_kernels() {
  const VariantMeta stub = about("an exercise stub: yours to write (exercises/student/)");
  add(op::matmul<float>, DeviceType::CPU, "student", &student::matmul_tiled<float>, -10, stub);
  add(op::matmul<double>, DeviceType::CPU, "student", &student::matmul_tiled<double>, -10, stub);
  add(op::conv2d_forward<float>, DeviceType::CPU, "student",
      &student::conv2d_from_im2col<float, &student::im2col<float>>, -10, stub);
  add(op::conv2d_forward<double>, DeviceType::CPU, "student",
      &student::conv2d_from_im2col<double, &student::im2col<double>>, -10, stub);
  // It rounds its inputs: matmul's bf16-products slot ("matmul:bf16"), for autocast only.
  add(op::matmul<float>.autocast(), DeviceType::CPU, "student",
      &student::matmul_bf16_rounding<&student::float_to_bf16>, -10, stub);
#if BRRR_EXERCISE_SOLUTIONS
  register_solution_kernels();
#endif
}

}  // namespace brrr::kernels
