// models/gpt/generate.cpp: temperature, top-k, top-p sampling with or without a KV cache.
// Chapter 08 (training: sampling).
#include "brrr/models/generate.h"

#include <algorithm>
#include <cmath>

#include "brrr/autograd.h"
#include "brrr/eval_mode.h"
#include "brrr/models/decode.h"
#include "brrr/models/decode_device.h"
#include "brrr/ops.h"
#include "kernels/sample_rule.h"

namespace brrr::models {

namespace {

using kernels::sample::descending_key;  // a float's bits as a key that ascends as the floats descend

// Sorts items ascending by their high 32 bits, equal ones keeping the order given: a
// least-significant-digit radix sort, 8 bits a pass (a digit all items share is skipped: its pass
// would move nothing). `spare` is room for the passes.
void sort_by_high_half(std::vector<std::uint64_t>& items, std::vector<std::uint64_t>& spare) {
  const std::size_t n = items.size();
  if (n < 2) return;
  std::size_t count[4][256] = {};
  for (std::uint64_t v : items)
    for (int d = 0; d < 4; ++d) ++count[d][(v >> (32 + 8 * d)) & 255u];
  spare.resize(n);
  for (int d = 0; d < 4; ++d) {
    const int shift = 32 + 8 * d;
    if (count[d][(items[0] >> shift) & 255u] == n) continue;
    std::size_t at[256];
    for (std::size_t b = 0, sum = 0; b < 256; ++b) at[b] = sum, sum += count[d][b];
    for (std::uint64_t v : items) spare[at[(v >> shift) & 255u]++] = v;
    items.swap(spare);
  }
}

// The tokens from the most likely down (ties: the lower id first) and their weights
// exp((logit - top) / temperature), made only as far as they are asked for. The sampler's sums
// start at the top token's weight, exactly 1, so a weight under 2^-53 can never change them:
// the tokens whose logit is below top - 40 temperature (weights under exp(-40), about 4e-18)
// are sorted and weighed only if a walk down the ranking reaches them, which rounding alone
// can make happen. With top_k, only the first top_k are sorted. Sorting every logit with
// std::stable_sort, as this file did before, took 7 ms per token at GPT-2's vocabulary of
// 50,257 (half a bf16 decoding step of GPT-2) and 0.3 ms at gpt-12m's 4,096
// (docs/measurements.md, "Sampling without sorting the vocabulary"); the numbers drawn are the same.
class Ranking {
 public:
  // Only the first `limit` tokens of the ranking will be asked for.
  Ranking(const std::vector<float>& logits, double temperature, std::size_t limit)
      : logits_(logits), temperature_(temperature), top_(*std::max_element(logits.begin(), logits.end())), limit_(limit),
        s_(scratch()) {
    s_.ids.clear(), s_.weights.clear();
    add([&](float l) { return l >= cut_; });
  }
  std::uint32_t id(std::size_t i) {
    reach(i);
    return s_.ids[i];
  }
  double weight(std::size_t i) {
    reach(i);
    weigh(i + 1);
    return s_.weights[i];
  }
  // The first n weights summed in order from zero; the weights after the first candidates
  // leave the sum as it is (see above), so they are not added.
  double sum(std::size_t n) {
    n = std::min(n, candidates_);
    weigh(n);
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) total += s_.weights[i];
    return total;
  }

