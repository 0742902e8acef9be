// tests/serve/test_serve.cpp: brrr serve (chapter 20): the batch-invariant forward pass, the
// text held back while streaming, and the server itself on a loopback port: the API, its
// errors, continuous batching, and every request's bits the same alone or beside others.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <latch>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "brrr/autograd.h"
#include "brrr/cuda.h"
#include "brrr/parallel.h"
#include "brrr/tensor.h"
#include "doctest/doctest.h"
#include "kernels/cpu/rows/rows.h"
#include "tests/bf16_paths.h"
#include "serve/model_runner.h"
#include "serve/server.h"
#include "serve/text_stream.h"

using namespace brrr;
using nlohmann::json;

namespace {

// A small random GPT whose sizes leave remainders in every dot product (C = 40: 2 x 16 + 8;
// head size 20: 16 + 4), and a character tokenizer over the letters it is asked about.
models::GPTConfig small_config() {
  models::GPTConfig c;
  c.vocab_size = 65, c.block_size = 48, c.n_layer = 2, c.n_head = 2, c.n_embd = 40;
  return c;
}

std::shared_ptr<models::GPT> small_model(std::uint64_t seed = 7) {
  Generator gen(seed);
  auto model = std::make_shared<models::GPT>(small_config(), gen);
  model->eval();
  return model;
}

const char* kAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'\n";

serve::LoadedModel small_loaded() {
  return {small_model(), tokenizer::TextTokenizer::train("char", kAlphabet, 0, false)};
}

std::vector<std::uint32_t> ids_of(std::initializer_list<int> v) { return {v.begin(), v.end()}; }

// Runs each prompt through the runner: prefill in chunks of `chunk` tokens, then `decode` greedy
// steps, batched as `groups` say (sequences in one group share every step). Returns every
// logits row each sequence saw, in order.
std::vector<std::vector<std::vector<float>>> run_sequences(serve::ModelRunner& runner,
                                                           const std::vector<std::vector<std::uint32_t>>& prompts,
                                                           const std::vector<std::vector<std::size_t>>& groups,
                                                           std::size_t chunk, int decode) {
  std::vector<std::vector<std::vector<float>>> seen(prompts.size());
  for (const auto& group : groups) {
    std::vector<serve::SequenceCache> caches;
    for (std::size_t i = 0; i < group.size(); ++i) caches.push_back(runner.new_cache());
    std::vector<std::size_t> fed(group.size(), 0);
    std::vector<std::uint32_t> next(group.size());
    for (int step = 0;; ++step) {
      std::vector<serve::StepInput> inputs;
      std::vector<std::size_t> who;
      for (std::size_t g = 0; g < group.size(); ++g) {
        const auto& p = prompts[group[g]];
        serve::StepInput in{&caches[g], {}, false};
        if (fed[g] < p.size()) {
          const std::size_t n = std::min(chunk, p.size() - fed[g]);
          in.tokens.assign(p.begin() + fed[g], p.begin() + fed[g] + n);
          fed[g] += n;
        } else if (static_cast<int>(seen[group[g]].size()) < decode + 1) {
          in.tokens = {next[g]};
        } else {
          continue;
        }
        inputs.push_back(in);
        who.push_back(g);
      }
      if (inputs.empty()) break;
      const auto out = runner.step(inputs);
      for (std::size_t i = 0; i < who.size(); ++i) {
        const std::size_t g = who[i];
        if (fed[g] < prompts[group[g]].size()) continue;  // a prefill chunk that is not the last
        seen[group[g]].push_back(out[i].back());
        next[g] = static_cast<std::uint32_t>(std::max_element(out[i].back().begin(), out[i].back().end()) -
                                             out[i].back().begin());
      }
    }
  }
  return seen;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// the forward pass

TEST_CASE("runner: its logits match GPT::forward's") {
  auto model = small_model();
  serve::ModelRunner runner(model);
  const auto prompt = ids_of({3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 3, 2, 38, 4, 6});
  serve::SequenceCache cache = runner.new_cache();
  std::vector<serve::StepInput> in{{&cache, prompt, true}};
  const auto ours = runner.step(in)[0];
  NoGradGuard no_grad;
  const Tensor logits = model->forward(from_vector(std::vector<std::int64_t>(prompt.begin(), prompt.end()),
                                                   {1, static_cast<std::int64_t>(prompt.size())}, kInt64));
  const std::vector<float> theirs = logits.to_vector<float>();
  REQUIRE(ours.size() == prompt.size());
  double worst = 0.0;
  for (std::size_t t = 0; t < prompt.size(); ++t)
    for (std::size_t v = 0; v < 65; ++v) worst = std::max(worst, std::abs(double(ours[t][v]) - theirs[t * 65 + v]));
  CHECK(worst < 1e-4);
}

TEST_CASE("runner: a sequence's logits are the same bits alone, batched, chunked and at any thread count") {
  // float32 weights; bfloat16 weights on the dot products; and on AMX's tile unit where the CPU has one.
  const auto check = [](DType weights, const std::string& path) {
    const std::string dtype = dtype_name(weights);
    CAPTURE(dtype);
    CAPTURE(path);
    serve::ModelRunner runner(small_model(), weights);
    const std::vector<std::vector<std::uint32_t>> prompts = {
        ids_of({1, 2, 3}), ids_of({40, 41, 12, 13, 14, 15, 16, 17, 18, 19, 20}), ids_of({7}),
        ids_of({9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21})};
    const int threads = get_num_threads();
    set_num_threads(1);
    const auto alone = run_sequences(runner, prompts, {{0}, {1}, {2}, {3}}, 64, 12);
    set_num_threads(2);
    const auto together = run_sequences(runner, prompts, {{3, 1, 0, 2}}, 64, 12);
    const auto pairs = run_sequences(runner, prompts, {{2, 0}, {1, 3}}, 5, 12);
    const auto chunked = run_sequences(runner, prompts, {{0, 1, 2, 3}}, 1, 12);
    set_num_threads(threads);
    for (std::size_t s = 0; s < prompts.size(); ++s) {
      CAPTURE(s);
      REQUIRE(alone[s].size() == 13);
      CHECK(together[s] == alone[s]);  // float ==: the same bits (no NaN here)
      CHECK(pairs[s] == alone[s]);
      CHECK(chunked[s] == alone[s]);
    }
  };
  check(kFloat32, "fma");
  test::for_each_bf16_path([&](const char* path, bool) { check(kBFloat16, path); });
}

TEST_CASE("runner: the attention map of the last token sums to 1 over the context, per layer and head") {
  serve::ModelRunner runner(small_model());
  const auto w = runner.attention_of_last(ids_of({5, 6, 7, 8, 9}));
  REQUIRE(w.size() == 2 * 2 * 5);
  for (int lh = 0; lh < 4; ++lh) {
    double sum = 0.0;
    for (int t = 0; t < 5; ++t) sum += w[lh * 5 + t];
    CHECK(sum == doctest::Approx(1.0).epsilon(1e-5));
  }
}

// On the CUDA device (the DeviceDecoder, chapter 20), run by the emulator: the same promises, each
// sequence in a slot of the device's cache (9: one per sequence the calls below make).
TEST_CASE("runner on the emulator: a sequence's logits are the same bits alone, batched and chunked, and the CPU's to "
          "float32 rounding") {
  cuda::use_emulator();
  serve::ModelRunner cpu(small_model());
  serve::ModelRunner runner(small_model(), kFloat32, Device::cuda(), 9);
  CHECK(runner.device().is_cuda());
  const std::vector<std::vector<std::uint32_t>> prompts = {ids_of({1, 2, 3}), ids_of({40, 41, 12, 13, 14, 15, 16}),
                                                           ids_of({7})};
  const auto alone = run_sequences(runner, prompts, {{0}, {1}, {2}}, 64, 4);
  const auto together = run_sequences(runner, prompts, {{2, 0, 1}}, 64, 4);
  const auto chunked = run_sequences(runner, prompts, {{0, 1, 2}}, 3, 4);
  const auto on_cpu = run_sequences(cpu, prompts, {{0}, {1}, {2}}, 64, 4);
  for (std::size_t s = 0; s < prompts.size(); ++s) {
    CAPTURE(s);
    REQUIRE(alone[s].size() == 5);
    CHECK(together[s] == alone[s]);
    CHECK(chunked[s] == alone[s]);
    double worst = 0;
    for (std::size_t t = 0; t < alone[s].size(); ++t)
      for (std::size_t v = 0; v < alone[s][t].size(); ++v)
        worst = std::max(worst, std::abs(double(alone[s][t][v]) - on_cpu[s][t][v]));
    CHECK(worst < 1e-4);
  }
  // The attention map comes from the CPU's Decoder on a copy of the model: the CPU runner's.
  CHECK(runner.attention_of_last(ids_of({5, 6, 7})) == cpu.attention_of_last(ids_of({5, 6, 7})));
  // Every slot is taken now: one more sequence is a clear error.
  CHECK_THROWS_WITH_AS(runner.new_cache(), "DeviceDecoder: all 9 slots of the cache hold a sequence", Error);
}

TEST_CASE("runner on the emulator: a step that draws on the device gives sample_token's tokens from the same "
          "uniform numbers, and greedy rows their argmax") {
  cuda::use_emulator();
  serve::ModelRunner cpu(small_model());
  serve::ModelRunner runner(small_model(), kFloat32, Device::cuda(), 3);
  const std::vector<std::vector<std::uint32_t>> prompts = {ids_of({1, 2, 3}), ids_of({40, 41, 12}), ids_of({7})};
  std::vector<serve::SequenceCache> on_cpu, on_device;
  std::vector<serve::StepInput> cpu_in, device_in;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    on_cpu.push_back(cpu.new_cache()), on_device.push_back(runner.new_cache());
  }
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    cpu_in.push_back({&on_cpu[i], prompts[i], false});
    device_in.push_back({&on_device[i], prompts[i], false});
  }
  // Row 0 greedy, rows 1 and 2 sampled (top_k and top_p); each sampled row's uniform number from
  // its own generator, as the scheduler takes it.
  models::GenerateOptions o[3];
  o[0].temperature = 0.0;
  o[1].temperature = 0.8, o[1].top_k = 12;
  o[2].temperature = 1.3, o[2].top_p = 0.7;
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    const auto logits = cpu.step(cpu_in);
    for (std::size_t i = 0; i < 3; ++i) {
      Generator gen(100 * round + i), same(100 * round + i);
      serve::StepInput& in = device_in[i];
      in.draw = true;
      in.rule[0] = o[i].temperature, in.rule[1] = static_cast<double>(o[i].top_k), in.rule[2] = o[i].top_p;
      in.rule[3] = o[i].temperature > 0.0 ? gen.uniform() : 0.0;
      in.drawn = -1;
      cpu_in[i].tokens = {models::sample_token(logits[i].back(), o[i], same)};
    }
    CHECK(runner.step(device_in) == std::vector<std::vector<std::vector<float>>>(3));  // no logits come back
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(device_in[i].drawn == cpu_in[i].tokens[0]);
      device_in[i].tokens = {static_cast<std::uint32_t>(device_in[i].drawn)};
    }
  }
  device_in[1].draw = false;  // all or none
  CHECK_THROWS_WITH_AS(runner.step(device_in), doctest::Contains("for every input"), Error);
}

