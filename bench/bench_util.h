// bench/bench_util.h: timing helpers shared by the benchmark programs.
// Chapter 04 (matmul and the CPU backend) explains how to measure: warm up, repeat, take
// the median (robust to a stray slow run; brrr/median_timer.h, the lab's and the graders'
// timer too), and report the machine.
#pragma once
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "brrr/cuda.h"
#include "brrr/dtype.h"
#include "brrr/median_timer.h"

namespace brrr::bench {

// Median seconds per call of fn over `repeats` runs after `warmup` runs (brrr/median_timer.h).
template <class Fn>
double median_seconds(Fn&& fn, int repeats = 10, int warmup = 2) {
  return time_median(fn, warmup, repeats).median;
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