 private:
  // Room reused from draw to draw (a fresh 50,257-token ranking is about 1.4 MB to allocate).
  struct Scratch {
    std::vector<std::uint64_t> items, spare;
    std::vector<std::uint32_t> ids;
    std::vector<double> weights;
  };
  static Scratch& scratch() {
    thread_local Scratch s;
    return s;
  }
  void weigh(std::size_t n) {  // the weights of the first n tokens ranked
    for (std::size_t i = s_.weights.size(); i < n; ++i)
      s_.weights.push_back(std::exp((logits_[s_.ids[i]] - top_) / temperature_));
  }
  template <class Keep>
  void add(Keep keep) {
    // (key, id) in one word, so that ascending words are the ranking, ties in id order. With
    // top_k, the first limit_ of them are found first (in linear time), and only they sorted.
    std::vector<std::uint64_t>& items = s_.items;
    items.resize(logits_.size());
    std::size_t n = 0;
    for (std::size_t i = 0; i < logits_.size(); ++i) {
      items[n] = std::uint64_t{descending_key(logits_[i])} << 32 | i;
      n += keep(logits_[i]) ? 1 : 0;
    }
    items.resize(n);
    const std::size_t wanted = limit_ - s_.ids.size();
    if (items.size() > wanted) {  // nth_element leaves them out of id order: the whole word is the key
      std::nth_element(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(wanted), items.end());
      items.resize(wanted);
      std::sort(items.begin(), items.end());
    } else {
      sort_by_high_half(items, s_.spare);
    }
    for (std::uint64_t v : items) s_.ids.push_back(static_cast<std::uint32_t>(v));
    if (candidates_ == 0) candidates_ = s_.ids.size();
  }
  void reach(std::size_t i) {
    if (i >= s_.ids.size() && s_.ids.size() == candidates_) add([&](float l) { return !(l >= cut_); });
  }
  const std::vector<float>& logits_;
  const double temperature_, top_;
  const double cut_ = top_ - 40.0 * temperature_;  // below it, weights under exp(-40)
  const std::size_t limit_;
  Scratch& s_;
  std::size_t candidates_ = 0;
};

// The sampling rules' ranges (sample_token's, and the DeviceDecoder's, which draws on the GPU).
void check_sampling(const GenerateOptions& o) {
  BRRR_CHECK(o.temperature >= 0.0, "generate: temperature must be 0 (greedy) or positive, got ", o.temperature);
  if (o.temperature == 0.0) return;
  BRRR_CHECK(o.top_p > 0.0 && o.top_p <= 1.0, "generate: top_p must be in (0, 1], got ", o.top_p);
  BRRR_CHECK(o.top_k >= 0, "generate: top_k must be 0 (no limit) or positive, got ", o.top_k);
}

// The prompt rule: at least one token, every one in the vocabulary.
void check_prompt(const std::vector<std::uint32_t>& prompt, const GPTConfig& c) {
  BRRR_CHECK(!prompt.empty(), "generate: the prompt needs at least one token");
  for (std::uint32_t t : prompt)
    BRRR_CHECK(t < c.vocab_size, "generate: prompt token ", t, " is outside the vocabulary (", c.vocab_size, ")");
}

// The context-window rule: when the context (len tokens) no longer fits block_size, the model
// is fed again from its last half (positions must stay below block_size). Returns where in
// the context that restart begins.
std::int64_t restart_at(std::int64_t len, std::int64_t block_size) {
  return len - std::max<std::int64_t>(1, block_size / 2);
}

// The three Steppers. The Decoder's: row kernels on buffers made once (decode.h).
class DecoderStepper final : public Stepper {
 public:
  explicit DecoderStepper(Decoder& decoder) : decoder_(decoder) {}
  void clear() override { state_.clear(); }
  const float* prefill(const std::uint32_t* tokens, std::int64_t n) override {
    return decoder_.prefill(state_, tokens, n);
  }
  std::int64_t length() const override { return state_.length; }

