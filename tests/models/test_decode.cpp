// tests/models/test_decode.cpp: the Decoder (brrr/models/decode.h), generation's fast path on the
// CPU. Its greedy tokens equal the cached forward's (kv_cache.cpp) on brrr models of several
// shapes, its logits equal GPT::forward's to float32 rounding, a sequence's numbers are the same
// bits alone or batched with others and at any thread count, bfloat16 weights give exactly the
// float32 path on the rounded weights, and bad input is a one-line error. Transformers' greedy
// tokens on Hugging Face folders are checked in test_hf.cpp (generate runs the Decoder).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "brrr/bfloat16.h"
#include "brrr/brrr.h"
#include "brrr/models/decode.h"
#include "brrr/models/generate.h"
#include "kernels/cpu/rows/rows.h"
#include "tests/bf16_paths.h"
#include "tests/decode_models.h"

using namespace brrr;

namespace {

std::unique_ptr<models::GPT> make_model(const models::GPTConfig& c, std::uint64_t seed) {
  return test::far_from_ties_model(c, seed);
}

models::GPTConfig shape(std::int64_t layers, std::int64_t heads, std::int64_t width, std::int64_t vocab, bool bias,
                        bool tied, const char* activation = "gelu_tanh") {
  return test::gpt_shape(layers, heads, width, vocab, bias, tied, activation, 48);
}

// Shapes: hs 32 (cpu-tiny's), hs 12 and 20 (not multiples of 8), no biases, an untied head,
// an odd vocabulary, the exact GELU.
const models::GPTConfig kShapes[] = {shape(2, 4, 128, 65, true, true), shape(2, 3, 36, 97, true, false),
                                     shape(3, 2, 40, 51, false, true, "gelu_erf")};

std::vector<float> last_logits(models::GPT& model, const std::vector<std::uint32_t>& ids) {
  NoGradGuard no_grad;
  const Tensor idx = from_vector(std::vector<std::int64_t>(ids.begin(), ids.end()),
                                 {1, static_cast<std::int64_t>(ids.size())}, kInt64);
  const Tensor logits = model.forward(idx);
  return logits.select(1, logits.size(1) - 1).select(0, 0).to_vector<float>();
}

std::vector<float> copy(const float* p, std::int64_t n) { return std::vector<float>(p, p + n); }

}  // namespace

TEST_CASE("decode: greedy tokens equal the cached forward's, logits GPT::forward's, on several shapes") {
  for (const models::GPTConfig& c : kShapes) {
    INFO("shape ", c.to_json());
    auto model = make_model(c, 7);
    const std::vector<std::uint32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6};
    models::GenerateOptions o;
    o.temperature = 0;
    o.max_new_tokens = c.block_size - static_cast<std::int64_t>(prompt.size());  // to the end of the context
    const auto fast = models::generate(*model, prompt, o);
    o.tensor_cache = true;
    const auto old = models::generate(*model, prompt, o);
    CHECK(fast == old);
    // A seeded sample at temperature 1 draws the same tokens too.
    o.temperature = 1.0, o.tensor_cache = false;
    const auto sampled = models::generate(*model, prompt, o);
    o.tensor_cache = true;
    CHECK(sampled == models::generate(*model, prompt, o));

    // The logits after the prompt and after each of a few steps, against the whole forward.
    models::Decoder decoder(*model);
    models::DecodeState state;
    std::vector<std::uint32_t> ids = prompt;
    const float* logits = decoder.prefill(state, prompt);
    for (int step = 0; step < 4; ++step) {
      const std::vector<float> ours = copy(logits, c.vocab_size), theirs = last_logits(*model, ids);
      double scale = 0, diff = 0;
      for (std::size_t i = 0; i < ours.size(); ++i)
        scale = std::max(scale, std::abs(double(theirs[i]))), diff = std::max(diff, std::abs(double(ours[i]) - theirs[i]));
      CHECK(diff <= 1e-5 * scale);
      ids.push_back(old[static_cast<std::size_t>(step)]);
      logits = decoder.step(state, ids.back());
    }
    CHECK(state.length == static_cast<std::int64_t>(ids.size()));
  }
}

