// brrr/models/generate.h: sampling text from a GPT, token by token.
// Chapter 08 (training: sampling). Read before: brrr/models/gpt.h (KVCache).
//
// Temperature 0 is greedy decoding: each step takes the most likely token (the lowest id on a
// tie, as torch.argmax and transformers' generate(do_sample=False)). Otherwise
// each step turns the last position's logits into probabilities (softmax(logits / temperature)),
// keeps the top_k most likely tokens and then the smallest set whose probability reaches top_p,
// and draws one from a seeded Generator. With the KV cache each new token costs one position
// of work; without it the whole context is recomputed every step (nanoGPT's way).
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
  // With the float32 KV cache on the CPU, generation runs on a Decoder (brrr/models/decode.h)
  // whose weights are this dtype: float32, or bfloat16 (half the bytes per token). kBFloat16
  // with the int8 cache or without the cache is an error.
  DType weights = kFloat32;
  bool fast = true;  // false: the cached forward of kv_cache.cpp (GPT::forward_cached) even where the Decoder could run
};

// Continues `prompt` (token ids, at least one); on_token is called with each new token as it
// is drawn (for streaming). Returns the new tokens.
std::vector<std::uint32_t> generate(GPT& model, const std::vector<std::uint32_t>& prompt, const GenerateOptions& options,
                                    const std::function<void(std::uint32_t)>& on_token = {});

// The same on a Decoder (made once, e.g. with bfloat16 weights, for many generations).
class Decoder;
std::vector<std::uint32_t> generate(Decoder& decoder, const std::vector<std::uint32_t>& prompt,
                                    const GenerateOptions& options, const std::function<void(std::uint32_t)>& on_token = {});

// The token drawn from logits (V) by the rules above (exposed for tests).
std::uint32_t sample_token(const std::vector<float>& logits, const GenerateOptions& options, Generator& gen);

}  // namespace brrr::models
