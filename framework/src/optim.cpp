// framework/src/optim.cpp: AdamW, SGD, gradient clipping and the cosine schedule.
// Chapter 05 (modules, optimizers and the first MLP). Read before: kernels/cpu/optim.cpp.
// Read next: models/mlp (the first model).
#include "brrr/optim.h"

#include <cmath>

#include "brrr/autograd.h"
#include "brrr/cuda.h"
#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"
#include "kernels/cuda/runtime.h"

namespace brrr::optim {

void Optimizer::zero_grad() {
  for (Tensor& p : params()) p.set_grad(Tensor());
}

// ---------------------------------------------------------------------------------------------
// AdamW

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options) : AdamW(std::vector<ParamGroup<AdamWOptions>>{{std::move(params), options}}) {}

AdamW::AdamW(std::vector<ParamGroup<AdamWOptions>> groups) : groups_(std::move(groups)) {
  for (const auto& g : groups_)
    for (const Tensor& p : g.params) {
      BRRR_CHECK(p.defined() && p.requires_grad() && p.is_leaf(), "AdamW: every parameter must be a leaf that requires grad");
      BRRR_CHECK(p.is_contiguous(), "AdamW: parameters must be contiguous, got one of shape ", shape_str(p.shape()));
    }
}

std::vector<Tensor> AdamW::params() const {
  std::vector<Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

void AdamW::set_lr(double lr) {
  for (auto& g : groups_) g.options.lr_ = lr;
}

void AdamW::ensure_state() {
  if (!m_.empty()) return;
  for (const Tensor& p : params()) {
    m_.push_back(zeros_like(p));
    v_.push_back(zeros_like(p));
  }
}

namespace {
// Whether every parameter is on one device, with one dtype: then a group's update is one
// adamw_multi_step call (on a GPU one launch per 64 tensors; the CPU's is adamw_step on each
// tensor in turn, the same bits as the loop below).
bool on_one_device(const std::vector<Tensor>& params) {
  if (params.empty()) return false;
  for (const Tensor& p : params)
    if (p.device() != params.front().device() || p.dtype() != params.front().dtype()) return false;
  return true;
}

// What a group's kernels are given at step `step`.
kernels::AdamWParams hyperparameters(const ParamGroup<AdamWOptions>& group, std::int64_t step) {
  const AdamWOptions& o = group.options;
  return {o.lr_, o.betas_.first, o.betas_.second, o.eps_, o.weight_decay_, step};
}

// The same update as adamw_step on each tensor (bit for bit), as one kernel launch per 64
// tensors. m[first + j] and v[first + j] are the moments of params[j].
void multi_tensor_step(const std::vector<Tensor>& params, const std::vector<Tensor>& m, const std::vector<Tensor>& v,
                       std::size_t first, const kernels::AdamWParams& hp) {
  static detail::KernelFamily<kernels::adamw_multi_step_fn> k(kernels::op::adamw_multi_step<float>);
  std::vector<Tensor> grads;  // contiguous gradients, alive until the launch is queued
  grads.reserve(params.size());
  const Device device = params.front().device();
  detail::dispatch_floating(params.front().dtype(), "AdamW", [&]<class T>() {
    std::vector<kernels::AdamWTensor<T>> list;
    for (std::size_t j = 0; j < params.size(); ++j) {
      const Tensor& p = params[j];
      if (!p.grad().defined()) continue;  // no gradient: left alone, as in the loop below
      grads.push_back(p.grad().contiguous());
      list.push_back({p.data_ptr<T>(), grads.back().data_ptr<T>(), m[first + j].data_ptr<T>(),
                      v[first + j].data_ptr<T>(), p.numel(), hp.weight_decay});
    }
    k.get<T>(device)(list.data(), static_cast<int>(list.size()), hp, detail::stream(device));
  });
}
}  // namespace

// Where a step starts: inside a CUDA graph's capture, prepare_graph_step() has counted it and
// written its numbers to memory, which the replays read (true); else the state is made if need
// be and the step counted here (false).
bool AdamW::begin_step(const char* op) {
  if (!cuda::capturing()) {
    ensure_state();
    ++step_;
    return false;
  }
  BRRR_CHECK(!m_.empty() && graph_constants_.size() == groups_.size(), op,
             " inside a CUDA graph capture: take one step outside the graph first (it makes the moments, and "
             "the clipped step's workspace), then call prepare_graph_step() before the capture and before every "
             "replay");
  return true;
}

void AdamW::step() {
  BRRR_PROFILE("adamw step");
  const bool in_graph = begin_step("AdamW::step");
  static detail::KernelFamily<kernels::adamw_step_fn> k(kernels::op::adamw_step<float>);
  std::size_t i = 0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    kernels::AdamWParams hp = hyperparameters(group, step_);
    if (in_graph) hp.constants = graph_constants_[g].raw_data();  // written by prepare_graph_step
    if (on_one_device(group.params)) {  // one call for the group
      multi_tensor_step(group.params, m_, v_, i, hp);
      i += group.params.size();
      continue;
    }
    for (const Tensor& p : group.params) {
      const Tensor& m = m_[i];
      const Tensor& v = v_[i];
      ++i;
      const Tensor g = p.grad();
      if (!g.defined()) continue;  // a parameter that got no gradient is left alone (as PyTorch)
      const Tensor gc = g.contiguous();
      detail::dispatch_floating(p.dtype(), "AdamW", [&]<class T>() {
        k.get<T>(p.device())(p.data_ptr<T>(), gc.data_ptr<T>(), m.data_ptr<T>(), v.data_ptr<T>(), p.numel(), hp,
                             detail::stream(p.device()));
      });
    }
  }
}

