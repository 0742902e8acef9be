// tests/emulator/test_counters.cpp: the emulator's memory counters on kernels whose counts are
// known by hand: coalesced, shifted, strided, float4 and broadcast global loads; bank
// conflicts, padding, doubles and float4s in shared memory; half a warp active. Each count is
// Nsight Compute's (kernels/cuda/simt_counters.h gives the definitions), and a wrong model of
// the hardware (64-byte sectors, shared phases ignored) fails them.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt_counters.h.
//
// The kernels defined here are CUDA: this file is compiled with the emulator's instrumentation
// (tests/emulator/CMakeLists.txt), like the kernels of kernels/cuda.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/runtime.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_counters.h"
#include "lab/counters.h"
#include "tests/emulator/emulator_test_util.h"

namespace {

brrr::kernels::Stream stream() { return brrr::gpu::emulator_runtime().stream(); }

using brrr::simt::LaunchCounts;
using brrr::simt::MemoryModel;
using brrr::test::DeviceArray;

// The counters of the one launch `launch` makes.
template <class F>
LaunchCounts count(F launch, const MemoryModel& model = {}) {
  brrr::simt::set_memory_model(model);
  brrr::simt::set_memory_counting(true);
  brrr::simt::take_memory_counts();
  launch();
  brrr::simt::set_memory_counting(false);
  brrr::simt::set_memory_model({});
  std::vector<LaunchCounts> launches = brrr::simt::take_memory_counts();
  REQUIRE(launches.size() == 1);
  return launches[0];
}

#define REQUIRE_COUNTERS()                                                          \
  if (!brrr::simt::memory_counting_available()) {                                  \
    MESSAGE("SKIPPED: no memory counters in this build (AddressSanitizer)");       \
    return;                                                                          \
  }

// --- the kernels: one warp each ------------------------------------------------------------------

// Each lane reads in[offset + stride * lane]; the store is the same for every case.
__global__ void read_strided(float* out, const float* in, int offset, int stride) {
  const int lane = static_cast<int>(threadIdx.x);
  const float v = in[offset + stride * lane];
  out[lane] = v;
}

__global__ void copy_float4(float4* out, const float4* in) {
  const int lane = static_cast<int>(threadIdx.x);
  const float4 v = in[lane];
  out[lane] = make_float4(v.x * 2.0f, v.y * 2.0f, v.z * 2.0f, v.w * 2.0f);
}

// A constant float4 (GCC would write a constant aggregate as four 4-byte stores).
__global__ void zero_float4(float4* out) { out[threadIdx.x] = make_float4(0.0f, 0.0f, 0.0f, 0.0f); }

// A warp copies 32 float4s into shared memory with cp.async, then reads them back.
__global__ void async_copy(float4* out, const float4* in) {
  __shared__ float4 s[32];
  const int lane = static_cast<int>(threadIdx.x);
  cp_async<16>(&s[lane], &in[lane]);
  cp_async_commit_group();
  cp_async_wait_group<0>();
  __syncwarp();
  out[lane] = s[(lane + 1) % 32];
}

__global__ void half_warp(float* out, const float* in) {
  const int lane = static_cast<int>(threadIdx.x);
  if (lane < 16) out[lane] = in[lane];
}

// s[stride * lane]: stride 32 puts every lane on bank 0.
__global__ void shared_strided(float* out, int stride) {
  __shared__ float s[32 * 32];
  const int lane = static_cast<int>(threadIdx.x);
  s[stride * lane] = static_cast<float>(lane);
  __syncwarp();
  out[lane] = s[stride * lane];
}

// Rows written by the warp (lane = column), then column `column` read (lane = row).
template <int kWidth>
__global__ void shared_column(float* out, int column) {
  __shared__ float tile[32][kWidth];
  const int lane = static_cast<int>(threadIdx.x);
  for (int row = 0; row < 32; ++row) tile[row][lane] = static_cast<float>(row * 32 + lane);
  __syncwarp();
  out[lane] = tile[lane][column];
}

__global__ void shared_double(double* out) {
  __shared__ double s[32];
  const int lane = static_cast<int>(threadIdx.x);
  s[lane] = lane;
  __syncwarp();
  out[lane] = s[lane];
}

__global__ void shared_float4(float4* out) {
  __shared__ float4 s[32];
  const int lane = static_cast<int>(threadIdx.x);
  s[lane] = make_float4(1.0f, 2.0f, 3.0f, static_cast<float>(lane));
  __syncwarp();
  out[lane] = s[lane];
}

// Lane l reads in[j] for the j < 32 with flags[j] == l % 2: lanes take the branch in different
// iterations, which the emulator cannot pair.
__global__ void data_dependent(float* out, const float* in, const int* flags) {
  const int lane = static_cast<int>(threadIdx.x);
  float sum = 0;
  for (int j = 0; j < 32; ++j)
    if (flags[j] == lane % 2 && j % (lane % 3 + 1) == 0) sum += in[j];
  out[lane] = sum;
}

// A grid-stride loop whose last iteration has only some lanes: they leave early.
__global__ void grid_stride(float* out, const float* in, int n) {
  for (int i = static_cast<int>(threadIdx.x); i < n; i += static_cast<int>(blockDim.x)) out[i] = in[i];
}

LaunchCounts strided(int offset, int stride, const MemoryModel& model = {}) {
  DeviceArray<float> in(std::vector<float>(32 * 32 + 1, 1.0f)), out(32);
  return count([&] { BRRR_LAUNCH(read_strided, 1, 32, 0, stream(), out.data, in.data, offset, stride); }, model);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Global memory: requests and sectors

TEST_CASE("counters: a warp reading 32 aligned floats makes 1 request of 4 sectors (with 64-byte sectors, 2)") {
  REQUIRE_COUNTERS();
  const LaunchCounts c = strided(0, 1);
  CHECK(c.kernel == "read_strided");
  CHECK(c.global_ld_requests == 1);
  CHECK(c.global_ld_sectors == 4);
  CHECK(c.global_st_requests == 1);
  CHECK(c.global_st_sectors == 4);
  CHECK(c.lanes == 64);  // two instructions, every lane in both
  CHECK(c.inexact == 0);
  CHECK(strided(0, 1, MemoryModel{.sector_bytes = 64}).global_ld_sectors == 2);  // a wrong model fails
}

TEST_CASE("counters: shifted by one float, the warp's 128 bytes straddle 5 sectors") {
  REQUIRE_COUNTERS();
  const LaunchCounts c = strided(1, 1);
  CHECK(c.global_ld_requests == 1);
  CHECK(c.global_ld_sectors == 5);
  CHECK(c.global_ld_ideal_sectors == 4);  // 128 bytes fit in 4: one sector more than needed
  CHECK(strided(1, 1, MemoryModel{.sector_bytes = 64}).global_ld_sectors == 3);
}

TEST_CASE("counters: stride-32 floats touch one sector per lane (32), all lanes at one address touch 1") {
  REQUIRE_COUNTERS();
  const LaunchCounts spread = strided(0, 32), same = strided(5, 0);
  CHECK(spread.global_ld_requests == 1);
  CHECK(spread.global_ld_sectors == 32);
  CHECK(spread.global_ld_ideal_sectors == 4);
  CHECK(same.global_ld_requests == 1);
  CHECK(same.global_ld_sectors == 1);
  CHECK(same.distinct_sectors_read == 1);
  CHECK(spread.distinct_sectors_read == 32);
  CHECK(spread.distinct_sectors_written == 4);
}

TEST_CASE("counters: a float4 load is one 16-byte request per warp, 512 bytes in 16 sectors") {
  REQUIRE_COUNTERS();
  DeviceArray<float4> in(std::vector<float4>(32, float4{1, 2, 3, 4})), out(32);
  const LaunchCounts c = count([&] { BRRR_LAUNCH(copy_float4, 1, 32, 0, stream(), out.data, in.data); });
  // Four 4-byte loads (GCC's scalar replacement, without -fno-tree-sra) would be 4 requests.
  CHECK(c.global_ld_requests == 1);
  CHECK(c.global_ld_sectors == 16);
  CHECK(c.global_st_requests == 1);
  CHECK(c.global_st_sectors == 16);
  for (const auto& instruction : c.instructions) CHECK(instruction.bytes == 16);
  CHECK(out.host()[31].w == 8.0f);
  const LaunchCounts zero = count([&] { BRRR_LAUNCH(zero_float4, 1, 32, 0, stream(), out.data); });
  CHECK(zero.global_st_requests == 1);
  CHECK(zero.global_st_sectors == 16);
}

TEST_CASE("counters: a cp.async of a float4 per lane reads 16 sectors in one request, apart from the loads") {
  REQUIRE_COUNTERS();
  DeviceArray<float4> in(std::vector<float4>(32, float4{1, 2, 3, 4})), out(32);
  const LaunchCounts c = count([&] { BRRR_LAUNCH(async_copy, 1, 32, 0, stream(), out.data, in.data); });
  CHECK(c.global_ldgsts_requests == 1);
  CHECK(c.global_ldgsts_sectors == 16);
  CHECK(c.global_ld_requests == 0);
  CHECK(c.shared_ld_wavefronts == 4);
  CHECK(c.global_st_sectors == 16);
}

TEST_CASE("counters: if (lane < 16) runs the load and the store with half of the warp's lanes") {
  REQUIRE_COUNTERS();
  DeviceArray<float> in(std::vector<float>(32, 1.0f)), out(32);
  const LaunchCounts c = count([&] { BRRR_LAUNCH(half_warp, 1, 32, 0, stream(), out.data, in.data); });
  CHECK(c.global_ld_requests == 1);
  CHECK(c.global_ld_sectors == 2);
  CHECK(c.global_st_requests == 1);
  CHECK(c.lanes == 32);  // 16 of 32 in each of the two instructions: 50% active
  CHECK(static_cast<double>(c.lanes) / (32.0 * static_cast<double>(c.requests())) == 0.5);
}

// ---------------------------------------------------------------------------------------------
// Shared memory: wavefronts and bank conflicts

TEST_CASE("counters: s[32 * lane] puts all 32 lanes on one bank: 32 wavefronts, 31 conflicts") {
  REQUIRE_COUNTERS();
  DeviceArray<float> out(32);
  const LaunchCounts c = count([&] { BRRR_LAUNCH(shared_strided, 1, 32, 0, stream(), out.data, 32); });
  CHECK(c.shared_st_requests == 1);
  CHECK(c.shared_st_wavefronts == 32);
  CHECK(c.shared_ld_requests == 1);
  CHECK(c.shared_ld_wavefronts == 32);
  CHECK(c.shared_ld_ideal == 1);
  const LaunchCounts plain = count([&] { BRRR_LAUNCH(shared_strided, 1, 32, 0, stream(), out.data, 1); });
  CHECK(plain.shared_ld_wavefronts == 1);
  CHECK(plain.shared_ld_ideal == 1);
}

TEST_CASE("counters: a column of a 32 x 33 tile is read in 1 wavefront, of a 32 x 32 tile in 32") {
  REQUIRE_COUNTERS();
  DeviceArray<float> out(32);
  const LaunchCounts padded = count([&] { BRRR_LAUNCH(shared_column<33>, 1, 32, 0, stream(), out.data, 5); });
  CHECK(padded.shared_st_requests == 32);  // the 32 rows, one instruction executed 32 times
  CHECK(padded.shared_st_wavefronts == 32);
  CHECK(padded.shared_ld_requests == 1);
  CHECK(padded.shared_ld_wavefronts == 1);
  CHECK(out.host()[7] == 7 * 32 + 5);
  const LaunchCounts square = count([&] { BRRR_LAUNCH(shared_column<32>, 1, 32, 0, stream(), out.data, 5); });
  CHECK(square.shared_ld_wavefronts == 32);
  CHECK(square.shared_ld_ideal == 1);
}

TEST_CASE("counters: double s[lane] takes 2 wavefronts (half-warps) and float4 s[lane] 4 (quarter-warps), no conflict") {
  REQUIRE_COUNTERS();
  DeviceArray<double> doubles(32);
  DeviceArray<float4> float4s(32);
  const LaunchCounts d = count([&] { BRRR_LAUNCH(shared_double, 1, 32, 0, stream(), doubles.data); });
  CHECK(d.shared_ld_wavefronts == 2);
  CHECK(d.shared_ld_ideal == 2);
  CHECK(d.shared_st_wavefronts == 2);
  CHECK(d.shared_st_ideal == 2);
  CHECK(d.global_st_sectors == 8);
  const LaunchCounts f = count([&] { BRRR_LAUNCH(shared_float4, 1, 32, 0, stream(), float4s.data); });
  CHECK(f.shared_ld_requests == 1);
  CHECK(f.shared_ld_wavefronts == 4);
  CHECK(f.shared_ld_ideal == 4);
  CHECK(f.shared_st_wavefronts == 4);
  CHECK(f.shared_st_ideal == 4);
  // A model without phases (one phase of 32 lanes, ideal 1) sees conflicts that are not there.
  const MemoryModel no_phases{.shared_phases = false};
  const LaunchCounts wrong = count([&] { BRRR_LAUNCH(shared_double, 1, 32, 0, stream(), doubles.data); }, no_phases);
  CHECK(wrong.shared_ld_wavefronts - wrong.shared_ld_ideal == 1);
}

// ---------------------------------------------------------------------------------------------
// The counting functions by hand, and what the counts must not depend on

TEST_CASE("counters: the counting functions on hand-made warps, with the right model and planted wrong ones") {
  using brrr::simt::WarpAccess;
  const auto warp = [](int bytes, auto address) {
    WarpAccess a;
    a.lanes = ~0u;
    a.bytes = bytes;
    for (int lane = 0; lane < 32; ++lane) a.address[lane] = 4096 + static_cast<std::uintptr_t>(address(lane));
    return a;
  };
  const WarpAccess floats = warp(4, [](int l) { return 4 * l; }), doubles = warp(8, [](int l) { return 8 * l; });
  const WarpAccess vectors = warp(16, [](int l) { return 16 * l; }), one = warp(4, [](int) { return 12; });
  CHECK(brrr::simt::global_sectors(floats) == 4);
  CHECK(brrr::simt::global_sectors(vectors) == 16);
  CHECK(brrr::simt::global_sectors(one) == 1);
  CHECK(brrr::simt::distinct_bytes(one) == 4);
  CHECK(brrr::simt::distinct_bytes(vectors) == 512);
  CHECK(brrr::simt::shared_wavefronts(one) == 1);  // a broadcast
  CHECK(brrr::simt::shared_wavefronts(doubles) == 2);
  CHECK(brrr::simt::shared_ideal_wavefronts(doubles) == 2);
  CHECK(brrr::simt::shared_wavefronts(vectors) == 4);
  CHECK(brrr::simt::shared_ideal_wavefronts(vectors) == 4);
  // float2 at a stride of 16 bytes: lanes l and l + 8 of each half-warp share a bank: 2 per phase.
  const WarpAccess pairs = warp(8, [](int l) { return 16 * l; });
  CHECK(brrr::simt::shared_wavefronts(pairs) == 4);
  CHECK(brrr::simt::shared_ideal_wavefronts(pairs) == 2);
  // The planted changes.
  const MemoryModel wide{.sector_bytes = 64}, no_phases{.shared_phases = false};
  CHECK(brrr::simt::global_sectors(floats, wide) != 4);
  CHECK(brrr::simt::shared_ideal_wavefronts(doubles, no_phases) != 2);
  CHECK(brrr::simt::shared_ideal_wavefronts(vectors, no_phases) != 4);
}

TEST_CASE("counters: the same counts with the race detector off, and marked inexact where lanes cannot be paired") {
  REQUIRE_COUNTERS();
  DeviceArray<float> in(std::vector<float>(1000, 1.0f)), out(1000);
  const auto launch = [&] { BRRR_LAUNCH(grid_stride, 1, 64, 0, stream(), out.data, in.data, 1000); };
  const LaunchCounts with = count(launch);
  const bool races = brrr::simt::race_detection();
  brrr::simt::set_race_detection(false);
  const LaunchCounts without = count(launch);
  brrr::simt::set_race_detection(races);
  // 1000 floats in 64-thread strides: 15 full iterations of both warps, then 40 floats (a full
  // warp and 8 lanes of the other): 32 requests of each kind, every one at its least sectors.
  CHECK(with.global_ld_requests == 32);
  CHECK(with.global_ld_sectors == 15 * 2 * 4 + 4 + 1);
  CHECK(with.inexact == 0);  // lanes that leave a loop early are paired exactly
  CHECK(with.global_ld_requests == without.global_ld_requests);
  CHECK(with.global_ld_sectors == without.global_ld_sectors);
  CHECK(with.global_st_sectors == without.global_st_sectors);
  CHECK(with.lanes == without.lanes);
  CHECK(with.lanes == 2 * 1000);

  std::vector<int> flags(32);
  for (int j = 0; j < 32; ++j) flags[j] = j % 3 == 0;
  DeviceArray<int> flag_array(flags);
  const LaunchCounts doubtful =
      count([&] { BRRR_LAUNCH(data_dependent, 1, 32, 0, stream(), out.data, in.data, flag_array.data); });
  CHECK(doubtful.inexact == 1);
  for (const auto& instruction : doubtful.instructions)
    if (!instruction.exact) CHECK(brrr::test::contains(instruction.inexact_why, "different paths"));
}

TEST_CASE("counters: each instruction is named by its source line") {
  REQUIRE_COUNTERS();
  const LaunchCounts c = strided(0, 32);
  REQUIRE(c.instructions.size() == 2);
  for (const auto& instruction : c.instructions) {
    const std::string line = brrr::simt::source_line_of(instruction.pc);
    CAPTURE(line);
    CHECK(brrr::test::contains(line, "test_counters.cpp:"));
  }
}

TEST_CASE("counters: off by default, and nothing is kept while off") {
  CHECK(!brrr::simt::memory_counting());
  DeviceArray<float> in(std::vector<float>(33 * 32, 1.0f)), out(32);
  BRRR_LAUNCH(read_strided, 1, 32, 0, stream(), out.data, in.data, 0, 1);
  CHECK(brrr::simt::take_memory_counts().empty());
}

// ---------------------------------------------------------------------------------------------
// The kernel lab's counters mode (lab/counters.h)

TEST_CASE("kernel-lab counters: GELU's variants read and write the least there is, one element off costs 1.25x") {
  REQUIRE_COUNTERS();
  const brrr::lab::Case& gelu = brrr::lab::find_case("gelu_forward");
  brrr::lab::Options options;
  options.device = brrr::lab::LabDevice::Emulator;
  options.size = {4096};
  options.out = nullptr;
  const brrr::lab::CountersReport report = brrr::lab::run_counters(gelu, options);
  int ran = 0;
  for (const brrr::lab::CounterRow& row : report.rows) {
    if (!row.failure.empty()) continue;  // the exercise stub, not written yet
    ++ran;
    CAPTURE(row.variant);
    const LaunchCounts& t = row.total;
    CHECK(t.global_ld_sectors == t.global_ld_ideal_sectors);  // fully coalesced
    CHECK(t.global_ld_sectors * 32 == 4096 * 4);
    CHECK(row.reads_over_minimum() == 1.0);
    CHECK(row.writes_over_minimum() == 1.0);
    CHECK(row.dram_floor_bytes() == 2 * 4096 * 4);
    CHECK(row.dram_over_minimum() == 1.0);
    CHECK(row.bound(brrr::lab::chip_named("H100 SXM")).unit == "DRAM");
    if (row.variant == "float4") CHECK(t.global_ld_sectors / t.global_ld_requests == 16);
    if (row.variant == "naive") CHECK(t.global_ld_sectors / t.global_ld_requests == 4);
  }
  CHECK(ran >= 2);
  const std::string json = brrr::lab::counters_json_lines(report);
  CHECK(brrr::test::contains(json, "\"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum\":512"));
  CHECK(brrr::test::contains(json, "\"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum\":0"));

  options.variant = "naive";
  options.misaligned = true;  // every array one float past a 256-byte boundary
  const brrr::lab::CountersReport off = brrr::lab::run_counters(gelu, options);
  REQUIRE(off.rows.size() == 1);
  CHECK(off.rows[0].reads_over_minimum() == doctest::Approx(1.25).epsilon(0.01));
  CHECK(off.rows[0].total.global_ld_sectors == 5 * off.rows[0].total.global_ld_requests);
}

TEST_CASE("kernel-lab counters: on another device, a one-line error that names the emulator") {
  const brrr::lab::Case& gelu = brrr::lab::find_case("gelu_forward");
  brrr::lab::Options options;
  options.device = brrr::lab::LabDevice::CPU;
  options.out = nullptr;
  const std::string message = brrr::test::error_of([&] { brrr::lab::run_counters(gelu, options); });
  CHECK(brrr::test::contains(message, "use --device emulator"));
}
