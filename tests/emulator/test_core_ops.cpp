// tests/emulator/test_core_ops.cpp: the "simple" CUDA kernels of kernels/cuda/elementwise.cu,
// reduce.cu and nn.cu, run on the emulator, against the CPU reference kernels
// (kernels/cpu/) on the same random inputs. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/elementwise.cu. Read next: tests/emulator/test_device_ops.cpp.
//
// Sizes stay small (the emulator runs every CUDA thread as a fiber) but cover what kernels get
// wrong: n = 0, n not a multiple of 4 (the Pack tail) or 32, pointers that are not 16-byte
// aligned, broadcasting and non-contiguous Loops up to kMaxDims dims, reductions long enough
// to be split, ties and NaNs in max, fully masked softmax rows. Exact ops (add, copy, cast,
// uniform, embedding, ...) must match the CPU to the bit; transcendental ones within a few ulp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "brrr/error.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/nn.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/simt.h"

namespace emu = brrr::kernels::emu;
namespace cpu = brrr::kernels::cpu;
using brrr::kernels::Loop;
using brrr::kernels::kMaxDims;

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937& rng, double lo = -2.0, double hi = 2.0) {
  std::vector<T> values(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (T& v : values) v = static_cast<T>(dist(rng));
  } else {
    std::uniform_int_distribution<std::int64_t> dist(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi));
    for (T& v : values) v = static_cast<T>(dist(rng));
  }
  return values;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// The largest |got - want| / max(|want|, floor), with NaN matching NaN and inf matching inf.
template <class T>
double max_error(const std::vector<T>& got, const std::vector<T>& want, double floor = 1.0) {
  REQUIRE(got.size() == want.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (std::isnan(g) || std::isnan(w)) {
      if (std::isnan(g) != std::isnan(w)) return INFINITY;
      continue;
    }
    if (std::isinf(g) || std::isinf(w)) {
      if (g != w) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::fabs(g - w) / std::max(std::fabs(w), floor));
  }
  return worst;
}

// A few ulp of T: the tolerance for exp, log, tanh, pow, ... (CUDA's and glibc's differ).
template <class T>
constexpr double ulps(int n) {
  return n * static_cast<double>(std::numeric_limits<T>::epsilon());
}

template <class T>
std::string type_name() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else return "int64";
}

// ---------------------------------------------------------------------------------------------
// Loops: the strided shapes the ops hand to copy and the binary kernels

struct LoopCase {
  std::string name;
  Loop loop;
};

Loop make_loop(const std::vector<std::int64_t>& sizes, const std::vector<std::vector<std::int64_t>>& strides) {
  Loop loop;
  loop.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < loop.ndim; ++d) {
    loop.size[d] = sizes[d];
    for (std::size_t k = 0; k < strides.size(); ++k) loop.stride[k][d] = strides[k][d];
  }
  return loop;
}

// Row-major strides of sizes, and the column-major (fully transposed) ones.
std::vector<std::int64_t> row_major(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> s(sizes.size());
  std::int64_t step = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    s[d] = step;
    step *= sizes[d];
  }
  return s;
}
std::vector<std::int64_t> column_major(const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> s(sizes.size());
  std::int64_t step = 1;
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    s[d] = step;
    step *= sizes[d];
  }
  return s;
}

// Elements operand k spans: 1 + the largest offset (0 for an empty loop).
std::size_t extent(const Loop& loop, int k) {
  std::int64_t last = 0;
  for (int d = 0; d < loop.ndim; ++d) {
    if (loop.size[d] == 0) return 0;
    last += (loop.size[d] - 1) * loop.stride[k][d];
  }
  return static_cast<std::size_t>(last + 1);
}

