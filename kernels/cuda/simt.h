// kernels/cuda/simt.h: the one header every CUDA kernel file includes. Under nvcc it is CUDA;
// under g++ it is a CPU emulator of CUDA's SIMT model, so the same kernel source runs on both.
// Chapter 10 (the GPU and the emulator). Read before: kernels/signatures.h.
// Read next: kernels/cuda/simt_emulator.cpp (the emulator), kernels/cuda/examples.cu (kernels).
//
// How the emulator runs a kernel
// -------------------------------
// A launch of `grid` blocks of `block` threads runs the blocks one after another, in a
// shuffled order. Within a block, every CUDA thread is a fiber: a small stack (64 KiB) and a
// saved set of registers, switched with ucontext's swapcontext, all on the OS thread that
// called launch. A fiber runs the kernel until it reaches a barrier, then hands the CPU to the
// next fiber; nothing interrupts a fiber between barriers. Between two __syncthreads the warps
// run in a shuffled order, one warp at a time (its lanes advance together, as on hardware).
// The shuffles come from a seed (BRRR_EMULATOR_SEED, printed with every error) so any order
// that went wrong can be replayed. That is all SIMT needs:
//
//   threadIdx, blockIdx, blockDim, gridDim  plain global variables that the emulator sets to
//                      the running fiber's values every time it switches to that fiber.
//   __syncthreads()    the fiber counts itself in and waits; the last of the block's threads
//                      to arrive wakes the others. If some threads return without reaching
//                      it, the block can never finish: the emulator notices that no fiber
//                      can run and throws brrr::Error ("kernel k: __syncthreads reached by
//                      only 16 of 32 threads of block (0,0,0)") instead of hanging, as a GPU
//                      would (or worse, would not, and compute garbage). Threads waiting at
//                      two different __syncthreads (two source lines) are an error too.
//   __shfl_*_sync      an exchange among the 32 lanes of a warp: each lane writes its value
//                      into the warp's mailbox, waits at a warp barrier until all lanes have
//                      written, then reads its partner's slot. Two mailboxes are used in
//                      turn, so the next shuffle cannot overwrite a value not yet read. All
//                      lanes must reach the same shuffle (the same source line).
//   __shared__         `static`: one variable in the whole program, and since blocks run one at
//                      a time (and launches one at a time, under a lock) that one variable is
//                      exactly "one instance per block, seen by all its threads". A kernel
//                      reads like any CUDA kernel: `__shared__ float partial[32];`. The race
//                      detector reports a read of a byte the block has not written (on a GPU,
//                      garbage; here it would be the previous block's value).
//   dynamic shared     `BRRR_DYNAMIC_SHARED(float, smem);` gives `float* smem`, pointing at
//                      the launch's shared_bytes (under nvcc: `extern __shared__` storage),
//                      filled with 0xFF bytes before each block, like static shared memory.
//   atomicAdd & co.    a plain read-modify-write: no fiber can run between the read and the
//                      write, so it is atomic here. The race detector knows it is atomic.
//   float4, __ldg, expf, rsqrtf, __expf, ...   plain C++ structs and std:: math.
//   __nv_bfloat16      brrr::bf16 (base/include/brrr/bfloat16.h), which converts bit for bit
//                      as the GPU does, with CUDA's conversion functions.
//   mma, ldmatrix      warp-collective, like a shuffle: every lane posts its registers, and
//                      each takes its part of the result, placed by the PTX ISA's tables.
//   cp.async           a copy the issuing thread queues and performs at its wait_group.
//
// The emulator is also a sanitizer (simt_race_detector.cpp, emulator_memory.cpp): every load
// and store of an emulated kernel is reported to a race detector (the compiler instruments
// them, kernels/CMakeLists.txt), which throws brrr::Error for two threads touching the same
// bytes with no barrier between them, for any two blocks of a launch writing the same global
// bytes, and for an access outside every live device allocation; device memory is an arena
// that host code cannot touch outside kernels and copies, fresh device memory reads as NaN,
// a kernel argument that points at no live allocation, a launch on a stream that is not the
// runtime's, and the launch limits of the hardware are errors. BRRR_EMULATOR_RACES=0 turns
// the race detector off for interactive use (it is on by default, and in every test).
//
// Because a kernel is now ordinary C++, the CPU's tools work on it: a debugger steps through
// one thread, and the sanitizer build (-DBRRR_SANITIZE=ON) reports an index past the end of
// dynamic shared memory or of a global array, and a float4 load from a misaligned address,
// with the kernel's source line.
//
// What it cannot model, and why:
//   - Timing: the speed of a kernel, and anything that only goes wrong under particular
//     timing that the race detector does not see (it sees every load and store of the kernel
//     source, but not those of code compiled without it, such as a notebook's JIT).
//   - Partial-warp masks (`__shfl_sync(0x0000ffff, ...)`): the emulator checks that a mask
//     names every lane of the warp and throws brrr::Error otherwise. Full masks are what
//     brrr's kernels use.
//   - Inline PTX in general. Kernels that use PTX of their own are GPU-only: wrap them, and
//     their registration, in `#if !BRRR_EMULATOR ... #endif`; the emulator build then has no
//     such variant at all. The instructions brrr spells as functions are modelled: Ampere's
//     tensor-core instructions (mma.sync, ldmatrix, cp.async: mma_m16n8k16_bf16, ldmatrix_x4,
//     cp_async<16>, ...; chapter 14's simt_tensor_cores.h), warp-collective operations here
//     (simt_tensor_cores.cpp), with cp.async's destination reported as in flight until its
//     wait_group; WMMA (nvcuda::wmma, its m16n16k8 tf32 shape); and Hopper's (simt_hopper.h):
//     wgmma m64nNk16 bf16 through shared-memory descriptors and every swizzle, warpgroup-
//     collective, its operands held by the race detector until its wait_group; TMA 2-D loads
//     and stores through tensor maps; mbarriers with phases and transaction bytes; the async
//     proxy's fence; setmaxnreg (a warpgroup-uniformity check). The tensor cores' sums are cut
//     toward zero, in the A100's blocks (wgmma's too); the last bit may still differ from a
//     given GPU's, and what a Hopper GPU does with the emulator's Hopper kernels is for a
//     conformance run on one to confirm (docs/chapters/14-matmul-gpu.md).
//   - Register and static shared memory budgets: the emulator counts the static __shared__
//     bytes a block touches (over 48 KiB is an error) but not registers: tests/cuda's resource
//     check compiles every kernel with ptxas for that. A fiber's stack is 64 KiB (a GPU thread
//     gets about 1 KiB by default, so kernels fit).
//
// Every launch goes through one function, brrr::simt::launch, which is `kernel<<<grid, block,
// shared_bytes, stream>>>(args...)` plus a check under nvcc and the emulator under g++. Call
// it through BRRR_LAUNCH, which adds the kernel's name and call site for error messages:
//
//   BRRR_LAUNCH(vector_add_kernel, blocks, 256, 0, stream, out, a, b, n);
//
// The emulator runs the whole launch before returning: the GPU may run it later, but a launch
// that has already finished is a valid order for anything on the same stream.
//
// A kernel file is compiled twice (kernels/CMakeLists.txt): by nvcc, and by g++ for the
// emulator. It opens `namespace brrr::kernels::BRRR_SIMT_NAMESPACE {`, which is
// brrr::kernels::cuda under nvcc and brrr::kernels::emu under g++, so both copies can live
// in one program: tests run brrr::kernels::emu on the CPU and brrr::kernels::cuda on a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "brrr/error.h"
#include "kernels/signatures.h"  // Stream

