// kernels/cuda/simt_counters.cpp: the emulator's memory counters: Nsight Compute's requests,
// sectors, wavefronts and bank conflicts, counted from every access of kernel code.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt_counters.h (the
// definitions), kernels/cuda/simt_race_detector.cpp (how accesses get here).
// Read next: lab/counters.cpp (the kernel lab's counters mode).
//
// How lanes become warp-level instructions
// ----------------------------------------
// The compiler's hooks give each access with the instruction's address (pc). On a GPU the
// lanes of a warp execute an instruction together; here each lane is a fiber that runs alone
// between barriers. So, for each block, the recorder numbers each lane's executions of each
// instruction: the k-th execution of pc by every lane of warp w is one request (an instance).
// With the instance it keeps each lane's phase (barriers the lane has passed) and position
// (counted accesses the lane made since its last barrier). When the block ends, each
// instruction of each warp is counted, and marked inexact when the pairing is doubtful:
//   - lanes of one instance are in different phases: they cannot be one instruction;
//   - lanes ran the instruction different numbers of times and, at some instance, at different
//     positions: not one loop that some lanes left early (there they run the same accesses,
//     at the same positions, until they leave), but lanes on different paths (a data-dependent
//     branch in a loop), where pairing k-th executions may pair different iterations.
// (Lanes that run an instruction equally often along different paths pass unmarked: the
// common `if (lane < 16)` before a shared store; a loop whose lanes take a data-dependent
// branch equally often but in different iterations is counted as if they took it together.)
#include "kernels/cuda/simt_counters.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/simt_internal.h"

namespace brrr::simt {

// ---------------------------------------------------------------------------------------------
// The counting of one instruction

namespace {
constexpr int kLanes = 32;
constexpr int kBanks = 32, kBankBytes = 4;

// The lanes of one phase of a shared access: all 32 for 4 bytes or less, 16 for 8 bytes, 8 for
// 16 bytes (with the model's phases; one phase of 32 lanes without).
int lanes_per_phase(int bytes, const MemoryModel& model) {
  if (!model.shared_phases || bytes <= 4) return kLanes;
  return kLanes * kBankBytes / bytes;
}
}  // namespace

int global_sectors(const WarpAccess& access, const MemoryModel& model) {
  const auto sector = static_cast<std::uintptr_t>(model.sector_bytes);
  std::uintptr_t sectors[kLanes * 2];
  int n = 0;
  for (int lane = 0; lane < kLanes; ++lane) {
    if (!(access.lanes >> lane & 1)) continue;
    const std::uintptr_t first = access.address[lane] / sector,
                         last = (access.address[lane] + static_cast<std::uintptr_t>(access.bytes) - 1) / sector;
    for (std::uintptr_t s = first; s <= last && n < kLanes * 2; ++s) sectors[n++] = s;
  }
  std::sort(sectors, sectors + n);
  return static_cast<int>(std::unique(sectors, sectors + n) - sectors);
}

int shared_wavefronts(const WarpAccess& access, const MemoryModel& model) {
  const int per_phase = lanes_per_phase(access.bytes, model);
  int wavefronts = 0;
  for (int first = 0; first < kLanes; first += per_phase) {
    // The distinct 4-byte words of this phase, then the most of them on one bank.
    std::uintptr_t words[kLanes * 4];
    int n = 0;
    for (int lane = first; lane < first + per_phase; ++lane) {
      if (!(access.lanes >> lane & 1)) continue;
      const std::uintptr_t begin = access.address[lane] / kBankBytes,
                           end = (access.address[lane] + static_cast<std::uintptr_t>(access.bytes) - 1) / kBankBytes;
      for (std::uintptr_t w = begin; w <= end && n < kLanes * 4; ++w) words[n++] = w;
    }
    if (n == 0) continue;
    std::sort(words, words + n);
    n = static_cast<int>(std::unique(words, words + n) - words);
    int on_bank[kBanks] = {};
    int most = 0;
    for (int i = 0; i < n; ++i) most = std::max(most, ++on_bank[words[i] % kBanks]);
    wavefronts += most;
  }
  return wavefronts;
}

int shared_ideal_wavefronts(const WarpAccess& access, const MemoryModel& model) {
  if (access.lanes == 0) return 0;
  if (!model.shared_phases) return 1;
  // One wavefront per phase that has a lane (a phase is at most 128 bytes: 32 x 4, 16 x 8, 8 x 16).
  const int per_phase = lanes_per_phase(access.bytes, model);
  int ideal = 0;
  for (int first = 0; first < kLanes; first += per_phase) {
    const std::uint32_t mask = per_phase == kLanes ? ~0u : ((1u << per_phase) - 1) << first;
    if (access.lanes & mask) ++ideal;
  }
  return ideal;
}

int distinct_bytes(const WarpAccess& access) {
  std::pair<std::uintptr_t, std::uintptr_t> spans[kLanes];
  int n = 0;
  for (int lane = 0; lane < kLanes; ++lane)
    if (access.lanes >> lane & 1)
      spans[n++] = {access.address[lane], access.address[lane] + static_cast<std::uintptr_t>(access.bytes)};
  std::sort(spans, spans + n);
  std::uintptr_t total = 0, covered = 0;  // covered: the end of what is counted so far
  for (int i = 0; i < n; ++i) {
    const std::uintptr_t begin = std::max(spans[i].first, covered);
    if (spans[i].second > begin) total += spans[i].second - begin;
    covered = std::max(covered, spans[i].second);
  }
  return static_cast<int>(total);
}

}  // namespace brrr::simt

