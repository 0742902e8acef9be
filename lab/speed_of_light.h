// lab/speed_of_light.h: the least time a launch can take on a chip you may not have, from the
// emulator's counts: each unit of the chip (DRAM, shared memory, the CUDA cores, the tensor
// cores through mma.sync and through wgmma, the warp schedulers) does the launch's work for it
// at its rate, and the launch takes at least as long as the slowest of them. Chapter 11 (the
// roofline and the kernel lab). Read before: lab/counters.h, kernels/cuda/simt_counters.h.
// Read next: lab/speed_of_light.cpp (the two chips, each rate with its source).
//
//   brrr kernel-lab copy --device emulator --mode counters --size 2^20
//
// This is a roofline with more than two roofs: a launch is bound by the unit whose work takes
// longest. The bound is a floor, not a prediction: a launch on a GPU also waits on latency,
// occupancy, tails and launch overhead, none of which the counts see. "measured / bound" is how
// far a measured launch is from that floor: 1.1 is near the limit, 5 is far from it.
//
// What a unit's work is, from the counts (each a lower bound of what the chip does):
//   DRAM          the distinct 32-byte sectors each launch reads and writes, plain loads and
//                 stores, cp.async and TMA alike (a sector two launches touch counts twice)
//   shared        shared-memory wavefronts, loads and stores (ldmatrix's included)
//   CUDA cores    the case's FLOPs that no tensor-core instruction did (0 for a copy)
//   mma.sync      the FLOPs of the warp-level mma.sync instructions (and WMMA's)
//   wgmma         the FLOPs of the warpgroup wgmma instructions
//   issue         the warp instructions the emulator counts: memory requests, mma.sync, wgmma
//                 (one per warp of the warpgroup) and bulk copies. Arithmetic, address and
//                 control instructions are not counted, so this is a floor of what issues.
// L2 is not a unit of the bound: NVIDIA publishes no L2 bandwidth for these chips and none was
// measured here (the copy's rate is DRAM's).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kernels/cuda/simt_counters.h"

namespace brrr::lab {

// One unit of a chip: how fast it works, and where that figure comes from.
struct Unit {
  std::string name;    // "DRAM", "shared", ...
  double rate = 0;     // work per second (bytes, wavefronts, FLOPs, warp instructions)
  std::string source;  // the measurement in docs/measurements.md, or the datasheet figure, named
};
// "3000 GB/s", "989.4 TFLOP/s": a unit's rate as the lab prints it.
std::string rate_text(const Unit& unit);

// A chip, as the bound sees it: its units in a fixed order (kUnitNames).
struct Chip {
  std::string name;  // "H100 SXM", "H200"
  std::vector<Unit> units;
};
inline const char* const kUnitNames[] = {"DRAM", "shared", "CUDA cores", "mma.sync", "wgmma", "issue"};
constexpr int kUnits = 6;

// The two chips brrr has run on (speed_of_light.cpp).
const std::vector<Chip>& chips();
const Chip& chip_named(const std::string& name);

// The work of a launch (or of a call's launches, summed) for each unit, in kUnitNames' order.
// case_flops: the op's FLOPs as the lab's case counts them (0 for a bandwidth op).
struct Work {
  double amount[kUnits] = {};
};
Work work_of(const simt::LaunchCounts& counts, double case_flops);

// The least time of `work` on `chip`: each unit's time (work over rate), the longest of them,
// and which unit that is.
struct LeastTime {
  double seconds = 0;
  std::string unit;               // the bounding unit ("DRAM", ...)
  double unit_seconds[kUnits] = {};
};
LeastTime bound_on(const Chip& chip, const Work& work);

// A launch's measured time on a chip, where docs/measurements.md has one for the same op,
// variant and size (a small table, speed_of_light.cpp, each entry with its source).
struct Measured {
  double ms = 0;
  std::string source;
};
std::optional<Measured> measured_time(const std::string& chip, const std::string& op, const std::string& variant,
                                      const std::string& size);

}  // namespace brrr::lab
