// kernels/cuda/simt_race_detector.cpp: the emulator's race detector: every load and store of
// a kernel checked against the others of its launch. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/simt_emulator.cpp (fibers, barriers, the schedule).
//
// How the accesses get here
// -------------------------
// Kernels use raw pointers (`out[i] = a[i] + b[i]`), so no accessor of brrr's sees them. The
// compiler does: the emulated kernel files are compiled with -fsanitize=thread (kernels/
// CMakeLists.txt), which makes GCC or Clang call __tsan_read4(address) before every 4-byte
// load, __tsan_write16(address) before every float4 store, and so on. ThreadSanitizer's own
// runtime is not linked: this file defines those functions instead. So the detector sees every
// access of the kernel source, exactly, at the cost of one call per access, and the kernels
// stay plain CUDA. (ThreadSanitizer itself, with fiber annotations, would find the same
// races, but it cannot run beside AddressSanitizer, it cannot name a buffer or a block, and it
// reports by printing, not by an exception a test can catch.)
// The same hooks feed the memory counters (simt_counters.cpp) when counting is on.
//
// When two accesses race
// ----------------------
// Two accesses to the same byte conflict when one writes and they come from different
// threads. On a GPU they are ordered only by a barrier between them: __syncthreads for the
// threads of a block, __syncwarp for the lanes of a warp (shuffles are not fences), nothing at
// all for two blocks of one launch (launches on one stream are ordered: a launch sees all of
// the previous one). Two atomics never race with each other. A conflict with no such order is
// a data race: on a GPU its result depends on timing.
//
// The detector numbers events: `serial` grows by one at every block start and every barrier.
// Each byte's shadow entry remembers the serial and thread of its last write and of its last
// two reads (by different threads). An access compares its thread's position with them:
//   - an entry older than the launch (or, for shared memory, than the block) is stale;
//   - an entry from an earlier block of this launch is unordered (global memory only);
//   - in this block, it is ordered if the same thread made it, or if a __syncthreads (or, in
//     the same warp, a __syncwarp) has released the current thread since.
// The first race of a block is kept and thrown when the block ends, with both threads, the
// buffer and offset, and both source lines (from the instruction addresses, by addr2line).
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/simt_internal.h"

namespace brrr::simt::detail::races {
namespace {

constexpr std::size_t kPageBytes = 4096;
constexpr std::size_t kMaxWarps = 32;
constexpr std::uint16_t kWriteAtomic = 1;
// The last write was a cp.async that has not completed: the byte is in flight.
constexpr std::uint16_t kInFlight = 2;
// The last write was a bulk copy's (TMA, Hopper's async proxy), in flight while kInFlight is set.
constexpr std::uint16_t kBulk = 4;
// Bits 8-15: how many reads by the async proxy (a wgmma's operands, a TMA store's source) are
// in flight on the byte; nobody may write it until they end (simt_hopper.cpp).
constexpr std::uint16_t kAsyncReader = 1 << 8;

// What the detector remembers of one byte. Serial 0 is "never": serials start at 1.
struct Entry {
  std::uint32_t write_serial, read_serial, read2_serial;
  std::uint32_t write_pc, read_pc;  // the low 32 bits of the instruction address
  std::uint16_t write_thread, read_thread, read2_thread;
  std::uint16_t flags;
};

enum class Space { kShared, kStaticShared, kGlobal };

// Static __shared__ variables are `static` locals in the emulator: they live in the writable
// static segments (.data, .bss) of the program and its libraries. Kernels touch no other
// writable static data (the emulator's threadIdx & co. aside), so an access there is an
// access to static shared memory. (GCC ignores a section attribute on the static locals of a
// template, so the variables cannot be gathered in a section of their own.)
struct Segment {
  std::uintptr_t begin, end;
};

struct Detector {
  // The launch.
  const LaunchSite* site = nullptr;
  std::uintptr_t kernel = 0;
  std::vector<std::uintptr_t> pointers;  // the launch's pointer arguments
  bool strict = true;                    // device memory only (not HostMemoryKernels)
  const std::vector<Segment>* segments = nullptr;  // static shared memory is in these
  std::uintptr_t arena_begin = 0, arena_bytes = 0;  // device memory
  std::uint32_t serial = 0;
  std::uint32_t launch_start = 0, block_start = 0, block_phase = 0;
  std::uint32_t warp_phase[kMaxWarps] = {};
  std::vector<std::pair<std::uint32_t, std::uint64_t>> blocks;  // (start serial, linear index)
  // The block and thread.
  std::uintptr_t shared_begin = 0, shared_bytes = 0;
  std::size_t static_shared_touched = 0;
  int thread = 0, warp = 0;
  std::uintptr_t stack_low = 0, stack_bytes = 0;
  // Device memory: the arena, and the last allocation an access fell in.
  std::uintptr_t allocation_begin = 0, allocation_end = 0;
  // Shadow memory, a page of entries per 4 KiB touched, made when first touched.
  std::unordered_map<std::uintptr_t, std::unique_ptr<Entry[]>> pages;
  std::uintptr_t last_page = ~std::uintptr_t{0};
  Entry* last_entries = nullptr;
  std::string error;
  // Hopper (simt_hopper.cpp). An mbarrier orders only the threads that use it, so from the
  // first one on, each thread t keeps a clock: clocks[t * (threads + 1) + u] = the serial
  // before which u's accesses are ordered before t's (u = threads: the async proxy, whose
  // writes are the bulk copies'). A wait on a phase joins the clocks of its arrivals; a
  // __syncthreads after a wait shows the waited copies to everyone (async_seen).
  int threads = 0;
  std::vector<std::uint32_t> clocks;
  std::uint32_t async_seen = 0;
  std::uint32_t proxy_fence[1024] = {};  // each thread's last fence.proxy.async
  struct AsyncRead {
    int id;
    std::vector<std::pair<std::uintptr_t, std::uintptr_t>> ranges;
    std::uint32_t pc;
    const char* what;
  };
  std::vector<AsyncRead> async_reads;
  int next_async_read = 1;
};

Detector& detector() {
  static Detector instance;
  return instance;
}

// The detector of the launch running on this OS thread, or nullptr: the hooks below are
// called by instrumented code everywhere (host code of the same files included), and must
// cost one load and a branch outside launches.
thread_local Detector* active __attribute__((tls_model("initial-exec"))) = nullptr;

int add_writable_segments(dl_phdr_info* info, std::size_t, void* out) {
  auto& segments = *static_cast<std::vector<Segment>*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type == PT_LOAD && (header.p_flags & PF_W))
      segments.push_back({info->dlpi_addr + header.p_vaddr, info->dlpi_addr + header.p_vaddr + header.p_memsz});
  }
  return 0;
}