Tensor AdamW::step_with_clipping(double max_norm) {
  BRRR_CHECK(max_norm > 0.0 && std::isfinite(max_norm), "AdamW::step_with_clipping: max_norm must be positive, got ",
             max_norm);
  const std::vector<Tensor> ps = params();
  // The group whose numbers the one launch takes: the first with weight decay, if any. The
  // others may differ from it only by having no weight decay (a graph's constants in memory
  // hold one decay; the kernel gives a tensor without decay exactly 1, adamw.cu).
  std::size_t lead = 0;
  while (lead + 1 < groups_.size() && groups_[lead].options.weight_decay_ == 0.0) ++lead;
  bool one_launch = on_one_device(ps) && ps.front().device().is_cuda();
  for (const auto& group : groups_) {
    const AdamWOptions &a = group.options, &b = groups_[lead].options;
    one_launch = one_launch && a.lr_ == b.lr_ && a.betas_ == b.betas_ && a.eps_ == b.eps_ &&
                 (a.weight_decay_ == b.weight_decay_ || a.weight_decay_ == 0.0);
  }
  if (!one_launch) {
    Tensor norm = clip_grad_norm(ps, max_norm);
    step();
    return norm;
  }
  BRRR_PROFILE("adamw step, clipped");
  const bool in_graph = begin_step("AdamW::step_with_clipping");
  kernels::AdamWParams hp = hyperparameters(groups_[lead], step_);
  if (in_graph) hp.constants = graph_constants_[lead].raw_data();
  const Device device = ps.front().device();
  Tensor norm = empty({}, TensorOptions().dtype(ps.front().dtype()).device(device));
  std::vector<Tensor> grads;  // contiguous gradients, alive until the launches are queued
  grads.reserve(ps.size());
  static detail::KernelFamily<kernels::adamw_clipped_multi_step_fn> k(kernels::op::adamw_clipped_multi_step<float>);
  detail::dispatch_floating(ps.front().dtype(), "AdamW", [&]<class T>() {
    std::vector<kernels::AdamWTensor<T>> list;
    std::size_t i = 0;
    for (const auto& group : groups_)
      for (const Tensor& p : group.params) {
        const std::size_t at = i++;
        if (!p.grad().defined()) continue;  // left alone, as step() leaves it
        grads.push_back(p.grad().contiguous());
        list.push_back({p.data_ptr<T>(), grads.back().data_ptr<T>(), m_[at].data_ptr<T>(), v_[at].data_ptr<T>(),
                        p.numel(), group.options.weight_decay_});
      }
    k.get<T>(device)(norm.data_ptr<T>(), list.data(), static_cast<int>(list.size()), hp, max_norm,
                     detail::stream(device));
  });
  return norm;
}

