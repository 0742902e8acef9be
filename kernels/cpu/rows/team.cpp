// kernels/cpu/rows/team.cpp: the thread team the row kernels share their work over (chapter 08,
// "Why decoding is memory-bound"). Read before: rows.h, internal.h. Read next: rows.cpp (the
// kernels that run on it).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/rows/internal.h"
#include "kernels/cpu/rows/rows.h"

namespace brrr::kernels::cpu {

using namespace rows_detail;

namespace {

// ---------------------------------------------------------------------------------------------
// The team: how the row kernels (rows.cpp, gemm.cpp, amx.cpp) share work among threads
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
    done_.store(0, std::memory_order_relaxed);
    const std::uint64_t generation = ++generation_;
    job_.store(generation << 32 | static_cast<std::uint64_t>(blocks), std::memory_order_relaxed);
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
      // The block count is read with its generation: job_ is written before word_, so it is
      // this job's or a later one's. A later one's count is not this job's (a thread that read
      // w as the last job's word, all claimed, and the next job's count, could claim the next
      // job's block under the last job's word, and its `done` let the caller return while it ran).
      const std::uint64_t job = job_.load(std::memory_order_relaxed);
      if ((job >> 32) != (w >> 32) || block >= static_cast<i64>(job & 0xFFFFFFFFu)) return;
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
  std::atomic<std::uint64_t> job_{0};   // the job's generation (high 32 bits), its block count (low)
  std::atomic<i64> done_{0};
  std::atomic<void (*)(void*, i64)> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int> sleepers_{0};
  std::uint64_t generation_ = 0;  // the caller's
  std::mutex mutex_, busy_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::thread> helpers_;
};

}  // namespace

void rows_detail::run_blocks(i64 blocks, void (*fn)(void*, i64), void* ctx) { Team::get().run(blocks, fn, ctx); }

void rows_parallel(i64 n, i64 grain, const std::function<void(i64, i64)>& body) { share(n, grain, body); }

}  // namespace brrr::kernels::cpu
