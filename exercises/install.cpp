// exercises/install.cpp: the exercises' kernels join the kernel registry. Chapter 04 (the
// registry); docs/teaching.md ("Adding an exercise").
//
// The exercises live above the kernels library (a grader trains a model and runs the kernel
// lab), so the registry does not call into them; instead install() hands it a provider
// (kernels/registry.h), which it calls for the CPU when it is built and for the CUDA device
// each time that device's backend is installed. The stubs register as variant "student",
// the reference solutions (when built) as "solution", with negative priorities: never a
// default, only when chosen (BRRR_KERNELS=matmul=student).
#include "exercises/grader.h"
#include "kernels/registry.h"

namespace brrr::kernels {
void register_student_kernels();  // student/register.cpp: the CPU stubs (and solutions)
namespace emu {
void register_student_cuda_kernels();  // student/student_cuda.cu, compiled for the emulator
}
#ifdef BRRR_WITH_CUDA
namespace cuda {
void register_student_cuda_kernels();  // the same, compiled by nvcc
}
#endif
}  // namespace brrr::kernels

namespace brrr::exercises {
namespace {

void provide(DeviceType device, bool emulated) {
  if (device == DeviceType::CPU) {
    kernels::register_student_kernels();
  } else if (emulated) {
    kernels::emu::register_student_cuda_kernels();
  } else {
#ifdef BRRR_WITH_CUDA
    kernels::cuda::register_student_cuda_kernels();
#endif
  }
}

}  // namespace

void install() { kernels::add_provider(&provide); }

}  // namespace brrr::exercises