// Every operand's strides are given; operand 0 (the output) never overlaps itself.
std::vector<LoopCase> loop_cases() {
  std::vector<LoopCase> cases;
  for (std::int64_t n : {0, 1, 3, 4, 5, 31, 1000, 4099}) cases.push_back({"flat " + std::to_string(n), make_loop({n}, {{1}, {1}, {1}})});
  cases.push_back({"b is a scalar", make_loop({1001}, {{1}, {1}, {0}})});
  cases.push_back({"a is a scalar", make_loop({77}, {{1}, {0}, {1}})});
  cases.push_back({"b is a row (7, 33) + (33)", make_loop({7, 33}, {{33, 1}, {33, 1}, {0, 1}})});
  cases.push_back({"b is a column (7, 33) + (7, 1)", make_loop({7, 33}, {{33, 1}, {33, 1}, {1, 0}})});
  cases.push_back({"outer product (9, 1) + (1, 13)", make_loop({9, 13}, {{13, 1}, {1, 0}, {0, 1}})});
  cases.push_back({"a transposed (6, 35)", make_loop({6, 35}, {{35, 1}, {1, 6}, {35, 1}})});
  cases.push_back({"out transposed (6, 35)", make_loop({6, 35}, {{1, 6}, {35, 1}, {35, 1}})});
  cases.push_back({"every other element (3, 4, 5)", make_loop({3, 4, 5}, {{20, 5, 1}, {40, 10, 2}, {20, 5, 1}})});
  cases.push_back({"empty (5, 0)", make_loop({5, 0}, {{0, 1}, {0, 1}, {0, 1}})});
  const std::vector<std::int64_t> sizes = {2, 3, 2, 2, 3, 2, 2, 3};  // kMaxDims dims
  REQUIRE(static_cast<int>(sizes.size()) == kMaxDims);
  std::vector<std::int64_t> b = row_major(sizes);
  b[1] = b[4] = b[6] = 0;  // broadcast over three dims
  cases.push_back({"8 dims, a transposed, b broadcast", make_loop(sizes, {row_major(sizes), column_major(sizes), b})});
  return cases;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// fill, copy, cast

TEST_CASE("core ops: fill matches the CPU for every dtype, ragged n, misaligned, nothing written outside") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  const auto check = []<class T>() {
    for (std::int64_t n : {0, 1, 3, 4, 5, 33, 1000, 4097}) {
      for (int offset : {0, 1}) {
        CAPTURE(type_name<T>());
        CAPTURE(n);
        CAPTURE(offset);
        std::vector<T> got(n + 2, T(7)), want(n + 2, T(7));
        emu::fill_simple<T>(got.data() + offset, T(-3), n, nullptr);
        cpu::fill<T>(want.data() + offset, T(-3), n, nullptr);
        CHECK(same_bits(got, want));
      }
    }
  };
  check.operator()<float>();
  check.operator()<double>();
  check.operator()<std::int32_t>();
  check.operator()<std::int64_t>();
}

TEST_CASE("core ops: copy over contiguous, strided, broadcast and 8-dim Loops matches the CPU for every dtype") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  std::mt19937 rng(11);
  const auto check = [&]<class T>() {
    for (const LoopCase& c : loop_cases()) {
      for (int offset : {0, 1}) {
        CAPTURE(type_name<T>());
        CAPTURE(c.name);
        CAPTURE(offset);
        const std::vector<T> in = random_values<T>(extent(c.loop, 1) + 1, rng, -1000, 1000);
        std::vector<T> got(extent(c.loop, 0) + 1, T(5)), want = got;
        emu::copy_simple<T>(got.data() + offset, in.data() + offset, c.loop, nullptr);
        cpu::copy<T>(want.data() + offset, in.data() + offset, c.loop, nullptr);
        CHECK(same_bits(got, want));
      }
    }
  };
  check.operator()<float>();
  check.operator()<double>();
  check.operator()<std::int32_t>();
  check.operator()<std::int64_t>();
}