// ---------------------------------------------------------------------------------------------
// What both builds share: where a launch comes from, and the limits a launch must respect.

namespace brrr::simt {

// The kernel's name and the call site, for error messages.
struct LaunchSite {
  const char* kernel;
  const char* file;
  int line;
};

// The largest dynamic shared memory a block may ask for (H100; A100 allows 163 KiB).
constexpr std::size_t kMaxDynamicSharedBytes = 227 * 1024;
// Static __shared__ memory a kernel may declare, and the dynamic shared memory a kernel gets
// without asking: above this, the kernel must first opt in (cudaFuncSetAttribute).
constexpr std::size_t kMaxStaticSharedBytes = 48 * 1024;
constexpr std::size_t kDefaultDynamicSharedBytes = 48 * 1024;

namespace detail {
inline const char* file_name(const char* path) {
  const char* name = path;
  for (const char* p = path; *p; ++p)
    if (*p == '/' || *p == '\\') name = p + 1;
  return name;
}

// True when `kernel` has not yet been allowed `bytes` of dynamic shared memory (and notes that
// it now is). launch() opts a kernel in once per kernel and size, not on every launch (on a
// GPU each opt-in is a trip into the driver). Launches come from the host thread that owns
// brrr's stream; the lock is cheap.
inline bool raise_shared_limit(const void* kernel, std::size_t bytes) {
  static std::mutex lock;
  static std::unordered_map<const void*, std::size_t> allowed;
  const std::lock_guard<std::mutex> guard(lock);
  std::size_t& limit = allowed[kernel];
  if (limit >= bytes) return false;
  limit = bytes;
  return true;
}
}  // namespace detail

// The launch limits of every GPU since Volta; both builds check them, with the same message.
template <class Dim3>
void validate_launch(const LaunchSite& site, const Dim3& grid, const Dim3& block, std::size_t shared_bytes) {
  const auto where = [&] {
    return std::string("kernel ") + site.kernel + " (" + detail::file_name(site.file) + ":" +
           std::to_string(site.line) + "): ";
  };
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  BRRR_CHECK(threads >= 1 && threads <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64,
             where(), "a block of (", block.x, ", ", block.y, ", ", block.z, ") = ", threads,
             " threads; a block has 1 to 1024 threads, at most (1024, 1024, 64) in each dimension");
  BRRR_CHECK(grid.x >= 1 && grid.y >= 1 && grid.z >= 1 && grid.x <= 2147483647u && grid.y <= 65535 &&
                 grid.z <= 65535,
             where(), "a grid of (", grid.x, ", ", grid.y, ", ", grid.z,
             ") blocks; a grid has 1 to (2147483647, 65535, 65535) blocks");
  BRRR_CHECK(shared_bytes <= kMaxDynamicSharedBytes, where(), shared_bytes,
             " bytes of dynamic shared memory; a block may have at most ", kMaxDynamicSharedBytes,
             " (227 KiB)");
}

}  // namespace brrr::simt