// ---------------------------------------------------------------------------------------------
// The recorder: accesses of a block grouped into warp-level instructions

namespace brrr::simt::detail::counters {

thread_local Recorder* active __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

constexpr int kMaxThreads = 1024;
// An access wider than 16 bytes (a struct copied whole) is cut into 16-byte pieces, each one
// instruction, as a GPU would load it.
constexpr std::size_t kWidest = 16;

// The k-th execution of an instruction by the lanes of a warp.
struct Instance {
  std::uint32_t lanes = 0, shared = 0;  // bit l: lane l took part; its address is shared memory
  std::uint32_t phase[kLanes], position[kLanes];
  std::uintptr_t address[kLanes];
};

// One instruction (pc, piece) of one warp of the running block.
struct Site {
  std::uintptr_t pc = 0;
  bool write = false, async = false;
  int bytes = 0;
  std::uint32_t executions[kLanes] = {};
  std::vector<Instance> instances;
};

struct Key {
  std::uintptr_t pc;
  std::uint32_t warp_piece_write;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const { return std::hash<std::uintptr_t>()(k.pc * 31 + k.warp_piece_write); }
};

struct PcKey {
  std::uintptr_t pc;
  std::uint32_t piece_write_space;
  bool operator==(const PcKey&) const = default;
};
struct PcKeyHash {
  std::size_t operator()(const PcKey& k) const { return std::hash<std::uintptr_t>()(k.pc * 31 + k.piece_write_space); }
};

std::mutex settings_mutex;
std::atomic<bool> counting_on{false};
MemoryModel memory_model;
std::vector<LaunchCounts> finished;  // launches counted, not yet taken

}  // namespace

struct Recorder {
  MemoryModel model;
  bool strict = true;  // device memory (not HostMemoryKernels)
  std::uintptr_t arena_begin = 0, arena_bytes = 0;
  std::uintptr_t host_stack_low = 0, host_stack_bytes = 0;  // the launching thread's stack
  std::uintptr_t shared_begin = 0, shared_bytes = 0;
  // The running thread.
  int thread = 0;
  std::uintptr_t stack_low = 0, stack_bytes = 0;
  std::uint32_t phase[kMaxThreads] = {}, position[kMaxThreads] = {};
  // The block's instructions, and the launch's sums.
  std::unordered_map<Key, Site, KeyHash> sites;
  std::unordered_map<PcKey, InstructionCounts, PcKeyHash> by_pc;
  std::vector<std::uint64_t> sectors_read, sectors_written;
  LaunchCounts launch;
};