std::vector<Tensor> AdamW::state() const {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < m_.size(); ++i) {
    out.push_back(m_[i]);
    out.push_back(v_[i]);
  }
  return out;
}

void AdamW::prepare_graph_step() {
  BRRR_CHECK(!cuda::capturing(), "AdamW::prepare_graph_step: call it before the capture and before each replay, "
             "not inside the capture (it copies from the host)");
  ensure_state();
  ++step_;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    BRRR_CHECK(on_one_device(group.params) && group.params.front().device().is_cuda(),
               "AdamW::prepare_graph_step: group ", g, "'s parameters must all be on one CUDA device, in one dtype");
    const Device device = group.params.front().device();
    const DType dtype = group.params.front().dtype();
    const kernels::AdamWParams hp = hyperparameters(group, step_);
    if (graph_constants_.size() <= g) graph_constants_.push_back(empty({8}, TensorOptions().dtype(dtype).device(device)));
    detail::dispatch_floating(dtype, "AdamW", [&]<class T>() {
      static_assert(sizeof(kernels::AdamWConstants<T>) == 8 * sizeof(T), "AdamWConstants is eight T's");
      const kernels::AdamWConstants<T> constants = kernels::adamw_constants<T>(hp, hp.weight_decay);
      detail::cuda_runtime_for("AdamW::prepare_graph_step")
          .copy(graph_constants_[g].raw_data(), &constants, sizeof constants, gpu::CopyKind::HostToDevice);
    });
  }
}

void AdamW::load_state(const std::vector<Tensor>& state, std::int64_t step) {
  const std::vector<Tensor> ps = params();
  BRRR_CHECK(state.size() == 2 * ps.size(), "AdamW::load_state: expected ", 2 * ps.size(), " tensors (m and v for each of ",
             ps.size(), " parameters), got ", state.size());
  m_.clear();
  v_.clear();
  for (std::size_t i = 0; i < ps.size(); ++i) {
    for (int k = 0; k < 2; ++k)
      BRRR_CHECK(state[2 * i + k].shape() == ps[i].shape(), "AdamW::load_state: state ", 2 * i + k, " has shape ",
                 shape_str(state[2 * i + k].shape()), ", parameter ", i, " has ", shape_str(ps[i].shape()));
    m_.push_back(state[2 * i].to(ps[i].dtype()).contiguous().clone());
    v_.push_back(state[2 * i + 1].to(ps[i].dtype()).contiguous().clone());
  }
  step_ = step;
}

std::vector<ParamGroup<AdamWOptions>> decay_groups(const std::vector<Tensor>& params, AdamWOptions options) {
  ParamGroup<AdamWOptions> decay{{}, options}, no_decay{{}, options};
  no_decay.options.weight_decay(0.0);
  for (const Tensor& p : params) (p.dim() >= 2 ? decay : no_decay).params.push_back(p);
  return {decay, no_decay};
}

// ---------------------------------------------------------------------------------------------
// SGD

SGD::SGD(std::vector<Tensor> params, SGDOptions options) : params_(std::move(params)), options_(options) {
  for (const Tensor& p : params_)
    BRRR_CHECK(p.defined() && p.requires_grad() && p.is_leaf() && p.is_contiguous(),
               "SGD: every parameter must be a contiguous leaf that requires grad");
}

