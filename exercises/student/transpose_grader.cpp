// exercises/student/transpose_grader.cpp: the grader of ex14.2 (chapter 14), the transpose
// graded on its memory counters: its results first (the kernel lab, at ragged sizes), then what
// it does to memory, counted on the SIMT emulator as Nsight Compute counts it. Read before: the
// stub beside it, exercises/grading.h, lab/counters.h. Read next:
// exercises/student/attention_grader.cpp (ex15.1).
//
// The counters are the emulator's (kernels/cuda/simt_counters.h): with a GPU present, the
// results are checked on the GPU and the counting then switches this process's CUDA device to
// the emulator (cuda::use_emulator), as `brrr kernel-lab --device emulator` does.
#include <iomanip>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "exercises/grading.h"
#include "exercises/student/student.h"
#include "lab/counters.h"

namespace brrr::exercises {

namespace {

// Where the counts are judged: sizes whose rows start on a 32-byte sector (M and N multiples
// of 8 floats, the lab's buffers 256-byte aligned), so that every warp's 32 floats can fit in 4
// sectors; at a ragged N the rows themselves straddle sectors, whatever the kernel does. Both
// orientations, so that a kernel tuned to one shape does not pass by chance.
const std::vector<lab::Dims> kCountedSizes = {{64, 96}, {96, 64}};

// "4.00": two decimals.
std::string fixed2(double x) {
  std::ostringstream m;
  m << std::fixed << std::setprecision(2) << x;
  return m.str();
}

// Per request, "4.00 (ideal 4.00)".
std::string per_request(std::uint64_t count, std::uint64_t ideal, std::uint64_t requests) {
  if (requests == 0) return "no requests";
  const auto n = static_cast<double>(requests);
  return fixed2(static_cast<double>(count) / n) + " (ideal " + fixed2(static_cast<double>(ideal) / n) + ")";
}

// What the grader judged, by Nsight Compute's metric names (simt::ncu_metrics, the one table of
// them), then per request and against the least bytes.
std::string counted(const lab::CounterRow& row) {
  const simt::LaunchCounts& t = row.total;
  std::ostringstream m;
  for (const simt::NamedCount& c : simt::ncu_metrics(t))
    if (!std::string_view(c.name).starts_with("emulator__")) m << c.name << " " << c.value << "; ";
  m << "sectors per request: loads " << per_request(t.global_ld_sectors, t.global_ld_ideal_sectors, t.global_ld_requests)
    << ", stores " << per_request(t.global_st_sectors, t.global_st_ideal_sectors, t.global_st_requests);
  if (t.global_ldgsts_requests)
    m << "; cp.async (LDGSTS) requests " << t.global_ldgsts_requests << ", sectors " << t.global_ldgsts_sectors;
  m << "; reads " << fixed2(row.reads_over_minimum()) << "x and writes " << fixed2(row.writes_over_minimum())
    << "x the least bytes";
  return m.str();
}

// The results at the lab case's other shapes (67 x 45 is grade_kernel's), and at 130 x 33 with
// each array one element past a 256-byte boundary (a kernel must not need aligned pointers).
void check_results(const std::string& variant) {
  const lab::Case& c = lab::find_case("transpose");
  struct Run {
    lab::Dims dims;
    bool misaligned;
  };
  const std::vector<Run> runs = {{{1, 1}, false}, {{1, 45}, false}, {{45, 1}, false},
                                 {{33, 130}, false}, {{130, 33}, true}};
  for (const Run& run : runs) {
    lab::Options o;
    o.device = kernel_device();
    o.mode = lab::Mode::Check;
    o.variant = variant;
    o.size = run.dims;
    o.misaligned = run.misaligned;
    o.out = nullptr;
    const lab::Report report = lab::run(c, o);
    BRRR_CHECK(report.note.empty(), "exercises: ", report.note);
    const lab::VariantResult& r = report.results.at(0);
    if (r.passed) continue;
    if (r.failure.find(student::kNotWritten) != std::string::npos) throw Error(r.failure);
    fail("transpose variant '", variant, "' on ", report.device, " at ", report.size,
         run.misaligned ? " (every array one element off)" : "", ": ", r.failure);
  }
}

// The counts at one size: every global request at its ideal sectors, each array moved once,
// no bank conflicts. Returns what was counted.
std::string check_counters(const std::string& variant, const lab::Dims& dims) {
  lab::Options o;
  o.device = lab::LabDevice::Emulator;
  o.variant = variant;
  o.size = dims;
  o.out = nullptr;
  const lab::CountersReport report = lab::run_counters(lab::find_case("transpose"), o);
  BRRR_CHECK(report.note.empty() && report.rows.size() == 1, "exercises: ", report.note);
  const lab::CounterRow& row = report.rows.front();
  if (!row.failure.empty()) {
    if (row.failure.find(student::kNotWritten) != std::string::npos) throw Error(row.failure);
    fail("transpose variant '", variant, "' on the emulator at ", report.size, ": ", row.failure);
  }
  const simt::LaunchCounts& t = row.total;
  const std::string where = "transpose variant '" + variant + "' at " + report.size + " on the emulator: ";
  const std::string what = " (counted: " + counted(row) + ")";
  if (t.inexact > 0)
    fail(where, t.inexact, " memory instructions could not be counted exactly (lanes of a warp took different ",
         "paths inside a loop): make every lane of a warp run the same loop trips", what);
  const std::uint64_t ld = t.global_ld_sectors + t.global_ldgsts_sectors;
  const std::uint64_t ld_ideal = t.global_ld_ideal_sectors + t.global_ldgsts_ideal_sectors;
  if (ld != ld_ideal)
    fail(where, "the global loads are not coalesced: ", ld, " sectors where their bytes fit in ", ld_ideal, what);
  if (t.global_st_sectors != t.global_st_ideal_sectors)
    fail(where, "the global stores are not coalesced: ", t.global_st_sectors, " sectors where their bytes fit in ",
         t.global_st_ideal_sectors, what);
  // Each input read once, each output written once: the sectors' bytes are the matrices' bytes.
  if (row.reads_over_minimum() > 1.0 + 1e-9 || row.writes_over_minimum() > 1.0 + 1e-9)
    fail(where, "in is read ", fixed2(row.reads_over_minimum()), " times and out written ",
         fixed2(row.writes_over_minimum()), " times: each element once is the least", what);
  if (t.shared_ld_wavefronts != t.shared_ld_ideal || t.shared_st_wavefronts != t.shared_st_ideal)
    fail(where, "shared memory has bank conflicts: ", t.shared_ld_wavefronts - t.shared_ld_ideal, " on loads and ",
         t.shared_st_wavefronts - t.shared_st_ideal, " on stores (the wavefronts above the ideal)", what);
  return report.size + ": " + counted(row);
}

}  // namespace

// ex14.2: the results on the device (the GPU, or the emulator without one), timed beside the
// default variant, then the counters on the emulator.
Result grade_transpose(const std::string& variant) {
  Result graded = grade_kernel("transpose", variant, kernel_device(), {67, 45});
  check_results(variant);
  std::string counts;
  for (const lab::Dims& dims : kCountedSizes) counts += "\n  " + check_counters(variant, dims);
  graded.message += "; and at 1x1, 1x45, 45x1, 33x130, 130x33 (misaligned); loads and stores coalesced, each "
                    "array moved once, no bank conflicts:" +
                    counts;
  return graded;
}

}  // namespace brrr::exercises
