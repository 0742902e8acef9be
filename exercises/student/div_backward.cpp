// exercises/student/div_backward.cpp: exercise ex03.1, the backward of div (chapter 03, autograd).
// Read before: docs/chapters/03-autograd.md, then ops::mul's closure in
// framework/src/ops_elementwise.cpp (the same shape of code, for a product).
//
// What to write: div_backward below. div() at the bottom is ops::div with its backward cut
// out: the forward runs with no graph, then autograd::record attaches a closure that calls
// your function. The grader checks student::div by finite differences (brrr::gradcheck):
//
//   build/brrr exercises check ex03.1      (or: ctest --test-dir build -L ex03.1)
//
// Requirements
//   - out = a / b, broadcast as NumPy does. Return {grad of a, grad of b}.
//   - Each gradient has exactly its input's shape: where broadcasting stretched an input,
//     add the gradient up over the stretched dims (autograd::sum_to does it).
//   - Where need_a (need_b) is false, return an undefined Tensor() in that place: that input
//     needs no gradient, so do not spend the work.
//   - Build the gradients from ops (ops::div, ops::mul, ops::neg ...), not loops: they must
//     work for float32 and float64, on any device.
//
// A plan
//   1. On paper: d(a/b)/da = 1/b and d(a/b)/db = -a/b^2. By the chain rule the gradient of
//      the loss with respect to a is grad_output * (1/b), elementwise.
//   2. Write the a gradient, return {grad_a, Tensor()} and run the grader: the message names
//      the input and element where autograd and finite differences disagree.
//   3. Add the b gradient. Then the broadcast case: the grader divides (2, 3) by (2, 1) and
//      by (3): what shape is grad_output, and what shape must b's gradient have?
#include "brrr/ops.h"
#include "exercises/student/student.h"

namespace brrr::student {

autograd::TensorList div_backward(const Tensor& grad_output, const Tensor& a, const Tensor& b, bool need_a,
                                  bool need_b) {
  // TODO(ex03.1): return {gradient of a, gradient of b}.
  not_written("ex03.1", "div_backward");
}

// The op, written for you (as ops::div is, less the closure's body).
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = ops::div(a, b);
  }
  if (autograd::needs_grad({&a, &b}))
    autograd::record("student::div", {a, b}, out,
                     [a_ = autograd::saved(a), b_ = autograd::saved(b), need_a = a.requires_grad(),
                      need_b = b.requires_grad()](const Tensor& g) { return div_backward(g, a_, b_, need_a, need_b); });
  return out;
}

}  // namespace brrr::student
