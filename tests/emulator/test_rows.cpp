// tests/emulator/test_rows.cpp: the row kernels of a decoding step on the GPU (chapter 20,
// kernels/cuda/rows/) on the emulator: linear_rows (a GEMV split over K), attend_cache
// (flash-decoding), append_cache and sample_rows against the kernel lab's references on ragged
// shapes, the two promises of the Decoder (a row's bits do not depend on the rows beside it; a
// prefill's rows give the bits of the same tokens decoded one at a time), clear errors for bad
// calls, and their memory traffic against the least the op must move. Read before: kernels/cuda/rows/rows.h.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <random>
#include <vector>

#include "brrr/bfloat16.h"
#include "brrr/cuda.h"
#include "brrr/strings.h"
#include "kernels/cuda/runtime.h"
#include "kernels/cuda/simt_counters.h"
#include "kernels/registry.h"
#include "lab/counters.h"
#include "lab/kernel_lab.h"
#include "tests/emulator/emulator_test_util.h"
#include "tests/skip.h"

using namespace brrr;
using brrr::test::DeviceArray;
using brrr::test::error_of;

namespace {

namespace op = kernels::op;

std::vector<float> random_floats(std::size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// The lab's checks and the counters run on the first schedule only, as test_lab_table.cpp's do:
// the other schedules (BRRR_EMULATOR_SEED 2 and 3) are for the race detector, which the
// invariance tests below give the same kernels under every schedule.
bool other_schedule() {
  const char* seed = std::getenv("BRRR_EMULATOR_SEED");
  return seed && std::string_view(seed) != "1";
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

kernels::Stream stream() { return gpu::emulator_runtime().stream(); }

// y (M, N) = x (M, K) W^T + b through linear_rows's CUDA kernel, on the emulator.
// variant: "split_k" (the GEMV), "tiled" (a prefill's) or "by_rows" (the default, either). y
// starts as `start` (what the "add" epilogue adds to), else zeros.
template <class W>
std::vector<float> linear_rows_on_device(const std::vector<float>& x, const std::vector<W>& w,
                                         const std::vector<float>& bias, std::int64_t M, std::int64_t N,
                                         std::int64_t K, int epilogue = 0, const char* variant = "split_k",
                                         const std::vector<float>& start = {}) {
  DeviceArray<float> dx(x), db(bias), dy(start.empty() ? std::vector<float>(static_cast<std::size_t>(M * N)) : start);
  DeviceArray<W> dw(w);
  if constexpr (std::is_same_v<W, float>)
    kernels::lookup_variant(op::linear_rows<float>, DeviceType::CUDA, variant)(dy.data, dx.data, dw.data, db.data, M,
                                                                               N, K, epilogue, stream());
  else
    kernels::lookup_variant(op::linear_rows_on_bf16, DeviceType::CUDA, variant)(dy.data, dx.data, dw.data, db.data,
                                                                                M, N, K, epilogue, stream());
  return dy.host();
}

// The tiled variant (a prefill's rows) against the GEMV on the same call: the same bits, for every
// epilogue; and the default takes one or the other by M with the same bits.
template <class W>
void check_tiled_is_split_k(std::int64_t M, std::int64_t N, std::int64_t K, int epilogue) {
  std::mt19937 rng(static_cast<unsigned>(M * 7 + N * 1000 + K + epilogue));
  const std::vector<float> x = random_floats(static_cast<std::size_t>(M * K), rng);
  const std::vector<float> w32 = random_floats(static_cast<std::size_t>(N * K), rng, 1.0f / std::sqrt(float(K)));
  const std::vector<W> w(w32.begin(), w32.end());
  const std::vector<float> bias = random_floats(static_cast<std::size_t>(N), rng, 0.1f);
  const std::vector<float> start = random_floats(static_cast<std::size_t>(M * N), rng);
  const std::vector<float> gemv = linear_rows_on_device(x, w, bias, M, N, K, epilogue, "split_k", start);
  const std::vector<float> tiled = linear_rows_on_device(x, w, bias, M, N, K, epilogue, "tiled", start);
  const std::vector<float> chosen = linear_rows_on_device(x, w, bias, M, N, K, epilogue, "by_rows", start);
  INFO("M = ", M, ", N = ", N, ", K = ", K, ", epilogue ", epilogue, ", bf16 weights: ", !std::is_same_v<W, float>);
  CHECK(same_bits(tiled.data(), gemv.data(), gemv.size()));
  CHECK(same_bits(chosen.data(), gemv.data(), gemv.size()));
}

// Every row of a batch against the same row alone and inside a smaller batch.
template <class W>
void check_linear_rows_batch_invariance(std::int64_t N, std::int64_t K) {
  std::mt19937 rng(static_cast<unsigned>(N * 1000 + K));
  const std::int64_t M = 9;  // two passes of the kernel's 8 rows
  const std::vector<float> x = random_floats(static_cast<std::size_t>(M * K), rng);
  const std::vector<float> w32 = random_floats(static_cast<std::size_t>(N * K), rng, 1.0f / std::sqrt(float(K)));
  const std::vector<W> w(w32.begin(), w32.end());
  const std::vector<float> bias = random_floats(static_cast<std::size_t>(N), rng, 0.1f);
  const std::vector<float> batch = linear_rows_on_device(x, w, bias, M, N, K);
  for (std::int64_t m = 0; m < M; ++m) {
    const std::vector<float> row(x.begin() + m * K, x.begin() + (m + 1) * K);
    const std::vector<float> alone = linear_rows_on_device(row, w, bias, 1, N, K);
    INFO("N = ", N, ", K = ", K, ", row ", m);
    CHECK(same_bits(alone.data(), batch.data() + m * N, static_cast<std::size_t>(N)));
  }
  const std::vector<float> middle(x.begin() + 4 * K, x.begin() + 7 * K);  // rows 4, 5, 6
  const std::vector<float> three = linear_rows_on_device(middle, w, bias, 3, N, K);
  CHECK(same_bits(three.data(), batch.data() + 4 * N, static_cast<std::size_t>(3 * N)));
}

struct Cache {
  kernels::CacheShape shape;
  std::vector<float> q, k, v;
  std::vector<std::int32_t> slots, lengths;
};

// attend_cache's CUDA kernel on rows [first, first + count) of the cache's rows.
std::vector<float> attend_cache_on_device(const Cache& c, std::int64_t first, std::int64_t count) {
  kernels::CacheShape s = c.shape;
  s.rows = count;
  const std::int64_t C = s.heads * s.hs;
  DeviceArray<float> q(std::vector<float>(c.q.begin() + first * s.q_stride, c.q.begin() + (first + count) * s.q_stride));
  DeviceArray<float> k(c.k), v(c.v), out(static_cast<std::size_t>(count * C));
  DeviceArray<std::int32_t> slots(std::vector<std::int32_t>(c.slots.begin() + first, c.slots.begin() + first + count));
  DeviceArray<std::int32_t> lengths(
      std::vector<std::int32_t>(c.lengths.begin() + first, c.lengths.begin() + first + count));
  kernels::lookup_variant(op::attend_cache<float>, DeviceType::CUDA, "split")(out.data, q.data, k.data, v.data,
                                                                              slots.data, lengths.data, s, stream());
  return out.host();
}

Cache random_cache(std::vector<std::int32_t> slots, std::vector<std::int32_t> lengths, std::int64_t heads,
                   std::int64_t hs, std::int64_t slot_count, std::int64_t capacity, unsigned seed) {
  std::mt19937 rng(seed);
  Cache c;
  c.shape.rows = static_cast<std::int64_t>(slots.size());
  c.shape.heads = heads, c.shape.hs = hs, c.shape.slots = slot_count, c.shape.capacity = capacity;
  c.shape.q_stride = heads * hs + 5;  // q inside wider rows, as in a (rows, 3C) qkv buffer
  c.q = random_floats(static_cast<std::size_t>(c.shape.rows * c.shape.q_stride), rng);
  c.k = random_floats(static_cast<std::size_t>(slot_count * capacity * heads * hs), rng);
  c.v = random_floats(c.k.size(), rng);
  c.slots = std::move(slots), c.lengths = std::move(lengths);
  return c;
}

}  // namespace

// The lab's cases at a few of their shapes each (the emulator runs every thread of a block as a
// fiber, and ctest runs this file under three schedules: CI's minutes are counted), aligned and
// one element off: the edges the kernels have (one chunk of K or three, K not a multiple of the
// 16-byte loads, more rows than one pass of 8; a length past a block of 128 positions, odd and
// the largest head sizes).
TEST_CASE("rows on the emulator: linear_rows, attend_cache, append_cache and sample_rows pass the lab's checks") {
  if (other_schedule()) return test::skip("the lab's checks run on the first schedule");
  cuda::use_emulator();
  int runs = 0;
  std::vector<std::string> failures, notes;
  const auto check = [&](const char* name, std::vector<lab::Dims> shapes, DType dtype) {
    lab::Case c = lab::find_case(name);
    c.shapes = std::move(shapes);
    for (const std::string& f : lab::run_shapes(c, lab::LabDevice::Emulator, lab::Mode::Check, dtype, &notes, &runs))
      failures.push_back(f);
  };
  check("linear_rows", {{1, 1, 1}, {3, 20, 1030}, {10, 17, 70}}, kFloat32);
  check("linear_rows", {{3, 20, 1030}}, kFloat64);
  for (const char* name : {"linear_rows/no_bias", "linear_rows/residual", "linear_rows/gelu", "linear_rows/gelu_erf"})
    check(name, {{2, 9, 517}}, kFloat32);
  check("linear_rows/bf16", {{3, 20, 1030}, {2, 9, 17}}, kBFloat16);  // bf16 weights
  check("attend_cache", {{1, 1, 1, 1}, {3, 2, 130, 64}, {5, 3, 7, 24}, {2, 1, 20, 256}}, kFloat32);
  check("attend_cache", {{3, 2, 130, 40}}, kFloat64);
  check("attend_cache", {{3, 2, 130, 64}}, kBFloat16);  // a bf16 cache
  check("append_cache", {{1, 1, 1, 1}, {3, 2, 130, 64}, {2, 1, 5, 257}}, kFloat32);
  check("append_cache", {{5, 3, 7, 24}}, kFloat64);
  check("sample_rows", {{1, 1}, {5, 7}, {10, 300}, {3, 1031}}, kFloat32);  // tokens: float32 logits only
  INFO(join(failures, "\n"));
  CHECK(failures.empty());
  INFO(join(notes, "\n"));
  CHECK(notes.empty());  // a CUDA kernel for each, in every dtype
  // linear_rows: three variants (by_rows, split_k, tiled) a shape; the others one.
  CHECK(runs == 2 * (3 * (3 + 1 + 4 + 2) + 4 + 1 + 1 + 3 + 1 + 4));
}

TEST_CASE("rows on the emulator: linear_rows gives a row the same bits alone or in a batch") {
  cuda::use_emulator();
  check_linear_rows_batch_invariance<float>(17, 300);   // K in one chunk: one pass
  check_linear_rows_batch_invariance<float>(16, 1100);  // three chunks, then the combine
  check_linear_rows_batch_invariance<float>(5, 1027);   // K % 4 != 0: rows not 16-byte aligned, loads one at a time
  check_linear_rows_batch_invariance<bf16>(9, 1040);    // bf16 weights, 8 to a load
}

TEST_CASE("rows on the emulator: linear_rows' tiles (a prefill's many rows) give the GEMV's bits") {
  cuda::use_emulator();
  // Partial tiles of rows and outputs, K in one chunk or three (the combine), K % 4 != 0
  // (W's rows off 16 bytes: the GEMV's one-at-a-time loads), past the default's line of 64
  // rows, every epilogue, bf16 weights (8 to a group).
  check_tiled_is_split_k<float>(37, 21, 300, 0);
  check_tiled_is_split_k<float>(70, 17, 1100, 1);
  check_tiled_is_split_k<float>(19, 33, 1027, 2);
  check_tiled_is_split_k<float>(5, 16, 517, 3);
  check_tiled_is_split_k<bf16>(66, 20, 1040, 0);
  check_tiled_is_split_k<bf16>(17, 9, 77, 2);
}

TEST_CASE("rows on the emulator: attend_cache gives a row the same bits alone or in a batch, and a prefill the "
          "bits of its tokens one at a time") {
  cuda::use_emulator();
  // Rows of different slots and lengths: one position, one block (128) and past it, the capacity.
  const Cache batch = random_cache({2, 0, 2, 1, 2}, {129, 7, 260, 128, 1}, 2, 32, 3, 260, 1);
  const std::vector<float> together = attend_cache_on_device(batch, 0, 5);
  const std::size_t C = 2 * 32;
  for (std::int64_t r = 0; r < 5; ++r) {
    INFO("row ", r, ": slot ", batch.slots[r], ", length ", batch.lengths[r]);
    CHECK(same_bits(attend_cache_on_device(batch, r, 1).data(), together.data() + r * C, C));
  }
  // A prefill of 5 tokens of one slot after 125 cached ones (lengths 126 .. 130, crossing the
  // blocks at 128): each row as the decoding step of its token would compute it.
  std::vector<std::int32_t> lengths;
  for (std::int32_t t = 126; t <= 130; ++t) lengths.push_back(t);
  const Cache prefill = random_cache(std::vector<std::int32_t>(5, 1), lengths, 3, 24, 2, 140, 2);
  const std::vector<float> whole = attend_cache_on_device(prefill, 0, 5);
  const std::size_t C3 = 3 * 24;
  for (std::int64_t r = 0; r < 5; ++r) {
    INFO("prefill row ", r);
    CHECK(same_bits(attend_cache_on_device(prefill, r, 1).data(), whole.data() + r * C3, C3));
  }
}

TEST_CASE("rows on the emulator: bad calls are refused with a message, a row out of range comes out NaN or is not written") {
  cuda::use_emulator();
  std::vector<float> x(4, 1.0f), w(8, 1.0f), b(2, 0.0f);
  CHECK(test::contains(error_of([&] { linear_rows_on_device(x, w, b, 1, 2, 4, 7); }),
                       "linear_rows: epilogue 7 is not 0 (store), 1 (add), 2 (GELU, tanh) or 3 (GELU, erf)"));
  CHECK(test::contains(error_of([&] { linear_rows_on_device(x, w, b, 1, 2, 0); }), "linear_rows: K must be positive"));

  Cache wide = random_cache({0}, {3}, 1, 300, 1, 4, 3);
  CHECK(test::contains(error_of([&] { attend_cache_on_device(wide, 0, 1); }),
                       "attend_cache: head size 300 is more than the GPU kernel holds (256)"));
  Cache narrow = random_cache({0}, {3}, 2, 8, 1, 4, 4);
  narrow.shape.q_stride = 8;
  CHECK(test::contains(error_of([&] { attend_cache_on_device(narrow, 0, 1); }),
                       "attend_cache: q_stride 8 is less than a row's heads * hs = 16"));
  // append_cache writes nothing for a row out of range: a slot past the cache, a length of 0 or
  // past the capacity; the row in range lands at its length - 1.
  {
    kernels::CacheShape s;
    s.rows = 4, s.heads = 1, s.hs = 3, s.slots = 2, s.capacity = 4, s.q_stride = 3;
    DeviceArray<float> k(std::vector<float>(24, 0.0f)), v(std::vector<float>(24, 0.0f));
    DeviceArray<float> rows(std::vector<float>(12, 1.0f));
    DeviceArray<std::int32_t> slots(std::vector<std::int32_t>{1, 2, 0, 0});
    DeviceArray<std::int32_t> lengths(std::vector<std::int32_t>{2, 1, 0, 5});
    kernels::lookup(op::append_cache<float>, DeviceType::CUDA)(k.data, v.data, rows.data, rows.data, slots.data,
                                                                lengths.data, s, stream());
    std::vector<float> expected(24, 0.0f);
    for (int c = 0; c < 3; ++c) expected[(1 * 4 + 1) * 3 + c] = 1.0f;  // slot 1, position 1
    CHECK(k.host() == expected);
    CHECK(v.host() == expected);
  }
  // A length past the capacity, a slot past the cache, a length of 0: those rows NaN, the rest not.
  const Cache bad = random_cache({0, 0, 5, 1, 0}, {3, 9, 2, 2, 0}, 2, 16, 2, 8, 5);
  const std::vector<float> out = attend_cache_on_device(bad, 0, 5);
  for (std::int64_t r = 0; r < 5; ++r) {
    const bool ok = r == 0 || r == 3;
    for (std::int64_t c = 0; c < 32; ++c) {
      INFO("row ", r, " column ", c);
      CHECK(std::isnan(out[r * 32 + c]) == !ok);
    }
  }
}

TEST_CASE("rows on the emulator: the kernels move at most 1.05x the least bytes from memory") {
  if (!simt::memory_counting_available()) return;  // the AddressSanitizer build counts nothing
  if (other_schedule()) return test::skip("the counters run on the first schedule");
  const auto counters = [](const char* name, lab::Dims size, DType dtype, const char* variant) {
    lab::Options o;
    o.device = lab::LabDevice::Emulator;
    o.mode = lab::Mode::Check;
    o.size = size;
    o.dtype = dtype;
    o.variant = variant;
    o.out = nullptr;
    const lab::CountersReport report = lab::run_counters(lab::find_case(name), o);
    REQUIRE(report.rows.size() == 1);
    INFO(name, " ", join(std::vector<std::string>{report.rows[0].failure}));
    CHECK(report.rows[0].failure.empty());
    return report.rows[0];
  };
  const auto dram = [&](const char* name, lab::Dims size, DType dtype) {
    return counters(name, size, dtype, "all").dram_over_minimum();  // (one variant)
  };
  // GPT-2's shapes cut down: a decoding step of 1 and of 4 sequences, K over two chunks.
  for (const char* variant : {"by_rows", "split_k"}) {
    CAPTURE(variant);
    CHECK(counters("linear_rows", {1, 48, 1024}, kFloat32, variant).dram_over_minimum() <= 1.05);
    CHECK(counters("linear_rows", {4, 48, 1024}, kFloat32, variant).dram_over_minimum() <= 1.05);
    CHECK(counters("linear_rows/bf16", {1, 48, 1024}, kBFloat16, variant).dram_over_minimum() <= 1.05);
  }
  // A prefill of 128 rows: the tiles use each staged value 16 times where the GEMV's 8-row
  // passes load each weight again, so they ask L1 and shared memory for much less.
  const lab::CounterRow gemv = counters("linear_rows", {128, 32, 512}, kFloat32, "split_k");
  const lab::CounterRow tiles = counters("linear_rows", {128, 32, 512}, kFloat32, "tiled");
  const auto shared = [](const lab::CounterRow& r) {
    return r.total.shared_ld_wavefronts + r.total.shared_st_wavefronts;
  };
  MESSAGE("linear_rows (128, 32, 512): shared wavefronts ", shared(gemv), " GEMV, ", shared(tiles), " tiles; reads ",
          gemv.reads_over_minimum(), "x and ", tiles.reads_over_minimum(), "x the least");
  CHECK(2 * shared(tiles) < shared(gemv));
  CHECK(tiles.reads_over_minimum() < gemv.reads_over_minimum());
  CHECK(dram("attend_cache", {2, 2, 256, 64}, kFloat32) <= 1.05);
  CHECK(dram("attend_cache", {2, 2, 256, 64}, kBFloat16) <= 1.05);
}
