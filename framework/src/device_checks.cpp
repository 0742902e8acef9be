// framework/src/device_checks.cpp: index checks of device tensors with no wait for the
// device. Chapter 17 (a training step with no waits); the check is chapter 02's.
// Read before: dispatch.h (checked_on_device, raise_device_errors).
//
// An index on the host is checked on the host, at once. One on a device would have to be
// read back first, and every read makes the host wait for the device: two waits a training
// step (the token ids and the targets). So a device index is checked on the device: the
// check_indices kernel replaces a bad one by 0 (the op after it then stays in bounds) and
// notes the lowest bad position in one int of a small table, a slot per check. The host
// reads the table at the next copy to the host it makes anyway (a logged loss, an
// evaluation, a checkpoint: Tensor::to, cuda::synchronize) and throws there, naming the op,
// the index and its position. Until then the results of the bad rows are wrong; nothing
// reads out of bounds.
//
// Checks captured in a CUDA graph (chapter 17) run again at every replay, into the slots they
// had in the capture. A capture gets a table of its own, reset by a memset at the start of
// every replay; its checks stay listed, read with the others at each read back, until the
// graph is destroyed.
#include <algorithm>
#include <climits>
#include <mutex>
#include <vector>

#include "brrr/cuda.h"
#include "brrr/error.h"
#include "dispatch.h"
#include "kernels/cuda/runtime.h"

namespace brrr::detail {
namespace {

constexpr int kSlots = 64;            // checks between two reads (more: a read in between)
constexpr unsigned char kNone = 0x7f;  // a slot's bytes before a bad index lowers it: 0x7f7f7f7f

struct Check {
  const char* op;
  Tensor idx;  // the indices as given, to report the bad one
  std::int64_t limit;
  int slot;
};

// A captured graph's checks and its table.
struct GraphChecks {
  int graph = 0;
  Tensor table;
  std::vector<Check> checks;
};

struct DeviceChecks {
  std::mutex mutex;
  Tensor table;  // (kSlots) int32 on the CUDA device
  std::vector<Check> pending;
  int capturing = 0;  // the graph being captured, if any
  std::vector<GraphChecks> graphs;
};

DeviceChecks& checks() {
  static DeviceChecks* s = new DeviceChecks;  // never destroyed, like the allocator it uses
  return *s;
}

// Throws for the first of `checks` whose slot of `first_bad` (a copy of their table) names a
// bad index.
void raise_first(const std::vector<Check>& checks, const std::int32_t* first_bad, gpu::Runtime& runtime) {
  for (const Check& c : checks) {
    const std::int32_t position = first_bad[c.slot];
    if (position == 0x7f7f7f7f) continue;
    std::int32_t value = 0;
    runtime.copy(&value, static_cast<const std::int32_t*>(c.idx.raw_data()) + position, sizeof value,
                 gpu::CopyKind::DeviceToHost);
    fail(c.op, ": index ", value, " at position ", position, " is out of range for ", c.limit,
         " entries (found on the device; reported at the first read back after it)");
  }
}

// Reads the tables (one copy each), resets the eager one, and throws for the first check that
// found a bad index. s.mutex held.
void raise_locked(DeviceChecks& s) {
  if (s.capturing) return;  // nothing captured has run yet, and nothing may wait now
  if (s.graphs.empty() && s.pending.empty()) return;
  gpu::Runtime& runtime = cuda_runtime_for("index check");
  std::int32_t first_bad[kSlots];
  for (const GraphChecks& g : s.graphs) {
    runtime.copy(first_bad, g.table.raw_data(), sizeof first_bad, gpu::CopyKind::DeviceToHost);
    raise_first(g.checks, first_bad, runtime);
  }
  if (s.pending.empty()) return;
  runtime.copy(first_bad, s.table.raw_data(), sizeof first_bad, gpu::CopyKind::DeviceToHost);
  runtime.memset(s.table.raw_data(), kNone, sizeof first_bad);
  const std::vector<Check> done = std::move(s.pending);
  s.pending.clear();
  raise_first(done, first_bad, runtime);
}

Tensor run_check(const Tensor& table, int slot, const Tensor& idx, std::int64_t limit, std::int64_t allowed) {
  Tensor safe = new_tensor(idx.shape(), kInt32, idx.device());
  static kernels::Kernel k(kernels::op::check_indices);
  k(idx.device().type, kInt32)(safe.data_ptr<std::int32_t>(), table.data_ptr<std::int32_t>() + slot,
                               idx.data_ptr<std::int32_t>(), idx.numel(), limit, allowed, stream(idx.device()));
  return safe;
}

// A check inside a capture: a slot of the capture's own table (made, and reset by the replay,
// at the capture's first check). s.mutex held.
Tensor checked_in_graph(DeviceChecks& s, const char* op, const Tensor& idx, std::int64_t limit, std::int64_t allowed) {
  if (s.graphs.empty() || s.graphs.back().graph != s.capturing) {
    GraphChecks g;
    g.graph = s.capturing;
    g.table = new_tensor({kSlots}, kInt32, idx.device());
    cuda_runtime_for(op).memset(g.table.raw_data(), kNone, kSlots * sizeof(std::int32_t));
    s.graphs.push_back(std::move(g));
  }
  GraphChecks& g = s.graphs.back();
  const int slot = static_cast<int>(g.checks.size());
  BRRR_CHECK(slot < kSlots, op, ": more than ", kSlots, " index checks on the device in one CUDA graph");
  g.checks.push_back({op, idx, limit, slot});
  return run_check(g.table, slot, idx, limit, allowed);
}

}  // namespace

void begin_graph_checks(int graph) {
  DeviceChecks& s = checks();
  std::lock_guard<std::mutex> lock(s.mutex);
  raise_locked(s);  // what ran before the capture is reported before it
  s.capturing = graph;
}

void end_graph_checks() {
  DeviceChecks& s = checks();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.capturing = 0;
}

void drop_graph_checks(int graph) {
  DeviceChecks& s = checks();
  std::lock_guard<std::mutex> lock(s.mutex);
  std::erase_if(s.graphs, [graph](const GraphChecks& g) { return g.graph == graph; });
}

Tensor checked_on_device(const char* op, const Tensor& idx, std::int64_t limit, std::int64_t allowed) {
  DeviceChecks& s = checks();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.capturing) return checked_in_graph(s, op, idx, limit, allowed);
  if (!s.table.defined()) {
    s.table = new_tensor({kSlots}, kInt32, idx.device());
    cuda_runtime_for(op).memset(s.table.raw_data(), kNone, kSlots * sizeof(std::int32_t));
  }
  if (static_cast<int>(s.pending.size()) == kSlots) raise_locked(s);  // a full table: read it now
  const int slot = static_cast<int>(s.pending.size());
  s.pending.push_back({op, idx, limit, slot});
  return run_check(s.table, slot, idx, limit, allowed);
}

void raise_device_errors() {
  DeviceChecks& s = checks();
  std::lock_guard<std::mutex> lock(s.mutex);
  raise_locked(s);
}

}  // namespace brrr::detail
