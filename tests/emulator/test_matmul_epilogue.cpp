// tests/emulator/test_matmul_epilogue.cpp: matmul's variant 11, the GEMM with bias and GELU
// fused into its epilogue (out = gelu(a @ b + bias), pre = a @ b), run on the SIMT emulator
// against the CPU reference kernel (kernels/cpu/fused.cpp: the registry's GEMM, then
// bias_gelu_forward) in float64 on the same values. Chapter 14. Read before: kernels/cuda/matmul/mma_sync.cu.
//
// The kernel's main loop is variant 10's (tf32 products), so a and b are rounded to tf32 first:
// what is left to compare is the float32 sums and the epilogue. M, N and K are not multiples
// of 16, N is odd in most shapes (the epilogue's column pairs end half way), b is stored
// transposed as nn::Linear's weight is, and the buffers have one guard element past the end.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "brrr/brrr.h"
#include "emulator_test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/simt.h"

namespace emu = brrr::kernels::emu;
using brrr::kernels::MatmulShape;

namespace {

struct Shape {
  std::int64_t batch, M, N, K;
  bool trans_a, trans_b, broadcast_b, with_pre;
};

// Runs variant 11 and the float64 CPU reference on one random problem; returns the number of
// elements of out and pre that differ beyond `tolerance`, or that changed outside the outputs.
int wrong_elements(const Shape& p, std::mt19937& rng) {
  MatmulShape s;
  s.batch = p.batch, s.M = p.M, s.N = p.N, s.K = p.K;
  s.trans_a = p.trans_a, s.trans_b = p.trans_b;
  s.stride_a = p.batch == 1 ? 0 : p.M * p.K;
  s.stride_b = p.batch == 1 || p.broadcast_b ? 0 : p.K * p.N;
  s.stride_out = p.M * p.N;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  auto tf32_values = [&](std::int64_t n) {  // what the kernel's cvt.rna would make of them
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = std::bit_cast<float>(float_to_tf32(uniform(rng)));
    return v;
  };
  const std::vector<float> a = tf32_values(p.batch * p.M * p.K);
  const std::vector<float> b = tf32_values((s.stride_b ? p.batch : 1) * p.K * p.N);
  const std::vector<float> bias = tf32_values(p.N);
  const std::int64_t size = p.batch * p.M * p.N;
  const float guard = 12345.0f;
  std::vector<float> out(static_cast<std::size_t>(size + 1), guard), pre = out;
  emu::matmul_bias_gelu(out.data(), p.with_pre ? pre.data() : nullptr, a.data(), b.data(), bias.data(), s, nullptr);

  const std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end()), bias64(bias.begin(), bias.end());
  std::vector<double> want(static_cast<std::size_t>(size)), want_pre(want.size());
  brrr::kernels::cpu::matmul_bias_gelu<double>(want.data(), want_pre.data(), a64.data(), b64.data(), bias64.data(), s,
                                               nullptr);
  int wrong = 0;
  const auto check = [&](const char* what, float got, double expected) {
    if (std::abs(got - expected) <= 2e-5 * (1.0 + std::abs(expected))) return;
    if (wrong++ < 3) MESSAGE(what << ": got " << got << ", want " << expected);
  };
  for (std::int64_t e = 0; e < size; ++e) {
    check("out", out[e], want[e]);
    if (p.with_pre) check("pre", pre[e], want_pre[e]);
  }
  check("out's guard", out[size], guard);
  check("pre's guard", pre[size], guard);
  if (!p.with_pre) check("pre (not asked for)", pre[0], guard);
  return wrong;
}

}  // namespace

TEST_CASE("matmul_epilogue: 11 bias_gelu matches the CPU reference at ragged shapes") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(11);
  const Shape shapes[] = {
      {1, 1, 1, 1, false, false, false, true},     // one element
      {1, 67, 45, 33, false, true, false, true},   // the MLP's layout: b = weight^T, stored (N, K)
      {1, 17, 131, 65, false, false, false, true}, // N odd, several column tiles, five k-tiles
      {1, 70, 9, 20, true, true, false, false},    // both transposed, no pre
      {2, 19, 37, 40, false, true, true, true},    // a batch sharing b (a linear over (B, T, C))
  };
  for (const Shape& p : shapes) {
    INFO("batch " << p.batch << ", (" << p.M << ", " << p.K << ") @ (" << p.K << ", " << p.N << ")"
                  << (p.trans_a ? ", a transposed" : "") << (p.trans_b ? ", b transposed" : "")
                  << (p.with_pre ? ", with pre" : ", no pre"));
    CHECK(wrong_elements(p, rng) == 0);
  }
}

TEST_CASE("matmul_epilogue: bad calls are refused with a message naming the problem") {
  const brrr::simt::HostMemoryKernels host_memory;
  std::vector<float> a(6, 1.0f), b(6, 1.0f), bias(3, 0.0f), out(9);
  MatmulShape s;
  s.M = 3, s.N = 3, s.K = 2;
  for (auto fn : {&emu::matmul_bias_gelu, &brrr::kernels::cpu::matmul_bias_gelu<float>}) {
    const auto error = [&](const float* bias_or_null) {
      return brrr::test::error_of([&] { fn(out.data(), nullptr, a.data(), b.data(), bias_or_null, s, nullptr); });
    };
    s.accumulate = true;
    CHECK(brrr::test::contains(error(bias.data()), "accumulate is not supported"));
    s.accumulate = false;
    CHECK(brrr::test::contains(error(nullptr), "bias is null"));
  }
}