// ---------------------------------------------------------------------------------------------
// streamed text

TEST_CASE("text stream: an unfinished UTF-8 character and the start of a stop string are held back") {
  CHECK(serve::utf8_complete_prefix("ab") == 2);
  CHECK(serve::utf8_complete_prefix("a\xC3") == 1);              // é's first byte of two
  CHECK(serve::utf8_complete_prefix("a\xC3\xA9") == 3);          // é whole
  CHECK(serve::utf8_complete_prefix("a\xF0\x9F\x98") == 1);      // 3 of an emoji's 4 bytes
  CHECK(serve::sendable_prefix("hello wor", {"world"}) == 6);   // "wor" may become "world"
  CHECK(serve::sendable_prefix("hello", {"xyz"}) == 5);
  CHECK(serve::find_stop("say hello world", {"world", "lo"}, 0) == 7);
  CHECK(serve::find_stop("say hello", {"world"}, 0) == std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// the server on a loopback port

namespace {

struct Running {
  serve::Server server;
  int port;
  explicit Running(serve::ServerOptions o, std::function<serve::LoadedModel()> loader = small_loaded)
      : server((o.port = 0, o), std::move(loader)), port(server.bind()) {
    server.start();
  }
  bool wait_ready() {
    for (int i = 0; i < 2000 && !server.ready(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return server.ready();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    return c;
  }
  httplib::Result post(const std::string& path, const std::string& body) const {
    return client().Post(path.c_str(), body, "application/json");
  }
};

// The text of `count` greedy tokens after `prompt` from a runner's steps, one at a time.
std::string greedy_text(const Running& r, serve::ModelRunner& runner, const std::vector<std::uint32_t>& prompt,
                        int count) {
  serve::SequenceCache cache = runner.new_cache();
  std::vector<std::uint32_t> tokens = prompt, greedy;
  for (int i = 0; i < count; ++i) {
    std::vector<serve::StepInput> in{{&cache, tokens, false}};
    const std::vector<float> logits = runner.step(in)[0].back();
    const auto next = static_cast<std::uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    greedy.push_back(next), tokens = {next};
  }
  auto text = r.post("/detokenize", json{{"tokens", greedy}}.dump());
  REQUIRE(text);
  return json::parse(text->body)["content"];
}

json completion(const Running& r, json body) {
  auto res = r.post("/v1/completions", body.dump());
  REQUIRE(res);
  INFO(res->body);
  REQUIRE(res->status == 200);
  return json::parse(res->body);
}

// A counter of GET /metrics.
std::uint64_t metric_of(const Running& r, const std::string& name) {
  auto m = r.client().Get("/metrics");
  REQUIRE(m);
  const std::string key = "\n" + name + " ";
  const std::size_t at = m->body.find(key);
  REQUIRE(at != std::string::npos);
  return std::stoull(m->body.substr(at + key.size()));
}

// The (text, token_logprobs as written) of a completion: what must match bit for bit.
std::pair<std::string, std::string> outcome(const json& answer) {
  const json& choice = answer["choices"][0];
  return {choice["text"].get<std::string>(), choice["logprobs"]["token_logprobs"].dump()};
}

}  // namespace

TEST_CASE("server: health, models, completions, tokenize and detokenize") {
  serve::ServerOptions o;
  Running r(o);
  REQUIRE(r.wait_ready());
  auto health = r.client().Get("/health");
  REQUIRE(health);
  CHECK(health->status == 200);
  auto models = r.client().Get("/v1/models");
  REQUIRE(models);
  CHECK(json::parse(models->body)["data"][0]["meta"]["n_ctx"] == 48);
  CHECK(json::parse(models->body)["data"][0]["meta"]["dtype"] == "float32");
  const json a = completion(r, {{"prompt", "hello"}, {"max_tokens", 7}, {"temperature", 0}, {"logprobs", 3}});
  CHECK(a["object"] == "text_completion");
  CHECK(a["usage"]["prompt_tokens"] == 5);
  CHECK(a["usage"]["completion_tokens"] == 7);
  CHECK(a["choices"][0]["finish_reason"] == "length");
  CHECK(a["choices"][0]["logprobs"]["top_logprobs"][0].size() >= 1);
  // Greedy: the first token is the first of the top alternatives, and its logprob is theirs.
  CHECK(a["choices"][0]["logprobs"]["top_alternatives"][0][0]["logprob"] == a["choices"][0]["logprobs"]["token_logprobs"][0]);
  // The same prompt as token ids gives the same completion.
  auto tok = r.post("/tokenize", json{{"content", "hello"}}.dump());
  REQUIRE(tok);
  const json ids = json::parse(tok->body)["tokens"];
  CHECK(ids.size() == 5);
  CHECK(outcome(completion(r, {{"prompt", ids}, {"max_tokens", 7}, {"temperature", 0}, {"logprobs", 3}})) == outcome(a));
  auto detok = r.post("/detokenize", json{{"tokens", ids}}.dump());
  REQUIRE(detok);
  CHECK(json::parse(detok->body)["content"] == "hello");
  // echo: the prompt comes back first, its first token without a logprob.
  const json e = completion(r, {{"prompt", "hi"}, {"max_tokens", 2}, {"echo", true}, {"logprobs", 1}, {"temperature", 0}});
  CHECK(e["choices"][0]["text"].get<std::string>().rfind("hi", 0) == 0);
  CHECK(e["choices"][0]["logprobs"]["token_logprobs"][0].is_null());
  CHECK(e["choices"][0]["logprobs"]["token_logprobs"].size() == 4);
  // stop: the text ends before the stop string.
  const std::string text = a["choices"][0]["text"];
  const std::string stop = text.substr(3, 2);
  const json s = completion(r, {{"prompt", "hello"}, {"max_tokens", 7}, {"temperature", 0}, {"stop", stop}});
  CHECK(s["choices"][0]["finish_reason"] == "stop");
  CHECK(s["choices"][0]["text"] == text.substr(0, text.find(stop)));
  // The attention map for the page.
  auto att = r.post("/v1/attention", json{{"tokens", ids}}.dump());
  REQUIRE(att);
  CHECK(json::parse(att->body)["weights"][1][1].size() == 5);
}

TEST_CASE("server: with bfloat16 weights (--dtype bf16), a greedy completion is the runner's on those weights") {
  serve::ServerOptions o;
  o.weights = kBFloat16;
  Running r(o);
  REQUIRE(r.wait_ready());
  auto models = r.client().Get("/v1/models");
  REQUIRE(models);
  CHECK(json::parse(models->body)["data"][0]["meta"]["dtype"] == "bf16");
  auto tok = r.post("/tokenize", json{{"content", "hello"}}.dump());
  REQUIRE(tok);
  const auto prompt = json::parse(tok->body)["tokens"].get<std::vector<std::uint32_t>>();
  const json a = completion(r, {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}});
  // The same greedy tokens from a runner of its own on the same model with bfloat16 weights.
  serve::ModelRunner runner(small_model(), kBFloat16);
  CHECK(a["choices"][0]["text"] == greedy_text(r, runner, prompt, 6));
}

TEST_CASE("server: on the emulator (--device emulator), a greedy completion is the CPU runner's") {
  cuda::use_emulator();
  serve::ServerOptions o;
  o.device = Device::cuda();
  o.scheduler.slots = 2;
  Running r(o);
  REQUIRE(r.wait_ready());
  auto models = r.client().Get("/v1/models");
  REQUIRE(models);
  CHECK(json::parse(models->body)["data"][0]["meta"]["device"] == "cuda");
  const std::vector<std::uint32_t> prompt = ids_of({7, 4, 11, 11, 14});
  const json a = completion(r, {{"prompt", prompt}, {"max_tokens", 6}, {"temperature", 0}});
  serve::ModelRunner runner(small_model());
  CHECK(a["choices"][0]["text"] == greedy_text(r, runner, prompt, 6));
  auto att = r.post("/v1/attention", json{{"tokens", prompt}}.dump());
  REQUIRE(att);
  CHECK(att->status == 200);
}

TEST_CASE("server: on the emulator, a sampled completion is drawn on the device and is the CPU server's") {
  cuda::use_emulator();
  // The model's vocabulary padded past the tokenizer's by 24 ids, with random weights: their
  // logits are as large as the real ones', so a draw that reached them would soon take one; the
  // device masks them (ModelRunner::limit_draws) as the host leaves them out.
  const auto loader = [] {
    auto tok = tokenizer::TextTokenizer::train("char", kAlphabet, 0, false);
    models::GPTConfig c = small_config();
    c.vocab_size = static_cast<std::int64_t>(tok->vocab_size()) + 24;
    Generator gen(5);
    auto model = std::make_shared<models::GPT>(c, gen);
    model->eval();
    return serve::LoadedModel{model, std::move(tok)};
  };
  serve::ServerOptions on_device;
  on_device.device = Device::cuda();
  on_device.scheduler.slots = 2;
  Running cpu(serve::ServerOptions{}, loader), device(on_device, loader);
  REQUIRE((cpu.wait_ready() && device.wait_ready()));
  for (const json& body : {json{{"prompt", "the cat"}, {"max_tokens", 8}, {"temperature", 0.9}, {"top_k", 20},
                                {"top_p", 0.9}, {"seed", 11}},
                           json{{"prompt", "sat on"}, {"max_tokens", 8}, {"temperature", 0}}}) {
    CAPTURE(body.dump());
    CHECK(completion(device, body)["choices"][0]["text"] == completion(cpu, body)["choices"][0]["text"]);
  }
  // Every token of the two was drawn on the device. (The scheduler counts a step after its
  // events are sent: the count may trail the last answer by a moment.)
  bool counted = false;
  for (int i = 0; i < 200 && !counted; ++i) {
    auto metrics = device.client().Get("/metrics");
    REQUIRE(metrics);
    counted = metrics->body.find("brrr_tokens_drawn_on_device_total 16\n") != std::string::npos;
    if (!counted) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(counted);
}

TEST_CASE("server: a streamed completion is the same as the answer, ends with [DONE] and reports usage") {
  Running r(serve::ServerOptions{});
  REQUIRE(r.wait_ready());
  const json body = {{"prompt", "the cat"}, {"max_tokens", 9}, {"temperature", 0.9}, {"seed", 11}, {"logprobs", 2}};
  const json whole = completion(r, body);
  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto res = r.post("/v1/completions", streamed.dump());
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(res->get_header_value("Content-Type") == "text/event-stream");
  std::string text;
  json logprobs = json::array(), usage;
  std::size_t at = 0;
  std::vector<std::string> events;
  while ((at = res->body.find("data: ", at)) != std::string::npos) {
    const std::size_t end = res->body.find("\n\n", at);
    events.push_back(res->body.substr(at + 6, end - at - 6));
    at = end;
  }
  REQUIRE(events.size() >= 3);
  CHECK(events.back() == "[DONE]");
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    if (e["choices"].empty()) {
      usage = e["usage"];
      continue;
    }
    text += e["choices"][0]["text"].get<std::string>();
    for (const json& lp : e["choices"][0]["logprobs"]["token_logprobs"]) logprobs.push_back(lp);
  }
  CHECK(text == whole["choices"][0]["text"]);
  CHECK(logprobs == whole["choices"][0]["logprobs"]["token_logprobs"]);
  CHECK(usage["completion_tokens"] == 9);
}

// The (text, token_logprobs, top_logprobs as written) of every choice, by index.
std::vector<std::string> choices_of(const json& answer) {
  std::vector<std::string> out;
  for (const json& c : answer["choices"]) {
    CHECK(c["index"] == out.size());
    out.push_back(c["text"].dump() + c["logprobs"]["token_logprobs"].dump() + c["logprobs"]["top_logprobs"].dump());
  }
  return out;
}

TEST_CASE("server: prompt as text, token ids, or a batch of either: each prompt a choice of its own, its bits alone") {
  serve::ServerOptions o;
  o.scheduler.prefill_chunk = 5;  // several chunks per prompt: their logprobs are gathered across steps
  Running r(o);
  REQUIRE(r.wait_ready());
  const std::vector<std::string> texts = {"hello", "the quick brown fox", "a", "To be, or not to be", "x y z", "ab ab ab"};
  std::vector<std::vector<std::uint32_t>> ids;
  for (const std::string& t : texts) {
    auto tok = r.post("/tokenize", json{{"content", t}}.dump());
    REQUIRE(tok);
    ids.push_back(json::parse(tok->body)["tokens"].get<std::vector<std::uint32_t>>());
  }
  // Scoring, as lm-eval asks for it: echo, logprobs, no new token. The prompt comes back with a
  // logprob for every token but the first (null, as OpenAI's), and its alternatives as a dict.
  const json score = {{"echo", true}, {"logprobs", 1}, {"max_tokens", 0}};
  std::vector<std::string> alone;
  std::size_t prompt_tokens = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    json body = score;
    body["prompt"] = ids[i];
    const json a = completion(r, body);
    const json& c = a["choices"][0];
    CHECK(c["text"] == texts[i]);
    CHECK(c["finish_reason"] == "length");
    CHECK(c["logprobs"]["tokens"].size() == ids[i].size());
    CHECK(c["logprobs"]["token_logprobs"][0].is_null());
    CHECK(c["logprobs"]["top_logprobs"][0].is_null());
    for (std::size_t k = 1; k < ids[i].size(); ++k) {
      CHECK(c["logprobs"]["token_logprobs"][k].get<double>() <= 0.0);
      CHECK(c["logprobs"]["top_logprobs"][k].is_object());
      CHECK(c["logprobs"]["top_logprobs"][k].size() == 1);
    }
    CHECK(a["usage"]["prompt_tokens"] == ids[i].size());
    CHECK(a["usage"]["completion_tokens"] == 0);
    prompt_tokens += ids[i].size();
    alone.push_back(choices_of(a).at(0));
  }
  // The batch forms: each prompt a choice of its own, in order, the same bits as alone (the
  // steps that ran them together were batch-invariant), usage summed. (The last answer left
  // before its step was counted: wait for the server to be idle.)
  for (int i = 0; i < 200 && metric_of(r, "brrr_running_sequences") != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::uint64_t steps_before = metric_of(r, "brrr_steps_total");
  json batch = score;
  batch["prompt"] = ids;
  const json together = completion(r, batch);
  CHECK(choices_of(together) == alone);
  CHECK(together["usage"]["prompt_tokens"] == prompt_tokens);
  CHECK(together["usage"]["completion_tokens"] == 0);
  batch["prompt"] = texts;
  CHECK(choices_of(completion(r, batch)) == alone);
  // They ran beside one another: 4 slots, chunks of 5 tokens, prompts of 5, 19, 1, 19, 5 and 8
  // tokens. The first four start together; the third and first end after one step and the last
  // two take their slots; the 19-token prompts' 4 chunks are the request's 4 steps, where alone
  // the prompts took 1 + 4 + 1 + 4 + 1 + 2 = 13.
  std::uint64_t steps = 0;
  for (int i = 0; i < 200 && (steps = metric_of(r, "brrr_steps_total") - steps_before) < 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(steps == 8);  // the two batch requests, 4 steps each
  // A batch of one is the plain form.
  batch["prompt"] = json::array({texts[1]});
  CHECK(choices_of(completion(r, batch)) == std::vector<std::string>{alone[1]});
  batch["prompt"] = json::array({ids[1]});
  CHECK(choices_of(completion(r, batch)) == std::vector<std::string>{alone[1]});

  // Generation, sampled: n completions of each prompt, choice i * n + j; completion 0 of each is
  // what the prompt gets alone with the same seed, and the others differ from it.
  const json sample = {{"max_tokens", 8}, {"temperature", 1.0}, {"seed", 42}, {"logprobs", 2}};
  std::vector<std::string> first;
  for (std::size_t i = 0; i < 3; ++i) {
    json body = sample;
    body["prompt"] = texts[i];
    first.push_back(choices_of(completion(r, body)).at(0));
  }
  json several = sample;
  several["prompt"] = {texts[0], texts[1], texts[2]};
  several["n"] = 3;
  const json answer = completion(r, several);
  const std::vector<std::string> got = choices_of(answer);
  REQUIRE(got.size() == 9);
  for (std::size_t i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(got[i * 3] == first[i]);
    CHECK(got[i * 3 + 1] != got[i * 3]);
    CHECK(got[i * 3 + 2] != got[i * 3 + 1]);
  }
  CHECK(answer["usage"]["prompt_tokens"] == ids[0].size() + ids[1].size() + ids[2].size());  // once per prompt
  CHECK(answer["usage"]["completion_tokens"] == 9 * 8);

  // Streamed: each chunk one choice, its index saying which; per index, the same as the answer.
  several["stream"] = true;
  several["stream_options"] = {{"include_usage", true}};
  auto res = r.post("/v1/completions", several.dump());
  REQUIRE(res);
  REQUIRE(res->status == 200);
  std::vector<json> streamed(9, json(nullptr));
  json usage;
  std::vector<std::string> events;
  for (std::size_t at = 0; (at = res->body.find("data: ", at)) != std::string::npos;) {
    const std::size_t end = res->body.find("\n\n", at);
    events.push_back(res->body.substr(at + 6, end - at - 6));
    at = end;
  }
  REQUIRE(!events.empty());
  CHECK(events.back() == "[DONE]");
  std::size_t finished = 0;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    if (e["choices"].empty()) {
      CHECK(i + 2 == events.size());  // the usage comes last, after every choice finished
      usage = e["usage"];
      continue;
    }
    REQUIRE(e["choices"].size() == 1);
    const json& c = e["choices"][0];
    json& into = streamed.at(c["index"].get<std::size_t>());
    if (into.is_null()) into = {{"text", ""}, {"token_logprobs", json::array()}};
    into["text"] = into["text"].get<std::string>() + c["text"].get<std::string>();
    for (const json& lp : c["logprobs"]["token_logprobs"]) into["token_logprobs"].push_back(lp);
    if (!c["finish_reason"].is_null()) ++finished;
  }
  CHECK(finished == 9);
  for (std::size_t k = 0; k < 9; ++k) {
    CAPTURE(k);
    CHECK(streamed[k]["text"] == answer["choices"][k]["text"]);
    CHECK(streamed[k]["token_logprobs"] == answer["choices"][k]["logprobs"]["token_logprobs"]);
  }
  CHECK(usage == answer["usage"]);
}

TEST_CASE("server: a request of 64 prompts: 64 choices, each the bits of its prompt alone, beside other requests") {
  serve::ServerOptions o;
  o.scheduler.slots = 8;
  o.scheduler.queue = 128;  // 129 sequences at once
  Running r(o);
  REQUIRE(r.wait_ready());
  std::mt19937 rng(64);
  std::vector<std::vector<std::uint32_t>> prompts(64);
  for (auto& p : prompts) {
    p.resize(1 + rng() % 47);
    for (auto& t : p) t = static_cast<std::uint32_t>(rng() % 61);
  }
  const json score = {{"echo", true}, {"logprobs", 3}, {"max_tokens", 1}, {"temperature", 0}};
  std::vector<std::string> alone;
  for (const auto& p : prompts) {
    json body = score;
    body["prompt"] = p;
    alone.push_back(choices_of(completion(r, body)).at(0));
  }
  json batch = score;
  batch["prompt"] = prompts;
  // Twice at once, and a single-prompt request among them: all 129 sequences share the steps.
  json a, b;
  std::thread other([&] { b = completion(r, batch); });
  const json single = completion(r, {{"prompt", prompts[5]}, {"echo", true}, {"logprobs", 3}, {"max_tokens", 1},
                                     {"temperature", 0}});
  a = completion(r, batch);
  other.join();
  CHECK(choices_of(a) == alone);
  CHECK(choices_of(b) == alone);
  CHECK(choices_of(single).at(0) == alone[5]);
  std::size_t tokens = 0;
  for (const auto& p : prompts) tokens += p.size();
  CHECK(a["usage"]["prompt_tokens"] == tokens);
  CHECK(a["usage"]["completion_tokens"] == 64);
}

TEST_CASE("server: each request's tokens and logprobs are the same bits alone and among others, joining mid-way") {
  serve::ServerOptions o;
  o.scheduler.slots = 4;
  o.scheduler.threads = 2;
  Running r(o);
  REQUIRE(r.wait_ready());
  std::vector<json> bodies;
  const char* prompts[] = {"a", "the quick brown fox", "To be, or not to be", "x y z", "Hello there!", "ab ab ab ab ab"};
  for (int i = 0; i < 12; ++i)
    bodies.push_back({{"prompt", prompts[i % 6]}, {"max_tokens", 6 + 3 * (i % 5)}, {"logprobs", 2},
                      {"temperature", i % 3 == 0 ? 0.0 : 0.8}, {"seed", 100 + i}, {"top_k", i % 4 == 1 ? 5 : 0}});
  std::vector<std::pair<std::string, std::string>> alone;
  for (const json& b : bodies) alone.push_back(outcome(completion(r, b)));
  for (int round = 0; round < 2; ++round) {
    std::vector<std::size_t> order(bodies.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), std::mt19937(round));
    std::vector<std::pair<std::string, std::string>> together(bodies.size());
    std::vector<std::thread> clients;
    for (std::size_t k = 0; k < order.size(); ++k) {
      clients.emplace_back([&, k] {
        // Staggered: later requests join a batch already generating.
        std::this_thread::sleep_for(std::chrono::milliseconds(3 * k));
        auto res = r.post("/v1/completions", bodies[order[k]].dump());
        if (res && res->status == 200) together[order[k]] = outcome(json::parse(res->body));
      });
    }
    for (auto& t : clients) t.join();
    for (std::size_t i = 0; i < bodies.size(); ++i) {
      CAPTURE(i);
      CHECK(together[i] == alone[i]);
    }
  }
}

TEST_CASE("server: bad requests are 4xx with an error naming the field, and the server stays healthy") {
  serve::ServerOptions o;
  o.http.max_body_bytes = 4096;
  Running r(o);
  REQUIRE(r.wait_ready());
  auto expect = [&](const std::string& body, int status, const std::string& param, const std::string& says) {
    auto res = r.post("/v1/completions", body);
    REQUIRE(res);
    CAPTURE(body);
    CAPTURE(res->body);
    CHECK(res->status == status);
    const json e = json::parse(res->body)["error"];
    CHECK(e["code"] == status);
    if (!param.empty()) CHECK(e["param"] == param);
    CHECK(e["message"].get<std::string>().find(says) != std::string::npos);
  };
  expect("{not json", 400, "", "not valid JSON");
  expect("[1, 2]", 400, "", "JSON object");
  expect(R"({"prompt": "hi", "max_tokens": "5"})", 400, "max_tokens", "integer");
  expect(R"({"prompt": "hi", "max_tokens": -1})", 400, "max_tokens", "must be in");
  expect(R"({"prompt": "hi", "max_tokens": 1e300})", 400, "max_tokens", "integer");
  expect(R"({"prompt": "hi", "temperature": -0.5})", 400, "temperature", "must be");
  expect(R"({"prompt": "hi", "top_p": 0})", 400, "top_p", "must be");
  expect(R"({"prompt": [1, 2, 99999]})", 400, "prompt", "[0, 61)");
  expect(R"({"prompt": [1, -2]})", 400, "prompt", "[0, 61)");
  expect(R"({"prompt": ""})", 400, "prompt", "empty");
  expect(R"({"max_tokens": 3})", 400, "prompt", "required");
  expect(R"({"prompt": ")" + std::string(60, 'a') + R"("})", 400, "prompt", "context of 48 tokens");
  expect("{\"prompt\": \"\xff\xfe\"}", 400, "", "not valid JSON");
  expect(R"({"prompt": "hi", "stop": ["a", 3]})", 400, "stop", "string");
  expect(R"({"prompt": "hi", "logprobs": 100})", 400, "logprobs", "must be");
  expect(R"({"prompt": "hi", "n": 0})", 400, "n", "must be in [1, 128]");
  expect(R"({"prompt": "hi", "n": 2, "best_of": 3})", 400, "best_of", "must equal n (2)");
  // prompt in OpenAI's four forms, and what is none of them.
  expect(R"({"prompt": []})", 400, "prompt", "is an empty array");
  expect(R"({"prompt": null})", 400, "prompt", "an array of arrays of token ids, got null");
  expect(R"({"prompt": ["hi", [1, 2]]})", 400, "prompt", "not a mix: prompt[0] is a string and prompt[1] is an array");
  expect(R"({"prompt": [[1, 2], "hi"]})", 400, "prompt", "prompt[0] is an array and prompt[1] is a string");
  expect(R"({"prompt": [[1, 2], [3, 4.5]]})", 400, "prompt", "prompt[1][1] is 4.5; token ids must be integers in [0, 61)");
  expect(R"({"prompt": [[1, 2], [3, 61]]})", 400, "prompt", "prompt[1][1] is 61; token ids must be integers in [0, 61)");
  expect(R"({"prompt": [[1, 2], [3, -1]]})", 400, "prompt", "prompt[1][1] is -1");
  expect(R"({"prompt": [[1, 2], ["a"]]})", 400, "prompt", "prompt[1][0] is \"a\"");
  expect(R"({"prompt": [1, "a"]})", 400, "prompt", "token ids must be integers in [0, 61), got \"a\"");
  expect(R"({"prompt": [1.5]})", 400, "prompt", "token ids must be integers in [0, 61), got 1.5");
  expect(R"({"prompt": [[1], []]})", 400, "prompt", "prompt[1] is empty");
  expect(R"({"prompt": ["hi", ""]})", 400, "prompt", "prompt[1] is empty");
  expect(R"({"prompt": [null]})", 400, "prompt", "prompt[0] is null");
  expect(R"({"prompt": [{"a": 1}]})", 400, "prompt", "prompt[0] is an object");
  expect(json{{"prompt", {json::array({1}), json::array({1, 2}), json::array({1}), std::vector<int>(60, 1)}}}.dump(), 400,
         "prompt", "prompt[3] has 60 tokens; the model's context is 48 tokens (block_size)");
  expect(json{{"prompt", {"hi", std::string(60, 'a')}}}.dump(), 400, "prompt", "prompt[1] has 60 tokens");
  expect(json{{"prompt", std::vector<std::vector<int>>(20, {1})}, {"n", 128}}.dump(), 400, "n",
         "20 prompts x n 128 = 2560 completions, more than the 2048 a request may ask for");
  expect(R"({"prompt": ")" + std::string(5000, 'a') + R"("})", 413, "", "limit of 4096 bytes");
  // Unknown fields are ignored.
  auto ok = r.post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2, "frobnicate": {"x": 1}})");
  REQUIRE(ok);
  CHECK(ok->status == 200);
  auto missing = r.client().Get("/v2/nothing");
  REQUIRE(missing);
  CHECK(missing->status == 404);
  auto chat = r.post("/v1/chat/completions", "{}");
  REQUIRE(chat);
  CHECK(chat->status == 404);
  CHECK(json::parse(chat->body)["error"]["message"].get<std::string>().find("chat template") != std::string::npos);
  CHECK(r.client().Get("/health")->status == 200);
}

