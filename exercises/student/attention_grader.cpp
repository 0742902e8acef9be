// exercises/student/attention_grader.cpp: the grader of ex15.1 (chapter 15), the flash attention
// forward kernel. Read before: the stub beside it, then exercises/grading.h. Read next:
// exercises/student/crossentropy_grader.cpp (ex16.1).
//
// The kernel lab checks the variant against the CPU kernel at a size that is not a multiple of
// any block or tile (odd element counts, rows not a multiple of 32), small enough for the
// emulator, and times it beside the default variant (grade_kernel, exercises/grader.cpp).
#include "exercises/grading.h"

namespace brrr::exercises {

Result grade_flash_attention_forward(const std::string& variant) {
  return grade_kernel("attention_forward", variant, kernel_device(), {3, 45, 24});  // BH, T, hs
}

}  // namespace brrr::exercises
