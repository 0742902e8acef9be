// brrr/autograd.h: reverse-mode automatic differentiation, define-by-run.
// Chapter 03 (autograd). Read before: ops.h. Read next: nn.h.
//
// Every differentiable op that sees an input requiring grad records a Node: the op's name,
// a closure that maps the output's gradient to its inputs' gradients, and an Edge to each
// input (the Node that made it, or the leaf tensor itself). Tensor::backward() orders the
// graph in reverse topological order and runs the closures, adding gradients into the
// leaves' .grad. Then the closures are dropped (the graph is freed) unless retain_graph.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brrr/tensor.h"

namespace brrr::autograd {

using TensorList = std::vector<Tensor>;
// Gradient of the output -> one gradient per input (an undefined Tensor for "none").
using BackwardFn = std::function<TensorList(const Tensor& grad_output)>;

struct Node;

// Where an input's gradient goes: into the Node that produced it, or into a leaf's .grad.
struct Edge {
  std::shared_ptr<Node> node;         // set when the input is an op's output
  std::shared_ptr<TensorImpl> leaf;   // set when the input is a leaf that requires grad
  Shape shape;                        // the input's shape, to check the gradient against
};

// A backward that adds its gradient for one input to the gradient that input has collected
// from its other users so far, in the same pass over memory (chapter 18: LayerNorm's backward on
// the residual stream, whose sum also gets a gradient straight from the next block's add). It
// is given that gradient (undefined when none has arrived, or when the input is a leaf) and
// returns, for that input, the total.
using AccumulatingBackwardFn = std::function<TensorList(const Tensor& grad_output, const Tensor& collected)>;

struct Node {
  std::string name;                   // the op, for errors and for printing the graph
  BackwardFn backward;                // empty once the graph has been freed
  AccumulatingBackwardFn accumulating;  // instead of backward, for record_accumulating's nodes
  int accumulates_into = -1;            // which input's collected gradient it takes (or -1)
  std::vector<Edge> inputs;
  bool freed = false;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();  // releases a long chain of nodes iteratively, not by recursion
};

// Grad mode: on by default; NoGradGuard turns recording off for its scope (per thread).
bool grad_mode_enabled();
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool previous_;
};

// True when grad mode is on and some input requires grad: the op must record a Node.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
bool needs_grad(const std::vector<Tensor>& inputs);

// Attach a Node for `output` = op(inputs). Inputs that need no grad get an empty Edge.
void record(const char* name, const std::vector<Tensor>& inputs, Tensor& output, BackwardFn backward);

// The same, for a backward that adds into the gradient already collected for inputs[into]
// (AccumulatingBackwardFn above). backward() hands it that gradient and takes back the total.
void record_accumulating(const char* name, const std::vector<Tensor>& inputs, std::size_t into, Tensor& output,
                         AccumulatingBackwardFn backward);

// What an op's closure should capture of a tensor: same data, no grad_fn (no cycles).
inline Tensor saved(const Tensor& t) { return t.defined() ? t.detach() : t; }

void backward(const Tensor& root, const Tensor& grad, bool retain_graph);

// Hooks into backward(), for work that should start while the backward goes on: data
// parallelism (chapter 19) sends each bucket of gradients to the other ranks as soon as the
// bucket is complete. grad_ready(leaf) is called once per backward for each leaf that requires
// grad, when its .grad is final for this backward: after the last of the edges that lead to it
// has added its part (a leaf used twice, like GPT's tied token embedding, gets two). node_done()
// is called after each node's backward, a place to poll for progress. Set for a scope, per
// thread, by BackwardHooksGuard; either may be empty.
struct BackwardHooks {
  std::function<void(const Tensor& leaf)> grad_ready;
  std::function<void()> node_done;
};
class BackwardHooksGuard {
 public:
  explicit BackwardHooksGuard(BackwardHooks hooks);
  ~BackwardHooksGuard();
  BackwardHooksGuard(const BackwardHooksGuard&) = delete;
  BackwardHooksGuard& operator=(const BackwardHooksGuard&) = delete;
 private:
  BackwardHooks previous_;
};

// Sum a gradient over the dims that broadcasting expanded, back to `shape`.
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace brrr::autograd

namespace brrr {
using autograd::NoGradGuard;

// Finite-difference check of an op's gradient, in float64: for f(inputs) -> tensor, compares
// autograd's gradient of sum(f * w) (w random, fixed) with central differences
// (f(x+eps) - f(x-eps)) / (2 eps) for every element of every input that requires grad.
struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;
  std::string message;  // where the worst mismatch was, when not ok
};
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-4);
}  // namespace brrr
