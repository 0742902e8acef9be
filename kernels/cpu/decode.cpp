// kernels/cpu/decode.cpp: the kernels of fast generation, declared in decode.h (chapter 08).
// Read before: decode.h, cpu.h. Read next: models/gpt/decode.cpp (the Decoder that calls them).
//
// linear_rows is a matrix-vector product (a GEMV) when M = 1, generation's case: each row of
// W is read once, multiplied with x and summed, so the time is W's bytes over the memory
// bandwidth. Rows of W go to the threads in blocks of 48; within a block, a micro-kernel takes
// 4 rows of W against 1 or 2 rows of x when x has fewer than 3 rows (decoding: four independent
// sums per row), and 3 rows of W against 3 rows of x up to 47 rows (a batch of sequences: 9
// vector accumulators, 6 loads per 9 FMAs as written; GCC 12 folds each load of W into the
// FMAs that use it, so the compiled loop makes 12). From 48 rows (a prefill) a GEMM's tile
// takes over that computes the very same sums (see "Many rows" below). A 4 x 3
// tile (12 sums) compiled to 15 or 16 loads per 12 FMAs: measured at 512 x 1536 x 384 on one
// thread, in a throwaway copy of these loops (docs/measurements.md), 3 x 3 ran 1.5-1.9x the
// 4 x 3's GFLOP/s. When decoding, each tile
// prefetches the rows of W two tiles on (see block). Both operands should start on 32-byte
// boundaries (the callers' buffers are brrr/aligned_vector.h's): a vector load that straddles
// two cache lines costs two, and with 16-byte aligned rows that was every other load (the same
// copy: 28-33 GFLOP/s against 47-60 with aligned rows).
// With AVX2 and FMA (this build's -march says whether) a vector is 8 floats; otherwise a plain
// array of 8 that computes the same sums, so the numbers are the same bits either way.
#include "kernels/cpu/decode.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "brrr/aligned_vector.h"
#include "brrr/error.h"
#include "kernels/cpu/cpu.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BRRR_DECODE_AVX2 1
#endif

namespace brrr::kernels::cpu {

namespace {

using i64 = std::int64_t;

// ---------------------------------------------------------------------------------------------
// The team: how the kernels below share work among threads
//
// A step runs some thirty small kernels of a few hundred microseconds each. OpenMP's parallel
// for ends each with a barrier that waits for every thread of the team, so when the machine
// has more runnable threads than cores (other programs, a build), a thread the OS has not yet
// scheduled holds up the whole step: measured here with 2 threads beside a busy build, 2
// threads decoded 3x slower than 1. The team instead lets the calling thread and its helpers
// claim blocks one at a time from a counter; the caller works through the blocks itself and
// then waits only for blocks a helper has claimed, never for a helper to wake up. Which thread
// runs a block never changes its numbers (each output is one block's work).
class Team {
 public:
  static Team& get() {
    static Team team;
    return team;
  }
  ~Team() { resize(0); }

  void run(i64 blocks, void (*fn)(void*, i64), void* ctx) {
    // One job at a time: a second thread calling in meanwhile (two Decoders on two threads)
    // runs its blocks alone, as does a call from inside a block.
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    const int threads = std::max(1, omp_get_max_threads());
    if (busy.owns_lock() && static_cast<int>(helpers_.size()) != threads - 1) resize(threads - 1);
    if (blocks <= 1 || helpers_.empty() || !busy.owns_lock() || omp_in_parallel()) {
      for (i64 b = 0; b < blocks; ++b) fn(ctx, b);
      return;
    }
    fn_.store(fn, std::memory_order_relaxed), ctx_.store(ctx, std::memory_order_relaxed);
    total_.store(blocks, std::memory_order_relaxed), done_.store(0, std::memory_order_relaxed);
    const std::uint64_t generation = ++generation_;
    word_.store(generation << 32, std::memory_order_release);
    if (sleepers_.load(std::memory_order_acquire) > 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      cv_.notify_all();
    }
    work(generation);
    for (int spins = 0; done_.load(std::memory_order_acquire) < blocks; ++spins)
      if (spins > 64) std::this_thread::yield();  // a helper finishing its block may need this core
  }

 private:
  // Claims and runs blocks of job `generation` until none is left (or a newer job began).
  void work(std::uint64_t generation) {
    for (;;) {
      std::uint64_t w = word_.load(std::memory_order_acquire);
      if ((w >> 32) != generation) return;
      const i64 block = static_cast<i64>(w & 0xFFFFFFFFu);
      if (block >= total_.load(std::memory_order_relaxed)) return;
      // Claimed only if the counter still reads w: then job `generation` is unfinished, and
      // its function and context stay as they are until this block is counted done.
      if (!word_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) continue;
      fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), block);
      done_.fetch_add(1, std::memory_order_release);
    }
  }

  void helper() {
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t current = word_.load(std::memory_order_acquire) >> 32;
      // Spin before sleeping: within a step the next job comes microseconds later. 4000 pauses
      // are about 200 us on this project's Zen 3 (a pause takes about 50 ns there); bounding the
      // spin at 30 us instead changed neither decode nor the server's throughput measurably.
      for (int spins = 0; current == seen && spins < 4000; ++spins) {
#if BRRR_DECODE_AVX2
        _mm_pause();
#endif
        current = word_.load(std::memory_order_acquire) >> 32;
      }
      if (current == seen) {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        cv_.wait(lock, [&] { return stop_ || (word_.load(std::memory_order_acquire) >> 32) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        if (stop_) return;
        current = word_.load(std::memory_order_acquire) >> 32;
      }
      seen = current;
      work(seen);
    }
  }

  void resize(int helpers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      cv_.notify_all();
    }
    for (std::thread& t : helpers_) t.join();
    helpers_.clear();
    stop_ = false;
    for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this] { helper(); });
  }

  std::atomic<std::uint64_t> word_{0};  // the job's generation (high 32 bits), its next unclaimed block (low)
  std::atomic<i64> total_{0}, done_{0};
  std::atomic<void (*)(void*, i64)> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int> sleepers_{0};
  std::uint64_t generation_ = 0;  // the caller's
  std::mutex mutex_, busy_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::thread> helpers_;
};