TEST_CASE("server: the API key, 503 while loading, 429 with Retry-After when the queue is full") {
  std::atomic<bool> release{false};
  serve::ServerOptions o;
  o.api_key = "sesame";
  o.scheduler.slots = 1;
  o.scheduler.queue = 1;
  Running r(o, [&] {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return small_loaded();
  });
  auto loading = r.client().Get("/health");
  REQUIRE(loading);
  CHECK(loading->status == 503);
  httplib::Client c = r.client();
  c.set_bearer_token_auth("sesame");
  auto early = c.Post("/v1/completions", R"({"prompt": "hi"})", "application/json");
  REQUIRE(early);
  CHECK(early->status == 503);
  release = true;
  REQUIRE(r.wait_ready());
  auto no_key = r.post("/v1/completions", R"({"prompt": "hi"})");
  REQUIRE(no_key);
  CHECK(no_key->status == 401);
  CHECK(c.Get("/v1/models")->status == 200);
  // One running, one waiting: more, all released at once, are refused at once.
  constexpr int kClients = 24;
  std::vector<std::thread> busy;
  std::atomic<int> refused{0}, done{0};
  std::latch start(kClients);
  for (int i = 0; i < kClients; ++i)
    busy.emplace_back([&] {
      httplib::Client k = r.client();
      k.set_bearer_token_auth("sesame");
      start.arrive_and_wait();
      auto res = k.Post("/v1/completions", R"({"prompt": "a", "max_tokens": 47})", "application/json");
      if (res && res->status == 429 && res->get_header_value("Retry-After") == "1") ++refused;
      if (res && res->status == 200) ++done;
    });
  for (auto& t : busy) t.join();
  CHECK(refused >= 1);
  CHECK(done >= 1);
  CHECK(refused + done == kClients);
}

