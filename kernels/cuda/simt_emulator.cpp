// kernels/cuda/simt_emulator.cpp: the SIMT emulator's runtime: fibers, barriers, shuffles.
// Chapter 09 (the GPU and the emulator). Read before: kernels/cuda/simt.h (how it works).
// Read next: kernels/cuda/examples.cu.
//
// A launch runs its blocks one after another. For each block the emulator makes every CUDA
// thread a fiber (a stack and a saved set of registers) and runs them on the calling OS
// thread, one at a time: a fiber runs the kernel until it waits at a barrier or returns, then
// switches straight to the next fiber that can run. The fibers, with their stacks, are made
// once and reused by every block and every launch; after a block they wait at the top of
// their loop for the next one.
//
// Fibers are ucontext's: makecontext points a context at a fresh stack and a function,
// swapcontext saves the registers of one context and loads another's. A switch costs about
// 0.25 us (glibc also saves the signal mask, with a system call): the emulator is for
// correctness, not speed.
#include "kernels/cuda/simt.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define BRRR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRRR_ASAN 1
#endif
#endif
#ifndef BRRR_ASAN
#define BRRR_ASAN 0
#endif
#if BRRR_ASAN
// AddressSanitizer keeps track of which stack the program runs on; a fiber switch must tell
// it, or it reports false errors (and refuses to unwind exceptions) on the fibers' stacks.
// (It still prints, once, that it "doesn't fully support makecontext/swapcontext": the
// annotations below are the support it asks for.)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace brrr::simt::detail {
namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxWarps = kMaxThreads / warpSize;
// A GPU thread gets about 1 KiB of stack by default, so 64 KiB is plenty for a kernel, plus
// room to throw an exception. AddressSanitizer's padded frames need more.
constexpr std::size_t kStackBytes = BRRR_ASAN ? 256 * 1024 : 64 * 1024;

// ---------------------------------------------------------------------------------------------
// Contexts and fibers

// Registers plus, for AddressSanitizer, the bounds of the stack they run on.
struct Context {
  ucontext_t registers;
  const void* stack_bottom = nullptr;
  std::size_t stack_size = 0;
  void* asan_fake_stack = nullptr;
};

enum class State { kReady, kRunning, kAtSyncthreads, kAtWarpBarrier, kReturned };

struct Fiber {
  Context context;
  void* mapping = nullptr;  // a guard page, then the stack
  std::size_t mapping_bytes = 0;
  // This thread in the current block.
  int index = 0;  // threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y
  uint3 thread{0, 0, 0};
  int warp = 0, lane = 0;
  State state = State::kReturned;
  const char* waiting_at = nullptr;  // the barrier it waits at, for deadlock messages
  bool in_kernel = false;            // started the kernel and has not returned from it
  int mailbox = 0;                   // which of the warp's two mailboxes its next shuffle uses
};

struct Warp {
  int lanes = 0;    // 32, or fewer in the last warp of a block of 40 threads
  int arrived = 0;  // at the warp barrier
  int waiting[warpSize];
  std::uint64_t mailbox[2][warpSize];  // shuffles alternate between the two
};

struct Emulator {
  std::vector<std::unique_ptr<Fiber>> fibers;  // as many as the largest block so far
  Context scheduler;                            // the OS thread's own stack, running launch
  bool leaving_scheduler = false;               // for AddressSanitizer: learn its stack bounds

  // The current launch.
  const LaunchSite* site = nullptr;
  ThreadBody body = nullptr;
  const void* closure = nullptr;
  std::byte* shared = nullptr;  // dynamic shared memory
  std::size_t shared_bytes = 0;

  // The current block.
  int threads = 0;
  int live = 0;  // threads that have not returned
  int arrived_at_syncthreads = 0;
  int waiting_at_syncthreads[kMaxThreads];
  Warp warps[kMaxWarps];
  int ready[kMaxThreads];  // a ring of fibers that can run
  int ready_head = 0, ready_count = 0;
  Fiber* current = nullptr;
  std::exception_ptr error;  // thrown by a thread of this block

