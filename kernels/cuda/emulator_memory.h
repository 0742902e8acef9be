// kernels/cuda/emulator_memory.h: the emulator's device memory, an arena apart from host
// memory. Chapter 10 (the GPU and the emulator). Read before: kernels/cuda/runtime.h.
// Read next: kernels/cuda/emulator_memory.cpp.
//
// On a GPU, a pointer from cudaMalloc is not host memory: the host cannot read it, and a
// kernel can only use it while it points into a live allocation. The emulator's device memory
// behaves the same way, so that code that breaks these rules fails here, on the CPU:
//   - it lives in one arena of address space that is inaccessible (PROT_NONE) except while a
//     kernel runs or a copy runs; a host read or write of it stops the program with a message
//     saying what happened (a SIGSEGV handler), not with a bare "Segmentation fault";
//   - it is filled with 0xFF bytes (NaN as float, -1 as int) when allocated and whenever the
//     caching allocator hands a block out again, so a kernel that reads what nobody wrote sees
//     NaN, not a lucky zero or the last tensor's values;
//   - every allocation knows its exact size: the race detector reports a kernel's access
//     outside every live allocation (past the end by one element, or into a freed block).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/signatures.h"  // Stream

namespace brrr::simt::memory {

// nbytes of device memory, 256-byte aligned as cudaMalloc's, filled with 0xFF; nullptr when
// the arena has no room.
void* allocate(std::size_t nbytes);
void release(void* pointer);
// The caching allocator hands `block` (one allocation) out again for a tensor of `bytes`
// bytes: accesses past `bytes` are then out of bounds, and the bytes are poisoned again. Or it
// keeps the block for reuse (set_cached): then no pointer into it is valid.
void set_in_use(void* block, std::size_t bytes);
void set_cached(void* block);

// A live allocation: [begin, begin + bytes) is what kernels may touch.
struct Allocation {
  std::uintptr_t begin = 0;
  std::size_t bytes = 0;
};
bool in_arena(const void* pointer);
void arena(std::uintptr_t& begin, std::uintptr_t& bytes);  // where the arena is
// The allocation that holds `pointer` (one past its end counts: an empty range's pointer).
// Returns false when none does.
bool find(const void* pointer, Allocation& found);
// "byte 40 of a 1024-byte device allocation at 0x7f..." or "device memory that is not
// allocated (freed, or never allocated)".
std::string describe(const void* pointer);

// While one of these lives, host code may touch device memory: launches and copies.
class Open {
 public:
  Open();
  ~Open();
  Open(const Open&) = delete;
  Open& operator=(const Open&) = delete;
};

// Installs the SIGSEGV handler that explains a host access of device memory (done when the
// arena is made; again after something else, such as a test framework, replaced it).
void install_fault_handler();

// The emulator's one stream: not 0, so a launch on the legacy default stream is told apart.
kernels::Stream stream();

}  // namespace brrr::simt::memory
