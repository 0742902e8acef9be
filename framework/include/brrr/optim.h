// brrr/optim.h: optimizers, gradient clipping and the learning-rate schedule.
// Chapter 05 (modules, optimizers and the first MLP). Read before: nn.h.
//
// The names follow libtorch: brrr::optim::AdamW(params, AdamWOptions(lr).betas({0.9, 0.95})).
// An optimizer holds parameter groups; each group has its own options (nanoGPT puts the
// 2-D weights in a group with weight decay and the rest in one without).
#include <cstdint>
#include <utility>
#include <vector>

#include "brrr/tensor.h"

#pragma once

namespace brrr::optim {

struct AdamWOptions {
  double lr_ = 1e-3;
  std::pair<double, double> betas_ = {0.9, 0.999};
  double eps_ = 1e-8;
  double weight_decay_ = 1e-2;

  AdamWOptions(double lr = 1e-3) : lr_(lr) {}  // NOLINT: AdamW(params, 3e-4) reads well
  AdamWOptions& lr(double v) { lr_ = v; return *this; }
  AdamWOptions& betas(std::pair<double, double> v) { betas_ = v; return *this; }
  AdamWOptions& eps(double v) { eps_ = v; return *this; }
  AdamWOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
};

struct SGDOptions {
  double lr_ = 1e-2;
  double momentum_ = 0.0;
  double dampening_ = 0.0;
  double weight_decay_ = 0.0;
  bool nesterov_ = false;

  SGDOptions(double lr = 1e-2) : lr_(lr) {}  // NOLINT
  SGDOptions& lr(double v) { lr_ = v; return *this; }
  SGDOptions& momentum(double v) { momentum_ = v; return *this; }
  SGDOptions& dampening(double v) { dampening_ = v; return *this; }
  SGDOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  SGDOptions& nesterov(bool v) { nesterov_ = v; return *this; }
};

template <class Options>
struct ParamGroup {
  std::vector<Tensor> params;
  Options options;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  void zero_grad();  // drops each parameter's .grad
  virtual void set_lr(double lr) = 0;  // every group
  virtual std::vector<Tensor> params() const = 0;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  AdamW(std::vector<ParamGroup<AdamWOptions>> groups);
  void step() override;
  void set_lr(double lr) override;
  std::vector<Tensor> params() const override;

  std::vector<ParamGroup<AdamWOptions>>& groups() { return groups_; }
  std::int64_t step_count() const { return step_; }
  // The moments of every parameter in group order (m then v per parameter), for checkpoints.
  std::vector<Tensor> state() const;
  void load_state(const std::vector<Tensor>& state, std::int64_t step);

  // CUDA graphs (chapter 17). A graph replays its kernels' arguments, and AdamW's learning
  // rate and step count change every step, so inside a capture step() records an update that
  // reads them from device memory (one small buffer a group), and counts no step. Before the
  // capture and before every replay, prepare_graph_step() counts the step and writes its
  // numbers there (a copy that does not make the host wait), as step() would have made them:
  // the replayed update gives step()'s bits. Needs the state made (one step() outside the
  // graph first) and each group's parameters on one CUDA device in one dtype.
  void prepare_graph_step();

  // step() with the gradients clipped by their global norm first: what clip_grad_norm(params(),
  // max_norm) then step() compute, and the norm (before clipping) as a scalar tensor where the
  // gradients are. On a CUDA device (every parameter on one device in one dtype, the groups
  // differing at most in that some have no weight decay) it is one adamw_clipped_multi_step
  // (chapter 16): the gradients are read twice, for the norm and by the update, and never
  // written, so they stay unclipped; inside a graph's capture too, after prepare_graph_step(),
  // with the replays giving the bits of the calls outside. Otherwise, and always on the CPU,
  // clip_grad_norm then step(): the same bits as calling the two.
  Tensor step_with_clipping(double max_norm);

 private:
  void ensure_state();
  bool begin_step(const char* op);  // step()'s and step_with_clipping's start: true inside a graph's capture
  std::vector<ParamGroup<AdamWOptions>> groups_;
  std::vector<Tensor> m_, v_;
  std::int64_t step_ = 0;
  std::vector<Tensor> graph_constants_;  // per group, on the device: this step's AdamWConstants
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions options = {});
  void step() override;
  void set_lr(double lr) override;
  std::vector<Tensor> params() const override;

 private:
  std::vector<Tensor> params_;
  SGDOptions options_;
  std::vector<Tensor> momentum_;
  bool first_ = true;
};

// nanoGPT's grouping: tensors of 2 or more dims (matmul weights, embeddings) decay, the
// rest (biases, LayerNorm) do not.
std::vector<ParamGroup<AdamWOptions>> decay_groups(const std::vector<Tensor>& params, AdamWOptions options);

// Scales all gradients so their global L2 norm is at most max_norm; returns the norm before
// clipping. The norm is summed tensor by tensor in order (deterministic).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);
// The same, with the norm as a 0-dim float64 tensor where the gradients are: on a GPU nothing
// is read back (the scale is computed and applied on the device), so a training step need
// not wait for the device; the trainer reads the norm only when it logs.
Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// Linear warmup to max_lr over warmup_steps, then cosine decay to min_lr at decay_steps,
// then min_lr (nanoGPT's get_lr).
struct CosineSchedule {
  double max_lr;
  double min_lr;
  std::int64_t warmup_steps;
  std::int64_t decay_steps;
  double lr(std::int64_t step) const;
};

}  // namespace brrr::optim