// body(begin, end) over [0, n) in blocks of `grain`, on the team.
template <class Body>
void share(i64 n, i64 grain, const Body& body) {
  if (n <= 0) return;
  struct Job {
    const Body* body;
    i64 n, grain;
  } job{&body, n, grain};
  Team::get().run((n + grain - 1) / grain, [](void* ctx, i64 b) {
    const Job& j = *static_cast<const Job*>(ctx);
    (*j.body)(b * j.grain, std::min(j.n, (b + 1) * j.grain));
  }, &job);
}

inline float widen(float x) { return x; }
inline float widen(std::uint16_t bits) {  // bfloat16 -> float32, exact
  const std::uint32_t u = std::uint32_t{bits} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

#if BRRR_DECODE_AVX2
using Vec = __m256;
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline Vec load(const std::uint16_t* p) {  // 8 bfloat16: widen to 32 bits, shift into the top half
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline Vec fma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline void prefetch(const char* p) { _mm_prefetch(p, _MM_HINT_T0); }
inline void prefetch_write(const float* p) { __builtin_prefetch(p, 1, 3); }
inline Vec splat(float a) { return _mm256_set1_ps(a); }
inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec vmax(Vec a, Vec b) { return _mm256_max_ps(a, b); }
// r[j][l] -> r[l][j]: 8 vectors of 8 as a matrix, transposed in registers (24 shuffles).
inline void transpose8(Vec (&r)[8]) {
  Vec t[8], u[8];
  for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44), u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44), u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20), r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
}
// ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)), as decode.h says.
inline float hsum(Vec v) {
  const __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l_i + l_{i+4}
  const __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));                                  // a0 + a2, a1 + a3
  return _mm_cvtss_f32(_mm_add_ss(b, _mm_shuffle_ps(b, b, 1)));
}
#else
struct Vec {
  float l[8];
};
inline Vec zero() { return Vec{}; }
template <class T>
inline Vec load(const T* p) {
  Vec v;
  for (int i = 0; i < 8; ++i) v.l[i] = widen(p[i]);
  return v;
}
inline Vec fma(Vec a, Vec b, Vec c) {
  for (int i = 0; i < 8; ++i) c.l[i] = std::fma(a.l[i], b.l[i], c.l[i]);
  return c;
}
inline void prefetch(const char* p) { __builtin_prefetch(p); }
inline void prefetch_write(const float* p) { __builtin_prefetch(p, 1, 3); }
inline Vec splat(float a) {
  Vec v;
  for (float& l : v.l) l = a;
  return v;
}
inline void store(float* p, Vec v) { std::memcpy(p, v.l, sizeof v.l); }
inline Vec add(Vec a, Vec b) {
  for (int i = 0; i < 8; ++i) a.l[i] += b.l[i];
  return a;
}
inline Vec mul(Vec a, Vec b) {
  for (int i = 0; i < 8; ++i) a.l[i] *= b.l[i];
  return a;
}
inline Vec vmax(Vec a, Vec b) {  // as _mm256_max_ps: b where either is NaN
  for (int i = 0; i < 8; ++i) a.l[i] = a.l[i] > b.l[i] ? a.l[i] : b.l[i];
  return a;
}
inline void transpose8(Vec (&r)[8]) {
  for (int i = 0; i < 8; ++i)
    for (int j = i + 1; j < 8; ++j) std::swap(r[i].l[j], r[j].l[i]);
}
inline float hsum(Vec v) {
  const float a0 = v.l[0] + v.l[4], a1 = v.l[1] + v.l[5], a2 = v.l[2] + v.l[6], a3 = v.l[3] + v.l[7];
  return (a0 + a2) + (a1 + a3);
}
#endif

