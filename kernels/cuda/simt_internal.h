// kernels/cuda/simt_internal.h: what the emulator's three parts tell each other: the fibers
// and schedules (simt_emulator.cpp), the race detector (simt_race_detector.cpp) and device
// memory (emulator_memory.cpp). Not for kernels: they include simt.h only.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/simt.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/simt.h"

namespace brrr::simt::detail {

// "kernel k (file.cu:12)": how every message names a launch.
std::string launch_name(const LaunchSite& site);
// "(emulator schedule: BRRR_EMULATOR_SEED=7, launch 31)": appended to every error of a
// launch, so the order that went wrong can be replayed.
std::string schedule_note();

// True while unit tests run kernels straight on host memory (HostMemoryKernels).
bool host_memory_kernels();

// "kernel k (file.cu:12): thread (3,0,0) of block (1,0,0) at file.cu:40" (without " at ..."
// when `at` is null), for the errors of the tensor-core instructions (simt_tensor_cores.cpp);
// and the running thread's index in its block.
std::string where_in_kernel(const std::source_location* at);
int thread_in_block();
// A block starts: its threads have no cp.async in flight (simt_tensor_cores.cpp).
void async_copies_begin_block(int threads);

// --- Hopper (simt_hopper.cpp) -------------------------------------------------------------------
// The tensor cores' sum of products into c (simt_tensor_cores.cpp), shared by mma and wgmma.
float tensor_core_sum(float c, const double* products, int count, int block);
// A warpgroup-collective exchange (wgmma and its fence, commit and wait): every one of the 128
// threads of the running thread's warpgroup posts `count` words, and all must reach the same
// call. Returns the group's table, thread r's words at table[r * kWarpgroupWords + i]; `last`
// is true for the one thread that arrived last, which runs on before any other has resumed.
constexpr int kWarpgroupWords = 12;
const std::uint32_t* warpgroup_exchange(const char* name, const std::uint32_t* words, int count,
                                        const std::source_location& at, bool& last);
// The running thread sleeps (an mbarrier wait) until wake(its index in the block).
void sleep_on(const void* object, const char* name, const std::source_location& at);
void wake(int thread);
// A block starts: no mbarrier, bulk copy or wgmma yet. What an mbarrier waits for, for the
// emulator's deadlock message.
void hopper_begin_block(int threads);
std::string mbarrier_state(const void* bar);
// The block's dynamic shared memory (its window address 0 is `begin`).
void dynamic_shared_window(std::uintptr_t& begin, std::size_t& bytes);

// True while a fiber runs on this OS thread (kernel code, and the emulator functions it calls),
// false while the scheduler does (simt_emulator.cpp sets it at every switch). The compiler's
// hooks pass accesses on to the race detector and the counters only then: host code runs during
// a launch too (begin_launch, between blocks), and may call an instrumented copy of an inline
// function, the one the linker kept from a kernel file (libc++'s std::string members, which
// every file compiles for itself, where libstdc++ has them in its shared library).
extern thread_local bool in_fiber __attribute__((tls_model("initial-exec")));

// --- the race detector (simt_race_detector.cpp) ------------------------------------------------
// The emulator tells it where each launch, block, barrier and fiber switch happens; the
// compiler's instrumentation tells it every load and store of kernel code.
namespace races {
// Starts watching a launch (when the detector is on); `pointers` are the launch's pointer
// arguments, for naming buffers in messages.
void begin_launch(const LaunchSite& site, const void* kernel, const void* const* pointers, int count);
void end_launch();
// A block starts: which one (its index in the grid), and its dynamic shared memory.
void begin_block(std::uint64_t linear, uint3 index, const void* shared, std::size_t shared_bytes);
// The running fiber is now thread `thread` (its index in the block) of warp `warp`, with its
// stack between stack_low and stack_high (accesses there are the thread's own).
void switch_to(int thread, int warp, const void* stack_low, const void* stack_high);
// __syncthreads released the block; __syncwarp released warp `warp`.
void block_barrier();
void warp_barrier(int warp);
// A cp.async of the running thread: at issue, a write of `bytes` at `destination` whose bytes
// stay "in flight" (any access to them is an error) until the copy completes at the thread's
// cp.async.wait_group, which reads the source and writes the destination for real.
void async_copy_issue(const void* destination, std::size_t bytes, const void* pc);
void async_copy_complete(const void* destination, std::size_t bytes, const void* source, std::size_t src_bytes,
                         const void* issue_pc, const void* wait_pc);
// Hopper (simt_hopper.cpp). Bulk copies (TMA) write as the async proxy, a thread of its own;
// mbarriers order whom they release to whom they acquire (a phase's `clock`); the async
// proxy's reads (wgmma operands, TMA store sources) must see generic writes through a
// fence.proxy.async, and while `track`ed (until async_read_end) nobody may write their bytes.
constexpr int kAsyncProxy = 1024;
// A wgmma's reads of shared memory are its warpgroup's (kWarpgroupReader + the group's index):
// every thread of the group is ordered after them once past its wgmma.wait_group.
constexpr int kWarpgroupReader = kAsyncProxy + 1;
void kernel_access(const void* address, std::size_t bytes, bool write, const void* pc);
void release(std::vector<std::uint32_t>& clock);
void release_async(std::vector<std::uint32_t>& clock);
void acquire(const std::vector<std::uint32_t>& clock);
void proxy_fence();
void bulk_copy_issue(const void* destination, std::size_t bytes, const void* pc);
void bulk_copy_complete(const void* destination, std::size_t bytes, const void* pc);
// `group` >= 0: a wgmma of that warpgroup (whose own writes need no barrier); else the thread.
int async_read(const std::vector<std::pair<std::uintptr_t, std::uintptr_t>>& ranges, const void* pc,
               const char* what, int group, bool track);
void async_read_end(int id);
// The detector's clock now (0 when it is off), and whether an event of `thread` at `serial`
// is unordered with the running thread (an mbarrier's init with its uses).
std::uint32_t now();
bool unordered(std::uint32_t serial, int thread);
// The first fault of the block, "" if none. The detector never throws from inside an access
// (the compiler's hooks are called where no exception may pass); the emulator asks at the
// end of every block and throws.
std::string take_error();
// Whether `address` is in a writable static segment: a static __shared__ variable, when a
// kernel touches it (see the detector's Segment). The memory counters ask it too, after
// refresh_static_segments at the start of a launch (a library may have been loaded since).
void refresh_static_segments();
bool in_static_segment(std::uintptr_t address);
// The source line of an instruction address, as the detector's messages print it.
std::string source_line(std::uintptr_t pc);
}  // namespace races

// --- the memory counters (simt_counters.cpp) ---------------------------------------------------
// Told of launches, blocks, fiber switches and barriers by the emulator, and of every load and
// store of kernel code by the compiler's hooks (simt_race_detector.cpp), when counting is on.
namespace counters {
struct Recorder;
// The recorder of the launch running on this OS thread, or nullptr (counting off).
extern thread_local Recorder* active __attribute__((tls_model("initial-exec")));
// `async`: the global read of a cp.async (simt_tensor_cores.cpp), which ncu counts apart (LDGSTS).
void access(Recorder& r, std::uintptr_t address, std::size_t bytes, bool write, std::uintptr_t pc, bool async = false);
bool on();
void begin_launch(const LaunchSite& site);
void end_launch(bool completed);  // completed: false when the launch threw (nothing is kept)
void begin_block(const void* shared, std::size_t shared_bytes, int threads);
void end_block();
void switch_to(int thread, const void* stack_low, const void* stack_high);
// The running thread passed a barrier (__syncthreads, or a warp operation: shuffle, vote,
// __syncwarp, mma): its next accesses are in a new phase.
void barrier(int thread);
// Hopper's instructions (simt_hopper.cpp), while `active`: one wgmma m64nNk16 (2 x 64 x N x 16
// FLOPs), one bulk tensor copy of `bytes` (a load, or a store), one completed mbarrier wait.
void wgmma(Recorder& r, int n);
void bulk_copy(Recorder& r, std::uint64_t bytes, bool store);
// The global bytes [global, global + bytes) a bulk copy reads or writes, for the distinct sectors.
void bulk_bytes(Recorder& r, std::uintptr_t global, std::size_t bytes, bool store);
void mbarrier_wait(Recorder& r);
// One warp-wide mma.sync (or WMMA mma_sync) of `flops` (simt_tensor_cores.cpp, from lane 0).
void mma(Recorder& r, std::uint64_t flops);
}  // namespace counters

}  // namespace brrr::simt::detail