// The writable static segments of every loaded module, sorted; read again when a library
// was loaded or unloaded since (a notebook loads libraries as it goes).
std::vector<Segment>& segment_list() {
  static std::vector<Segment> segments;
  return segments;
}
const std::vector<Segment>& static_segments() {
  std::vector<Segment>& segments = segment_list();
  static unsigned long long loads = ~0ull;
  unsigned long long now = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t size, void* out) {
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
          *static_cast<unsigned long long*>(out) = info->dlpi_adds * 1000003ull + info->dlpi_subs;
        return 1;
      },
      &now);
  if (now != loads || segments.empty()) {
    loads = now;
    segments.clear();
    dl_iterate_phdr(add_writable_segments, &segments);
    std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  }
  return segments;
}

bool in_static_segment(const std::vector<Segment>& segments, std::uintptr_t address) {
  auto after = std::upper_bound(segments.begin(), segments.end(), address,
                                [](std::uintptr_t a, const Segment& s) { return a < s.begin; });
  return after != segments.begin() && address < std::prev(after)->end;
}

Entry* entries_of(Detector& d, std::uintptr_t page) {
  if (page == d.last_page) return d.last_entries;
  auto& slot = d.pages[page];
  if (!slot) slot.reset(new Entry[kPageBytes]());  // zero: never accessed
  d.last_page = page;
  d.last_entries = slot.get();
  return d.last_entries;
}

// ---------------------------------------------------------------------------------------------
// Messages: threads, places, source lines

std::string hex(std::uintptr_t value) {
  std::ostringstream text;
  text << "0x" << std::hex << value;
  return text.str();
}

std::string run(const std::string& command) {
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    std::size_t n;
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
    pclose(pipe);
  }
  return output;
}

// The module (program or library) that holds `address`, and the address as addr2line and nm
// know it (relative to the module, unless the program is not position independent).
bool module_of(std::uintptr_t address, std::string& path, std::uintptr_t& relative) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(address), &info) || !info.dli_fname) return false;
  path = info.dli_fname;
  if (path.empty() || path.find('/') == std::string::npos) path = "/proc/self/exe";
  const auto* header = static_cast<const Elf64_Ehdr*>(info.dli_fbase);
  const auto base = reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  relative = header->e_type == ET_EXEC ? address : address - base;
  return true;
}

std::string base_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "reduce.cu:158", or "common.h:65 (inlined into reduce.cu:201)": where the instruction before
// `pc` comes from (pc is a return address). Empty when it cannot be known (no addr2line, no
// line tables).
std::string source_line_of_instruction(std::uintptr_t pc) {
  std::string path;
  std::uintptr_t relative = 0;
  if (!pc || !module_of(pc - 1, path, relative)) return "";
  const std::string output = run("addr2line -i -e '" + path + "' " + hex(relative) + " 2>/dev/null");
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (line.find("??") != std::string::npos) continue;
    const std::size_t space = line.find(" (discriminator");
    if (space != std::string::npos) line.resize(space);
    lines.push_back(base_name(line));
  }
  if (lines.empty()) return "";
  std::string text = lines.front();
  // The outermost frame, when it is in another file: "common.h:65 (inlined into reduce.cu:201)".
  const std::string outer = lines.back(), inner_file = text.substr(0, text.find(':'));
  if (lines.size() > 1 && outer.substr(0, outer.find(':')) != inner_file) text += " (inlined into " + outer + ")";
  return text;
}

// The full instruction address from its low 32 bits: the kernel's code is within a few MiB
// of the kernel function, so the high bits are the kernel's (or one more, or one less).
std::uintptr_t full_pc(const Detector& d, std::uint32_t low) {
  if (!low) return 0;
  const std::uintptr_t high = d.kernel & ~std::uintptr_t{0xffffffff};
  std::uintptr_t best = high | low;
  for (std::intptr_t step : {-1, 1}) {
    const std::uintptr_t other = (high + step * (std::uintptr_t{1} << 32)) | low;
    const auto distance = [&](std::uintptr_t p) { return p > d.kernel ? p - d.kernel : d.kernel - p; };
    if (distance(other) < distance(best)) best = other;
  }
  return best;
}