// out[r][j] = x_r . w_j over K numbers, for R rows of x (stride ldx) and J rows of w (stride
// ldw), in decode.h's order. `ahead`, when given, is prefetched along the way (see block): at
// the pace W is read, or with kShared, [ahead, ahead_end) a cache line every few steps, spread
// over the whole loop.
template <int R, int J, class W, bool kShared = false>
inline void dots(float (&out)[R][J], const float* x, i64 ldx, const W* w, i64 ldw, i64 K,
                 const char* ahead = nullptr, const char* ahead_end = nullptr) {
  Vec acc[R][J];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) acc[r][j] = zero();
  const i64 K8 = K - K % 8;
  // kShared: a line every `every` steps (1 when the share has more lines than the loop steps).
  const i64 every = kShared ? std::max<i64>(1, (K8 / 8) * 64 / std::max<i64>(64, ahead_end - ahead)) : 1;
  i64 countdown = every;
  for (i64 k = 0; k < K8; k += 8) {
    // J loads of W, then the rows of x one at a time: R x J sums + J + 1 registers (13 at 3 x 3).
    Vec wv[J];
    if (ahead) {
      constexpr int kBytes = J * 8 * static_cast<int>(sizeof(W));  // W's bytes per step of k
      if constexpr (!kShared) {
        for (int b = 0; b < kBytes; b += 64) prefetch(ahead + b);
        ahead += kBytes;
      } else if (--countdown == 0) {
        countdown = every;
        if (ahead < ahead_end) prefetch(ahead), ahead += 64;
      }
    }
    for (int j = 0; j < J; ++j) wv[j] = load(w + j * ldw + k);
    for (int r = 0; r < R; ++r) {
      const Vec xv = load(x + r * ldx + k);
      for (int j = 0; j < J; ++j) acc[r][j] = fma(xv, wv[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      float s = hsum(acc[r][j]);
      for (i64 k = K8; k < K; ++k) s = std::fma(x[r * ldx + k], widen(w[j * ldw + k]), s);
      out[r][j] = s;
    }
}

inline float gelu_tanh(float v) {  // 0.5 v (1 + tanh(u)) written as v / (1 + exp(-2u)), as nn.cpp's gelu_forward
  constexpr float k2 = static_cast<float>(-2.0 * 0.7978845608028654), c = 0.044715f;
  return v / (1.0f + exp_vec(k2 * (v + c * v * v * v)));
}

// What a tile does with an output: store it or add it to y (the GELUs are stored, then applied
// along the row by gelu_row). y is read only to add to it.
inline void put(Epilogue e, float& dst, float v) {
  if (e == Epilogue::kAdd) dst += v;
  else dst = v;
}

// Decoding (a few rows of x) streams W from memory once, J short rows at a time (768 bytes
// each at K = 384 in bf16), too short for the hardware's prefetcher to get ahead of: the first
// tile of each J rows of W asks for the rows two tiles on while it sums its own. Measured with
// bench_decode at gpt-12m in bf16 (2 threads, the two alternating, 3 runs each): 337-407
// tokens/s without, 589-693 with (docs/measurements.md); three, four or six tiles on were no
// faster than two. With more rows of x (a step of several sequences) the same J rows of W meet
// several tiles of x, and only the first reads them from memory: if that tile asked for all of
// the rows two on, the memory sat idle through the others. So there each tile asks for its
// share of those rows, spread over its loop: gpt-12m's 24 matrices 1.10-1.23x faster at 8 to
// 32 rows (bench/decode_ab.sh, both orders; docs/measurements.md, "The prefetches of a step of
// several sequences"). Decoding's one or two rows take the path they took before.
constexpr i64 kPrefetchTiles = 2;
constexpr i64 kStreamRows = 32;  // up to this many rows of x, W is read from memory rather than cache

// `ahead`, `ahead_end`, kShared: what dots prefetches (nullptr for nothing).
template <int R, int J, class W, bool kShared = false>
inline void tile(float* y, const float* x, const W* w, const float* bias, i64 m, i64 n, i64 N, i64 K, Epilogue e,
                 const char* ahead, const char* ahead_end = nullptr) {
  float out[R][J];
  dots<R, J, W, kShared>(out, x + m * K, K, w + n * K, K, K, ahead, ahead_end);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < J; ++j) {
      const float v = bias ? out[r][j] + bias[n + j] : out[r][j];
      put(e, y[(m + r) * N + n + j], v);
    }
}

// One thread's block of W's rows [n0, n1) against every row of x, in tiles of RX rows of x by
// J rows of W (the edges in smaller tiles).
template <int RX, int J, class W>
void block(float* y, const float* x, const W* w, const float* bias, i64 M, i64 n0, i64 n1, i64 N, i64 K,
           Epilogue e) {
  // Rows of x in chunks of about 144 KiB, which stay in the core's L2 while the block's rows of
  // W pass over them J at a time (J rows of W, 9 KiB at K = 768 and J = 3, stay in L1 while the
  // chunk's rows go by RX at a time). Decode has one row: the chunk is x itself.
  const i64 chunk = std::max<i64>(RX, (i64{144} * 1024 / (K * static_cast<i64>(sizeof(float)))) / RX * RX);
  // The prefetch address for W's rows n onwards (see kPrefetchTiles), when x has few rows: an
  // address, never dereferenced (a prefetch past the end of W is dropped, not a fault), so
  // computed as an integer rather than as a pointer past the array.
  const auto ahead = [&](i64 n, i64 j) -> std::uintptr_t {
    if (M > kStreamRows) return 0;
    return reinterpret_cast<std::uintptr_t>(w) + sizeof(W) * static_cast<std::uintptr_t>((n + j * kPrefetchTiles) * K);
  };
  for (i64 m0 = 0; m0 < M; m0 += chunk) {
    const i64 m1 = std::min(M, m0 + chunk);
    // The tiles that each J rows of W meet below (RX rows of x at a time, then 2, then 1) and,
    // when there are several, each one's share of the J rows kPrefetchTiles on.
    const i64 rows = m1 - m0, tiles = rows / RX + (rows % RX) / 2 + (rows % RX) % 2;
    const auto share = static_cast<std::uintptr_t>((J * K * static_cast<i64>(sizeof(W)) + tiles - 1) / tiles);
    i64 n = n0;
    for (; n + J <= n1; n += J) {
      std::uintptr_t next = ahead(n, J);
      i64 m = m0;
      if constexpr (RX > 2) {  // (block<2, 4> takes fewer than 3 rows: one tile)
        if (tiles > 1 && next != 0) {
          const auto shared = [&]<int R>() {  // the next tile, with the next share
            tile<R, J, W, true>(y, x, w, bias, m, n, N, K, e, reinterpret_cast<const char*>(next),
                                reinterpret_cast<const char*>(next + share));
            next += share, m += R;
          };
          while (m + RX <= m1) shared.template operator()<RX>();
          // Two rows left are one 2 x J tile (2J independent sums, not J twice: an FMA's result
          // is ready 4 cycles later, so a tile needs 8 sums in flight to keep both FMA units busy).
          if (m + 2 <= m1) shared.template operator()<2>();
          while (m < m1) shared.template operator()<1>();
          continue;
        }
      }
      // One tile (decoding): it prefetches the rows at the pace it reads its own.
      const char* first = reinterpret_cast<const char*>(next);
      for (; m + RX <= m1; m += RX) tile<RX, J>(y, x, w, bias, m, n, N, K, e, m == m0 ? first : nullptr);
      if (RX > 2 && m + 2 <= m1) tile<2, J>(y, x, w, bias, m, n, N, K, e, m == m0 ? first : nullptr), m += 2;
      for (; m < m1; ++m) tile<1, J>(y, x, w, bias, m, n, N, K, e, m == m0 ? first : nullptr);
    }
    for (; n < n1; ++n) {
      i64 m = m0;
      for (; m + RX <= m1; m += RX) tile<RX, 1>(y, x, w, bias, m, n, N, K, e, nullptr);
      for (; m < m1; ++m) tile<1, 1>(y, x, w, bias, m, n, N, K, e, nullptr);
    }
  }
}

// y = gelu(y) over n numbers, in vectors: gelu_tanh above, or cpu.h's gelu_erf_value (as nn.cpp's
// gelu_erf_forward).
void gelu_row(float* y, i64 n, Epilogue e) {
  if (e == Epilogue::kGeluTanh) {
#pragma omp simd
    for (i64 i = 0; i < n; ++i) y[i] = gelu_tanh(y[i]);
  } else {
#pragma omp simd
    for (i64 i = 0; i < n; ++i) y[i] = gelu_erf_value(y[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Many rows (a prefill, a step of many sequences): the same sums, computed as a GEMM computes
//
// dots keeps one output's 8 lane sums in a vector and adds the lanes at the end: per step of k, a
// 3 x 3 tile makes 9 FMAs from 6 loads as written (12 as compiled), and every output ends in a
// horizontal sum. A GEMM's micro-kernel holds 8 outputs in a vector instead and broadcasts x:
// a 6 x 16 tile makes 12 FMAs from 2 loads of W and 6 broadcasts of x, and 12 sums in flight keep
// both FMA units busy. It can make dots' very numbers. Lane l of an output's dot product is a
// chain of FMAs over k = l, l + 8, l + 16, ..., from zero: a dot product of its own, over the
// T = K / 8 values of k in lane class l. So the tile runs the 8 lane classes one after another
// (each a GEMM chain over its T values of k), keeps each output's 8 lane sums, adds them in
// dots' order, then the last K % 8 products, then the bias. Same additions, same order, same
// bits: so which of the two kernels a call takes (it depends on M) never changes a number, and
// a sequence's numbers stay the same alone or batched.
//
// W's rows are packed 16 at a time into a panel, wp[(l * T + t) * 16 + j] = W[n + j][8 t + l],
// widened to float32 (bfloat16 included), zeros past the last row, so that a lane class of the
// panel is one contiguous stream. x's rows are packed the same way, 6 at a time into a tile,
// xp[(l * T + t) * 6 + r] = x[m + r][8 t + l], zeros past the last row: a step of the tile reads
// the next 24 bytes of the tile, where x read in place took one float from each of 6 rows 8
// floats apart and came back to the same cache lines for each lane class. x is packed once per
// call, by the team; W a block of panels at a time, by the thread that uses them. Each tile of x then passes over every panel of the block while it is
// in L1 (the panels, up to 192 KiB, stay in L2), and every row of x passes over each block, so W
// is read from memory once per call. On one thread at 510 rows, in a throwaway copy of these
// loops, this ran at 60-80 GFLOP/s where x read in place and one panel at a time ran at 49-72
// (docs/measurements.md, "Packed tiles of x").
constexpr i64 kPanel = 16;     // outputs per panel: two vectors
constexpr i64 kGemmRows = 6;   // rows of x per tile
// A thread's share of the work: a block of up to 4 panels (64 outputs) of at most 192 KiB of
// packed W, so 4 panels at K = 384 or 768, 2 at K = 1536, 1 at K = 3072.
constexpr i64 kPanelsPerBlock = 4, kBlockBytes = 192 * 1024;
// From this many rows of x on, linear_rows takes the GEMM. Below it, packing W costs more than
// the GEMM's tile saves: gpt-12m's 24 matrices on 2 threads (docs/measurements.md) took 4.7-7.3
// ms at 8 rows against the dot products' 3.8-4.1, 12.4-13.0 against 13.0-15.2 at 48 rows, and
// 0.73-0.86 of the dot products' time at 64 to 256 rows.
constexpr i64 kGemmThreshold = 48;

// The tile: R (<= 6) rows of a packed tile of x against a panel, the lane classes one after
// another, then each output's 8 lane sums added in dots' order into sum[r][j] (the last K % 8
// products not yet). Named accumulators: GCC 12 kept an array of 12 vectors on the stack.
template <int R>
inline void gemm_sums(float (&sum)[R][kPanel], const float* xp, const float* wp, i64 T) {
  float part[8][R][kPanel];
  for (int l = 0; l < 8; ++l) {
    const float* a = xp + l * T * kGemmRows;
    const float* b = wp + l * T * kPanel;
    Vec c00 = zero(), c01 = zero(), c10 = zero(), c11 = zero(), c20 = zero(), c21 = zero();
    Vec c30 = zero(), c31 = zero(), c40 = zero(), c41 = zero(), c50 = zero(), c51 = zero();
    for (i64 t = 0; t < T; ++t) {
      const Vec w0 = load(b + t * kPanel), w1 = load(b + t * kPanel + 8);
#define BRRR_GEMM_ROW(r)                                           \
  if constexpr (R > r) {                                           \
    const Vec s = splat(a[t * kGemmRows + r]);                     \
    c##r##0 = fma(s, w0, c##r##0), c##r##1 = fma(s, w1, c##r##1); \
  }
      BRRR_GEMM_ROW(0) BRRR_GEMM_ROW(1) BRRR_GEMM_ROW(2) BRRR_GEMM_ROW(3) BRRR_GEMM_ROW(4) BRRR_GEMM_ROW(5)
#undef BRRR_GEMM_ROW
    }
    const Vec c[6][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < R; ++r) store(part[l][r], c[r][0]), store(part[l][r] + 8, c[r][1]);
  }
  // dots' order, 8 outputs at a time: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < kPanel; h += 8) {
      const auto p = [&](int l) { return load(part[l][r] + h); };
      store(sum[r] + h, add(add(add(p(0), p(4)), add(p(2), p(6))), add(add(p(1), p(5)), add(p(3), p(7)))));
    }
}

// Packs rows [0, J) of w (stride ldw; J <= 16) into a panel, rows past J as zeros. k = 8 t ..
// 8 t + 7 of 8 rows at a time are transposed in registers: lane class l of those rows. Meanwhile
// the rows of `next` (next_rows of them, stride ldw), the next panel's, are asked for at the same
// pace, a cache line of each every 64 bytes: 16 rows read side by side are 16 streams, more than
// the hardware prefetcher follows.
template <class W>
inline void pack_panel(float* wp, const W* w, i64 ldw, i64 J, i64 T, const W* next, i64 next_rows) {
  for (i64 t = 0; t < T; ++t) {
    if ((8 * t * static_cast<i64>(sizeof(W))) % 64 == 0)
      for (i64 j = 0; j < next_rows; ++j) prefetch(reinterpret_cast<const char*>(next + j * ldw + 8 * t));
    for (i64 h = 0; h < kPanel; h += 8) {
      Vec r[8];
      for (i64 j = 0; j < 8; ++j) r[j] = h + j < J ? load(w + (h + j) * ldw + 8 * t) : zero();
      transpose8(r);
      for (i64 l = 0; l < 8; ++l) store(wp + (l * T + t) * kPanel + h, r[l]);
    }
  }
}

// Packs rows [0, R) of x (stride ldx; R <= 6) into a tile, rows past R as zeros: 8 rows (the
// last two zeros) transposed in registers as pack_panel does, lane class l's 8 numbers stored
// at its step t, the 2 past the tile's 6 overwritten by step t + 1 (the last step stores 6).
inline void pack_tile(float* xp, const float* x, i64 ldx, i64 R, i64 T) {
  for (i64 t = 0; t < T; ++t) {
    Vec r[8];
    for (i64 j = 0; j < 8; ++j) r[j] = j < R ? load(x + j * ldx + 8 * t) : zero();
    transpose8(r);
    for (i64 l = 0; l < 8; ++l) {
      float* dst = xp + (l * T + t) * kGemmRows;
      if (t + 1 < T) {
        store(dst, r[l]);
      } else {
        float last[8];
        store(last, r[l]);
        std::memcpy(dst, last, kGemmRows * sizeof(float));
      }
    }
  }
}

// Rows [m, m + R) of y, the panel's outputs [n, n + J): the tile's sums (xp: the rows' packed
// tile), the last K % 8 products, the bias, the epilogue (store or add; a GELU comes after,
// along the row).
template <int R, class W>
inline void gemm_rows(float* y, const float* x, const W* w, const float* xp, const float* wp, const float* bias,
                      i64 m, i64 n, i64 J, i64 N, i64 K, Epilogue e) {
  const i64 K8 = K - K % 8;
  // The tile's outputs are R short pieces of R rows of y, one or two cache lines each, which no
  // hardware prefetcher foresees: asked for now, they arrive while the tile sums.
  for (int r = 0; r < R; ++r) {
    prefetch_write(y + (m + r) * N + n);
    prefetch_write(y + (m + r) * N + n + J - 1);
  }
  float sum[R][kPanel];
  gemm_sums<R>(sum, xp, wp, K8 / 8);
  for (int r = 0; r < R; ++r) {
    float* dst = y + (m + r) * N + n;
    if (J == kPanel && K8 == K) {  // a whole panel, no products left: 8 outputs at a time
      for (int h = 0; h < kPanel; h += 8) {
        Vec v = load(sum[r] + h);
        if (bias) v = add(v, load(bias + n + h));
        store(dst + h, e == Epilogue::kAdd ? add(load(dst + h), v) : v);
      }
      continue;
    }
    for (i64 j = 0; j < J; ++j) {
      float s = sum[r][j];
      for (i64 k = K8; k < K; ++k) s = std::fma(x[(m + r) * K + k], widen(w[(n + j) * K + k]), s);
      put(e, dst[j], bias ? s + bias[n + j] : s);
    }
  }
}

// Scratch a thread keeps for as long as it lives, one for each use: the panels a thread packs
// and uses, the tiles of x a call packs (the calling thread's, read by the team), the tiles of
// queries attend_rows packs.
enum class Scratch { kPanels, kTilesOfX, kTilesOfQueries };
template <Scratch S>
float* scratch(i64 floats) {
  thread_local aligned_vector<float> room;
  if (room.size() < static_cast<std::size_t>(floats)) room.resize(static_cast<std::size_t>(floats));
  return room.data();
}

// Calls f.template operator()<R>() with R = rows (1 .. 6) as a constant.
template <class F>
inline void with_rows(i64 rows, F&& f) {
  switch (rows) {
    case 6: f.template operator()<6>(); break;
    case 5: f.template operator()<5>(); break;
    case 4: f.template operator()<4>(); break;
    case 3: f.template operator()<3>(); break;
    case 2: f.template operator()<2>(); break;
    case 1: f.template operator()<1>(); break;
    default: break;
  }
}

template <class W>
void gemm(float* y, const float* x, const W* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e) {
  const i64 T = K / 8, tiles = (M + kGemmRows - 1) / kGemmRows, tile_floats = kGemmRows * 8 * T;
  const i64 panel_floats = kPanel * 8 * T;
  const bool gelu = e == Epilogue::kGeluTanh || e == Epilogue::kGeluErf;
  const Epilogue epilogue = gelu ? Epilogue::kStore : e;
  float* xp = scratch<Scratch::kTilesOfX>(tiles * tile_floats);
  share(tiles, 4, [&](i64 i0, i64 i1) {
    for (i64 i = i0; i < i1; ++i)
      pack_tile(xp + i * tile_floats, x + i * kGemmRows * K, K, std::min(kGemmRows, M - i * kGemmRows), T);
  });
  const i64 per_block =
      std::clamp<i64>(kBlockBytes / std::max<i64>(1, panel_floats * static_cast<i64>(sizeof(float))), 1, kPanelsPerBlock);
  share((N + kPanel - 1) / kPanel, per_block, [&](i64 p0, i64 p1) {
    float* wp = scratch<Scratch::kPanels>(per_block * panel_floats);
    for (i64 p = p0; p < p1; ++p) {
      const i64 n = p * kPanel, J = std::min(kPanel, N - n);
      const i64 next_rows = p + 1 < p1 ? std::min(kPanel, N - n - kPanel) : 0;
      pack_panel(wp + (p - p0) * panel_floats, w + n * K, K, J, T, next_rows > 0 ? w + (n + kPanel) * K : nullptr,
                 next_rows);
    }
    for (i64 i = 0; i < tiles; ++i) {
      const i64 m = i * kGemmRows;
      with_rows(std::min(kGemmRows, M - m), [&]<int R>() {
        for (i64 p = p0; p < p1; ++p) {
          const i64 n = p * kPanel;
          gemm_rows<R>(y, x, w, xp + i * tile_floats, wp + (p - p0) * panel_floats, bias, m, n,
                       std::min(kPanel, N - n), N, K, epilogue);
        }
      });
    }
    if (gelu)
      for (i64 r = 0; r < M; ++r) gelu_row(y + r * N + p0 * kPanel, std::min(N, p1 * kPanel) - p0 * kPanel, e);
  });
}

template <class W>
void linear_rows_impl(float* y, const float* x, const W* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e) {
  if (M >= kGemmThreshold) return gemm(y, x, w, bias, M, N, K, e);
  constexpr i64 kRowsOfW = 48;  // a block of W's rows (144 KiB at K = 768 in float32): one thread's share of work
  // A few rows (decoding): 1 x 4 or 2 x 4 tiles, four independent sums per row of x. Three rows
  // or more (a batch of sequences): 3 x 3 tiles, 9 sums from 6 loads. Either way, and in the
  // GEMM above, every output is the same dot product (the order above).
  // GELU is applied after the block, along each row's piece of y, 8 outputs at a time (the
  // tiles' outputs come one at a time, and GELU's exp costs more than a tile's sums at K = 128).
  const bool gelu = e == Epilogue::kGeluTanh || e == Epilogue::kGeluErf;
  share(N, kRowsOfW, [&](i64 n0, i64 n1) {
    const Epilogue tiles = gelu ? Epilogue::kStore : e;
    if (M >= 3)
      block<3, 3>(y, x, w, bias, M, n0, n1, N, K, tiles);
    else
      block<2, 4>(y, x, w, bias, M, n0, n1, N, K, tiles);
    if (gelu)
      for (i64 m = 0; m < M; ++m) gelu_row(y + m * N + n0, n1 - n0, e);
  });
}

}  // namespace

void decode_parallel(i64 n, i64 grain, const std::function<void(i64, i64)>& body) { share(n, grain, body); }

void linear_rows(float* y, const float* x, const float* w, const float* bias, i64 M, i64 N, i64 K, Epilogue e) {
  linear_rows_impl(y, x, w, bias, M, N, K, e);
}
void linear_rows(float* y, const float* x, const std::uint16_t* w, const float* bias, i64 M, i64 N, i64 K,
                 Epilogue e) {
  linear_rows_impl(y, x, w, bias, M, N, K, e);
}

void layer_norm_rows(float* y, const float* x, const float* w, const float* b, i64 M, i64 C, float eps) {
  share(M, 16, [&](i64 m0, i64 m1) {
    for (i64 m = m0; m < m1; ++m) {
      const float* row = x + m * C;
      double sum = 0, sq = 0;
      for (i64 c = 0; c < C; ++c) sum += row[c];
      const double mean = sum / static_cast<double>(C);
      for (i64 c = 0; c < C; ++c) sq += (row[c] - mean) * (row[c] - mean);
      const float mu = static_cast<float>(mean);
      const float rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(C) + eps));
      float* out = y + m * C;
      for (i64 c = 0; c < C; ++c) out[c] = (row[c] - mu) * rstd * w[c] + (b ? b[c] : 0.0f);
    }
  });
}

namespace {

// The scores of R consecutive rows (queries q, stride ldq) against keys 0 .. t - 1, 3 keys at a
// time as R x 3 tiles of dot products, then the last keys 1 at a time: row r's score for key p
// goes to scores[r * lds + p], times scale. Every score is decode.h's dot product, whatever R.
template <int R>
void tile_scores(float* scores, i64 lds, const float* q, i64 ldq, const float* keys, i64 stride, i64 hs, i64 t,
                 float scale) {
  i64 p = 0;
  for (; p + 3 <= t; p += 3) {
    float s[R][3];
    dots<R, 3>(s, q, ldq, keys + p * stride, stride, hs);
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 3; ++j) scores[r * lds + p + j] = s[r][j] * scale;
  }
  for (; p < t; ++p) {
    float s[R][1];
    dots<R, 1>(s, q, ldq, keys + p * stride, stride, hs);
    for (int r = 0; r < R; ++r) scores[r * lds + p] = s[r][0] * scale;
  }
}

}  // namespace

