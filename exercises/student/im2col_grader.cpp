// exercises/student/im2col_grader.cpp: the grader of ex09.1 (chapter 09), im2col inside
// conv2d_forward variant "student". Read before: the stub beside it, then exercises/grading.h. Read
// next: exercises/student/gelu_grader.cpp (ex12.1, ex12.2).
#include <cmath>

#include "exercises/grading.h"
#include "kernels/registry.h"

namespace brrr::exercises {

// The kernel lab checks the convolution against its definition in float32 at a ragged size
// (groups 2, stride 2, padding 3 > the kernel's half-width); then ops::conv2d in float64,
// with options that differ along H and W (which the lab's square options cannot tell apart),
// against the "direct" reference.
Result grade_im2col(const std::string& variant) {
  Result r = grade_kernel("conv2d_forward", variant, lab::LabDevice::CPU, {3, 4, 9, 7, 6, 3, 2, 3, 1, 2});
  Generator gen(12);
  const Tensor x = randn({2, 3, 11, 8}, gen, kFloat64), w = randn({4, 3, 3, 2}, gen, kFloat64);
  const Tensor b = randn({4}, gen, kFloat64);
  const ops::Size2 stride{2, 1}, padding{1, 3}, dilation{1, 2};
  Tensor got, ref;
  with_kernel_variant("conv2d_forward", variant, [&] { got = ops::conv2d(x, w, b, stride, padding, dilation); });
  with_kernel_variant("conv2d_forward", "direct", [&] { ref = ops::conv2d(x, w, b, stride, padding, dilation); });
  const std::vector<double> g = got.to_vector<double>(), e = ref.to_vector<double>();
  for (std::size_t i = 0; i < e.size(); ++i)
    if (!(std::abs(g[i] - e[i]) <= 1e-9 * std::max(1.0, std::abs(e[i]))))
      fail("conv2d (2, 3, 11, 8) * (4, 3, 3, 2), stride (2, 1), padding (1, 3), dilation (1, 2): out[", i,
           "] is ", g[i], ", the definition gives ", e[i], " (an option of H used for W, or the other way round?)");
  r.message += "; and with stride, padding and dilation that differ along H and W";
  return r;
}

}  // namespace brrr::exercises