bool parse_hex(const std::string& text, std::uintptr_t& value) {
  const char* end = text.data() + text.size();
  const auto [stop, fault] = std::from_chars(text.data(), end, value, 16);
  return fault == std::errc() && stop == end;
}

// "`partial` (a static __shared__ variable of row_sum1_kernel)", from the symbol table. Each
// line of `nm -S` is "start size type name", or "start type name" for a symbol without a size
// (a section's start, a label; clang gives libc++'s hidden members none), which holds no
// variable and is skipped. A line of neither form is named in the answer rather than thrown:
// the detector never throws from inside an access.
std::string static_shared_name(std::uintptr_t address) {
  std::string path;
  std::uintptr_t relative = 0;
  if (!module_of(address, path, relative)) return "";
  static std::unordered_map<std::string, std::string> symbol_tables;  // nm's output, per module
  auto [it, fresh] = symbol_tables.try_emplace(path);
  if (fresh) it->second = run("nm -C -S --defined-only '" + path + "' 2>/dev/null");
  std::istringstream in(it->second);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string start_text, size_text, type;
    std::uintptr_t start = 0, size = 0;
    fields >> start_text >> size_text >> type;
    if (line.empty() || (parse_hex(start_text, start) && size_text.size() == 1)) continue;  // no size
    if (!parse_hex(start_text, start) || !parse_hex(size_text, size) || type.size() != 1)
      return "static __shared__ memory at " + hex(address) + " (unnamed: `nm -S " + path +
             "` printed a line that is neither \"start size type name\" nor \"start type name\": \"" + line + "\")";
    if (relative < start || relative >= start + size) continue;
    std::string name;
    std::getline(fields, name);
    name.erase(0, name.find_first_not_of(' '));
    // "ns::(anonymous namespace)::kernel(float*, int)::partial": the variable, and the function.
    for (std::size_t at; (at = name.find("(anonymous namespace)::")) != std::string::npos;) name.erase(at, 23);
    const std::size_t open = name.find('(');
    const std::size_t colons = name.rfind("::");
    const std::string variable = colons == std::string::npos ? name : name.substr(colons + 2);
    std::string function;
    if (open != std::string::npos && colons != std::string::npos && open < colons) {
      const std::size_t before = name.rfind("::", open);
      const std::size_t first = before == std::string::npos ? 0 : before + 2;
      function = name.substr(first, open - first);
    }
    return "byte " + std::to_string(relative - start) + " of `" + variable + "` (static __shared__" +
           (function.empty() ? "" : " in " + function) + ")";
  }
  return "";
}

std::string coordinates(std::uint64_t linear, dim3 extent) {
  std::ostringstream text;
  text << "(" << linear % extent.x << "," << linear / extent.x % extent.y << ","
       << linear / (std::uint64_t{extent.x} * extent.y) << ")";
  return text.str();
}

// The block an access with this serial came from (the last block that started before it).
std::uint64_t block_of(const Detector& d, std::uint32_t serial) {
  auto after = std::upper_bound(d.blocks.begin(), d.blocks.end(), std::make_pair(serial, ~std::uint64_t{0}));
  return after == d.blocks.begin() ? 0 : std::prev(after)->second;
}

std::string place(const Detector& d, std::uintptr_t address, Space space) {
  switch (space) {
    case Space::kShared:
      return "byte " + std::to_string(address - d.shared_begin) + " of dynamic shared memory (BRRR_DYNAMIC_SHARED)";
    case Space::kStaticShared: {
      const std::string name = static_shared_name(address);
      return name.empty() ? "static __shared__ memory at " + hex(address) : name;
    }
    case Space::kGlobal: break;
  }
  // Which argument points into it, if one does.
  std::string argument;
  memory::Allocation allocation;
  const bool allocated = d.strict && memory::find(reinterpret_cast<const void*>(address), allocation);
  std::uintptr_t nearest = 0;
  int nearest_index = 0;
  for (std::size_t i = 0; i < d.pointers.size(); ++i) {
    const std::uintptr_t p = d.pointers[i];
    if (allocated ? (p >= allocation.begin && p <= allocation.begin + allocation.bytes) : (p <= address && p > nearest)) {
      nearest = p;
      nearest_index = static_cast<int>(i) + 1;
      if (allocated) break;
    }
  }
  if (nearest_index)
    argument = " (kernel argument " + std::to_string(nearest_index) + " + " + std::to_string(address - nearest) +
               " bytes)";
  if (d.strict) return memory::describe(reinterpret_cast<const void*>(address)) + argument;
  return "global memory at " + hex(address) + argument;
}

std::string thread_name(int thread, std::uint64_t block) {
  if (thread == kAsyncProxy) return "a bulk copy (the async proxy) in block " + coordinates(block, gridDim);
  if (thread > kAsyncProxy)
    return "the wgmma of warpgroup " + std::to_string(thread - kWarpgroupReader) + " of block " +
           coordinates(block, gridDim);
  return "thread " + coordinates(static_cast<std::uint64_t>(thread), blockDim) + " of block " +
         coordinates(block, gridDim);
}

std::string at_line(const Detector& d, std::uint32_t pc) {
  const std::string line = source_line_of_instruction(full_pc(d, pc));
  return line.empty() ? "" : " at " + line;
}

