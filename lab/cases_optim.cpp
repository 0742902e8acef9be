// lab/cases_optim.cpp: the kernel lab's cases for the optimizers of chapter 16 (the fused
// optimizer): AdamW on one tensor and on many in one launch, and SGD with momentum. Read
// before: cases.h. Read next: kernel_lab.cpp (the machinery that runs the table).
//
// The references follow PyTorch's documented updates (torch.optim.AdamW, torch.optim.SGD)
// element by element in double.
#include <algorithm>
#include <cmath>

#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

// Adam's defaults, weight decay 0.1, and a step late enough that the bias corrections are not 1.
const kernels::AdamWParams kAdamW{1e-3, 0.9, 0.999, 1e-8, 0.1, 10};
// Momentum, dampening, weight decay and Nesterov all on, past the first step.
const kernels::SGDParams kSGD{0.05, 0.9, 0.1, 0.01, true, false};
const kernels::SGDParams kSGDFirst{0.05, 0.9, 0.1, 0.01, false, true};

template <class T>
void call_adamw_step(kernels::adamw_step_fn<T> f, const Args& a) {
  f(a.f<T>("param"), a.f<T>("grad"), a.f<T>("m"), a.f<T>("v"), a.dims[0], kAdamW, a.stream);
}

// adamw_multi_step: the n parameters cut into tensors of ragged sizes, like a model's weight
// matrices and biases (most tensors start at an address that is not 16-byte aligned), with
// weight decay on every other one (as a GPT decays its matrices and not its biases).
std::vector<std::int64_t> tensor_sizes(std::int64_t n) {
  std::vector<std::int64_t> sizes;
  for (std::int64_t part : {n / 2 + 3, n / 4 - 1, n / 8 + 5, n / 16 + 2, n / 64 + 1}) {
    part = std::clamp<std::int64_t>(part, 0, n);
    sizes.push_back(part);
    n -= part;
  }
  sizes.push_back(n);  // the rest
  return sizes;
}
double decay_of(std::size_t tensor) { return tensor % 2 == 0 ? kAdamW.weight_decay : 0.0; }

template <class T>
std::vector<kernels::AdamWTensor<T>> tensors_of(const Args& a) {
  T *param = a.f<T>("param"), *m = a.f<T>("m"), *v = a.f<T>("v");
  const T* grad = a.f<T>("grad");
  std::vector<kernels::AdamWTensor<T>> tensors;
  std::int64_t offset = 0;
  for (std::int64_t size : tensor_sizes(a.dims[0])) {
    tensors.push_back({param + offset, grad + offset, m + offset, v + offset, size, decay_of(tensors.size())});
    offset += size;
  }
  return tensors;
}

template <class T>
void call_adamw_multi_step(kernels::adamw_multi_step_fn<T> f, const Args& a) {
  const std::vector<kernels::AdamWTensor<T>> tensors = tensors_of<T>(a);
  f(tensors.data(), static_cast<int>(tensors.size()), kAdamW, a.stream);
}

// adamw_clipped_multi_step: the gradients' norm is near sqrt(n) (standard normal values), so a
// max_norm of half of that clips them by about one half.
double max_norm_of(const Dims& d) { return 0.5 * std::sqrt(static_cast<double>(d[0])); }

template <class T>
void call_adamw_clipped_multi_step(kernels::adamw_clipped_multi_step_fn<T> f, const Args& a) {
  const std::vector<kernels::AdamWTensor<T>> tensors = tensors_of<T>(a);
  f(a.f<T>("norm"), tensors.data(), static_cast<int>(tensors.size()), kAdamW, max_norm_of(a.dims), a.stream);
}

template <class T>
void call_sgd_step(kernels::sgd_step_fn<T> f, const Args& a) {
  f(a.f<T>("param"), a.f<T>("grad"), a.f<T>("momentum_buffer"), a.dims[0], kSGD, a.stream);
}
template <class T>
void call_sgd_first_step(kernels::sgd_step_fn<T> f, const Args& a) {
  f(a.f<T>("param"), a.f<T>("grad"), a.f<T>("momentum_buffer"), a.dims[0], kSGDFirst, a.stream);
}

void make_adamw(Problem& p, Random& r) {
  const std::int64_t n = p.dims[0];
  p.inout("param", r.normal(n));
  p.input("grad", r.normal(n));
  p.inout("m", r.normal(n, 0.0f, 0.1f));
  p.inout("v", r.uniform(n, 0.0f, 0.01f));  // a running mean of squares: >= 0
}

// One AdamW step on elements [begin, end), with decoupled weight decay `decay`:
//   param *= 1 - lr decay;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   param -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
// With `scale`, each gradient is g * scale (clipping).
void adamw(Problem& p, std::int64_t begin, std::int64_t end, double decay, double scale = 1.0) {
  const kernels::AdamWParams& h = kAdamW;
  const std::vector<double>& grad = p.in("grad");
  std::vector<double>&param = p.out("param"), &m = p.out("m"), &v = p.out("v");
  const double t = static_cast<double>(h.step);
  for (std::int64_t i = begin; i < end; ++i) {
    const double g = grad[i] * scale;
    param[i] *= 1.0 - h.lr * decay;
    m[i] = h.beta1 * m[i] + (1.0 - h.beta1) * g;
    v[i] = h.beta2 * v[i] + (1.0 - h.beta2) * g * g;
    const double m_hat = m[i] / (1.0 - std::pow(h.beta1, t)), v_hat = v[i] / (1.0 - std::pow(h.beta2, t));
    param[i] -= h.lr * m_hat / (std::sqrt(v_hat) + h.eps);
  }
}

