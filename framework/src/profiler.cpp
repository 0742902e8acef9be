// framework/src/profiler.cpp: per-op wall time (see brrr/profiler.h). Chapter 08.
#include "brrr/profiler.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <vector>

#include "brrr/cuda.h"
#include "dispatch.h"

namespace brrr::profiler {

namespace {
struct Row {
  long long calls = 0;
  long long total_ns = 0;
};
bool on = false;
thread_local int depth = 0;
std::map<std::string, Row>& table() {
  static std::map<std::string, Row> rows;
  return rows;
}
long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void enable(bool enable_it) { on = enable_it; }
bool enabled() { return on; }
void reset() { table().clear(); }

// On a GPU an op returns once its kernels are queued: the profiler waits for the device at
// both ends of an op, so each row is the op's device time (plus its launches), and the step
// runs slower while profiled. Inside a CUDA graph's capture nothing runs and nothing may wait:
// ops are not timed there; a replay is timed as one row, "cuda graph replay" (cuda.cpp).
Scope::Scope(const char* name) : name_(name), start_ns_(0), active_(on && depth == 0 && !cuda::capturing()) {
  ++depth;
  if (!active_) return;
  detail::synchronize_cuda_if_in_use();
  start_ns_ = now_ns();
}

Scope::~Scope() {
  --depth;
  if (!active_) return;
  detail::synchronize_cuda_if_in_use();
  Row& row = table()[name_];
  row.calls += 1;
  row.total_ns += now_ns() - start_ns_;
}

std::string report(double steps) {
  std::vector<std::pair<std::string, Row>> rows(table().begin(), table().end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
  long long total = 0;
  for (const auto& [name, row] : rows) total += row.total_ns;
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-28s %10s %14s %12s %8s\n", "op", "calls/step", "ms/step", "us/call", "share");
  out += line;
  for (const auto& [name, row] : rows) {
    std::snprintf(line, sizeof line, "%-28s %10.1f %14.3f %12.1f %7.1f%%\n", name.c_str(), row.calls / steps,
                  row.total_ns / 1e6 / steps, row.total_ns / 1e3 / std::max<long long>(row.calls, 1),
                  total ? 100.0 * row.total_ns / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-28s %10s %14.3f\n", "total in ops", "", total / 1e6 / steps);
  out += line;
  return out;
}

}  // namespace brrr::profiler