namespace {

Recorder& recorder() {
  static Recorder instance;
  return instance;
}

void compact(std::vector<std::uint64_t>& sectors) {
  std::sort(sectors.begin(), sectors.end());
  sectors.erase(std::unique(sectors.begin(), sectors.end()), sectors.end());
}

void note_sectors(Recorder& r, std::vector<std::uint64_t>& into, std::uintptr_t address, int bytes) {
  const auto sector = static_cast<std::uintptr_t>(r.model.sector_bytes);
  for (std::uintptr_t s = address / sector; s <= (address + static_cast<std::uintptr_t>(bytes) - 1) / sector; ++s)
    into.push_back(s);
  if (into.size() > (std::size_t{1} << 24)) compact(into);
}

// Counts one instruction of one warp, all its instances.
void count_site(Recorder& r, const Site& site) {
  // Is the pairing of the lanes' k-th executions doubtful?
  std::uint32_t fewest = ~0u, most = 0;
  for (std::uint32_t n : site.executions)
    if (n > 0) fewest = std::min(fewest, n), most = std::max(most, n);
  bool mixed_phases = false, mixed_positions = false;
  for (const Instance& in : site.instances) {
    const int first = __builtin_ctz(in.lanes);
    for (int lane = first + 1; lane < kLanes; ++lane) {
      if (!(in.lanes >> lane & 1)) continue;
      mixed_phases |= in.phase[lane] != in.phase[first];
      mixed_positions |= in.position[lane] != in.position[first];
    }
  }
  std::string why;
  if (mixed_phases)
    why = "lanes of a warp reach this instruction between different barriers: their executions cannot be paired";
  else if (fewest != most && mixed_positions)
    why = "lanes of a warp ran this instruction " + std::to_string(fewest) + " to " + std::to_string(most) +
          " times along different paths (a data-dependent branch in a loop?): pairing their k-th executions may "
          "pair different iterations";

  for (int space = 0; space < 2; ++space) {  // global, then shared (an instruction may mix them)
    InstructionCounts* counts = nullptr;
    for (const Instance& in : site.instances) {
      WarpAccess access;
      access.bytes = site.bytes;
      access.lanes = space == 0 ? in.lanes & ~in.shared : in.lanes & in.shared;
      if (!access.lanes) continue;
      std::copy(in.address, in.address + kLanes, access.address);
      if (!counts) {
        const PcKey key{site.pc,
                        static_cast<std::uint32_t>(site.bytes << 3 | site.async << 2 | site.write << 1 | space)};
        counts = &r.by_pc[key];
        counts->pc = site.pc;
        counts->space = space == 0 ? MemorySpace::kGlobal : MemorySpace::kShared;
        counts->store = site.write;
        counts->async_copy = site.async;
        counts->bytes = site.bytes;
        if (!why.empty() && counts->exact) {
          counts->exact = false;
          counts->inexact_why = why;
        }
      }
      const int lanes = __builtin_popcount(access.lanes);
      ++counts->requests;
      counts->lanes += static_cast<std::uint64_t>(lanes);
      const auto useful = static_cast<std::uint64_t>(distinct_bytes(access));
      counts->useful_bytes += useful;
      r.launch.lanes += static_cast<std::uint64_t>(lanes);
      if (space == 0) {
        const auto sectors = static_cast<std::uint64_t>(global_sectors(access, r.model));
        const std::uint64_t ideal = (useful + r.model.sector_bytes - 1) / static_cast<std::uint64_t>(r.model.sector_bytes);
        counts->sectors += sectors;
        counts->ideal_sectors += ideal;
        if (site.async) {
          r.launch.global_ldgsts_ideal_sectors += ideal;
          r.launch.global_ldgsts_requests += 1;
          r.launch.global_ldgsts_sectors += sectors;
        } else {
          (site.write ? r.launch.global_st_ideal_sectors : r.launch.global_ld_ideal_sectors) += ideal;
          (site.write ? r.launch.global_st_requests : r.launch.global_ld_requests) += 1;
          (site.write ? r.launch.global_st_sectors : r.launch.global_ld_sectors) += sectors;
        }
        for (int lane = 0; lane < kLanes; ++lane)
          if (access.lanes >> lane & 1)
            note_sectors(r, site.write ? r.sectors_written : r.sectors_read, access.address[lane], site.bytes);
      } else {
        const auto wavefronts = static_cast<std::uint64_t>(shared_wavefronts(access, r.model));
        const auto ideal = static_cast<std::uint64_t>(shared_ideal_wavefronts(access, r.model));
        counts->wavefronts += wavefronts;
        counts->ideal_wavefronts += ideal;
        (site.write ? r.launch.shared_st_requests : r.launch.shared_ld_requests) += 1;
        (site.write ? r.launch.shared_st_wavefronts : r.launch.shared_ld_wavefronts) += wavefronts;
        (site.write ? r.launch.shared_st_ideal : r.launch.shared_ld_ideal) += ideal;
      }
    }
  }
}

void record(Recorder& r, std::uintptr_t address, int bytes, bool write, bool async, std::uintptr_t pc,
            std::uint32_t piece, bool shared) {
  const int warp = r.thread / kLanes, lane = r.thread % kLanes;
  Site& site = r.sites[Key{pc, static_cast<std::uint32_t>(warp << 16 | piece << 2 | async << 1 | write)}];
  if (site.instances.empty()) {
    site.pc = pc;
    site.write = write;
    site.async = async;
    site.bytes = bytes;
  }
  const std::uint32_t k = site.executions[lane]++;
  if (k >= site.instances.size()) site.instances.resize(k + 1);
  Instance& in = site.instances[k];
  in.lanes |= 1u << lane;
  if (shared) in.shared |= 1u << lane;
  in.address[lane] = address;
  in.phase[lane] = r.phase[r.thread];
  in.position[lane] = r.position[r.thread]++;
}

}  // namespace