  ~Emulator();
};

Emulator& emulator() {
  static Emulator instance;
  return instance;
}

void unpoison_stack(Fiber& fiber) {
#if BRRR_ASAN
  ASAN_UNPOISON_MEMORY_REGION(fiber.mapping, fiber.mapping_bytes);
#else
  (void)fiber;
#endif
}

Emulator::~Emulator() {
  for (auto& fiber : fibers) {
    unpoison_stack(*fiber);
    munmap(fiber->mapping, fiber->mapping_bytes);
  }
}

// Switches from `self` (the context running now) to `target`; returns when someone switches
// back to `self`.
void switch_context(Context& self, Context& target) {
#if BRRR_ASAN
  __sanitizer_start_switch_fiber(&self.asan_fake_stack, target.stack_bottom, target.stack_size);
#endif
  swapcontext(&self.registers, &target.registers);
#if BRRR_ASAN
  const void* from_bottom = nullptr;
  std::size_t from_size = 0;
  __sanitizer_finish_switch_fiber(self.asan_fake_stack, &from_bottom, &from_size);
  Emulator& emu = emulator();
  if (emu.leaving_scheduler) {  // the scheduler switched to us: now we know its stack
    emu.leaving_scheduler = false;
    emu.scheduler.stack_bottom = from_bottom;
    emu.scheduler.stack_size = from_size;
  }
#endif
}

void run_next(Fiber& self);
void fiber_main();

// The ring of fibers that can run, first in first out.
void make_ready(Emulator& emu, int index) {
  emu.fibers[index]->state = State::kReady;
  emu.ready[(emu.ready_head + emu.ready_count) % kMaxThreads] = index;
  ++emu.ready_count;
}

Fiber& pop_ready(Emulator& emu) {
  Fiber& fiber = *emu.fibers[emu.ready[emu.ready_head]];
  emu.ready_head = (emu.ready_head + 1) % kMaxThreads;
  --emu.ready_count;
  return fiber;
}

// Points a fiber's context at the start of fiber_main on its own stack.
void start_fiber(Fiber& fiber) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  Context& context = fiber.context;
  getcontext(&context.registers);
  context.registers.uc_stack.ss_sp = static_cast<char*>(fiber.mapping) + page;
  context.registers.uc_stack.ss_size = fiber.mapping_bytes - page;
  context.registers.uc_link = nullptr;  // fiber_main never returns
  makecontext(&context.registers, fiber_main, 0);
  context.stack_bottom = context.registers.uc_stack.ss_sp;
  context.stack_size = context.registers.uc_stack.ss_size;
  context.asan_fake_stack = nullptr;
  // makecontext has placed the stack pointer; forget the stack, or AddressSanitizer's
  // swapcontext would wipe its record of the fiber's frames on every switch.
  context.registers.uc_stack.ss_sp = nullptr;
  context.registers.uc_stack.ss_size = 0;
}

void add_fibers(Emulator& emu, int count) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  while (static_cast<int>(emu.fibers.size()) < count) {
    auto fiber = std::make_unique<Fiber>();
    fiber->mapping_bytes = page + kStackBytes;
    fiber->mapping = mmap(nullptr, fiber->mapping_bytes, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    BRRR_CHECK(fiber->mapping != MAP_FAILED, "emulator: cannot map a ", kStackBytes, "-byte fiber stack");
    // The lowest page is a guard: a kernel that overflows its stack faults there instead of
    // overwriting the next fiber's stack.
    mprotect(fiber->mapping, page, PROT_NONE);
    start_fiber(*fiber);
    emu.fibers.push_back(std::move(fiber));
  }
}

// Makes `next` the running thread and switches to it from `self`.
void resume(Context& self, Fiber& next) {
  Emulator& emu = emulator();
  emu.current = &next;
  next.state = State::kRunning;
  threadIdx = next.thread;
  switch_context(self, next.context);
}

