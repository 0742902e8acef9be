// serve/model_runner.cpp: the batch-invariant forward pass over many sequences (chapter 20).
// Read before: serve/model_runner.h, brrr/models/decode.h. Read next: serve/scheduler.cpp.
//
// A step is one Decoder::forward (models/gpt/decode.cpp) over every input's new tokens: the
// same GPT-2 block as models/gpt/gpt.cpp, written over raw float rows,
//
//   x = wte[token] + wpe[pos]                          (R, C)   R: the step's new tokens
//   per layer:  qkv = ln_1(x) @ c_attn^T + b            (R, 3C)
//               append k, v to each row's sequence cache, attend over its positions 0..pos
//               x += att @ c_proj^T + b;  x += gelu(ln_2(x) @ c_fc^T + b) @ c_proj^T + b
//   logits = ln_f(x) @ head^T                          (W, V)   only for the rows asked for
//
// Every number of a row is computed from that row's inputs alone, in an order fixed by the
// code: so a request's logits are the same bits alone or beside any others, at any thread count
// (tests/serve/test_serve.cpp checks both). What this file adds is the bookkeeping: which rows
// belong to which input, and which rows' logits each input wants.
#include "serve/model_runner.h"

#include <algorithm>

#include "brrr/autograd.h"
#include "brrr/error.h"

namespace brrr::serve {

using i64 = std::int64_t;

ModelRunner::ModelRunner(std::shared_ptr<models::GPT> model, DType weights, Device device, std::int64_t slots)
    : model_(std::move(model)), config_(model_->config()), weights_(weights) {
  if (device.is_cpu()) {
    decoder_ = std::make_unique<models::Decoder>(*model_, weights);
  } else {
    model_->to(device);
    device_ = std::make_unique<models::DeviceDecoder>(*model_, slots, weights);
    // Room for a whole prompt beside every other slot's decoding row, so that the usual steps
    // do not grow the buffers (which drops the decoding steps' CUDA graphs).
    device_->reserve_rows(config_.block_size + slots);
  }
}

SequenceCache ModelRunner::new_cache() {
  SequenceCache cache;
  if (device_) cache.device = device_->acquire();
  else decoder_->reserve(cache.cpu, config_.block_size);
  return cache;
}

std::int64_t ModelRunner::cache_bytes_per_sequence() const {
  return 2 * config_.n_layer * config_.block_size * config_.n_embd * static_cast<i64>(sizeof(float));
}

std::vector<std::vector<std::vector<float>>> ModelRunner::step(std::vector<StepInput>& inputs, float* attention) {
  const i64 V = config_.vocab_size;
  states_.clear(), device_states_.clear(), counts_.clear(), wanted_.clear(), tokens_.clear();
  for (const StepInput& in : inputs) {
    // Decoder::forward checks the rest (block_size, the vocabulary, distinct sequences) before
    // it touches any cache.
    BRRR_CHECK(in.cache && !in.tokens.empty(), "ModelRunner::step: an input without a cache or tokens");
    // The logits wanted: the input's last row, or all of its rows.
    const i64 first = static_cast<i64>(tokens_.size()), n = static_cast<i64>(in.tokens.size());
    for (i64 i = in.all_logits ? 0 : n - 1; i < n; ++i) wanted_.push_back(first + i);
    states_.push_back(&in.cache->cpu), device_states_.push_back(&in.cache->device), counts_.push_back(n);
    tokens_.insert(tokens_.end(), in.tokens.begin(), in.tokens.end());
  }
  const i64 n = static_cast<i64>(counts_.size()), W = static_cast<i64>(wanted_.size());
  const auto draws = std::count_if(inputs.begin(), inputs.end(), [](const StepInput& in) { return in.draw; });
  BRRR_CHECK(draws == 0 || (draws == n && device_ && W == n), "ModelRunner::step: a step draws on the CUDA device "
             "for every input (each wanting its last row's logits) or for none");
  std::vector<std::vector<std::vector<float>>> result(inputs.size());
  const float* logits = nullptr;
  if (device_) {
    BRRR_CHECK(!attention, "ModelRunner::step: the attention map is the CPU Decoder's (attention_of_last)");
    device_->enqueue(device_states_.data(), counts_.data(), n, tokens_.data(), wanted_.data(), W);
    if (draws > 0) {
      draw_on_device(inputs);
      return result;
    }
    logits = device_->logits();
  } else {
    logits = decoder_->forward(states_.data(), counts_.data(), n, tokens_.data(), wanted_.data(), W, attention);
  }
  for (std::size_t at = 0, w = 0; at < inputs.size(); ++at) {
    const std::size_t count = inputs[at].all_logits ? inputs[at].tokens.size() : 1;
    for (std::size_t i = 0; i < count; ++i, ++w) result[at].emplace_back(logits + w * V, logits + (w + 1) * V);
  }
  return result;
}

// Each input's token from the pass's logits on the device: greedy rows by max_dim when every
// row is greedy; else sample_rows for all, a greedy row as the rule top_k = 1 (the most likely
// token, the lowest id on a tie: the same token).
void ModelRunner::draw_on_device(std::vector<StepInput>& inputs) {
  const bool all_greedy = std::all_of(inputs.begin(), inputs.end(), [](const StepInput& in) { return in.rule[0] == 0.0; });
  const std::uint32_t* drawn = nullptr;
  if (all_greedy) {
    drawn = device_->greedy();
  } else {
    rules_.clear();
    for (const StepInput& in : inputs) {
      const bool greedy = in.rule[0] == 0.0;
      rules_.insert(rules_.end(), {greedy ? 1.0 : in.rule[0], greedy ? 1.0 : in.rule[1], greedy ? 1.0 : in.rule[2],
                                   greedy ? 0.0 : in.rule[3]});
    }
    drawn = device_->sample(rules_.data());
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i].drawn = drawn[i];
}

void ModelRunner::limit_draws(std::int64_t vocabulary) {
  if (device_) device_->limit_draws(vocabulary);
}

std::vector<float> ModelRunner::attention_of_last(const std::vector<std::uint32_t>& tokens) {
  BRRR_CHECK(!tokens.empty(), "attention: no tokens");
  const i64 n = static_cast<i64>(tokens.size());
  std::vector<float> weights(static_cast<std::size_t>(config_.n_layer * config_.n_head * n));
  if (!decoder_) {  // on the CUDA device: the CPU Decoder over a copy of the model, made once
    Generator gen(0);
    cpu_copy_ = std::make_shared<models::GPT>(config_, gen);
    const auto from = model_->named_parameters(), to = cpu_copy_->named_parameters();
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < from.size(); ++i) Tensor(to[i].second).copy_(from[i].second);
    decoder_ = std::make_unique<models::Decoder>(*cpu_copy_, weights_);
  }
  models::DecodeState state;
  models::DecodeState* states[] = {&state};
  const i64 last = n - 1;
  decoder_->forward(states, &n, 1, tokens.data(), &last, 1, weights.data());
  return weights;
}

}  // namespace brrr::serve
