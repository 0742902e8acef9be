// exercises/student/adamw_grader.cpp: the grader of ex16.2 (chapter 16), the AdamW update kernel.
// Read before: the stub beside it, then exercises/grading.h. Read next:
// exercises/student/bf16_round_grader.cpp (ex18.1).
//
// The kernel lab checks the variant against the CPU kernel at a size that is not a multiple of
// any block or tile (odd element counts, rows not a multiple of 32), small enough for the
// emulator, and times it beside the default variant (grade_kernel, exercises/grader.cpp).
#include "exercises/grading.h"

namespace brrr::exercises {

Result grade_adamw_step(const std::string& variant) {
  return grade_kernel("adamw_step", variant, kernel_device(), {5003});
}

}  // namespace brrr::exercises
