// tests/emulator/bf16_gemm_check.h: the check the bf16-data GEMM tests share (variants 12 and 13
// in test_matmul_bf16_memory.cpp, variant 14 in test_matmul_wgmma.cpp): one problem (a batch,
// layouts, broadcast, accumulate, one value off alignment), run on the emulator, against the
// triple loop in float64 on the same bf16 values. Chapter 14.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "brrr/bfloat16.h"
#include "emulator_test_util.h"
#include "kernels/cuda/simt.h"
#include "kernels/signatures.h"

namespace brrr::test {

struct Problem {
  std::int64_t batch, M, N, K;
  bool trans_a, trans_b, broadcast_b, accumulate, misaligned;
};

inline std::string describe(const Problem& p) {
  std::ostringstream text;
  text << "batch " << p.batch << ", (" << p.M << ", " << p.K << ") @ (" << p.K << ", " << p.N << ")"
       << (p.trans_a ? ", a transposed" : "") << (p.trans_b ? ", b transposed" : "")
       << (p.broadcast_b ? ", b broadcast" : "") << (p.accumulate ? ", accumulate" : "")
       << (p.misaligned ? ", misaligned" : "");
  return text.str();
}

using GemmFn = void (*)(float*, const bf16*, const bf16*, const kernels::MatmulShape&, kernels::Stream);

// The kernels' description of problem p.
inline kernels::MatmulShape shape_of(const Problem& p) {
  kernels::MatmulShape s;
  s.batch = p.batch, s.M = p.M, s.N = p.N, s.K = p.K;
  s.trans_a = p.trans_a, s.trans_b = p.trans_b, s.accumulate = p.accumulate;
  s.stride_a = p.batch == 1 ? 0 : p.M * p.K;
  s.stride_b = p.batch == 1 || p.broadcast_b ? 0 : p.K * p.N;
  s.stride_out = p.M * p.N;
  return s;
}

// offset + n bf16 values uniform in [-1, 1] (the first offset: before a misaligned view's start).
inline std::vector<bf16> bf16_values(std::mt19937& rng, std::int64_t offset, std::int64_t n) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<bf16> v(static_cast<std::size_t>(offset + n));
  for (bf16& x : v) x = bf16(uniform(rng));
  return v;
}

// out[z, i, j] of a @ b (a and b as bf16_values made them, `offset` values before each) in
// float64, the products of the bf16 values: the reference the kernels are checked against.
inline double product(const std::vector<bf16>& a, const std::vector<bf16>& b, const Problem& p,
                      const kernels::MatmulShape& s, std::int64_t offset, std::int64_t z, std::int64_t i, std::int64_t j) {
  double sum = 0.0;
  for (std::int64_t k = 0; k < p.K; ++k) {
    const bf16 x = a[offset + z * s.stride_a + (p.trans_a ? k * p.M + i : i * p.K + k)];
    const bf16 y = b[offset + z * s.stride_b + (p.trans_b ? j * p.K + k : k * p.N + j)];
    sum += static_cast<double>(static_cast<float>(x)) * static_cast<double>(static_cast<float>(y));
  }
  return sum;
}

// Runs `gemm` on device buffers; returns the number of elements of out
// that differ from the float64 loop by more than 1e-5 (1 + |want|), or that changed past the
// end. `result`, if given, receives out as the kernel left it.
inline int wrong_elements(const Problem& p, std::mt19937& rng, GemmFn gemm,
                          std::vector<float>* result = nullptr) {
  const std::int64_t offset = p.misaligned ? 1 : 0;
  const kernels::MatmulShape s = shape_of(p);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::vector<bf16> a = bf16_values(rng, offset, p.batch * p.M * p.K);
  const std::vector<bf16> b = bf16_values(rng, offset, (s.stride_b ? p.batch : 1) * p.K * p.N);
  std::vector<float> out(static_cast<std::size_t>(offset + p.batch * p.M * p.N + 1));
  for (float& x : out) x = uniform(rng);
  const DeviceArray<bf16> a_device(a), b_device(b);
  DeviceArray<float> out_device(out);
  gemm(out_device.data + offset, a_device.data + offset, b_device.data + offset, s,
       gpu::emulator_runtime().stream());
  const std::vector<float> got = out_device.host();
  if (result) *result = got;

  int wrong = 0;
  for (std::int64_t z = 0; z < p.batch; ++z)
    for (std::int64_t i = 0; i < p.M; ++i)
      for (std::int64_t j = 0; j < p.N; ++j) {
        const double sum = product(a, b, p, s, offset, z, i, j);
        const std::int64_t at = offset + z * s.stride_out + i * p.N + j;
        const double want = p.accumulate ? out[at] + sum : sum;
        if (std::abs(got[at] - want) > 1e-5 * (1.0 + std::abs(want)) && wrong++ < 3)
          MESSAGE("out[" << z << ", " << i << ", " << j << "] = " << got[at] << ", want " << want);
      }
  const std::size_t last = out.size() - 1;
  if (got[last] != out[last] || (offset && got[0] != out[0])) {
    MESSAGE("an element outside out changed");
    ++wrong;
  }
  return wrong;
}

}  // namespace brrr::test