void access(Recorder& r, std::uintptr_t address, std::size_t bytes, bool write, std::uintptr_t pc, bool async) {
  if (address - r.stack_low < r.stack_bytes) return;  // the thread's own locals
  bool shared;
  if (address - r.shared_begin < r.shared_bytes) {
    shared = true;
  } else if (r.strict && address - r.arena_begin < r.arena_bytes) {
    shared = false;
  } else {
    const auto within = [&](const void* v, std::size_t n) { return address - reinterpret_cast<std::uintptr_t>(v) < n; };
    if (within(&threadIdx, sizeof threadIdx) || within(&blockIdx, sizeof blockIdx) ||
        within(&blockDim, sizeof blockDim) || within(&gridDim, sizeof gridDim))
      return;  // the emulator's globals
    if (address - r.host_stack_low < r.host_stack_bytes) return;  // the launch's arguments
    if (races::in_static_segment(address)) shared = true;         // a static __shared__ variable
    else if (r.strict) return;                                     // constant tables
    else shared = false;  // host memory as device memory (HostMemoryKernels)
  }
  for (std::uint32_t piece = 0; piece * kWidest < bytes; ++piece)
    record(r, address + piece * kWidest, static_cast<int>(std::min(kWidest, bytes - piece * kWidest)), write, async,
           pc, piece, shared);
}

bool on() { return counting_on.load() && memory_counting_available(); }

void begin_launch(const LaunchSite& site) {
  Recorder& r = recorder();
  {
    std::lock_guard lock(settings_mutex);
    r.model = memory_model;
  }
  r.strict = !host_memory_kernels();
  memory::arena(r.arena_begin, r.arena_bytes);
  races::refresh_static_segments();
  pthread_attr_t attributes;
  void* stack = nullptr;
  std::size_t stack_bytes = 0;
  if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
    pthread_attr_getstack(&attributes, &stack, &stack_bytes);
    pthread_attr_destroy(&attributes);
  }
  r.host_stack_low = reinterpret_cast<std::uintptr_t>(stack);
  r.host_stack_bytes = stack_bytes;
  r.by_pc.clear();
  r.sites.clear();
  r.sectors_read.clear();
  r.sectors_written.clear();
  r.launch = LaunchCounts{};
  r.launch.kernel = site.kernel;
  r.launch.sector_bytes = r.model.sector_bytes;
  active = &r;
}

void end_launch(bool completed) {
  Recorder& r = recorder();
  active = nullptr;
  if (!completed) return;
  compact(r.sectors_read);
  compact(r.sectors_written);
  r.launch.distinct_sectors_read = r.sectors_read.size();
  r.launch.distinct_sectors_written = r.sectors_written.size();
  for (auto& [key, counts] : r.by_pc) {
    r.launch.inexact += counts.exact ? 0 : 1;
    r.launch.instructions.push_back(std::move(counts));
  }
  r.by_pc.clear();
  std::lock_guard lock(settings_mutex);
  finished.push_back(std::move(r.launch));
}

