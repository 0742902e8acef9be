// kernels/cuda/simt_counters.h: the emulator counts what Nsight Compute counts about memory:
// per launch and per instruction, the global requests and sectors, the shared-memory
// wavefronts and bank conflicts, and how many lanes of a warp took part. Chapter 10 (the GPU
// and the emulator). Read before: kernels/cuda/simt.h, kernels/cuda/simt_race_detector.cpp
// (how the emulator sees every access). Read next: kernels/cuda/simt_counters.cpp, then
// lab/counters.cpp (`brrr kernel-lab OP --device emulator --mode counters`).
//
// The definitions are Nsight Compute's (its profiling guide, "L1TEX"):
//   - a request is one warp-level memory instruction (all the lanes that execute it together);
//   - global memory is read and written in 32-byte sectors: an instruction's sectors are the
//     distinct 32-byte sectors its lanes touch. 32 lanes reading 32 consecutive aligned floats
//     touch 128 bytes: 4 sectors, the least there can be; shifted by one float, 5;
//   - shared memory has 32 banks of 4 bytes; an instruction is served in wavefronts, at most
//     one 4-byte word per bank each (lanes reading the same word share it: a broadcast). 8-byte
//     accesses are served in two phases (half-warps), 16-byte ones in four (quarter-warps), so
//     the ideal is 1 wavefront per phase that has a lane: 1 for floats, 2 for doubles, 4 for
//     float4s. Bank conflicts are the wavefronts above the ideal.
// ncu_metrics (below) names each count as ncu does (l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum, ...).
//
// What a GPU does and the emulator cannot know: the emulator runs each lane as a fiber, so the
// lanes of a warp do not execute an instruction together. It pairs them: the k-th time lane a
// executes an instruction and the k-th time lane b does are the same warp-level instruction.
// That is exact when the lanes run the same path (the common case) or when some leave a loop
// early; it is wrong when lanes take a data-dependent branch in different iterations of a loop.
// Where the pairing is known to be doubtful (the lanes' k-th executions fall between different
// barriers, or lanes ran it different numbers of times along different paths) the instruction
// is marked inexact, and every table says so. Instruction counts, issue slots and branch
// efficiency are not modelled. Tensor-core instructions (mma.sync, wgmma), bulk copies and
// mbarrier waits are counted apart (their operands are not loads and stores of the kernel's
// source); a bulk copy's global bytes join the distinct sectors read or written. Atomics and cp.async's writes to shared memory
// (simt_tensor_cores.cpp, not instrumented) are not counted; cp.async's global reads are, apart
// from the loads. An ldmatrix is counted as the shared loads it makes here, 16 bytes from each
// lane that gives a row (ncu counts it apart, as LDSM; the wavefronts are the same).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brrr::simt {

// The memory system's rules, as parameters a test can change (to see a wrong model fail).
struct MemoryModel {
  int sector_bytes = 32;       // global memory's unit of transfer
  bool shared_phases = true;   // 8- and 16-byte shared accesses served in half- and quarter-warps;
                               // false: one phase of 32 lanes whose ideal is 1 wavefront
};

// One warp-level memory instruction: the address each lane that took part accessed.
struct WarpAccess {
  std::uint32_t lanes = 0;  // bit l: lane l took part
  int bytes = 4;            // per lane: 1, 2, 4, 8 or 16
  std::uintptr_t address[32] = {};
};

// The counting itself, on one instruction (what the tests check by hand).
int global_sectors(const WarpAccess& access, const MemoryModel& model = {});
int shared_wavefronts(const WarpAccess& access, const MemoryModel& model = {});
int shared_ideal_wavefronts(const WarpAccess& access, const MemoryModel& model = {});
// The distinct bytes the lanes touch (all lanes at one address: `bytes`).
int distinct_bytes(const WarpAccess& access);

enum class MemorySpace { kGlobal, kShared };

// One instruction of a kernel's source (a load or a store), summed over every warp that ran it.
struct InstructionCounts {
  std::uintptr_t pc = 0;  // the instruction's address in the program (source_line_of)
  MemorySpace space = MemorySpace::kGlobal;
  bool store = false;
  bool async_copy = false;                // the global read of a cp.async (ncu's LDGSTS)
  int bytes = 0;                          // per lane
  std::uint64_t requests = 0;             // warp-level executions
  std::uint64_t lanes = 0;                // lanes that took part, summed over the requests
  std::uint64_t sectors = 0;              // global
  std::uint64_t ideal_sectors = 0;        // the least sectors its bytes fit in (32-byte aligned)
  std::uint64_t wavefronts = 0, ideal_wavefronts = 0;  // shared
  std::uint64_t useful_bytes = 0;         // distinct bytes the lanes touched, summed
  bool exact = true;
  std::string inexact_why;                // when not exact: why the pairing of lanes is doubtful
};