// One loop and one context-window rule (generate.h): past block_size, and from a prompt longer
// than block_size, the Decoder, the tensor cache and no cache at all see the same contexts, so
// they draw the same tokens, greedy and seeded.
TEST_CASE("generate: the Decoder, the tensor cache and no cache draw the same tokens past block_size") {
  const models::GPTConfig c = kShapes[1];  // block_size 36
  auto model = make_model(c, 5);
  std::vector<std::uint32_t> long_prompt;
  for (std::uint32_t i = 0; i < 50; ++i) long_prompt.push_back((7 * i + 3) % static_cast<std::uint32_t>(c.vocab_size));
  for (const auto& prompt : {std::vector<std::uint32_t>{3, 1, 4}, long_prompt}) {
    for (double temperature : {0.0, 1.0}) {
      CAPTURE(prompt.size());
      CAPTURE(temperature);
      models::GenerateOptions o;
      o.temperature = temperature;
      o.max_new_tokens = 2 * c.block_size + 5;  // the cache refilled twice
      const auto decoder = models::generate(*model, prompt, o);
      o.tensor_cache = true;
      const auto tensors = models::generate(*model, prompt, o);
      o.kv_cache = false;
      const auto recompute = models::generate(*model, prompt, o);
      CHECK(decoder.size() == static_cast<std::size_t>(o.max_new_tokens));
      CHECK(decoder == tensors);
      CHECK(decoder == recompute);
    }
  }
}

// The loop's clear / prefill / step calls, seen through a Stepper that records them: the prompt
// prefilled at once, a token at a time after it, and at block_size a clear and a prefill of the
// context's last block_size / 2 tokens.
TEST_CASE("generate: the loop feeds the prompt, then one token at a time, and refills from the last half at block_size") {
  struct Recorder final : models::Stepper {
    std::vector<std::vector<std::uint32_t>> calls;  // each prefill's tokens; {} for a clear
    std::int64_t held = 0;
    std::vector<float> logits = std::vector<float>(10, 0.0f);
    void clear() override { calls.push_back({}), held = 0; }
    const float* prefill(const std::uint32_t* tokens, std::int64_t n) override {
      calls.emplace_back(tokens, tokens + n);
      held += n;
      logits.assign(10, 0.0f);
      logits[static_cast<std::size_t>(held % 10)] = 1.0f;  // greedy then draws token held % 10
      return logits.data();
    }
    std::int64_t length() const override { return held; }
  };
  models::GPTConfig c;
  c.vocab_size = 10, c.block_size = 6;
  Recorder r;
  models::GenerateOptions o;
  o.temperature = 0, o.max_new_tokens = 6;
  const std::vector<std::uint32_t> out = models::generate(r, c, {9, 8, 7, 6}, o);
  // The recorder's logits make greedy draw (tokens held) % 10: 4 after the prompt, then 5 and
  // 6; with 6 held the model is full, so the context 9 8 7 6 4 5 6 is fed again from its last
  // half, 4 5 6 (3 held: 3), then 3 and 4 one at a time. The last token drawn is never fed.
  CHECK(out == std::vector<std::uint32_t>{4, 5, 6, 3, 4, 5});
  const std::vector<std::vector<std::uint32_t>> want = {{}, {9, 8, 7, 6}, {4}, {5}, {}, {4, 5, 6}, {3}, {4}};
  CHECK(r.calls == want);
}

