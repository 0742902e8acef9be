// exercises/solutions/div_backward.cpp: the reference solution of exercise ex03.1, the
// backward of div (chapter 03). The student's file is exercises/student/div_backward.cpp.
#include "brrr/ops.h"
#include "exercises/solutions/solutions.h"

namespace brrr::solution {

// d(a/b)/da = 1/b, d(a/b)/db = -a/b^2; sum_to folds each gradient back over the dims that
// broadcasting stretched.
autograd::TensorList div_backward(const Tensor& grad_output, const Tensor& a, const Tensor& b, bool need_a,
                                  bool need_b) {
  Tensor grad_a, grad_b;
  if (need_a) grad_a = autograd::sum_to(ops::div(grad_output, b), a.shape());
  if (need_b) grad_b = autograd::sum_to(ops::neg(ops::div(ops::mul(grad_output, a), ops::mul(b, b))), b.shape());
  return {grad_a, grad_b};
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = ops::div(a, b);
  }
  if (autograd::needs_grad({&a, &b}))
    autograd::record("solution::div", {a, b}, out,
                     [a_ = autograd::saved(a), b_ = autograd::saved(b), need_a = a.requires_grad(),
                      need_b = b.requires_grad()](const Tensor& g) { return div_backward(g, a_, b_, need_a, need_b); });
  return out;
}

}  // namespace brrr::solution
