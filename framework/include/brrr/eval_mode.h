// brrr/eval_mode.h: eval mode for a scope, as NoGradGuard (autograd.h) is no-grad mode for one.
// Chapter 05 (modules: train and eval). Read before: brrr/nn.h.
//
// A module (and every submodule) is put in eval mode, so dropout is the identity, and given back
// the mode it had on the way out, an exception included. What inference runs under: generation
// (models/gpt/generate.cpp, GPT::forward_cached), evaluation (train/evaluate.cpp) and the
// attention maps (GPT::attention_weights).
#pragma once
#include "brrr/nn.h"

namespace brrr::nn {

class EvalModeGuard {
 public:
  explicit EvalModeGuard(Module& module) : module_(module), was_training_(module.is_training()) { module.eval(); }
  ~EvalModeGuard() { module_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  Module& module_;
  bool was_training_;
};

}  // namespace brrr::nn