void wgmma(Recorder& r, int n) {
  ++r.launch.wgmma_instructions;
  r.launch.wgmma_flops += 2ull * 64 * static_cast<std::uint64_t>(n) * 16;
}

void bulk_copy(Recorder& r, std::uint64_t bytes, bool store) {
  ++(store ? r.launch.bulk_store_requests : r.launch.bulk_load_requests);
  (store ? r.launch.bulk_store_bytes : r.launch.bulk_load_bytes) += bytes;
}

void mbarrier_wait(Recorder& r) { ++r.launch.mbarrier_waits; }

void bulk_bytes(Recorder& r, std::uintptr_t global, std::size_t bytes, bool store) {
  if (bytes > 0) note_sectors(r, store ? r.sectors_written : r.sectors_read, global, static_cast<int>(bytes));
}

void mma(Recorder& r, std::uint64_t flops) {
  ++r.launch.mma_instructions;
  r.launch.mma_flops += flops;
}

void begin_block(const void* shared, std::size_t shared_bytes, int threads) {
  Recorder& r = recorder();
  r.shared_begin = reinterpret_cast<std::uintptr_t>(shared);
  r.shared_bytes = shared_bytes;
  std::fill(r.phase, r.phase + threads, 0u);
  std::fill(r.position, r.position + threads, 0u);
  r.sites.clear();
}

void end_block() {
  Recorder& r = recorder();
  for (const auto& entry : r.sites) count_site(r, entry.second);
  r.sites.clear();
}

void switch_to(int thread, const void* stack_low, const void* stack_high) {
  Recorder& r = recorder();
  r.thread = thread;
  r.stack_low = reinterpret_cast<std::uintptr_t>(stack_low);
  r.stack_bytes = reinterpret_cast<std::uintptr_t>(stack_high) - r.stack_low;
}

void barrier(int thread) {
  Recorder& r = recorder();
  ++r.phase[thread];
  r.position[thread] = 0;
}

}  // namespace brrr::simt::detail::counters

// ---------------------------------------------------------------------------------------------
// The switches (simt_counters.h)

