// lab/counters.cpp: the kernel lab's counters mode (counters.h): each variant run once on
// the emulator with the memory counters on, its launches summed, shown against the op's least
// traffic. Chapter 11 (the roofline and the kernel lab). Read before: counters.h,
// kernels/cuda/simt_counters.h. Read next: apps/brrr/cli_kernel_lab.cpp (--mode counters).
//
// Reading the table
// -----------------
// A bandwidth kernel is at its best when each load and store is fully coalesced (sectors per
// request at the ideal: 4 for a warp of floats, 16 for a warp of float4s; "sectors / ideal"
// 1.00) and when it reads each input and writes each output once ("reads 1.00x"). A row that
// reads 2.00x the minimum reads its input twice; one whose sectors are 1.25x the ideal has
// lanes that straddle sectors (a misaligned start) or scatter. In shared memory, conflicts are
// the wavefronts above the ideal. The speed-of-light table below it is the least time the
// counted work can take on an H100 SXM and an H200 (speed_of_light.h): a kernel far above it
// on a GPU loses time elsewhere (latency, occupancy), which no counter of the emulator shows.
#include "lab/counters.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "lab/device.h"

namespace brrr::lab {

namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// "4.00 (4.00)": sectors per request, and the ideal's.
std::string per_request(std::uint64_t sectors, std::uint64_t ideal, std::uint64_t requests) {
  if (requests == 0) return "-";
  return format("%.2f (%.2f)", ratio(static_cast<double>(sectors), static_cast<double>(requests)),
                ratio(static_cast<double>(ideal), static_cast<double>(requests)));
}

std::string count_text(std::uint64_t n) { return n >= 100000 ? format("%.3g", static_cast<double>(n)) : std::to_string(n); }

}  // namespace

double CounterRow::dram_floor_bytes() const {
  return static_cast<double>(total.distinct_sectors_read + total.distinct_sectors_written) * total.sector_bytes;
}
double CounterRow::reads_over_minimum() const {
  return ratio(static_cast<double>(total.global_ld_sectors + total.global_ldgsts_sectors) * total.sector_bytes,
               min_read_bytes);
}
double CounterRow::writes_over_minimum() const {
  return ratio(static_cast<double>(total.global_st_sectors) * total.sector_bytes, min_write_bytes);
}
double CounterRow::dram_over_minimum() const { return ratio(dram_floor_bytes(), min_read_bytes + min_write_bytes); }
LeastTime CounterRow::launch_bound(const Chip& chip, std::size_t launch) const {
  // A call of one launch: the launch is the call, the case's FLOPs are its own.
  return bound_on(chip, work_of(launches.at(launch), launches.size() == 1 ? flops : 0.0));
}
LeastTime CounterRow::bound(const Chip& chip) const {
  if (launches.size() == 1) return launch_bound(chip, 0);
  LeastTime b = bound_on(chip, work_of(total, flops));  // each unit's time for the whole call
  double sum = 0;
  for (std::size_t l = 0; l < launches.size(); ++l) sum += launch_bound(chip, l).seconds;
  if (sum >= b.seconds) {
    b.seconds = sum;
    b.unit = "launches";  // the sum of the launches' bounds, each bound by its own unit
  }
  return b;
}

