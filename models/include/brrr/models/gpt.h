// brrr/models/gpt.h: GPT-2, the architecture nanoGPT and llm.c train.
// Chapter 07 (attention and the GPT). Read before: docs/chapters/06-tokenization.md,
// brrr/nn.h. Read next: brrr/safetensors.h (checkpoints), chapter 08 (training).
//
//   idx (B, T) -> wte[idx] + wpe[0..T)                      (B, T, C)
//   n_layer x Block:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))
//   logits = ln_f(x) @ wte^T                                (B, T, V)   lm_head tied to wte
//
// Parameter names are nanoGPT's (transformer.h.0.attn.c_attn.weight ...), so checkpoints
// load in PyTorch; the tied lm_head is not stored twice.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "brrr/generator.h"
#include "brrr/nn.h"

namespace brrr::models {

struct GPTConfig {
  std::int64_t vocab_size = 65;
  std::int64_t block_size = 64;  // the longest context
  std::int64_t n_layer = 4;
  std::int64_t n_head = 4;
  std::int64_t n_embd = 128;
  double dropout = 0.0;
  bool bias = true;   // biases in Linear and LayerNorm (GPT-2: yes)
  // Which implementation of LayerNorm, GELU, attention and the loss runs (their kernels, or
  // the teaching versions built from primitives) is not the model's: the registry picks
  // (ops::select_composed(), BRRR_KERNELS='*=composed').
  // Hugging Face models may differ from GPT-2 here (chapter 08, "Pretrained models"). to_json
  // writes these three only when they differ from the defaults, so older checkpoints read the same.
  double layer_norm_eps = 1e-5;  // every LayerNorm's epsilon
  bool tie_head = true;          // lm_head shares wte's weight; false: a lm_head.weight (V, C) of its own
  // The MLP's GELU: "gelu_tanh", GPT-2's tanh form (Hugging Face's "gelu_new"), or "gelu_erf",
  // the exact x Phi(x) (Hugging Face's "gelu"; ops::gelu_erf).
  std::string activation = "gelu_tanh";

  void validate() const;        // throws brrr::Error naming the bad field
  std::string to_json() const;  // {"vocab_size": 65, ...}
  // Unknown keys are errors. A config of a checkpoint from before the registry chose says
  // "composed": true selects the composed variants (ops::select_composed()), as it did then.
  static GPTConfig from_json(const std::string& json);
  std::int64_t num_parameters() const;
};

// Named presets: "cpu-tiny" (nanoGPT's CPU config: 4 layers, 4 heads, 128 wide, context 64,
// vocab 65), "shakespeare-char" (6/6/384, context 256, vocab 65, dropout 0.2),
// "gpt-12m" (6/6/384, context 256, BPE vocab 4096: 12.3M parameters), "gpt2" (124M),
// "gpt2-124m" (gpt2 with the vocabulary padded to 50,304, as llm.c trains it; the GPU bars').
GPTConfig gpt_preset(const std::string& name);
std::vector<std::string> gpt_preset_names();

struct KVCache;

// Inference only (the plain forward, training, passes none): attention computed by the caller
// from this pass's q, k, v (B, H, n, hs), instead of the causal op. The KV cache's attends over
// the cached keys and values too (kv_cache.cpp); the attention maps' keeps the softmax weights.
struct AttentionExtras {
  std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v)> attend;
};

class CausalSelfAttention : public nn::Module {
 public:
  CausalSelfAttention(const GPTConfig& config, Generator& gen);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C)
  Tensor forward(const Tensor& x, const AttentionExtras* extras);
  std::shared_ptr<nn::Linear> c_attn, c_proj;
  // Every random stream of the model lives in an nn::Dropout (so checkpoints can save them).
  std::shared_ptr<nn::Dropout> attn_dropout, resid_dropout;

 private:
  std::int64_t n_head_;
};

// nanoGPT's MLP: Linear (C -> 4C), GELU, Linear (4C -> C). Named FeedForward here because
// chapter 05's classifier is models::MLP; its parameters are still named mlp.c_fc, mlp.c_proj.
class FeedForward : public nn::Module {
 public:
  FeedForward(const GPTConfig& config, Generator& gen);
  Tensor forward(const Tensor& x) override;  // (B, T, C) -> (B, T, C), 4C hidden
  std::shared_ptr<nn::Linear> c_fc, c_proj;
  std::shared_ptr<nn::Dropout> dropout;

 private:
  bool gelu_erf_;  // config.activation == "gelu_erf"
};

