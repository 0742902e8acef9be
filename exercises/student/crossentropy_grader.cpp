// exercises/student/crossentropy_grader.cpp: the grader of ex16.1 (chapter 16), the fused softmax +
// cross-entropy kernel. Read before: the stub beside it, then exercises/grading.h. Read next:
// exercises/student/adamw_grader.cpp (ex16.2).
//
// The kernel lab checks the variant against the CPU kernel at a size that is not a multiple of
// any block or tile (odd element counts, rows not a multiple of 32), small enough for the
// emulator, and times it beside the default variant (grade_kernel, exercises/grader.cpp).
#include "exercises/grading.h"

namespace brrr::exercises {

Result grade_cross_entropy_fused(const std::string& variant) {
  return grade_kernel("cross_entropy_fused", variant, kernel_device(), {21, 517});  // N, V; row 5 ignored
}

}  // namespace brrr::exercises
