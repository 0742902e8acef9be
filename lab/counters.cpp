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
// the wavefronts above the ideal. The H100 floor is the least time the counted work can take:
// a kernel far above it on a GPU loses time elsewhere (latency, occupancy), which no counter
// of the emulator shows.
#include "lab/counters.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "lab/device.h"

namespace brrr::lab {

namespace {

void add(simt::LaunchCounts& into, const simt::LaunchCounts& launch) {
  into.global_ld_requests += launch.global_ld_requests;
  into.global_ld_sectors += launch.global_ld_sectors;
  into.global_ld_ideal_sectors += launch.global_ld_ideal_sectors;
  into.global_st_requests += launch.global_st_requests;
  into.global_st_sectors += launch.global_st_sectors;
  into.global_st_ideal_sectors += launch.global_st_ideal_sectors;
  into.global_ldgsts_requests += launch.global_ldgsts_requests;
  into.global_ldgsts_sectors += launch.global_ldgsts_sectors;
  into.global_ldgsts_ideal_sectors += launch.global_ldgsts_ideal_sectors;
  into.shared_ld_requests += launch.shared_ld_requests;
  into.shared_ld_wavefronts += launch.shared_ld_wavefronts;
  into.shared_ld_ideal += launch.shared_ld_ideal;
  into.shared_st_requests += launch.shared_st_requests;
  into.shared_st_wavefronts += launch.shared_st_wavefronts;
  into.shared_st_ideal += launch.shared_st_ideal;
  into.lanes += launch.lanes;
  into.distinct_sectors_read += launch.distinct_sectors_read;
  into.distinct_sectors_written += launch.distinct_sectors_written;
  into.sector_bytes = launch.sector_bytes;
  into.wgmma_instructions += launch.wgmma_instructions;
  into.wgmma_flops += launch.wgmma_flops;
  into.bulk_load_requests += launch.bulk_load_requests;
  into.bulk_load_bytes += launch.bulk_load_bytes;
  into.bulk_store_requests += launch.bulk_store_requests;
  into.bulk_store_bytes += launch.bulk_store_bytes;
  into.mbarrier_waits += launch.mbarrier_waits;
  for (const simt::InstructionCounts& i : launch.instructions) {
    auto same = [&](const simt::InstructionCounts& j) {
      return j.pc == i.pc && j.space == i.space && j.store == i.store && j.async_copy == i.async_copy &&
             j.bytes == i.bytes;
    };
    auto it = std::find_if(into.instructions.begin(), into.instructions.end(), same);
    if (it == into.instructions.end()) {
      into.instructions.push_back(i);
      continue;
    }
    it->requests += i.requests;
    it->lanes += i.lanes;
    it->sectors += i.sectors;
    it->ideal_sectors += i.ideal_sectors;
    it->wavefronts += i.wavefronts;
    it->ideal_wavefronts += i.ideal_wavefronts;
    it->useful_bytes += i.useful_bytes;
    if (!i.exact && it->exact) {
      it->exact = false;
      it->inexact_why = i.inexact_why;
    }
  }
  into.inexact = 0;
  for (const simt::InstructionCounts& i : into.instructions) into.inexact += i.exact ? 0 : 1;
}

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
double CounterRow::h100_floor_us(const H100Peaks& peaks) const {
  const double wavefronts = static_cast<double>(total.shared_ld_wavefronts + total.shared_st_wavefronts);
  return 1e6 * std::max({dram_floor_bytes() / peaks.bandwidth_bytes_per_s, flops / peaks.flops_per_s,
                         wavefronts / peaks.wavefronts_per_s});
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
  std::vector<Variant> variants = variants_of(c.op_name(), target.type(), dtype);
  if (options.variant != "all") {
    std::vector<std::string> names;
    for (const Variant& v : variants) names.push_back(v.name);
    auto it = std::find_if(variants.begin(), variants.end(), [&](const Variant& v) { return v.name == options.variant; });
    std::string listing;
    for (const std::string& n : names) listing += (listing.empty() ? "" : ", ") + n;
    BRRR_CHECK(it != variants.end(), "kernel-lab: ", c.name, " has no variant '", options.variant,
               "' on the emulator (variants: ", listing, ")");
    variants = {*it};
  }
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
    for (const simt::LaunchCounts& launch : simt::take_memory_counts()) {
      row.kernels.push_back(launch.kernel);
      add(row.total, launch);
    }
    report.rows.push_back(std::move(row));
  }
  print_counters(out, report);
  if (options.variant != "all" && !report.rows.empty()) print_counter_lines(out, report.rows.front());
  return report;
}

void print_counters(std::FILE* out, const CountersReport& report) {
  if (!out) return;
  std::size_t width = 7;
  for (const CounterRow& r : report.rows) width = std::max(width, r.variant.size() + 2);
  const int w = static_cast<int>(width);
  say(out, "\n%-*s | %8s | %13s | %8s | %13s | %9s | %9s | %9s | %9s | %6s | %6s | %6s | %6s | %9s\n", w,
      "variant", "ld req", "ld sect/req", "st req", "st sect/req", "sh ld wf", "sh ld cf", "sh st wf", "sh st cf",
      "lanes", "reads", "writes", "DRAM", "H100 us");
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
    say(out, "%-*s | %8s | %13s | %8s | %13s | %9s | %9s | %9s | %9s | %5.1f%% | %5.2fx | %5.2fx | %5.2fx | %9.3g%s\n", w,
        name.c_str(), count_text(t.global_ld_requests).c_str(),
        per_request(t.global_ld_sectors, t.global_ld_ideal_sectors, t.global_ld_requests).c_str(),
        count_text(t.global_st_requests).c_str(),
        per_request(t.global_st_sectors, t.global_st_ideal_sectors, t.global_st_requests).c_str(),
        count_text(t.shared_ld_wavefronts).c_str(), count_text(t.shared_ld_wavefronts - t.shared_ld_ideal).c_str(),
        count_text(t.shared_st_wavefronts).c_str(), count_text(t.shared_st_wavefronts - t.shared_st_ideal).c_str(),
        100 * lanes, r.reads_over_minimum(), r.writes_over_minimum(), r.dram_over_minimum(), r.h100_floor_us(),
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
      "over those least bytes; H100 us: an estimate, the least time on an H100 for the distinct sectors each launch moves (%.0f GB/s), "
      "the op's FLOPs and the shared wavefronts (lab/counters.h)\n",
      H100Peaks{}.bandwidth_bytes_per_s / 1e9);
  if (any_inexact)
    say(out, "inexact: the emulator could not pair the lanes of a warp for some instructions (a data-dependent "
             "branch in a loop); their counts are shown but may differ on a GPU (--variant V lists them)\n");
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
    j["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] = t.global_ld_requests;
    j["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] = t.global_ld_sectors;
    j["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"] = t.global_st_requests;
    j["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] = t.global_st_sectors;
    j["smsp__inst_executed_op_shared_ld.sum"] = t.shared_ld_requests;
    j["smsp__inst_executed_op_shared_st.sum"] = t.shared_st_requests;
    j["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] = t.shared_ld_wavefronts;
    j["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] = t.shared_st_wavefronts;
    j["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] = t.shared_ld_wavefronts - t.shared_ld_ideal;
    j["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"] = t.shared_st_wavefronts - t.shared_st_ideal;
    // What ncu has no metric of: the emulator's own.
    // cp.async's global reads (ncu counts LDGSTS under metrics of its own, whose names were not
    // checked against a GPU here).
    j["emulator__requests_global_op_ldgsts"] = t.global_ldgsts_requests;
    j["emulator__sectors_global_op_ldgsts"] = t.global_ldgsts_sectors;
    j["emulator__sectors_ideal_global_op_ld"] = t.global_ld_ideal_sectors;
    j["emulator__sectors_ideal_global_op_st"] = t.global_st_ideal_sectors;
    j["emulator__wavefronts_ideal_shared_op_ld"] = t.shared_ld_ideal;
    j["emulator__wavefronts_ideal_shared_op_st"] = t.shared_st_ideal;
    j["emulator__active_lanes_per_request"] = ratio(static_cast<double>(t.lanes), static_cast<double>(t.requests()));
    j["emulator__inexact_instructions"] = t.inexact;
    // Hopper's units: wgmma, bulk tensor copies (TMA), mbarrier waits (the emulator's names too).
    j["emulator__inst_executed_wgmma"] = t.wgmma_instructions;
    j["emulator__flops_wgmma"] = t.wgmma_flops;
    j["emulator__requests_bulk_tensor_ld"] = t.bulk_load_requests;
    j["emulator__bytes_bulk_tensor_ld"] = t.bulk_load_bytes;
    j["emulator__requests_bulk_tensor_st"] = t.bulk_store_requests;
    j["emulator__bytes_bulk_tensor_st"] = t.bulk_store_bytes;
    j["emulator__mbarrier_waits"] = t.mbarrier_waits;
    j["emulator__min_read_bytes"] = r.min_read_bytes;
    j["emulator__min_write_bytes"] = r.min_write_bytes;
    j["emulator__reads_over_minimum"] = r.reads_over_minimum();
    j["emulator__writes_over_minimum"] = r.writes_over_minimum();
    j["estimate__dram_bytes_floor"] = r.dram_floor_bytes();
    j["estimate__dram_over_minimum"] = r.dram_over_minimum();
    j["estimate__h100_time_floor_us"] = r.h100_floor_us();
    lines += j.dump() + "\n";
  }
  return lines;
}

}  // namespace brrr::lab
