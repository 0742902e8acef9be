// lab/report.cpp: what a run reports: its verdict, the table of its variants, and JSON lines
// for scripts (scripts/gpu.sh's report). Chapter 11. Read before: steps.h. Read next: the
// table, cases_elementwise.cpp to cases_optim.cpp.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "lab/steps.h"

namespace brrr::lab {

bool Report::passed() const {
  for (const VariantResult& r : results)
    if (!r.passed) return false;
  return true;
}

std::vector<std::string> Report::failures() const {
  std::vector<std::string> lines;
  for (const VariantResult& r : results)
    if (!r.passed) lines.push_back(op + " variant '" + r.variant + "' on " + device + ": " + r.failure);
  return lines;
}

void print_table(std::FILE* out, const Case& c, const Report& report, bool timed) {
  const char* unit = c.report_flops ? "TFLOP/s" : "GB/s";
  std::size_t width = 7;
  for (const VariantResult& r : report.results) width = std::max(width, r.variant.size() + 2);
  const int w = static_cast<int>(width);
  if (timed)
    say(out, "\n%-*s | %9s | %9s | %9s | %9s | %s\n", w, "variant", "time (ms)", "min (ms)", unit, "% of peak",
        "check (max rel err)");
  else
    say(out, "\n%-*s | %s\n", w, "variant", "check (max rel err)");
  for (const VariantResult& r : report.results) {
    const std::string name = r.variant + (r.is_default ? " *" : "");
    std::string check = !r.passed      ? (r.checked ? format("FAIL %.2e", r.max_rel_error) : "FAIL")
                              : r.not_written ? "not written yet (an exercise stub)"
                              : !r.passed_over.empty() ? "passed over: " + r.passed_over
                              : r.checked     ? format("ok %.2e", r.max_rel_error)
                                              : "unchecked (no reference)";
    // A low-precision variant's error against its baseline's: "ok 1.74e-02 (1.00x bf16)".
    const std::string versus = !r.checked || r.precision.empty() ? ""
                               : r.baseline_rel_error > 0
                                   ? format(" (%.2fx %s)", r.baseline_ratio, r.precision.c_str())
                                   : format(" (%s baseline exact)", r.precision.c_str());
    check += versus;
    if (!timed) {
      say(out, "%-*s | %s\n", w, name.c_str(), check.c_str());
      continue;
    }
    std::string time = "-", min = "-", rate = "-", percent = "-";
    if (r.timed) {
      time = format("%.4f", r.median_ms);
      min = format("%.4f", r.min_ms);
      rate = r.rate >= 100 ? format("%.0f", r.rate) : r.rate >= 1 ? format("%.2f", r.rate) : format("%.3g", r.rate);
      if (r.percent_of_peak >= 0) percent = format("%.1f %%", r.percent_of_peak);
    }
    say(out, "%-*s | %9s | %9s | %9s | %9s | %s\n", w, name.c_str(), time.c_str(), min.c_str(), rate.c_str(),
        percent.c_str(), check.c_str());
  }
  say(out, "* the default variant (what the registry selects in this dtype)\n");
}

void print_peak(std::FILE* out, const Case& c, const Peaks& peaks) {
  if (c.report_flops && peaks.tflops > 0)
    say(out, "peak: %.2f TFLOP/s (%s)\n", peaks.tflops, peaks.flops_how.c_str());
  else if (!c.report_flops && peaks.bandwidth_gbs > 0)
    say(out, "peak: %.1f GB/s (%s)\n", peaks.bandwidth_gbs, peaks.bandwidth_how.c_str());
  else
    say(out, "peak: %s\n", (c.report_flops ? peaks.flops_how : peaks.bandwidth_how).c_str());
}

// One object per variant; nlohmann::json writes the strings' escapes and the numbers.
std::string json_lines(const Report& report) {
  std::string lines;
  for (const VariantResult& r : report.results) {
    nlohmann::ordered_json row = {{"op", report.op},
                                  {"device", report.device},
                                  {"size", report.size},
                                  {"dims", report.dims},
                                  {"variant", r.variant},
                                  {"default", r.is_default},
                                  {"passed", r.passed},
                                  {"checked", r.checked},
                                  {"max_rel_error", r.max_rel_error}};
    if (!r.precision.empty()) {  // a low-precision variant: its judgement against the baseline
      row["precision"] = r.precision;
      row["baseline_rel_error"] = r.baseline_rel_error;
      row["baseline_ratio"] = r.baseline_ratio;
    }
    if (!r.passed_over.empty()) row["passed_over"] = r.passed_over;
    if (!report.check_size.empty()) row["check_size"] = report.check_size;
    if (r.timed) {
      row["median_ms"] = r.median_ms;
      row["min_ms"] = r.min_ms;
      row["rate"] = r.rate;
      row["unit"] = report.unit;
      row["peak"] = report.peak;
      row["percent_of_peak"] = r.percent_of_peak;
    }
    lines += row.dump() + "\n";
  }
  return lines;
}

}  // namespace brrr::lab
