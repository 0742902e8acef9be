// tests/emulator/test_speed_of_light.cpp: the least time of a launch on an H100 SXM and an H200
// (lab/speed_of_light.h), on launches whose work is known by hand: a copy of n floats is
// bound by DRAM at 2 x 4n bytes over the copy bandwidth measured on each chip; a chain of
// mma.sync is bound by the tensor cores at its FLOPs over their rate; the lab's table of
// measured times. The expected figures are written here from docs/measurements.md, not read
// from the lab's table. Chapter 11 (the roofline and the kernel lab).
//
// The kernel defined here is CUDA, compiled with the emulator's instrumentation (CMakeLists.txt).
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/runtime.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_counters.h"
#include "kernels/cuda/simt_tensor_cores.h"
#include "lab/counters.h"
#include "lab/speed_of_light.h"
#include "tests/emulator/emulator_test_util.h"

namespace {

using brrr::lab::LeastTime;
using brrr::lab::chip_named;
using brrr::simt::LaunchCounts;

#define REQUIRE_COUNTERS()                                                    \
  if (!brrr::simt::memory_counting_available()) {                            \
    MESSAGE("SKIPPED: no memory counters in this build (AddressSanitizer)"); \
    return;                                                                    \
  }

// The rates docs/measurements.md gives: the copy's bandwidth on each chip, and the tensor
// cores' (H100: NVIDIA's dense bf16 figure; H200: cuBLAS's bf16 GEMM in the lab).
constexpr double kH100Copy = 3000e9, kH200Copy = 4229e9;
constexpr double kH100Tensor = 989.4e12, kH200Tensor = 764.0e12;

// One warp runs `reps` mma.sync m16n8k16 in a chain on registers, then stores its 4 x 32 floats.
__global__ void mma_chain(float* out, int reps) {
  const unsigned one = 0x3F80u;  // bf16 1.0
  const unsigned a[4] = {one | one << 16, 0, 0, 0}, b[2] = {one | one << 16, 0};
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < reps; ++i) mma_m16n8k16_bf16(d, a, b, d);
  for (int i = 0; i < 4; ++i) out[4 * threadIdx.x + i] = d[i];
}

}  // namespace

TEST_CASE("speed of light: a copy of n floats is bound by DRAM, 2 x 4n bytes (whole sectors) at each chip's copy rate") {
  REQUIRE_COUNTERS();
  const int n = 4099;  // ragged: the last sector of each array is partly used, and counted whole
  brrr::lab::Options options;
  options.device = brrr::lab::LabDevice::Emulator;
  options.size = {n};
  options.out = nullptr;
  const brrr::lab::CountersReport report = brrr::lab::run_counters(brrr::lab::find_case("copy"), options);
  REQUIRE(!report.rows.empty());
  const int sectors = (4 * n + 31) / 32;  // each array's, 513
  const double bytes = 2.0 * sectors * 32;
  for (const brrr::lab::CounterRow& row : report.rows) {
    CAPTURE(row.variant);
    REQUIRE(row.failure.empty());
    REQUIRE(row.launches.size() == 1);
    const LeastTime h100 = row.bound(chip_named("H100 SXM")), h200 = row.bound(chip_named("H200"));
    CHECK(h100.unit == "DRAM");
    CHECK(h200.unit == "DRAM");
    CHECK(h100.seconds == doctest::Approx(bytes / kH100Copy).epsilon(1e-12));
    CHECK(h200.seconds == doctest::Approx(bytes / kH200Copy).epsilon(1e-12));
  }
}

TEST_CASE("speed of light: a chain of mma.sync is counted, and bound by the tensor cores at 2 x 16 x 8 x 16 FLOPs each") {
  REQUIRE_COUNTERS();
  const int reps = 2000;
  brrr::test::DeviceArray<float> out(128);
  brrr::simt::set_memory_counting(true);
  brrr::simt::take_memory_counts();
  BRRR_LAUNCH(mma_chain, dim3(1), dim3(32), 0, brrr::gpu::emulator_runtime().stream(), out.data, reps);
  brrr::simt::set_memory_counting(false);
  const std::vector<LaunchCounts> launches = brrr::simt::take_memory_counts();
  REQUIRE(launches.size() == 1);
  const LaunchCounts& t = launches[0];
  CHECK(t.mma_instructions == reps);  // one per warp, not one per lane
  CHECK(t.mma_flops == 2ull * 16 * 8 * 16 * reps);
  CHECK(t.distinct_sectors_written * 32 == 128 * 4);
  // a's rows 0-7 hold 1 in columns 0-7, b's rows 0-7 hold 1: each mma adds 8 to d[0] of lane 0.
  CHECK(out.host()[0] == static_cast<float>(8 * reps));
  const brrr::lab::Work work = brrr::lab::work_of(t, 0.0);
  const double flops = 2.0 * 16 * 8 * 16 * reps;
  const LeastTime h100 = brrr::lab::bound_on(chip_named("H100 SXM"), work), h200 = brrr::lab::bound_on(chip_named("H200"), work);
  CHECK(h100.unit == "mma.sync");
  CHECK(h200.unit == "mma.sync");
  CHECK(h100.seconds == doctest::Approx(flops / kH100Tensor).epsilon(1e-12));
  CHECK(h200.seconds == doctest::Approx(flops / kH200Tensor).epsilon(1e-12));
}

TEST_CASE("speed of light: measured times come with their source, for the chip, op, variant and size they were timed at") {
  const auto m = brrr::lab::measured_time("H100 SXM", "gelu_forward", "float4", "n=1048576");
  REQUIRE(m.has_value());
  CHECK(m->ms == 0.007136);
  CHECK(brrr::test::contains(m->source, "docs/measurements.md"));
  CHECK_FALSE(brrr::lab::measured_time("H200", "gelu_forward", "float4", "n=1048576").has_value());
  CHECK_FALSE(brrr::lab::measured_time("H100 SXM", "gelu_forward", "float4", "n=1048577").has_value());
  for (const brrr::lab::Chip& chip : brrr::lab::chips())
    for (const brrr::lab::Unit& unit : chip.units) {
      CAPTURE(chip.name + " " + unit.name);
      CHECK(unit.rate > 0);
      CHECK(!unit.source.empty());
    }
  CHECK(brrr::test::contains(brrr::test::error_of([] { chip_named("A100"); }), "no chip named 'A100'"));
}