TEST_CASE("core ops: cast between every pair of float32, float64, int32, int64, bfloat16 matches the CPU to the bit") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  using brrr::DType;
  std::mt19937 rng(12);
  const std::int64_t n = 1003;
  // Values every type can hold, with fractions (truncation toward zero) and negatives.
  const std::vector<double> source = random_values<double>(n, rng, -1e6, 1e6);
  std::vector<std::vector<unsigned char>> inputs;
  const DType dtypes[] = {brrr::kFloat32, brrr::kFloat64, brrr::kInt32, brrr::kInt64, brrr::kBFloat16};
  for (DType dt : dtypes) {
    std::vector<unsigned char> bytes(n * brrr::dtype_size(dt));
    cpu::cast(bytes.data(), dt, source.data(), brrr::kFloat64, n, nullptr);
    inputs.push_back(bytes);
  }
  for (int i = 0; i < 5; ++i) {
    for (int o = 0; o < 5; ++o) {
      CAPTURE(brrr::dtype_name(dtypes[i]));
      CAPTURE(brrr::dtype_name(dtypes[o]));
      std::vector<unsigned char> got(n * brrr::dtype_size(dtypes[o]), 0xAB), want = got;
      emu::cast_simple(got.data(), dtypes[o], inputs[i].data(), dtypes[i], n, nullptr);
      cpu::cast(want.data(), dtypes[o], inputs[i].data(), dtypes[i], n, nullptr);
      CHECK(got == want);
      std::vector<unsigned char> untouched(got.size(), 0xAB), empty = untouched;
      emu::cast_simple(empty.data(), dtypes[o], inputs[i].data(), dtypes[i], 0, nullptr);
      CHECK(empty == untouched);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// random numbers: the same Philox stream as the CPU

TEST_CASE("core ops: uniform and dropout_mask match the CPU to the bit, normal within a few ulp") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  const auto check = []<class T>() {
    for (std::uint64_t seed : {1337ull, 0xDEADBEEFCAFEull}) {
      for (std::uint64_t counter : {0ull, 12345ull, (1ull << 32) + 7}) {  // the counter's high word too
        for (std::int64_t n : {0, 1, 3, 5, 8, 1001}) {
          CAPTURE(type_name<T>());
          CAPTURE(seed);
          CAPTURE(counter);
          CAPTURE(n);
          std::vector<T> got(n + 1, T(9)), want = got;
          emu::uniform_simple<T>(got.data(), n, seed, counter, nullptr);
          cpu::uniform<T>(want.data(), n, seed, counter, nullptr);
          CHECK(same_bits(got, want));

          emu::normal_simple<T>(got.data(), n, seed, counter, nullptr);
          cpu::normal<T>(want.data(), n, seed, counter, nullptr);
          CHECK(max_error(got, want) <= ulps<T>(4));

          for (T p : {T(0.1), T(0.5)}) {
            emu::dropout_mask_simple<T>(got.data(), n, p, seed, counter, nullptr);
            cpu::dropout_mask<T>(want.data(), n, p, seed, counter, nullptr);
            CHECK(same_bits(got, want));
          }
        }
      }
    }
  };
  check.operator()<float>();
  check.operator()<double>();
}

// ---------------------------------------------------------------------------------------------
// unary ops

namespace {

template <class T>
using UnaryFn = std::function<void(T*, const T*, std::int64_t)>;

// Runs both kernels on the same inputs in [lo, hi], aligned and not, for ragged n.
template <class T>
void check_unary(const std::string& op, const UnaryFn<T>& gpu, const UnaryFn<T>& reference, double lo, double hi,
                 double tolerance, std::mt19937& rng) {
  for (std::int64_t n : {0, 1, 3, 4, 7, 1000, 4103}) {
    for (int offset : {0, 1}) {
      CAPTURE(op);
      CAPTURE(type_name<T>());
      CAPTURE(n);
      CAPTURE(offset);
      const std::vector<T> x = random_values<T>(n + 1, rng, lo, hi);
      std::vector<T> got(n + 1, T(123)), want = got;
      gpu(got.data() + offset, x.data() + offset, n);
      reference(want.data() + offset, x.data() + offset, n);
      if (tolerance == 0) CHECK(same_bits(got, want));
      else CHECK(max_error(got, want) <= tolerance);
    }
  }
}

template <class T>
void check_all_unary() {
  std::mt19937 rng(21);
#define BRRR_UNARY(op, lo, hi, ulp)                                                                      \
  check_unary<T>(                                                                                        \
      #op, [](T* o, const T* x, std::int64_t n) { emu::op##_simple<T>(o, x, n, nullptr); },             \
      [](T* o, const T* x, std::int64_t n) { cpu::op<T>(o, x, n, nullptr); }, lo, hi, ulps<T>(ulp), rng)
  BRRR_UNARY(neg, -5, 5, 0);
  BRRR_UNARY(exp, -20, 20, 4);
  BRRR_UNARY(log, 1e-3, 100, 4);
  BRRR_UNARY(sqrt, 0, 100, 0);
  BRRR_UNARY(tanh, -6, 6, 4);
  BRRR_UNARY(relu, -5, 5, 0);
  BRRR_UNARY(sigmoid, -20, 20, 4);
#undef BRRR_UNARY
  for (double exponent : {2.0, 3.0, 0.5, -1.5}) {
    const T e = static_cast<T>(exponent);
    check_unary<T>(
        "pow_scalar " + std::to_string(exponent),
        [e](T* o, const T* x, std::int64_t n) { emu::pow_scalar_simple<T>(o, x, e, n, nullptr); },
        [e](T* o, const T* x, std::int64_t n) { cpu::pow_scalar<T>(o, x, e, n, nullptr); }, 0.1, 10,
        exponent == 2.0 ? 0.0 : ulps<T>(4), rng);
  }
  // relu_backward: dx = dout where x > 0.
  for (std::int64_t n : {0, 1, 5, 4100}) {
    for (int offset : {0, 1}) {
      CAPTURE(n);
      CAPTURE(offset);
      const std::vector<T> g = random_values<T>(n + 1, rng), x = random_values<T>(n + 1, rng);
      std::vector<T> got(n + 1, T(4)), want = got;
      emu::relu_backward_simple<T>(got.data() + offset, g.data() + offset, x.data() + offset, n, nullptr);
      cpu::relu_backward<T>(want.data() + offset, g.data() + offset, x.data() + offset, n, nullptr);
      CHECK(same_bits(got, want));
    }
  }
}

}  // namespace

TEST_CASE("core ops: neg exp log sqrt tanh relu sigmoid pow_scalar relu_backward match the CPU, float32") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_all_unary<float>();
}