namespace {

void check_alone_batched_prefilled(DType weights) {
  const models::GPTConfig c = kShapes[1];
  auto model = make_model(c, 11);
  models::Decoder decoder(*model, weights);
  const std::vector<std::vector<std::uint32_t>> prompts = {{1, 2, 3}, {40, 41}, {7, 7, 7, 7, 7}};
  // Alone: each sequence prefilled, then one step with token 5.
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) {
    models::DecodeState s;
    decoder.prefill(s, p);
    alone.push_back(copy(decoder.step(s, 5), c.vocab_size));
  }
  // Batched: the three sequences advanced in one step.
  std::vector<models::DecodeState> states(prompts.size());
  for (std::size_t i = 0; i < prompts.size(); ++i) decoder.prefill(states[i], prompts[i]);
  models::DecodeState* pointers[] = {&states[0], &states[1], &states[2]};
  const std::uint32_t tokens[] = {5, 5, 5};
  const float* batched = decoder.step(pointers, tokens, 3);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    INFO("sequence ", i);
    CHECK(std::memcmp(batched + i * c.vocab_size, alone[i].data(), c.vocab_size * sizeof(float)) == 0);
    CHECK(states[i].length == static_cast<std::int64_t>(prompts[i].size()) + 1);
  }
  // Prefilled in one pass: the prompt and the token at once, the same bits as token by token.
  std::vector<std::uint32_t> whole = prompts[2];
  whole.push_back(5);
  models::DecodeState s;
  CHECK(std::memcmp(decoder.prefill(s, whole), alone[2].data(), c.vocab_size * sizeof(float)) == 0);
  // One thread: the same bits.
  const int threads = get_num_threads();
  set_num_threads(1);
  models::DecodeState one;
  const std::vector<float> single = copy(decoder.prefill(one, whole), c.vocab_size);
  set_num_threads(threads);
  CHECK(single == alone[2]);
  // Two Decoders on two threads at once (the second runs its kernels alone): the same bits.
  models::Decoder other(*model, weights);
  std::vector<float> first, second;
  std::thread t([&] {
    models::DecodeState a;
    first = copy(decoder.prefill(a, whole), c.vocab_size);
  });
  {
    models::DecodeState b;
    second = copy(other.prefill(b, whole), c.vocab_size);
  }
  t.join();
  CHECK(first == alone[2]);
  CHECK(second == alone[2]);
}

}  // namespace

// float32 weights, and bf16 (x rounded to bf16 at each matmul: rows.h's order on the dot
// products; on AMX's tile unit its own sums, where there is one): each keeps the promise.
TEST_CASE("decode: a sequence's logits are the same bits alone, batched with others, prefilled, on one thread, or beside another Decoder") {
  check_alone_batched_prefilled(kFloat32);
  test::for_each_bf16_path([](const char* path, bool) {
    INFO("bf16 weights, ", path);
    check_alone_batched_prefilled(kBFloat16);
  });
}