// The loop every fiber runs: one CUDA thread of one block per turn.
void fiber_main() {
  Emulator& emu = emulator();
  Fiber& self = *emu.current;
#if BRRR_ASAN
  const void* from_bottom = nullptr;
  std::size_t from_size = 0;
  __sanitizer_finish_switch_fiber(nullptr, &from_bottom, &from_size);
  if (emu.leaving_scheduler) {
    emu.leaving_scheduler = false;
    emu.scheduler.stack_bottom = from_bottom;
    emu.scheduler.stack_size = from_size;
  }
#endif
  for (;;) {
    self.in_kernel = true;
    try {
      emu.body(emu.closure);
    } catch (...) {
      // Only note it here: switching fibers inside a catch block would confuse the C++
      // runtime's record of the exception being handled.
      emu.error = std::current_exception();
    }
    self.in_kernel = false;
    self.state = State::kReturned;
    --emu.live;
    run_next(self);
  }
}

// `self` cannot go on (it waits or has returned): run the next ready fiber, or give the CPU
// back to the scheduler when none is ready (the block is done, deadlocked or failed).
void run_next(Fiber& self) {
  Emulator& emu = emulator();
  if (emu.ready_count > 0 && !emu.error) {
    resume(self.context, pop_ready(emu));
  } else {
    emu.current = nullptr;
    switch_context(self.context, emu.scheduler);
  }
  // Resumed: resume() has made this fiber current again.
}


Fiber& current_fiber(const char* what) {
  Fiber* fiber = emulator().current;
  BRRR_CHECK(fiber != nullptr, what, " called outside a kernel: it is only meaningful inside a launch");
  return *fiber;
}

std::string block_name() {
  std::ostringstream name;
  name << "block (" << blockIdx.x << "," << blockIdx.y << "," << blockIdx.z << ")";
  return name.str();
}

void check_mask(const char* name, unsigned mask, const Warp& warp, const Fiber& self) {
  const unsigned all = warp.lanes == warpSize ? 0xffffffffu : (1u << warp.lanes) - 1;
  if ((mask & all) != all) {
    std::ostringstream hex;
    hex << "0x" << std::hex << mask;
    ::brrr::detail::fail("kernel ", emulator().site->kernel, ": ", name, " with mask ", hex.str(), " in warp ",
                         self.warp, " of ", block_name(),
                         ": the emulator models only masks naming every lane of the warp (0xffffffff)");
  }
}

// Waits until all lanes of the warp have arrived.
void arrive_at_warp_barrier(Fiber& self, const char* name) {
  Emulator& emu = emulator();
  Warp& warp = emu.warps[self.warp];
  if (++warp.arrived == warp.lanes) {  // the last lane: wake the others and go on
    for (int i = 0; i < warp.lanes - 1; ++i) make_ready(emu, warp.waiting[i]);
    warp.arrived = 0;
    return;
  }
  warp.waiting[warp.arrived - 1] = self.index;
  self.state = State::kAtWarpBarrier;
  self.waiting_at = name;
  run_next(self);
}

// ---------------------------------------------------------------------------------------------
// Running a block

// Resets the fibers that were stopped in the middle of the kernel by an error or a deadlock.
// Their frames are abandoned: a kernel holds no resources that need destructors.
void abandon_block(Emulator& emu) {
  for (int i = 0; i < emu.threads; ++i) {
    Fiber& fiber = *emu.fibers[i];
    if (fiber.in_kernel) {
      unpoison_stack(fiber);
      start_fiber(fiber);
      fiber.in_kernel = false;
    }
    fiber.state = State::kReturned;
  }
  emu.current = nullptr;
  emu.error = nullptr;
}

