// framework/src/profiler.cpp: per-op wall time as a table, and the same ops as a timeline
// (see brrr/profiler.h). Chapter 08.
#include "brrr/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "brrr/cuda.h"
#include "brrr/io.h"
#include "dispatch.h"

namespace brrr::profiler {

namespace {
struct Row {
  long long calls = 0;
  long long total_ns = 0;
};
// One slice of the timeline: an op (or a span) on a host thread.
struct Event {
  std::string name, shapes;
  const char* category;
  int thread;
  long long start_ns, duration_ns;
};
bool on = false;
std::atomic<bool> keep_events{false};
int trace_rank = 0;
thread_local int depth = 0;
// The category of the innermost traced scope: an op a backward closure calls is backward work.
thread_local const char* enclosing = nullptr;
std::mutex events_mutex;  // ops may run on several host threads; the table's rows do not (yet)
std::vector<Event>& events() {
  static std::vector<Event> all;
  return all;
}
std::map<std::string, Row>& table() {
  static std::map<std::string, Row> rows;
  return rows;
}
long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// Host threads numbered in the order they first record something: 0 is the one that trains.
int thread_number() {
  static std::atomic<int> next{0};
  thread_local const int mine = next++;
  return mine;
}
// Where in a training step an op ran: autograd names backward closures "<op> backward"; the
// optimizer's ops are the AdamW step and gradient clipping.
const char* category(std::string_view name) {
  constexpr std::string_view backward = " backward";
  if (name.size() > backward.size() && name.substr(name.size() - backward.size()) == backward) return "backward";
  if (name.starts_with("adamw") || name.starts_with("clip_grad_norm")) return "optimizer";
  return enclosing ? enclosing : "forward";
}
// A trace keeps at most this many events (about 100 MB): a long run's first steps show what
// every step does; the rest are counted and dropped.
constexpr std::size_t kMaxEvents = std::size_t{1} << 20;
std::size_t dropped = 0;
void add_event(Event event) {
  const std::lock_guard<std::mutex> lock(events_mutex);
  if (events().size() < kMaxEvents) events().push_back(std::move(event));
  else ++dropped;
}
}  // namespace

void enable(bool enable_it) { on = enable_it; }
bool enabled() { return on; }
void reset() {
  table().clear();
  const std::lock_guard<std::mutex> lock(events_mutex);
  events().clear();
  dropped = 0;
}

void trace(bool trace_it, int rank) {
  keep_events = trace_it;
  trace_rank = rank;
}

// On a GPU an op returns once its kernels are queued: the profiler waits for the device at
// both ends of an op, so each row is the op's device time (plus its launches), and the step
// runs slower while profiled. Inside a CUDA graph's capture nothing runs and nothing may wait:
// ops are not timed there; a replay is timed as one row, "cuda graph replay" (cuda.cpp).
Scope::Scope(const char* name)
    : name_(name), start_ns_(0), active_(on && depth == 0 && !cuda::capturing()), traced_(false) {
  ++depth;
  traced_ = keep_events && (active_ || (on && depth > 1 && !detail::cuda_in_use()));
  if (!active_ && !traced_) return;
  if (traced_) {
    category_ = category(name_);
    outer_category_ = enclosing;
    enclosing = category_;
  }
  if (active_) detail::synchronize_cuda_if_in_use();
  start_ns_ = now_ns();
}

void Scope::note_shapes(std::initializer_list<const std::vector<std::int64_t>*> shapes) {
  for (const std::vector<std::int64_t>* shape : shapes) {
    if (!shapes_.empty()) shapes_ += ", ";
    if (!shape) {
      shapes_ += "undefined";
      continue;
    }
    shapes_ += "(";
    for (std::size_t i = 0; i < shape->size(); ++i) shapes_ += (i ? ", " : "") + std::to_string((*shape)[i]);
    shapes_ += ")";
  }
}

Scope::~Scope() {
  --depth;
  if (!active_ && !traced_) return;
  if (active_) detail::synchronize_cuda_if_in_use();
  const long long end_ns = now_ns();
  if (active_) {
    Row& row = table()[name_];
    row.calls += 1;
    row.total_ns += end_ns - start_ns_;
  }
  if (traced_) {
    enclosing = outer_category_;
    add_event({name_, std::move(shapes_), category_, thread_number(), start_ns_, end_ns - start_ns_});
  }
}

Span::Span(std::string name) : name_(std::move(name)), start_ns_(0), traced_(on && keep_events && !cuda::capturing()) {
  if (!traced_) return;
  detail::synchronize_cuda_if_in_use();
  start_ns_ = now_ns();
}

Span::~Span() {
  if (!traced_) return;
  detail::synchronize_cuda_if_in_use();
  add_event({std::move(name_), "", "step", thread_number(), start_ns_, now_ns() - start_ns_});
}

// The JSON Trace Event Format: complete events ("ph": "X") with microsecond timestamps, one
// process per rank and one thread row per host thread, named by metadata events ("ph": "M").
std::size_t write_trace(const std::string& path) {
  std::vector<Event> all;
  std::size_t left_out = 0;
  {
    const std::lock_guard<std::mutex> lock(events_mutex);
    all = events();
    left_out = dropped;
  }
  long long origin = 0;
  if (!all.empty())
    origin = std::min_element(all.begin(), all.end(), [](const Event& a, const Event& b) {
               return a.start_ns < b.start_ns;
             })->start_ns;
  nlohmann::json list = nlohmann::json::array();
  list.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", trace_rank}, {"tid", 0},
                  {"args", {{"name", "brrr rank " + std::to_string(trace_rank)}}}});
  int threads = 0;
  for (const Event& e : all) threads = std::max(threads, e.thread + 1);
  const bool synchronized = detail::cuda_in_use();
  for (int t = 0; t < threads; ++t)
    list.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", trace_rank}, {"tid", t},
                    {"args", {{"name", "host thread " + std::to_string(t) +
                                           (synchronized ? " (ops synchronised with the device: device time)" : "")}}}});
  for (const Event& e : all) {
    nlohmann::json event = {{"name", e.name}, {"cat", e.category}, {"ph", "X"}, {"pid", trace_rank},
                            {"tid", e.thread}, {"ts", static_cast<double>(e.start_ns - origin) / 1e3},
                            {"dur", static_cast<double>(e.duration_ns) / 1e3}};
    if (!e.shapes.empty()) event["args"] = {{"shapes", e.shapes}};
    list.push_back(std::move(event));
  }
  nlohmann::json trace = {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"}};
  if (left_out) trace["otherData"] = {{"dropped_events", left_out}, {"kept_events", all.size()}};
  write_file_atomic(path, trace.dump() + "\n");
  return all.size();
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
