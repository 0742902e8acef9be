// lab/speed_of_light.cpp: the two chips brrr has run on, unit by unit, each rate with where it
// comes from; the work of a launch from the emulator's counts; and the bound. Chapter 11 (the
// roofline and the kernel lab). Read before: lab/speed_of_light.h. Read next: lab/counters.cpp
// (where the bound is printed beside the counts).
//
// Where a rate comes from
// -----------------------
// As the kernel lab's roofline, the rates are the ones measured on the device where brrr has
// measured one (docs/measurements.md): the copy's bandwidth, cuBLAS's GEMMs. The bound is then
// the least time at the rates those measurements reached, not at the datasheet's (the H100's
// HBM3 is sold as 3.35 TB/s; a copy reached 3.0). Where nothing was measured, the figure is
// NVIDIA's datasheet or architecture whitepaper, named as such:
//   - the SM count (132 on the H100 SXM and the H200) and the tensor cores' dense bf16 peak
//     (989.4 TFLOP/s: "1,979 teraFLOPS" with 2:4 sparsity, halved), from the datasheets;
//   - the SM clock: 1980 MHz, nvidia-smi's clocks.max.sm on the H100 run (tests/scripts/
//     h100-run/logs/env.log); the H200 run did not record it, and the H100's is used;
//   - shared memory serves one wavefront (128 bytes) per SM per clock, and each SM's four
//     warp schedulers issue one warp instruction each per clock (the Hopper whitepaper).
// mma.sync has no ceiling of its own here: it runs on the same tensor cores as wgmma and
// cannot be faster, so its rate is the tensor cores' (the wgmma row's); it is a unit of its own
// because its work is counted apart. What mma.sync reaches on Hopper has not been measured (the
// best mma.sync GEMM measured, brrr's variant 12, is a kernel's figure, not the instruction's).
#include "lab/speed_of_light.h"

#include <algorithm>
#include <cstdio>

#include "brrr/error.h"

