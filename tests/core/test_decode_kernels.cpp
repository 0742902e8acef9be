// tests/core/test_decode_kernels.cpp: the Decoder's kernels (kernels/cpu/rows/rows.h) on their own
// (chapter 08): linear_rows and attend_rows against float64 references on fresh random inputs at
// ragged shapes, and their batch invariance. Each has two ways to sum, dot-product tiles for a
// few rows and GEMM tiles for many (kernels/cpu/rows/gemm.cpp: linear_rows from kGemmThreshold rows
// of x, attend_rows from kGemmRows rows); the shapes here run both, and every row must be the
// same bits whichever ran it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "brrr/aligned_vector.h"
#include "brrr/bfloat16.h"
#include "brrr/parallel.h"
#include "kernels/cpu/rows/rows.h"
#include "tests/bf16_paths.h"

using brrr::kernels::cpu::Epilogue;
using brrr::kernels::cpu::linear_rows;
using brrr::kernels::cpu::row_max;
using brrr::kernels::cpu::softmax_total;
using i64 = std::int64_t;

namespace {

struct Case {
  i64 M, N, K;
  Epilogue e;
  bool bias, bf16;
};

// Fresh inputs for one case: x (M, K), W (N, K) as float32 and as bfloat16 bits, a bias, and
// the y that kAdd adds to.
struct Inputs {
  brrr::aligned_vector<float> x, w, b, y0;
  brrr::aligned_vector<std::uint16_t> w16;
  Inputs(const Case& c, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const auto fill = [&](brrr::aligned_vector<float>& v, i64 n) {
      v.resize(static_cast<std::size_t>(n));
      for (float& f : v) f = u(rng);
    };
    fill(x, c.M * c.K), fill(w, c.N * c.K), fill(b, c.N), fill(y0, c.M * c.N);
    w16.resize(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) {
      w16[i] = brrr::bf16::round_bits(w[i]);
      w[i] = brrr::round_to_bf16(w[i]);  // the reference sees the weights the kernel sees
    }
  }
  // y (M rows from row m0) = linear_rows over rows [m0, m0 + rows) of x.
  void run(const Case& c, float* y, i64 m0, i64 rows) const {
    const float* bias = c.bias ? b.data() : nullptr;
    if (c.bf16) linear_rows(y, x.data() + m0 * c.K, w16.data(), bias, rows, c.N, c.K, c.e);
    else linear_rows(y, x.data() + m0 * c.K, w.data(), bias, rows, c.N, c.K, c.e);
  }
};

double gelu_tanh(double v) { return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }
double gelu_erf(double v) { return 0.5 * v * std::erfc(-v / std::sqrt(2.0)); }

std::vector<Case> cases() {
  std::vector<Case> out;
  int i = 0;
  for (i64 M : {1, 2, 3, 5, 7, 8, 13, 32, 33, 47, 48, 53, 70})
    for (i64 N : {1, 7, 16, 17, 50})
      for (i64 K : {1, 5, 8, 13, 64, 100}) {
        const Epilogue e = static_cast<Epilogue>(i % 4);
        out.push_back({M, N, K, e, i % 3 != 0, i % 2 == 1});
        ++i;
      }
  // Long rows: the GEMM's blocks then hold 2 panels (K = 1544) or 1 (K = 3077) where the shapes
  // above hold 4, and 9 panels make several blocks with a short last one.
  for (i64 K : {1544, 3077})
    for (i64 N : {40, 137}) {
      out.push_back({50, N, K, static_cast<Epilogue>(i % 4), i % 3 != 0, i % 2 == 1});
      ++i;
    }
  return out;
}

}  // namespace