// No fiber can run but some have not returned: say who waits where.
std::string describe_deadlock(const Emulator& emu) {
  int at_syncthreads = 0, at_warp_barrier = 0, returned = 0;
  const char* warp_barrier_name = nullptr;
  for (int i = 0; i < emu.threads; ++i) {
    const Fiber& fiber = *emu.fibers[i];
    if (fiber.state == State::kAtSyncthreads) ++at_syncthreads;
    if (fiber.state == State::kReturned) ++returned;
    if (fiber.state == State::kAtWarpBarrier) {
      ++at_warp_barrier;
      warp_barrier_name = fiber.waiting_at;
    }
  }
  std::ostringstream message;
  message << "kernel " << emu.site->kernel << ": ";
  if (at_syncthreads > 0) {
    message << "__syncthreads reached by only " << at_syncthreads << " of " << emu.threads << " threads of "
            << block_name();
    if (returned > 0) message << "; " << returned << " returned without reaching it";
    if (at_warp_barrier > 0)
      message << "; " << at_warp_barrier << " wait at " << warp_barrier_name << " for lanes of their warp";
    message << " (every thread of a block must reach each __syncthreads)";
    return message.str();
  }
  for (int w = 0; w * warpSize < emu.threads; ++w) {
    const Warp& warp = emu.warps[w];
    if (warp.arrived == 0) continue;
    const Fiber& first = *emu.fibers[warp.waiting[0]];
    message << first.waiting_at << " reached by only " << warp.arrived << " of " << warp.lanes << " lanes of warp "
            << w << " of " << block_name() << "; the other " << warp.lanes - warp.arrived
            << " returned without reaching it (every lane in the mask must take part)";
    return message.str();
  }
  message << "no thread of " << block_name() << " can run";  // not reached
  return message.str();
}

void run_block(Emulator& emu) {
  emu.live = emu.threads;
  emu.arrived_at_syncthreads = 0;
  emu.ready_head = emu.ready_count = 0;
  emu.error = nullptr;
  for (int w = 0; w * warpSize < emu.threads; ++w) {
    emu.warps[w].lanes = std::min(warpSize, emu.threads - w * warpSize);
    emu.warps[w].arrived = 0;
  }
  for (int i = 0; i < emu.threads; ++i) {
    emu.fibers[i]->mailbox = 0;
    make_ready(emu, i);
  }
  std::memset(emu.shared, 0xFF, emu.shared_bytes);

  // Start the first thread; the fibers pass the CPU among themselves and give it back here
  // when none can run.
  emu.leaving_scheduler = true;
  resume(emu.scheduler, pop_ready(emu));

  if (emu.error) {
    std::exception_ptr error = emu.error;
    abandon_block(emu);
    std::rethrow_exception(error);
  }
  if (emu.live > 0) {
    std::string message = describe_deadlock(emu);
    abandon_block(emu);
    throw Error(message);
  }
}

thread_local bool inside_launch = false;

}  // namespace

// ---------------------------------------------------------------------------------------------
// The entry points simt.h declares

void run_launch(const LaunchSite& site, dim3 grid, dim3 block, std::size_t shared_bytes, ThreadBody body,
                const void* closure) {
  validate_launch(site, grid, block, shared_bytes);
  BRRR_CHECK(!inside_launch, "kernel ", site.kernel,
             ": launched from inside a kernel; the emulator does not model dynamic parallelism");
  // One launch at a time in the whole program: that is what makes `static` a correct
  // __shared__, and lets every launch share the fibers.
  static std::mutex one_launch_at_a_time;
  std::lock_guard lock(one_launch_at_a_time);
  inside_launch = true;
  Emulator& emu = emulator();
  const auto free_shared = [](std::byte* p) { ::operator delete(p, std::align_val_t{16}); };
  std::unique_ptr<std::byte, decltype(free_shared)> shared(
      static_cast<std::byte*>(::operator new(shared_bytes, std::align_val_t{16})), free_shared);
  struct Done {  // runs however the launch ends
    Emulator& emu;
    ~Done() {
      emu.site = nullptr;
      emu.shared = nullptr;
      inside_launch = false;
    }
  } done{emu};

  const int threads = static_cast<int>(block.x * block.y * block.z);
  add_fibers(emu, threads);
  emu.site = &site;
  emu.body = body;
  emu.closure = closure;
  emu.shared = shared.get();  // exactly shared_bytes, so AddressSanitizer sees overruns
  emu.shared_bytes = shared_bytes;
  emu.threads = threads;
  for (int i = 0; i < threads; ++i) {
    Fiber& fiber = *emu.fibers[i];
    fiber.index = i;
    fiber.thread = {i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
    fiber.warp = i / warpSize;
    fiber.lane = i % warpSize;
  }
  gridDim = grid;
  blockDim = block;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIdx = {x, y, z};
        run_block(emu);
      }
}