// A completion request sent on a raw connection, which the caller closes when it likes (a
// client hanging up); returns the socket.
int post_raw(const Running& r, const std::string& body) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(r.port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  REQUIRE(::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size()));
  return fd;
}

TEST_CASE("server: a client that goes away is cancelled and frees its slot") {
  serve::ServerOptions o;
  o.scheduler.slots = 1;
  Running r(o);
  REQUIRE(r.wait_ready());
  // A raw connection: ask for a long stream, read its first event, hang up.
  // Large enough that it could not have finished: 47 tokens, each step slowed by nothing but
  // the model, yet the request must end "cancelled", not "length".
  const std::string body = R"({"prompt": "b", "max_tokens": 47, "stream": true})";
  const int fd = post_raw(r, body);
  char buffer[256];
  REQUIRE(::recv(fd, buffer, sizeof buffer, 0) > 0);
  ::close(fd);
  bool cancelled = false;
  for (int i = 0; i < 400 && !cancelled; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    auto m = r.client().Get("/metrics");
    cancelled = m && m->body.find("brrr_requests_cancelled_total 1") != std::string::npos;
  }
  // Either it was cut (cancelled) or it finished all 47 before the hang-up was seen: on this
  // model a step takes well under a millisecond, so both happen; the slot is free in both.
  const json next = completion(r, {{"prompt", "c"}, {"max_tokens", 3}});
  CHECK(next["usage"]["completion_tokens"] == 3);
  // The slot is given back at the end of the step that answered (a moment after the answer).
  bool idle = false;
  for (int i = 0; i < 400 && !idle; ++i) {
    auto m = r.client().Get("/metrics");
    idle = m && m->body.find("brrr_running_sequences 0") != std::string::npos;
    if (!idle) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK(idle);
}

// A model that always says <|endoftext|>: ln_f's output is all ones at every position (weight 0,
// bias 1) and wte's row for <|endoftext|> is all ones too, so that token's logit is n_embd (40)
// while every other token's is a sum of 40 small random weights.
serve::LoadedModel end_of_text_loaded() {
  auto tok = tokenizer::TextTokenizer::train("bpe", "hello world, hello there, hello again", 262, false);
  const std::uint32_t eos = tok->special_token("<|endoftext|>").value();
  models::GPTConfig c = small_config();
  c.vocab_size = static_cast<std::int64_t>(tok->vocab_size());
  Generator gen(3);
  auto model = std::make_shared<models::GPT>(c, gen);
  model->eval();
  float* w = model->ln_f->weight.data_ptr<float>();
  float* b = model->ln_f->bias.data_ptr<float>();
  float* row = model->wte->weight.data_ptr<float>() + static_cast<std::int64_t>(eos) * c.n_embd;
  for (std::int64_t i = 0; i < c.n_embd; ++i) w[i] = 0.0f, b[i] = 1.0f, row[i] = 1.0f;
  return {model, std::move(tok)};
}

TEST_CASE("server: a completion ends at <|endoftext|>, the token left out, unless ignore_eos") {
  CHECK(!tokenizer::TextTokenizer::train("char", kAlphabet, 0, false)->special_token("<|endoftext|>"));
  serve::ServerOptions o;
  Running r(o, end_of_text_loaded);
  REQUIRE(r.wait_ready());
  const json a = completion(r, {{"prompt", "hello"}, {"max_tokens", 5}, {"temperature", 0}, {"logprobs", 1}});
  CHECK(a["choices"][0]["finish_reason"] == "stop");
  CHECK(a["choices"][0]["text"] == "");
  CHECK(a["usage"]["completion_tokens"] == 0);
  CHECK(a["choices"][0]["logprobs"]["tokens"].empty());
  // Sampled (temperature 1) it is still the end: its probability is all but 1.
  const json s = completion(r, {{"prompt", "hello"}, {"max_tokens", 5}, {"seed", 4}});
  CHECK(s["choices"][0]["finish_reason"] == "stop");
  const json g = completion(r, {{"prompt", "hello"}, {"max_tokens", 3}, {"temperature", 0}, {"ignore_eos", true}});
  CHECK(g["choices"][0]["finish_reason"] == "length");
  CHECK(g["usage"]["completion_tokens"] == 3);
  CHECK(g["choices"][0]["text"] == "<|endoftext|><|endoftext|><|endoftext|>");
  auto bad = r.post("/v1/completions", json{{"prompt", "hello"}, {"ignore_eos", 1}}.dump());
  REQUIRE(bad);
  CHECK(bad->status == 400);
  CHECK(bad->body.find("ignore_eos") != std::string::npos);
}

TEST_CASE("server: a prompt prefilled in chunks gives the same bits as one prefilled whole, in as many steps as chunks") {
  const std::string prompt = "the quick brown fox jumps over the lazy dog";  // 43 tokens
  const json body = {{"prompt", prompt}, {"max_tokens", 5}, {"temperature", 0}, {"echo", true}, {"logprobs", 2}};
  std::vector<std::pair<std::string, std::string>> outcomes;
  for (std::size_t chunk : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}}) {
    CAPTURE(chunk);
    serve::ServerOptions o;
    o.scheduler.prefill_chunk = chunk;
    Running r(o);
    REQUIRE(r.wait_ready());
    const std::uint64_t before = metric_of(r, "brrr_steps_total");
    const json a = completion(r, body);
    // The prompt's echo carries a logprob for each of its tokens but the first.
    CHECK(a["choices"][0]["logprobs"]["token_logprobs"].size() == prompt.size() + 5);
    outcomes.push_back(outcome(a));
    // Alone on the server: ceil(43 / chunk) prefill steps (the last samples the first token),
    // then one step for each of the 4 tokens after it. The counter is bumped after the answer
    // is sent, so wait for it a moment.
    const std::uint64_t chunks = chunk == 0 ? 1 : (prompt.size() + chunk - 1) / chunk;
    std::uint64_t steps = 0;
    for (int i = 0; i < 200 && (steps = metric_of(r, "brrr_steps_total") - before) < chunks + 4; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    CHECK(steps == chunks + 4);
  }
  for (const auto& o : outcomes) CHECK(o == outcomes.front());
}

