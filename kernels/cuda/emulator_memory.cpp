// kernels/cuda/emulator_memory.cpp: the emulator's device memory: an arena host code cannot
// touch, poisoned fresh memory, exact sizes. Chapter 10 (the GPU and the emulator).
// Read before: kernels/cuda/emulator_memory.h (what it promises and why).
//
// The arena is one reservation of address space (16 GiB, the emulated device's size), mapped
// PROT_NONE: nothing may read or write it. Allocations are cut from it first fit, 256-byte
// aligned as cudaMalloc's. While a launch or a copy runs, the used part of the arena is made
// readable and writable (mprotect), then inaccessible again; a host access at any other
// moment faults, and the SIGSEGV handler below says what happened before the program stops.
// A switch of protection costs a few microseconds per launch; the emulator is for
// correctness, not speed.
#include "kernels/cuda/emulator_memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

#include "brrr/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define BRRR_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define BRRR_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define BRRR_POISON(p, n) ((void)(p), (void)(n))
#define BRRR_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace brrr::simt::memory {
namespace {

constexpr std::size_t kArenaBytes = std::size_t{16} << 30;
constexpr std::size_t kAlignment = 256;
// Fresh and recycled device memory reads as this byte: 0xFFFFFFFF is a NaN as float, -1 as int.
constexpr int kPoison = 0xFF;

struct Block {
  std::size_t capacity = 0;  // bytes cut from the arena (a multiple of 256)
  std::size_t in_use = 0;    // bytes the owner may touch
  bool cached = false;       // freed by its tensor, kept by the caching allocator
};

struct Arena {
  std::mutex mutex;
  std::byte* base = nullptr;
  std::size_t top = 0;                         // bytes of the arena ever handed out
  std::map<std::size_t, std::size_t> free;     // offset -> bytes, below top
  std::map<std::uintptr_t, Block> live;        // address -> block
  int open = 0;                                // Open objects alive
  struct sigaction previous_handler {};
};

void on_segv(int signal, siginfo_t* info, void* context);

void install_handler(Arena& a) {
  struct sigaction action {}, before {};
  action.sa_sigaction = on_segv;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGSEGV, &action, &before);
  if (before.sa_sigaction != on_segv) a.previous_handler = before;
}

Arena& arena() {
  static Arena* instance = [] {
    auto* a = new Arena;  // never destroyed: tensors freed at exit still release into it
    void* p = mmap(nullptr, kArenaBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    BRRR_CHECK(p != MAP_FAILED, "emulator: cannot reserve ", kArenaBytes >> 30,
               " GiB of address space for device memory: ", std::strerror(errno));
    a->base = static_cast<std::byte*>(p);
    install_handler(*a);
    return a;
  }();
  return *instance;
}

// Pages are the unit of protection: a range is widened to whole pages. (Closing a page that
// holds a neighbour's bytes is right too: the arena is only ever all open or all closed.)
void protect(Arena& a, std::size_t from, std::size_t to, bool accessible) {  // a.mutex held
  static const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  from = from / page * page;
  to = (to + page - 1) / page * page;
  if (to <= from) return;
  const int status = mprotect(a.base + from, to - from, accessible ? PROT_READ | PROT_WRITE : PROT_NONE);
  BRRR_CHECK(status == 0, "emulator: mprotect of device memory failed: ", std::strerror(errno));
}

std::string hex(std::uintptr_t value) {
  std::ostringstream text;
  text << "0x" << std::hex << value;
  return text.str();
}

std::string describe_locked(Arena& a, std::uintptr_t p) {  // a.mutex held (or the program is dying)
  auto after = a.live.upper_bound(p);
  if (after != a.live.begin()) {
    const auto& [begin, block] = *std::prev(after);
    if (p < begin + block.capacity) {
      if (block.cached)
        return "device memory in a block the caching allocator holds for reuse (the tensor that had it was freed), " +
               std::to_string(p - begin) + " bytes into the block at " + hex(begin);
      if (p < begin + block.in_use)
        return "byte " + std::to_string(p - begin) + " of a " + std::to_string(block.in_use) +
               "-byte device allocation at " + hex(begin);
      return std::to_string(p - begin - block.in_use) + " bytes past the end of a " + std::to_string(block.in_use) +
             "-byte device allocation at " + hex(begin) + " (byte " + std::to_string(p - begin) + ")";
    }
  }
  return "device memory at " + hex(p) + " that no live allocation holds (freed, or never allocated)";
}

// Returning from the handler runs the faulting instruction again, now with the default
// action: the program stops with SIGSEGV.
void default_action() {
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigaction(SIGSEGV, &fallback, nullptr);
}

// A host access of the arena while it is closed. Printing is not async-signal-safe in
// general; here the fault is the program's own load or store, not an interrupted malloc.
void on_segv(int signal, siginfo_t* info, void* context) {
  Arena& a = arena();
  const auto p = reinterpret_cast<std::uintptr_t>(info->si_addr);
  const auto base = reinterpret_cast<std::uintptr_t>(a.base);
  if (p >= base && p < base + kArenaBytes) {
    const std::string where = describe_locked(a, p);
    const std::string message =
        "\nbrrr: the host touched device memory (" + where +
        "): on a GPU this address is not host memory. Only kernels and copies may touch a device pointer; copy "
        "the data to the host first (Tensor::to(kCPU), gpu::Runtime::copy). The emulator keeps device memory "
        "inaccessible outside launches and copies so this shows here, not on a GPU.\n";
    const ssize_t written = write(STDERR_FILENO, message.data(), message.size());
    (void)written;
    return default_action();
  }
  // Not ours: whoever handled SIGSEGV before (AddressSanitizer, a debugger's helper) does.
  const struct sigaction& before = a.previous_handler;
  if (before.sa_flags & SA_SIGINFO) {
    if (before.sa_sigaction) return before.sa_sigaction(signal, info, context);
  } else if (before.sa_handler != SIG_DFL && before.sa_handler != SIG_IGN && before.sa_handler) {
    return before.sa_handler(signal);
  }
  default_action();
}

}  // namespace

