// tests/emulator/test_conformance.cpp: the conformance set (lab/conformance.h) on the emulator,
// each case's output word for word against a CPU reference written here from the PTX ISA: mma
// and wgmma as D = A B + C at each logical position (small integers: exact; rounding inputs: the
// tensor cores' sum as simt_tensor_cores.cpp models it, cut toward zero per block of 8
// products, which the H100 showed), ldmatrix's fragments, cp.async's zero fill, TMA boxes with
// their swizzle and edges, the mbarrier's phases. A GPU run (`brrr conformance`, scripts/gpu.sh)
// compares the same outputs with the chip's. Chapter 21 (Hopper).
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "lab/conformance.h"
#include "tests/emulator/emulator_test_util.h"

namespace {

using brrr::kernels::ConformanceCase;
using brrr::kernels::ConformanceKind;
using brrr::kernels::kTmaBoxRows;
using brrr::kernels::kTmaColumns;
using brrr::kernels::kTmaRows;

float as_float(std::uint32_t w) { return std::bit_cast<float>(w); }
std::uint16_t half(const std::vector<std::uint32_t>& words, std::size_t i) {
  return static_cast<std::uint16_t>(words[i / 2] >> (16 * (i % 2)));
}
float bf16_value(std::uint16_t bits) { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

// x toward zero to float32.
float toward_zero(double x) {
  float f = static_cast<float>(x);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

// The tensor cores' sum of c and 16 exact products, in blocks of 8: each block's addends (the
// running sum first) are cut, toward zero, to multiples of the last of the 24 bits of the
// largest of them, summed exactly, and the sum cut toward zero to float32.
float tensor_core_model(float c, const double* products) {
  double sum = c;
  for (int block = 0; block < 2; ++block) {
    double largest = std::fabs(sum);
    for (int k = 8 * block; k < 8 * block + 8; ++k) largest = std::max(largest, std::fabs(products[k]));
    if (largest == 0) continue;
    int exponent;
    std::frexp(largest, &exponent);  // largest in [2^(exponent - 1), 2^exponent)
    const double unit = std::ldexp(1.0, exponent - 24);
    double next = std::trunc(sum / unit) * unit;
    for (int k = 8 * block; k < 8 * block + 8; ++k) next += std::trunc(products[k] / unit) * unit;
    sum = toward_zero(next);
  }
  return static_cast<float>(sum);
}

// D = A B + C for mma (16 x 8) and wgmma (64 x n): the words of D, row major.
std::vector<std::uint32_t> gemm_reference(const ConformanceCase& c, const std::vector<std::uint32_t>& in,
                                          int& rounded_differently) {
  const int rows = c.kind == ConformanceKind::kMma ? 16 : 64, n = c.kind == ConformanceKind::kMma ? 8 : c.n;
  const std::size_t b_at = static_cast<std::size_t>(rows * 16), c_at = static_cast<std::size_t>(rows * 16 + 16 * n) / 2;
  std::vector<std::uint32_t> d(static_cast<std::size_t>(rows * n));
  for (int m = 0; m < rows; ++m)
    for (int j = 0; j < n; ++j) {
      double products[16], exact = as_float(in[c_at + static_cast<std::size_t>(m * n + j)]);
      for (int k = 0; k < 16; ++k) {
        products[k] = static_cast<double>(bf16_value(half(in, static_cast<std::size_t>(m * 16 + k)))) *
                      bf16_value(half(in, b_at + static_cast<std::size_t>(k * n + j)));
        exact += products[k];
      }
      const float model = tensor_core_model(as_float(in[c_at + static_cast<std::size_t>(m * n + j)]), products);
      if (!c.rounding) REQUIRE(static_cast<double>(static_cast<float>(exact)) == exact);  // small integers: exact
      rounded_differently += model != static_cast<float>(exact) ? 1 : 0;
      d[static_cast<std::size_t>(m * n + j)] = std::bit_cast<std::uint32_t>(c.rounding ? model : static_cast<float>(exact));
    }
  return d;
}

// ldmatrix: lane l's register j is matrix j's row l / 4, values 2 (l % 4) and the next; with
// .trans, its column l / 4, rows 2 (l % 4) and the next (the first in the low half).
std::vector<std::uint32_t> ldmatrix_reference(const ConformanceCase& c, const std::vector<std::uint32_t>& in) {
  std::vector<std::uint32_t> out;
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < c.count; ++j) {
      const auto at = [&](int row, int column) { return half(in, static_cast<std::size_t>(64 * j + 8 * row + column)); };
      const int g = lane / 4, t = lane % 4;
      const std::uint32_t lo = c.trans ? at(2 * t, g) : at(g, 2 * t), hi = c.trans ? at(2 * t + 1, g) : at(g, 2 * t + 1);
      out.push_back(lo | hi << 16);
    }
  return out;
}

// cp.async: lane l's 16-byte slot: src_bytes from its source, zeros to `bytes`, then 0x5A.
std::vector<std::uint32_t> cp_async_reference(const ConformanceCase& c, const std::vector<std::uint32_t>& in) {
  std::vector<std::uint32_t> out(128);
  for (int byte = 0; byte < 512; ++byte) {
    const int within = byte % 16;
    const std::uint32_t value = within < c.src_bytes ? (in[static_cast<std::size_t>(byte / 4)] >> (8 * (byte % 4)) & 0xFF)
                                : within < c.bytes   ? 0u
                                                     : 0x5Au;
    out[static_cast<std::size_t>(byte / 4)] |= value << (8 * (byte % 4));
  }
  return out;
}

std::uint32_t tensor_at(const std::vector<std::uint32_t>& in, std::size_t at, int row, int column) {
  if (row < 0 || row >= kTmaRows || column < 0 || column >= kTmaColumns) return 0;  // past the edge: zero
  return in[at + static_cast<std::size_t>(row * kTmaColumns + column)];
}

// A TMA load's box as shared memory holds it: row-major, and with a swizzle of S bytes the
// 16-byte chunk bits (4 ..) of each byte offset XORed with its 128-byte line's (7 ..), S / 16 - 1 of them.
std::vector<std::uint32_t> tma_load_reference(const ConformanceCase& c, const std::vector<std::uint32_t>& in) {
  const int columns = brrr::kernels::conformance_box_columns(c);
  const unsigned mask = c.swizzle == 0 ? 0 : static_cast<unsigned>(columns * 4 / 16 - 1);
  std::vector<std::uint32_t> out(static_cast<std::size_t>(columns * kTmaBoxRows));
  for (int r = 0; r < kTmaBoxRows; ++r)
    for (int col = 0; col < columns; ++col) {
      const unsigned offset = static_cast<unsigned>((r * columns + col) * 4);
      const unsigned placed = offset ^ (((offset >> 7) & mask) << 4);
      out[placed / 4] = tensor_at(in, 0, c.y + r, c.x + col);
    }
  return out;
}

std::vector<std::uint32_t> reference(const ConformanceCase& c, const std::vector<std::uint32_t>& in,
                                     int& rounded_differently) {
  const std::size_t tensor = static_cast<std::size_t>(kTmaColumns * kTmaRows);
  switch (c.kind) {
    case ConformanceKind::kMma:
    case ConformanceKind::kWgmma: return gemm_reference(c, in, rounded_differently);
    case ConformanceKind::kLdmatrix: return ldmatrix_reference(c, in);
    case ConformanceKind::kCpAsync: return cp_async_reference(c, in);
    case ConformanceKind::kTmaLoad: return tma_load_reference(c, in);
    case ConformanceKind::kTmaStore: {
      std::vector<std::uint32_t> out(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(tensor));
      for (int r = 0; r < kTmaBoxRows; ++r)
        for (int col = 0; col < 32; ++col) {
          const int row = c.y + r, column = c.x + col;
          if (row >= 0 && row < kTmaRows && column >= 0 && column < kTmaColumns)
            out[static_cast<std::size_t>(row * kTmaColumns + column)] = in[tensor + static_cast<std::size_t>(r * 32 + col)];
        }
      return out;
    }
    case ConformanceKind::kMbarrier: {
      std::vector<std::uint32_t> out;
      for (int p = 0; p < 4; ++p)
        for (int t = 0; t < 64; ++t) out.push_back(in[static_cast<std::size_t>(p * 64 + (t + p + 1) % 64)]);
      for (int i = 0; i < 32 * kTmaBoxRows; ++i) out.push_back(tensor_at(in, 4 * 64, 3 + i / 32, 2 + i % 32));
      return out;
    }
  }
  return {};
}

}  // namespace

TEST_CASE("conformance: every case on the emulator gives the PTX ISA's bits, rounding cases the tensor cores' cut") {
  int rounding_cases = 0;
  for (const ConformanceCase& c : brrr::lab::conformance_cases()) {
    CAPTURE(std::string(c.name));
    const std::vector<std::uint32_t> in = brrr::lab::conformance_inputs(c);
    int rounded_differently = 0;
    const std::vector<std::uint32_t> expected = reference(c, in, rounded_differently);
    const std::vector<std::uint32_t> got = brrr::lab::run_conformance(c, false);
    REQUIRE(got.size() == expected.size());
    int wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i] != expected[i] && wrong++ < 4) MESSAGE("word " << i << ": " << got[i] << ", expected " << expected[i]);
    CHECK(wrong == 0);
    if (c.rounding) {
      // The inputs do expose the rounding: the model and float32's nearest differ somewhere.
      CHECK(rounded_differently > 0);
      ++rounding_cases;
    }
  }
  CHECK(rounding_cases == 2);
}

TEST_CASE("conformance: the set covers each instruction form, and a GPU's run is an error without one") {
  int forms[7] = {};
  for (const ConformanceCase& c : brrr::lab::conformance_cases()) ++forms[static_cast<int>(c.kind)];
  for (int n : forms) CHECK(n > 0);
  if (brrr::gpu::cuda_runtime() == nullptr)
    CHECK(brrr::test::contains(brrr::test::error_of([] { brrr::lab::run_conformance(brrr::lab::conformance_cases()[0], true); }),
                               "no GPU here"));
}
