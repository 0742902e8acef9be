// tests/emulator/test_attention_wgmma.cpp: attention's variant 5, wgmma (TMA rings, a producer
// and two consumer warpgroups meeting at mbarriers, every tile product a wgmma, the softmax
// weights from registers), forward and backward, run on the SIMT emulator against the CPU
// reference in float64 on the same bf16 values. Chapter 15, its Hopper section. Read before:
// kernels/cuda/attention/wgmma.cu; tests/emulator/test_attention_bf16_memory.cpp (variant 4, the
// same problems and the same check).
//
// The shapes walk the kernels' paths: T = 1 (one key, boxes mostly past the end); T = 67 in two
// heads (a ragged tile, whose box reads the next head's rows, which must get no weight); T = 130
// at head size 128 (two query tiles and two key tiles, the backward's 64-row streams going round
// the two stages); T = 300 (three key tiles of 128: the forward's ring in its second lap). Then
// the backward's determinism (no atomics: the same bits twice), the refusals, a planted fault
// (a consumer that reads v before its barrier says it has landed) and the registration.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "brrr/bfloat16.h"
#include "brrr/cuda.h"
#include "emulator_test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/simt.h"
#include "kernels/cuda/simt_hopper.h"
#include "kernels/registry.h"

namespace emu = brrr::kernels::emu;
using brrr::bf16;
using brrr::test::DeviceArray;

namespace {

using Shape = brrr::test::AttentionShape;
using brrr::test::max_error;

std::vector<double> widened(const std::vector<bf16>& x) {
  std::vector<double> w(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) w[i] = static_cast<float>(x[i]);
  return w;
}

// Forward, then backward from the forward's own bf16 out and float32 lse, each against the
// float64 reference on the same bf16 values. With `twice`, the backward runs again and must give
// the same bits.
void check(const Shape& s, std::uint32_t seed, bool twice = false) {
  CAPTURE(s.BH);
  CAPTURE(s.T);
  CAPTURE(s.hs);
  std::mt19937 rng(seed);
  const std::size_t n = static_cast<std::size_t>(s.BH * s.T * s.hs), rows = static_cast<std::size_t>(s.BH * s.T);
  auto values = [&](float scale) {  // scores of a few units: the softmax neither flat nor one-hot
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<bf16> v(n);
    for (bf16& x : v) x = bf16(normal(rng));
    return v;
  };
  const std::vector<bf16> q = values(1.5f), k = values(1.5f), v = values(1.0f), dout = values(1.0f);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hs));
  const brrr::kernels::AttentionShape shape{s.BH, s.T, s.hs, scale};
  std::vector<double> out_ref(n), lse_ref(rows);
  brrr::kernels::cpu::attention_forward<double>(out_ref.data(), lse_ref.data(), widened(q).data(), widened(k).data(),
                                                widened(v).data(), shape, nullptr);
  const DeviceArray<bf16> q_device(q), k_device(k), v_device(v), dout_device(dout);
  DeviceArray<bf16> out_device(std::vector<bf16>(n, bf16::from_bits(0x7FFF)));  // NaN: unwritten shows
  DeviceArray<float> lse_device(std::vector<float>(rows, NAN));
  const auto stream = brrr::gpu::emulator_runtime().stream();
  emu::attention_forward_wgmma(out_device.data, lse_device.data, q_device.data, k_device.data, v_device.data, shape,
                               stream);
  // out: the lab's bf16 tolerance (the softmax weights and out are rounded to bf16); lse: float32
  // statistics of float32 scores, so much tighter.
  CHECK(max_error(out_device.host(), out_ref) < 3e-2);
  CHECK(max_error(lse_device.host(), lse_ref) < 1e-4);

  const std::vector<bf16> out = out_device.host();
  const std::vector<float> lse = lse_device.host();
  const std::vector<double> lse64(lse.begin(), lse.end());
  std::vector<double> dq_ref(n), dk_ref(n), dv_ref(n);
  brrr::kernels::cpu::attention_backward<double>(dq_ref.data(), dk_ref.data(), dv_ref.data(), widened(dout).data(),
                                                 widened(q).data(), widened(k).data(), widened(v).data(),
                                                 widened(out).data(), lse64.data(), shape, nullptr);
  const auto backward = [&] {
    DeviceArray<float> dq(std::vector<float>(n, NAN)), dk(std::vector<float>(n, NAN)), dv(std::vector<float>(n, NAN));
    emu::attention_backward_wgmma(dq.data, dk.data, dv.data, dout_device.data, q_device.data, k_device.data,
                                  v_device.data, out_device.data, lse_device.data, shape, stream);
    return std::vector<std::vector<float>>{dq.host(), dk.host(), dv.host()};
  };
  const std::vector<std::vector<float>> grads = backward();
  CHECK(max_error(grads[0], dq_ref) < 3e-2);
  CHECK(max_error(grads[1], dk_ref) < 3e-2);
  CHECK(max_error(grads[2], dv_ref) < 3e-2);
  if (twice) {
    const std::vector<std::vector<float>> again = backward();
    for (int i = 0; i < 3; ++i) CHECK(std::memcmp(again[i].data(), grads[i].data(), n * sizeof(float)) == 0);
  }
}