std::vector<Tensor> SGD::params() const { return params_; }
void SGD::set_lr(double lr) { options_.lr_ = lr; }

void SGD::step() {
  if (momentum_.empty())
    for (const Tensor& p : params_) momentum_.push_back(zeros_like(p));
  static detail::KernelFamily<kernels::sgd_step_fn> k(kernels::op::sgd_step<float>);
  const kernels::SGDParams hp{options_.lr_, options_.momentum_, options_.dampening_, options_.weight_decay_,
                              options_.nesterov_, first_};
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const Tensor g = p.grad().contiguous();
    detail::dispatch_floating(p.dtype(), "SGD", [&]<class T>() {
      k.get<T>(p.device())(p.data_ptr<T>(), g.data_ptr<T>(), momentum_[i].data_ptr<T>(), p.numel(), hp,
                           detail::stream(p.device()));
    });
  }
  first_ = false;
}

// ---------------------------------------------------------------------------------------------

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  BRRR_PROFILE("clip_grad_norm_");
  NoGradGuard no_grad;
  // Each tensor's sum of squares (in its dtype) is added in float64 where the gradients live:
  // on a GPU one read back to the host per call, not one per tensor.
  double total = 0.0;
  Tensor device_total;
  for (const Tensor& p : params)
    if (p.grad().defined()) {
      const Tensor g = p.grad();
      const Tensor squares = ops::sum(ops::mul(g, g));
      if (g.device().is_cpu()) total += squares.item<double>();
      else device_total = device_total.defined() ? device_total + squares.to(kFloat64) : squares.to(kFloat64);
    }
  if (device_total.defined()) total += device_total.item<double>();
  const double norm = std::sqrt(total);
  const double scale = max_norm / (norm + 1e-6);  // PyTorch's formula
  if (scale < 1.0)
    for (const Tensor& p : params)
      if (p.grad().defined()) {
        Tensor g = p.grad();
        g.mul_(scale);
      }
  return norm;
}

Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  bool on_device = false;
  for (const Tensor& p : params)
    if (p.grad().defined() && p.grad().device().is_cuda()) on_device = true;
  if (!on_device) return full({}, clip_grad_norm_(params, max_norm), kFloat64);  // the host path, same bits
  BRRR_PROFILE("clip_grad_norm");
  // The same arithmetic as clip_grad_norm_, kept on the device: each tensor's sum of squares
  // in its dtype, added in float64 in order; scale = max_norm / (norm + 1e-6), and the
  // gradients are multiplied by min(scale, 1) (1 leaves them as they are, bit for bit).
  Tensor total;
  for (const Tensor& p : params)
    if (p.grad().defined()) {
      const Tensor g = p.grad();
      const Tensor squares = ops::sum(ops::mul(g, g)).to(kFloat64);
      total = total.defined() ? total + squares : squares;
    }
  const Tensor norm = ops::sqrt(total);
  const Tensor scale = ops::div(full({}, max_norm, TensorOptions().dtype(kFloat64).device(norm.device())),
                                ops::add(norm, 1e-6));
  const Tensor coef = ops::masked_fill(scale, ops::relu(ops::sub(scale, 1.0)), 1.0);  // min(scale, 1)
  for (const Tensor& p : params)
    if (p.grad().defined()) {
      Tensor g = p.grad();
      detail::binary_into("mul", g, g, coef.to(g.dtype()));
    }
  return norm;
}

double CosineSchedule::lr(std::int64_t step) const {
  if (step < warmup_steps) return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps + 1);
  if (step > decay_steps) return min_lr;
  const double ratio = static_cast<double>(step - warmup_steps) / static_cast<double>(std::max<std::int64_t>(1, decay_steps - warmup_steps));
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return min_lr + coeff * (max_lr - min_lr);
}

}  // namespace brrr::optim
