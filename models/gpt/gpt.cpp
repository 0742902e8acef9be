// models/gpt/gpt.cpp: the GPT-2 modules and presets.
// Chapter 07 (attention and the GPT). Read before: brrr/models/gpt.h.
#include "brrr/strings.h"
#include "brrr/models/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
#include <nlohmann/json.hpp>

#include "attend.h"
#include "brrr/autograd.h"
#include "brrr/eval_mode.h"
#include "brrr/ops.h"
#include "brrr/param_copies.h"

namespace brrr::models {

// ---------------------------------------------------------------------------------------------
// config

void GPTConfig::validate() const {
  BRRR_CHECK(vocab_size > 0, "GPT config: vocab_size must be positive, got ", vocab_size);
  BRRR_CHECK(block_size > 0, "GPT config: block_size must be positive, got ", block_size);
  BRRR_CHECK(n_layer > 0, "GPT config: n_layer must be positive, got ", n_layer);
  BRRR_CHECK(n_head > 0, "GPT config: n_head must be positive, got ", n_head);
  BRRR_CHECK(n_embd > 0 && n_embd % n_head == 0, "GPT config: n_embd (", n_embd, ") must be a positive multiple of n_head (",
             n_head, ")");
  BRRR_CHECK(dropout >= 0.0 && dropout < 1.0, "GPT config: dropout must be in [0, 1), got ", dropout);
  BRRR_CHECK(layer_norm_eps > 0.0, "GPT config: layer_norm_eps must be positive, got ", layer_norm_eps);
  BRRR_CHECK(activation == "gelu_tanh" || activation == "gelu_erf",
             "GPT config: activation must be gelu_tanh or gelu_erf, got '", activation, "'");
}

std::string GPTConfig::to_json() const {
  nlohmann::json j = {{"vocab_size", vocab_size}, {"block_size", block_size}, {"n_layer", n_layer}, {"n_head", n_head},
                      {"n_embd", n_embd},         {"dropout", dropout},       {"bias", bias}};
  if (layer_norm_eps != 1e-5) j["layer_norm_eps"] = layer_norm_eps;
  if (!tie_head) j["tie_head"] = false;
  if (activation != "gelu_tanh") j["activation"] = activation;
  return j.dump();
}

GPTConfig GPTConfig::from_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    detail::fail("GPT config: invalid JSON: ", e.what());
  }
  BRRR_CHECK(j.is_object(), "GPT config: expected a JSON object, got ", j.type_name());
  GPTConfig c;
  for (const auto& [key, value] : j.items()) {
    try {
      if (key == "vocab_size") c.vocab_size = value.get<std::int64_t>();
      else if (key == "block_size") c.block_size = value.get<std::int64_t>();
      else if (key == "n_layer") c.n_layer = value.get<std::int64_t>();
      else if (key == "n_head") c.n_head = value.get<std::int64_t>();
      else if (key == "n_embd") c.n_embd = value.get<std::int64_t>();
      else if (key == "dropout") c.dropout = value.get<double>();
      else if (key == "bias") c.bias = value.get<bool>();
      // Checkpoints from before the registry chose ("fused" before the rename to "composed").
      else if (key == "composed" || key == "fused") {
        if (value.get<bool>() == (key == "composed")) ops::select_composed();
      }
      else if (key == "layer_norm_eps") c.layer_norm_eps = value.get<double>();
      else if (key == "tie_head") c.tie_head = value.get<bool>();
      else if (key == "activation") c.activation = value.get<std::string>();
      else detail::fail("GPT config: unknown key '", key, "'");
    } catch (const nlohmann::json::exception& e) {
      detail::fail("GPT config: key '", key, "' has the wrong type: ", e.what());
    }
  }
  c.validate();
  return c;
}

std::int64_t GPTConfig::num_parameters() const {
  const std::int64_t C = n_embd, b = bias ? 1 : 0;
  const std::int64_t block = 2 * (C + b * C)                 // ln_1, ln_2
                             + C * 3 * C + b * 3 * C          // c_attn
                             + C * C + b * C                  // attn.c_proj
                             + C * 4 * C + b * 4 * C          // c_fc
                             + 4 * C * C + b * C;             // mlp.c_proj
  return vocab_size * C + block_size * C + n_layer * block + C + b * C + (tie_head ? 0 : vocab_size * C);
}