// The forward's stage in miniature, for a planted fault: a producer warp (warp 4) loads a
// (64, 64) k tile and a (64, 64) v tile into one stage, each reporting to its own mbarrier, and
// one consumer warpgroup computes S = k k^T, then o = S v with S from registers, as variant 5's
// consumers do. With `fault` the consumer does not wait on v's barrier before its second wgmma
// (it waited for k only): it reads bytes TMA may still be writing, and the sanitizer must say so.
__global__ void stage_kernel(float* out, const __grid_constant__ brrr::simt::TensorMap map, int fault) {
  constexpr int kTileBytes = 64 * 64 * 2;
  BRRR_DYNAMIC_SHARED(unsigned char, shared);
  unsigned char* k_tile =
      reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(shared) + 1023) & ~std::uintptr_t{1023});
  unsigned char* v_tile = k_tile + kTileBytes;
  __shared__ std::uint64_t k_full, v_full;
  const int thread = static_cast<int>(threadIdx.x);
  if (thread == 0) {
    mbarrier_init(&k_full, 1), mbarrier_init(&v_full, 1);
    fence_proxy_async_shared_cta();
  }
  __syncthreads();
  if (thread >= 128) {  // the producer warp
    if (thread != 128) return;
    mbarrier_arrive_expect_tx(&k_full, kTileBytes);
    cp_async_bulk_tensor_2d_global_to_shared(k_tile, &map, 0, 0, &k_full);
    mbarrier_arrive_expect_tx(&v_full, kTileBytes);
    cp_async_bulk_tensor_2d_global_to_shared(v_tile, &map, 0, 64, &v_full);
    return;
  }
  const auto swizzle = brrr::simt::Swizzle::k128B;
  float s[32] = {}, o[32] = {};
  mbarrier_wait_parity(&k_full, 0);
  wgmma_fence();
  for (int k = 0; k < 4; ++k)
    wgmma_m64nNk16_bf16<64>(s, wgmma_descriptor(k_tile, 16, 1024, swizzle) + 2 * k,
                            wgmma_descriptor(k_tile, 16, 1024, swizzle) + 2 * k, k > 0);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  unsigned p[4][4];
  for (int kk = 0; kk < 4; ++kk)
    for (int r = 0; r < 4; ++r)
      p[kk][r] = static_cast<unsigned>(bf16(s[8 * kk + 2 * r]).bits) |
                 static_cast<unsigned>(bf16(s[8 * kk + 2 * r + 1]).bits) << 16;
  if (!fault) mbarrier_wait_parity(&v_full, 0);
  wgmma_fence();
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64nNk16_bf16<64, true>(o, p[kk], wgmma_descriptor(v_tile, 8192, 1024, swizzle) + 128 * kk, 1);
  wgmma_commit_group();
  wgmma_wait_group<0>();
  if (fault) mbarrier_wait_parity(&v_full, 0);  // (every copy is waited for before the block ends)
  out[thread] = o[0];
}

}  // namespace

TEST_CASE("attention wgmma (variant 5): forward and backward match the float64 reference on the same bf16 values") {
  const Shape shapes[] = {{1, 1, 64}, {2, 67, 64}, {1, 130, 128}};
  std::uint32_t seed = 50;
  for (const Shape& s : shapes) check(s, seed++);
}

TEST_CASE("attention wgmma (variant 5): three key tiles (the forward's ring in its second lap), and the backward "
          "gives the same bits twice") {
  check({1, 300, 64}, 53, true);
}

