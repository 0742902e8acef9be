// kernels/student/register.cpp: registers the exercise stubs of kernels/student as variant
// "student" (chapter 04 introduces the registry; each exercise's chapter adds its stub).
// None exist yet.
#include "kernels/registry.h"

namespace brrr::kernels {
void register_student_kernels() {}
}  // namespace brrr::kernels
