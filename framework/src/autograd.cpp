// framework/src/autograd.cpp: recording the graph, backward, and the finite-difference check.
// Chapter 03 (autograd). Read before: brrr/autograd.h. Read next: nn.cpp (chapter 05).
#include "brrr/autograd.h"

#include <algorithm>
#include <map>
#include <cmath>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::autograd {

namespace {
thread_local bool grad_mode = true;
thread_local BackwardHooks hooks;
}

BackwardHooksGuard::BackwardHooksGuard(BackwardHooks h) : previous_(std::move(hooks)) { hooks = std::move(h); }
BackwardHooksGuard::~BackwardHooksGuard() { hooks = std::move(previous_); }

bool grad_mode_enabled() { return grad_mode; }

// Destroying the last handle to a graph would otherwise recurse once per node (each Node
// owns its inputs' Nodes) and overflow the stack on a long graph. Instead, a Node about to
// die hands its inputs to a work list, which is emptied in a loop.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> pending;
  for (Edge& e : inputs)
    if (e.node) pending.push_back(std::move(e.node));
  while (!pending.empty()) {
    std::shared_ptr<Node> node = std::move(pending.back());
    pending.pop_back();
    if (node.use_count() == 1)
      for (Edge& e : node->inputs)
        if (e.node) pending.push_back(std::move(e.node));
  }
}
NoGradGuard::NoGradGuard() : previous_(grad_mode) { grad_mode = false; }
NoGradGuard::~NoGradGuard() { grad_mode = previous_; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_mode) return false;
  for (const Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_mode) return false;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward) {
  if (!needs_grad(inputs)) return;
  auto node = std::make_shared<Node>();
  node->name = name;
  node->backward = std::move(backward);
  node->inputs.reserve(inputs.size());
  for (const Tensor& in : inputs) {
    Edge edge;
    if (in.defined() && in.requires_grad()) {
      if (in.grad_fn()) edge.node = in.grad_fn();
      else edge.leaf = in.impl_ptr();
      edge.shape = in.shape();
    }
    node->inputs.push_back(std::move(edge));
  }
  output.impl()->grad_fn = std::move(node);
  output.impl()->requires_grad = true;
}

void record_accumulating(const char* name, const std::vector<Tensor>& inputs, std::size_t into, Tensor& output,
                         AccumulatingBackwardFn backward) {
  BRRR_CHECK(into < inputs.size(), name, ": accumulates into input ", into, " of ", inputs.size());
  if (!needs_grad(inputs)) return;
  record(name, inputs, output, nullptr);
  Node& node = *output.grad_fn();
  node.accumulating = std::move(backward);
  node.accumulates_into = static_cast<int>(into);
}

// Sum grad over the dims that broadcasting added or stretched, so it has `shape` again.
Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int lead = grad.dim() - static_cast<int>(shape.size());
  BRRR_CHECK(lead >= 0, "sum_to: gradient of shape ", shape_str(grad.shape()), " has fewer dims than ", shape_str(shape));
  std::vector<int> dims;
  for (int d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) dims.push_back(d);
  Tensor g = dims.empty() ? grad : ops::sum(grad, dims, true);
  return g.reshape(shape);
}