namespace brrr::simt {

void set_memory_counting(bool on) { detail::counters::counting_on = on; }
bool memory_counting() { return detail::counters::on(); }
bool memory_counting_available() { return race_detection_available(); }  // the same instrumentation
void set_memory_model(const MemoryModel& model) {
  std::lock_guard lock(detail::counters::settings_mutex);
  detail::counters::memory_model = model;
}
std::vector<LaunchCounts> take_memory_counts() {
  std::lock_guard lock(detail::counters::settings_mutex);
  std::vector<LaunchCounts> taken;
  taken.swap(detail::counters::finished);
  return taken;
}
std::string source_line_of(std::uintptr_t pc) { return detail::races::source_line(pc); }

// ---------------------------------------------------------------------------------------------
// Sums and names

LaunchCounts& LaunchCounts::operator+=(const LaunchCounts& l) {
  global_ld_requests += l.global_ld_requests;
  global_ld_sectors += l.global_ld_sectors;
  global_ld_ideal_sectors += l.global_ld_ideal_sectors;
  global_st_requests += l.global_st_requests;
  global_st_sectors += l.global_st_sectors;
  global_st_ideal_sectors += l.global_st_ideal_sectors;
  global_ldgsts_requests += l.global_ldgsts_requests;
  global_ldgsts_sectors += l.global_ldgsts_sectors;
  global_ldgsts_ideal_sectors += l.global_ldgsts_ideal_sectors;
  shared_ld_requests += l.shared_ld_requests;
  shared_ld_wavefronts += l.shared_ld_wavefronts;
  shared_ld_ideal += l.shared_ld_ideal;
  shared_st_requests += l.shared_st_requests;
  shared_st_wavefronts += l.shared_st_wavefronts;
  shared_st_ideal += l.shared_st_ideal;
  lanes += l.lanes;
  // Each launch's distinct sectors: a sector two launches touch counts twice (it crosses DRAM
  // twice unless L2 keeps it between them, which the emulator does not model).
  distinct_sectors_read += l.distinct_sectors_read;
  distinct_sectors_written += l.distinct_sectors_written;
  sector_bytes = l.sector_bytes;
  wgmma_instructions += l.wgmma_instructions;
  wgmma_flops += l.wgmma_flops;
  bulk_load_requests += l.bulk_load_requests;
  bulk_load_bytes += l.bulk_load_bytes;
  bulk_store_requests += l.bulk_store_requests;
  bulk_store_bytes += l.bulk_store_bytes;
  mbarrier_waits += l.mbarrier_waits;
  mma_instructions += l.mma_instructions;
  mma_flops += l.mma_flops;
  for (const InstructionCounts& i : l.instructions) {
    auto same = [&](const InstructionCounts& j) {
      return j.pc == i.pc && j.space == i.space && j.store == i.store && j.async_copy == i.async_copy &&
             j.bytes == i.bytes;
    };
    auto it = std::find_if(instructions.begin(), instructions.end(), same);
    if (it == instructions.end()) {
      instructions.push_back(i);
      continue;
    }
    it->requests += i.requests;
    it->lanes += i.lanes;
    it->sectors += i.sectors;
    it->ideal_sectors += i.ideal_sectors;
    it->wavefronts += i.wavefronts;
    it->ideal_wavefronts += i.ideal_wavefronts;
    it->useful_bytes += i.useful_bytes;
    if (!i.exact && it->exact) {
      it->exact = false;
      it->inexact_why = i.inexact_why;
    }
  }
  inexact = 0;
  for (const InstructionCounts& i : instructions) inexact += i.exact ? 0 : 1;
  return *this;
}

std::vector<NamedCount> ncu_metrics(const LaunchCounts& t) {
  return {
      {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", t.global_ld_requests},
      {"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", t.global_ld_sectors},
      {"l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", t.global_st_requests},
      {"l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", t.global_st_sectors},
      {"smsp__inst_executed_op_shared_ld.sum", t.shared_ld_requests},
      {"smsp__inst_executed_op_shared_st.sum", t.shared_st_requests},
      {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", t.shared_ld_wavefronts},
      {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", t.shared_st_wavefronts},
      {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", t.shared_ld_wavefronts - t.shared_ld_ideal},
      {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", t.shared_st_wavefronts - t.shared_st_ideal},
      // What ncu has no metric of, or one whose name was not checked against a GPU here:
      // cp.async's global reads (ncu counts LDGSTS under metrics of its own), the ideals, and
      // the tensor-core and Hopper units.
      {"emulator__requests_global_op_ldgsts", t.global_ldgsts_requests},
      {"emulator__sectors_global_op_ldgsts", t.global_ldgsts_sectors},
      {"emulator__sectors_ideal_global_op_ld", t.global_ld_ideal_sectors},
      {"emulator__sectors_ideal_global_op_st", t.global_st_ideal_sectors},
      {"emulator__wavefronts_ideal_shared_op_ld", t.shared_ld_ideal},
      {"emulator__wavefronts_ideal_shared_op_st", t.shared_st_ideal},
      {"emulator__inst_executed_mma_sync", t.mma_instructions},
      {"emulator__flops_mma_sync", t.mma_flops},
      {"emulator__inst_executed_wgmma", t.wgmma_instructions},
      {"emulator__flops_wgmma", t.wgmma_flops},
      {"emulator__requests_bulk_tensor_ld", t.bulk_load_requests},
      {"emulator__bytes_bulk_tensor_ld", t.bulk_load_bytes},
      {"emulator__requests_bulk_tensor_st", t.bulk_store_requests},
      {"emulator__bytes_bulk_tensor_st", t.bulk_store_bytes},
      {"emulator__mbarrier_waits", t.mbarrier_waits},
      {"emulator__distinct_sectors_read", t.distinct_sectors_read},
      {"emulator__distinct_sectors_written", t.distinct_sectors_written},
  };
}

std::uint64_t ncu_metric(const LaunchCounts& counts, const std::string& name) {
  for (const NamedCount& m : ncu_metrics(counts))
    if (name == m.name) return m.value;
  ::brrr::detail::fail("ncu_metric: no count named '", name, "' (simt_counters.h: ncu_metrics)");
}

}  // namespace brrr::simt
