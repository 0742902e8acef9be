// brrr/profiler.h: where the time goes, op by op.
// Chapter 08 (training) uses it to profile a training step; chapter 17 compares composed and
// fused steps with it.
//
// When enabled, every op records its wall time under its name, and every backward closure
// under "<name> backward". With a CUDA device in use, the profiler waits for the device before
// and after each op, so the time is the op's GPU time (and the profiled step runs slower). Only the outermost op is counted (mean calls sum and div: the time
// goes to "mean"), so the rows add up to the time spent in ops. Off by default: then each op
// pays one predictable branch.
#pragma once
#include <string>

namespace brrr::profiler {

void enable(bool on = true);
bool enabled();
void reset();
// A table: op, calls, total ms, ms per call, share of the total, sorted by total time.
std::string report(double step_count = 1.0);

class Scope {
 public:
  explicit Scope(const char* name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* name_;
  long long start_ns_;
  bool active_;
};

}  // namespace brrr::profiler

#define BRRR_PROFILE(name) ::brrr::profiler::Scope brrr_profile_scope_(name)
