// tests/emulator/test_attention_bf16_memory.cpp: attention's variant 4 (q, k, v, out and
// dout stored as bfloat16; forward and backward stream their tiles by cp.async with double
// buffering and read fragments by ldmatrix), run on the SIMT emulator on device buffers of
// bf16, against the CPU reference in float64 on the same bf16 values.
// Chapter 15. Read before: kernels/cuda/attention/mma_sync.cu (variant 4).
//
// T = 1, 67 and 130: one key tile, a ragged second one, and three tiles (the second stage
// refilled while the first is read; the race detector, under the extra schedules of
// tests/emulator/CMakeLists.txt, reports a copy that lands on a tile still being read).
// Head sizes 64 and 128, the sizes the kernel is written for; others are refused.
// Variant 3's backward runs these kernels at those head sizes: on bf16 values, the same bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "brrr/bfloat16.h"
#include "emulator_test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/attention/attention.h"

namespace emu = brrr::kernels::emu;
using brrr::bf16;
using brrr::test::DeviceArray;

namespace {

using Shape = brrr::test::AttentionShape;
using brrr::test::max_error;

void check_forward(const Shape& s, std::uint32_t seed) {
  CAPTURE(s.BH);
  CAPTURE(s.T);
  CAPTURE(s.hs);
  std::mt19937 rng(seed);
  const std::size_t n = static_cast<std::size_t>(s.BH * s.T * s.hs), rows = static_cast<std::size_t>(s.BH * s.T);
  auto values = [&](double scale) {  // scores of a few units: the softmax neither flat nor one-hot
    std::normal_distribution<float> normal(0.0f, static_cast<float>(scale));
    std::vector<bf16> v(n);
    for (bf16& x : v) x = bf16(normal(rng));
    return v;
  };
  const std::vector<bf16> q = values(1.5), k = values(1.5), v = values(1.0);
  auto widened = [](const std::vector<bf16>& x) {
    std::vector<double> w(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) w[i] = static_cast<float>(x[i]);
    return w;
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hs));
  std::vector<double> out_ref(n), lse_ref(rows);
  brrr::kernels::cpu::attention_forward<double>(out_ref.data(), lse_ref.data(), widened(q).data(), widened(k).data(),
                                                widened(v).data(), {s.BH, s.T, s.hs, scale}, nullptr);

  const DeviceArray<bf16> q_device(q), k_device(k), v_device(v);
  DeviceArray<bf16> out_device(std::vector<bf16>(n, bf16::from_bits(0x7FFF)));  // NaN: unwritten shows
  DeviceArray<float> lse_device(std::vector<float>(rows, NAN));
  emu::attention_forward_bf16_pipelined(out_device.data, lse_device.data, q_device.data, k_device.data, v_device.data,
                                        {s.BH, s.T, s.hs, static_cast<float>(scale)},
                                        brrr::gpu::emulator_runtime().stream());
  // out: the lab's bf16 tolerance (the kernel rounds the softmax weights and out to bf16);
  // lse: float32 statistics of float32 scores, so much tighter.
  CHECK(max_error(out_device.host(), out_ref) < 3e-2);
  CHECK(max_error(lse_device.host(), lse_ref) < 1e-4);

  // The backward (bf16 inputs, float32 gradients; query and key tiles of 32, so T = 130 streams
  // five through the two stages), from the forward's own bf16
  // out and float32 lse, against the float64 backward on the same values.
  const std::vector<bf16> dout = values(1.0);
  const std::vector<bf16> out = out_device.host();
  const std::vector<float> lse = lse_device.host();
  const std::vector<double> lse64(lse.begin(), lse.end());
  std::vector<double> dq_ref(n), dk_ref(n), dv_ref(n);
  brrr::kernels::cpu::attention_backward<double>(dq_ref.data(), dk_ref.data(), dv_ref.data(), widened(dout).data(),
                                                 widened(q).data(), widened(k).data(), widened(v).data(),
                                                 widened(out).data(), lse64.data(), {s.BH, s.T, s.hs, scale}, nullptr);
  const DeviceArray<bf16> dout_device(dout);
  DeviceArray<float> dq(std::vector<float>(n, NAN)), dk(std::vector<float>(n, NAN)), dv(std::vector<float>(n, NAN));
  emu::attention_backward_bf16_pipelined(dq.data, dk.data, dv.data, dout_device.data, q_device.data, k_device.data,
                                      v_device.data, out_device.data, lse_device.data,
                                      {s.BH, s.T, s.hs, static_cast<float>(scale)},
                                      brrr::gpu::emulator_runtime().stream());
  CHECK(max_error(dq.host(), dq_ref) < 3e-2);
  CHECK(max_error(dk.host(), dk_ref) < 3e-2);
  CHECK(max_error(dv.host(), dv_ref) < 3e-2);
}

}  // namespace