TEST_CASE("core ops: neg exp log sqrt tanh relu sigmoid pow_scalar relu_backward match the CPU, float64") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_all_unary<double>();
}

// ---------------------------------------------------------------------------------------------
// binary ops with broadcasting

namespace {

template <class T>
void check_all_binary() {
  std::mt19937 rng(31);
  using BinaryFn = void (*)(T*, const T*, const T*, const Loop&, brrr::kernels::Stream);
  struct Op {
    const char* name;
    BinaryFn gpu, reference;
  };
  const Op ops[] = {{"add", &emu::add_simple<T>, &cpu::add<T>},
                    {"sub", &emu::sub_simple<T>, &cpu::sub<T>},
                    {"mul", &emu::mul_simple<T>, &cpu::mul<T>},
                    {"div", &emu::div_simple<T>, &cpu::div<T>}};
  for (const LoopCase& c : loop_cases()) {
    for (int offset : {0, 1}) {
      CAPTURE(type_name<T>());
      CAPTURE(c.name);
      CAPTURE(offset);
      const std::vector<T> a = random_values<T>(extent(c.loop, 1) + 1, rng);
      const std::vector<T> b = random_values<T>(extent(c.loop, 2) + 1, rng, 0.5, 3.0);  // no division by ~0
      for (const Op& op : ops) {
        CAPTURE(op.name);
        std::vector<T> got(extent(c.loop, 0) + 1, T(-8)), want = got;
        op.gpu(got.data() + offset, a.data() + offset, b.data() + offset, c.loop, nullptr);
        op.reference(want.data() + offset, a.data() + offset, b.data() + offset, c.loop, nullptr);
        CHECK(same_bits(got, want));  // +, -, *, / are exact IEEE operations on both
      }
      // masked_fill: the mask is 0 or 1, broadcast like b.
      std::vector<T> mask(b.size());
      for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = (rng() % 3 == 0) ? T(1) : T(0);
      std::vector<T> got(extent(c.loop, 0) + 1, T(-8)), want = got;
      emu::masked_fill_simple<T>(got.data() + offset, a.data() + offset, mask.data() + offset, T(-1e9), c.loop,
                                 nullptr);
      cpu::masked_fill<T>(want.data() + offset, a.data() + offset, mask.data() + offset, T(-1e9), c.loop, nullptr);
      CHECK(same_bits(got, want));
    }
  }
  // In place, as add_ does it: out is a.
  const Loop flat = make_loop({4099}, {{1}, {1}, {1}});
  std::vector<T> a = random_values<T>(4099, rng), b = random_values<T>(4099, rng), want(4099);
  cpu::add<T>(want.data(), a.data(), b.data(), flat, nullptr);
  emu::add_simple<T>(a.data(), a.data(), b.data(), flat, nullptr);
  CHECK(same_bits(a, want));
}

}  // namespace