void report(Detector& d, std::uintptr_t address, Space space, const char* what,
            std::uint32_t pc, const char* earlier_what, int earlier_thread, std::uint32_t earlier_serial,
            std::uint32_t earlier_pc) {
  const std::uint64_t block = block_of(d, d.serial), earlier_block = block_of(d, earlier_serial);
  std::ostringstream message;
  message << launch_name(*d.site) << ": data race on " << (space == Space::kGlobal ? "global" : "shared")
          << " memory, " << place(d, address, space) << ": " << thread_name(d.thread, block) << " " << what
          << at_line(d, pc) << "; " << thread_name(earlier_thread, earlier_block) << " " << earlier_what
          << at_line(d, earlier_pc) << "; ";
  if (earlier_block != block)
    message << "two blocks of one launch are never ordered (only atomics may share bytes between blocks)";
  else if (earlier_thread == kAsyncProxy)
    message << "a bulk copy's bytes may be read only after a wait on the phase of its mbarrier that the copy "
               "completes (mbarrier_try_wait_parity), by the waiting thread or after a __syncthreads that follows "
               "the wait";
  else
    message << "no barrier orders the two (__syncthreads; __syncwarp within a warp; shuffles are not fences)";
  d.error = message.str();
}

// Is an earlier access (serial, thread) of the current launch unordered with the current one?
bool concurrent(const Detector& d, std::uint32_t serial, int thread) {
  if (serial < d.block_start) return true;  // an earlier block of this launch
  if (thread > kAsyncProxy) {  // a wgmma's read: its warpgroup's threads wait for it together
    const int group = thread - kWarpgroupReader;
    if (d.thread < d.threads && d.thread / 128 == group) return false;
    thread = group * 128;  // others are ordered after it through the group's first thread
  }
  const bool clocked = !d.clocks.empty() && d.thread < d.threads;
  const std::size_t row = static_cast<std::size_t>(d.thread) * static_cast<std::size_t>(d.threads + 1);
  if (thread == kAsyncProxy)
    return !(serial < d.async_seen || (clocked && serial < d.clocks[row + static_cast<std::size_t>(d.threads)]));
  if (clocked && thread < d.threads && serial < d.clocks[row + static_cast<std::size_t>(thread)]) return false;
  if (thread == d.thread) return false;
  if (serial < d.block_phase) return false;  // a __syncthreads since
  if (thread / 32 == d.warp && serial < d.warp_phase[d.warp]) return false;  // a __syncwarp since
  return true;
}

// A write to a byte that an async-proxy read (a wgmma operand, a TMA store's source) still reads.
void fail_async_reader(Detector& d, std::uintptr_t address, Space space, std::uintptr_t pc) {
  const Detector::AsyncRead* reader = nullptr;
  for (const auto& read : d.async_reads)
    for (const auto& [begin, end] : read.ranges)
      if (address >= begin && address < end) reader = &read;
  d.error = launch_name(*d.site) + ": " + thread_name(d.thread, block_of(d, d.serial)) + " writes " +
            place(d, address, space) + at_line(d, static_cast<std::uint32_t>(pc)) + ", which " +
            (reader ? std::string(reader->what) + " issued" + at_line(d, reader->pc) : "an async read") +
            " may still be reading: wait for it first (wgmma_wait_group for a wgmma, cp_async_bulk_wait_group_read "
            "for a TMA store)";
}

void fail_bounds(Detector& d, std::uintptr_t address, std::size_t bytes, bool write, std::uint32_t pc) {
  const std::uint64_t block = block_of(d, d.serial);
  d.error = launch_name(*d.site) + ": " + thread_name(d.thread, block) + (write ? " writes " : " reads ") +
            std::to_string(bytes) + " bytes outside every live device allocation: " +
            place(d, address, Space::kGlobal) + at_line(d, pc);
}