GPTConfig gpt_preset(const std::string& name) {
  GPTConfig c;
  if (name == "cpu-tiny") {  // nanoGPT's config/train_shakespeare_char.py with its CPU overrides
    c.vocab_size = 65, c.block_size = 64, c.n_layer = 4, c.n_head = 4, c.n_embd = 128, c.dropout = 0.0;
  } else if (name == "shakespeare-char") {
    c.vocab_size = 65, c.block_size = 256, c.n_layer = 6, c.n_head = 6, c.n_embd = 384, c.dropout = 0.2;
  } else if (name == "gpt-12m") {
    c.vocab_size = 4096, c.block_size = 256, c.n_layer = 6, c.n_head = 6, c.n_embd = 384, c.dropout = 0.0;
  } else if (name == "gpt2") {
    c.vocab_size = 50257, c.block_size = 1024, c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.dropout = 0.0;
  } else if (name == "gpt2-124m") {  // gpt2 with the vocabulary padded to 50,304 (a multiple of 128), as llm.c trains it
    c.vocab_size = 50304, c.block_size = 1024, c.n_layer = 12, c.n_head = 12, c.n_embd = 768, c.dropout = 0.0;
  } else {
    detail::fail("unknown GPT preset '", name, "' (presets: ", join(gpt_preset_names()), ")");
  }
  return c;
}

std::vector<std::string> gpt_preset_names() { return {"cpu-tiny", "shakespeare-char", "gpt-12m", "gpt2", "gpt2-124m"}; }

// ---------------------------------------------------------------------------------------------
// modules

namespace {
// Re-initialise a parameter in place from N(0, std) (or zero when std == 0).
void init_normal(Tensor& p, double std, Generator& gen) {
  NoGradGuard no_grad;
  if (std == 0.0) p.zero_();
  else p.normal_(0.0, std, gen);
}
}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c, Generator& gen) : n_head_(c.n_head) {
  c_attn = register_module("c_attn", std::make_shared<nn::Linear>(c.n_embd, 3 * c.n_embd, gen, c.bias));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(c.n_embd, c.n_embd, gen, c.bias));
  attn_dropout = register_module("attn_dropout", std::make_shared<nn::Dropout>(c.dropout, gen.next_u64()));
  resid_dropout = register_module("resid_dropout", std::make_shared<nn::Dropout>(c.dropout, gen.next_u64()));
}

// attend.h: n new queries over all keys and values so far (the KV cache and attention maps).
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t t0, Tensor* weights) {
  const std::int64_t n = q.size(2), t = k.size(2), hs = q.size(3);
  Tensor scores = ops::mul(ops::matmul(q, k.transpose(-2, -1)), 1.0 / std::sqrt(static_cast<double>(hs)));
  if (t0 + n > 1 && n > 1) {  // one new query sees every key: no mask needed (the common case)
    std::vector<double> m(static_cast<std::size_t>(n * t));
    for (std::int64_t i = 0; i < n; ++i)
      for (std::int64_t j = 0; j < t; ++j) m[i * t + j] = j > t0 + i ? 1.0 : 0.0;
    const Tensor mask = from_vector(m, {n, t}, TensorOptions().dtype(q.dtype()).device(q.device()));
    scores = ops::masked_fill(scores, mask, -INFINITY);
  }
  const Tensor att = ops::softmax(scores, -1);
  if (weights) *weights = att;
  return ops::matmul(att, v);
}

Tensor CausalSelfAttention::forward(const Tensor& x) { return forward(x, nullptr); }

Tensor CausalSelfAttention::forward(const Tensor& x, const AttentionExtras* extras) {
  const std::int64_t B = x.size(0), T = x.size(1), C = x.size(2);
  const Tensor qkv = c_attn->forward(x);  // (B, T, 3C)
  Tensor y;
  if (extras) {  // inference: the caller's attention (the KV cache's, kv_cache.cpp; or the weights too)
    // q, k, v with the heads next to the batch: (B, T, C) -> (B, H, T, hs).
    auto heads = [&](int i) { return ops::qkv_head(qkv, n_head_, i).contiguous(); };
    y = extras->attend(heads(0), heads(1), heads(2));
  } else {
    const double p = attn_dropout->is_training() ? attn_dropout->p : 0.0;
    // How attention is computed on this device is the registry's choice (ops::causal_attention);
    // given qkv whole, its flash variant also writes qkv's gradient whole.
    y = ops::causal_attention_qkv(qkv, n_head_, p, &attn_dropout->gen);
  }
  // Heads side by side again: (B, H, T, hs) -> (B, T, C).
  return resid_dropout->forward(c_proj->forward(y.transpose(1, 2).reshape({B, T, C})));
}