namespace {

// The scores of rows [0, n) (row i's query at q + i * ldq, its keys 0 .. t0 + i) as GEMM tiles
// (gemm_sums above): the keys 16 at a time packed into a panel, against 6 rows of queries at a
// time. The numbers are tile_scores's (dots' order, then the last hs % 8 products, then the
// scale). A tile writes the scores of a panel's keys up to its last row's position; those past
// an earlier row's own position are never read.
void gemm_scores(float* scores, i64 lds, const float* q, i64 ldq, const float* keys, i64 stride, i64 hs, i64 t0,
                 i64 n, float scale) {
  const i64 K8 = hs - hs % 8, T = K8 / 8, keys_total = t0 + n;
  float* wp = scratch<Scratch::kPanels>(kPanel * K8);
  float* qp = scratch<Scratch::kTilesOfQueries>((n + kGemmRows - 1) / kGemmRows * kGemmRows * K8);
  for (i64 m = 0; m < n; m += kGemmRows) pack_tile(qp + m * K8, q + m * ldq, ldq, std::min(kGemmRows, n - m), T);
  for (i64 k0 = 0; k0 < keys_total; k0 += kPanel) {
    const i64 J = std::min(kPanel, keys_total - k0);
    pack_panel(wp, keys + k0 * stride, stride, J, T, static_cast<const float*>(nullptr), 0);
    // Tiles whose rows' last keys are all before this panel have all their scores already.
    for (i64 m = std::max<i64>(0, k0 - t0) / kGemmRows * kGemmRows; m < n; m += kGemmRows)
      with_rows(std::min(kGemmRows, n - m), [&]<int R>() {
        // The tile's scores land in R rows far apart (a row of scores per head is block_size
        // long): their cache lines, asked for now, arrive while the tile sums (as gemm_rows).
        for (int r = 0; r < R; ++r) {
          prefetch_write(scores + (m + r) * lds + k0);
          prefetch_write(scores + (m + r) * lds + k0 + J - 1);
        }
        float sum[R][kPanel];
        gemm_sums<R>(sum, qp + m * K8, wp, T);
        const i64 upto = std::min(J, t0 + m + R - k0);  // keys of this panel the tile's last row sees
        if (upto == kPanel && K8 == hs) {  // 8 scores at a time (the sums read back as they were written)
          for (int r = 0; r < R; ++r)
            for (int h = 0; h < kPanel; h += 8) store(scores + (m + r) * lds + k0 + h, mul(load(sum[r] + h), splat(scale)));
          return;
        }
        for (int r = 0; r < R; ++r)
          for (i64 j = 0; j < upto; ++j) {
            float s = sum[r][j];
            for (i64 k = K8; k < hs; ++k) s = std::fma(q[(m + r) * ldq + k], keys[(k0 + j) * stride + k], s);
            scores[(m + r) * lds + k0 + j] = s * scale;
          }
      });
  }
}

// o_r (hs) = sum over p < t0 + r of sc_r[p] v_p, for R consecutive rows r of one sequence (row r
// sees t0 + r positions; its scores at scores + r * lds, its output at out + r * ldo): each o[d]
// one FMA per p in increasing p, from 0, as attend_rows has always summed it. D vectors of d at
// a time for all R rows, R x D = 8 to 12 sums in flight: each load of v serves R rows.
template <int R>
void weigh_values(float* out, i64 ldo, const float* scores, i64 lds, const float* values, i64 stride, i64 hs, i64 t0) {
  constexpr int D = R <= 2 ? 4 : 2;
  i64 d0 = 0;
  for (; d0 + 8 * D <= hs; d0 += 8 * D) {
    Vec acc[R][D];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < D; ++j) acc[r][j] = zero();
    for (i64 p = 0; p < t0; ++p) {
      const float* v = values + p * stride + d0;
      Vec vj[D];
      for (int j = 0; j < D; ++j) vj[j] = load(v + 8 * j);
      for (int r = 0; r < R; ++r) {
        const Vec a = splat(scores[r * lds + p]);
        for (int j = 0; j < D; ++j) acc[r][j] = fma(a, vj[j], acc[r][j]);
      }
    }
    for (int r = 1; r < R; ++r)  // the later rows' last positions
      for (i64 p = t0; p < t0 + r; ++p) {
        const float* v = values + p * stride + d0;
        const Vec a = splat(scores[r * lds + p]);
        for (int j = 0; j < D; ++j) acc[r][j] = fma(a, load(v + 8 * j), acc[r][j]);
      }
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < D; ++j) store(out + r * ldo + d0 + 8 * j, acc[r][j]);
  }
  for (int r = 0; r < R; ++r) {
    float* o = out + r * ldo;
    std::fill(o + d0, o + hs, 0.0f);
    for (i64 p = 0; p < t0 + r; ++p) {
      const float a = scores[r * lds + p];
      const float* v = values + p * stride;
      for (i64 d = d0; d < hs; ++d) o[d] = std::fma(a, v[d], o[d]);
    }
  }
}

}  // namespace

