// serve/server.cpp: the HTTP routes of brrr serve (chapter 20).
// Read before: serve/server.h, serve/api.h. Read next: serve/page.html.
#include "serve/server.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include "brrr/error.h"
#include "serve/api.h"
#include "serve/http.h"
#include "serve/model_runner.h"
#include "serve/page.h"
#include "serve/scheduler.h"

namespace brrr::serve {

using nlohmann::json;

struct Server::State {
  ServerOptions options;
  std::function<LoadedModel()> loader;
  std::unique_ptr<HttpServer> http;
  std::map<std::string, HttpHandler> routes;  // "GET /health" -> its handler
  LoadedModel loaded;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Scheduler> scheduler;
  std::atomic<bool> ready{false}, stopped{false};
  mutable std::mutex mutex;
  std::string error;  // the loader's, if it failed
  std::thread loading;
  std::atomic<std::uint64_t> next_id{1}, next_seed{0};
  std::atomic<std::uint64_t> rejected_full{0}, bad_requests{0};
  const std::int64_t created = static_cast<std::int64_t>(std::time(nullptr));

  std::int64_t vocab() const { return static_cast<std::int64_t>(scheduler->vocab()); }
  std::string load_error() const {
    std::lock_guard<std::mutex> lock(mutex);
    return error;
  }
  void add_routes();
  void handle(const HttpRequest& req, HttpResponse& res);
  void completions(const HttpRequest& req, HttpResponse& res);
  void attention(const HttpRequest& req, HttpResponse& res);
  std::string metrics_text() const;
};

namespace {

void reply(HttpResponse& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void reply_error(HttpResponse& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e.what(), e.type, e.param, e.status), "application/json");
}

// What the client sees of one stream or answer: its id, each choice's text so far, the usage.
struct Completion {
  std::string id, model;
  std::int64_t created = 0;
  int logprobs = -1;
  bool echo = false, include_usage = false;
  std::size_t n = 1;                                 // choices per prompt: choice k is prompt k / n's
  std::vector<std::vector<std::uint32_t>> prompts;
  std::vector<std::size_t> offsets;                  // each choice's text_offset so far
  std::size_t prompt_tokens = 0, completion_tokens = 0;

  // One choice's fields for an event: its text (with echo, the prompt's first) and logprobs.
  json choice(const Event& e, const tokenizer::TextTokenizer& tok) {
    std::string text = e.text;
    std::vector<TokenInfo> tokens = e.tokens;
    if (echo && !e.prompt.empty()) {
      text = tok.decode(prompts[e.index / n]) + text;
      tokens.insert(tokens.begin(), e.prompt.begin(), e.prompt.end());
    }
    completion_tokens += e.tokens.size();
    json c = {{"text", text}, {"index", e.index}, {"logprobs", nullptr},
              {"finish_reason", e.done ? json(e.finish_reason) : json(nullptr)}};
    if (logprobs >= 0) c["logprobs"] = logprobs_json(tokens, tok, offsets[e.index]);
    return c;
  }
  json usage() const {
    return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
  }
  json chunk(json choices) const {
    json j = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}, {"choices", choices}};
    if (include_usage) j["usage"] = nullptr;
    return j;
  }
};

// Merges the choice fields of successive events into one (the answer of a request not streamed).
void merge(json& into, const json& more) {
  if (into.is_null()) {
    into = more;
    return;
  }
  into["text"] = into["text"].get<std::string>() + more["text"].get<std::string>();
  into["finish_reason"] = more["finish_reason"];
  if (!more["logprobs"].is_null())
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset", "token_ids", "top_alternatives"})
      for (const json& x : more["logprobs"][key]) into["logprobs"][key].push_back(x);
}