// Decoder::forward is what brrr serve's steps are: prompts (whose attention runs in groups of up
// to 16 rows as tiles of dot products), decoding rows and chunks in one pass, with the logits
// of only some rows (the last layer then runs on those alone).
namespace {

void check_forward_rows(DType weights) {
  const models::GPTConfig c = kShapes[1];
  const std::int64_t V = c.vocab_size;
  auto model = make_model(c, 12);
  models::Decoder decoder(*model, weights);
  std::vector<std::uint32_t> a(20);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint32_t>((7 * i + 1) % V);
  std::vector<std::vector<float>> a_alone;  // every position's logits, one token at a time
  {
    models::DecodeState s;
    for (std::uint32_t t : a) a_alone.push_back(copy(decoder.step(s, t), V));
  }
  models::DecodeState sb, sc;
  decoder.prefill(sb, {3, 4});
  const std::vector<float> b_alone = copy(decoder.step(sb, 9), V);
  decoder.prefill(sc, {8});
  const std::vector<float> c_alone = copy(decoder.prefill(sc, {1, 2, 3, 4, 5}), V);

  std::vector<std::uint32_t> tokens = a;
  tokens.push_back(9);
  for (std::uint32_t t : {1, 2, 3, 4, 5}) tokens.push_back(t);
  const std::int64_t counts[] = {20, 1, 5};
  for (const bool every_of_a : {true, false}) {
    INFO((every_of_a ? "every row of the prompt wanted" : "only the last rows wanted"));
    models::DecodeState s1, s2, s3;
    decoder.prefill(s2, {3, 4});
    decoder.prefill(s3, {8});
    models::DecodeState* states[] = {&s1, &s2, &s3};
    std::vector<std::int64_t> wanted;
    for (std::int64_t r = every_of_a ? 0 : 19; r < 20; ++r) wanted.push_back(r);
    wanted.push_back(20), wanted.push_back(25);
    const std::int64_t W = static_cast<std::int64_t>(wanted.size());
    const float* logits = decoder.forward(states, counts, 3, tokens.data(), wanted.data(), W);
    for (std::int64_t w = 0; w < W - 2; ++w) {
      INFO("prompt row ", wanted[w]);
      CHECK(std::memcmp(logits + w * V, a_alone[wanted[w]].data(), V * sizeof(float)) == 0);
    }
    CHECK(std::memcmp(logits + (W - 2) * V, b_alone.data(), V * sizeof(float)) == 0);
    CHECK(std::memcmp(logits + (W - 1) * V, c_alone.data(), V * sizeof(float)) == 0);
    CHECK(s1.length == 20);
    CHECK(s2.length == 3);
    CHECK(s3.length == 6);
  }
  models::DecodeState s1, s2;
  models::DecodeState* twice[] = {&s1, &s1};
  const std::int64_t ones[] = {1, 1}, rows[] = {0, 1}, backwards[] = {1, 0};
  CHECK_THROWS_WITH_AS(decoder.forward(twice, ones, 2, tokens.data(), rows, 2), "Decoder: sequence 1 is also sequence 0",
                       Error);
  models::DecodeState* two[] = {&s1, &s2};
  CHECK_THROWS_WITH_AS(decoder.forward(two, ones, 2, tokens.data(), backwards, 2),
                       "Decoder: the rows of logits must ascend within 0 .. 1", Error);
}

}  // namespace

TEST_CASE("decode: forward over several sequences' prompts and steps gives every row the bits it gets alone") {
  check_forward_rows(kFloat32);
  test::for_each_bf16_path([](const char* path, bool) {
    INFO("bf16 weights, ", path);
    check_forward_rows(kBFloat16);
  });
}

// bf16 weights are the weights rounded to bf16, and x rounded to bf16 at each matmul's input
// (kernels/cpu/rows/rows.h): near the float32 path on the rounded weights, where only x's
// rounding (up to 2^-9 of each product) and the order of the sums differ, and not its bits.
TEST_CASE("decode: bfloat16 weights: near the float32 path on the weights rounded to bfloat16, x rounded at each matmul") {
  const test::AmxScope off(false);
  const models::GPTConfig c = kShapes[0];
  auto model = make_model(c, 5);
  auto rounded = make_model(c, 5);
  {
    NoGradGuard no_grad;
    for (auto& [name, p] : rounded->named_parameters()) {
      if (p.dim() != 2 || name.find("wpe") != std::string::npos) continue;  // the matrices and the tied head
      float* d = p.data_ptr<float>();
      for (std::int64_t i = 0; i < p.numel(); ++i) d[i] = round_to_bf16(d[i]);
    }
  }
  // wte is the embedding (read as float32) and the tied head (rounded): give the first model
  // the rounded wte too, so both decoders read the same embedding rows.
  {
    NoGradGuard no_grad;
    std::memcpy(model->wte->weight.data_ptr<float>(), rounded->wte->weight.data_ptr<float>(),
                model->wte->weight.numel() * sizeof(float));
  }
  models::Decoder half(*model, kBFloat16), full(*rounded, kFloat32);
  CHECK(half.weight_bytes_per_token() < full.weight_bytes_per_token() * 0.51);
  models::DecodeState a, b;
  const std::vector<std::uint32_t> prompt = {9, 8, 7, 6};
  const std::vector<float> h = copy(half.prefill(a, prompt), c.vocab_size), f = copy(full.prefill(b, prompt), c.vocab_size);
  float top = 0, worst = 0;
  for (std::int64_t v = 0; v < c.vocab_size; ++v)
    top = std::max(top, std::abs(f[v])), worst = std::max(worst, std::abs(h[v] - f[v]));
  MESSAGE("bf16 against float32 on rounded weights: worst logit difference ", worst, " of ", top);
  CHECK(worst <= 2e-2f * top);
  CHECK(worst > 0);  // x is rounded: not the float32 path's bits
  // generate with bfloat16 weights: greedy, the tokens of the bf16 Decoder's own logits.
  std::vector<std::uint32_t> want;
  models::DecodeState g;
  const float* logits = half.prefill(g, prompt);
  for (int i = 0; i < 20; ++i) {
    want.push_back(static_cast<std::uint32_t>(std::max_element(logits, logits + c.vocab_size) - logits));
    logits = half.step(g, want.back());
  }
  models::GenerateOptions o;
  o.temperature = 0, o.max_new_tokens = 20, o.weights = kBFloat16;
  CHECK(models::generate(*model, prompt, o) == want);
}

