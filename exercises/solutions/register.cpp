// exercises/solutions/register.cpp: registers the reference solutions' kernels as
// variant "solution" (called from exercises/student/register.cpp when they are built), so
// BRRR_KERNELS=matmul=solution runs them, and the grader compares them like a student's.
#include "kernels/registry.h"
#include "exercises/solutions/solutions.h"

namespace brrr::kernels {

void register_solution_kernels() {
  add("matmul", DeviceType::CPU, kFloat32, "solution", &solution::matmul_tiled<float>, -20);
  add("matmul", DeviceType::CPU, kFloat64, "solution", &solution::matmul_tiled<double>, -20);
}

}  // namespace brrr::kernels