void access(Detector& d, std::uintptr_t address, std::size_t bytes, bool write, bool atomic, std::uintptr_t pc) {
  if (address - d.stack_low < d.stack_bytes) return;  // the thread's own locals
  if (!d.error.empty()) return;                         // one error at a time
  Space space;
  if (address - d.shared_begin < d.shared_bytes) {
    space = Space::kShared;
  } else if (d.strict && address - d.arena_begin < d.arena_bytes) {
    space = Space::kGlobal;
    if (address < d.allocation_begin || address + bytes > d.allocation_end) {
          memory::Allocation allocation;
          if (!memory::find(reinterpret_cast<const void*>(address), allocation) ||
              address + bytes > allocation.begin + allocation.bytes) {
            fail_bounds(d, address, bytes, write, static_cast<std::uint32_t>(pc));
            return;
          }
      d.allocation_begin = allocation.begin;
      d.allocation_end = allocation.begin + allocation.bytes;
    }
  } else {
    const auto within = [&](const void* v, std::size_t n) { return address - reinterpret_cast<std::uintptr_t>(v) < n; };
    if (within(&threadIdx, sizeof threadIdx) || within(&blockIdx, sizeof blockIdx) ||
        within(&blockDim, sizeof blockDim) || within(&gridDim, sizeof gridDim))
      return;  // the emulator's globals: set by the emulator, only read by kernels
    if (in_static_segment(*d.segments, address)) space = Space::kStaticShared;
    else if (d.strict) return;  // the launch's arguments, constant tables, another fiber's locals
    else space = Space::kGlobal;  // host memory as device memory (unit tests)
  }
  const std::uint32_t floor = space == Space::kGlobal ? d.launch_start : d.block_start;
  const auto pc32 = static_cast<std::uint32_t>(pc);
  const auto me = static_cast<std::uint16_t>(d.thread);
  Entry* page = entries_of(d, address / kPageBytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    const std::uintptr_t a = address + i;
    if (i > 0 && a % kPageBytes == 0) page = entries_of(d, a / kPageBytes);
    Entry& e = page[a % kPageBytes];
    // A byte a cp.async is still copying: nobody may touch it before the copying thread's
    // cp.async.wait_group (on a GPU it holds the old value, the new one, or a mix of both).
    if ((e.flags & kInFlight) && (e.flags & kBulk) && e.write_serial >= floor) {
      d.error = launch_name(*d.site) + ": " + thread_name(d.thread, block_of(d, d.serial)) +
                (write ? " writes " : " reads ") + place(d, a, space) + at_line(d, static_cast<std::uint32_t>(pc)) +
                ", which a bulk tensor copy (TMA) issued" + at_line(d, e.write_pc) +
                " is still filling: wait on its mbarrier (mbarrier_try_wait_parity, for the phase the copy "
                "completes) before touching the bytes";
      return;
    }
    if (write && (e.flags >> 8) && e.write_serial >= floor) {
      fail_async_reader(d, a, space, pc);
      return;
    }
    if ((e.flags & kInFlight) && e.write_serial >= floor) {
      d.error = launch_name(*d.site) + ": " + thread_name(d.thread, block_of(d, d.serial)) +
                (write ? " writes " : " reads ") + place(d, a, space) + at_line(d, static_cast<std::uint32_t>(pc)) +
                ", which a cp.async of " + thread_name(e.write_thread, block_of(d, e.write_serial)) +
                at_line(d, e.write_pc) +
                " is still copying: the copying thread must wait for it (cp_async_wait_group) before anyone "
                "touches the bytes, and other threads must also pass a __syncthreads after that wait";
      return;
    }
    // Fast path: this thread made the same access to this byte since the last barrier, and
    // nobody touched it since (a write clears the reads; a read by another thread replaces it).
    if (!write && e.read_serial == d.serial && e.read_thread == me) continue;
    if (write && !atomic && e.write_serial == d.serial && e.write_thread == me && e.read_serial == 0 &&
        e.flags == 0)
      continue;
    if (space == Space::kStaticShared && e.write_serial < d.block_start && e.read_serial < d.block_start &&
        ++d.static_shared_touched > kMaxStaticSharedBytes) {
      d.error = launch_name(*d.site) + ": a block touches more than " + std::to_string(kMaxStaticSharedBytes) +
                " bytes of static __shared__ memory; a kernel may declare at most 48 KiB of it (nvcc refuses more: "
                "use dynamic shared memory, BRRR_DYNAMIC_SHARED, above 48 KiB)";
      return;
    }
    // Shared memory starts as garbage in every block: reading a byte before any thread of the
    // block wrote it is reading garbage (here, the previous block's value).
    if (space != Space::kGlobal && (!write || atomic) && e.write_serial < d.block_start) {
      d.error = launch_name(*d.site) + ": " + thread_name(d.thread, block_of(d, d.serial)) + " reads " +
                place(d, a, space) + at_line(d, pc32) +
                ", which no thread of this block has written: a block's shared memory starts as garbage on a GPU "
                "(a missing write, or a read before the __syncthreads that follows the write?)";
      return;
    }
    const char* what = atomic ? "updates it atomically" : write ? "writes it" : "reads it";
    // The last write, against any access.
    if (e.write_serial >= floor && !(atomic && (e.flags & kWriteAtomic)) &&
        concurrent(d, e.write_serial, e.write_thread)) {
      report(d, a, space, what, pc32, (e.flags & kWriteAtomic) ? "updated it atomically" : "wrote it",
             e.write_thread, e.write_serial, e.write_pc);
      return;
    }
    if (write) {
      // The last reads, against a write.
      if (e.read_serial >= floor && concurrent(d, e.read_serial, e.read_thread)) {
        report(d, a, space, what, pc32, "read it", e.read_thread, e.read_serial, e.read_pc);
        return;
      }
      if (e.read2_serial >= floor && concurrent(d, e.read2_serial, e.read2_thread)) {
        report(d, a, space, what, pc32, "read it", e.read2_thread, e.read2_serial, 0);
        return;
      }
      e.write_serial = d.serial;
      e.write_thread = me;
      e.write_pc = pc32;
      e.flags = atomic ? kWriteAtomic : 0;
      e.read_serial = e.read2_serial = 0;  // older reads are ordered before this write, or reported
    } else {
      // Keep the two latest reads by different threads: a later write by one of them must
      // still be checked against the other.
      if (e.read_serial >= floor && (e.read_thread != me || e.read_serial < d.block_start)) {
        e.read2_serial = e.read_serial;
        e.read2_thread = e.read_thread;
      }
      e.read_serial = d.serial;
      e.read_thread = me;
      e.read_pc = pc32;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// What the emulator calls

void refresh_static_segments() { static_segments(); }
bool in_static_segment(std::uintptr_t address) { return in_static_segment(segment_list(), address); }
std::string source_line(std::uintptr_t pc) { return source_line_of_instruction(pc); }

void begin_launch(const LaunchSite& site, const void* kernel, const void* const* pointers, int count) {
  Detector& d = detector();
  if (d.serial > 0xF0000000u) {  // serials would wrap: forget everything, start again
    d.pages.clear();
    d.serial = 0;
  }
  d.site = &site;
  d.kernel = reinterpret_cast<std::uintptr_t>(kernel);
  d.pointers.assign(reinterpret_cast<const std::uintptr_t*>(pointers),
                    reinterpret_cast<const std::uintptr_t*>(pointers) + count);
  d.strict = !host_memory_kernels();
  d.segments = &static_segments();
  memory::arena(d.arena_begin, d.arena_bytes);
  d.launch_start = ++d.serial;
  d.blocks.clear();
  d.allocation_begin = d.allocation_end = 0;
  d.error.clear();
  active = &d;
}

void end_launch() {
  Detector& d = detector();
  active = nullptr;
  d.site = nullptr;
  // Shadow pages are kept for the next launch (their entries are stale by serial), unless
  // this launch touched a lot of memory: then they are given back.
  if (d.pages.size() > 1024) {
    d.pages.clear();
    d.last_page = ~std::uintptr_t{0};
    d.last_entries = nullptr;
  }
}

void begin_block(std::uint64_t linear, uint3, const void* shared, std::size_t shared_bytes) {
  Detector& d = detector();
  while (!d.async_reads.empty()) async_read_end(d.async_reads.back().id);  // left by a failed block
  d.threads = static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
  d.clocks.clear();
  d.async_seen = 0;
  d.block_start = d.block_phase = ++d.serial;
  for (auto& phase : d.warp_phase) phase = d.serial;
  d.blocks.emplace_back(d.serial, linear);
  d.shared_begin = reinterpret_cast<std::uintptr_t>(shared);
  d.shared_bytes = shared_bytes;
  d.static_shared_touched = 0;
}

void switch_to(int thread, int warp, const void* stack_low, const void* stack_high) {
  Detector& d = detector();
  d.thread = thread;
  d.warp = warp;
  d.stack_low = reinterpret_cast<std::uintptr_t>(stack_low);
  d.stack_bytes = reinterpret_cast<std::uintptr_t>(stack_high) - d.stack_low;
}

void block_barrier() {
  Detector& d = detector();
  if (!d.clocks.empty())  // what any thread has waited for, everyone now sees
    for (int t = 0; t < d.threads; ++t)
      d.async_seen = std::max(d.async_seen, d.clocks[static_cast<std::size_t>(t) * (d.threads + 1) + d.threads]);
  d.block_phase = ++d.serial;
  for (auto& phase : d.warp_phase) phase = d.serial;
}

void warp_barrier(int warp) {
  Detector& d = detector();
  d.warp_phase[warp] = ++d.serial;
}

void async_copy_issue(const void* destination, std::size_t bytes, const void* pc) {
  Detector* d = active;
  if (!d) return;
  const auto address = reinterpret_cast<std::uintptr_t>(destination);
  access(*d, address, bytes, true, false, reinterpret_cast<std::uintptr_t>(pc));
  if (!d->error.empty() || address - d->stack_low < d->stack_bytes) return;
  for (std::size_t i = 0; i < bytes; ++i) entries_of(*d, (address + i) / kPageBytes)[(address + i) % kPageBytes].flags |= kInFlight;
}

void async_copy_complete(const void* destination, std::size_t bytes, const void* source, std::size_t src_bytes,
                         const void* issue_pc, const void* wait_pc) {
  Detector* d = active;
  if (!d) return;
  const auto address = reinterpret_cast<std::uintptr_t>(destination);
  for (std::size_t i = 0; i < bytes; ++i) entries_of(*d, (address + i) / kPageBytes)[(address + i) % kPageBytes].flags &= ~kInFlight;
  if (src_bytes > 0)
    access(*d, reinterpret_cast<std::uintptr_t>(source), src_bytes, false, false, reinterpret_cast<std::uintptr_t>(issue_pc));
  access(*d, address, bytes, true, false, reinterpret_cast<std::uintptr_t>(wait_pc));
}

// --- Hopper's async proxy and mbarriers (simt_hopper.cpp) -------------------------------------------

namespace {
std::uint32_t* clock_row(Detector& d, int thread) {
  const std::size_t width = static_cast<std::size_t>(d.threads) + 1;
  if (d.clocks.empty()) d.clocks.assign(width * width, 0);
  return d.clocks.data() + static_cast<std::size_t>(thread) * width;
}
void for_each_entry(Detector& d, std::uintptr_t address, std::size_t bytes, const auto& f) {
  for (std::size_t i = 0; i < bytes; ++i) f(entries_of(d, (address + i) / kPageBytes)[(address + i) % kPageBytes]);
}
}  // namespace

void kernel_access(const void* address, std::size_t bytes, bool write, const void* pc) {
  if (Detector* d = active)
    access(*d, reinterpret_cast<std::uintptr_t>(address), bytes, write, false, reinterpret_cast<std::uintptr_t>(pc));
}

void release(std::vector<std::uint32_t>& clock) {
  Detector* d = active;
  if (!d) return;
  const std::uint32_t* mine = clock_row(*d, d->thread);
  clock.resize(static_cast<std::size_t>(d->threads) + 1, 0);
  for (std::size_t u = 0; u < clock.size(); ++u) clock[u] = std::max(clock[u], mine[u]);
  for (int lane = d->warp * 32; lane < std::min(d->threads, d->warp * 32 + 32); ++lane)
    clock[static_cast<std::size_t>(lane)] = std::max(clock[static_cast<std::size_t>(lane)], d->warp_phase[d->warp]);
  clock[static_cast<std::size_t>(d->thread)] = ++d->serial;  // its accesses so far come before
}

void release_async(std::vector<std::uint32_t>& clock) {
  Detector* d = active;
  if (!d) return;
  clock.resize(static_cast<std::size_t>(d->threads) + 1, 0);
  clock[static_cast<std::size_t>(d->threads)] = ++d->serial;
}

void acquire(const std::vector<std::uint32_t>& clock) {
  Detector* d = active;
  if (!d || clock.empty()) return;
  std::uint32_t* mine = clock_row(*d, d->thread);
  for (std::size_t u = 0; u < clock.size(); ++u) mine[u] = std::max(mine[u], clock[u]);
}

void proxy_fence() {
  if (Detector* d = active) d->proxy_fence[d->thread] = ++d->serial;
}

void bulk_copy_issue(const void* destination, std::size_t bytes, const void* pc) {
  Detector* d = active;
  if (!d) return;
  const auto address = reinterpret_cast<std::uintptr_t>(destination);
  access(*d, address, bytes, true, false, reinterpret_cast<std::uintptr_t>(pc));
  if (d->error.empty()) for_each_entry(*d, address, bytes, [](Entry& e) { e.flags |= kInFlight | kBulk; });
}

void bulk_copy_complete(const void* destination, std::size_t bytes, const void* pc) {
  Detector* d = active;
  if (!d) return;
  for_each_entry(*d, reinterpret_cast<std::uintptr_t>(destination), bytes, [&](Entry& e) {
    e.write_serial = d->serial;
    e.write_thread = static_cast<std::uint16_t>(kAsyncProxy);
    e.write_pc = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(pc));
    e.flags = static_cast<std::uint16_t>((e.flags & 0xFF00u) | kBulk);
    e.read_serial = e.read2_serial = 0;
  });
}

int async_read(const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges, const void* pc,
               const char* what, int group, bool track) {
  Detector* d = active;
  if (!d || !d->error.empty()) return 0;
  const int saved_thread = d->thread, saved_warp = d->warp;
  if (group >= 0) d->thread = group * 128, d->warp = group * 4;  // the warpgroup reads, as its first thread
  const auto pc32 = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(pc));
  const auto ours = [&](int writer) { return group >= 0 ? writer / 128 == group : writer == d->thread; };
  for (const auto& [begin, end] : ranges) {
    for (std::uintptr_t a = begin; a < end && d->error.empty(); ++a) {
      Entry& e = entries_of(*d, a / kPageBytes)[a % kPageBytes];
      const Space space = a - d->shared_begin < d->shared_bytes ? Space::kShared : Space::kStaticShared;
      const bool written = e.write_serial >= d->block_start;
      if (written && (e.flags & kInFlight)) {
        access(*d, a, 1, false, false, reinterpret_cast<std::uintptr_t>(pc));  // its in-flight message
      } else if (!written) {
        d->error = launch_name(*d->site) + ": " + what + at_line(*d, pc32) + " reads " + place(*d, a, space) +
                   ", which no thread or copy of this block has written: shared memory starts as garbage";
      } else if (e.write_thread != kAsyncProxy && !ours(e.write_thread) &&
                 concurrent(*d, e.write_serial, e.write_thread)) {
        report(*d, a, space, "reads it through the async proxy", pc32,
               "wrote it", e.write_thread, e.write_serial, e.write_pc);
      } else if (e.write_thread != kAsyncProxy && !(e.flags & kWriteAtomic) &&
                 d->proxy_fence[e.write_thread] <= e.write_serial) {
        d->error = launch_name(*d->site) + ": " + what + at_line(*d, pc32) + " reads " + place(*d, a, space) +
                   " through the async proxy, but " + thread_name(e.write_thread, block_of(*d, e.write_serial)) +
                   " wrote it with ordinary stores" + at_line(*d, e.write_pc) +
                   " and made no fence.proxy.async since (fence_proxy_async_shared_cta after the writes, then a "
                   "barrier, then the wgmma or TMA store)";
      } else if (e.write_thread == kAsyncProxy && concurrent(*d, e.write_serial, kAsyncProxy)) {
        report(*d, a, space, "reads it through the async proxy", pc32, "wrote it", kAsyncProxy, e.write_serial,
               e.write_pc);
      } else {
        e.read_serial = d->serial, e.read_pc = pc32;
        e.read_thread = static_cast<std::uint16_t>(group >= 0 ? kWarpgroupReader + group : d->thread);
        if (track) e.flags = static_cast<std::uint16_t>(e.flags + kAsyncReader);
      }
    }
  }
  d->thread = saved_thread, d->warp = saved_warp;
  if (!track || !d->error.empty()) return 0;
  d->async_reads.push_back({d->next_async_read, ranges, pc32, what});
  return d->next_async_read++;
}

std::uint32_t now() { return active ? active->serial : 0; }

bool unordered(std::uint32_t serial, int thread) {
  const Detector* d = active;
  return d && serial >= d->block_start && concurrent(*d, serial, thread);
}

void async_read_end(int id) {
  Detector* d = active;
  if (!d || id == 0) return;
  for (std::size_t i = 0; i < d->async_reads.size(); ++i) {
    if (d->async_reads[i].id != id) continue;
    for (const auto& [begin, end] : d->async_reads[i].ranges)
      for_each_entry(*d, begin, end - begin, [](Entry& e) {
        if (e.flags >> 8) e.flags = static_cast<std::uint16_t>(e.flags - kAsyncReader);
      });
    d->async_reads.erase(d->async_reads.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
}

std::string take_error() {
  Detector& d = detector();
  std::string error;
  error.swap(d.error);
  return error;
}

}  // namespace brrr::simt::detail::races

namespace brrr::simt::detail {

thread_local bool in_fiber __attribute__((tls_model("initial-exec"))) = false;

void atomic_access(const void* address, std::size_t bytes, const void* pc) {
  if (races::Detector* d = races::active)
    races::access(*d, reinterpret_cast<std::uintptr_t>(address), bytes, true, true,
                  reinterpret_cast<std::uintptr_t>(pc));
}

}  // namespace brrr::simt::detail

// ---------------------------------------------------------------------------------------------
// The compiler's hooks. -fsanitize=thread calls these; they are ThreadSanitizer's interface,
// implemented by brrr. Atomics of host code in the same files (a shared_ptr's count) are done
// here for real, since the compiler no longer emits them itself.

namespace {
using brrr::simt::detail::races::access;
using brrr::simt::detail::races::active;
namespace counters = brrr::simt::detail::counters;
// Each access of a fiber (simt_internal.h: in_fiber) goes to the race detector and to the
// memory counters, where they are on (outside fibers a hook costs a thread-local load and a
// branch).
inline void read(void* p, std::size_t n, void* pc) {
  if (!brrr::simt::detail::in_fiber) return;
  if (auto* d = active) access(*d, reinterpret_cast<std::uintptr_t>(p), n, false, false, reinterpret_cast<std::uintptr_t>(pc));
  if (auto* r = counters::active)
    counters::access(*r, reinterpret_cast<std::uintptr_t>(p), n, false, reinterpret_cast<std::uintptr_t>(pc));
}
inline void write(void* p, std::size_t n, void* pc) {
  if (!brrr::simt::detail::in_fiber) return;
  if (auto* d = active) access(*d, reinterpret_cast<std::uintptr_t>(p), n, true, false, reinterpret_cast<std::uintptr_t>(pc));
  if (auto* r = counters::active)
    counters::access(*r, reinterpret_cast<std::uintptr_t>(p), n, true, reinterpret_cast<std::uintptr_t>(pc));
}
}  // namespace

extern "C" {
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}
#define BRRR_TSAN_ACCESS(n)                                                                       \
  void __tsan_read##n(void* p) { read(p, n, __builtin_return_address(0)); }                       \
  void __tsan_write##n(void* p) { write(p, n, __builtin_return_address(0)); }                     \
  void __tsan_unaligned_read##n(void* p) { read(p, n, __builtin_return_address(0)); }             \
  void __tsan_unaligned_write##n(void* p) { write(p, n, __builtin_return_address(0)); }           \
  void __tsan_volatile_read##n(void* p) { read(p, n, __builtin_return_address(0)); }              \
  void __tsan_volatile_write##n(void* p) { write(p, n, __builtin_return_address(0)); }            \
  void __tsan_read##n##_pc(void* p, void* pc) { read(p, n, pc); }                                 \
  void __tsan_write##n##_pc(void* p, void* pc) { write(p, n, pc); }
BRRR_TSAN_ACCESS(1)
BRRR_TSAN_ACCESS(2)
BRRR_TSAN_ACCESS(4)
BRRR_TSAN_ACCESS(8)
BRRR_TSAN_ACCESS(16)
#undef BRRR_TSAN_ACCESS
void __tsan_read_range(void* p, unsigned long n) { read(p, n, __builtin_return_address(0)); }
void __tsan_write_range(void* p, unsigned long n) { write(p, n, __builtin_return_address(0)); }
// A struct copied or filled whole: clang calls these for a float4 copy or a zero float4
// store in kernel code (GCC keeps such copies as loads and stores), so they are accesses too.
void* __tsan_memcpy(void* d, const void* s, unsigned long n) {
  if (n) read(const_cast<void*>(s), n, __builtin_return_address(0)), write(d, n, __builtin_return_address(0));
  return std::memcpy(d, s, n);
}
void* __tsan_memmove(void* d, const void* s, unsigned long n) {
  if (n) read(const_cast<void*>(s), n, __builtin_return_address(0)), write(d, n, __builtin_return_address(0));
  return std::memmove(d, s, n);
}
void* __tsan_memset(void* d, int c, unsigned long n) {
  if (n) write(d, n, __builtin_return_address(0));
  return std::memset(d, c, n);
}

void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#define BRRR_TSAN_ATOMIC(bits, T)                                                                          \
  T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) { return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST); } \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);               \
  }                                                                                                         \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                  \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                \
  }                                                                                                         \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                        \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
    return c;                                                                                               \
  }
BRRR_TSAN_ATOMIC(8, unsigned char)
BRRR_TSAN_ATOMIC(16, unsigned short)
BRRR_TSAN_ATOMIC(32, unsigned int)
BRRR_TSAN_ATOMIC(64, unsigned long long)
#undef BRRR_TSAN_ATOMIC
}