TEST_CASE("linear_rows: against a float64 reference at ragged shapes, every epilogue, float32 and bfloat16 weights") {
  brrr::test::for_each_bf16_path([](const char* path, bool amx) {
  std::mt19937 rng(20261127);
  for (const Case& c : cases()) {
    if (amx && !c.bf16) continue;  // float32 weights never take the tile unit
    INFO("M ", c.M, " N ", c.N, " K ", c.K, " epilogue ", static_cast<int>(c.e), " bias ", c.bias, " bf16 ", c.bf16,
         " path ", std::string(path));
    const Inputs in(c, rng);
    brrr::aligned_vector<float> y = in.y0;
    in.run(c, y.data(), 0, c.M);
    int bad = 0;
    for (i64 m = 0; m < c.M; ++m)
      for (i64 n = 0; n < c.N; ++n) {
        double sum = c.bias ? in.b[n] : 0.0, scale = std::abs(sum);
        for (i64 k = 0; k < c.K; ++k) {
          const double p = double(in.x[m * c.K + k]) * in.w[n * c.K + k];
          sum += p, scale += std::abs(p);
        }
        double ref = sum;
        if (c.e == Epilogue::kAdd) ref += in.y0[m * c.N + n], scale += std::abs(in.y0[m * c.N + n]);
        if (c.e == Epilogue::kGeluTanh) ref = gelu_tanh(sum);
        if (c.e == Epilogue::kGeluErf) ref = gelu_erf(sum);
        // float32 sums of K products: a few ulps of the sum of magnitudes (GELU's slope is < 1.2).
        // On the tile unit, x's split drops under 2^-17 of each x: inside the same bound.
        if (std::abs(y[m * c.N + n] - ref) > 1e-6 * (c.K + 4) * scale + 1e-6) ++bad;
      }
    CHECK(bad == 0);
  }
  });
}

TEST_CASE("linear_rows: each row the same bits alone or among M rows, on 1 or 2 threads (batch invariance)") {
  brrr::test::for_each_bf16_path([](const char* path, bool amx) {
  std::mt19937 rng(7);
  const int threads = brrr::get_num_threads();
  for (const Case& c : cases()) {
    if (amx && !c.bf16) continue;
    INFO("M ", c.M, " N ", c.N, " K ", c.K, " epilogue ", static_cast<int>(c.e), " bias ", c.bias, " bf16 ", c.bf16,
         " path ", std::string(path));
    const Inputs in(c, rng);
    brrr::aligned_vector<float> all = in.y0, alone = in.y0, one_thread = in.y0;
    brrr::set_num_threads(2);
    in.run(c, all.data(), 0, c.M);
    for (i64 m = 0; m < c.M; ++m) in.run(c, alone.data() + m * c.N, m, 1);
    brrr::set_num_threads(1);
    in.run(c, one_thread.data(), 0, c.M);
    brrr::set_num_threads(threads);
    CHECK(std::memcmp(all.data(), alone.data(), all.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(all.data(), one_thread.data(), all.size() * sizeof(float)) == 0);
  }
  });
}

namespace {

// Fresh queries, keys and values for n rows of one head after t0 cached positions; keys and
// values with row stride `stride` (a cache of C = stride numbers per position, this head at 0).
struct Attention {
  i64 t0, n, hs, stride;
  brrr::aligned_vector<float> q, keys, values;
  Attention(i64 t0_, i64 n_, i64 hs_, std::mt19937& rng) : t0(t0_), n(n_), hs(hs_), stride(hs_ + 3) {
    std::normal_distribution<float> g(0.0f, 1.0f);
    const auto fill = [&](brrr::aligned_vector<float>& v, i64 count) {
      v.resize(static_cast<std::size_t>(count));
      for (float& f : v) f = g(rng);
    };
    fill(q, n * hs), fill(keys, (t0 + n) * stride), fill(values, (t0 + n) * stride);
  }
};

}  // namespace

TEST_CASE("attend_rows: against a float64 softmax attention, and each row the same bits as attend_row alone") {
  std::mt19937 rng(11);
  for (i64 hs : {1, 5, 8, 13, 16, 24, 64, 70})
    for (i64 t0 : {0, 1, 17, 40})
      for (i64 n : {1, 2, 3, 5, 6, 7, 16, 21, 64}) {  // 64: kAttendGroup, a prefill's group
        INFO("hs ", hs, " t0 ", t0, " n ", n);
        const Attention a(t0, n, hs, rng);
        const i64 lds = t0 + n;
        std::vector<float> out(static_cast<std::size_t>(n * hs)), scores(static_cast<std::size_t>(n * lds));
        brrr::kernels::cpu::attend_rows(out.data(), hs, a.q.data(), hs, a.keys.data(), a.values.data(), t0, n, a.stride,
                                        hs, scores.data(), lds);
        int bad = 0, differ = 0;
        for (i64 i = 0; i < n; ++i) {
          const i64 t = t0 + i + 1;
          std::vector<double> w(static_cast<std::size_t>(t));
          double top = -1e300, total = 0;
          for (i64 p = 0; p < t; ++p) {
            double s = 0;
            for (i64 d = 0; d < hs; ++d) s += double(a.q[i * hs + d]) * a.keys[p * a.stride + d];
            w[p] = s / std::sqrt(double(hs)), top = std::max(top, w[p]);
          }
          for (double& v : w) v = std::exp(v - top), total += v;
          for (i64 d = 0; d < hs; ++d) {
            double ref = 0, scale = 0;
            for (i64 p = 0; p < t; ++p) {
              ref += w[p] / total * a.values[p * a.stride + d];
              scale += std::abs(w[p] / total * a.values[p * a.stride + d]);
            }
            if (std::abs(out[i * hs + d] - ref) > 1e-5 * (scale + 1.0)) ++bad;
          }
          // Alone: the row's query against its own positions, as a decoding step computes it.
          std::vector<float> alone(static_cast<std::size_t>(hs)), room(static_cast<std::size_t>(t));
          brrr::kernels::cpu::attend_row(alone.data(), a.q.data() + i * hs, a.keys.data(), a.values.data(), t,
                                         a.stride, hs, room.data());
          differ += std::memcmp(alone.data(), out.data() + i * hs, hs * sizeof(float)) != 0;
        }
        CHECK(bad == 0);
        CHECK(differ == 0);
      }
}

TEST_CASE("row_max and softmax_total: the largest number and the total of a row, at ragged lengths") {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 4.0f);
  CHECK(row_max(nullptr, 0) == -INFINITY);
  CHECK(softmax_total(nullptr, 0) == 0.0f);
  for (i64 n : {1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 1023}) {
    INFO("n ", n);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& f : v) f = g(rng);
    // The largest anywhere in the row, the lanes' maxima and the tail's alike.
    for (i64 at : {i64{0}, n / 2, n - 1}) {
      std::vector<float> w = v;
      w[static_cast<std::size_t>(at)] = 100.0f;
      CHECK(row_max(w.data(), n) == 100.0f);
    }
    float top = v[0];
    for (const float f : v) top = std::max(top, f);
    CHECK(row_max(v.data(), n) == top);
    double total = 0, scale = 0;
    for (float& f : v) f = std::exp(f - top), total += f, scale += std::abs(f);
    CHECK(std::abs(softmax_total(v.data(), n) - total) <= 1e-6 * double(n) * scale);
  }
}

