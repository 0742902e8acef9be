// framework/src/nn.cpp: Module bookkeeping and the basic layers.
// Chapter 05 (modules, optimizers and the first MLP). Read before: brrr/nn.h.
// Read next: optim.cpp.
#include "brrr/nn.h"

#include <cmath>

#include "brrr/autograd.h"
#include "brrr/ops.h"
#include "brrr/param_copies.h"

namespace brrr::nn {

Tensor Module::forward(const Tensor&) { detail::fail("Module::forward: this module does not take a single tensor"); }

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  BRRR_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_parameter: invalid name '", name, "'");
  for (const auto& [n, t] : parameters_) BRRR_CHECK(n != name, "register_parameter: '", name, "' is already registered");
  if (requires_grad && tensor.defined()) tensor.requires_grad_(true);
  parameters_.emplace_back(name, tensor);
  return parameters_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  BRRR_CHECK(module != nullptr, "register_module: '", name, "' is null");
  BRRR_CHECK(!name.empty() && name.find('.') == std::string::npos, "register_module: invalid name '", name, "'");
  for (const auto& [n, m] : children_) BRRR_CHECK(n != name, "register_module: '", name, "' is already registered");
  children_.emplace_back(name, std::move(module));
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [name, t] : parameters_)
    if (t.defined()) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out);
  // A tensor registered twice (tied weights) is listed once, under its first name.
  std::vector<std::pair<std::string, Tensor>> unique;
  for (auto& p : out) {
    bool seen = false;
    for (const auto& u : unique) seen = seen || u.second.impl() == p.second.impl();
    if (!seen) unique.push_back(std::move(p));
  }
  return unique;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  for (const auto& [name, child] : children_) {
    out.emplace_back(name, child);
    for (auto& [sub, m] : child->named_modules()) out.emplace_back(name + "." + sub, m);
  }
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::int64_t Module::num_parameters() const {
  std::int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.set_grad(Tensor());
}

// The parameter keeps its identity (every handle to it, such as Linear::weight, sees the move):
// its data is swapped for a copy on the device, as PyTorch's module.to() does with param.data.
void Module::to(Device device) {
  for (auto& [name, t] : parameters_)
    if (t.defined() && t.device() != device) {
      NoGradGuard no_grad;
      const Tensor moved = t.to(device);
      TensorImpl* impl = t.impl();
      impl->storage = moved.impl()->storage;
      impl->strides = moved.strides();
      impl->offset = moved.offset();
      if (impl->grad.defined()) impl->grad = impl->grad.to(device);
    }
  for (auto& [name, child] : children_) child->to(device);
}

// ---------------------------------------------------------------------------------------------

namespace {
// U(-bound, bound) from a generator, drawn in place.
Tensor uniform_init(Shape shape, double bound, Generator& gen, TensorOptions options) {
  Tensor t = empty(std::move(shape), TensorOptions().dtype(options.dtype_).device(options.device_));
  return t.uniform_(-bound, bound, gen);
}
}  // namespace

Linear::Linear(std::int64_t in, std::int64_t out, Generator& gen, bool has_bias, TensorOptions options) {
  BRRR_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in ", in, ", out ", out);
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight = register_parameter("weight", uniform_init({out, in}, bound, gen, options));
  if (has_bias) bias = register_parameter("bias", uniform_init({out}, bound, gen, options));
}

// ---------------------------------------------------------------------------------------------
// parameters in the input's dtype

namespace {
// The open scope's copies on this thread, keyed by the parameter's TensorImpl (nullptr: none open).
thread_local std::vector<std::pair<const void*, Tensor>>* open_copies = nullptr;
}  // namespace

ParameterCopies::ParameterCopies() : outermost_(open_copies == nullptr) {
  if (outermost_) open_copies = new std::vector<std::pair<const void*, Tensor>>();
}

ParameterCopies::~ParameterCopies() {
  if (!outermost_) return;
  delete open_copies;
  open_copies = nullptr;
}

std::size_t ParameterCopies::size() { return open_copies ? open_copies->size() : 0; }

Tensor param_like(const Tensor& param, const Tensor& input) {
  if (!param.defined() || param.dtype() == input.dtype() || input.dtype() != kBFloat16) return param;
  BRRR_CHECK(param.dtype() == kFloat32, "param_like: a bfloat16 input reads bf16 copies of float32 parameters, got a ",
             dtype_name(param.dtype()), " parameter");
  if (!open_copies) return param.to(kBFloat16);
  const void* key = param.impl();
  for (const auto& [k, copy] : *open_copies)  // a model has a few hundred parameters at most
    if (k == key) return copy;
  open_copies->emplace_back(key, param.to(kBFloat16));
  return open_copies->back().second;
}

