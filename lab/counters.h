// lab/counters.h: the kernel lab's counters mode: every variant of an op run once on the
// emulator with its memory counters on (kernels/cuda/simt_counters.h), and shown as Nsight
// Compute shows them: requests, sectors per request, shared wavefronts and bank conflicts,
// active lanes; against the op's least traffic (each input read once, each output written
// once); and the least time of each launch on an H100 SXM and an H200 (speed_of_light.h).
// Chapter 11 (the roofline and the kernel lab). Read before: kernel_lab.h,
// kernels/cuda/simt_counters.h. Read next: speed_of_light.h, counters.cpp.
//
//   brrr kernel-lab gelu_forward --device emulator --mode counters
//   brrr kernel-lab cross_entropy_fused --device emulator --mode counters --variant online   (its lines)
//   brrr kernel-lab copy --device emulator --mode counters --size 2^20   (and measured / bound)
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/simt_counters.h"
#include "lab/kernel_lab.h"
#include "lab/speed_of_light.h"

namespace brrr::lab {

// One variant's counts, summed over the launches one call makes.
struct CounterRow {
  std::string variant;
  bool is_default = false;
  std::string failure;               // why it did not run ("not written yet", an error); empty: it ran
  std::vector<std::string> kernels;  // the kernels it launched, in order
  std::vector<simt::LaunchCounts> launches;  // each launch's counts (without its instructions)
  simt::LaunchCounts total;          // instructions summed per instruction over the launches
  double min_read_bytes = 0, min_write_bytes = 0;  // each input read once, each output written once
  double flops = 0;                                // the case's count (0: a bandwidth op)

  // Estimates. DRAM moves at least the distinct sectors each launch reads and writes.
  double dram_floor_bytes() const;
  // Sectors the loads (stores) request, over the least bytes the op must read (write): 1.0 is
  // each input read once by fully used sectors; 2.0 reads everything twice.
  // These count what L1 is asked for (ncu's l1tex sectors), re-reads that a cache serves included.
  double reads_over_minimum() const;
  double writes_over_minimum() const;
  // The DRAM floor over the least bytes read and written: above 1 when a launch touches bytes
  // the op does not need (a workspace), or several launches touch the same bytes.
  double dram_over_minimum() const;
  // The least time of the call on `chip` (speed_of_light.h): its launches run one after another,
  // so it is the sum of each launch's bound, and at least its CUDA-core FLOPs' time (the case
  // counts FLOPs per call, not per launch: a launch's own bound leaves them out when the call
  // makes several).
  LeastTime bound(const Chip& chip) const;
  LeastTime launch_bound(const Chip& chip, std::size_t launch) const;
};

struct CountersReport {
  std::string op, size;
  Dims dims;
  std::vector<CounterRow> rows;
  std::string note;  // why nothing ran, if nothing did
};

// Runs each variant of c (or options.variant) once at options.size (default: the emulator's
// size) on the emulator, counting. options.device must be the emulator.
CountersReport run_counters(const Case& c, const Options& options);
// The table, one row per variant, and its legend.
void print_counters(std::FILE* out, const CountersReport& report);
// The speed-of-light table: each launch's work per unit and its least time on each chip, with
// the unit that bounds it; and measured over bound where docs/measurements.md has the launch.
void print_speed_of_light(std::FILE* out, const CountersReport& report);
// One variant's instructions by source line, those with the most excess sectors or bank
// conflicts first (`top` of them).
void print_counter_lines(std::FILE* out, const CounterRow& row, int top = 12);
// One JSON object per variant, keyed by Nsight Compute's metric names (and emulator__ names
// for what ncu has no metric of: simt::ncu_metrics), with the bound on each chip.
std::string counters_json_lines(const CountersReport& report);

}  // namespace brrr::lab
