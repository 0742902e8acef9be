// tests/emulator/test_matmul_wgmma.cpp: matmul's variant 14, wgmma (TMA copies into a ring of
// four shared-memory stages, a producer warpgroup and two consumer warpgroups meeting at
// mbarriers, wgmma from shared memory, a persistent grid), run on the SIMT emulator against the
// triple loop in float64 on the same bf16 values. Chapter 21 (Hopper), step 2. Read before:
// kernels/cuda/matmul/wgmma.cu; tests/emulator/test_matmul_bf16_memory.cpp (variant 12, the
// same problems and the same check).
//
// The shapes walk the kernel's paths: operands TMA reads as they are (rows a multiple of 8
// values) and operands packed first (K = 33, N = 45, a view one value in); ragged M, N and K
// (the boxes' zero fill); more k-tiles than stages (the ring's second lap and the mbarriers'
// parity); more tiles than the emulator's 3 persistent blocks (a block walks several tiles, and
// the ring runs on from one tile into the next); all four layouts (K-major and MN-major
// descriptors); a batch in one launch, with b broadcast, and a batch of both-MN-major operands
// with K past a k-tile's end (one launch per matrix); accumulate; K = 0. Then the ring's
// ordering rule as a planted fault (a producer that refills a stage the consumers have not
// released), and the registration (on bf16 data, never the default).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "brrr/bfloat16.h"
#include "brrr/cuda.h"
#include "bf16_gemm_check.h"
#include "emulator_test_util.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "kernels/registry.h"

namespace emu = brrr::kernels::emu;
using brrr::bf16;
using brrr::kernels::MatmulShape;
using brrr::test::DeviceArray;
using brrr::test::Problem;
using brrr::test::describe;
using brrr::test::wrong_elements;

namespace {

// The same with variant 11's epilogue (matmul_bias_gelu_wgmma): out = gelu(a @ b + bias) and,
// when keep_pre, pre = a @ b. Returns the wrong elements of out and pre.
int wrong_bias_gelu(const Problem& p, std::mt19937& rng, bool keep_pre) {
  const std::int64_t offset = p.misaligned ? 1 : 0;
  MatmulShape s = brrr::test::shape_of(p);
  s.accumulate = false;  // the epilogue writes out; accumulate is not one of its forms
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::vector<bf16> a = brrr::test::bf16_values(rng, offset, p.batch * p.M * p.K);
  const std::vector<bf16> b = brrr::test::bf16_values(rng, offset, (s.stride_b ? p.batch : 1) * p.K * p.N);
  std::vector<float> bias(static_cast<std::size_t>(p.N)), out(static_cast<std::size_t>(p.batch * p.M * p.N + 1));
  for (float& x : bias) x = uniform(rng);
  for (float& x : out) x = uniform(rng);
  const DeviceArray<bf16> a_device(a), b_device(b);
  const DeviceArray<float> bias_device(bias);
  DeviceArray<float> out_device(out), pre_device(out);
  emu::matmul_bias_gelu_wgmma(out_device.data, keep_pre ? pre_device.data : nullptr, a_device.data + offset,
                              b_device.data + offset, bias_device.data, s, brrr::gpu::emulator_runtime().stream());
  const std::vector<float> got = out_device.host(), pre = pre_device.host();
  int wrong = 0;
  const auto check = [&](const char* name, float value, double want) {
    if (std::abs(value - want) > 1e-5 * (1.0 + std::abs(want)) && wrong++ < 3)
      MESSAGE(name << " = " << value << ", want " << want);
  };
  for (std::int64_t z = 0; z < p.batch; ++z)
    for (std::int64_t i = 0; i < p.M; ++i)
      for (std::int64_t j = 0; j < p.N; ++j) {
        const double sum = brrr::test::product(a, b, p, s, offset, z, i, j);
        const double x = sum + bias[static_cast<std::size_t>(j)];
        const double gelu = x / (1.0 + std::exp(-2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)));
        const std::size_t at = static_cast<std::size_t>(z * s.stride_out + i * p.N + j);
        check("out", got[at], gelu);
        check("pre", pre[at], keep_pre ? sum : out[at]);  // untouched without pre
      }
  if (got.back() != out.back() || pre.back() != out.back()) {
    MESSAGE("an element past out or pre changed");
    ++wrong;
  }
  return wrong;
}

