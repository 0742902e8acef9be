// brrr/nn.h: modules: named parameters and submodules, and the layers built from them.
// Chapter 05 (modules, optimizers and the first MLP). Read before: autograd.h.
// Read next: optim.h.
//
// As in libtorch (and PyTorch), a Module registers its parameters and submodules by name;
// named_parameters() walks the tree and joins names with dots ("0.weight",
// "transformer.h.0.attn.c_attn.weight"), so checkpoints line up with PyTorch's.
// Modules are held by std::shared_ptr.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/tensor.h"

namespace brrr::nn {

class Module : public std::enable_shared_from_this<Module> {
 public:
  virtual ~Module() = default;

  // Tensor-in, tensor-out modules override this; others define their own forward.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

  // Every parameter of this module and its submodules, with dotted names, depth first in
  // registration order.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const { return children_; }
  // Every submodule below this one with its dotted path ("transformer.h.0.attn"), depth first.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules() const;
  std::int64_t num_parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad();  // drops every parameter's .grad (as set_to_none in PyTorch)
  // Moves every parameter to device (in place: the Module keeps its tensors' names).
  virtual void to(Device device);

  // As in libtorch: a parameter or submodule becomes part of this module under `name`.
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const;

  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// y = x W^T + b, W (out, in). Initialised as PyTorch does: U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, Generator& gen, bool bias = true,
         TensorOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
};

// Rows of a (num, dim) table, initialised N(0, 1) as in PyTorch.
class Embedding : public Module {
 public:
  Embedding(std::int64_t num_embeddings, std::int64_t dim, Generator& gen, TensorOptions options = {});
  Tensor forward(const Tensor& indices) override;
  Tensor weight;
};

// LayerNorm over the last dim, weight 1 and bias 0 at first. ops::layer_norm: the registry
// picks its kernels or the composed op (BRRR_KERNELS=layer_norm=composed).
class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::int64_t dim, double eps = 1e-5, bool bias = true, TensorOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  double eps;
};

// ops::gelu: the registry picks its kernels or the composed op (BRRR_KERNELS=gelu=composed).
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override;
};

// Zeroes elements with probability p while training, from its own seeded generator.
class Dropout : public Module {
 public:
  explicit Dropout(double p, std::uint64_t seed = 0) : p(p), gen(seed) {}
  Tensor forward(const Tensor& x) override;
  double p;
  Generator gen;
};

// --- convolution and pooling (chapter 09, convolutions) ----------------------------------------
// torch.nn.Conv2d's keyword arguments, with fluent setters as libtorch's options:
//   nn::Conv2d(1, 16, 3, gen, nn::ConvOptions().padding(1))
struct ConvOptions {
  ConvOptions& stride(ops::Size2 v) { stride_ = v; return *this; }
  ConvOptions& padding(ops::Size2 v) { padding_ = v; return *this; }
  ConvOptions& dilation(ops::Size2 v) { dilation_ = v; return *this; }
  ConvOptions& groups(std::int64_t v) { groups_ = v; return *this; }
  ConvOptions& bias(bool v) { bias_ = v; return *this; }
  ops::Size2 stride_ = 1, padding_ = 0, dilation_ = 1;
  std::int64_t groups_ = 1;
  bool bias_ = true;
};

// weight (C_out, C_in / groups, kH, kW) and bias (C_out), PyTorch's names and shapes, so a
// state dict loads in either; both U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in =
// C_in / groups * kH * kW, as PyTorch initialises them.
class Conv2d : public Module {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, ops::Size2 kernel_size, Generator& gen,
         ConvOptions conv = {}, TensorOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  ConvOptions conv;
};

// weight (C_out, C_in / groups, k), bias (C_out); x (N, C_in, L). It reads the width of each
// of ConvOptions' sizes (one number sets both).
class Conv1d : public Module {
 public:
  Conv1d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size, Generator& gen,
         ConvOptions conv = {}, TensorOptions options = {});
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;
  ConvOptions conv;
};

// Pooling over (N, C, H, W); the stride defaults to the window, as in PyTorch.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(ops::Size2 kernel_size) : MaxPool2d(kernel_size, kernel_size) {}
  MaxPool2d(ops::Size2 kernel_size, ops::Size2 stride, ops::Size2 padding = 0)
      : kernel_size(kernel_size), stride(stride), padding(padding) {}
  Tensor forward(const Tensor& x) override;
  ops::Size2 kernel_size, stride, padding;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(ops::Size2 kernel_size) : AvgPool2d(kernel_size, kernel_size) {}
  AvgPool2d(ops::Size2 kernel_size, ops::Size2 stride, ops::Size2 padding = 0)
      : kernel_size(kernel_size), stride(stride), padding(padding) {}
  Tensor forward(const Tensor& x) override;
  ops::Size2 kernel_size, stride, padding;
};

// Dims start_dim..end_dim merged into one: (N, C, H, W) -> (N, C H W) by default.
class Flatten : public Module {
 public:
  explicit Flatten(int start_dim = 1, int end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  int start_dim, end_dim;
};

// Runs its modules in order; they are named "0", "1", ... as in torch.nn.Sequential.
class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  void push_back(std::shared_ptr<Module> module);
  Tensor forward(const Tensor& x) override;
  std::size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](std::size_t i) const { return modules_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Holds modules under the names "0", "1", ... without running them (torch.nn.ModuleList):
// the GPT's blocks live in one, so their parameters are named "h.0.attn...", "h.1...".
class ModuleList : public Module {
 public:
  void push_back(std::shared_ptr<Module> module);
  std::size_t size() const { return modules_.size(); }
  std::shared_ptr<Module> operator[](std::size_t i) const { return modules_.at(i); }
  template <class M>
  std::shared_ptr<M> at(std::size_t i) const { return std::static_pointer_cast<M>(modules_.at(i)); }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

}  // namespace brrr::nn
