// exercises/student/div_backward_grader.cpp: the grader of ex03.1 (chapter 03), div's backward
// against finite differences. Read before: the stub beside it, then exercises/grading.h. Read next:
// exercises/student/matmul_tiled_grader.cpp (ex04.1).
#include "exercises/grading.h"
#include "exercises/student/student.h"
#if BRRR_EXERCISE_SOLUTIONS
#include "exercises/solutions/solutions.h"
#endif

namespace brrr::exercises {

namespace {
Result check_div_backward(DivFn div) {
  Generator gen(2024);
  // b stays in [0.5, 1.5), away from 0, where a / b and its derivatives blow up.
  auto away_from_zero = [&](Shape shape) { return ops::add(rand(shape, gen, kFloat64), 0.5); };
  struct Case {
    Shape a, b;
    bool grad_a, grad_b;
  };
  const std::vector<Case> cases = {
      {{3, 4}, {3, 4}, true, true},  {{2, 3}, {2, 1}, true, true}, {{2, 3}, {3}, true, true},
      {{4}, {2, 1, 4}, true, true},  {{3, 4}, {3, 4}, true, false}, {{3, 4}, {4}, false, true},
  };
  for (const Case& c : cases) {
    Tensor a = randn(c.a, gen, kFloat64), b = away_from_zero(c.b);
    a.requires_grad_(c.grad_a);
    b.requires_grad_(c.grad_b);
    std::ostringstream name;
    name << "student::div(a " << shape_str(c.a) << (c.grad_a ? "" : " (no grad)") << ", b " << shape_str(c.b)
         << (c.grad_b ? "" : " (no grad)") << ")";
    const Tensor expected = ops::div(a.detach(), b.detach());
    GradcheckResult r;
    try {
      const Tensor got = div(a, b);
      if (got.shape() != expected.shape() || ops::max(ops::sub(got, expected).pow(2.0)).item() > 0)
        fail(name.str(), ": the forward changed; only div_backward is yours to write");
      r = gradcheck([&](const std::vector<Tensor>& x) { return div(x[0], x[1]); }, {a, b});
    } catch (const Error& e) {  // e.g. a gradient of the wrong shape: say which case
      const std::string what = e.what();
      if (what.find(student::kNotWritten) != std::string::npos) throw;
      // The usual slip: b was broadcast, and its gradient kept the output's shape.
      const bool shape = what.find("a gradient of shape") != std::string::npos;
      fail(name.str(), ": ", what,
           shape ? " (an input that was broadcast gets its gradient summed back to its own shape: autograd::sum_to)"
                 : "");
    }
    if (!r.ok) fail(name.str(), ": gradient differs from finite differences at ", r.message);
  }
  return result(Status::Passing, "6 cases, broadcast included, agree with finite differences");
}
}  // namespace

Result grade_div_backward_variant(const std::string& variant) {
#if BRRR_EXERCISE_SOLUTIONS
  if (variant == "solution") return check_div_backward(&solution::div);
#endif
  return check_div_backward(&student::div);
}

Result grade_div_backward(DivFn div) {
  return guarded("ex03.1", [&] { return check_div_backward(div); });
}

}  // namespace brrr::exercises