 private:
  Decoder& decoder_;
  DecodeState state_;
};

// The DeviceDecoder's (decode_device.h): the same pass on the GPU, the sequence in one slot.
class DeviceDecoderStepper final : public Stepper {
 public:
  explicit DeviceDecoderStepper(DeviceDecoder& decoder) : decoder_(decoder), state_(decoder.acquire()) {}
  ~DeviceDecoderStepper() override { decoder_.release(state_); }
  DeviceDecoderStepper(const DeviceDecoderStepper&) = delete;
  DeviceDecoderStepper& operator=(const DeviceDecoderStepper&) = delete;
  void clear() override { state_.clear(); }
  const float* prefill(const std::uint32_t* tokens, std::int64_t n) override {
    return decoder_.prefill(state_, tokens, n);
  }
  std::uint32_t prefill_next(const std::uint32_t* tokens, std::int64_t n, std::int64_t, const GenerateOptions& o,
                             Generator& gen) override {
    check_sampling(o);
    DeviceDecodeState* s = &state_;
    const std::int64_t last = n - 1;
    decoder_.enqueue(&s, &n, 1, tokens, &last, 1);
    if (o.temperature == 0.0) return decoder_.greedy()[0];
    const double rule[] = {o.temperature, static_cast<double>(o.top_k), o.top_p, gen.uniform()};
    return decoder_.sample(rule)[0];
  }
  std::int64_t length() const override { return state_.length; }

 private:
  DeviceDecoder& decoder_;
  DeviceDecodeState state_;
};

// The (1, n) tensor of ids a GPT's forward takes.
Tensor ids_tensor(const std::uint32_t* ids, std::int64_t n) {
  return from_vector(std::vector<std::int64_t>(ids, ids + n), {1, n}, kInt64);
}

// The last position's logits of a (1, T, V) forward, as floats.
void last_row(const Tensor& logits, std::vector<float>& out) {
  out = logits.select(1, logits.size(1) - 1).select(0, 0).to(kFloat32).to(kCPU).to_vector<float>();
}

// Chapter 08's teaching path: the training forward with a KVCache of tensors (kv_cache.cpp).
class TensorCacheStepper final : public Stepper {
 public:
  TensorCacheStepper(GPT& model, bool int8) : model_(model) { cache_.int8 = int8; }
  void clear() override { cache_.clear(); }
  const float* prefill(const std::uint32_t* tokens, std::int64_t n) override {
    last_row(model_.forward_cached(ids_tensor(tokens, n), cache_), logits_);
    return logits_.data();
  }
  std::int64_t length() const override { return cache_.length(); }

 private:
  GPT& model_;
  KVCache cache_;
  std::vector<float> logits_;
};

// No cache (nanoGPT's way): the whole context through the training forward, every token.
class RecomputeStepper final : public Stepper {
 public:
  explicit RecomputeStepper(GPT& model) : model_(model) {}
  void clear() override { fed_.clear(); }
  const float* prefill(const std::uint32_t* tokens, std::int64_t n) override {
    fed_.insert(fed_.end(), tokens, tokens + n);
    last_row(model_.forward(ids_tensor(fed_.data(), static_cast<std::int64_t>(fed_.size()))), logits_);
    return logits_.data();
  }
  std::int64_t length() const override { return static_cast<std::int64_t>(fed_.size()); }

 private:
  GPT& model_;
  std::vector<std::uint32_t> fed_;
  std::vector<float> logits_;
};

}  // namespace

