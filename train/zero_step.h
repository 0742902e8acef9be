// train/zero_step.h: the training step of ZeRO stage 1, `mpirun -np N brrr train --zero 1`
// (inside brrr::train). Chapter 19 (data parallelism). Read before: step.h, trainer.cpp (the
// loop and plain_step), distributed.h. Read next: zero_step.cpp.
//
// AdamW keeps two moments a parameter, twice the model's size. Under ZeRO stage 1 rank r's
// AdamW holds only the parameters [split[r], split[r + 1]), so only their moments: each rank
// receives the summed gradients of its own parameters (a reduce-scatter instead of an
// allreduce), clips them with the global norm, updates them, and sends them to all the others
// (an allgather). A checkpoint still holds every parameter's moments: the ranks gather them.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "train/checkpoint.h"
#include "train/step.h"

namespace brrr::train {

class ZeroStep {
 public:
  // Splits params over the ranks in runs of about equal numbers of elements.
  ZeroStep(std::vector<Tensor> params, int rank);
  // The parameters this rank updates, for its AdamW.
  std::vector<Tensor> owned() const;
  StepOutput operator()(StepContext& s);
  // Gathers every parameter's moments from the ranks that own them; rank 0 writes the
  // checkpoint (through an AdamW over all the parameters, built with `options`) and returns its
  // path, the other ranks "". Every rank must call it.
  std::string save(const TrainingState& state, const optim::AdamWOptions& options, const std::string& tokenizer_path) const;

 private:
  std::vector<Tensor> params_;
  std::vector<std::size_t> split_;  // ranks + 1 entries: rank r owns params_[split_[r] .. split_[r + 1])
  int rank_;
};

}  // namespace brrr::train