float row_max(const float* v, i64 n) {
  float top = -INFINITY;
  i64 p = 0;
  if (n >= 8) {
    Vec m = load(v);
    for (p = 8; p + 8 <= n; p += 8) m = vmax(load(v + p), m);
    float lanes[8];
    store(lanes, m);
    for (const float l : lanes) top = std::max(top, l);
  }
  for (; p < n; ++p) top = std::max(top, v[p]);
  return top;
}

float softmax_total(const float* e, i64 n) {
  Vec lanes = zero();
  i64 p = 0;
  for (; p + 8 <= n; p += 8) lanes = add(lanes, load(e + p));
  float total = hsum(lanes);
  for (; p < n; ++p) total += e[p];
  return total;
}

void attend_rows(float* out, i64 ldo, const float* q, i64 ldq, const float* keys, const float* values, i64 t0,
                 i64 n, i64 stride, i64 hs, float* scores, i64 lds) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  if (n >= kGemmRows) {
    gemm_scores(scores, lds, q, ldq, keys, stride, hs, t0, n, scale);
  } else {
    // A few rows: 3 x 3 tiles of dot products (6 loads per 9 products, where one row's dots take
    // 2 per product), then the rows left (a decoding step's one row) as 1 x 3 tiles, 3 sums in
    // flight, not 1. A tile's keys run to its last row's position.
    i64 i0 = 0;
    for (; i0 + 3 <= n; i0 += 3)
      tile_scores<3>(scores + i0 * lds, lds, q + i0 * ldq, ldq, keys, stride, hs, t0 + i0 + 3, scale);
    for (i64 i = i0; i < n; ++i)
      tile_scores<1>(scores + i * lds, lds, q + i * ldq, ldq, keys, stride, hs, t0 + i + 1, scale);
  }
  // Each row's softmax over its own positions 0 .. t0 + i, then the weighted sums of values 6
  // rows at a time, then each row divided by its total.
  for (i64 i0 = 0; i0 < n; i0 += kGemmRows) {
    const i64 rows = std::min(kGemmRows, n - i0);
    float inv[kGemmRows];
    for (i64 i = i0; i < i0 + rows; ++i) {
      const i64 t = t0 + i + 1;
      float* sc = scores + i * lds;
      const float top = row_max(sc, t);
#pragma omp simd
      for (i64 p = 0; p < t; ++p) sc[p] = exp_vec(sc[p] - top);
      inv[i - i0] = 1.0f / softmax_total(sc, t);
    }
    float* o = out + i0 * ldo;
    const float* sc = scores + i0 * lds;
    with_rows(rows, [&]<int R>() { weigh_values<R>(o, ldo, sc, lds, values, stride, hs, t0 + i0 + 1); });
    for (i64 r = 0; r < rows; ++r)
      for (i64 d = 0; d < hs; ++d) o[r * ldo + d] *= inv[r];
  }
}

