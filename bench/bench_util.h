// bench/bench_util.h: timing helpers shared by the benchmark programs.
// Chapter 04 (matmul and the CPU backend) explains how to measure: warm up, repeat, take
// the median (robust to a stray slow run), and report the machine.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "brrr/cuda.h"
#include "brrr/dtype.h"

namespace brrr::bench {

// Median seconds per call of fn over `repeats` runs after `warmup` runs.
template <class Fn>
double median_seconds(Fn&& fn, int repeats = 10, int warmup = 2) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

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

}  // namespace brrr::bench
