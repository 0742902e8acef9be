// models/gpt/generate.cpp: temperature, top-k, top-p sampling with or without a KV cache.
// Chapter 08 (training: sampling).
#include "brrr/models/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "brrr/autograd.h"
#include "brrr/models/decode.h"
#include "brrr/ops.h"

namespace brrr::models {

std::uint32_t sample_token(const std::vector<float>& logits, const GenerateOptions& o, Generator& gen) {
  BRRR_CHECK(!logits.empty(), "sample_token: no logits");
  BRRR_CHECK(o.temperature >= 0.0, "generate: temperature must be 0 (greedy) or positive, got ", o.temperature);
  if (o.temperature == 0.0)  // greedy: the most likely token, the lowest id on a tie (as torch.argmax)
    return static_cast<std::uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  BRRR_CHECK(o.top_p > 0.0 && o.top_p <= 1.0, "generate: top_p must be in (0, 1], got ", o.top_p);
  BRRR_CHECK(o.top_k >= 0, "generate: top_k must be 0 (no limit) or positive, got ", o.top_k);
  // Tokens by descending logit (ties by id, so the order is deterministic).
  std::vector<std::uint32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return logits[a] > logits[b]; });
  std::size_t keep = o.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(o.top_k), order.size()) : order.size();
  std::vector<double> p(keep);
  const double top = logits[order[0]];
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) total += p[i] = std::exp((logits[order[i]] - top) / o.temperature);
  if (o.top_p < 1.0) {  // the smallest prefix whose probability reaches top_p
    double cumulative = 0.0;
    std::size_t cut = keep;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += p[i] / total;
      if (cumulative >= o.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  double u = gen.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    u -= p[i];
    if (u < 0.0) return order[i];
  }
  return order[keep - 1];
}

std::vector<std::uint32_t> generate(GPT& model, const std::vector<std::uint32_t>& prompt, const GenerateOptions& o,
                                    const std::function<void(std::uint32_t)>& on_token) {
  BRRR_CHECK(!prompt.empty(), "generate: the prompt needs at least one token");
  const std::int64_t block = model.config().block_size;
  for (std::uint32_t t : prompt)
    BRRR_CHECK(t < model.config().vocab_size, "generate: prompt token ", t, " is outside the vocabulary (",
               model.config().vocab_size, ")");
  NoGradGuard no_grad;
  const bool on_cpu = model.wte->weight.device().is_cpu() && model.wte->weight.dtype() == kFloat32;
  BRRR_CHECK(o.weights == kFloat32 || (o.kv_cache && !o.kv_cache_int8 && on_cpu),
             "generate: bfloat16 weights need the float32 KV cache on the CPU");
  if (o.kv_cache && !o.kv_cache_int8 && on_cpu && o.fast) {
    Decoder decoder(model, o.weights);
    return generate(decoder, prompt, o, on_token);
  }
  const bool was_training = model.is_training();
  model.eval();
  Generator gen(o.seed);
  std::vector<std::uint32_t> context = prompt, produced;
  KVCache cache;
  cache.int8 = o.kv_cache_int8;
  std::int64_t fed = 0;  // how many tokens of `context` the cache holds
  auto as_tensor = [](const std::uint32_t* ids, std::int64_t n) {
    return from_vector(std::vector<std::int64_t>(ids, ids + n), {1, n}, kInt64);
  };
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    Tensor logits;
    const std::int64_t len = static_cast<std::int64_t>(context.size());
    if (o.kv_cache) {
      if (len > block || cache.length() >= block) {
        // The cache is full: start again from the last half of the context (positions must stay
        // below block_size), then continue one token at a time.
        cache.clear();
        fed = len - std::max<std::int64_t>(1, block / 2);
      }
      logits = model.forward_cached(as_tensor(context.data() + fed, len - fed), cache);
      fed = len;
    } else {
      const std::int64_t start = std::max<std::int64_t>(0, len - block);  // the last block_size tokens
      logits = model.forward(as_tensor(context.data() + start, len - start));
    }
    const Tensor last = logits.select(1, logits.size(1) - 1).select(0, 0);  // (V)
    const std::uint32_t token = sample_token(last.to_vector<float>(), o, gen);
    context.push_back(token);
    produced.push_back(token);
    if (on_token) on_token(token);
  }
  model.train(was_training);
  return produced;
}

std::vector<std::uint32_t> generate(Decoder& decoder, const std::vector<std::uint32_t>& prompt, const GenerateOptions& o,
                                    const std::function<void(std::uint32_t)>& on_token) {
  BRRR_CHECK(!prompt.empty(), "generate: the prompt needs at least one token");
  const GPTConfig& c = decoder.config();
  for (std::uint32_t t : prompt)
    BRRR_CHECK(t < c.vocab_size, "generate: prompt token ", t, " is outside the vocabulary (", c.vocab_size, ")");
  Generator gen(o.seed);
  DecodeState state;
  std::vector<std::uint32_t> context = prompt, produced;
  std::vector<float> logits(static_cast<std::size_t>(c.vocab_size));
  // The prompt's last block_size tokens at once, then a token at a time; when the cache is
  // full, start again from the last half of the context, as the cached path above does.
  const std::int64_t len = static_cast<std::int64_t>(context.size());
  std::int64_t fed = std::max<std::int64_t>(0, len - c.block_size);
  if (len > c.block_size) fed = len - std::max<std::int64_t>(1, c.block_size / 2);
  const float* out = decoder.prefill(state, context.data() + fed, len - fed);
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    std::copy(out, out + c.vocab_size, logits.begin());
    const std::uint32_t token = sample_token(logits, o, gen);
    context.push_back(token);
    produced.push_back(token);
    if (on_token) on_token(token);
    if (step + 1 == o.max_new_tokens) break;
    if (state.length >= c.block_size) {
      state.clear();
      const std::int64_t n = std::max<std::int64_t>(1, c.block_size / 2);
      out = decoder.prefill(state, context.data() + context.size() - n, n);
    } else {
      out = decoder.step(state, token);
    }
  }
  return produced;
}

}  // namespace brrr::models