// BRRR_LAUNCH(kernel, grid, block, shared_bytes, stream, args...): launch `kernel`, the
// emulator's or the GPU's, with the kernel's name and call site for errors. A kernel template
// goes in parentheses, because of the comma: BRRR_LAUNCH((kernel<float, 4>), ...).
#define BRRR_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                                 \
  ::brrr::simt::launch(::brrr::simt::LaunchSite{#kernel, __FILE__, __LINE__}, kernel, grid, block, \
                       shared_bytes, stream __VA_OPT__(, ) __VA_ARGS__)

#if defined(__CUDACC__)
// =============================================================================================
// nvcc: the real thing. CUDA provides threadIdx, __syncthreads, shuffles, atomics, float4 and
// the math functions; brrr adds the namespace, dynamic shared memory and the launch.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define BRRR_EMULATOR 0
#define BRRR_SIMT_NAMESPACE cuda
// Unroll the next loop (so that an array it indexes can live in registers): `#pragma unroll`,
// which g++ does not know, spelled so that both compilers read it.
#define BRRR_UNROLL _Pragma("unroll")
// Keep the next loop a loop (its body's registers are not multiplied by its trip count).
#define BRRR_NO_UNROLL _Pragma("unroll 1")

// One extern array serves every kernel of a file; each kernel views it as its own type.
// (Two kernels declaring `extern __shared__ float a[]` and `extern __shared__ int a[]` in one
// file would not compile.)
#define BRRR_DYNAMIC_SHARED(type, name)                                          \
  extern __shared__ __align__(16) unsigned char brrr_dynamic_shared_memory[]; \
  type* name = reinterpret_cast<type*>(brrr_dynamic_shared_memory)

namespace brrr::simt {

template <class... Params, class... Args>
void launch(const LaunchSite& site, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
            kernels::Stream stream, Args&&... args) {
  validate_launch(site, grid, block, shared_bytes);
  const auto check = [&](cudaError_t status, const char* what) {
    if (status != cudaSuccess)
      ::brrr::detail::fail("kernel ", site.kernel, " (", detail::file_name(site.file), ":", site.line, "): ", what,
                   ": ", cudaGetErrorString(status));
  };
  // Above 48 KiB a kernel must opt in to more dynamic shared memory: once per kernel and size,
  // not on every launch (each call is a trip into the driver).
  if (shared_bytes > kDefaultDynamicSharedBytes &&
      detail::raise_shared_limit(reinterpret_cast<const void*>(kernel), shared_bytes))
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared_bytes)),
          "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  kernel<<<grid, block, shared_bytes, static_cast<cudaStream_t>(stream)>>>(std::forward<Args>(args)...);
  // Catches a bad configuration now; an error while the kernel runs shows at the next sync.
  check(cudaGetLastError(), "launch failed");
}

}  // namespace brrr::simt

