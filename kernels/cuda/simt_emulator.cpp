// kernels/cuda/simt_emulator.cpp: the SIMT emulator's runtime: fibers, barriers, shuffles.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt.h (how it works).
// Read next: kernels/cuda/examples.cu.
//
// A launch runs its blocks one after another, in a shuffled order. For each block the emulator
// makes every CUDA thread a fiber (a stack and a saved set of registers) and runs them on the
// calling OS thread, one at a time: a fiber runs the kernel until it waits at a barrier or
// returns, then switches straight to the next fiber that can run. The fibers, with their
// stacks, are made once and reused by every block and every launch; after a block they wait
// at the top of their loop for the next one.
//
// The schedule
// ------------
// A GPU gives no order between blocks, nor between warps between two barriers; a kernel that
// works only in one order is wrong. So the emulator runs the blocks of a launch in a shuffled
// order and, in each phase between two __syncthreads, the warps of a block in a shuffled order.
// Warp first: once a warp runs, its lanes run until each waits at a __syncthreads or returns
// (they meet at every shuffle), as the lanes of a warp advance together on hardware. The
// shuffles come from a seed: BRRR_EMULATOR_SEED (default 1), mixed with the launch's number
// in the process, and every error of a launch says both, so `BRRR_EMULATOR_SEED=7` replays
// the order that went wrong. The tests run under several seeds (tests/emulator).
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
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <numeric>
#include <unordered_map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/emulator_memory.h"
#include "kernels/cuda/simt_internal.h"

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

// kAtWarpgroupBarrier: a Hopper warpgroup instruction (simt_hopper.cpp); kAsleep: an mbarrier
// wait, until the mbarrier wakes it.
enum class State { kReady, kRunning, kAtSyncthreads, kAtWarpBarrier, kAtWarpgroupBarrier, kAsleep, kReturned };

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
  std::source_location waiting_line;  // and its source line
  bool in_kernel = false;            // started the kernel and has not returned from it
  int mailbox = 0;                   // which of the warp's two mailboxes its next shuffle uses
  int group_mailbox = 0;             // the same for its warpgroup's exchanges
  const void* asleep_on = nullptr;   // the mbarrier it sleeps on (kAsleep)
};

// Two barriers are the same when they are the same call in the source.
bool same_place(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() && std::strcmp(a.file_name(), b.file_name()) == 0;
}

std::string line_of(const std::source_location& at) {
  return std::string(file_name(at.file_name())) + ":" + std::to_string(at.line());
}

struct Warp {
  int lanes = 0;    // 32, or fewer in the last warp of a block of 40 threads
  int arrived = 0;  // at the warp barrier
  int waiting[warpSize];
  std::uint64_t mailbox[2][warpSize];  // shuffles alternate between the two
  // The same for the warp-collective instructions (mma, ldmatrix), which pass several words.
  std::uint32_t exchange[2][warpSize][kExchangeWords];
  // Lanes that can run, first in first out.
  int ready[warpSize];
  int ready_head = 0, ready_count = 0;
};

// Four warps whose first index is a multiple of 4: Hopper's wgmma, fence, commit and wait
// are collective over them (simt_hopper.cpp).
constexpr int kWarpgroupThreads = 4 * warpSize;
struct Warpgroup {
  int arrived = 0;
  int waiting[kWarpgroupThreads];
  std::uint32_t exchange[2][kWarpgroupThreads][kWarpgroupWords];
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
  std::mt19937_64 random;       // the schedule
  bool races = false;           // the race detector watches this launch
  bool counting = false;        // the memory counters count this launch (simt_counters.cpp)