void cancel(const std::vector<std::shared_ptr<Request>>& requests) {
  for (const auto& r : requests) r->cancelled = true;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// POST /v1/completions

void Server::State::completions(const HttpRequest& req, HttpResponse& res) {
  const json body = parse_body(req.body);
  const tokenizer::TextTokenizer& tok = *loaded.tokenizer;
  const CompletionRequest cr = parse_completion(body, tok, runner->config(), vocab(), next_seed++);
  // One sequence per choice, all reporting to one mailbox: the scheduler batches them like any
  // others, and this thread reads their events in the order they happen.
  auto mailbox = std::make_shared<Mailbox>();
  auto requests = std::make_shared<std::vector<std::shared_ptr<Request>>>();
  for (std::size_t k = 0; k < cr.choices(); ++k) requests->push_back(std::make_shared<Request>(cr.choice(k), k, mailbox));
  const Scheduler::Submitted submitted = scheduler->submit(*requests);
  if (submitted == Scheduler::Submitted::kQueueFull) {
    ++rejected_full;
    res.set_header("Retry-After", "1");
    throw ApiError(429, "the queue is full (" + std::to_string(scheduler->options().queue) +
                            " sequences waiting for a slot); retry later", "", "rate_limit_error");
  }
  if (submitted == Scheduler::Submitted::kShuttingDown)
    throw ApiError(503, "the server is shutting down", "", "unavailable_error");
  auto c = std::make_shared<Completion>();
  c->id = "cmpl-" + std::to_string(next_id++);
  c->model = options.model_name;
  c->created = static_cast<std::int64_t>(std::time(nullptr));
  c->logprobs = cr.params.logprobs;
  c->echo = cr.params.echo;
  c->include_usage = cr.include_usage;
  c->n = cr.n;
  c->prompts = cr.prompts;
  c->offsets.assign(cr.choices(), 0);
  for (const auto& p : cr.prompts) c->prompt_tokens += p.size();  // once per prompt, whatever n
  const std::size_t choices = cr.choices();
  // The answer is a stream the connection pulls from whenever the mailbox has news (serve/http.h):
  // nothing here waits for the model. When the client goes away first, its sequences are
  // cancelled and the scheduler frees their slots at the next step.
  auto stream = std::make_shared<HttpStream>();
  stream->attach = [mailbox](std::function<void()> wake) { mailbox->listen(std::move(wake)); };
  stream->gone = [requests] { cancel(*requests); };
  res.stream = stream;
  if (!cr.stream) {
    // One JSON answer, written once every choice is done.
    res.content_type = "application/json";
    stream->pull = [mailbox, c, choices, &tok, answers = std::vector<json>(choices), done = std::size_t{0}](
                       std::string& out, std::size_t) mutable {
      Event e;
      while (done < choices && mailbox->try_next(e)) {
        merge(answers[e.index], c->choice(e, tok));
        if (e.done) ++done;
      }
      if (done < choices) return false;
      out = dump(json{{"id", c->id}, {"object", "text_completion"}, {"created", c->created}, {"model", c->model},
                      {"choices", answers}, {"usage", c->usage()}});
      return true;
    };
    return;
  }
  // Streamed: one server-sent event per scheduler event, each chunk one choice (its index says
  // which); usage and [DONE] once every choice is done.
  res.set_header("Cache-Control", "no-cache");
  res.content_type = "text/event-stream";
  stream->pull = [mailbox, c, choices, &tok, done = std::size_t{0}](std::string& out, std::size_t max) mutable {
    Event e;
    while (done < choices && out.size() < max && mailbox->try_next(e)) {
      out += "data: " + dump(c->chunk(json::array({c->choice(e, tok)}))) + "\n\n";
      if (e.done && ++done == choices) {
        if (c->include_usage) {
          json last = c->chunk(json::array());
          last["usage"] = c->usage();
          out += "data: " + dump(last) + "\n\n";
        }
        out += "data: [DONE]\n\n";
      }
    }
    return done == choices;
  };
}

// ---------------------------------------------------------------------------------------------
// POST /v1/attention: the page's heat map

void Server::State::attention(const HttpRequest& req, HttpResponse& res) {
  const models::GPTConfig& config = runner->config();
  if (config.num_parameters() > options.attention_limit)
    throw ApiError(400, "attention maps are offered for models of up to " + std::to_string(options.attention_limit) +
                            " parameters; this one has " + std::to_string(config.num_parameters()));
  const json body = parse_body(req.body);
  if (!body.contains("tokens")) throw ApiError(400, "tokens: is required", "tokens");
  const std::vector<std::uint32_t> ids = token_ids(body["tokens"], "tokens", vocab());
  if (ids.empty() || static_cast<std::int64_t>(ids.size()) > config.block_size)
    throw ApiError(400, "tokens: need 1 to " + std::to_string(config.block_size) + " token ids (block_size), got " +
                            std::to_string(ids.size()), "tokens");
  std::vector<float> w;
  scheduler->run_on_model([&](ModelRunner& r) { w = r.attention_of_last(ids); });
  const std::size_t n = ids.size();
  json layers = json::array();
  for (std::int64_t l = 0; l < config.n_layer; ++l) {
    json heads = json::array();
    for (std::int64_t h = 0; h < config.n_head; ++h) {
      const float* row = w.data() + (l * config.n_head + h) * static_cast<std::int64_t>(n);
      heads.push_back(std::vector<float>(row, row + n));
    }
    layers.push_back(heads);
  }
  json pieces = json::array();
  for (std::uint32_t id : ids) pieces.push_back(loaded.tokenizer->decode(std::vector<std::uint32_t>{id}));
  reply(res, 200, {{"n_layer", config.n_layer}, {"n_head", config.n_head}, {"tokens", pieces}, {"weights", layers}});
}

// ---------------------------------------------------------------------------------------------
// GET /metrics: Prometheus text format 0.0.4

std::string Server::State::metrics_text() const {
  const Metrics m = scheduler->metrics();
  std::ostringstream out;
  auto counter = [&](const char* name, const char* help, double v, const char* type = "counter") {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << v << '\n';
  };
  counter("brrr_requests_finished_total", "Completions that ended with a stop or their length.", m.requests_finished);
  counter("brrr_requests_cancelled_total", "Completions whose client went away, or cut by shutdown.", m.requests_cancelled);
  counter("brrr_requests_rejected_total", "Completions refused with 429: the queue was full.", rejected_full.load());
  counter("brrr_prompt_tokens_total", "Prompt tokens processed (prefill).", m.prompt_tokens);
  counter("brrr_generated_tokens_total", "Tokens generated.", m.generated_tokens);
  counter("brrr_steps_total", "Batched model steps run by the scheduler.", m.steps);
  counter("brrr_tokens_drawn_on_device_total", "Tokens drawn on the CUDA device, no logits copied back.",
          m.drawn_on_device);
  counter("brrr_queue_depth", "Requests waiting for a slot.", m.queue_depth, "gauge");
  counter("brrr_running_sequences", "Sequences in the running batch.", m.running, "gauge");
  counter("brrr_open_connections", "HTTP connections open now, idle ones included.",
          static_cast<double>(http->open_connections()), "gauge");
  counter("brrr_tokens_per_second", "Tokens generated per second over the last 10 s of steps.", m.tokens_per_second, "gauge");
  out << "# HELP brrr_time_to_first_token_seconds From a request's arrival to its first generated token.\n"
      << "# TYPE brrr_time_to_first_token_seconds histogram\n";
  for (std::size_t b = 0; b < std::size(kTtftBounds); ++b)
    out << "brrr_time_to_first_token_seconds_bucket{le=\"" << kTtftBounds[b] << "\"} " << m.ttft_buckets[b] << '\n';
  out << "brrr_time_to_first_token_seconds_bucket{le=\"+Inf\"} " << m.ttft_count << '\n'
      << "brrr_time_to_first_token_seconds_sum " << m.ttft_sum << '\n'
      << "brrr_time_to_first_token_seconds_count " << m.ttft_count << '\n';
  return out.str();
}

// ---------------------------------------------------------------------------------------------
// the routes

// Every request but the page and /health needs the API key (when one is set) and the model.
void Server::State::handle(const HttpRequest& req, HttpResponse& res) {
  try {
    if (req.path != "/" && req.path != "/health") {
      if (!options.api_key.empty() && req.header("Authorization") != "Bearer " + options.api_key)
        throw ApiError(401, "a valid API key is needed: Authorization: Bearer KEY", "", "authentication_error");
      if (!ready) {
        const std::string why = load_error();
        throw ApiError(503, why.empty() ? "the model is loading" : "the model failed to load: " + why, "",
                       "unavailable_error");
      }
    }
    const auto route = routes.find(req.method + " " + req.path);
    if (route == routes.end()) throw ApiError(404, "no such route: " + req.method + " " + req.path);
    route->second(req, res);
  } catch (const ApiError& e) {
    res.stream.reset();
    reply_error(res, e);
  } catch (const std::exception& e) {
    res.stream.reset();
    reply_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "server_error"));
  }
}