class Block : public nn::Module {
 public:
  Block(const GPTConfig& config, Generator& gen);
  Tensor forward(const Tensor& x) override;
  // The same block, its attention computed by extras->attend (the KV cache and attention maps
  // use this, so the block is written once).
  Tensor forward(const Tensor& x, const AttentionExtras* extras);
  std::shared_ptr<nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<FeedForward> mlp;
  // The dtype of the attention's and the MLP's activations (GPT::set_precision); the residual
  // stream keeps the dtype of the block's input.
  DType activations = kFloat32;
};

// One layer's keys (or values) in int8 (chapter 18): each row of hs numbers (one head at one
// position) is stored as round(x / scale) with scale = max |x| / 127, so q * scale is x to
// within scale / 2. hs bytes and one float a row instead of 4 * hs bytes: 3.6x smaller at
// hs = 32. Rows are appended position by position; kept on the host.
struct QuantizedKV {
  std::int64_t B = 0, H = 0, t = 0, hs = 0;
  std::vector<std::int8_t> q;  // (t, B, H, hs): a new position is appended at the end
  std::vector<float> scale;    // (t, B, H)
  void append(const Tensor& x);             // x (B, H, n, hs) float32, on any device
  Tensor dequantize(Device device) const;   // (B, H, t, hs) float32
  std::int64_t bytes() const { return static_cast<std::int64_t>(q.size() + 4 * scale.size()); }
};

// The keys and values of every layer for the positions processed so far, so generating a
// token costs one position's work instead of the whole context's (chapter 08). With int8
// set (brrr sample --kv_cache int8, chapter 18) they are kept quantized instead.
struct KVCache {
  std::vector<Tensor> keys, values;  // per layer, (B, H, t, hs)
  bool int8 = false;
  std::vector<QuantizedKV> qkeys, qvalues;  // per layer, when int8
  std::int64_t length() const {
    if (int8) return qkeys.empty() ? 0 : qkeys[0].t;
    return keys.empty() || !keys[0].defined() ? 0 : keys[0].size(2);
  }
  void clear() { keys.clear(), values.clear(), qkeys.clear(), qvalues.clear(); }
  std::int64_t bytes() const;  // the memory the cached keys and values hold
};

class GPT : public nn::Module {
 public:
  // GPT-2 initialisation from gen: weights N(0, 0.02), residual projections (c_proj)
  // N(0, 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weight 1 and bias 0.
  GPT(const GPTConfig& config, Generator& gen);

  const GPTConfig& config() const { return config_; }
  Tensor forward(const Tensor& idx) override;  // idx (B, T) int -> logits (B, T, V)
  // Mean cross-entropy of the logits against targets (B, T).
  Tensor loss(const Tensor& logits, const Tensor& targets) const;
  // The final hidden state before lm_head, (B, T, C): for attention maps and sampling.
  Tensor hidden(const Tensor& idx);
  // Logits (B, n, V) for n new tokens at positions cache.length() onwards, appending their
  // keys and values to the cache. Inference only (no autograd, no dropout).
  Tensor forward_cached(const Tensor& idx, KVCache& cache);
  // One head's attention weights (T, T) for a sequence idx (1, T): for attention maps.
  Tensor attention_weights(const Tensor& idx, std::int64_t layer, std::int64_t head);

  std::shared_ptr<nn::Embedding> wte, wpe;
  std::shared_ptr<nn::ModuleList> h;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> lm_head;  // only when !config.tie_head (named lm_head.weight)
  // The output projection's weight (V, C): wte's when tied, else lm_head's.
  const Tensor& head_weight() const { return lm_head ? lm_head->weight : wte->weight; }

  // Mixed precision with bf16 in memory (chapter 18, section 10; brrr train --dtype bf16): the
  // activations of the attention and the MLP, the logits, their gradients and what backward
  // saves are `activations` (kBFloat16, or kFloat32 as by default), the residual stream is
  // `residual` (either). Parameters stay float32, the optimizer's masters; each forward reads a
  // bf16 copy of each (nn::param_like). The embeddings' sum is float32 and then cast.
  void set_precision(DType activations, DType residual);
  DType activation_dtype() const { return activations_; }
  DType residual_dtype() const { return residual_; }

 private:
  // Positions 0 .. T-1 on idx's device: the first T of 0 .. block_size-1, made there once (not
  // a host-to-device copy every forward, which a CUDA graph could not capture).
  Tensor positions(std::int64_t T, Device device);

  GPTConfig config_;
  DType activations_ = kFloat32, residual_ = kFloat32;
  std::shared_ptr<nn::Dropout> drop_;
  Tensor positions_;
};

}  // namespace brrr::models
