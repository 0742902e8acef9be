// exercises/student/layernorm_grader.cpp: the grader of ex13.1 and ex13.2 (chapter 13), the
// LayerNorm kernels. Read before: the stub beside it, then exercises/grading.h. Read next:
// exercises/student/matmul_grader.cpp (ex14.1).
//
// The kernel lab checks the variant against the CPU kernel at a size that is not a multiple of
// any block or tile (odd element counts, rows not a multiple of 32), small enough for the
// emulator, and times it beside the default variant (grade_kernel, exercises/grader.cpp).
#include "exercises/grading.h"

namespace brrr::exercises {

Result grade_layernorm_forward(const std::string& variant) {
  return grade_kernel("layernorm_forward", variant, kernel_device(), {13, 301});
}

Result grade_layernorm_backward(const std::string& variant) {
  return grade_kernel("layernorm_backward", variant, kernel_device(), {13, 301});
}

}  // namespace brrr::exercises