void install_fault_handler() { install_handler(arena()); }

void* allocate(std::size_t nbytes) {
  Arena& a = arena();
  const std::size_t capacity = (std::max<std::size_t>(nbytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  std::lock_guard<std::mutex> lock(a.mutex);
  std::size_t offset = a.top;
  for (auto it = a.free.begin(); it != a.free.end(); ++it) {  // first fit
    if (it->second < capacity) continue;
    offset = it->first;
    if (it->second > capacity) a.free.emplace(offset + capacity, it->second - capacity);
    a.free.erase(it);
    break;
  }
  if (offset == a.top) {
    if (a.top + capacity > kArenaBytes) return nullptr;
    if (a.open > 0) protect(a, a.top, a.top + capacity, true);  // the open part grows
    a.top += capacity;
  }
  std::byte* p = a.base + offset;
  a.live[reinterpret_cast<std::uintptr_t>(p)] = Block{capacity, nbytes, false};
  if (a.open == 0) protect(a, offset, offset + capacity, true);
  BRRR_UNPOISON(p, capacity);
  std::memset(p, kPoison, capacity);
  BRRR_POISON(p + nbytes, capacity - nbytes);  // AddressSanitizer sees an overrun of the slack
  if (a.open == 0) protect(a, offset, offset + capacity, false);
  return p;
}

void release(void* pointer) {
  if (!pointer) return;
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.live.find(reinterpret_cast<std::uintptr_t>(pointer));
  BRRR_CHECK(it != a.live.end(), "emulator: freeing ", hex(reinterpret_cast<std::uintptr_t>(pointer)),
             ", which is not a device allocation (", describe_locked(a, reinterpret_cast<std::uintptr_t>(pointer)),
             ")");
  std::size_t offset = static_cast<std::size_t>(static_cast<std::byte*>(pointer) - a.base);
  std::size_t bytes = it->second.capacity;
  a.live.erase(it);
  BRRR_POISON(pointer, bytes);
  // Give back the pages that lie wholly inside the block; they read as zero, and are poisoned
  // on reuse. Only whole pages: madvise rounds its length up to a page, and the rest of a
  // partly covered page belongs to other blocks, which must keep their bytes.
  {
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<std::uintptr_t>(pointer) + page - 1) / page * page;
    const auto end = (reinterpret_cast<std::uintptr_t>(pointer) + bytes) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
  }
  // Merge with free neighbours.
  auto next = a.free.lower_bound(offset);
  if (next != a.free.end() && next->first == offset + bytes) {
    bytes += next->second;
    next = a.free.erase(next);
  }
  if (next != a.free.begin()) {
    auto before = std::prev(next);
    if (before->first + before->second == offset) {
      offset = before->first;
      bytes += before->second;
      a.free.erase(before);
    }
  }
  a.free.emplace(offset, bytes);
}

void set_in_use(void* block, std::size_t bytes) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.live.find(reinterpret_cast<std::uintptr_t>(block));
  BRRR_CHECK(it != a.live.end() && bytes <= it->second.capacity, "emulator: set_in_use(",
             hex(reinterpret_cast<std::uintptr_t>(block)), ", ", bytes, "): not a device block of at least ", bytes,
             " bytes");
  it->second.in_use = bytes;
  it->second.cached = false;
  const std::size_t offset = static_cast<std::size_t>(static_cast<std::byte*>(block) - a.base);
  if (a.open == 0) protect(a, offset, offset + it->second.capacity, true);
  BRRR_UNPOISON(block, bytes);
  std::memset(block, kPoison, bytes);
  if (a.open == 0) protect(a, offset, offset + it->second.capacity, false);
}

void set_cached(void* block) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  auto it = a.live.find(reinterpret_cast<std::uintptr_t>(block));
  BRRR_CHECK(it != a.live.end(), "emulator: set_cached(", hex(reinterpret_cast<std::uintptr_t>(block)),
             "): not a device block");
  it->second.cached = true;
  BRRR_POISON(block, it->second.capacity);
}

bool in_arena(const void* pointer) {
  Arena& a = arena();
  const auto p = reinterpret_cast<std::uintptr_t>(pointer), base = reinterpret_cast<std::uintptr_t>(a.base);
  return p >= base && p < base + kArenaBytes;
}

void arena(std::uintptr_t& begin, std::uintptr_t& bytes) {
  begin = reinterpret_cast<std::uintptr_t>(arena().base);
  bytes = kArenaBytes;
}

bool find(const void* pointer, Allocation& found) {
  Arena& a = arena();
  const auto p = reinterpret_cast<std::uintptr_t>(pointer);
  std::lock_guard<std::mutex> lock(a.mutex);
  auto after = a.live.upper_bound(p);
  if (after == a.live.begin()) return false;
  const auto& [begin, block] = *std::prev(after);
  if (block.cached || p > begin + block.in_use) return false;
  found = Allocation{begin, block.in_use};
  return true;
}

std::string describe(const void* pointer) {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  return describe_locked(a, reinterpret_cast<std::uintptr_t>(pointer));
}

Open::Open() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (a.open++ == 0) protect(a, 0, a.top, true);
}

Open::~Open() {
  Arena& a = arena();
  std::lock_guard<std::mutex> lock(a.mutex);
  if (--a.open == 0) protect(a, 0, a.top, false);
}

kernels::Stream stream() {
  static char token;  // any address but 0: the legacy default stream is 0
  return &token;
}

}  // namespace brrr::simt::memory
