// lab/steps.h: the steps run() takes, each in a file of its own: the check (check.cpp), the
// timing (timing.cpp) and the report (report.cpp). Chapter 11. Internal to lab/.
// Read before: device.h. Read next: check.cpp.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "lab/device.h"

namespace brrr::lab {

// check.cpp. Runs one variant on the problem: upload, call, download the compared outputs into
// *got. An exercise stub that is not written yet (variant "student") throws "not written yet":
// among all the variants it is listed and passed over; asked for by name, it fails. Returns
// whether the call ran.
bool call_variant(VariantResult& r, Target& target, const Problem& problem, DeviceProblem& device, const Bound& kernel,
                  bool asked_by_name, std::FILE* out, std::vector<std::vector<double>>* got);
// What a low-precision variant is judged against (Case::baseline): the baseline's outputs on
// the same inputs, in the problem's array order (empty for an input), and their precision.
struct Baseline {
  std::string precision;  // "bf16" or "tf32"
  std::vector<std::vector<double>> outputs;
};
// Compares the outputs named in `which` (all compared arrays when empty) with `expected`: each
// element within `tolerance`, or, given a baseline, within kBaselineFactor times the baseline's
// largest error on that output plus `tolerance` (the floor).
void compare_outputs(VariantResult& r, const Problem& problem, const std::vector<std::vector<double>>& got,
                     const std::vector<std::vector<double>>& expected, double tolerance,
                     const std::vector<std::string>& which, bool on_gpu, std::FILE* out,
                     const Baseline* baseline = nullptr);
// The expected outputs: the case's float64 reference on the problem.
std::vector<std::vector<double>> reference_outputs(const Case& c, Problem p);
// The expected gradients: finite differences of the case's loss (added to what the output held
// for a kernel that accumulates).
std::vector<std::vector<double>> gradient_outputs(const Case& c, const Problem& p);

// timing.cpp. The timing of one variant that passed: warm-up, then repeats with the cache
// flushed; `traffic` is the bytes of one call (traffic_bytes).
void time_variant(VariantResult& r, Target& target, const Case& c, double traffic, DeviceProblem& device,
                  const Bound& kernel, const Peaks& peaks, int repeats, double budget_seconds, std::FILE* out);

// report.cpp. The table of a run's variants, and the peak its percentages are of.
void print_table(std::FILE* out, const Case& c, const Report& report, bool timed);
void print_peak(std::FILE* out, const Case& c, const Peaks& peaks);

}  // namespace brrr::lab
