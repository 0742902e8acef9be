// brrr/param_copies.h: parameters read in their input's dtype. Chapter 18 (mixed precision),
// section 10: a step whose activations are bf16 in memory. Read before: brrr/nn.h.
// Read next: models/gpt/gpt.cpp (GPT::set_precision).
//
// Parameters stay float32: they are the optimizer's masters. A layer given a bf16 input reads a
// bf16 copy of each float32 parameter instead, through param_like (nn::Linear and nn::LayerNorm
// do). Inside a ParameterCopies scope each parameter is copied once per scope (a weight used
// twice, as GPT's tied wte, is one copy); outside one, a copy is made at each call. The copy is
// a cast (Tensor::to, differentiable), so its gradient reaches the float32 parameter. This is
// the one place that makes the copies: a step whose optimizer writes them (AdamW rounding each
// updated master into its copy in the same pass) changes only this file's source.
#pragma once
#include <cstddef>

#include "brrr/tensor.h"

namespace brrr::nn {

// param itself when input has its dtype (or param is undefined); its bf16 copy when input is
// bf16 and param float32.
Tensor param_like(const Tensor& param, const Tensor& input);

class ParameterCopies {
 public:
  ParameterCopies();   // a scope of its own, unless one is open on this thread (then it joins it)
  ~ParameterCopies();  // drops the copies (the graph that saved them keeps what it needs)
  ParameterCopies(const ParameterCopies&) = delete;
  ParameterCopies& operator=(const ParameterCopies&) = delete;
  // How many copies the open scope holds (0 with none open).
  static std::size_t size();

 private:
  bool outermost_;
};

}  // namespace brrr::nn
