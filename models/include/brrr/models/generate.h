// brrr/models/generate.h: sampling text from a GPT, token by token.
// Chapter 08 (training: sampling). Read before: brrr/models/gpt.h (KVCache).
//
// Temperature 0 is greedy decoding: each step takes the most likely token (the lowest id on a
// tie, as torch.argmax and transformers' generate(do_sample=False)). Otherwise
// each step turns the last position's logits into probabilities (softmax(logits / temperature)),
// keeps the top_k most likely tokens and then the smallest set whose probability reaches top_p,
// and draws one from a seeded Generator. With the KV cache each new token costs one position
// of work; without it the whole context is recomputed every step (nanoGPT's way).
//
// One loop does it for every way of running the model: it asks a Stepper (below) for the
// logits after the prompt, then after each token drawn, and keeps one rule for the context
// window. Positions cannot pass block_size (there is no wpe row for them), so when the model
// holds block_size tokens, the loop clears it and feeds it again the last block_size / 2
// tokens of the context; a prompt longer than block_size starts that way too. Every Stepper
// sees the same contexts, so they draw the same tokens.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "brrr/models/gpt.h"

namespace brrr::models {

struct GenerateOptions {
  std::int64_t max_new_tokens = 256;
  double temperature = 0.8;  // 0: greedy
  std::int64_t top_k = 0;  // 0: no limit
  double top_p = 1.0;      // 1: no nucleus cut
  std::uint64_t seed = 1337;
  bool kv_cache = true;
  bool kv_cache_int8 = false;  // keys and values kept in int8, a scale per head and position (chapter 18)
  // With the float32 KV cache, generation runs on a Decoder (brrr/models/decode.h; on the CUDA
  // device the DeviceDecoder, decode_device.h) whose weights are this dtype: float32, or
  // bfloat16 (half the bytes per token). kBFloat16 with the int8 cache or without the cache is
  // an error.
  DType weights = kFloat32;
  // true: chapter 08's teaching path, GPT::forward_cached on a KVCache of tensors (kv_cache.cpp),
  // where a Decoder would run. It is the path anyway for the int8 cache.
  bool tensor_cache = false;
};

// What the generate loop asks of a model: feed it tokens, get the logits (V) after the last.
// generate.cpp has four: the Decoder (decode.h), the DeviceDecoder (decode_device.h),
// GPT::forward_cached on a KVCache of tensors,
// and GPT::forward over the whole context (no cache). The logits stay valid until the next call.
class Stepper {
 public:
  virtual ~Stepper() = default;
  // Forgets every token fed: the next prefill starts at position 0.
  virtual void clear() = 0;
  // Feeds tokens[0..n) after those held (n >= 1): the logits after the last.
  virtual const float* prefill(const std::uint32_t* tokens, std::int64_t n) = 0;
  // Feeds one token: prefill of one.
  const float* step(std::uint32_t token) { return prefill(&token, 1); }
  // Feeds tokens as prefill does and returns the next token, drawn from the logits after the
  // last by sample_token's rule (below; greedy at temperature 0), gen giving the draw. By default
  // sample_token over prefill's logits; a Stepper whose logits are in a GPU's memory draws
  // there and copies back one number instead of V. vocab_size: the logits' length.
  virtual std::uint32_t prefill_next(const std::uint32_t* tokens, std::int64_t n, std::int64_t vocab_size,
                                     const GenerateOptions& options, Generator& gen);
  // Tokens held since the last clear.
  virtual std::int64_t length() const = 0;
};

// The loop: continues `prompt` on `stepper`, a model of config `config`, by `options`' sampling
// rules (its cache and weights fields are the caller's business: they chose the stepper).
std::vector<std::uint32_t> generate(Stepper& stepper, const GPTConfig& config, const std::vector<std::uint32_t>& prompt,
                                    const GenerateOptions& options,
                                    const std::function<void(std::uint32_t)>& on_token = {});

// Continues `prompt` (token ids, at least one); on_token is called with each new token as it
// is drawn (for streaming). Returns the new tokens. Runs a Decoder where it can (a float32
// model with the float32 cache and tensor_cache false: the Decoder on the CPU, the
// DeviceDecoder on the CUDA device), else the tensor cache, or, without kv_cache, the whole
// forward every step.
std::vector<std::uint32_t> generate(GPT& model, const std::vector<std::uint32_t>& prompt, const GenerateOptions& options,
                                    const std::function<void(std::uint32_t)>& on_token = {});

// The same on a Decoder (made once, e.g. with bfloat16 weights, for many generations).
class Decoder;
std::vector<std::uint32_t> generate(Decoder& decoder, const std::vector<std::uint32_t>& prompt,
                                    const GenerateOptions& options, const std::function<void(std::uint32_t)>& on_token = {});

// The token drawn from logits (V) by the rules above (exposed for tests).
std::uint32_t sample_token(const std::vector<float>& logits, const GenerateOptions& options, Generator& gen);

}  // namespace brrr::models
