// kernels/cuda/rows/sample.cu: sample_rows on the GPU: each row's token drawn on the device, so
// a sampled decoding step copies back one number a row instead of the row's V logits. Chapter
// 20 ("Sampling on the GPU"). Read before: kernels/sample_rule.h (what is drawn),
// kernels/cpu/rows/sample.cpp (the same draw by sorting). Read next: models/gpt/decode_device.cpp
// (DeviceDecoder::sample).
//
// Without sorting. The CPU ranks the tokens by sorting them, but all a draw needs of the
// ranking is one place in it: the first token whose running weight reaches a threshold. That
// place can be found digit by digit, as a radix sort orders keys, without moving anything (a
// radix select). A token's key (sample_rule.h's descending_key) has 4 bytes. A pass over the row
// adds each token's weight into one of 256 bins by the key's first byte; walking the bins in
// order, the first whose running total reaches the threshold holds the token, and every token
// of the bins before it is ranked before it. The next pass looks only at the tokens of that bin,
// by their second byte, and so on: after 4 passes the key is known. Tokens with that key (equal
// logits) are ranked by id, the row's own order, so a fifth pass walks them in id order, 256 at
// a time, with a running sum over the block, and stops at the token.
//
// One such search finds each of the three places a draw needs: the top_k-th token (counting
// tokens instead of adding weights), the end of the top_p prefix, and the drawn token. The
// weights are integers (sample_rule.h), so the bins' totals are exact whatever order the
// threads' atomic additions land in: the same row gives the same token every run, alone or
// beside other rows (a block a row, nothing shared between rows).
#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/rows/rows.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"
#include "kernels/sample_rule.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

using i64 = std::int64_t;
using u64 = unsigned long long;
namespace rule = brrr::kernels::sample;

constexpr int kThreads = 256;  // a block per row
constexpr int kBins = 256;     // one byte of the key a pass
constexpr u64 kNotFound = ~0ull;

// A token's place in the ranking: its key, then its id.
struct Rank {
  std::uint32_t key = 0xffffffffu, id = 0xffffffffu;  // the default: the last place of all
};

// What a block shares: the bins, the scans' warp totals, what thread 0 decides.
struct Shared {
  u64 bins[kBins];
  u64 warp_totals[kThreads / 32];
  float top[32];
  int flags[32];
  u64 found, running;
  std::uint32_t prefix;
  u64 base;
};

// One row and what is kept of it: the tokens ranked at or before `limit`.
struct Row {
  const float* logits;
  i64 V;
  double top, temperature;
  Rank limit;
  __device__ bool kept(std::uint32_t key, i64 id) const {
    return key < limit.key || (key == limit.key && static_cast<std::uint32_t>(id) <= limit.id);
  }
  // What a search adds up: 1 a token (counting, for top_k) or its weight.
  __device__ u64 measure(i64 id, bool counting) const {
    return counting ? 1ull : static_cast<u64>(rule::weight(logits[id], top, temperature));
  }
};

// The running sum over the block, each thread's own value included; *total gets the block's sum.
__device__ u64 block_running_sum(u64 value, Shared& sh, u64* total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int d = 1; d < 32; d *= 2) {
    const u64 other = __shfl_up_sync(0xffffffffu, value, d);
    if (lane >= d) value += other;
  }
  __syncthreads();  // the warp totals may still be read by a previous call
  if (lane == 31) sh.warp_totals[warp] = value;
  __syncthreads();
  u64 before = 0, all = 0;
  for (int w = 0; w < warps; ++w) {
    if (w < warp) before += sh.warp_totals[w];
    all += sh.warp_totals[w];
  }
  *total = all;
  return before + value;
}

