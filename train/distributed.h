// train/distributed.h: the ranks of a data-parallel run and the collectives between them.
// Chapter 19 (data parallelism). Read before: trainer.h. Read next: distributed.cpp.
//
// `mpirun -np N brrr train ...` starts N copies of brrr, the ranks 0 .. N-1. Each computes the
// gradients of its own share of the batch; allreduce_sum then leaves every rank with the sum
// of all ranks' gradients, so every rank takes the same optimizer step and the models stay
// identical. On CPU tensors the bytes travel through MPI (Debian's OpenMPI); on CUDA tensors
// through NCCL, whose communicator is set up through MPI (llm.c does the same).
//
// Every sum is taken in rank order, ((x0 + x1) + x2) + ..., whatever MPI's own algorithm
// would have done: a run is bitwise reproducible for a given number of ranks, and the sum is
// the one a single process accumulating the same gradients one after another would take.
//
// Without mpirun (or with one rank) nothing here needs MPI: rank() is 0, world_size() 1, and
// every collective returns at once.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brrr/autograd.h"
#include "brrr/tensor.h"

namespace brrr::train::dist {

bool built_with_mpi();   // this brrr was built with MPI (find_package(MPI) found it)
bool built_with_nccl();  // ... and with NCCL, for CUDA tensors

// Joins the run mpirun started (with BRRR_FORCE_COLLECTIVES=1, also a run of one rank, so that
// its gradients take the collectives' path: a 1-rank NCCL or MPI run to compare bit for bit
// with a plain one) (OpenMPI's OMPI_COMM_WORLD_SIZE, or PMI_SIZE, says there is one)
// and returns the number of ranks; without mpirun, 1 and no MPI. Ranks other than 0 stop
// writing to stdout (rank 0 speaks for the run); every rank keeps stderr, for its errors.
// Throws when launched with several ranks by a brrr built without MPI. Safe to call again.
int init();
int rank();
int world_size();
// Whether gradients are summed through the collectives: several ranks, or BRRR_FORCE_COLLECTIVES.
bool collectives_active();
inline bool is_main() { return rank() == 0; }

// Prints "rank R: error: message" on stderr and makes mpirun stop every rank (MPI_Abort), so
// that the others never wait for this one in a collective that will not come.
[[noreturn]] void abort_all(const std::string& message);

// Every rank's text, in rank order, on every rank (the start-up check of the settings).
std::vector<std::string> allgather(const std::string& text);
// values summed element by element over the ranks, in rank order, on every rank.
std::vector<double> sum_over_ranks(const std::vector<double>& values);
void barrier();
// A barrier whose time is counted apart (seconds_waiting): the trainer calls it before summing
// the gradients, so that the time a collective takes is not confused with the time a rank
// waits for a slower one (a busy core, an uneven share).
void wait_for_all();

// Sums each tensor over the ranks, in place: afterwards every rank holds the same sum. The
// tensors (float32 or float64, contiguous, on one device) are packed into buckets of about
// bucket_bytes, each bucket one reduce-scatter (each rank sums its 1/N slice of it, in rank
// order) and one allgather (the slices go back to every rank): the ring algorithm's traffic,
// 2 (N - 1) / N times the bucket's bytes in and out of each rank.
void allreduce_sum(const std::vector<Tensor>& tensors, std::int64_t bucket_bytes);

// GradientReducer, the trainer's way to sum a model's gradients while the backward runs, is
// in gradient_reducer.h.

// ZeRO stage 1 (chapter 19): the tensors are split into N runs, rank r owning tensors
// [first[r], first[r + 1]) (first has N + 1 entries; first[0] = 0, first[N] = tensors.size()).
// reduce_scatter_sum leaves on each rank the rank-order sum of the tensors it owns (the others
// keep the rank's own values); allgather_owned copies every tensor from its owner to all ranks.
void reduce_scatter_sum(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& first);
void allgather_owned(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& first);
// first for tensors split into world_size() runs of about equal numbers of elements.
std::vector<std::size_t> balanced_split(const std::vector<Tensor>& tensors);

// Seconds spent inside the collectives above since init, and the bytes this rank sent in them:
// the share of a training step spent communicating (chapter 19's measurement).
double seconds_communicating();
// The part of seconds_communicating spent inside the backward (GradientReducer's hooks: packing
// buckets, starting their collectives, summing slices, MPI_Test): on a CPU that work takes the
// core from the backward, so it is exposed too.
double seconds_communicating_in_backward();
double seconds_waiting();
std::uint64_t bytes_sent();

}  // namespace brrr::train::dist
