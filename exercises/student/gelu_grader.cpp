// exercises/student/gelu_grader.cpp: the grader of ex12.1 and ex12.2 (chapter 12), the GELU
// kernels. Read before: the stub beside it, then exercises/grading.h. Read next:
// exercises/student/layernorm_grader.cpp (ex13.1, ex13.2).
//
// The kernel lab checks the variant against the CPU kernel at a size that is not a multiple of
// any block or tile (odd element counts, rows not a multiple of 32), small enough for the
// emulator, and times it beside the default variant (grade_kernel, exercises/grader.cpp).
#include "exercises/grading.h"

namespace brrr::exercises {

Result grade_gelu_forward(const std::string& variant) {
  return grade_kernel("gelu_forward", variant, kernel_device(), {5003});
}

Result grade_gelu_backward(const std::string& variant) {
  return grade_kernel("gelu_backward", variant, kernel_device(), {5003});
}

}  // namespace brrr::exercises