void check_all(const Problem* begin, const Problem* end, std::uint32_t seed) {
  std::mt19937 rng(seed);
  for (const Problem* p = begin; p != end; ++p) {
    INFO(describe(*p));
    CHECK(wrong_elements(*p, rng, &emu::matmul_wgmma) == 0);
  }
}

// The ring of wgmma.cu in miniature, for a planted fault: two stages of a (64, 64) tile of a and
// of b, one consumer warpgroup (warps 0-3), a producer warp (warp 4), K = 256 in four k-tiles,
// so each stage is filled twice. With `fault` the producer waits on `full` instead of `empty`
// (for the stage's last bytes to land, not for the consumers to be done with them): it refills
// a stage the consumers may not have read yet, and the sanitizer must say so.
__global__ void ring_kernel(float* out, const __grid_constant__ brrr::simt::TensorMap a_map,
                           const __grid_constant__ brrr::simt::TensorMap b_map, int fault) {
  constexpr int kStages = 2, kTileBytes = 64 * 64 * 2;
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  unsigned char* stages =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(shared) + 1023) & ~std::uintptr_t{1023});
  __shared__ std::uint64_t full[kStages], empty[kStages];
  const int thread = static_cast<int>(threadIdx.x);
  if (thread == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1), mbarrier_init(&empty[s], 128);
    fence_proxy_async_shared_cta();
  }
  __syncthreads();
  if (thread >= 128) {  // the producer warp
    if (thread != 128) return;
    for (int kt = 0; kt < 4; ++kt) {
      const int s = kt % kStages;
      if (!fault)
        mbarrier_wait_parity(&empty[s], static_cast<unsigned>((kt / kStages & 1) ^ 1));
      else if (kt >= kStages)  // the fault: waits only for the stage's previous bytes to land
        mbarrier_wait_parity(&full[s], static_cast<unsigned>((kt / kStages - 1) & 1));
      unsigned char* a_tile = stages + s * 2 * kTileBytes;
      mbarrier_arrive_expect_tx(&full[s], 2 * kTileBytes);
      cp_async_bulk_tensor_2d_global_to_shared(a_tile, &a_map, 64 * kt, 0, &full[s]);
      cp_async_bulk_tensor_2d_global_to_shared(a_tile + kTileBytes, &b_map, 64 * kt, 0, &full[s]);
    }
    return;
  }
  float d[32] = {};
  const auto swizzle = brrr::simt::Swizzle::k128B;
  for (int kt = 0; kt < 4; ++kt) {
    const int s = kt % kStages;
    mbarrier_wait_parity(&full[s], static_cast<unsigned>(kt / kStages & 1));
    const unsigned char* a_tile = stages + s * 2 * kTileBytes;
    wgmma_fence();
    for (int k = 0; k < 4; ++k)
      wgmma_m64nNk16_bf16<64>(d, wgmma_descriptor(a_tile, 16, 1024, swizzle) + 2 * k,
                              wgmma_descriptor(a_tile + kTileBytes, 16, 1024, swizzle) + 2 * k, 1);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    mbarrier_arrive(&empty[s]);
  }
  out[thread] = d[0];
}

}  // namespace

TEST_CASE("matmul_wgmma: the sanitizer catches a producer that refills a stage before the consumers release it") {
  if (!brrr::simt::race_detection_available()) {  // a read of bytes in flight is the race detector's to see
    MESSAGE("skipped: the race detector is not in the AddressSanitizer build");
    return;
  }
  DeviceArray<bf16> a(std::vector<bf16>(64 * 256, bf16(0.5f)));
  DeviceArray<float> out(std::vector<float>(128, 0.0f));
  brrr::simt::TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, brrr::simt::TensorMapType::kBf16, a.data, 256, 64, 512, 64, 64,
                                 brrr::simt::TensorMapSwizzle::k128B);
  const auto run = [&](int fault) {
    return brrr::test::error_of([&] {
      BRRR_LAUNCH(ring_kernel, 1, 160, 1024 + 4 * 64 * 64 * 2, brrr::gpu::emulator_runtime().stream(), out.data, map,
                  map, fault);
      brrr::gpu::emulator_runtime().synchronize();
    });
  };
  CHECK(run(0).empty());
  CHECK(out.host()[0] == doctest::Approx(256 * 0.25));
  const std::string error = run(1);
  INFO(error);
  // The consumers' wgmma reads the stage while the refill is in flight (on every schedule the
  // emulator tries: the producer runs ahead until it must wait).
  CHECK(brrr::test::contains(error, "is still filling"));
  CHECK(brrr::test::contains(error, "test_matmul_wgmma.cpp"));
}