Tensor Linear::forward(const Tensor& x) { return ops::linear(x, param_like(weight, x), param_like(bias, x)); }

Embedding::Embedding(std::int64_t num, std::int64_t dim, Generator& gen, TensorOptions options) {
  BRRR_CHECK(num > 0 && dim > 0, "Embedding: sizes must be positive, got ", num, " x ", dim);
  Tensor w = empty({num, dim}, TensorOptions().dtype(options.dtype_).device(options.device_));
  weight = register_parameter("weight", w.normal_(0.0, 1.0, gen));
}

Tensor Embedding::forward(const Tensor& indices) { return ops::embedding(weight, indices); }

LayerNorm::LayerNorm(std::int64_t dim, double eps, bool has_bias, TensorOptions options) : eps(eps) {
  const TensorOptions o = TensorOptions().dtype(options.dtype_).device(options.device_);
  weight = register_parameter("weight", ones({dim}, o));
  if (has_bias) bias = register_parameter("bias", zeros({dim}, o));
}

Tensor LayerNorm::forward(const Tensor& x) { return ops::layer_norm(x, param_like(weight, x), param_like(bias, x), eps); }
Tensor GELU::forward(const Tensor& x) { return ops::gelu(x); }
Tensor ReLU::forward(const Tensor& x) { return ops::relu(x); }
Tensor Tanh::forward(const Tensor& x) { return ops::tanh(x); }
Tensor Dropout::forward(const Tensor& x) { return ops::dropout(x, p, gen, is_training()); }

namespace {
double conv_bound(const char* module, std::int64_t in, std::int64_t out, std::int64_t kernel_elems,
                  std::int64_t groups) {
  BRRR_CHECK(in > 0 && out > 0 && kernel_elems > 0, module, ": sizes must be positive, got in_channels ", in,
             ", out_channels ", out);
  BRRR_CHECK(groups >= 1 && in % groups == 0 && out % groups == 0, module, ": groups ", groups,
             " must divide in_channels ", in, " and out_channels ", out);
  return 1.0 / std::sqrt(static_cast<double>(in / groups * kernel_elems));
}
}  // namespace

Conv2d::Conv2d(std::int64_t in, std::int64_t out, ops::Size2 k, Generator& gen, ConvOptions conv,
               TensorOptions options)
    : conv(conv) {
  BRRR_CHECK(k.h > 0 && k.w > 0, "Conv2d: kernel_size must be positive, got (", k.h, ", ", k.w, ")");
  const double bound = conv_bound("Conv2d", in, out, k.h * k.w, conv.groups_);
  weight = register_parameter("weight", uniform_init({out, in / conv.groups_, k.h, k.w}, bound, gen, options));
  if (conv.bias_) bias = register_parameter("bias", uniform_init({out}, bound, gen, options));
}

Tensor Conv2d::forward(const Tensor& x) {
  return ops::conv2d(x, weight, bias, conv.stride_, conv.padding_, conv.dilation_, conv.groups_);
}

Conv1d::Conv1d(std::int64_t in, std::int64_t out, std::int64_t k, Generator& gen, ConvOptions conv,
               TensorOptions options)
    : conv(conv) {
  BRRR_CHECK(k > 0, "Conv1d: kernel_size must be positive, got ", k);
  const double bound = conv_bound("Conv1d", in, out, k, conv.groups_);
  weight = register_parameter("weight", uniform_init({out, in / conv.groups_, k}, bound, gen, options));
  if (conv.bias_) bias = register_parameter("bias", uniform_init({out}, bound, gen, options));
}

Tensor Conv1d::forward(const Tensor& x) {
  return ops::conv1d(x, weight, bias, conv.stride_.w, conv.padding_.w, conv.dilation_.w, conv.groups_);
}

Tensor MaxPool2d::forward(const Tensor& x) { return ops::max_pool2d(x, kernel_size, stride, padding); }
Tensor AvgPool2d::forward(const Tensor& x) { return ops::avg_pool2d(x, kernel_size, stride, padding); }
Tensor Flatten::forward(const Tensor& x) { return x.flatten(start_dim, end_dim); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : modules_) h = m->forward(h);
  return h;
}

void ModuleList::push_back(std::shared_ptr<Module> module) {
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

}  // namespace brrr::nn