void attend_row(float* out, const float* q, const float* keys, const float* values, i64 t, i64 stride, i64 hs,
                float* scores) {
  attend_rows(out, hs, q, hs, keys, values, t - 1, 1, stride, hs, scores, t);
}

// ---------------------------------------------------------------------------------------------
// As registry ops (kernels/signatures.h), for the kernel lab (chapter 11). The float64 loops are
// the formulas as written, no tiles: the lab checks them against its own reference too.

namespace {
void check_epilogue(int epilogue) {
  BRRR_CHECK(epilogue >= 0 && epilogue <= 3, "linear_rows: epilogue ", epilogue,
             " is not 0 (store), 1 (add), 2 (GELU, tanh) or 3 (GELU, erf)");
}
}  // namespace

void linear_rows_op(float* y, const float* x, const float* w, const float* bias, i64 M, i64 N, i64 K, int epilogue) {
  check_epilogue(epilogue);
  linear_rows(y, x, w, bias, M, N, K, static_cast<Epilogue>(epilogue));
}

void linear_rows_loop(double* y, const double* x, const double* w, const double* bias, i64 M, i64 N, i64 K,
                      int epilogue) {
  check_epilogue(epilogue);
  decode_parallel(M, 1, [&](i64 begin, i64 end) {
    for (i64 m = begin; m < end; ++m)
      for (i64 n = 0; n < N; ++n) {
        double s = bias ? bias[n] : 0.0;
        for (i64 k = 0; k < K; ++k) s += x[m * K + k] * w[n * K + k];
        double& out = y[m * N + n];
        if (epilogue == 0) out = s;
        else if (epilogue == 1) out += s;
        else if (epilogue == 2) out = 0.5 * s * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (s + 0.044715 * s * s * s)));
        else out = gelu_erf_value(s);
      }
  });
}