void adamw_multi_reference(Problem& p) {
  std::int64_t offset = 0;
  const std::vector<std::int64_t> sizes = tensor_sizes(p.dims[0]);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    adamw(p, offset, offset + sizes[t], decay_of(t));
    offset += sizes[t];
  }
}

// norm = sqrt(sum of g^2) over every tensor; each g is used as g min(1, max_norm / (norm + 1e-6))
// (torch.nn.utils.clip_grad_norm_'s coefficient), then AdamW as above.
void adamw_clipped_multi_reference(Problem& p) {
  double squares = 0;
  for (double g : p.in("grad")) squares += g * g;
  const double norm = std::sqrt(squares), coefficient = max_norm_of(p.dims) / (norm + 1e-6);
  p.out("norm")[0] = norm;
  std::int64_t offset = 0;
  const std::vector<std::int64_t> sizes = tensor_sizes(p.dims[0]);
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    adamw(p, offset, offset + sizes[t], decay_of(t), std::min(coefficient, 1.0));
    offset += sizes[t];
  }
}

void make_sgd(Problem& p, Random& r) {
  const std::int64_t n = p.dims[0];
  p.inout("param", r.normal(n));
  p.input("grad", r.normal(n));
  p.inout("momentum_buffer", r.normal(n, 0.0f, 0.5f));
}

// d = g + wd param; b = d on the first step, else momentum b + (1 - dampening) d;
// d = d + momentum b with Nesterov, else b; param -= lr d.
template <const kernels::SGDParams& H>
void sgd_reference(Problem& p) {
  const std::vector<double>& grad = p.in("grad");
  std::vector<double>&param = p.out("param"), &buf = p.out("momentum_buffer");
  for (std::size_t i = 0; i < param.size(); ++i) {
    double d = grad[i] + H.weight_decay * param[i];
    buf[i] = H.first_step ? d : H.momentum * buf[i] + (1.0 - H.dampening) * d;
    d = H.nesterov ? d + H.momentum * buf[i] : buf[i];
    param[i] -= H.lr * d;
  }
}

Case optimizer(Case c) {
  c.chapter = "16";
  c.dim_names = {"n"};
  c.gpu_size = {1 << 26}, c.emulator_size = {1 << 16}, c.cpu_size = {1 << 24};
  c.shapes = {{1}, {1003}, {4099}};
  c.tolerance = 1e-5;
  return c;
}

}  // namespace

std::vector<Case> optim_cases() {
  return {
      optimizer({.name = "adamw_step", .what = "param, m, v (n) updated in place from grad (n), step 10",
                 .bytes = [](const Dims& d) { return 28.0 * d[0]; },  // read param grad m v, write param m v
                 .make = &make_adamw, .reference = [](Problem& p) { adamw(p, 0, p.dims[0], kAdamW.weight_decay); },
                 .call = call(op::adamw_step<float>, &call_adamw_step<float>, op::adamw_step<double>,
                              &call_adamw_step<double>)}),
      optimizer({.name = "adamw_multi_step", .what = "adamw_step over 6 tensors of ragged sizes (n in all) in one launch",
                 .bytes = [](const Dims& d) { return 28.0 * d[0]; },
                 .make = &make_adamw, .reference = &adamw_multi_reference,
                 .call = call(op::adamw_multi_step<float>, &call_adamw_multi_step<float>,
                              op::adamw_multi_step<double>, &call_adamw_multi_step<double>)}),
      optimizer({.name = "adamw_clipped_multi_step",
                 .what = "adamw_multi_step with the gradients clipped to a global norm of sqrt(n) / 2; norm (1)",
                 // read param grad m v, write param m v; and grad read once more, for the norm
                 .bytes = [](const Dims& d) { return 32.0 * d[0]; },
                 .make = [](Problem& p, Random& r) {
                   make_adamw(p, r);
                   p.output("norm", 1);
                 },
                 .reference = &adamw_clipped_multi_reference,
                 .call = call(op::adamw_clipped_multi_step<float>, &call_adamw_clipped_multi_step<float>,
                              op::adamw_clipped_multi_step<double>, &call_adamw_clipped_multi_step<double>)}),
      optimizer({.name = "sgd_step", .what = "param, momentum_buffer (n) updated in place: momentum, Nesterov",
                 .bytes = [](const Dims& d) { return 20.0 * d[0]; },  // read param grad buf, write param buf
                 .make = &make_sgd, .reference = &sgd_reference<kSGD>,
                 .call = call(op::sgd_step<float>, &call_sgd_step<float>, op::sgd_step<double>,
                              &call_sgd_step<double>)}),
      optimizer({.name = "sgd_step/first", .op = "sgd_step",
                 .what = "sgd_step's first step: the buffer starts as the gradient, no Nesterov",
                 .bytes = [](const Dims& d) { return 20.0 * d[0]; },
                 .make = &make_sgd, .reference = &sgd_reference<kSGDFirst>,
                 .call = call(op::sgd_step<float>, &call_sgd_first_step<float>, op::sgd_step<double>,
                              &call_sgd_first_step<double>)}),
  };
}

}  // namespace brrr::lab
