// brrr/median_timer.h: the one timer of the kernel lab, the exercise graders and the
// benchmarks: warm up, time several runs, take the median. Chapter 04 (matmul and the CPU
// backend) explains how to measure this way: the median is not moved by one stray slow run.
// Chapter 11's kernel lab times with it on a GPU too, through the device's own clock (CUDA
// events).
// Read next: bench/bench_util.h, lab/timing.cpp.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace brrr {

struct MedianTime {
  double median = 0;  // seconds; with an even number of runs, the mean of the middle two
  double min = 0;     // seconds: the fastest run
  int runs = 0;       // the runs timed
};

// Seconds that one call of work takes by the host's steady clock: the default clock.
struct SteadyClock {
  template <class Work>
  double operator()(Work& work) const {
    const auto start = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
};

// Calls work `warmup` times untimed, then times `repeats` calls (at least one) with `clock`
// (clock(work) runs work once and returns the seconds it took), and returns their median
// and min. With budget_seconds > 0 it stops early, after at least three timed runs, once the
// timed runs have taken that long (a slow variant on a large size).
template <class Work, class Clock = SteadyClock>
MedianTime time_median(Work&& work, int warmup, int repeats, Clock clock = {}, double budget_seconds = 0) {
  for (int i = 0; i < warmup; ++i) work();
  std::vector<double> times;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    times.push_back(clock(work));
    const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (budget_seconds > 0 && times.size() >= 3 && spent > budget_seconds) break;
  }
  std::sort(times.begin(), times.end());
  MedianTime t;
  t.runs = static_cast<int>(times.size());
  t.min = times.front();
  const std::size_t half = times.size() / 2;
  t.median = times.size() % 2 ? times[half] : 0.5 * (times[half - 1] + times[half]);
  return t;
}

}  // namespace brrr