void* dynamic_shared_memory() {
  current_fiber("BRRR_DYNAMIC_SHARED");
  return emulator().shared;
}

void sync_block(const char* name) {
  Fiber& self = current_fiber(name);
  Emulator& emu = emulator();
  if (++emu.arrived_at_syncthreads == emu.threads) {  // the last thread: wake the others, go on
    for (int i = 0; i < emu.threads - 1; ++i) make_ready(emu, emu.waiting_at_syncthreads[i]);
    emu.arrived_at_syncthreads = 0;
    return;
  }
  emu.waiting_at_syncthreads[emu.arrived_at_syncthreads - 1] = self.index;
  self.state = State::kAtSyncthreads;
  self.waiting_at = name;
  run_next(self);
}

void sync_warp(const char* name, unsigned mask) {
  Fiber& self = current_fiber(name);
  check_mask(name, mask, emulator().warps[self.warp], self);
  arrive_at_warp_barrier(self, name);
}

std::uint64_t shuffle_bits(const char* name, unsigned mask, std::uint64_t bits, Shuffle kind, int arg, int width) {
  Fiber& self = current_fiber(name);
  Warp& warp = emulator().warps[self.warp];
  check_mask(name, mask, warp, self);
  BRRR_CHECK(width >= 1 && width <= warpSize && (width & (width - 1)) == 0, "kernel ", emulator().site->kernel,
             ": ", name, " with width ", width, "; the width must be a power of two from 1 to 32");
  // Post this lane's value, wait for every lane of the warp to post theirs, read the source's.
  const int box = self.mailbox;
  self.mailbox ^= 1;
  warp.mailbox[box][self.lane] = bits;
  arrive_at_warp_barrier(self, name);

  // The source lane, in CUDA's rules: lanes form groups of `width`; a source outside the
  // group gives the lane its own value back.
  const int lane = self.lane;
  const int group = lane & ~(width - 1);
  int source = lane;
  switch (kind) {
    case Shuffle::kIndex: source = group + (arg & (width - 1)); break;
    case Shuffle::kUp: source = (lane - group) >= arg ? lane - arg : lane; break;
    case Shuffle::kDown: source = (lane - group) + arg < width ? lane + arg : lane; break;
    case Shuffle::kXor: source = lane ^ arg; if (source >= group + width) source = lane; break;
  }
  // A lane past the end of a partial warp (block of 40 threads) has no value: undefined on
  // the GPU; the emulator gives the lane its own value.
  if (source < 0 || source >= warp.lanes) source = lane;
  return warp.mailbox[box][source];
}

unsigned ballot(const char* name, unsigned mask, bool predicate) {
  Fiber& self = current_fiber(name);
  Warp& warp = emulator().warps[self.warp];
  check_mask(name, mask, warp, self);
  const int box = self.mailbox;
  self.mailbox ^= 1;
  warp.mailbox[box][self.lane] = predicate;
  arrive_at_warp_barrier(self, name);
  unsigned votes = 0;
  for (int lane = 0; lane < warp.lanes; ++lane)
    if (warp.mailbox[box][lane]) votes |= 1u << lane;
  return votes;
}

}  // namespace brrr::simt::detail
