// bench/bench_util.h: timing helpers shared by the benchmark programs.
// Chapter 04 (matmul and the CPU backend) explains how to measure: warm up, repeat, take
// the median (robust to a stray slow run; brrr/median_timer.h, the lab's and the graders'
// timer too), and report the machine.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "brrr/cuda.h"
#include "brrr/dtype.h"
#include "brrr/median_timer.h"

namespace brrr::bench {

// Median seconds per call of fn over `repeats` runs after `warmup` runs (brrr/median_timer.h).
template <class Fn>
double median_seconds(Fn&& fn, int repeats = 10, int warmup = 2) {
  return time_median(fn, warmup, repeats).median;
}

// The median of three runs, for benchmarks whose runs each need a setup kept out of the time
// (bench_decode, bench_decode_gpu: a fresh cache and its prompt).
inline double median3(double a, double b, double c) { return std::max(std::min(a, b), std::min(std::max(a, b), c)); }

// The device a benchmark runs on, from --device cpu|cuda|emulator; nullopt (after a message
// naming `program`) when it asks for a GPU that is not there.
inline std::optional<Device> bench_device(const std::string& name, const char* program) {
  if (name == "emulator") cuda::use_emulator();
  if (name == "cpu") return kCPU;
  if (!cuda::is_available()) {
    std::fprintf(stderr, "%s: no CUDA GPU here (use --device cpu or emulator)\n", program);
    return std::nullopt;
  }
  return Device::cuda();
}

inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

// body(t) on `threads` threads of their own, t = 0 .. threads - 1; returns when all are done.
template <class Body>
void on_threads(int threads, const Body& body) {
  std::vector<std::thread> team;
  for (int t = 0; t < threads; ++t) team.emplace_back(body, t);
  for (std::thread& t : team) t.join();
}

// The CPU's arithmetic peak, measured: each of `threads` threads runs 12 independent chains of
// float32 multiply-adds as wide as the build's widest vector (16 lanes with AVX-512, 8 with AVX2:
// a = a * b + c, which -march=native compiles to one FMA instruction; 12 chains hide the FMA's
// latency on two FMA units) for 100 million steps (about 0.2 s on the project's Zen 3), and the
// FLOPs of all threads over the wall time are the peak in GFLOP/s. No memory is touched: this is
// the roof of the roofline that no kernel can pass, where a large matmul (the lab's `roof`) is
// what a good kernel reaches.
inline constexpr int kPeakLanes =
#if defined(__AVX512F__)
    16;
#else
    8;
#endif
inline double fma_peak_gflops(int threads) {
  typedef float vec __attribute__((vector_size(4 * kPeakLanes)));
  constexpr int kChains = 12;
  constexpr long kIterations = 100'000'000;
  std::vector<float> sink(static_cast<std::size_t>(threads));
  const auto chains = [&](int t) {
    vec a[kChains];
    for (int i = 0; i < kChains; ++i) a[i] = vec{} + (1.0f + 1e-7f * static_cast<float>(i + t));
    const vec b = vec{} + 0.9999999f, c = vec{} + 1e-7f;
    for (long it = 0; it < kIterations; ++it)
      for (int i = 0; i < kChains; ++i) a[i] = a[i] * b + c;
    float s = 0;
    for (int i = 0; i < kChains; ++i) s += a[i][0];
    sink[static_cast<std::size_t>(t)] = s;
  };
  const auto start = std::chrono::steady_clock::now();
  on_threads(threads, chains);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  volatile float kept = 0;  // the chains' results are used, so the loop is not dead code
  for (float s : sink) kept = kept + s;
  return 2.0 * kPeakLanes * kChains * static_cast<double>(kIterations) * threads / seconds / 1e9;
}

// The read bandwidth, measured: `threads` threads each sum their share of a 256 MiB float32
// array (each thread first writes its own share, so its pages sit where it runs) in 8-wide
// vectors, 4 sums in flight; the best of 5 passes, bytes read over the wall time, in GB/s.
// Decoding reads its weights and writes almost nothing, so this, not a copy's read + write
// figure, is the speed its weights can stream at.
inline double read_stream_gbs(int threads) {
  typedef float v8 __attribute__((vector_size(32)));
  constexpr std::size_t kFloats = std::size_t{64} << 20, kVectors = kFloats / 8;
  std::vector<v8> data(kVectors);
  std::vector<float> sink(static_cast<std::size_t>(threads));
  const auto share = [&](int t, std::size_t& begin, std::size_t& end) {
    begin = kVectors / static_cast<std::size_t>(threads) * static_cast<std::size_t>(t);
    end = t + 1 == threads ? kVectors : begin + kVectors / static_cast<std::size_t>(threads);
  };
  on_threads(threads, [&](int t) {
    std::size_t begin, end;
    share(t, begin, end);
    for (std::size_t i = begin; i < end; ++i) data[i] = v8{} + 1.0f;
  });
  double best = 0;
  for (int pass = 0; pass < 5; ++pass) {
    const auto start = std::chrono::steady_clock::now();
    on_threads(threads, [&](int t) {
      std::size_t begin, end;
      share(t, begin, end);
      v8 s0{}, s1{}, s2{}, s3{};
      std::size_t i = begin;
      for (; i + 4 <= end; i += 4) s0 += data[i], s1 += data[i + 1], s2 += data[i + 2], s3 += data[i + 3];
      for (; i < end; ++i) s0 += data[i];
      const v8 s = (s0 + s1) + (s2 + s3);
      float total = 0;
      for (int l = 0; l < 8; ++l) total += s[l];
      sink[static_cast<std::size_t>(t)] = total;
    });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(kFloats) * sizeof(float) / seconds / 1e9);
  }
  volatile float kept = 0;  // the sums are used, so the loop is not dead code
  for (float s : sink) kept = kept + s;
  return best;
}

}  // namespace brrr::bench
