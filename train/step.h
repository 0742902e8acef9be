// train/step.h: what one training step is, for the loop in trainer.cpp and the three ways it
// can take a step (inside brrr::train). Chapter 08 (training). Read before: trainer.h.
// Read next: trainer.cpp (the loop and plain_step), then graph_step.h (chapter 17) and
// zero_step.h (chapter 19).
//
// A step: the step's micro-batches, each a forward and a backward that add to the gradients;
// the gradients summed over the ranks (chapter 19); clipping; one AdamW update. The loop picks
// once, before the first step, how: plain_step (this file), GraphStep (a CUDA graph replayed,
// chapter 17) or ZeroStep (AdamW's moments sharded over the ranks, chapter 19).
#pragma once
#include <vector>

#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "train/data.h"
#include "train/distributed.h"
#include "train/gradient_reducer.h"
#include "train/trainer.h"

namespace brrr::train {

// What every step reads and changes.
struct StepContext {
  const TrainConfig& config;
  models::GPT& model;
  optim::AdamW& opt;  // over this rank's parameters (all of them, except under ZeRO)
  const TextDataset& data;
  Generator& data_gen;  // the training batches' stream, the same on every rank
  Device device;
  int rank = 0, ranks = 1;
};

// What a step leaves on the device for the loop to read later (pending.h): reading it would
// make the host wait for the device.
struct StepOutput {
  std::vector<Tensor> losses;  // one per micro-step, each already divided by the micro-steps
  Tensor grad_norm;            // undefined without clipping
};

// The forward and backward of this rank's grad_accum micro-batches, adding to the gradients.
// The step's batch is ranks x grad_accum micro-batches drawn one after another from one
// stream; rank r trains on micro-batches r * grad_accum ... and skips the draws of the others.
// last_hooks go with the last micro-step's backward (the gradient reducer's, chapter 19).
std::vector<Tensor> accumulate_gradients(StepContext& s, const autograd::BackwardHooks& last_hooks);

// Chapter 08's step (and chapter 19's without ZeRO): zero the gradients, accumulate them, sum
// them over the ranks (reducer), clip them, update.
StepOutput plain_step(StepContext& s, dist::GradientReducer& reducer);

// Its last part, also the CUDA graph's (graph_step.cpp): clip the summed gradients (with
// config.grad_clip > 0, the norm into out.grad_norm) and update. On one rank on a GPU this is
// AdamW::step_with_clipping; on the CPU and on several ranks, clip_grad_norm then the step,
// whose norm ZeRO's sharded step reproduces bit for bit.
void clip_and_update(StepContext& s, StepOutput& out);

}  // namespace brrr::train