  // The current block.
  int threads = 0, warps = 0;
  int live = 0;  // threads that have not returned
  int arrived_at_syncthreads = 0;
  int waiting_at_syncthreads[kMaxThreads];
  Warp warp[kMaxWarps];
  Warpgroup group[kMaxWarps / 4];
  // The warps of this phase in their shuffled order; `turn` is the one running.
  int order[kMaxWarps];
  int turn = 0;
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

// ---------------------------------------------------------------------------------------------
// The schedule: warps in a shuffled order, lanes of a warp first in first out

void make_ready(Emulator& emu, int index) {
  Fiber& fiber = *emu.fibers[index];
  fiber.state = State::kReady;
  Warp& warp = emu.warp[fiber.warp];
  warp.ready[(warp.ready_head + warp.ready_count) % warpSize] = fiber.lane;
  ++warp.ready_count;
}

// A new phase (a block starts, or a __syncthreads released it): draw the warps' order.
void shuffle_warps(Emulator& emu) {
  for (int w = 0; w < emu.warps; ++w) emu.order[w] = w;
  std::shuffle(emu.order, emu.order + emu.warps, emu.random);
  emu.turn = 0;
}

// The next fiber to run: a ready lane of the running warp, else of the next warp in the
// order. nullptr when none can run (the block is done, or deadlocked).
Fiber* pop_ready(Emulator& emu) {
  for (int tried = 0; tried < emu.warps; ++tried) {
    Warp& warp = emu.warp[emu.order[emu.turn]];
    if (warp.ready_count > 0) {
      const int lane = warp.ready[warp.ready_head];
      warp.ready_head = (warp.ready_head + 1) % warpSize;
      --warp.ready_count;
      return emu.fibers[emu.order[emu.turn] * warpSize + lane].get();
    }
    emu.turn = (emu.turn + 1) % emu.warps;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Fibers

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
  if (emu.races)
    races::switch_to(next.index, next.warp, next.mapping,
                     static_cast<const char*>(next.mapping) + next.mapping_bytes);
  if (emu.counting)
    counters::switch_to(next.index, next.mapping, static_cast<const char*>(next.mapping) + next.mapping_bytes);
  in_fiber = true;
  if (&self == &next.context) return;  // it was its own next
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
  Fiber* next = emu.error ? nullptr : pop_ready(emu);
  if (next) {
    resume(self.context, *next);
  } else {
    emu.current = nullptr;
    in_fiber = false;  // host code from here on (simt_internal.h)
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

std::string thread_name(const Fiber& fiber) {
  std::ostringstream name;
  name << "thread (" << fiber.thread.x << "," << fiber.thread.y << "," << fiber.thread.z << ")";
  return name.str();
}

void check_mask(const char* name, unsigned mask, const Warp& warp, const Fiber& self) {
  const unsigned all = warp.lanes == warpSize ? 0xffffffffu : (1u << warp.lanes) - 1;
  if ((mask & all) != all) {
    std::ostringstream hex;
    hex << "0x" << std::hex << mask;
    ::brrr::detail::fail(launch_name(*emulator().site), ": ", name, " with mask ", hex.str(), " in warp ", self.warp,
                         " of ", block_name(),
                         ": the emulator models only masks naming every lane of the warp (0xffffffff)");
  }
}

// Waits until all lanes of the warp have arrived, at the same call of the source: lanes that
// meet at two different shuffles would swap values that belong to neither (on a GPU, the
// result is undefined).
void arrive_at_warp_barrier(Fiber& self, const char* name, const std::source_location& at) {
  Emulator& emu = emulator();
  if (emu.counting) counters::barrier(self.index);
  Warp& warp = emu.warp[self.warp];
  if (warp.arrived > 0) {
    const Fiber& first = *emu.fibers[warp.waiting[0]];
    if (!same_place(first.waiting_line, at) || std::strcmp(first.waiting_at, name) != 0)
      ::brrr::detail::fail(launch_name(*emu.site), ": the lanes of warp ", self.warp, " of ", block_name(),
                           " meet at two different warp operations: lane ", first.lane, " at ", first.waiting_at,
                           " (", line_of(first.waiting_line), "), lane ", self.lane, " at ", name, " (",
                           line_of(at), "); every lane in the mask must reach the same one (a shuffle in a "
                           "divergent branch?)");
  }
  if (++warp.arrived == warp.lanes) {  // the last lane: wake the others and go on
    for (int i = 0; i < warp.lanes - 1; ++i) make_ready(emu, warp.waiting[i]);
    warp.arrived = 0;
    return;
  }
  warp.waiting[warp.arrived - 1] = self.index;
  self.state = State::kAtWarpBarrier;
  self.waiting_at = name;
  self.waiting_line = at;
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
  for (int g = 0; g < (emu.warps + 3) / 4; ++g) {
    const Warpgroup& group = emu.group[g];
    if (group.arrived == 0) continue;
    const Fiber& first = *emu.fibers[group.waiting[0]];
    message << first.waiting_at << " (" << line_of(first.waiting_line) << ") reached by only " << group.arrived
            << " of the 128 threads of warpgroup " << g << " (warps " << 4 * g << " to " << 4 * g + 3 << ") of "
            << block_name() << "; the others returned or wait elsewhere. A warpgroup instruction must be issued by "
            << "all four warps of a warpgroup, whose first warp index is a multiple of 4";
    return message.str();
  }
  for (int i = 0; i < emu.threads; ++i) {
    const Fiber& fiber = *emu.fibers[i];
    if (fiber.state != State::kAsleep) continue;
    message << thread_name(fiber) << " of " << block_name() << " waits at " << fiber.waiting_at << " ("
            << line_of(fiber.waiting_line) << ") for a phase that never completes: "
            << mbarrier_state(fiber.asleep_on);
    if (at_syncthreads > 0) message << "; " << at_syncthreads << " threads wait at a __syncthreads";
    if (returned > 0) message << "; " << returned << " threads have returned";
    return message.str();
  }
  if (at_syncthreads > 0) {
    message << "__syncthreads reached by only " << at_syncthreads << " of " << emu.threads << " threads of "
            << block_name();
    if (returned > 0) message << "; " << returned << " returned without reaching it";
    if (at_warp_barrier > 0)
      message << "; " << at_warp_barrier << " wait at " << warp_barrier_name << " for lanes of their warp";
    message << " (every thread of a block must reach each __syncthreads)";
    return message.str();
  }
  for (int w = 0; w < emu.warps; ++w) {
    const Warp& warp = emu.warp[w];
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

void run_block(Emulator& emu, std::uint64_t linear) {
  emu.live = emu.threads;
  emu.arrived_at_syncthreads = 0;
  emu.error = nullptr;
  for (int g = 0; g < (emu.warps + 3) / 4; ++g) emu.group[g].arrived = 0;
  for (int w = 0; w < emu.warps; ++w) {
    emu.warp[w].lanes = std::min(warpSize, emu.threads - w * warpSize);
    emu.warp[w].arrived = 0;
    emu.warp[w].ready_head = emu.warp[w].ready_count = 0;
  }
  for (int i = 0; i < emu.threads; ++i) {
    emu.fibers[i]->mailbox = 0;
    emu.fibers[i]->group_mailbox = 0;
    make_ready(emu, i);
  }
  shuffle_warps(emu);
  // A new block's shared memory holds garbage on a GPU: here, 0xFF bytes (NaN, -1), so a read
  // before the block wrote shows even with the race detector off. (Static __shared__
  // variables cannot be found to be filled; the race detector reports their unwritten reads.)
  std::memset(emu.shared, 0xFF, emu.shared_bytes);
  async_copies_begin_block(emu.threads);
  hopper_begin_block(emu.threads);
  if (emu.races) races::begin_block(linear, blockIdx, emu.shared, emu.shared_bytes);
  if (emu.counting) counters::begin_block(emu.shared, emu.shared_bytes, emu.threads);

  // Start the first thread; the fibers pass the CPU among themselves and give it back here
  // when none can run.
  emu.leaving_scheduler = true;
  resume(emu.scheduler, *pop_ready(emu));

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
  if (emu.races) {
    const std::string race = races::take_error();
    if (!race.empty()) throw Error(race);
  }
  if (emu.counting) counters::end_block();
}

thread_local bool inside_launch = false;

// The switches, from the environment; tests and programs may change them (simt.h).
std::uint64_t seed_from_environment() {
  const char* text = std::getenv("BRRR_EMULATOR_SEED");
  if (!text || !*text) return 1;
  if (std::string(text) == "random") return std::random_device{}();
  char* end = nullptr;
  const unsigned long long seed = std::strtoull(text, &end, 10);
  BRRR_CHECK(end && *end == '\0', "BRRR_EMULATOR_SEED=", text, ": expected a number, or \"random\"");
  return seed;
}
std::atomic<std::uint64_t> seed{seed_from_environment()};
std::atomic<std::uint64_t> launches{0};
thread_local std::uint64_t this_launch = 0;  // for schedule_note
std::atomic<bool> race_detection_on{[] {
  const char* text = std::getenv("BRRR_EMULATOR_RACES");
  return !(text && std::string(text) == "0");
}()};
std::atomic<int> host_memory_users{0};
// Pointer arguments checked by launch() for the launch about to run on this thread.
thread_local std::vector<const void*> pointer_arguments;

// Which kernels opted in to how much dynamic shared memory (cudaFuncSetAttribute's record).
std::mutex opt_in_mutex;
std::unordered_map<const void*, std::size_t>& opted_in() {
  static std::unordered_map<const void*, std::size_t> table;
  return table;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The entry points simt.h declares

std::string launch_name(const LaunchSite& site) {
  return std::string("kernel ") + site.kernel + " (" + file_name(site.file) + ":" + std::to_string(site.line) + ")";
}

std::string schedule_note() {
  return " (emulator schedule: BRRR_EMULATOR_SEED=" + std::to_string(seed.load()) + ", launch " +
         std::to_string(this_launch) + " of this process)";
}

bool host_memory_kernels() { return host_memory_users.load() > 0; }

void check_stream(const LaunchSite& site, kernels::Stream stream) {
  if (stream == memory::stream() || (stream == nullptr && host_memory_kernels())) return;
  std::ostringstream address;
  address << stream;
  ::brrr::detail::fail(launch_name(site), ": launched on stream ", stream ? address.str() : "0",
                       stream ? "" : " (the legacy default stream)",
                       ", not on the runtime's stream (gpu::Runtime::stream()); on a GPU such a launch is not "
                       "ordered with brrr's copies and kernels, so its results can be read before it finishes");
}

void check_pointer_argument(const LaunchSite& site, int index, const void* pointer) {
  pointer_arguments.push_back(pointer);
  if (!pointer) return;  // optional arguments (a bias) are null
  memory::Allocation allocation;
  if (memory::find(pointer, allocation)) return;
  if (memory::in_arena(pointer))
    ::brrr::detail::fail(launch_name(site), ": pointer argument ", index, " points at ", memory::describe(pointer),
                         "; a kernel may only be given pointers into live device allocations");
  if (!host_memory_kernels())
    ::brrr::detail::fail(launch_name(site), ": pointer argument ", index, " (", pointer,
                         ") points at host memory, not device memory; copy the data to the device first (on a "
                         "GPU the kernel would fault: an illegal memory access)");
}

void allow_dynamic_shared(const LaunchSite& site, const void* kernel, std::size_t bytes) {
  // What cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) checks.
  BRRR_CHECK(bytes <= kMaxDynamicSharedBytes, launch_name(site), ": cudaFuncSetAttribute(",
             "MaxDynamicSharedMemorySize, ", bytes, "): at most ", kMaxDynamicSharedBytes, " bytes (227 KiB)");
  std::lock_guard<std::mutex> lock(opt_in_mutex);
  std::size_t& allowed = opted_in()[kernel];
  allowed = std::max(allowed, bytes);
}

void run_launch(const LaunchSite& site, const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                ThreadBody body, const void* closure) {
  std::vector<const void*> pointers;
  pointers.swap(pointer_arguments);
  BRRR_CHECK(!inside_launch, "kernel ", site.kernel,
             ": launched from inside a kernel; the emulator does not model dynamic parallelism");
  if (shared_bytes > kDefaultDynamicSharedBytes) {
    std::lock_guard<std::mutex> lock(opt_in_mutex);
    const auto it = opted_in().find(kernel);
    BRRR_CHECK(it != opted_in().end() && it->second >= shared_bytes, launch_name(site), ": ", shared_bytes,
               " bytes of dynamic shared memory without opting in: above 48 KiB a kernel must first be allowed "
               "more (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes))");
  }
  // One launch at a time in the whole program: that is what makes `static` a correct
  // __shared__, and lets every launch share the fibers.
  static std::mutex one_launch_at_a_time;
  std::lock_guard lock(one_launch_at_a_time);
  inside_launch = true;
  this_launch = ++launches;
  Emulator& emu = emulator();
  // The largest dynamic shared memory there can be, allocated once: its address stays the
  // same from launch to launch (the race detector's shadow of it too). It starts at a multiple
  // of 1024, as a block's shared memory does on a GPU: Hopper's swizzles are patterns of the
  // address, and its descriptors address it from 0 (simt_hopper.cpp). Exactly shared_bytes
  // of it are the kernel's; AddressSanitizer is told the rest is out of bounds.
  static std::byte* shared_memory =
      static_cast<std::byte*>(::operator new(kMaxDynamicSharedBytes, std::align_val_t{1024}));
#if BRRR_ASAN
  ASAN_UNPOISON_MEMORY_REGION(shared_memory, kMaxDynamicSharedBytes);
  ASAN_POISON_MEMORY_REGION(shared_memory + shared_bytes, kMaxDynamicSharedBytes - shared_bytes);
#endif
  const memory::Open device_memory_open;  // kernels may touch device memory, host code too now
  emu.races = race_detection_on.load() && race_detection_available();
  emu.counting = counters::on();
  struct Done {  // runs however the launch ends
    Emulator& emu;
    bool completed = false;
    ~Done() {
      if (emu.races) races::end_launch();
      if (emu.counting) counters::end_launch(completed);
      emu.counting = false;
      emu.site = nullptr;
      emu.shared = nullptr;
      inside_launch = false;
    }
  } done{emu};
  if (emu.races) races::begin_launch(site, kernel, pointers.data(), static_cast<int>(pointers.size()));
  if (emu.counting) counters::begin_launch(site);

  const int threads = static_cast<int>(block.x * block.y * block.z);
  add_fibers(emu, threads);
  emu.site = &site;
  emu.body = body;
  emu.closure = closure;
  emu.shared = shared_memory;
  emu.shared_bytes = shared_bytes;
  emu.threads = threads;
  emu.warps = (threads + warpSize - 1) / warpSize;
  for (int i = 0; i < threads; ++i) {
    Fiber& fiber = *emu.fibers[i];
    fiber.index = i;
    fiber.thread = {i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
    fiber.warp = i / warpSize;
    fiber.lane = i % warpSize;
  }
  gridDim = grid;
  blockDim = block;
  // The blocks in a shuffled order: a permutation of 0 .. blocks - 1, drawn for small grids,
  // and i -> (a i + b) mod blocks (a coprime with blocks) for huge ones.
  emu.random.seed(seed.load() * 0x9E3779B97F4A7C15ull + this_launch);
  const std::uint64_t blocks = std::uint64_t{grid.x} * grid.y * grid.z;
  std::vector<std::uint32_t> order;
  std::uint64_t step = 1, offset = 0;
  if (blocks <= (1u << 22)) {
    order.resize(blocks);
    for (std::uint64_t i = 0; i < blocks; ++i) order[i] = static_cast<std::uint32_t>(i);
    std::shuffle(order.begin(), order.end(), emu.random);
  } else {
    do step = emu.random() % blocks; while (std::gcd(step, blocks) != 1);
    offset = emu.random() % blocks;
  }
  try {
    for (std::uint64_t i = 0; i < blocks; ++i) {
      const std::uint64_t linear = order.empty() ? (step * i + offset) % blocks : order[i];
      blockIdx = {static_cast<unsigned>(linear % grid.x), static_cast<unsigned>(linear / grid.x % grid.y),
                  static_cast<unsigned>(linear / (std::uint64_t{grid.x} * grid.y))};
      run_block(emu, linear);
    }
  } catch (const Error& error) {
    throw Error(error.what() + schedule_note());
  }
  done.completed = true;
}

void dynamic_shared_window(std::uintptr_t& begin, std::size_t& bytes) {
  begin = reinterpret_cast<std::uintptr_t>(emulator().shared);
  bytes = emulator().shared_bytes;
}

void* dynamic_shared_memory() {
  current_fiber("BRRR_DYNAMIC_SHARED");
  return emulator().shared;
}

void sync_block(const char* name, const std::source_location& at) {
  Fiber& self = current_fiber(name);
  Emulator& emu = emulator();
  if (emu.arrived_at_syncthreads > 0) {
    const Fiber& first = *emu.fibers[emu.waiting_at_syncthreads[0]];
    if (!same_place(first.waiting_line, at))
      ::brrr::detail::fail(launch_name(*emu.site), ": the threads of ", block_name(),
                           " wait at two different __syncthreads: ", thread_name(first), " at ",
                           line_of(first.waiting_line), ", ", thread_name(self), " at ", line_of(at),
                           " (every thread of a block must reach the same __syncthreads)");
  }
  self.waiting_line = at;
  if (emu.counting) counters::barrier(self.index);
  if (++emu.arrived_at_syncthreads == emu.threads) {
    // The last thread: the block moves to its next phase. Everyone, this thread too, is ready
    // again, and the warps of the new phase run in a new order.
    for (int i = 0; i < emu.threads - 1; ++i) make_ready(emu, emu.waiting_at_syncthreads[i]);
    emu.arrived_at_syncthreads = 0;
    if (emu.races) races::block_barrier();
    make_ready(emu, self.index);
    shuffle_warps(emu);
    run_next(self);
    return;
  }
  emu.waiting_at_syncthreads[emu.arrived_at_syncthreads - 1] = self.index;
  self.state = State::kAtSyncthreads;
  self.waiting_at = name;
  run_next(self);
}

void sync_warp(const char* name, unsigned mask, const std::source_location& at) {
  Fiber& self = current_fiber(name);
  Emulator& emu = emulator();
  check_mask(name, mask, emu.warp[self.warp], self);
  const bool last = emu.warp[self.warp].arrived == emu.warp[self.warp].lanes - 1;
  if (last && emu.races) races::warp_barrier(self.warp);  // a __syncwarp orders memory; a shuffle does not
  arrive_at_warp_barrier(self, name, at);
}

std::uint64_t shuffle_bits(const char* name, unsigned mask, std::uint64_t bits, Shuffle kind, int arg, int width,
                           const std::source_location& at) {
  Fiber& self = current_fiber(name);
  Warp& warp = emulator().warp[self.warp];
  check_mask(name, mask, warp, self);
  BRRR_CHECK(width >= 1 && width <= warpSize && (width & (width - 1)) == 0, launch_name(*emulator().site), ": ",
             name, " with width ", width, "; the width must be a power of two from 1 to 32");
  // Post this lane's value, wait for every lane of the warp to post theirs, read the source's.
  const int box = self.mailbox;
  self.mailbox ^= 1;
  warp.mailbox[box][self.lane] = bits;
  arrive_at_warp_barrier(self, name, at);

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

const std::uint32_t* warp_exchange(const char* name, const std::uint32_t* words, int count,
                                   const std::source_location& at) {
  Fiber& self = current_fiber(name);
  Warp& warp = emulator().warp[self.warp];
  if (warp.lanes != warpSize)
    ::brrr::detail::fail(launch_name(*emulator().site), ": ", name, " in warp ", self.warp, " of ", block_name(),
                         ", which has only ", warp.lanes, " threads; the tensor-core instructions need all 32 lanes "
                         "of a warp (make the block a multiple of 32 threads)");
  BRRR_CHECK(count >= 0 && count <= kExchangeWords, name, ": ", count, " words to exchange");
  const int box = self.mailbox;
  self.mailbox ^= 1;
  std::memcpy(warp.exchange[box][self.lane], words, sizeof(std::uint32_t) * static_cast<std::size_t>(count));
  arrive_at_warp_barrier(self, name, at);
  return &warp.exchange[box][0][0];
}

const std::uint32_t* warpgroup_exchange(const char* name, const std::uint32_t* words, int count,
                                        const std::source_location& at, bool& last) {
  Fiber& self = current_fiber(name);
  Emulator& emu = emulator();
  const int g = self.warp / 4;
  if (emu.threads < (g + 1) * kWarpgroupThreads)
    ::brrr::detail::fail(launch_name(*emu.site), ": ", name, " at ", line_of(at), " in warp ", self.warp, " of ",
                         block_name(), ", which has ", emu.threads, " threads: warpgroup ", g, " (warps ", 4 * g,
                         " to ", 4 * g + 3, ") is not whole. A warpgroup is four whole warps whose first index is a "
                         "multiple of 4: make the block a multiple of 128 threads");
  BRRR_CHECK(count >= 0 && count <= kWarpgroupWords, name, ": ", count, " words to exchange");
  Warpgroup& group = emu.group[g];
  if (group.arrived > 0) {
    const Fiber& first = *emu.fibers[group.waiting[0]];
    if (!same_place(first.waiting_line, at) || std::strcmp(first.waiting_at, name) != 0)
      ::brrr::detail::fail(launch_name(*emu.site), ": the threads of warpgroup ", g, " of ", block_name(),
                           " meet at two different warpgroup instructions: ", thread_name(first), " at ",
                           first.waiting_at, " (", line_of(first.waiting_line), "), ", thread_name(self), " at ",
                           name, " (", line_of(at), "); all 128 threads must issue the same one");
  }
  const int box = self.group_mailbox, rank = self.index - g * kWarpgroupThreads;
  self.group_mailbox ^= 1;
  std::memcpy(group.exchange[box][rank], words, sizeof(std::uint32_t) * static_cast<std::size_t>(count));
  if (emu.counting) counters::barrier(self.index);
  last = ++group.arrived == kWarpgroupThreads;
  if (last) {  // wake the others; they run once this thread waits somewhere
    for (int i = 0; i < kWarpgroupThreads - 1; ++i) make_ready(emu, group.waiting[i]);
    group.arrived = 0;
  } else {
    group.waiting[group.arrived - 1] = self.index;
    self.state = State::kAtWarpgroupBarrier;
    self.waiting_at = name;
    self.waiting_line = at;
    run_next(self);
  }
  return &group.exchange[box][0][0];
}

void sleep_on(const void* object, const char* name, const std::source_location& at) {
  Fiber& self = current_fiber(name);
  self.state = State::kAsleep;
  self.asleep_on = object;
  self.waiting_at = name;
  self.waiting_line = at;
  run_next(self);
}

void wake(int thread) {
  Emulator& emu = emulator();
  if (thread < emu.threads && emu.fibers[thread]->state == State::kAsleep) make_ready(emu, thread);
}

std::string where_in_kernel(const std::source_location* at) {
  Fiber& self = current_fiber("a tensor-core instruction");
  return launch_name(*emulator().site) + ": " + thread_name(self) + " of " + block_name() +
         (at ? " at " + line_of(*at) : std::string());
}

int thread_in_block() { return current_fiber("a cp.async").index; }

unsigned ballot(const char* name, unsigned mask, bool predicate, const std::source_location& at) {
  Fiber& self = current_fiber(name);
  Warp& warp = emulator().warp[self.warp];
  check_mask(name, mask, warp, self);
  const int box = self.mailbox;
  self.mailbox ^= 1;
  warp.mailbox[box][self.lane] = predicate;
  arrive_at_warp_barrier(self, name, at);
  unsigned votes = 0;
  for (int lane = 0; lane < warp.lanes; ++lane)
    if (warp.mailbox[box][lane]) votes |= 1u << lane;
  return votes;
}

}  // namespace brrr::simt::detail

// ---------------------------------------------------------------------------------------------
// The switches (simt.h)

namespace brrr::simt {

std::uint64_t schedule_seed() { return detail::seed.load(); }
void set_schedule_seed(std::uint64_t seed) { detail::seed = seed; }
bool race_detection() { return detail::race_detection_on.load() && race_detection_available(); }
void set_race_detection(bool on) { detail::race_detection_on = on; }
bool race_detection_available() { return !BRRR_ASAN; }

HostMemoryKernels::HostMemoryKernels() { ++detail::host_memory_users; }
HostMemoryKernels::~HostMemoryKernels() { --detail::host_memory_users; }

}  // namespace brrr::simt
