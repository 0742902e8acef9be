// train/zero_step.cpp: ZeRO stage 1's step, its clipping and its checkpoint gather.
// Chapter 19 (data parallelism). Read before: zero_step.h. Read next: data_parallel.h (what
// else the loop does when there are several ranks).
#include "train/zero_step.h"

#include <cmath>
#include <map>

namespace brrr::train {

namespace {
// This rank holds the summed gradients of params[split[rank] .. split[rank + 1]) only. Each
// rank computes their sums of squares; the ranks exchange them (one value a tensor, zeros
// elsewhere, so the sum over ranks is exact), and every rank adds them in the parameters'
// order in float64, as clip_grad_norm does: the same norm, bit for bit.
Tensor clip_sharded(const std::vector<Tensor>& params, const std::vector<std::size_t>& split, int rank, double max_norm) {
  NoGradGuard no_grad;
  std::vector<double> squares(params.size(), 0.0);
  for (std::size_t i = split[rank]; i < split[rank + 1]; ++i) {
    const Tensor g = params[i].grad();
    squares[i] = ops::sum(ops::mul(g, g)).item<double>();
  }
  squares = dist::sum_over_ranks(squares);
  double total = 0.0;
  for (double s : squares) total += s;
  const double norm = std::sqrt(total);
  const double scale = max_norm / (norm + 1e-6);  // PyTorch's formula, as in clip_grad_norm
  if (scale < 1.0)
    for (std::size_t i = split[rank]; i < split[rank + 1]; ++i) {
      Tensor g = params[i].grad();
      g.mul_(scale);
    }
  // Where the gradients are, as clip_grad_norm returns it (the loop reads it with the losses).
  return full({}, norm, TensorOptions().dtype(kFloat64).device(params.front().device()));
}
}  // namespace

ZeroStep::ZeroStep(std::vector<Tensor> params, int rank)
    : params_(std::move(params)), split_(dist::balanced_split(params_)), rank_(rank) {}

std::vector<Tensor> ZeroStep::owned() const {
  return std::vector<Tensor>(params_.begin() + static_cast<std::ptrdiff_t>(split_[rank_]),
                             params_.begin() + static_cast<std::ptrdiff_t>(split_[rank_ + 1]));
}

StepOutput ZeroStep::operator()(StepContext& s) {
  s.model.zero_grad();  // every parameter's, also those this rank's AdamW does not hold
  StepOutput out;
  out.losses = accumulate_gradients(s, {});  // the reduce-scatter does not overlap the backward (yet)
  // So that what follows times the collectives, not a slower rank.
  dist::wait_for_all();
  std::vector<Tensor> grads;
  for (const Tensor& p : params_) grads.push_back(p.grad());
  dist::reduce_scatter_sum(grads, split_);
  if (s.config.grad_clip > 0) out.grad_norm = clip_sharded(params_, split_, rank_, s.config.grad_clip);
  s.opt.step();
  NoGradGuard no_grad;
  dist::allgather_owned(params_, split_);
  return out;
}

std::string ZeroStep::save(const TrainingState& state, const optim::AdamWOptions& options,
                           const std::string& tokenizer_path) const {
  // Every parameter's moments, this rank's where it owns them (zeros elsewhere, and before the
  // first step, when AdamW has none yet), in the model's order.
  std::vector<Tensor> m, v;
  const std::vector<Tensor> mine = state.opt.state();
  std::map<const TensorImpl*, std::size_t> index;  // AdamW's order (its groups) of this rank's tensors
  const std::vector<Tensor> in_group_order = state.opt.params();
  for (std::size_t i = 0; i < in_group_order.size(); ++i) index[in_group_order[i].impl()] = i;
  for (const Tensor& p : params_) {
    const auto it = index.find(p.impl());
    const bool have = it != index.end() && !mine.empty();
    m.push_back(have ? mine[2 * it->second].contiguous() : zeros_like(p));
    v.push_back(have ? mine[2 * it->second + 1].contiguous() : zeros_like(p));
  }
  dist::allgather_owned(m, split_);
  dist::allgather_owned(v, split_);
  if (rank_ != 0) return "";
  optim::AdamW whole(optim::decay_groups(params_, options));
  if (state.opt.step_count() > 0) {
    std::map<const TensorImpl*, std::size_t> at;
    for (std::size_t i = 0; i < params_.size(); ++i) at[params_[i].impl()] = i;
    std::vector<Tensor> state_in_group_order;
    for (const Tensor& p : whole.params()) {
      state_in_group_order.push_back(m[at.at(p.impl())]);
      state_in_group_order.push_back(v[at.at(p.impl())]);
    }
    whole.load_state(state_in_group_order, state.opt.step_count());
  }
  const TrainingState all{state.config, state.model, whole, state.data_gen, state.step};
  return save_checkpoint(all, tokenizer_path);
}

}  // namespace brrr::train