TEST_CASE("attention bf16_pipelined (variant 4): forward and backward match the float64 reference on the same bf16 "
          "values") {
  const Shape shapes[] = {{1, 1, 64}, {2, 67, 64}, {1, 130, 128}};
  std::uint32_t seed = 40;
  for (const Shape& s : shapes) check_forward(s, seed++);
}

TEST_CASE("attention bf16_pipelined (variant 4): head sizes other than 64 and 128, and misaligned pointers, are "
          "refused") {
  DeviceArray<bf16> x(2 * 64 + 8);
  DeviceArray<float> lse(2);
  const std::string head_size = brrr::test::error_of([&] {
    emu::attention_forward_bf16_pipelined(x.data, lse.data, x.data, x.data, x.data, {1, 2, 40, 0.1f}, nullptr);
  });
  CHECK(brrr::test::contains(head_size, "head size 40"));
  const std::string misaligned = brrr::test::error_of([&] {
    emu::attention_forward_bf16_pipelined(x.data, lse.data, x.data + 1, x.data, x.data, {1, 2, 64, 0.1f}, nullptr);
  });
  CHECK(brrr::test::contains(misaligned, "attention_forward bf16_pipelined: q, k, v and out must start 16-byte aligned"));
  DeviceArray<float> d(3 * 2 * 40);
  const std::string backward = brrr::test::error_of([&] {
    emu::attention_backward_bf16_pipelined(d.data, d.data, d.data, x.data, x.data, x.data, x.data, x.data, lse.data,
                                        {1, 2, 40, 0.1f}, nullptr);
  });
  CHECK(brrr::test::contains(backward, "head size 40"));
  const std::string backward_misaligned = brrr::test::error_of([&] {
    emu::attention_backward_bf16_pipelined(d.data, d.data, d.data, x.data, x.data + 1, x.data, x.data, x.data,
                                           lse.data, {1, 2, 64, 0.1f}, nullptr);
  });
  CHECK(brrr::test::contains(backward_misaligned,
                             "attention_backward bf16_pipelined: q, k, v and dout must start 16-byte aligned"));
}

// Variant 3's backward (float32 in memory) hands head sizes 64 and 128 to variant 4's kernels,
// after one pass that computes D and rounds q, k, v and dout to bf16. On values that are
// already bf16 (out too, so D sees what variant 4 sees), the two must agree bit for bit.
TEST_CASE("attention bf16_mma (variant 3) backward at head sizes 64 and 128 gives variant 4's bits on the same "
          "bf16 values") {
  const Shape shapes[] = {{2, 67, 64}, {1, 130, 128}, {1, 1, 64}};
  std::mt19937 rng(47);
  for (const Shape& s : shapes) {
    CAPTURE(s.BH);
    CAPTURE(s.T);
    CAPTURE(s.hs);
    const std::size_t n = static_cast<std::size_t>(s.BH * s.T * s.hs), rows = static_cast<std::size_t>(s.BH * s.T);
    auto values = [&](float scale) {
      std::normal_distribution<float> normal(0.0f, scale);
      std::vector<bf16> v(n);
      for (bf16& x : v) x = bf16(normal(rng));
      return v;
    };
    auto widened = [](const std::vector<bf16>& x) {
      std::vector<float> w(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) w[i] = static_cast<float>(x[i]);
      return w;
    };
    const std::vector<bf16> q = values(1.5f), k = values(1.5f), v = values(1.0f), dout = values(1.0f),
                            out = values(0.5f);
    std::vector<float> lse(rows);
    std::normal_distribution<float> around(2.0f, 0.5f);  // any lse will do: both read the same
    for (float& x : lse) x = around(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.hs));
    const DeviceArray<float> lse_device(lse);

    const DeviceArray<bf16> q16(q), k16(k), v16(v), dout16(dout), out16(out);
    DeviceArray<float> dq4(std::vector<float>(n, NAN)), dk4(std::vector<float>(n, NAN)), dv4(std::vector<float>(n, NAN));
    emu::attention_backward_bf16_pipelined(dq4.data, dk4.data, dv4.data, dout16.data, q16.data, k16.data, v16.data,
                                           out16.data, lse_device.data, {s.BH, s.T, s.hs, scale},
                                           brrr::gpu::emulator_runtime().stream());

    const DeviceArray<float> q32(widened(q)), k32(widened(k)), v32(widened(v)), dout32(widened(dout)),
        out32(widened(out));
    DeviceArray<float> dq3(std::vector<float>(n, NAN)), dk3(std::vector<float>(n, NAN)), dv3(std::vector<float>(n, NAN));
    emu::attention_backward_bf16_mma(dq3.data, dk3.data, dv3.data, dout32.data, q32.data, k32.data, v32.data,
                                     out32.data, lse_device.data, {s.BH, s.T, s.hs, scale},
                                     brrr::gpu::emulator_runtime().stream());
    const std::vector<float> dq3h = dq3.host(), dk3h = dk3.host(), dv3h = dv3.host();
    const std::vector<float> dq4h = dq4.host(), dk4h = dk4.host(), dv4h = dv4.host();
    CHECK(std::all_of(dq4h.begin(), dq4h.end(), [](float x) { return std::isfinite(x); }));
    CHECK(std::memcmp(dq3h.data(), dq4h.data(), n * sizeof(float)) == 0);
    CHECK(std::memcmp(dk3h.data(), dk4h.data(), n * sizeof(float)) == 0);
    CHECK(std::memcmp(dv3h.data(), dv4h.data(), n * sizeof(float)) == 0);
  }
}