CountersReport run_counters(const Case& c, const Options& options) {
  BRRR_CHECK(options.device == LabDevice::Emulator,
             "kernel-lab --mode counters: the counters are the emulator's; use --device emulator (on a GPU, "
             "Nsight Compute counts the same metrics: scripts/gpu.sh)");
  BRRR_CHECK(simt::memory_counting_available(),
             "kernel-lab --mode counters: this build has no memory counters (the AddressSanitizer build has no "
             "instrumentation of kernel accesses)");
  std::FILE* out = options.out;
  Target target(options.device);
  CountersReport report;
  report.op = c.name;
  report.dims = options.size.empty() ? c.default_size(options.device) : options.size;
  BRRR_CHECK(report.dims.size() == c.dim_names.size(), "kernel-lab ", c.name, ": ", report.dims.size(),
             " sizes given, ", c.dim_names.size(), " expected");
  report.size = size_string(c, report.dims);
  const DType dtype = c.call.one_dtype ? c.call.dtype : options.dtype;
  const std::vector<Variant> variants =
      pick_variants(variants_of(c.op_name(), target.type(), dtype), options.variant, c.name, "the emulator");
  say(out, "kernel-lab %s: %s\n", c.name.c_str(), c.what.c_str());
  say(out, "mode counters: each variant run once on the emulator at %s%s, its memory counted as Nsight Compute "
           "counts it (kernels/cuda/simt_counters.h)\n",
      report.size.c_str(), options.misaligned ? ", every array one element off" : "");
  if (variants.empty()) {
    report.note = "no variant of " + c.op_name() + " on the emulator";
    say(out, "%s\n", report.note.c_str());
    return report;
  }

  // The inputs, once: counts do not depend on the values, except through data-dependent paths.
  Problem problem;
  problem.dims = report.dims;
  problem.dtype = options.dtype;
  Random random(options.seed);
  c.make(problem, random);
  double min_read = 0, min_write = 0;
  for (const Array& a : problem.arrays) {
    const double bytes = static_cast<double>(a.values.size() * DeviceProblem::bytes_of(a, problem.dtype));
    if (a.role != Array::kOutput) min_read += bytes;
    if (a.role != Array::kInput) min_write += bytes;
  }

  for (const Variant& v : variants) {
    CounterRow row;
    row.variant = v.name;
    row.is_default = v.is_default;
    row.min_read_bytes = min_read;
    row.min_write_bytes = min_write;
    row.flops = c.flops ? c.flops(report.dims) : 0.0;
    const Bound kernel = c.call.bind(target.type(), dtype, v.name);
    if (!kernel) {
      row.failure = "could not be bound";
      report.rows.push_back(row);
      continue;
    }
    DeviceProblem arrays(target, problem, options.misaligned);
    arrays.upload(target, problem);
    simt::take_memory_counts();
    simt::set_memory_counting(true);
    try {
      kernel(arrays.args);
      target.synchronize();
    } catch (const Error& e) {
      row.failure = e.what();
    }
    simt::set_memory_counting(false);
    for (simt::LaunchCounts& launch : simt::take_memory_counts()) {
      row.kernels.push_back(launch.kernel);
      row.total += launch;
      launch.instructions.clear();  // kept in the total, by instruction
      row.launches.push_back(std::move(launch));
    }
    report.rows.push_back(std::move(row));
  }
  print_counters(out, report);
  print_speed_of_light(out, report);
  if (options.variant != "all" && !report.rows.empty()) print_counter_lines(out, report.rows.front());
  return report;
}

void print_counters(std::FILE* out, const CountersReport& report) {
  if (!out) return;
  std::size_t width = 7;
  for (const CounterRow& r : report.rows) width = std::max(width, r.variant.size() + 2);
  const int w = static_cast<int>(width);
  say(out, "\n%-*s | %8s | %13s | %8s | %13s | %9s | %9s | %9s | %9s | %6s | %6s | %6s | %6s\n", w,
      "variant", "ld req", "ld sect/req", "st req", "st sect/req", "sh ld wf", "sh ld cf", "sh st wf", "sh st cf",
      "lanes", "reads", "writes", "DRAM");
  bool any_inexact = false;
  for (const CounterRow& r : report.rows) {
    const std::string name = r.variant + (r.is_default ? " *" : "");
    if (!r.failure.empty()) {
      say(out, "%-*s | did not run: %s\n", w, name.c_str(), r.failure.c_str());
      continue;
    }
    const simt::LaunchCounts& t = r.total;
    const double lanes = ratio(static_cast<double>(t.lanes), 32.0 * static_cast<double>(t.requests()));
    any_inexact |= t.inexact > 0;
    say(out, "%-*s | %8s | %13s | %8s | %13s | %9s | %9s | %9s | %9s | %5.1f%% | %5.2fx | %5.2fx | %5.2fx%s\n", w,
        name.c_str(), count_text(t.global_ld_requests).c_str(),
        per_request(t.global_ld_sectors, t.global_ld_ideal_sectors, t.global_ld_requests).c_str(),
        count_text(t.global_st_requests).c_str(),
        per_request(t.global_st_sectors, t.global_st_ideal_sectors, t.global_st_requests).c_str(),
        count_text(t.shared_ld_wavefronts).c_str(), count_text(t.shared_ld_wavefronts - t.shared_ld_ideal).c_str(),
        count_text(t.shared_st_wavefronts).c_str(), count_text(t.shared_st_wavefronts - t.shared_st_ideal).c_str(),
        100 * lanes, r.reads_over_minimum(), r.writes_over_minimum(), r.dram_over_minimum(),
        (t.global_ldgsts_requests ? format("  (and %s cp.async requests, %s sectors each)",
                                           count_text(t.global_ldgsts_requests).c_str(),
                                           per_request(t.global_ldgsts_sectors, t.global_ldgsts_ideal_sectors,
                                                       t.global_ldgsts_requests).c_str())
                                  : std::string())
            .append(t.inexact ? format("  (%d instructions inexact)", t.inexact) : std::string())
            .c_str());
  }
  say(out,
      "* the default variant. ld/st: global loads and stores; sect/req: sectors per request (in parentheses the "
      "ideal, the least sectors each request's bytes fit in); sh wf / cf: shared-memory wavefronts and bank "
      "conflicts (wavefronts above the ideal); lanes: active lanes per memory request; reads, writes: sectors "
      "requested over the least bytes the op must read (write), each input read once, each output written once "
      "(re-reads a cache serves included); DRAM: an estimate, the distinct sectors each launch reads and writes "
      "over those least bytes\n");
  if (any_inexact)
    say(out, "inexact: the emulator could not pair the lanes of a warp for some instructions (a data-dependent "
             "branch in a loop); their counts are shown but may differ on a GPU (--variant V lists them)\n");
}

