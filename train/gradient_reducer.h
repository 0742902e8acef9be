// train/gradient_reducer.h: GradientReducer, the gradients of a model summed over the ranks
// bucket by bucket, while the backward still runs. Chapter 19 (data parallelism, "Overlap").
// Read before: distributed.h (the ranks and the collectives). Read next: gradient_reducer.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "brrr/autograd.h"
#include "brrr/tensor.h"

namespace brrr::train::dist {

// The trainer's way to sum the gradients of a model's parameters over the ranks, bucket by
// bucket, and, with overlap, while the backward still runs (chapter 19, "Overlap"):
//
//   GradientReducer reducer(model.parameters(), bucket_bytes, overlap);
//   { autograd::BackwardHooksGuard hooks(reducer.hooks()); loss.backward(); }  // the last micro-step
//   reducer.finish();  // every .grad now holds the sum over the ranks; then clip and step
//
// The buckets are the parameters in reverse order (about the order in which the backward
// finishes their gradients, as in PyTorch's DDP), cut at about bucket_bytes, fixed for the run
// and sent in that order by every rank. With overlap, a bucket leaves as soon as its last
// gradient is final (autograd's grad_ready hook) and the ones before it have left; on CPU
// tensors as a nonblocking reduce-scatter (MPI_Ialltoallv) then allgather (MPI_Iallgatherv),
// which the hooks push on between autograd nodes (MPI_Test); on CUDA tensors with NCCL as an
// allreduce on the runtime's side stream, after the backward's kernels that made the bucket.
// Without overlap, finish() sends them all. Every element is summed in rank order, so overlap
// on and off give the same bits.
class GradientReducer {
 public:
  GradientReducer(std::vector<Tensor> params, std::int64_t bucket_bytes, bool overlap);
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;
  // The hooks for the step's last backward (earlier micro-steps only accumulate); empty
  // without overlap.
  autograd::BackwardHooks hooks();
  // Sends what has not left yet and waits for every bucket; then every .grad is the sum.
  void finish();
  std::size_t buckets() const;
  std::size_t buckets_sent_during_backward() const;  // in the last step, for the tests

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace brrr::train::dist
