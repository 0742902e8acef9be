// exercises/student/matmul_grader.cpp: the grader of ex14.1 (chapter 14), the shared-memory matmul
// kernel, the whole MatmulShape contract. Read before: the stub beside it, then
// exercises/grading.h. Read next: exercises/student/transpose_grader.cpp (ex14.2).
#include <cmath>

#include "exercises/grading.h"
#include "kernels/registry.h"
#include "kernels/cuda/runtime.h"

namespace brrr::exercises {

namespace {
// The stream every brrr kernel and copy on the CUDA device runs on (the GPU's or the emulator's).
kernels::Stream device_stream() {
  gpu::Runtime* runtime = cuda::is_emulated() ? &gpu::emulator_runtime() : gpu::cuda_runtime();
  BRRR_CHECK(runtime != nullptr, "exercises: no CUDA device (a GPU or the emulator)");
  return runtime->stream();
}
}  // namespace

// ex14.1: the lab checks the plain product (M, N, K) = (37, 29, 45); the model also uses the
// transposes, batches (a stride of 0 broadcasts), accumulate and K == 0, so those are checked
// here on the device against the CPU's naive kernel.
Result grade_matmul_shared(const std::string& variant) {
  Result graded = grade_kernel("matmul", variant, kernel_device(), {37, 29, 45});
  const DeviceType cuda = DeviceType::CUDA;
  kernels::matmul_fn<float> fn = nullptr;
  with_kernel_variant("matmul", variant, [&] { fn = kernels::lookup(kernels::op::matmul<float>, cuda); }, cuda);
  kernels::matmul_fn<double> naive = nullptr;
  with_kernel_variant("matmul", "naive", [&] {
    naive = kernels::lookup(kernels::op::matmul<double>, DeviceType::CPU);
  });
  const std::vector<MatmulProblem> problems = {
      {1, 19, 23, 33, true, false, false, false}, {1, 23, 19, 17, false, true, false, false},
      {1, 17, 18, 20, true, true, false, false},  {1, 20, 21, 19, false, false, true, false},
      {3, 9, 17, 11, false, false, false, false}, {2, 9, 20, 5, false, true, true, true},
      {1, 5, 6, 0, false, false, false, false},   {2, 5, 6, 0, false, false, true, false},
  };
  Generator gen(11);
  for (const MatmulProblem& p : problems) {
    const kernels::MatmulShape s = p.shape();
    const Tensor a = random_matrix(p.batch, p.M * p.K, gen), b = random_matrix(p.broadcast_b ? 1 : p.batch, p.K * p.N, gen);
    const Tensor init = random_matrix(p.batch, p.M * p.N, gen);
    Tensor ref = init.clone();
    naive(ref.data_ptr<double>(), a.data_ptr<double>(), b.data_ptr<double>(), s, nullptr);
    const Device device = Device::cuda();
    const Tensor a_dev = a.to(kFloat32).to(device), b_dev = b.to(kFloat32).to(device);
    Tensor got = init.to(kFloat32).to(device);
    // On brrr's stream, where the copies before and after it run. (Stream 0, the legacy default
    // stream, is not ordered with brrr's non-blocking stream: on a GPU the copy back could read
    // `got` before the kernel finished. The emulator refuses such a launch.)
    fn(got.data_ptr<float>(), a_dev.data_ptr<float>(), b_dev.data_ptr<float>(), s, device_stream());
    check_matmul_out(got.to(kCPU).to_vector<float>(), ref.to_vector<double>(), p, "matmul variant '" + variant + "'",
                     "the naive kernel gives");
  }
  graded.message += "; 8 cases of transposes, batch strides (0 included), accumulate and K = 0 agree with naive";
  return graded;
}

}  // namespace brrr::exercises