// The packed forms (attention_forward_qkv, attention_backward_qkv; chapter 18, section 12): the
// kernels read q, k, v from qkv (B, T, 3 C) and dout, out from (B, T, C), and write dq, dk, dv
// rounded into dqkv, where the unpacked ops take (BH, T, hs) copies. Only the addresses differ,
// so on the same values they must give the unpacked calls' bits: out and lse, and each gradient
// the float32 one rounded to bf16 once. On the emulator (variant 4) and on the CPU, with several
// heads (a head's columns start inside a row), two batches, and ragged tiles.
namespace {
struct Packed {
  std::int64_t B, heads, T, hs;
  std::int64_t C() const { return heads * hs; }
  std::int64_t BH() const { return B * heads; }
};

// Column block `column` + head h of a (B, T, width) matrix <-> (BH, T, hs).
template <class X>
std::vector<X> unpack(const std::vector<X>& packed, const Packed& p, std::int64_t width, std::int64_t column) {
  std::vector<X> heads(static_cast<std::size_t>(p.BH() * p.T * p.hs));
  for (std::int64_t bh = 0; bh < p.BH(); ++bh)
    for (std::int64_t t = 0; t < p.T; ++t)
      for (std::int64_t d = 0; d < p.hs; ++d)
        heads[static_cast<std::size_t>((bh * p.T + t) * p.hs + d)] = packed[static_cast<std::size_t>(
            ((bh / p.heads) * p.T + t) * width + column + (bh % p.heads) * p.hs + d)];
  return heads;
}

bool same(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}
bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
std::vector<bf16> rounded(const std::vector<float>& x) {
  std::vector<bf16> r(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) r[i] = bf16(x[i]);
  return r;
}

void check_packed(const Packed& p, bool on_cpu, std::uint32_t seed) {
  CAPTURE(p.B);
  CAPTURE(p.heads);
  CAPTURE(p.T);
  CAPTURE(p.hs);
  CAPTURE(on_cpu);
  std::mt19937 rng(seed);
  const std::int64_t C = p.C(), n = p.BH() * p.T * p.hs;
  auto values = [&](std::int64_t count, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<bf16> v(static_cast<std::size_t>(count));
    for (bf16& x : v) x = bf16(normal(rng));
    return v;
  };
  const std::vector<bf16> qkv = values(p.B * p.T * 3 * C, 1.5f), dout = values(p.B * p.T * C, 1.0f);
  const std::vector<bf16> q = unpack(qkv, p, 3 * C, 0), k = unpack(qkv, p, 3 * C, C), v = unpack(qkv, p, 3 * C, 2 * C);
  const brrr::kernels::AttentionShape shape = brrr::kernels::AttentionShape::of(p.BH(), p.T, p.hs);
  const auto rows = static_cast<std::size_t>(p.BH() * p.T);

  // The packed calls.
  std::vector<bf16> out_packed, dqkv;
  std::vector<float> lse_packed;
  // The unpacked calls on the copies.
  std::vector<bf16> out;
  std::vector<float> lse, dq, dk, dv;
  if (on_cpu) {
    namespace cpu = brrr::kernels::cpu;
    out_packed.resize(static_cast<std::size_t>(p.B * p.T * C)), lse_packed.resize(rows);
    cpu::attention_forward_qkv_bf16(out_packed.data(), lse_packed.data(), qkv.data(), shape, p.heads, nullptr);
    dqkv.assign(qkv.size(), bf16::from_bits(0x7FFF));
    cpu::attention_backward_qkv_bf16(dqkv.data(), dout.data(), qkv.data(), out_packed.data(), lse_packed.data(),
                                     shape, p.heads, nullptr);
    out.resize(static_cast<std::size_t>(n)), lse.resize(rows);
    cpu::attention_forward_bf16_memory(out.data(), lse.data(), q.data(), k.data(), v.data(), shape, nullptr);
    const std::vector<bf16> g = unpack(dout, p, C, 0), o = unpack(out_packed, p, C, 0);
    dq.resize(static_cast<std::size_t>(n)), dk.resize(dq.size()), dv.resize(dq.size());
    cpu::attention_backward_bf16_memory(dq.data(), dk.data(), dv.data(), g.data(), q.data(), k.data(), v.data(),
                                        o.data(), lse_packed.data(), shape, nullptr);
  } else {
    const auto stream = brrr::gpu::emulator_runtime().stream();
    const DeviceArray<bf16> qkv_d(qkv), dout_d(dout);
    DeviceArray<bf16> out_d(std::vector<bf16>(static_cast<std::size_t>(p.B * p.T * C), bf16::from_bits(0x7FFF)));
    DeviceArray<float> lse_d(std::vector<float>(rows, NAN));
    emu::attention_forward_qkv_bf16_pipelined(out_d.data, lse_d.data, qkv_d.data, shape, p.heads, stream);
    DeviceArray<bf16> dqkv_d(std::vector<bf16>(qkv.size(), bf16::from_bits(0x7FFF)));
    emu::attention_backward_qkv_bf16_pipelined(dqkv_d.data, dout_d.data, qkv_d.data, out_d.data, lse_d.data, shape,
                                               p.heads, stream);
    out_packed = out_d.host(), lse_packed = lse_d.host(), dqkv = dqkv_d.host();
    const DeviceArray<bf16> q_d(q), k_d(k), v_d(v), g_d(unpack(dout, p, C, 0)), o_d(unpack(out_packed, p, C, 0));
    DeviceArray<bf16> o_unpacked(static_cast<std::size_t>(n));
    const auto count = static_cast<std::size_t>(n);
    DeviceArray<float> lse_unpacked(rows), dq_d(count), dk_d(count), dv_d(count);
    emu::attention_forward_bf16_pipelined(o_unpacked.data, lse_unpacked.data, q_d.data, k_d.data, v_d.data, shape,
                                          stream);
    emu::attention_backward_bf16_pipelined(dq_d.data, dk_d.data, dv_d.data, g_d.data, q_d.data, k_d.data, v_d.data,
                                           o_d.data, lse_d.data, shape, stream);
    out = o_unpacked.host(), lse = lse_unpacked.host(), dq = dq_d.host(), dk = dk_d.host(), dv = dv_d.host();
  }
  CHECK(same(unpack(out_packed, p, C, 0), out));
  CHECK(same(lse_packed, lse));
  CHECK(same(unpack(dqkv, p, 3 * C, 0), rounded(dq)));
  CHECK(same(unpack(dqkv, p, 3 * C, C), rounded(dk)));
  CHECK(same(unpack(dqkv, p, 3 * C, 2 * C), rounded(dv)));
}
}  // namespace

TEST_CASE("attention on the packed qkv (variant 4 and the CPU): the bits of the unpacked calls on copies") {
  // (Three tiles at hs = 128 are the unpacked test's above: here two, one ragged, are enough
  // for the addresses.)
  const Packed shapes[] = {{2, 3, 67, 64}, {1, 2, 70, 128}, {1, 1, 1, 64}};
  std::uint32_t seed = 60;
  for (const Packed& p : shapes) {
    check_packed(p, false, seed);
    check_packed(p, true, seed++);
  }
  // heads must divide BH: the kernels could not find a head's batch otherwise.
  DeviceArray<bf16> x(3 * 64 * 2);
  DeviceArray<float> lse(2);
  const std::string bad = brrr::test::error_of([&] {
    emu::attention_forward_qkv_bf16_pipelined(x.data, lse.data, x.data, {3, 2, 64, 0.125}, 2, nullptr);
  });
  CHECK(brrr::test::contains(bad, "heads must be positive and divide BH = 3, got 2"));
}