TEST_CASE("core ops: add sub mul div masked_fill over broadcast and strided Loops match the CPU, float32") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_all_binary<float>();
}

TEST_CASE("core ops: add sub mul div masked_fill over broadcast and strided Loops match the CPU, float64") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_all_binary<double>();
}

// ---------------------------------------------------------------------------------------------
// reductions over (outer, R, inner)

namespace {

struct Reduction {
  std::int64_t outer, R, inner;
};

// Rows and tiles, tiny and ragged, and long enough to be split into chunks (R > 8192 for
// rows, R > 256 for column tiles).
const Reduction kReductions[] = {{1, 1, 1},   {0, 5, 3},     {3, 0, 1},  {3, 0, 4},   {5, 7, 1},   {4, 1000, 1},
                                 {1, 20000, 1}, {2, 9000, 1}, {3, 5, 37}, {2, 600, 33}, {1, 1, 5}, {7, 3, 64},
                                 {1, 700, 2},  {2, 33, 100},
                                 // More rows than the emulator's 8 blocks, 4 warps a row: a block
                                 // takes a second row while its warp 0 may still read the first's
                                 // partials (the barrier before they are overwritten).
                                 {20, 100, 1}};

template <class T>
void check_sum_dim() {
  std::mt19937 rng(41);
  for (const Reduction& r : kReductions) {
    CAPTURE(type_name<T>());
    CAPTURE(r.outer);
    CAPTURE(r.R);
    CAPTURE(r.inner);
    const std::vector<T> in = random_values<T>(r.outer * r.R * r.inner, rng);
    std::vector<T> got(r.outer * r.inner + 1, T(6)), want = got;
    emu::sum_dim_simple<T>(got.data(), in.data(), r.outer, r.R, r.inner, nullptr);
    cpu::sum_dim<T>(want.data(), in.data(), r.outer, r.R, r.inner, nullptr);
    // Both add in double, in different orders: float results agree to float's rounding;
    // double ones to double's rounding error of a sum of R values (~R eps relative to sum |x|).
    CHECK(max_error(got, want) <= (sizeof(T) == 4 ? ulps<T>(2) : 1e-12));
    CHECK(got.back() == T(6));
    // The same call again gives the same bits (fixed order, no atomics).
    std::vector<T> again(got.size(), T(6));
    emu::sum_dim_simple<T>(again.data(), in.data(), r.outer, r.R, r.inner, nullptr);
    CHECK(same_bits(got, again));
  }
}

template <class T>
void check_max_dim() {
  std::mt19937 rng(42);
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (const Reduction& r : kReductions) {
    if (r.R == 0) continue;  // no max of nothing (the op rejects it first)
    for (int kind = 0; kind < 3; ++kind) {  // 0: random, 1: many ties, 2: ties, NaNs and -inf
      CAPTURE(type_name<T>());
      CAPTURE(r.outer);
      CAPTURE(r.R);
      CAPTURE(r.inner);
      CAPTURE(kind);
      std::vector<T> in = random_values<T>(r.outer * r.R * r.inner, rng);
      if (kind > 0)
        for (T& v : in) v = static_cast<T>(static_cast<int>(rng() % 4)) - T(2);  // -2, -1, 0, 1
      if (kind == 2)
        for (T& v : in) {
          const unsigned pick = rng() % 50;
          if (pick == 0) v = nan;
          else if (pick < 5) v = -inf;
        }
      const std::size_t outputs = r.outer * r.inner;
      std::vector<T> got(outputs, T(6)), want(outputs, T(6));
      std::vector<std::int64_t> got_index(outputs, -1), want_index(outputs, -1);
      emu::max_dim_simple<T>(got.data(), got_index.data(), in.data(), r.outer, r.R, r.inner, nullptr);
      cpu::max_dim<T>(want.data(), want_index.data(), in.data(), r.outer, r.R, r.inner, nullptr);
      CHECK(max_error(got, want) == 0.0);
      CHECK(got_index == want_index);  // the first maximum, the first NaN
      std::vector<T> values_only(outputs, T(6));
      emu::max_dim_simple<T>(values_only.data(), nullptr, in.data(), r.outer, r.R, r.inner, nullptr);
      CHECK(max_error(values_only, want) == 0.0);
    }
  }
  std::vector<T> out(3);
  CHECK_THROWS_WITH_AS(emu::max_dim_simple<T>(out.data(), nullptr, out.data(), 3, 0, 1, nullptr),
                       "max_dim: cannot take the max over 0 elements (outer, R, inner) = (3, 0, 1)", brrr::Error);
}

template <class T>
void check_max_dim_backward() {
  std::mt19937 rng(43);
  for (const Reduction& r : kReductions) {
    if (r.R == 0) continue;
    CAPTURE(type_name<T>());
    CAPTURE(r.outer);
    CAPTURE(r.R);
    CAPTURE(r.inner);
    const std::size_t outputs = r.outer * r.inner;
    const std::vector<T> dout = random_values<T>(outputs, rng);
    std::vector<std::int64_t> index(outputs);
    for (std::int64_t& i : index) i = static_cast<std::int64_t>(rng() % r.R);
    std::vector<T> got(r.outer * r.R * r.inner + 1, T(3)), want = got;
    emu::max_dim_backward_simple<T>(got.data(), dout.data(), index.data(), r.outer, r.R, r.inner, nullptr);
    cpu::max_dim_backward<T>(want.data(), dout.data(), index.data(), r.outer, r.R, r.inner, nullptr);
    CHECK(same_bits(got, want));
  }
}

}  // namespace