#else
// =============================================================================================
// g++: the emulator. Declarations here; the runtime is in simt_emulator.cpp.

#include <atomic>
#include <bit>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <source_location>
#include <tuple>
#include <type_traits>

#include "brrr/bfloat16.h"

#define BRRR_EMULATOR 1
#define BRRR_SIMT_NAMESPACE emu
#define BRRR_UNROLL _Pragma("GCC unroll 16")
#define BRRR_NO_UNROLL _Pragma("GCC unroll 1")

// CUDA's function and variable qualifiers. On the CPU every function is host code.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __constant__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// One instance in the program = one instance per block, since blocks run one at a time.
// (`extern __shared__` cannot work this way: use BRRR_DYNAMIC_SHARED.)
#define __shared__ static

#define BRRR_DYNAMIC_SHARED(type, name) \
  type* name = reinterpret_cast<type*>(::brrr::simt::detail::dynamic_shared_memory())

// --- vector types ------------------------------------------------------------------------------
// Plain structs with the GPU's alignment: loading a float4 from an address that is not a
// multiple of 16 traps on the GPU and is reported by UBSan here.
struct uint3 {
  unsigned x, y, z;
};
struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) double2 {
  double x, y;
};
// Built field by field and not constexpr (nor are CUDA's): GCC writes a constant aggregate,
// make_float4(0, 0, 0, 0), as four 4-byte stores, which the memory counters
// (simt_counters.h) would count as four requests where the GPU issues one 16-byte store.
inline float2 make_float2(float x, float y) {
  float2 v;
  v.x = x, v.y = y;
  return v;
}
inline float4 make_float4(float x, float y, float z, float w) {
  float4 v;
  v.x = x, v.y = y, v.z = z, v.w = w;
  return v;
}
inline int2 make_int2(int x, int y) {
  int2 v;
  v.x = x, v.y = y;
  return v;
}
inline int4 make_int4(int x, int y, int z, int w) {
  int4 v;
  v.x = x, v.y = y, v.z = z, v.w = w;
  return v;
}
inline double2 make_double2(double x, double y) {
  double2 v;
  v.x = x, v.y = y;
  return v;
}
inline constexpr uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }

// --- the runtime (simt_emulator.cpp) -------------------------------------------------------------