// The first token in ranking order among those kept whose running measure (its own included)
// reaches `needed`, which must be at least 1 and at most the kept tokens' total. Returns its
// place; *running gets the running measure there.
__device__ Rank find_first(const Row& row, bool counting, u64 needed, u64* running, Shared& sh) {
  std::uint32_t prefix = 0;
  u64 base = 0;  // the measure of the kept tokens ranked before the bins in view
  for (int level = 0; level < 4; ++level) {
    const int shift = 24 - 8 * level;
    for (int b = threadIdx.x; b < kBins; b += blockDim.x) sh.bins[b] = 0;
    __syncthreads();
    for (i64 i = threadIdx.x; i < row.V; i += blockDim.x) {
      const std::uint32_t key = rule::descending_key(row.logits[i]);
      if (level > 0 && (key >> (shift + 8)) != (prefix >> (shift + 8))) continue;  // not in the bin in view
      if (!row.kept(key, i)) continue;
      const u64 m = row.measure(i, counting);
      if (m != 0) atomicAdd(&sh.bins[(key >> shift) & 0xffu], m);
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // the first bin whose running total reaches `needed`
      int b = 0;
      for (; b < kBins - 1 && base + sh.bins[b] < needed; ++b) base += sh.bins[b];
      sh.prefix = prefix | static_cast<std::uint32_t>(b) << shift;
      sh.base = base;
      sh.found = kNotFound, sh.running = 0;
    }
    __syncthreads();
    prefix = sh.prefix, base = sh.base;
  }
  // The key is known; its tokens in id order, a block's width at a time.
  for (i64 start = 0; start < row.V; start += blockDim.x) {
    const i64 i = start + threadIdx.x;
    u64 m = 0;
    if (i < row.V) {
      const std::uint32_t key = rule::descending_key(row.logits[i]);
      if (key == prefix && row.kept(key, i)) m = row.measure(i, counting);
    }
    u64 chunk = 0;
    const u64 through = base + block_running_sum(m, sh, &chunk);
    if (m != 0 && through >= needed) atomicMin(&sh.found, static_cast<u64>(i));
    __syncthreads();
    if (static_cast<u64>(i) == sh.found) sh.running = through;
    __syncthreads();
    if (sh.found != kNotFound) break;
    base += chunk;
  }
  *running = sh.running;
  Rank place;
  place.key = prefix, place.id = static_cast<std::uint32_t>(sh.found);
  return place;
}

__global__ void sample_rows_kernel(std::int32_t* out, const float* logits, const double* rules, i64 V) {
  __shared__ Shared sh;
  const float* x = logits + static_cast<i64>(blockIdx.x) * V;
  const double* r = rules + static_cast<i64>(blockIdx.x) * rule::kRuleSize;
  float top = -INFINITY;
  int nan = 0;
  for (i64 i = threadIdx.x; i < V; i += blockDim.x) {
    const float v = x[i];
    if (v != v) nan = 1;
    else top = fmaxf(top, v);
  }
  top = block_max(top, sh.top);
  nan = block_sum(nan, sh.flags);
  if (nan != 0 || !(top > -INFINITY && top < INFINITY) || !rule::rule_ok(r)) {
    if (threadIdx.x == 0) out[blockIdx.x] = -1;
    return;  // the whole block: every thread has the same answers
  }
  Row row{x, V, top, r[rule::kTemperature], Rank{}};
  u64 running = 0;
  const double top_k = r[rule::kTopK];
  if (top_k >= 1.0 && top_k < static_cast<double>(V))
    row.limit = find_first(row, true, static_cast<u64>(top_k), &running, sh);
  u64 total = 0;
  for (i64 i = threadIdx.x; i < V; i += blockDim.x)
    if (row.kept(rule::descending_key(x[i]), i)) total += row.measure(i, false);
  u64 kept_total = 0;
  block_running_sum(total, sh, &kept_total);
  if (r[rule::kTopP] < 1.0) {
    row.limit = find_first(row, false, rule::share_threshold(r[rule::kTopP], kept_total), &running, sh);
    kept_total = running;
  }
  const Rank drawn = find_first(row, false, rule::draw_threshold(r[rule::kUniform], kept_total), &running, sh);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<std::int32_t>(drawn.id);
}

void sample_rows(std::int32_t* out, const float* logits, const double* rules, i64 rows, i64 V, Stream stream) {
  rule::check_sample_rows(out, logits, rules, rows, V);
  if (rows == 0) return;
  BRRR_CHECK(rows <= INT_MAX, "sample_rows: rows = ", rows, " is more than one launch's grid holds");
  BRRR_LAUNCH(sample_rows_kernel, static_cast<unsigned>(rows), kThreads, 0, stream, out, logits, rules, V);
}

}  // namespace

void register_sample_kernels() {
  add(op::sample_rows, DeviceType::CUDA, "select", &sample_rows, 10,
      about("a block per row: the drawn token found byte by byte of its key (a radix select over integer weights), "
            "no sort (rows/sample.cu)"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