FeedForward::FeedForward(const GPTConfig& c, Generator& gen) : gelu_erf_(c.activation == "gelu_erf") {
  c_fc = register_module("c_fc", std::make_shared<nn::Linear>(c.n_embd, 4 * c.n_embd, gen, c.bias));
  c_proj = register_module("c_proj", std::make_shared<nn::Linear>(4 * c.n_embd, c.n_embd, gen, c.bias));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(c.dropout, gen.next_u64()));
}

Tensor FeedForward::forward(const Tensor& x) {
  // gelu(x W^T + b): how (the bias in the GEMM, fused with GELU, or composed) is the registry's
  // choice. The exact GELU of some pretrained models has its own kernels, after the linear.
  const Tensor h = gelu_erf_ ? ops::gelu_erf(c_fc->forward(x))
                             : ops::linear_gelu(x, nn::param_like(c_fc->weight, x), nn::param_like(c_fc->bias, x));
  return dropout->forward(c_proj->forward(h));
}

Block::Block(const GPTConfig& c, Generator& gen) {
  ln_1 = register_module("ln_1", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_eps, c.bias));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(c, gen));
  ln_2 = register_module("ln_2", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_eps, c.bias));
  mlp = register_module("mlp", std::make_shared<FeedForward>(c, gen));
}

Tensor Block::forward(const Tensor& x) { return forward(x, nullptr); }

Tensor Block::forward(const Tensor& x, const AttentionExtras* extras) {
  // x is the residual stream, in its own dtype; attention and MLP run in `activations` (the
  // casts are no-ops when the two agree, as in float32).
  const Tensor attended = attn->forward(ln_1->forward(x).to(activations), extras).to(x.dtype());
  // The residual add and ln_2: {a, ln_2(a)}, in one kernel unless the registry picks otherwise.
  const auto [a, normed] = ops::residual_layer_norm(x, attended, nn::param_like(ln_2->weight, x),
                                                    nn::param_like(ln_2->bias, x), ln_2->eps);
  return a + mlp->forward(normed.to(activations)).to(x.dtype());
}

GPT::GPT(const GPTConfig& c, Generator& gen) : config_(c) {
  c.validate();
  // A plain Module as a namespace, so the names read transformer.wte, transformer.h.0, ...
  auto transformer = register_module("transformer", std::make_shared<nn::Module>());
  wte = transformer->register_module("wte", std::make_shared<nn::Embedding>(c.vocab_size, c.n_embd, gen));
  wpe = transformer->register_module("wpe", std::make_shared<nn::Embedding>(c.block_size, c.n_embd, gen));
  drop_ = transformer->register_module("drop", std::make_shared<nn::Dropout>(c.dropout, gen.next_u64()));
  h = transformer->register_module("h", std::make_shared<nn::ModuleList>());
  for (std::int64_t l = 0; l < c.n_layer; ++l) h->push_back(std::make_shared<Block>(c, gen));
  ln_f = transformer->register_module("ln_f", std::make_shared<nn::LayerNorm>(c.n_embd, c.layer_norm_eps, c.bias));
  if (!c.tie_head) lm_head = register_module("lm_head", std::make_shared<nn::Linear>(c.n_embd, c.vocab_size, gen, false));

  // GPT-2 initialisation, in parameter order so the same seed gives the same model.
  const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
  for (auto& [name, p] : named_parameters()) {
    const bool is_weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    if (name.find(".ln_") != std::string::npos || name.find("ln_f") != std::string::npos) continue;  // 1 and 0 already
    if (is_weight && p.dim() == 2)
      init_normal(p, name.find("c_proj.weight") != std::string::npos ? proj_std : 0.02, gen);
    else
      init_normal(p, 0.0, gen);  // biases
  }
}