void Server::State::add_routes() {
  const auto get = [this](const std::string& path, HttpHandler h) { routes["GET " + path] = std::move(h); };
  const auto post = [this](const std::string& path, HttpHandler h) { routes["POST " + path] = std::move(h); };
  get("/", [](const HttpRequest&, HttpResponse& res) {
    res.set_content(std::string(page_html()), "text/html; charset=utf-8");
  });
  get("/health", [this](const HttpRequest&, HttpResponse& res) {
    const std::string why = load_error();
    if (ready) reply(res, 200, {{"status", "ok"}});
    else reply(res, 503, why.empty() ? json{{"status", "loading"}} : json{{"status", "error"}, {"message", why}});
  });
  get("/v1/models", [this](const HttpRequest&, HttpResponse& res) {
    const models::GPTConfig& c = runner->config();
    const json meta = {{"n_ctx", c.block_size}, {"n_vocab", vocab()}, {"n_layer", c.n_layer}, {"n_head", c.n_head},
                       {"n_embd", c.n_embd}, {"n_params", c.num_parameters()}, {"slots", options.scheduler.slots},
                       {"kv_cache_bytes_per_slot", runner->cache_bytes_per_sequence()},
                       {"dtype", options.weights == kBFloat16 ? "bf16" : "float32"},
                       {"device", runner->device().is_cpu() ? "cpu" : "cuda"},
                       {"tokenizer", loaded.tokenizer->kind()}, {"attention_maps", c.num_parameters() <= options.attention_limit}};
    reply(res, 200, {{"object", "list"}, {"data", json::array({{{"id", options.model_name}, {"object", "model"},
                                                                {"created", created}, {"owned_by", "brrr"}, {"meta", meta}}})}});
  });
  post("/v1/completions", [this](const HttpRequest& req, HttpResponse& res) { completions(req, res); });
  post("/v1/chat/completions", [](const HttpRequest&, HttpResponse&) {
    throw ApiError(404, "this model has no chat template: a GPT-2 continues text and was never trained on turns of a "
                        "conversation; use /v1/completions", "", "not_found_error");
  });
  post("/tokenize", [this](const HttpRequest& req, HttpResponse& res) {
    const json body = parse_body(req.body);
    if (!body.contains("content") || !body["content"].is_string())
      throw ApiError(400, "content: must be a string", "content");
    const bool pieces = body.contains("with_pieces") && body["with_pieces"].is_boolean() && body["with_pieces"].get<bool>();
    json tokens = json::array();
    for (std::uint32_t id : loaded.tokenizer->encode(body["content"].get<std::string>())) {
      if (pieces) tokens.push_back({{"id", id}, {"piece", loaded.tokenizer->decode(std::vector<std::uint32_t>{id})}});
      else tokens.push_back(id);
    }
    reply(res, 200, {{"tokens", tokens}});
  });
  post("/detokenize", [this](const HttpRequest& req, HttpResponse& res) {
    const json body = parse_body(req.body);
    if (!body.contains("tokens")) throw ApiError(400, "tokens: is required", "tokens");
    const auto ids = token_ids(body["tokens"], "tokens", vocab());
    reply(res, 200, {{"content", loaded.tokenizer->decode(ids)}});
  });
  post("/v1/attention", [this](const HttpRequest& req, HttpResponse& res) { attention(req, res); });
  get("/metrics", [this](const HttpRequest&, HttpResponse& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });
}