namespace brrr::simt {

// The running thread's coordinates, set by the emulator each time it switches fibers.
inline uint3 threadIdx{0, 0, 0};
inline uint3 blockIdx{0, 0, 0};
inline dim3 blockDim;
inline dim3 gridDim;
constexpr int warpSize = 32;

// --- the emulator's switches -----------------------------------------------------------------------
// The schedule's seed: BRRR_EMULATOR_SEED (default 1; "random" draws one), printed with every
// error of a launch so the order that failed can be replayed.
std::uint64_t schedule_seed();
void set_schedule_seed(std::uint64_t seed);
// The race detector: on unless BRRR_EMULATOR_RACES=0 (it makes the emulator a few times
// slower; turn it off for interactive use, never in tests). Not available in the
// AddressSanitizer build, whose instrumentation cannot be combined with it.
bool race_detection();
void set_race_detection(bool on);
bool race_detection_available();
// While one of these lives, kernels may be given host memory and stream 0, as the emulator's
// unit tests do to drive a kernel on a std::vector. Everywhere else a kernel argument must
// point into device memory and a launch must be on the runtime's stream, as on a GPU.
class HostMemoryKernels {
 public:
  HostMemoryKernels();
  ~HostMemoryKernels();
  HostMemoryKernels(const HostMemoryKernels&) = delete;
  HostMemoryKernels& operator=(const HostMemoryKernels&) = delete;
};

namespace detail {
using ThreadBody = void (*)(const void* closure);
// Runs body(closure) once for every thread of every block. `kernel` identifies the kernel
// (its address), for the shared memory opt-in and for source lines in error messages.
void run_launch(const LaunchSite& site, const void* kernel, dim3 grid, dim3 block, std::size_t shared_bytes,
                ThreadBody body, const void* closure);
// The checks launch() makes before the first thread runs: the stream, each pointer argument
// (`index` counts from 1), and cudaFuncSetAttribute's opt-in to more dynamic shared memory.
void check_stream(const LaunchSite& site, kernels::Stream stream);
void check_pointer_argument(const LaunchSite& site, int index, const void* pointer);
void allow_dynamic_shared(const LaunchSite& site, const void* kernel, std::size_t bytes);
void* dynamic_shared_memory();
// Stream capture (runtime.h): while the runtime captures, launch() records the launch, to run
// it (checks and all) when the graph is replayed, instead of running it now.
bool capturing();
void record_launch(std::function<void()> run);
void sync_block(const char* name, const std::source_location& at);
void sync_warp(const char* name, unsigned mask, const std::source_location& at);
enum class Shuffle { kIndex, kUp, kDown, kXor };
std::uint64_t shuffle_bits(const char* name, unsigned mask, std::uint64_t bits, Shuffle kind, int arg, int width,
                           const std::source_location& at);
unsigned ballot(const char* name, unsigned mask, bool predicate, const std::source_location& at);
// An atomic read-modify-write of `bytes` bytes at `address` (for the race detector: atomics
// do not race with each other). `pc` is the kernel's instruction, for the source line.
void atomic_access(const void* address, std::size_t bytes, const void* pc);

// A barrier is also a compiler barrier: values other threads wrote must be read again.
inline void compiler_barrier() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// A kernel argument as a pointer, when it is one (for check_pointer_argument).
template <class T>
const void* as_pointer(const T& argument) {
  if constexpr (std::is_pointer_v<T>) return static_cast<const void*>(argument);
  else return nullptr;
}

template <class T>
T shuffle(const char* name, unsigned mask, T value, Shuffle kind, int arg, int width, const std::source_location& at) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move values of up to 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  bits = shuffle_bits(name, mask, bits, kind, arg, width, at);
  compiler_barrier();
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
}  // namespace detail

// The one launch function. Every thread calls the kernel with its own copy of the arguments,
// as on the GPU; the arguments are converted to the kernel's parameter types once. Launches
// run in order, before launch returns; the stream must still be the runtime's, as on a GPU.
template <class... Params, class... Args>
void launch(const LaunchSite& site, void (*kernel)(Params...), dim3 grid, dim3 block, std::size_t shared_bytes,
            kernels::Stream stream, Args&&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "launch: wrong number of kernel arguments");
  validate_launch(site, grid, block, shared_bytes);
  detail::check_stream(site, stream);
  const std::tuple<std::decay_t<Params>...> arguments(std::forward<Args>(args)...);
  std::apply(
      [&](const auto&... argument) {
        int index = 0;
        ((++index, std::is_pointer_v<std::decay_t<decltype(argument)>>
                       ? detail::check_pointer_argument(site, index, detail::as_pointer(argument))
                       : void()),
         ...);
      },
      arguments);
  // As the nvcc path does: above 48 KiB, the kernel opts in, once per kernel and size.
  const void* id = reinterpret_cast<const void*>(kernel);
  if (shared_bytes > kDefaultDynamicSharedBytes && detail::raise_shared_limit(id, shared_bytes))
    detail::allow_dynamic_shared(site, id, shared_bytes);
  if (detail::capturing()) {
    detail::record_launch([=] {
      std::apply([&](const auto&... argument) { launch(site, kernel, grid, block, shared_bytes, stream, argument...); },
                 arguments);
    });
    return;
  }
  const auto run_thread = [&] { std::apply(kernel, arguments); };
  detail::run_launch(
      site, id, grid, block, shared_bytes,
      [](const void* closure) { (*static_cast<const decltype(run_thread)*>(closure))(); }, &run_thread);
}

}  // namespace brrr::simt

using brrr::simt::blockDim;
using brrr::simt::blockIdx;
using brrr::simt::gridDim;
using brrr::simt::threadIdx;
using brrr::simt::warpSize;

// --- barriers, shuffles, votes --------------------------------------------------------------------
// Each takes its call site as a defaulted last argument, which CUDA code never passes: the
// emulator checks that every thread waits at the same barrier, every lane at the same shuffle.