// What one launch did to memory.
struct LaunchCounts {
  std::string kernel;  // the launch's kernel name (BRRR_LAUNCH's)
  std::uint64_t global_ld_requests = 0, global_ld_sectors = 0, global_st_requests = 0, global_st_sectors = 0;
  // The least sectors each request's distinct bytes fit in, summed: sectors above it are the
  // cost of misaligned or scattered lanes.
  std::uint64_t global_ld_ideal_sectors = 0, global_st_ideal_sectors = 0;
  // cp.async's reads of global memory (its writes to shared memory are not counted).
  std::uint64_t global_ldgsts_requests = 0, global_ldgsts_sectors = 0, global_ldgsts_ideal_sectors = 0;
  std::uint64_t shared_ld_requests = 0, shared_ld_wavefronts = 0, shared_ld_ideal = 0;
  std::uint64_t shared_st_requests = 0, shared_st_wavefronts = 0, shared_st_ideal = 0;
  std::uint64_t lanes = 0;  // active lanes, summed over every memory request
  // The distinct sectors of global memory the launch read and wrote (a DRAM traffic floor).
  std::uint64_t distinct_sectors_read = 0, distinct_sectors_written = 0;
  int sector_bytes = 32;
  std::vector<InstructionCounts> instructions;  // one per instruction, in no particular order
  int inexact = 0;                              // instructions marked inexact
  // Hopper's units (simt_hopper.cpp): warpgroup MMAs (one per warpgroup-wide wgmma.mma_async) and
  // their FLOPs (2 x 64 x N x 16 each); bulk tensor copies (TMA), loads and stores, each one
  // request of a whole box (its bytes counted in full, zeros past the tensor's edges included);
  // mbarrier waits that completed (one per waiting thread).
  std::uint64_t wgmma_instructions = 0, wgmma_flops = 0;
  std::uint64_t bulk_load_requests = 0, bulk_load_bytes = 0, bulk_store_requests = 0, bulk_store_bytes = 0;
  std::uint64_t mbarrier_waits = 0;
  // Warp-level tensor-core instructions before Hopper (simt_tensor_cores.cpp): one per warp-wide
  // mma.sync (m16n8k16: 2 x 16 x 8 x 16 FLOPs; m16n8k8 tf32: 2 x 16 x 8 x 8) and per WMMA
  // m16n16k8 mma_sync (2 x 16 x 16 x 8, which nvcc compiles to two mma.sync).
  std::uint64_t mma_instructions = 0, mma_flops = 0;
  std::uint64_t requests() const {
    return global_ld_requests + global_st_requests + global_ldgsts_requests + shared_ld_requests +
           shared_st_requests;
  }
  // Another launch's counts added in, field by field (the kernel lab sums a call's launches);
  // instructions of the same source line and access are merged. `kernel` is left as it is.
  LaunchCounts& operator+=(const LaunchCounts& launch);
};

// The counts by Nsight Compute's metric names (its profiling guide), and by emulator__ names for
// what ncu has no metric of: the one table of names the lab's JSON, its reports and the
// exercises' graders print. In the order ncu's CSV lists them, the emulator's own after.
struct NamedCount {
  const char* name;
  std::uint64_t value;
};
std::vector<NamedCount> ncu_metrics(const LaunchCounts& counts);
// One of them by name (a name not in ncu_metrics is a programming error: it throws).
std::uint64_t ncu_metric(const LaunchCounts& counts, const std::string& name);

// Counting is off by default (the emulator's normal runs pay nothing for it); while it is on,
// every launch of this process is counted, with `model`, and kept until taken. It needs the
// instrumented build (not the AddressSanitizer one: counting_available()).
void set_memory_counting(bool on);
bool memory_counting();
bool memory_counting_available();
void set_memory_model(const MemoryModel& model);
// The launches counted since the last call, in launch order.
std::vector<LaunchCounts> take_memory_counts();
// "gelu.cu:42", or "common.h:65 (inlined into reduce.cu:201)": the source line of an
// instruction (from the program's line tables, by addr2line); "" when unknown.
std::string source_line_of(std::uintptr_t pc);

}  // namespace brrr::simt