TEST_CASE("attention wgmma (variant 5): head sizes other than 64 and 128, and misaligned pointers, are refused "
          "with a message") {
  DeviceArray<bf16> x(2 * 64 + 8);
  DeviceArray<float> lse(2), d(3 * 2 * 64);
  const auto stream = brrr::gpu::emulator_runtime().stream();
  CHECK(brrr::test::contains(brrr::test::error_of([&] {
                               emu::attention_forward_wgmma(x.data, lse.data, x.data, x.data, x.data, {1, 2, 40, 0.1f},
                                                            stream);
                             }),
                             "attention_forward wgmma: head size 40"));
  CHECK(brrr::test::contains(brrr::test::error_of([&] {
                               emu::attention_forward_wgmma(x.data, lse.data, x.data + 1, x.data, x.data,
                                                            {1, 2, 64, 0.1f}, stream);
                             }),
                             "attention_forward wgmma: q, k, v and out must start 16-byte aligned"));
  CHECK(brrr::test::contains(brrr::test::error_of([&] {
                               emu::attention_backward_wgmma(d.data, d.data, d.data, x.data, x.data, x.data, x.data,
                                                             x.data, lse.data, {1, 2, 40, 0.1f}, stream);
                             }),
                             "attention_backward wgmma: head size 40"));
  CHECK(brrr::test::contains(brrr::test::error_of([&] {
                               emu::attention_backward_wgmma(d.data, d.data, d.data, x.data + 1, x.data, x.data,
                                                             x.data, x.data, lse.data, {1, 2, 64, 0.1f}, stream);
                             }),
                             "attention_backward wgmma: q, k, v and dout must start 16-byte aligned"));
  CHECK(brrr::test::contains(brrr::test::error_of([&] {
                               emu::attention_backward_wgmma(d.data + 1, d.data, d.data, x.data, x.data, x.data,
                                                             x.data, x.data, lse.data, {1, 2, 64, 0.1f}, stream);
                             }),
                             "attention_backward wgmma: dq, dk and dv must start 8-byte aligned"));
}

TEST_CASE("attention wgmma (variant 5): the sanitizer catches a consumer that reads v before its barrier says it "
          "has landed") {
  DeviceArray<bf16> x(std::vector<bf16>(128 * 64, bf16(0.25f)));
  DeviceArray<float> out(std::vector<float>(128, 0.0f));
  brrr::simt::TensorMap map;
  brrr::simt::make_tensor_map_2d(&map, brrr::simt::TensorMapType::kBf16, x.data, 64, 128, 128, 64, 64,
                                 brrr::simt::TensorMapSwizzle::k128B);
  const auto run = [&](int fault) {
    return brrr::test::error_of([&] {
      BRRR_LAUNCH(stage_kernel, 1, 160, 1024 + 2 * 64 * 64 * 2, brrr::gpu::emulator_runtime().stream(), out.data, map,
                  fault);
      brrr::gpu::emulator_runtime().synchronize();
    });
  };
  CHECK(run(0).empty());
  CHECK(out.host()[0] == doctest::Approx(64 * (64 * 0.0625) * 0.25));  // S = 64 x 1/16 each, then S v
  if (!brrr::simt::race_detection_available()) {  // a read of bytes in flight is the race detector's to see
    MESSAGE("skipped: the race detector is not in the AddressSanitizer build");
    return;
  }
  const std::string error = run(1);
  INFO(error);
  CHECK(brrr::test::contains(error, "is still filling"));
  CHECK(brrr::test::contains(error, "test_attention_wgmma.cpp"));
}

TEST_CASE("attention wgmma (variant 5): registered on bf16 data below variant 4, never the default") {
  brrr::cuda::use_emulator();
  namespace kernels = brrr::kernels;
  // (bool(...): doctest cannot print function pointers)
  CHECK(bool(kernels::lookup_variant(kernels::op::attention_forward_on_bf16, brrr::DeviceType::CUDA, "wgmma") ==
             &emu::attention_forward_wgmma));
  CHECK(bool(kernels::lookup_variant(kernels::op::attention_backward_on_bf16, brrr::DeviceType::CUDA, "wgmma") ==
             &emu::attention_backward_wgmma));
  CHECK(bool(kernels::lookup(kernels::op::attention_forward_on_bf16, brrr::DeviceType::CUDA) ==
             &emu::attention_forward_bf16_pipelined));
  CHECK(bool(kernels::lookup(kernels::op::attention_backward_on_bf16, brrr::DeviceType::CUDA) ==
             &emu::attention_backward_bf16_pipelined));
}