Tensor GPT::positions(std::int64_t T, Device device) {
  if (!positions_.defined() || positions_.device() != device)
    positions_ = arange(config_.block_size, TensorOptions().dtype(kInt64).device(device));
  return positions_.narrow(0, 0, T);
}

Tensor GPT::hidden(const Tensor& input) {
  const Tensor idx = input.to(wte->weight.device());  // token ids may come from the host
  BRRR_CHECK(idx.dim() == 2, "GPT: idx must be (B, T), got ", shape_str(idx.shape()));
  const std::int64_t T = idx.size(1);
  BRRR_CHECK(T >= 1 && T <= config_.block_size, "GPT: sequence length ", T, " is outside 1..block_size (",
             config_.block_size, ")");
  const Tensor pos = positions(T, idx.device());
  const nn::ParameterCopies copies;  // one bf16 copy of each parameter per forward (set_precision)
  // (B, T, C) + (T, C) in float32, then the residual stream's dtype.
  Tensor x = drop_->forward(wte->forward(idx) + wpe->forward(pos)).to(residual_);
  for (std::size_t l = 0; l < h->size(); ++l) x = h->at<Block>(l)->forward(x);
  return ln_f->forward(x);
}

void GPT::set_precision(DType activations, DType residual) {
  for (DType d : {activations, residual})
    BRRR_CHECK(d == kFloat32 || d == kBFloat16, "GPT::set_precision: activations and residual stream must be float32 ",
               "or bfloat16, got ", dtype_name(d));
  BRRR_CHECK(activations == kBFloat16 || residual == kFloat32,
             "GPT::set_precision: a bfloat16 residual stream needs bfloat16 activations");
  activations_ = activations;
  residual_ = residual;
  for (std::size_t l = 0; l < h->size(); ++l) h->at<Block>(l)->activations = activations;
}


Tensor GPT::attention_weights(const Tensor& input, std::int64_t layer, std::int64_t head) {
  NoGradGuard no_grad;
  const Tensor idx = input.to(wte->weight.device());
  BRRR_CHECK(idx.dim() == 2 && idx.size(0) == 1, "attention_weights: idx must be (1, T), got ", shape_str(idx.shape()));
  BRRR_CHECK(layer >= 0 && layer < config_.n_layer && head >= 0 && head < config_.n_head, "attention_weights: layer ",
             layer, " head ", head, " out of range (", config_.n_layer, " layers, ", config_.n_head, " heads)");
  const std::int64_t T = idx.size(1);
  const nn::EvalModeGuard eval_mode(*this);
  const Tensor pos = positions(T, idx.device());
  Tensor x = wte->forward(idx) + wpe->forward(pos);
  Tensor weights;
  for (std::int64_t l = 0; l < layer; ++l) x = h->at<Block>(static_cast<std::size_t>(l))->forward(x);
  const AttentionExtras extras{[&](const Tensor& q, const Tensor& k, const Tensor& v) { return attend(q, k, v, 0, &weights); }};
  h->at<Block>(static_cast<std::size_t>(layer))->forward(x, &extras);
  return weights.select(0, 0).select(0, head);  // (T, T)
}

Tensor GPT::forward(const Tensor& idx) {
  const nn::ParameterCopies copies;  // hidden's, and the head's (wte's copy when tied)
  const Tensor x = hidden(idx).to(activations_);
  return ops::linear(x, nn::param_like(head_weight(), x));  // (B, T, C) @ (V, C)^T: wte's weight when tied
}

Tensor GPT::loss(const Tensor& logits, const Tensor& targets) const {
  BRRR_CHECK(logits.dim() == 3 && targets.dim() == 2 && targets.size(0) == logits.size(0) &&
                 targets.size(1) == logits.size(1),
             "GPT::loss: targets ", shape_str(targets.shape()), " do not match logits ", shape_str(logits.shape()));
  const Tensor flat = logits.reshape({-1, logits.size(2)});
  const Tensor t = targets.reshape({-1}).to(logits.device());
  // The registry's default, the fused kernel, also writes the logits' gradient (kept for
  // backward; no probabilities).
  return ops::cross_entropy(flat, t, ops::kNoIgnoreIndex);
}

}  // namespace brrr::models