inline void __syncthreads(const std::source_location& at = std::source_location::current()) {
  brrr::simt::detail::sync_block("__syncthreads", at);
  brrr::simt::detail::compiler_barrier();
}
inline void __syncwarp(unsigned mask = 0xffffffffu, const std::source_location& at = std::source_location::current()) {
  brrr::simt::detail::sync_warp("__syncwarp", mask, at);
  brrr::simt::detail::compiler_barrier();
}
// Fibers share one CPU and switch only at barriers: every write is already visible.
inline void __threadfence() { brrr::simt::detail::compiler_barrier(); }
inline void __threadfence_block() { brrr::simt::detail::compiler_barrier(); }

// Lane l receives `value` from lane srcLane (of its group of `width` lanes).
template <class T>
T __shfl_sync(unsigned mask, T value, int srcLane, int width = warpSize,
              const std::source_location& at = std::source_location::current()) {
  return brrr::simt::detail::shuffle("__shfl_sync", mask, value, brrr::simt::detail::Shuffle::kIndex, srcLane, width,
                                     at);
}
// From lane l - delta; lanes below delta keep their own value.
template <class T>
T __shfl_up_sync(unsigned mask, T value, unsigned delta, int width = warpSize,
                 const std::source_location& at = std::source_location::current()) {
  return brrr::simt::detail::shuffle("__shfl_up_sync", mask, value, brrr::simt::detail::Shuffle::kUp,
                                     static_cast<int>(delta), width, at);
}
// From lane l + delta; lanes whose l + delta falls outside the group keep their own value.
template <class T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta, int width = warpSize,
                   const std::source_location& at = std::source_location::current()) {
  return brrr::simt::detail::shuffle("__shfl_down_sync", mask, value, brrr::simt::detail::Shuffle::kDown,
                                     static_cast<int>(delta), width, at);
}
// From lane l ^ laneMask: the butterfly of a reduction in which every lane gets the result.
template <class T>
T __shfl_xor_sync(unsigned mask, T value, int laneMask, int width = warpSize,
                  const std::source_location& at = std::source_location::current()) {
  return brrr::simt::detail::shuffle("__shfl_xor_sync", mask, value, brrr::simt::detail::Shuffle::kXor, laneMask,
                                     width, at);
}
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              const std::source_location& at = std::source_location::current()) {
  const unsigned votes = brrr::simt::detail::ballot("__ballot_sync", mask, predicate != 0, at);
  brrr::simt::detail::compiler_barrier();
  return votes;
}
inline int __any_sync(unsigned mask, int predicate, const std::source_location& at = std::source_location::current()) {
  return brrr::simt::detail::ballot("__any_sync", mask, predicate != 0, at) != 0;
}
inline int __all_sync(unsigned mask, int predicate, const std::source_location& at = std::source_location::current()) {
  return brrr::simt::detail::ballot("__all_sync", mask, predicate == 0, at) == 0;  // nobody votes "false"
}

// --- atomics ------------------------------------------------------------------------------------
// Each returns the old value. A fiber is never interrupted between the read and the write.
// The read and write are not instrumented (no_sanitize): the race detector is told of one
// atomic access instead, which races with plain accesses but not with other atomics.

namespace brrr::simt::detail {
template <class T, class Op>
__attribute__((noinline, no_sanitize("thread"))) T read_modify_write(T* address, Op op) {
  atomic_access(address, sizeof(T), __builtin_return_address(0));
  const T old = *address;
  *address = op(old);
  return old;
}
}  // namespace brrr::simt::detail

#define BRRR_SIMT_ATOMIC(name, T, expression)                                              \
  inline T name(T* address, T val) {                                                       \
    return brrr::simt::detail::read_modify_write(address, [val](T old) { return expression; }); \
  }