namespace {

// Leaves keep the gradient tensor they are given when nobody else can see it; otherwise they
// keep a copy, so accumulating into it later never changes another tensor.
void accumulate_leaf(TensorImpl& leaf, const Tensor& g) {
  if (!leaf.grad.defined()) {
    const bool unshared = g.impl_ptr().use_count() == 1 && g.storage().use_count() == 1 && g.is_contiguous();
    leaf.grad = unshared ? g.detach() : g.contiguous().clone();
  } else {
    leaf.grad.add_(g);
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  detail::check_defined("backward", root);
  BRRR_CHECK(root.requires_grad(), "backward: tensor of shape ", shape_str(root.shape()),
             " does not require grad (no input of the computation requires grad)");
  Tensor grad = grad_in;
  if (!grad.defined()) {
    BRRR_CHECK(root.numel() == 1, "backward: grad can be implied only for a tensor with one element, got shape ",
               shape_str(root.shape()), "; pass the gradient explicitly");
    grad = ones(root.shape(), TensorOptions().dtype(root.dtype()).device(root.device()));
  }
  BRRR_CHECK(grad.shape() == root.shape(), "backward: gradient of shape ", shape_str(grad.shape()),
             " does not match the tensor's shape ", shape_str(root.shape()));
  NoGradGuard no_grad;  // backward closures are not themselves recorded

  if (!root.grad_fn()) {  // a leaf: its gradient is grad itself
    accumulate_leaf(*root.impl(), grad);
    if (hooks.grad_ready) hooks.grad_ready(root);
    return;
  }

  // Reverse topological order by an iterative depth-first search (no recursion: a deep graph
  // such as a long training step must not overflow the stack).
  std::vector<Node*> order;
  std::unordered_set<Node*> visited;
  std::vector<std::pair<Node*, std::size_t>> stack{{root.grad_fn().get(), 0}};
  visited.insert(root.grad_fn().get());
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      Node* child = node->inputs[next++].node.get();
      if (child && visited.insert(child).second) stack.push_back({child, 0});
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }

  // For hooks.grad_ready: how many edges of the graph lead to each leaf. Each node, once run
  // (or passed over), has given its leaves all it will; the leaf whose count reaches 0 is final.
  std::unordered_map<TensorImpl*, int> edges_to_leaf;
  if (hooks.grad_ready)
    for (Node* node : order)
      for (const Edge& e : node->inputs)
        if (e.leaf) ++edges_to_leaf[e.leaf.get()];
  auto leaves_done = [&](Node* node) {
    if (!hooks.grad_ready) return;
    for (const Edge& e : node->inputs)
      if (e.leaf && --edges_to_leaf[e.leaf.get()] == 0) hooks.grad_ready(Tensor(e.leaf));
  };

  std::unordered_map<Node*, Tensor> grads;
  grads[root.grad_fn().get()] = grad;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    auto found = grads.find(node);
    if (found == grads.end()) {  // no gradient flowed here
      leaves_done(node);
      continue;
    }
    const Tensor g = std::move(found->second);
    grads.erase(found);
    BRRR_CHECK(!node->freed, "backward: the graph through '", node->name,
               "' was already freed by an earlier backward(); pass retain_graph = true to the first call to backward twice");
    // An accumulating node takes the gradient its input has collected so far out of the map;
    // the total it returns for that input then lands in the empty slot (below).
    Tensor collected;
    if (node->accumulates_into >= 0)
      if (Node* into = node->inputs[node->accumulates_into].node.get(); into && grads.count(into)) {
        collected = std::move(grads[into]);
        grads.erase(into);
      }
    const auto run = [&] { return node->accumulating ? node->accumulating(g, collected) : node->backward(g); };
    TensorList input_grads;
    if (profiler::enabled()) {
      const std::string label = node->name + " backward";
      thread_local std::map<std::string, std::string> names;  // the profiler keeps the pointer
      const std::string& stored = names.emplace(label, label).first->second;
      BRRR_PROFILE(stored.c_str(), g);  // the gradient arriving: the output's shape
      input_grads = run();
    } else {
      input_grads = run();
    }
    BRRR_CHECK(input_grads.size() == node->inputs.size(), "backward: '", node->name, "' returned ", input_grads.size(),
               " gradients for ", node->inputs.size(), " inputs");
    for (std::size_t i = 0; i < input_grads.size(); ++i) {
      const Edge& edge = node->inputs[i];
      const Tensor& ig = input_grads[i];
      if (!ig.defined() || (!edge.node && !edge.leaf)) continue;
      BRRR_CHECK(ig.shape() == edge.shape, "backward: '", node->name, "' gave input ", i, " a gradient of shape ",
                 shape_str(ig.shape()), " for an input of shape ", shape_str(edge.shape));
      if (edge.leaf) {
        accumulate_leaf(*edge.leaf, ig);
      } else {
        Tensor& slot = grads[edge.node.get()];
        slot = slot.defined() ? ops::add(slot, ig) : ig;
      }
    }
    if (!retain_graph) {
      node->backward = nullptr;  // frees what the closure saved
      node->accumulating = nullptr;
      node->freed = true;
    }
    leaves_done(node);
    if (hooks.node_done) hooks.node_done();
  }
}

}  // namespace brrr::autograd

namespace brrr {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& inputs,
                          double eps, double atol, double rtol) {
  for (const Tensor& in : inputs)
    BRRR_CHECK(in.dtype() == kFloat64, "gradcheck: inputs must be float64 (finite differences need the precision), got ",
               dtype_name(in.dtype()));
  // A fixed random weighting w turns any output into the scalar sum(f(x) * w), whose gradient
  // exercises every output element.
  Tensor out = f(inputs);
  Generator gen(12345);
  Tensor w = randn(out.shape(), gen, kFloat64).to(out.device());
  for (const Tensor& in : inputs)
    if (in.requires_grad()) in.set_grad(Tensor());
  ops::sum(ops::mul(out, w)).backward();

  GradcheckResult result;
  NoGradGuard no_grad;
  auto objective = [&] { return ops::sum(ops::mul(f(inputs), w)).item<double>(); };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.requires_grad()) continue;
    BRRR_CHECK(in.is_contiguous(), "gradcheck: input ", i, " must be contiguous");
    const Tensor analytic = in.grad().defined() ? in.grad().contiguous() : zeros_like(in);
    const std::vector<double> a = analytic.to_vector<double>();
    const std::vector<double> values = in.to_vector<double>();
    // Sets element j: through the pointer on the CPU, through a one-element view's fill_ on a
    // GPU (whose memory the host cannot write).
    const Tensor flat = in.detach().view({-1});
    auto set = [&](std::int64_t j, double v) {
      if (in.device().is_cpu()) in.data_ptr<double>()[j] = v;
      else flat.narrow(0, j, 1).fill_(v);
    };
    for (std::int64_t j = 0; j < in.numel(); ++j) {
      const double saved = values[static_cast<std::size_t>(j)];
      set(j, saved + eps);
      const double plus = objective();
      set(j, saved - eps);
      const double minus = objective();
      set(j, saved);
      const double numeric = (plus - minus) / (2 * eps);
      const double err = std::fabs(numeric - a[j]);
      const double rel = err / std::max(std::fabs(numeric), 1e-12);
      result.max_abs_error = std::max(result.max_abs_error, err);
      if (err > atol) result.max_rel_error = std::max(result.max_rel_error, rel);
      if (err > atol + rtol * std::fabs(numeric) && result.ok) {
        result.ok = false;
        std::ostringstream m;
        m << "input " << i << " " << shape_str(in.shape()) << " element " << j << ": autograd " << a[j]
          << ", finite differences " << numeric;
        result.message = m.str();
      }
    }
  }
  return result;
}

}  // namespace brrr