// A model slow enough that 400 tokens take a good part of a second (6 layers, 256 wide).
serve::LoadedModel slower_loaded() {
  models::GPTConfig c;
  c.vocab_size = 65, c.block_size = 512, c.n_layer = 6, c.n_head = 4, c.n_embd = 256;
  Generator gen(5);
  auto model = std::make_shared<models::GPT>(c, gen);
  model->eval();
  return {model, tokenizer::TextTokenizer::train("char", kAlphabet, 0, false)};
}

TEST_CASE("server: a client that hangs up on a non-streamed completion has it cancelled, not generated to the end") {
  serve::ServerOptions o;
  o.scheduler.slots = 1;
  Running r(o, slower_loaded);
  REQUIRE(r.wait_ready());
  // How long 400 tokens take here, asked for in full first.
  const auto t0 = std::chrono::steady_clock::now();
  const json full = completion(r, {{"prompt", "a"}, {"max_tokens", 400}, {"ignore_eos", true}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(full["usage"]["completion_tokens"] == 400);
  const std::uint64_t generated = metric_of(r, "brrr_generated_tokens_total");
  const std::string body = R"({"prompt": "a", "max_tokens": 400})";
  const int fd = post_raw(r, body);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds / 10));  // it is generating now
  ::close(fd);
  bool cancelled = false;
  for (int i = 0; i < 400 && !cancelled; ++i) {
    cancelled = metric_of(r, "brrr_requests_cancelled_total") == 1;
    if (!cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(cancelled);
  INFO("400 tokens took " << seconds << " s");
  CHECK(metric_of(r, "brrr_generated_tokens_total") - generated < 400);
  // The slot is free again: the next request is answered in full.
  CHECK(completion(r, {{"prompt", "c"}, {"max_tokens", 3}})["usage"]["completion_tokens"] == 3);
}

TEST_CASE("server: --queue 0: a request is answered when a slot is free, and refused whole when none is") {
  serve::ServerOptions o;
  o.scheduler.slots = 2;
  o.scheduler.queue = 0;
  Running r(o, slower_loaded);
  REQUIRE(r.wait_ready());
  // A slot is given back at the end of the step that answered (a moment after the answer).
  const auto idle = [&] {
    for (int i = 0; i < 400 && metric_of(r, "brrr_running_sequences") != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  // Nothing waits beyond the free slots: one request, then two prompts in one, are answered.
  CHECK(completion(r, {{"prompt", "a"}, {"max_tokens", 2}})["usage"]["completion_tokens"] == 2);
  idle();
  CHECK(completion(r, {{"prompt", {"a", "b"}}, {"max_tokens", 2}})["choices"].size() == 2);
  idle();
  // Both slots busy with a long request of two prompts: another is refused at once.
  std::thread busy([&] {
    auto res = r.post("/v1/completions", json{{"prompt", {"a", "b"}}, {"max_tokens", 400}, {"ignore_eos", true}}.dump());
    CHECK((res && res->status == 200));
  });
  for (int i = 0; i < 400 && metric_of(r, "brrr_running_sequences") < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto refused = r.post("/v1/completions", json{{"prompt", "c"}, {"max_tokens", 2}}.dump());
  REQUIRE(refused);
  CHECK(refused->status == 429);
  busy.join();
}