// ---------------------------------------------------------------------------------------------
// the server's life

Server::Server(ServerOptions options, std::function<LoadedModel()> loader) : state_(std::make_unique<State>()) {
  state_->options = std::move(options);
  state_->loader = std::move(loader);
  state_->next_seed = std::random_device{}();
  State& s = *state_;
  s.http = std::make_unique<HttpServer>(
      s.options.http, [&s](const HttpRequest& req, HttpResponse& res) { s.handle(req, res); },
      // /v1/attention waits for the scheduler's thread (run_on_model): a worker runs it.
      [](const HttpRequest& req) { return req.path == "/v1/attention"; },
      [](int status, const std::string& message) { return error_body(message, "invalid_request_error", "", status); });
  s.add_routes();
}

Server::~Server() { stop(); }

int Server::bind() { return state_->http->bind(state_->options.host, state_->options.port); }

void Server::start() {
  State& s = *state_;
  s.http->start();
  s.loading = std::thread([&s] {
    try {
      LoadedModel m = s.loader();
      auto runner = std::make_unique<ModelRunner>(m.model, s.options.weights, s.options.device,
                                                  s.options.scheduler.slots);
      auto scheduler = std::make_unique<Scheduler>(*runner, *m.tokenizer, s.options.scheduler);
      s.loaded = std::move(m);
      s.runner = std::move(runner);
      s.scheduler = std::move(scheduler);
      s.ready = true;
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(s.mutex);
      s.error = e.what();
      std::fprintf(stderr, "brrr serve: the model failed to load: %s\n", e.what());
    }
  });
}

bool Server::ready() const { return state_->ready; }

std::string Server::load_error() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->error;
}

void Server::stop() {
  State& s = *state_;
  if (s.stopped.exchange(true)) return;
  if (s.loading.joinable()) s.loading.join();
  if (s.scheduler) s.scheduler->shutdown();  // streams get their last event and end
  s.http->stop();
}

}  // namespace brrr::serve