namespace {

// A launch's kernel as BRRR_LAUNCH spelled it, without the parentheses around a template.
std::string kernel_name(const std::string& launched) {
  if (launched.size() > 2 && launched.front() == '(' && launched.back() == ')')
    return launched.substr(1, launched.size() - 2);
  return launched;
}

// "2.80 DRAM": a bound in microseconds and its unit.
std::string bound_text(const LeastTime& b) { return format("%.3g %s", 1e6 * b.seconds, b.unit.c_str()); }

}  // namespace

void print_speed_of_light(std::FILE* out, const CountersReport& report) {
  if (!out) return;
  const std::vector<Chip>& all = chips();
  std::size_t width = 7;
  for (const CounterRow& r : report.rows)
    for (const std::string& k : r.kernels) width = std::max(width, r.variant.size() + kernel_name(k).size() + 4);
  const int w = static_cast<int>(std::min<std::size_t>(width, 72));
  say(out, "\nspeed of light: the least time of each launch on each chip, from its counts (lab/speed_of_light.h)\n");
  say(out, "%-*s | %9s | %9s | %9s | %9s | %9s | %9s | %-20s | %-20s\n", w, "variant: launch", "DRAM MB", "shared wf",
      "CUDA GF", "mma GF", "wgmma GF", "warp inst", ("us on " + all[0].name).c_str(), ("us on " + all[1].name).c_str());
  std::string measured_lines;
  for (const CounterRow& r : report.rows) {
    if (!r.failure.empty()) continue;
    const auto line = [&](const std::string& name, const Work& work, const LeastTime& b0, const LeastTime& b1) {
      say(out, "%-*s | %9.3g | %9s | %9.3g | %9.3g | %9.3g | %9s | %-20s | %-20s\n", w, name.c_str(), work.amount[0] / 1e6,
          count_text(static_cast<std::uint64_t>(work.amount[1])).c_str(), work.amount[2] / 1e9, work.amount[3] / 1e9,
          work.amount[4] / 1e9, count_text(static_cast<std::uint64_t>(work.amount[5])).c_str(), bound_text(b0).c_str(),
          bound_text(b1).c_str());
    };
    const std::string variant = r.variant + (r.is_default ? " *" : "");
    for (std::size_t l = 0; l < r.launches.size(); ++l)
      line(variant + ": " + kernel_name(r.launches[l].kernel), work_of(r.launches[l], r.launches.size() == 1 ? r.flops : 0.0),
           r.launch_bound(all[0], l), r.launch_bound(all[1], l));
    if (r.launches.size() > 1) line(variant + ": the call", work_of(r.total, r.flops), r.bound(all[0]), r.bound(all[1]));
    for (const Chip& chip : all)
      if (const std::optional<Measured> m = measured_time(chip.name, report.op, r.variant, report.size)) {
        const double bound_ms = 1e3 * r.bound(chip).seconds;
        measured_lines += format("  %s on the %s: measured %.4g us, bound %.3g us: measured / bound %.2f (%s)\n",
                                 r.variant.c_str(), chip.name.c_str(), 1e3 * m->ms, 1e3 * bound_ms, m->ms / bound_ms,
                                 m->source.c_str());
      }
  }
  say(out,
      "work: DRAM MB, the distinct sectors read and written; shared wf, wavefronts; CUDA GF, the case's GFLOPs "
      "that no tensor-core instruction did (per call: shown on a launch only when the call is one launch); mma GF "
      "and wgmma GF, the tensor-core instructions' GFLOPs; warp inst, the warp instructions counted (memory, mma, "
      "wgmma, bulk copies: a floor of what issues). Each chip's time is the slowest unit's, named; a call of "
      "several launches takes at least their sum (\"launches\"). L2 is not a unit (no rate measured or published)\n");
  for (const Chip& chip : all) {
    std::string rates;
    for (const Unit& unit : chip.units) rates += (rates.empty() ? "" : ", ") + unit.name + " " + rate_text(unit);
    say(out, "%s: %s (sources: lab/speed_of_light.cpp)\n", chip.name.c_str(), rates.c_str());
  }
  if (!measured_lines.empty()) say(out, "measured on a GPU at this size:\n%s", measured_lines.c_str());
}