std::uint32_t sample_token(const std::vector<float>& logits, const GenerateOptions& o, Generator& gen) {
  BRRR_CHECK(!logits.empty(), "sample_token: no logits");
  check_sampling(o);
  if (o.temperature == 0.0)  // greedy: the most likely token, the lowest id on a tie (as torch.argmax)
    return static_cast<std::uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // The definition: the tokens by descending logit (ties by id), their weights
  // exp((logit - top) / temperature), the first top_k of them, then the shortest prefix whose
  // share of the weight reaches top_p; a uniform draw times that prefix's total weight, walked
  // down the prefix. Ranking computes exactly these numbers, without sorting the negligible tail.
  const std::size_t V = logits.size();
  std::size_t keep = o.top_k > 0 ? std::min<std::size_t>(static_cast<std::size_t>(o.top_k), V) : V;
  Ranking r(logits, o.temperature, keep);
  double total = r.sum(keep);
  if (o.top_p < 1.0) {  // the smallest prefix whose probability reaches top_p
    double cumulative = 0.0;
    std::size_t cut = keep;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += r.weight(i) / total;
      if (cumulative >= o.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
    total = r.sum(keep);
  }
  double u = gen.uniform() * total;
  for (std::size_t i = 0; i < keep; ++i) {
    u -= r.weight(i);
    if (u < 0.0) return r.id(i);
  }
  return r.id(keep - 1);
}

std::uint32_t Stepper::prefill_next(const std::uint32_t* tokens, std::int64_t n, std::int64_t vocab_size,
                                   const GenerateOptions& o, Generator& gen) {
  const float* logits = prefill(tokens, n);
  if (o.temperature == 0.0)  // the first of equal ones, without a copy
    return static_cast<std::uint32_t>(std::max_element(logits, logits + vocab_size) - logits);
  return sample_token(std::vector<float>(logits, logits + vocab_size), o, gen);
}

std::vector<std::uint32_t> generate(Stepper& stepper, const GPTConfig& c, const std::vector<std::uint32_t>& prompt,
                                    const GenerateOptions& o, const std::function<void(std::uint32_t)>& on_token) {
  check_prompt(prompt, c);
  Generator gen(o.seed);
  std::vector<std::uint32_t> context = prompt, produced;
  const auto feed = [&](const std::uint32_t* tokens, std::int64_t n) {
    return stepper.prefill_next(tokens, n, c.vocab_size, o, gen);
  };
  // The prompt at once (its last half, when it does not fit), then a token at a time; when the
  // model holds block_size tokens, it is fed again from the last half of the context.
  auto refill = [&] {
    const std::int64_t len = static_cast<std::int64_t>(context.size());
    const std::int64_t at = len > c.block_size ? restart_at(len, c.block_size) : 0;
    stepper.clear();
    return feed(context.data() + at, len - at);
  };
  std::uint32_t token = refill();
  for (std::int64_t step = 0; step < o.max_new_tokens; ++step) {
    context.push_back(token);
    produced.push_back(token);
    if (on_token) on_token(token);
    if (step + 1 == o.max_new_tokens) break;
    token = stepper.length() >= c.block_size ? refill() : feed(&token, 1);
  }
  return produced;
}

std::vector<std::uint32_t> generate(GPT& model, const std::vector<std::uint32_t>& prompt, const GenerateOptions& o,
                                    const std::function<void(std::uint32_t)>& on_token) {
  check_prompt(prompt, model.config());
  NoGradGuard no_grad;
  const Tensor& wte = model.wte->weight;
  const bool float32 = wte.dtype() == kFloat32, on_cpu = wte.device().is_cpu() && float32;
  const bool on_cuda = wte.device().is_cuda() && float32;
  BRRR_CHECK(o.weights == kFloat32 || (o.kv_cache && !o.kv_cache_int8 && (on_cpu || on_cuda)),
             "generate: bfloat16 weights need the float32 KV cache on the CPU or the CUDA device");
  if (o.kv_cache && !o.kv_cache_int8 && !o.tensor_cache && on_cpu) {
    Decoder decoder(model, o.weights);
    return generate(decoder, prompt, o, on_token);
  }
  if (o.kv_cache && !o.kv_cache_int8 && !o.tensor_cache && on_cuda) {
    DeviceDecoder decoder(model, 1, o.weights);
    DeviceDecoderStepper stepper(decoder);
    return generate(stepper, model.config(), prompt, o, on_token);
  }
  const nn::EvalModeGuard eval_mode(model);
  if (o.kv_cache) {
    TensorCacheStepper stepper(model, o.kv_cache_int8);
    return generate(stepper, model.config(), prompt, o, on_token);
  }
  RecomputeStepper stepper(model);
  return generate(stepper, model.config(), prompt, o, on_token);
}

std::vector<std::uint32_t> generate(Decoder& decoder, const std::vector<std::uint32_t>& prompt, const GenerateOptions& o,
                                    const std::function<void(std::uint32_t)>& on_token) {
  DecoderStepper stepper(decoder);
  return generate(stepper, decoder.config(), prompt, o, on_token);
}

}  // namespace brrr::models
