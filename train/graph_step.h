// train/graph_step.h: the training step as a CUDA graph, `brrr train --cuda_graph` (inside
// brrr::train). Chapter 17 (putting it together). Read before: step.h and trainer.cpp (the
// loop and plain_step). Read next: graph_step.cpp.
//
// A step on a GPU is hundreds of kernel launches, each costing the host a few microseconds;
// for a small model the host's launches, not the GPU, set the pace. A CUDA graph records them
// once and replays them all with one call. The first step of the run is a plain step (it sets
// up cuBLAS, the kernels' workspace, AdamW's moments and the caching allocator's blocks); the
// second is captured whole: forward, backward, clipping and AdamW, on a batch in two tensors
// made for the graph, with the gradients the captured backward makes, which the parameters
// keep from then on (no zero_grad between replays: the graph writes them). Every step from the
// second on copies its batch into those tensors and AdamW's learning rate and step count into
// device memory (AdamW::prepare_graph_step: a graph would freeze them as kernel arguments),
// and replays the graph.
#pragma once
#include "brrr/brrr.h"
#include "train/step.h"

namespace brrr::train {

class GraphStep {
 public:
  // Checks that the run can be captured: a CUDA device (or the emulator) and one rank; the
  // config's validate() checked the rest (dropout 0, grad_accum 1).
  explicit GraphStep(const StepContext& s);
  StepOutput operator()(StepContext& s, dist::GradientReducer& reducer);

 private:
  bool warmed_up_ = false;  // the run's first step, a plain one, is done
  cuda::Graph graph_;
  Tensor x_, y_;         // the batch the graph reads (its inputs are copied in before each replay)
  Tensor loss_, norm_;   // what the graph writes (norm_ undefined without clipping)
};

}  // namespace brrr::train