void print_counter_lines(std::FILE* out, const CounterRow& row, int top) {
  if (!out || !row.failure.empty()) return;
  std::vector<simt::InstructionCounts> instructions = row.total.instructions;
  const auto excess = [](const simt::InstructionCounts& i) {
    return i.space == simt::MemorySpace::kGlobal ? i.sectors - i.ideal_sectors : i.wavefronts - i.ideal_wavefronts;
  };
  std::stable_sort(instructions.begin(), instructions.end(), [&](const auto& a, const auto& b) {
    return std::make_tuple(excess(a), a.sectors + a.wavefronts, !a.exact) >
           std::make_tuple(excess(b), b.sectors + b.wavefronts, !b.exact);
  });
  say(out, "\nvariant %s by instruction (the most excess sectors or bank conflicts first; %zu instructions):\n",
      row.variant.c_str(), instructions.size());
  say(out, "%-44s | %-12s | %8s | %6s | %13s | %18s | %9s\n", "source line", "access", "requests", "lanes",
      "sect/req", "wavefronts (ideal)", "excess");
  int shown = 0;
  for (const simt::InstructionCounts& i : instructions) {
    if (shown++ == top) break;
    std::string line = simt::source_line_of(i.pc);
    if (line.empty()) line = format("pc 0x%zx", static_cast<std::size_t>(i.pc));
    const bool global = i.space == simt::MemorySpace::kGlobal;
    const std::string access =
        format("%s %s %d", global ? "global" : "shared", i.async_copy ? "cp.async" : i.store ? "st" : "ld", i.bytes);
    const double lanes = ratio(static_cast<double>(i.lanes), 32.0 * static_cast<double>(i.requests));
    say(out, "%-44s | %-12s | %8s | %5.1f%% | %13s | %18s | %9s%s\n", line.c_str(), access.c_str(),
        count_text(i.requests).c_str(), 100 * lanes,
        global ? per_request(i.sectors, i.ideal_sectors, i.requests).c_str() : "-",
        global ? "-" : format("%s (%s)", count_text(i.wavefronts).c_str(), count_text(i.ideal_wavefronts).c_str()).c_str(),
        count_text(excess(i)).c_str(), i.exact ? "" : ("  inexact: " + i.inexact_why).c_str());
  }
}

std::string counters_json_lines(const CountersReport& report) {
  std::string lines;
  for (const CounterRow& r : report.rows) {
    nlohmann::ordered_json j;
    const simt::LaunchCounts& t = r.total;
    j["op"] = report.op;
    j["device"] = "emulator";
    j["size"] = report.size;
    j["dims"] = report.dims;
    j["variant"] = r.variant;
    j["default"] = r.is_default;
    j["ran"] = r.failure.empty();
    if (!r.failure.empty()) j["failure"] = r.failure;
    j["kernels"] = r.kernels;
    for (const simt::NamedCount& m : simt::ncu_metrics(t)) j[m.name] = m.value;
    j["emulator__active_lanes_per_request"] = ratio(static_cast<double>(t.lanes), static_cast<double>(t.requests()));
    j["emulator__inexact_instructions"] = t.inexact;
    j["emulator__min_read_bytes"] = r.min_read_bytes;
    j["emulator__min_write_bytes"] = r.min_write_bytes;
    j["emulator__reads_over_minimum"] = r.reads_over_minimum();
    j["emulator__writes_over_minimum"] = r.writes_over_minimum();
    j["estimate__dram_bytes_floor"] = r.dram_floor_bytes();
    j["estimate__dram_over_minimum"] = r.dram_over_minimum();
    for (const Chip& chip : chips()) {
      const LeastTime b = r.bound(chip);
      j["estimate__bound_us@" + chip.name] = 1e6 * b.seconds;
      j["estimate__bound_unit@" + chip.name] = b.unit;
    }
    lines += j.dump() + "\n";
  }
  return lines;
}

}  // namespace brrr::lab
