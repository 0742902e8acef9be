// lab/check.cpp: the check: a variant's outputs against the float64 reference, element by
// element, and a backward's against finite differences. Chapter 11. Read before: steps.h.
// Read next: timing.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "lab/steps.h"

namespace brrr::lab {

// The check.
//
// A float32 result can only be as close to the float64 reference as float32 rounding allows,
// so the lab measures relative error. But |got - ref| / |ref| explodes where the reference
// happens to be near zero (a matmul output of 1e-7 is not a bug), so each element's error is
// taken relative to the larger of |ref| and the output's typical size, its mean |ref|:
//
//   err[i] = |got[i] - ref[i]| / max(|ref[i]|, mean |ref|)
//
// An element fails when err[i] > tolerance, or when it is NaN or infinite. Outputs start as
// NaN, so an element the kernel never writes fails too. Index outputs must match exactly.
//
// A low-precision variant (bf16, tf32: chapter 18) is judged as FlashAttention's tests judge
// theirs: no fixed tolerance, which says nothing of whether the kernel is as accurate as the
// precision allows and, held near the precision's typical error, fails by chance on some seeds.
// Instead, on the same inputs, the case's baseline (Case::baseline) computes each output the
// way a careful library does in that precision, and for each output
//
//   max err(variant) <= 2 max err(baseline) + tolerance   (the op's float32 tolerance),
//
// both errors measured as above, against the float64 reference. A kernel that rounds no more
// than the baseline lands near 1x; one that loses precision the baseline keeps (a bf16
// accumulator, a product rounded twice) lands well past 2x, whatever the seed.

namespace {

struct Comparison {
  double max_abs = 0, max_rel = 0;
  std::int64_t bad = 0;       // elements that failed
  std::string first_failure;  // the first of them
};

// The mean magnitude of the finite values of a reference.
double mean_magnitude(const std::vector<double>& ref) {
  double sum = 0;
  for (double r : ref) sum += std::isfinite(r) ? std::fabs(r) : 0.0;
  return ref.empty() ? 0.0 : sum / static_cast<double>(ref.size());
}

// `zero_scale`: what an error is relative to where the whole reference is 0 (no scale of its
// own): the mean magnitude of the op's other outputs.
// `allowance`: how the tolerance was set, for the failure message ("" for a fixed one).
Comparison compare(const std::string& name, const std::vector<double>& got, const std::vector<double>& ref,
                   double tolerance, double zero_scale, const std::string& allowance = "") {
  Comparison c;
  const std::size_t n = got.size();
  double scale = mean_magnitude(ref);
  if (scale == 0.0) scale = zero_scale;
  scale = std::max(scale, std::numeric_limits<double>::min());
  for (std::size_t i = 0; i < n; ++i) {
    const double g = got[i], r = ref[i];
    std::string why;
    if (!std::isfinite(g)) {
      if (g != r) why = format("%s[%zu] = %g (reference %.9g)", name.c_str(), i, g, r);
    } else {
      const double abs_error = std::fabs(g - r);
      const double rel_error = abs_error / std::max(std::fabs(r), scale);
      c.max_abs = std::max(c.max_abs, abs_error);
      c.max_rel = std::max(c.max_rel, rel_error);
      if (!(rel_error <= tolerance))  // also catches a NaN error from an infinite reference
        why = format("%s[%zu] = %.9g but the reference is %.9g (relative error %.3g > %s%.3g%s)", name.c_str(), i,
                     g, r, rel_error, allowance.empty() ? "tolerance " : "", tolerance, allowance.c_str());
    }
    if (!why.empty() && c.bad++ == 0) c.first_failure = why;
  }
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Finite differences (grad mode, for a backward kernel)
//
// A backward kernel computes d loss / d input for loss = sum(dout * forward(inputs)). The
// case's loss() is that sum, from the forward's float64 reference. Central differences,
//
//   d loss / d x[j] ~ (loss(x + h e_j) - loss(x - h e_j)) / 2h,   h = 1e-5 max(1, |x[j]|),
//
// are good to about h^2 (truncation) plus 1e-16 |loss| / h (rounding): 1e-9 or so here, far
// below float32's rounding, and they know nothing of how the backward was derived.

namespace {

std::vector<double> numeric_gradient(const Case& c, Problem p, const std::string& input) {
  std::vector<double>& x = p.array(input).values;
  std::vector<double> g(x.size());
  for (std::size_t j = 0; j < x.size(); ++j) {
    const double saved = x[j], h = 1e-5 * std::max(1.0, std::fabs(saved));
    x[j] = saved + h;
    const double plus = c.loss(p);
    x[j] = saved - h;
    const double minus = c.loss(p);
    x[j] = saved;
    g[j] = (plus - minus) / (2 * h);
  }
  return g;
}

}  // namespace

bool call_variant(VariantResult& r, Target& target, const Problem& problem, DeviceProblem& device, const Bound& kernel,
                  bool asked_by_name, std::FILE* out, std::vector<std::vector<double>>* got) {
  try {
    device.upload(target, problem);
    kernel(device.args);
    target.synchronize();
    got->assign(problem.arrays.size(), {});
    for (std::size_t i = 0; i < problem.arrays.size(); ++i)
      if (problem.arrays[i].compared()) (*got)[i] = device.download(target, problem, i);
    return true;
  } catch (const std::exception& e) {
    r.failure = std::string("the call threw: ") + e.what();
    if (!asked_by_name && std::strstr(e.what(), kernels::kNotWrittenYet)) {
      r.not_written = true;
      r.checked = false;
      say(out, "  %s\n", r.failure.c_str());
    } else {
      r.passed = false;
      say(out, "  FAIL: %s\n", r.failure.c_str());
    }
    return false;
  }
}

// Compares the outputs named in `which` (all compared arrays when empty) with `expected`.
void compare_outputs(VariantResult& r, const Problem& problem, const std::vector<std::vector<double>>& got,
                     const std::vector<std::vector<double>>& expected, double tolerance,
                     const std::vector<std::string>& which, bool on_gpu, std::FILE* out, const Baseline* baseline) {
  std::string judged;  // per output, for a low-precision variant: its error, the baseline's, the ratio
  if (baseline) r.precision = baseline->precision;
  bool printed_pairs = false;
  r.checked = true;
  // An output that is exactly 0 (attention's dq and dk at T = 1: one key, weight 1, nothing
  // through the softmax) is judged against the other outputs' scale: a kernel whose sums run
  // in another order (tensor cores, which truncate) leaves ~1e-8 there, which no relative
  // error to 0 can pass.
  double outputs_scale = 0.0;
  int outputs = 0;
  for (std::size_t i = 0; i < problem.arrays.size(); ++i)
    if (problem.arrays[i].compared() && !expected[i].empty()) {
      outputs_scale += mean_magnitude(expected[i]);
      ++outputs;
    }
  if (outputs) outputs_scale /= outputs;
  for (std::size_t i = 0; i < problem.arrays.size(); ++i) {
    const Array& a = problem.arrays[i];
    if (!a.compared() || expected[i].empty()) continue;
    if (!which.empty() && std::find(which.begin(), which.end(), a.name) == which.end()) continue;
    if (!printed_pairs) {  // the first few pairs of the first output, as llm.c prints them
      printed_pairs = true;
      for (std::size_t k = 0; k < std::min<std::size_t>(5, got[i].size()); ++k)
        say(out, "  %s[%zu]  %s %14.8f  %s %14.8f\n", a.name.c_str(), k, "ref", expected[i][k],
            on_gpu ? "gpu" : "cpu", got[i][k]);
    }
    const bool floating = a.type == Array::kFloat || a.type == Array::kFloat32 || a.type == Array::kFloat64;
    double allowed = floating ? tolerance : 0.0, base = 0.0;
    std::string allowance;
    const bool relative = floating && baseline && !baseline->outputs[i].empty();
    if (relative) {
      base = compare(a.name, baseline->outputs[i], expected[i], HUGE_VAL, outputs_scale).max_rel;
      allowed = kBaselineFactor * base + tolerance;
      allowance = format(" = %g x the %s baseline's %.3g + %.1e", kBaselineFactor, baseline->precision.c_str(), base,
                         tolerance);
    }
    const Comparison cmp = compare(a.name, got[i], expected[i], allowed, outputs_scale, allowance);
    if (relative) {
      r.baseline_rel_error = std::max(r.baseline_rel_error, base);
      const double ratio = base > 0 ? cmp.max_rel / base : 0.0;
      r.baseline_ratio = std::max(r.baseline_ratio, ratio);
      const std::string versus = base > 0 ? format("%.2fx the %s baseline's %.2e", ratio, baseline->precision.c_str(), base)
                                          : format("the %s baseline's is 0", baseline->precision.c_str());
      judged += format("  %s: max rel err %.2e (%s)\n", a.name.c_str(), cmp.max_rel, versus.c_str());
    }
    r.max_abs_error = std::max(r.max_abs_error, cmp.max_abs);
    r.max_rel_error = std::max(r.max_rel_error, cmp.max_rel);
    if (cmp.bad && r.passed) {
      r.passed = false;
      r.failure = cmp.first_failure + format(" (%lld of %zu elements of %s fail)", static_cast<long long>(cmp.bad),
                                             got[i].size(), a.name.c_str());
    }
  }
  if (!judged.empty()) say(out, "%s", judged.c_str());
  if (!r.passed)
    say(out, "  FAIL: %s\n", r.failure.c_str());
  else if (!judged.empty() && r.baseline_rel_error > 0)
    say(out, "  max rel err %.2e, at most %.2fx the %s baseline's error (passes at <= %gx + %.1e): ok\n",
        r.max_rel_error, r.baseline_ratio, r.precision.c_str(), kBaselineFactor, tolerance);
  else if (!judged.empty())
    say(out, "  max rel err %.2e, within the floor %.1e (the %s baseline's error is 0): ok\n", r.max_rel_error,
        tolerance, r.precision.c_str());
  else
    say(out, "  max abs err %.3e, max rel err %.3e (tolerance %.1e): ok\n", r.max_abs_error, r.max_rel_error,
        tolerance);
}

// The expected outputs: the reference on the problem (or on its bf16-rounded inputs).
std::vector<std::vector<double>> reference_outputs(const Case& c, Problem p) {
  c.reference(p);
  std::vector<std::vector<double>> expected(p.arrays.size());
  for (std::size_t i = 0; i < p.arrays.size(); ++i)
    if (p.arrays[i].compared()) expected[i] = std::move(p.arrays[i].values);
  return expected;
}

// The expected gradients: finite differences of the case's loss (added to what the output
// held for a kernel that accumulates).
std::vector<std::vector<double>> gradient_outputs(const Case& c, const Problem& p) {
  std::vector<std::vector<double>> expected(p.arrays.size());
  for (const Grad& g : c.grads)
    for (std::size_t i = 0; i < p.arrays.size(); ++i) {
      if (p.arrays[i].name != g.output) continue;
      expected[i] = numeric_gradient(c, p, g.input);
      if (g.accumulates)
        for (std::size_t j = 0; j < expected[i].size(); ++j) expected[i][j] += p.arrays[i].values[j];
    }
  return expected;
}

}  // namespace brrr::lab