TEST_CASE("decode: bfloat16 weights on AMX's tile unit: a row's bits alone or among others, near the dot products'") {
  if (!kernels::cpu::amx_available()) {
    MESSAGE("no AMX tile unit here (or the OS refuses it): nothing to check");
    return;
  }
  for (const models::GPTConfig& c : kShapes) {
    auto model = make_model(c, 9);
    models::Decoder decoder(*model, kBFloat16);
    std::vector<std::uint32_t> prompt(40);  // 40 rows: three tiles of rows (16, 16 and 8)
    for (std::size_t i = 0; i < prompt.size(); ++i)
      prompt[i] = static_cast<std::uint32_t>((i * 7 + 3) % c.vocab_size);
    std::vector<float> fma_logits;
    {
      const test::AmxScope off(false);
      models::DecodeState s;
      fma_logits = copy(decoder.prefill(s, prompt), c.vocab_size);
    }
    const test::AmxScope on(true);
    models::DecodeState whole, stepped;
    const std::vector<float> logits = copy(decoder.prefill(whole, prompt), c.vocab_size);
    // The same sequence a row at a time (one row a tile): the same bits.
    const float* last = decoder.prefill(stepped, {prompt[0]});
    for (std::size_t i = 1; i < prompt.size(); ++i) last = decoder.step(stepped, prompt[i]);
    CHECK(std::memcmp(last, logits.data(), c.vocab_size * sizeof(float)) == 0);
    // Near the dot products': the same rounded x and W, float32 sums in another order.
    float top = 0, worst = 0;
    for (std::int64_t v = 0; v < c.vocab_size; ++v)
      top = std::max(top, std::abs(fma_logits[v])), worst = std::max(worst, std::abs(logits[v] - fma_logits[v]));
    CHECK(worst <= 1e-4f * top);
    // And not the dot products' bits everywhere: the switch did switch.
    CHECK(std::memcmp(fma_logits.data(), logits.data(), c.vocab_size * sizeof(float)) != 0);
  }
}

TEST_CASE("decode: bad input is a one-line error") {
  const models::GPTConfig c = kShapes[0];
  auto model = make_model(c, 3);
  models::Decoder decoder(*model);
  models::DecodeState s;
  CHECK_THROWS_WITH_AS(decoder.prefill(s, {1, 65}), "Decoder: token 65 is outside the vocabulary (65)", Error);
  CHECK_THROWS_WITH_AS(decoder.prefill(s, std::vector<std::uint32_t>(49, 1)),
                       "Decoder: 0 cached + 49 new positions exceed block_size 48", Error);
  CHECK_THROWS_WITH_AS(decoder.prefill(s, nullptr, 0), "Decoder::prefill: no tokens", Error);
  CHECK_THROWS_AS(models::Decoder(*model, kFloat64), Error);
  models::GenerateOptions o;
  o.weights = kBFloat16, o.kv_cache_int8 = true;
  CHECK_THROWS_WITH_AS(models::generate(*model, {1}, o),
                       "generate: bfloat16 weights need the float32 KV cache on the CPU or the CUDA device", Error);
}
