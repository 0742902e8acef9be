// tests/emulator/test_matmul_epilogue_bf16.cpp: matmul_epilogue on bf16 data, the bf16 step's
// linear layers as one op (out = act(a @ b + bias) rounded to bf16 once, pre kept under GELU),
// its CUDA variant on the SIMT emulator (kernels/cuda/matmul/epilogue.cu) and its CPU kernel
// (kernels/cpu/nn_bf16.cpp), each against the float64 sums of the same bf16 values. Chapter 18,
// section 11. (cuBLASLt's variant runs on a GPU only: tests/cuda/test_gpu.cpp's lab table.)
//
// The problems are the three GEMMs of a linear layer and their flags: the forward (b stored
// transposed, as nn::Linear's weight), dx (no transpose, no bias), both transposed, with and
// without the bias, GELU with and without pre; ragged M, N and K, N not a multiple of 8.
// A correct output is the float64 result rounded to bf16 once: within 2^-9 of it relative, plus
// what the float32 sums add (about 1e-6 relative here); the check allows 2^-8.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <vector>

#include "brrr/brrr.h"
#include "emulator_test_util.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/matmul/matmul.h"
#include "tests/linear_gelu_check.h"

namespace emu = brrr::kernels::emu;
using brrr::bf16;
using brrr::kernels::MatmulShape;
using brrr::test::DeviceArray;

namespace {

struct Problem {
  std::int64_t M, N, K;
  bool trans_a, trans_b, bias, gelu, pre;
};

std::string describe(const Problem& p) {
  std::ostringstream text;
  text << "(" << p.M << ", " << p.K << ") @ (" << p.K << ", " << p.N << ")" << (p.trans_a ? ", a transposed" : "")
       << (p.trans_b ? ", b transposed" : "") << (p.bias ? ", bias" : "") << (p.gelu ? ", gelu" : "")
       << (p.pre ? ", pre" : "");
  return text.str();
}

std::vector<bf16> values(std::mt19937& rng, std::int64_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<bf16> v(static_cast<std::size_t>(n));
  for (bf16& x : v) x = bf16(normal(rng));
  return v;
}

using EpilogueFn = void (*)(bf16*, bf16*, const bf16*, const bf16*, const bf16*, bool, const MatmulShape&,
                            brrr::kernels::Stream);

// Runs `kernel` (on the emulator's memory when `emulated`, else on host memory) on one random
// problem; returns how many values of out and pre are off the float64 result.
int wrong_values(const Problem& p, std::mt19937& rng, EpilogueFn kernel, bool emulated) {
  MatmulShape s;
  s.M = p.M, s.N = p.N, s.K = p.K, s.trans_a = p.trans_a, s.trans_b = p.trans_b, s.stride_out = p.M * p.N;
  const std::vector<bf16> a = values(rng, p.M * p.K, 1.0f), b = values(rng, p.K * p.N, 0.3f);
  const std::vector<bf16> bias = values(rng, p.N, 0.5f);
  const bf16 poison(12345.0f);  // what an unwritten value would still hold
  std::vector<bf16> out(static_cast<std::size_t>(p.M * p.N), poison), pre(out);
  std::vector<bf16> got_out, got_pre;
  bf16* pre_arg = nullptr;
  if (emulated) {
    const DeviceArray<bf16> da(a), db(b), dbias(bias);
    DeviceArray<bf16> dout(out), dpre(pre);
    if (p.pre) pre_arg = dpre.data;
    kernel(dout.data, pre_arg, da.data, db.data, p.bias ? dbias.data : nullptr, p.gelu, s,
           brrr::gpu::emulator_runtime().stream());
    got_out = dout.host();
    got_pre = dpre.host();
  } else {
    got_out = out;
    got_pre = pre;
    if (p.pre) pre_arg = got_pre.data();
    kernel(got_out.data(), pre_arg, a.data(), b.data(), p.bias ? bias.data() : nullptr, p.gelu, s, nullptr);
  }
  int wrong = 0;
  auto check = [&](const char* name, std::int64_t i, std::int64_t j, float got, double want) {
    if (std::abs(got - want) <= std::ldexp(std::abs(want), -8) + 1e-6) return;
    if (wrong++ < 3) MESSAGE(name << "[" << i << ", " << j << "] = " << got << ", want " << want);
  };
  for (std::int64_t i = 0; i < p.M; ++i)
    for (std::int64_t j = 0; j < p.N; ++j) {
      double sum = p.bias ? static_cast<double>(static_cast<float>(bias[j])) : 0.0;
      for (std::int64_t k = 0; k < p.K; ++k)
        sum += static_cast<double>(static_cast<float>(a[p.trans_a ? k * p.M + i : i * p.K + k])) *
               static_cast<double>(static_cast<float>(b[p.trans_b ? j * p.K + k : k * p.N + j]));
      const std::int64_t at = i * p.N + j;
      check("out", i, j, static_cast<float>(got_out[at]), p.gelu ? brrr::test::gelu_tanh64(sum) : sum);
      if (p.gelu && p.pre) check("pre", i, j, static_cast<float>(got_pre[at]), sum);
      else if (got_pre[at].bits != poison.bits && wrong++ < 3) MESSAGE("pre written where it must not be");
    }
  return wrong;
}

const Problem kProblems[] = {
    {1, 1, 1, false, true, true, true, true},      // one value
    {67, 45, 33, false, true, true, false, false},  // the forward of a linear layer: b is the weight (N, K)
    {17, 131, 66, false, true, true, true, true},   // c_fc: bias, GELU, pre kept; N odd
    {19, 40, 24, false, true, false, true, false},  // GELU, no bias, no pre
    {33, 20, 70, false, false, false, false, false}, // dx = g @ W: no transpose, no bias
    {21, 9, 37, true, true, true, false, false},    // both transposed
    {5, 6, 0, false, true, true, true, true},       // K = 0: out = gelu(bias), pre = bias
};

}  // namespace