void attend_rows_op(float* out, const float* q, const float* k, const float* v, i64 t0, i64 n, i64 hs) {
  if (n <= 0) return;
  // The Decoder's groups of rows (models/gpt/decode.cpp), one after the other.
  std::vector<float> scores(static_cast<std::size_t>(std::min(n, kAttendGroup) * (t0 + n)));
  for (i64 g = 0; g < n; g += kAttendGroup)
    attend_rows(out + g * hs, hs, q + g * hs, hs, k, v, t0 + g, std::min(kAttendGroup, n - g), hs, hs,
                scores.data(), t0 + n);
}

void attend_rows_loop(double* out, const double* q, const double* k, const double* v, i64 t0, i64 n, i64 hs) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  decode_parallel(n, 1, [&](i64 begin, i64 end) {
    std::vector<double> s(static_cast<std::size_t>(t0 + n));
    for (i64 i = begin; i < end; ++i) {
      const i64 t = t0 + i + 1;  // positions 0 .. t0 + i
      double top = -INFINITY;
      for (i64 p = 0; p < t; ++p) {
        double dot = 0;
        for (i64 d = 0; d < hs; ++d) dot += q[i * hs + d] * k[p * hs + d];
        s[p] = dot * scale;
        top = std::max(top, s[p]);
      }
      double total = 0;
      for (i64 p = 0; p < t; ++p) total += s[p] = std::exp(s[p] - top);
      for (i64 d = 0; d < hs; ++d) {
        double sum = 0;
        for (i64 p = 0; p < t; ++p) sum += s[p] * v[p * hs + d];
        out[i * hs + d] = sum / total;
      }
    }
  });
}

}  // namespace brrr::kernels::cpu
