// train/distributed_internal.h: what distributed.cpp shares with gradient_reducer.cpp, and
// with nothing else: the run's ranks, the counters of chapter 19's measurement, the slices of a
// buffer, host packing, the MPI communicators and NCCL's. Chapter 19 (data parallelism). Read
// before: distributed.h. Only files compiled with BRRR_WITH_MPI / BRRR_WITH_NCCL set as the
// library was built (train/CMakeLists.txt) include it.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "brrr/tensor.h"

#if BRRR_WITH_MPI
// MPI's C interface only: OpenMPI's deprecated C++ bindings do not compile warning-free.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif
#if BRRR_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>
#endif

namespace brrr::train::dist::internal {

extern int my_rank, ranks;                 // this rank, and how many there are (0 and 1 alone)
extern double communicating;               // seconds inside the collectives
extern double communicating_in_backward;   // seconds of it inside the backward's hooks
extern std::uint64_t sent;                 // bytes this rank sent

// Adds the wall time of one collective to `communicating` (or to another counter).
struct Timed {
  double* counter = &communicating;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  ~Timed() { *counter += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
};

// Throws unless the tensors are defined, contiguous, float32 or float64, of one dtype and device.
void check_tensors(const char* what, const std::vector<Tensor>& tensors);

// The slices of a buffer of n elements for the ranks: rank r's has counts[r] elements from
// displs[r]. MPI counts are ints.
struct Slices {
  std::vector<int> counts, displs;
};
Slices equal_slices(std::int64_t n);

#if BRRR_WITH_MPI
// Host copies of the tensors, end to end, and back into tensors [from, to) (CUDA tensors are
// copied through the host when there is no NCCL, which is also what the emulator does).
std::vector<std::byte> pack(const std::vector<Tensor>& tensors);
void unpack(const std::vector<std::byte>& flat, const std::vector<Tensor>& tensors, std::size_t from, std::size_t to);
// GradientReducer's two halves travel on communicators of their own (distributed.cpp says why).
extern MPI_Comm scatter_comm, gather_comm;
#endif
#if BRRR_WITH_NCCL
void nccl_check(ncclResult_t r, const char* what);
ncclComm_t nccl();  // the run's communicator, made at its first use
bool use_nccl(const std::vector<Tensor>& tensors);  // CUDA tensors on a GPU (not the emulator)
#endif

}  // namespace brrr::train::dist::internal