// The team (kernels/cpu/rows/team.cpp) that the kernels share their blocks over. A helper that
// read the last job's word (every block claimed) and the next job's block count once claimed a
// block of the next job under the last job's word: that block ran twice, and its extra `done`
// let the caller return while a helper still ran (brrr eval --decoder segfaulted 1 run in 5 on
// a busy 2-core machine). Eight threads on fewer cores make such a late helper common; jobs of 2
// and 8 blocks alternate, for a second and a half. A race, so not every time: without the fix
// this failed 1 run in 6 on a busy 2-core machine (a loop like it with 32 threads crashed).
TEST_CASE("rows_parallel: each block runs once, within its call, with more threads than cores") {
  const int threads = brrr::get_num_threads();
  brrr::set_num_threads(8);
  std::atomic<int> runs[8];
  std::int64_t wrong = 0, jobs = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1500))
    for (int i = 0; i < 1000; ++i, ++jobs) {
      const std::int64_t n = jobs % 2 ? 8 : 2;
      for (std::atomic<int>& r : runs) r.store(0, std::memory_order_relaxed);
      brrr::kernels::cpu::rows_parallel(n, 1, [&](std::int64_t b, std::int64_t) { runs[b].fetch_add(1); });
      for (std::int64_t b = 0; b < n; ++b) wrong += runs[b].load() != 1;
    }
  brrr::set_num_threads(threads);
  INFO(jobs, " jobs");
  CHECK(wrong == 0);
}