TEST_CASE("matmul_wgmma: 14 wgmma matches the float64 loop on ragged shapes, packed and unpacked operands") {
  const Problem problems[] = {
      {1, 1, 1, 1, false, false, false, false, false},       // one element: both operands packed
      {1, 67, 45, 33, false, false, false, false, false},    // K = 33, N = 45: packed, zero-filled
      {1, 130, 200, 72, false, false, false, false, false},  // as they are: 2 x 2 tiles, M, N edges
      {1, 130, 200, 70, false, true, false, true, false},    // K-major b, K = 70 packed, accumulate
      {1, 256, 128, 128, false, true, false, false, false},  // whole tiles, both K-major
      {2, 5, 6, 0, false, true, false, true, false},         // K = 0: out unchanged when accumulating
      {1, 4, 3, 0, false, false, false, false, false},       // K = 0: out = 0
  };
  check_all(std::begin(problems), std::end(problems), 14);
}

TEST_CASE("matmul_wgmma: 14 wgmma on every layout, batches, the ring's laps and a persistent walk") {
  const Problem problems[] = {
      {1, 70, 24, 136, true, true, false, true, false},    // a MN-major, b K-major, accumulate
      {2, 64, 128, 64, true, true, false, true, false},    // a batch in one launch
      {3, 19, 40, 64, true, false, true, false, true},     // both MN-major, b broadcast, misaligned
      {2, 40, 72, 40, true, false, false, false, false},   // both MN-major, K % 64: a launch a matrix
      {1, 300, 140, 320, false, false, false, false, false},  // 6 tiles over 3 blocks, 5 k-tiles, 4 stages
  };
  check_all(std::begin(problems), std::end(problems), 15);
}

TEST_CASE("matmul_wgmma: a negative size is refused with a message naming it") {
  MatmulShape s;
  s.M = -1, s.N = 2, s.K = 2;
  float out[4];
  const bf16 a[4] = {}, b[4] = {};
  CHECK(brrr::test::contains(brrr::test::error_of([&] { emu::matmul_wgmma(out, a, b, s, nullptr); }),
                             "negative size"));
}

TEST_CASE("matmul_wgmma: registered on bf16 data below variants 12 and 13, never the default") {
  brrr::cuda::use_emulator();
  namespace kernels = brrr::kernels;
  // (bool(...): doctest cannot print function pointers)
  CHECK(bool(kernels::lookup_variant(kernels::op::matmul_on_bf16, brrr::DeviceType::CUDA, "wgmma") == &emu::matmul_wgmma));
  CHECK(bool(kernels::lookup(kernels::op::matmul_on_bf16, brrr::DeviceType::CUDA) == &emu::matmul_bf16_pipelined));
}

TEST_CASE("matmul_wgmma: 14 with variant 11's epilogue (bias, GELU, pre) matches the float64 loop") {
  std::mt19937 rng(11);
  const Problem problems[] = {
      {1, 67, 45, 33, false, false, false, false, false},   // packed operands, N odd
      {1, 130, 131, 72, false, true, false, false, true},   // 2 x 2 tiles, misaligned (packed)
      {2, 40, 72, 40, true, false, false, false, false},    // one launch a matrix: pre and out offset
      {3, 19, 40, 64, true, true, true, false, false},      // a batch in one launch, b broadcast
      {1, 4, 3, 0, false, false, false, false, false},      // K = 0: out = gelu(bias), pre = 0
  };
  for (const Problem& p : problems)
    for (bool keep_pre : {true, false}) {
      INFO(describe(p) << (keep_pre ? ", pre kept" : ", no pre"));
      CHECK(wrong_bias_gelu(p, rng, keep_pre) == 0);
    }
  MatmulShape s;
  s.M = s.N = s.K = 2;
  s.accumulate = true;
  float out[4], bias[2] = {};
  const bf16 a[4] = {}, b[4] = {};
  CHECK(brrr::test::contains(
      brrr::test::error_of([&] { emu::matmul_bias_gelu_wgmma(out, nullptr, a, b, bias, s, nullptr); }),
      "accumulate is not supported"));
}