TEST_CASE("core ops: sum_dim over rows, column tiles and split long reductions matches the CPU, deterministic") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_sum_dim<float>();
  check_sum_dim<double>();
}

TEST_CASE("core ops: max_dim picks the CPU's index on ties, NaNs and -inf, rows and column tiles") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_max_dim<float>();
  check_max_dim<double>();
}

TEST_CASE("core ops: max_dim_backward scatters dout to the max's index and zeros the rest") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_max_dim_backward<float>();
  check_max_dim_backward<double>();
}

// ---------------------------------------------------------------------------------------------
// embedding, softmax, log_softmax

namespace {

template <class T>
void check_embedding() {
  std::mt19937 rng(51);
  const std::int64_t V = 50;
  for (std::int64_t C : {1, 3, 4, 37, 300}) {
    for (std::int64_t N : {0, 1, 17, 300}) {
      for (int offset : {0, 1}) {
        CAPTURE(type_name<T>());
        CAPTURE(C);
        CAPTURE(N);
        CAPTURE(offset);
        const std::vector<T> weight = random_values<T>(V * C + 1, rng);
        std::vector<std::int32_t> idx(N);
        for (std::int32_t& i : idx) i = static_cast<std::int32_t>(rng() % 8 == 0 ? 7 : rng() % V);  // 7 repeats
        std::vector<T> got(N * C + 1, T(2)), want = got;
        emu::embedding_forward_simple<T>(got.data() + offset, weight.data() + offset, idx.data(), N, C, nullptr);
        cpu::embedding_forward<T>(want.data() + offset, weight.data() + offset, idx.data(), N, C, nullptr);
        CHECK(same_bits(got, want));

        // backward adds into dweight (not zero here, to see that it adds), in row order.
        if (offset) continue;  // (alignment does not matter to it, and the emulator is slow)
        const std::vector<T> dout = random_values<T>(N * C, rng);
        std::vector<T> dw_got = random_values<T>(V * C, rng), dw_want = dw_got;
        emu::embedding_backward_simple<T>(dw_got.data(), dout.data(), idx.data(), N, V, C, nullptr);
        cpu::embedding_backward<T>(dw_want.data(), dout.data(), idx.data(), N, V, C, nullptr);
        CHECK(same_bits(dw_got, dw_want));
      }
    }
  }
}

// Rows with large values (stability), -inf entries (a causal mask), one fully masked row and
// one with a NaN.
template <class T>
std::vector<T> softmax_input(std::int64_t N, std::int64_t C, std::mt19937& rng) {
  std::vector<T> x = random_values<T>(N * C, rng, -5, 5);
  for (std::int64_t n = 0; n < N; ++n) {
    T* row = x.data() + n * C;
    if (n % 4 == 1)
      for (std::int64_t c = 0; c < C; ++c) row[c] += T(1000);
    if (n % 4 == 2)
      for (std::int64_t c = n % 3 + 1; c < C; ++c) row[c] = -std::numeric_limits<T>::infinity();
  }
  if (N > 5) {
    for (std::int64_t c = 0; c < C; ++c) x[3 * C + c] = -std::numeric_limits<T>::infinity();
    x[5 * C + C / 2] = std::numeric_limits<T>::quiet_NaN();
  }
  return x;
}

template <class T>
void check_softmax() {
  std::mt19937 rng(52);
  using RowFn = void (*)(T*, const T*, std::int64_t, std::int64_t, brrr::kernels::Stream);
  using RowBackFn = void (*)(T*, const T*, const T*, std::int64_t, std::int64_t, brrr::kernels::Stream);
  struct Op {
    const char* name;
    RowFn gpu, reference;
    RowBackFn gpu_back, reference_back;
  };
  const Op ops[] = {{"softmax", &emu::softmax_forward_simple<T>, &cpu::softmax_forward<T>,
                     &emu::softmax_backward_simple<T>, &cpu::softmax_backward<T>},
                    {"log_softmax", &emu::log_softmax_forward_simple<T>, &cpu::log_softmax_forward<T>,
                     &emu::log_softmax_backward_simple<T>, &cpu::log_softmax_backward<T>}};
  struct Shape {
    std::int64_t N, C;
  };
  for (const Shape s : {Shape{0, 5}, Shape{3, 0}, Shape{1, 1}, Shape{7, 3}, Shape{9, 32}, Shape{6, 33},
                        Shape{8, 100}, Shape{5, 1000}, Shape{2, 2050}}) {
    for (const Op& op : ops) {
      CAPTURE(type_name<T>());
      CAPTURE(op.name);
      CAPTURE(s.N);
      CAPTURE(s.C);
      const std::vector<T> x = softmax_input<T>(s.N, s.C, rng);
      std::vector<T> got(s.N * s.C, T(1)), want = got;
      op.gpu(got.data(), x.data(), s.N, s.C, nullptr);
      op.reference(want.data(), x.data(), s.N, s.C, nullptr);
      CHECK(max_error(got, want) <= ulps<T>(8));

      // The backward takes the forward's output; use the CPU's, so only the backward differs.
      // Rows of the forward that came out NaN or -inf give NaN here on both sides.
      const std::vector<T> dout = random_values<T>(s.N * s.C, rng);
      std::vector<T> dx_got(s.N * s.C, T(1)), dx_want = dx_got;
      op.gpu_back(dx_got.data(), dout.data(), want.data(), s.N, s.C, nullptr);
      op.reference_back(dx_want.data(), dout.data(), want.data(), s.N, s.C, nullptr);
      CHECK(max_error(dx_got, dx_want) <= ulps<T>(8));
    }
  }
}

}  // namespace

TEST_CASE("core ops: embedding forward and backward match the CPU to the bit, repeated tokens, misaligned") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_embedding<float>();
  check_embedding<double>();
}

TEST_CASE("core ops: softmax and log_softmax forward and backward match the CPU, masked and large rows") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_softmax<float>();
  check_softmax<double>();
}