TEST_CASE("matmul_epilogue on bf16 data: the emulator's two-pass variant matches the float64 sums") {
  brrr::cuda::use_emulator();  // its GEMM is the registry's matmul on bf16 data on the CUDA device
  std::mt19937 rng(18);
  for (const Problem& p : kProblems) {
    INFO(describe(p));
    CHECK(wrong_values(p, rng, &emu::matmul_epilogue_unfused, true) == 0);
  }
}

TEST_CASE("matmul_epilogue on bf16 data: the CPU kernel matches the float64 sums") {
  std::mt19937 rng(18);
  for (const Problem& p : kProblems) {
    INFO(describe(p));
    CHECK(wrong_values(p, rng, &brrr::kernels::cpu::matmul_epilogue_bf16, false) == 0);
  }
}

TEST_CASE("matmul_epilogue on bf16 data: a batch or accumulate is refused by name") {
  MatmulShape s;
  s.M = s.N = s.K = 2;
  s.batch = 2;
  std::vector<bf16> x(8);
  CHECK_THROWS_WITH(brrr::kernels::cpu::matmul_epilogue_bf16(x.data(), nullptr, x.data(), x.data(), nullptr, false, s,
                                                             nullptr),
                    doctest::Contains("one matrix only (batch 1), got batch 2"));
  s.batch = 1;
  s.accumulate = true;
  CHECK_THROWS_WITH(brrr::kernels::cpu::matmul_epilogue_bf16(x.data(), nullptr, x.data(), x.data(), nullptr, false, s,
                                                             nullptr),
                    doctest::Contains("accumulate is not supported"));
}

TEST_CASE("linear_gelu on bf16 tensors on the emulator: GELU's tanh form of the exact sum, pre exact") {
  brrr::cuda::use_emulator();
  const brrr::test::GeluForm form = brrr::test::linear_gelu_form(brrr::Device::cuda());
  CHECK(form.tanh_share == 1.0);
  CHECK(form.erf_share < 0.99);  // the check tells the two forms apart
  CHECK(form.pre_exact);
}