BRRR_SIMT_ATOMIC(atomicAdd, int, old + val)
BRRR_SIMT_ATOMIC(atomicAdd, unsigned, old + val)
BRRR_SIMT_ATOMIC(atomicAdd, unsigned long long, old + val)
BRRR_SIMT_ATOMIC(atomicAdd, float, old + val)
BRRR_SIMT_ATOMIC(atomicAdd, double, old + val)
BRRR_SIMT_ATOMIC(atomicSub, int, old - val)
BRRR_SIMT_ATOMIC(atomicSub, unsigned, old - val)
BRRR_SIMT_ATOMIC(atomicMax, int, old > val ? old : val)
BRRR_SIMT_ATOMIC(atomicMax, unsigned, old > val ? old : val)
BRRR_SIMT_ATOMIC(atomicMax, long long, old > val ? old : val)
BRRR_SIMT_ATOMIC(atomicMax, unsigned long long, old > val ? old : val)
BRRR_SIMT_ATOMIC(atomicMin, int, old < val ? old : val)
BRRR_SIMT_ATOMIC(atomicMin, unsigned, old < val ? old : val)
BRRR_SIMT_ATOMIC(atomicMin, long long, old < val ? old : val)
BRRR_SIMT_ATOMIC(atomicMin, unsigned long long, old < val ? old : val)
BRRR_SIMT_ATOMIC(atomicExch, int, val)
BRRR_SIMT_ATOMIC(atomicExch, unsigned, val)
BRRR_SIMT_ATOMIC(atomicExch, unsigned long long, val)
BRRR_SIMT_ATOMIC(atomicExch, float, val)
#undef BRRR_SIMT_ATOMIC
inline int atomicCAS(int* address, int compare, int val) {
  return brrr::simt::detail::read_modify_write(address, [&](int old) { return old == compare ? val : old; });
}
inline unsigned atomicCAS(unsigned* address, unsigned compare, unsigned val) {
  return brrr::simt::detail::read_modify_write(address, [&](unsigned old) { return old == compare ? val : old; });
}
inline unsigned long long atomicCAS(unsigned long long* address, unsigned long long compare, unsigned long long val) {
  return brrr::simt::detail::read_modify_write(
      address, [&](unsigned long long old) { return old == compare ? val : old; });
}

// --- loads and math -------------------------------------------------------------------------------
// __ldg loads through the GPU's read-only cache; here it is a load.
template <class T>
inline T __ldg(const T* address) {
  return *address;
}

// expf, logf, sqrtf, tanhf, fmaxf, fminf, fabsf, powf, erff, ... are the C library's.
// CUDA's overloaded min and max for matching types:
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
// The fast intrinsics are the exact functions here (the GPU's are a few ulp less accurate).
// glibc's math.h already declares __expf, __logf, ... (as internals it does not export), so
// these are macros rather than functions.
#define __expf(x) ::expf(x)
#define __logf(x) ::logf(x)
#define __sinf(x) ::sinf(x)
#define __cosf(x) ::cosf(x)
#define __tanf(x) ::tanf(x)
#define __powf(x, y) ::powf(x, y)
#define __exp10f(x) ::exp10f(x)
#define __log2f(x) ::log2f(x)
#define __log10f(x) ::log10f(x)
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }  // NaN -> 0, as on the GPU
inline int __float_as_int(float x) { return std::bit_cast<int>(x); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __int_as_float(int x) { return std::bit_cast<float>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(static_cast<unsigned>(x)) + 1; }

// --- bfloat16 ---------------------------------------------------------------------------------
// CUDA's __nv_bfloat16 and the conversions kernels use, on brrr::bf16 (base/include/brrr/
// bfloat16.h), which rounds bit for bit as the GPU does. As in CUDA, a pair is one 4-byte value.
using __nv_bfloat16 = brrr::bf16;
using __nv_bfloat162 = brrr::bf162;
inline __nv_bfloat16 __float2bfloat16_rn(float x) { return brrr::bf16(x); }
inline __nv_bfloat16 __float2bfloat16(float x) { return brrr::bf16(x); }
inline float __bfloat162float(__nv_bfloat16 x) { return static_cast<float>(x); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 x) { return x.bits; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) { return brrr::bf16::from_bits(bits); }
inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi) { return {brrr::bf16(lo), brrr::bf16(hi)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 pair) { return {static_cast<float>(pair.x), static_cast<float>(pair.y)}; }
inline float __low2float(__nv_bfloat162 pair) { return static_cast<float>(pair.x); }
inline float __high2float(__nv_bfloat162 pair) { return static_cast<float>(pair.y); }

#endif  // __CUDACC__

// Chapter 14's tensor-core instructions (mma.sync, ldmatrix, cp.async, WMMA) live in
// simt_tensor_cores.h. Included here until every kernel file that uses them includes it.
#include "kernels/cuda/simt_tensor_cores.h"