namespace brrr::lab {

namespace {

constexpr double kSms = 132, kClock = 1.98e9;
const std::string kSmsAndClock =
    "132 SMs (NVIDIA's datasheet) x 1980 MHz (nvidia-smi clocks.max.sm, H100 run, tests/scripts/h100-run/logs/env.log)";

std::vector<Chip> make_chips() {
  const Unit shared{"shared", kSms * kClock,
                    "1 wavefront per SM per clock (Hopper whitepaper), " + kSmsAndClock};
  const Unit issue{"issue", 4 * kSms * kClock,
                   "4 warp instructions per SM per clock, one per scheduler (Hopper whitepaper), " + kSmsAndClock};
  const std::string on_h100 = "docs/measurements.md, \"The GPU: scripts/gpu.sh on an H100\": ";
  const std::string on_h200 = "docs/measurements.md, \"The GPU, second round: scripts/gpu.sh on an H200\" and "
                           "\"Every CUDA variant: measured, or not yet\": ";
  const std::string datasheet_bf16 = "NVIDIA's H100 SXM datasheet: 989.4 TFLOP/s dense bf16 (not measured on the H100)";
  Chip h100_sxm{"H100 SXM",
                {{"DRAM", 3000e9, on_h100 + "copy 3000-3006 GB/s, a 1 GiB device-to-device copy (2026-11-22/23)"},
                 shared,
                 {"CUDA cores", 51.7e12, on_h100 + "cuBLAS SGEMM 51.7 TFLOP/s at 4096^3, TF32 off"},
                 {"mma.sync", 989.4e12, "the tensor cores' rate, the wgmma row's (" + datasheet_bf16 + ")"},
                 {"wgmma", 989.4e12, datasheet_bf16},
                 issue}};
  Chip h200{"H200",
            {{"DRAM", 4229e9, on_h200 + "copy 4229 GB/s (2026-11-27)"},
             shared,
             {"CUDA cores", 51.2e12, on_h200 + "cuBLAS SGEMM 51.2 TFLOP/s at 4096^3, TF32 off"},
             {"mma.sync", 764.0e12, "the tensor cores' rate, the wgmma row's"},
             {"wgmma", 764.0e12, on_h200 + "cuBLAS bf16 GEMM 764.0 TFLOP/s at 4096^3 in the lab"},
             issue}};
  return {h100_sxm, h200};
}

// The launches docs/measurements.md has a time for at a size the emulator counts in seconds,
// copied from its section "Speed of light: launches with a measured time" (the H100 run of
// 2026-11-22/23, brrr fd940ee; the kernels named here have not changed since).
struct Entry {
  const char *chip, *op, *variant, *size;
  double ms;
};
constexpr Entry kMeasured[] = {
    {"H100 SXM", "copy", "simple", "n=1048576", 0.007168},
    {"H100 SXM", "copy", "simple", "n=67108864", 0.189152},
    {"H100 SXM", "gelu_forward", "float4", "n=1048576", 0.007136},
    {"H100 SXM", "gelu_forward", "naive", "n=1048576", 0.007744},
    {"H100 SXM", "gelu_forward", "float4", "n=67108864", 0.192336},
    {"H100 SXM", "gelu_backward", "float4", "n=1048576", 0.008448},
    {"H100 SXM", "gelu_backward", "naive", "n=1048576", 0.0092},
    {"H100 SXM", "layernorm_forward", "warp-float4", "N=4096 C=768", 0.012928},
    {"H100 SXM", "layernorm_forward", "warp", "N=4096 C=768", 0.018416},
    {"H100 SXM", "adamw_step", "float4", "n=1048576", 0.0148},
    {"H100 SXM", "adamw_step", "naive", "n=1048576", 0.014528},
};

}  // namespace

const std::vector<Chip>& chips() {
  static const std::vector<Chip> all = make_chips();
  return all;
}

const Chip& chip_named(const std::string& name) {
  for (const Chip& c : chips())
    if (c.name == name) return c;
  detail::fail("speed of light: no chip named '", name, "' (chips: H100 SXM, H200)");
}

std::string rate_text(const Unit& unit) {
  char text[64];
  if (unit.name == "DRAM") std::snprintf(text, sizeof text, "%.4g GB/s", unit.rate / 1e9);
  else if (unit.name == "shared") std::snprintf(text, sizeof text, "%.4g G wavefronts/s", unit.rate / 1e9);
  else if (unit.name == "issue") std::snprintf(text, sizeof text, "%.4g G warp instructions/s", unit.rate / 1e9);
  else std::snprintf(text, sizeof text, "%.4g TFLOP/s", unit.rate / 1e12);
  return text;
}

Work work_of(const simt::LaunchCounts& t, double case_flops) {
  Work w;
  const auto tensor_flops = static_cast<double>(t.mma_flops + t.wgmma_flops);
  w.amount[0] = static_cast<double>(t.distinct_sectors_read + t.distinct_sectors_written) * t.sector_bytes;
  w.amount[1] = static_cast<double>(t.shared_ld_wavefronts + t.shared_st_wavefronts);
  w.amount[2] = std::max(0.0, case_flops - tensor_flops);
  w.amount[3] = static_cast<double>(t.mma_flops);
  w.amount[4] = static_cast<double>(t.wgmma_flops);
  // wgmma is issued by each of the warpgroup's 4 warps; a bulk copy by one thread.
  w.amount[5] = static_cast<double>(t.requests() + t.mma_instructions + 4 * t.wgmma_instructions +
                                    t.bulk_load_requests + t.bulk_store_requests);
  return w;
}

LeastTime bound_on(const Chip& chip, const Work& work) {
  BRRR_CHECK(chip.units.size() == kUnits, "speed of light: chip ", chip.name, " has ", chip.units.size(),
             " units, ", kUnits, " expected");
  LeastTime b;
  int slowest = 0;
  for (int u = 0; u < kUnits; ++u) {
    b.unit_seconds[u] = work.amount[u] / chip.units[static_cast<std::size_t>(u)].rate;
    if (b.unit_seconds[u] > b.unit_seconds[slowest]) slowest = u;
  }
  b.seconds = b.unit_seconds[slowest];
  b.unit = chip.units[static_cast<std::size_t>(slowest)].name;
  return b;
}

std::optional<Measured> measured_time(const std::string& chip, const std::string& op, const std::string& variant,
                                      const std::string& size) {
  for (const Entry& e : kMeasured)
    if (chip == e.chip && op == e.op && variant == e.variant && size == e.size)
      return Measured{e.ms, "docs/measurements.md, \"Speed of light: launches with a measured time\""};
  return std::nullopt;
}

}  // namespace brrr::lab
