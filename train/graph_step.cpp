// train/graph_step.cpp: the training step captured once as a CUDA graph and replayed.
// Chapter 17 (putting it together). Read before: graph_step.h. Read next: zero_step.h
// (chapter 19's step).
#include "train/graph_step.h"

namespace brrr::train {

GraphStep::GraphStep(const StepContext& s) {
  BRRR_CHECK(s.device.is_cuda(), "cuda_graph: the run is on the CPU (--device ", s.config.device,
             "); a CUDA graph needs a CUDA device (cuda or emulator)");
  BRRR_CHECK(s.ranks == 1, "cuda_graph: runs on one rank only (this run has ", s.ranks, ")");
}

StepOutput GraphStep::operator()(StepContext& s, dist::GradientReducer& reducer) {
  if (!warmed_up_) {
    warmed_up_ = true;
    return plain_step(s, reducer);
  }
  // One micro-step on one rank (validate() and the checks of the constructor).
  Tensor x, y;
  s.data.batch(Split::Train, s.config.batch_size, s.config.block_size, s.data_gen, x, y);
  s.opt.prepare_graph_step();
  if (graph_.defined()) {
    x_.copy_(x), y_.copy_(y);
  } else {
    s.opt.zero_grad();  // the last time: from now on the graph writes the gradients it made
    x_ = x.to(s.device), y_ = y.to(s.device);
    graph_ = cuda::Graph::capture([&] {
      const Tensor loss = s.model.loss(s.model.forward(x_), y_);
      loss.backward();
      loss_ = loss.detach();
      StepOutput out;
      clip_and_update(s, out);  // plain_step's call: the same kernels, the same bits
      norm_ = out.grad_norm;
    });
  }
  graph_.replay();
  StepOutput out;
  out.losses.push_back(loss_.clone());  // the graph overwrites its own at the next replay
  if (norm_.defined()) out.grad_norm = norm_.clone();
  return out;
}

}  // namespace brrr::train
