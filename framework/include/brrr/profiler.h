// brrr/profiler.h: where the time goes, op by op, as a table and as a timeline.
// Chapter 08 (training) uses it to profile a training step; chapter 17 compares composed and
// fused steps with it.
//
// When enabled, every op records its wall time under its name, and every backward closure
// under "<name> backward". With a CUDA device in use, the profiler waits for the device before
// and after each op, so the time is the op's GPU time (and the profiled step runs slower). Only
// the outermost op is counted (mean calls sum and div: the time goes to "mean"), so the rows
// add up to the time spent in ops. Off by default: then each op pays one predictable branch.
//
// With tracing on as well, every op is also kept as an event: when it started, how long it
// took, on which host thread, the shapes it was called on, and whether it ran in the forward,
// the backward or the optimizer. write_trace() saves them as a Chrome trace (the JSON Trace
// Event Format that Perfetto, ui.perfetto.dev, and chrome://tracing open): one row per host
// thread, ops inside ops nested below them, and Span marks such as "step 12" above them. The
// nested ops are traced on the CPU only: on a CUDA device an inner op would show its launch,
// not its kernel, so there only the outermost ops (the synchronised ones) appear.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace brrr::profiler {

void enable(bool on = true);
bool enabled();
void reset();  // clears the table and the trace
// A table: op, calls, total ms, ms per call, share of the total, sorted by total time.
std::string report(double step_count = 1.0);

// The timeline. trace(true) keeps events while the profiler is enabled; `rank` names the
// process row (the data-parallel rank). write_trace writes them atomically and returns how many
// (a trace keeps the first 2^20 events; it says in "otherData" how many it dropped after them).
void trace(bool on = true, int rank = 0);
std::size_t write_trace(const std::string& path);

class Scope {
 public:
  explicit Scope(const char* name);
  // The same, noting the shapes of the tensors the op was called on (for the trace only).
  template <class... Tensors>
  Scope(const char* name, const Tensors&... inputs) : Scope(name) {
    if (traced_) note_shapes({(inputs.defined() ? &inputs.shape() : nullptr)...});
  }
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  void note_shapes(std::initializer_list<const std::vector<std::int64_t>*> shapes);
  const char* name_;
  long long start_ns_;
  bool active_, traced_;
  const char* category_ = nullptr;        // forward, backward or optimizer (traced scopes only)
  const char* outer_category_ = nullptr;  // the enclosing scope's, restored at the end
  std::string shapes_;
};

// A named stretch of the timeline that is not an op (a training step, an evaluation): traced
// as a slice enclosing the ops inside it, never counted in the table.
class Span {
 public:
  explicit Span(std::string name);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  std::string name_;
  long long start_ns_;
  bool traced_;
};

}  // namespace brrr::profiler

// BRRR_PROFILE("matmul") or BRRR_PROFILE("matmul", a, b): the second form also notes a and b's shapes.
#define BRRR_PROFILE(...) ::brrr::profiler::Scope brrr_profile_scope_(__VA_ARGS__)
