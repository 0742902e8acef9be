// serve/server.cpp: the HTTP routes of brrr serve (chapter 20).
// Read before: serve/server.h, serve/api.h. Read next: serve/page.html.
#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <random>
#include <sstream>

#include "brrr/error.h"
#include "serve/api.h"
#include "serve/model_runner.h"
#include "serve/page.h"
#include "serve/scheduler.h"

namespace brrr::serve {

using nlohmann::json;

struct Server::State {
  ServerOptions options;
  std::function<LoadedModel()> loader;
  httplib::Server http;
  LoadedModel loaded;
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Scheduler> scheduler;
  std::atomic<bool> ready{false}, stopped{false};
  mutable std::mutex mutex;
  std::string error;  // the loader's, if it failed
  std::thread listener, loading;
  int socket_fd = -1;  // the listening socket, whose backlog bind() raises
  std::atomic<std::uint64_t> next_id{1}, next_seed{0};
  std::atomic<std::uint64_t> rejected_full{0}, bad_requests{0};
  const std::int64_t created = static_cast<std::int64_t>(std::time(nullptr));

  std::int64_t vocab() const { return static_cast<std::int64_t>(scheduler->vocab()); }
  std::string load_error() const {
    std::lock_guard<std::mutex> lock(mutex);
    return error;
  }
  void routes();
  void completions(const httplib::Request& req, httplib::Response& res);
  void attention(const httplib::Request& req, httplib::Response& res);
  std::string metrics_text() const;
};

namespace {

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void reply_error(httplib::Response& res, const ApiError& e) {
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

void Server::State::completions(const httplib::Request& req, httplib::Response& res) {
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
  if (!cr.stream) {
    // One JSON answer at the end. A closed connection shows only when something is written to
    // it (the write fails), so while the answer is being generated the provider writes a space
    // every 100 ms (JSON allows whitespace before a value): a client that went away is seen
    // within two of them and its request cancelled, instead of generated to the end for nobody.
    res.set_chunked_content_provider(
        "application/json",
        [requests, c, choices, &tok, answers = std::vector<json>(choices), done = std::size_t{0}](
            std::size_t, httplib::DataSink& sink) mutable {
          auto last_write = std::chrono::steady_clock::now();
          Request& any = *requests->front();
          while (done < choices) {
            Event e;
            const bool got = any.next(e, std::chrono::milliseconds(50));
            if (std::chrono::steady_clock::now() - last_write > std::chrono::milliseconds(100)) {
              if (!sink.write(" ", 1)) {
                cancel(*requests);
                return false;
              }
              last_write = std::chrono::steady_clock::now();
            }
            if (!got) continue;
            merge(answers[e.index], c->choice(e, tok));
            if (e.done) ++done;
          }
          const std::string out = dump(json{{"id", c->id}, {"object", "text_completion"}, {"created", c->created},
                                            {"model", c->model}, {"choices", answers}, {"usage", c->usage()}});
          if (!sink.write(out.data(), out.size())) return false;
          sink.done();
          return true;
        },
        [requests](bool) { cancel(*requests); });
    return;
  }
  // Streamed: one server-sent event per scheduler event, each chunk one choice (its index says
  // which); usage and [DONE] once every choice is done. A client that went away is noticed
  // within 50 ms (its socket is no longer writable) and its sequences are freed at the next step.
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [requests, c, choices, &tok, done = std::size_t{0}](std::size_t, httplib::DataSink& sink) mutable {
        Event e;
        while (!requests->front()->next(e, std::chrono::milliseconds(50)))
          if (!sink.is_writable()) {
            cancel(*requests);
            return false;
          }
        std::string out = "data: " + dump(c->chunk(json::array({c->choice(e, tok)}))) + "\n\n";
        if (e.done && ++done == choices) {
          if (c->include_usage) {
            json last = c->chunk(json::array());
            last["usage"] = c->usage();
            out += "data: " + dump(last) + "\n\n";
          }
          out += "data: [DONE]\n\n";
        }
        if (!sink.write(out.data(), out.size())) {
          cancel(*requests);
          return false;
        }
        if (done == choices) sink.done();
        return true;
      },
      [requests](bool) { cancel(*requests); });  // ended either way: nothing more to compute
}

// ---------------------------------------------------------------------------------------------
// POST /v1/attention: the page's heat map

void Server::State::attention(const httplib::Request& req, httplib::Response& res) {
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
  counter("brrr_queue_depth", "Requests waiting for a slot.", m.queue_depth, "gauge");
  counter("brrr_running_sequences", "Sequences in the running batch.", m.running, "gauge");
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

void Server::State::routes() {
  // API key and loading: checked before any route but the page and /health.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/" || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (!options.api_key.empty() && req.get_header_value("Authorization") != "Bearer " + options.api_key) {
      reply_error(res, ApiError(401, "a valid API key is needed: Authorization: Bearer KEY", "", "authentication_error"));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (!ready) {
      const std::string why = load_error();
      reply_error(res, ApiError(503, why.empty() ? "the model is loading" : "the model failed to load: " + why, "",
                                "unavailable_error"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Any error without a body of its own (no such route, a body over the limit) gets one.
  http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "error " + std::to_string(res.status);
    if (res.status == 404) message = "no such route: " + req.method + " " + req.path;
    if (res.status == 413) message = "the body is over the limit of " + std::to_string(options.max_body_bytes) + " bytes";
    if (res.status == 400) message = "the request could not be read";
    res.set_content(error_body(message, "invalid_request_error", "", res.status), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    try {
      std::rethrow_exception(ep);
    } catch (const ApiError& e) {
      reply_error(res, e);
    } catch (const std::exception& e) {
      reply_error(res, ApiError(500, std::string("internal error: ") + e.what(), "", "server_error"));
    }
  });
  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(page_html()), "text/html; charset=utf-8");
  });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const std::string why = load_error();
    if (ready) reply(res, 200, {{"status", "ok"}});
    else reply(res, 503, why.empty() ? json{{"status", "loading"}} : json{{"status", "error"}, {"message", why}});
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const models::GPTConfig& c = runner->config();
    const json meta = {{"n_ctx", c.block_size}, {"n_vocab", vocab()}, {"n_layer", c.n_layer}, {"n_head", c.n_head},
                       {"n_embd", c.n_embd}, {"n_params", c.num_parameters()}, {"slots", options.scheduler.slots},
                       {"kv_cache_bytes_per_slot", runner->cache_bytes_per_sequence()},
                       {"dtype", options.weights == kBFloat16 ? "bf16" : "float32"},
                       {"tokenizer", loaded.tokenizer->kind()}, {"attention_maps", c.num_parameters() <= options.attention_limit}};
    reply(res, 200, {{"object", "list"}, {"data", json::array({{{"id", options.model_name}, {"object", "model"},
                                                                {"created", created}, {"owned_by", "brrr"}, {"meta", meta}}})}});
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { completions(req, res); });
  http.Post("/v1/chat/completions", [](const httplib::Request&, httplib::Response&) {
    throw ApiError(404, "this model has no chat template: a GPT-2 continues text and was never trained on turns of a "
                        "conversation; use /v1/completions", "", "not_found_error");
  });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
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
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    const json body = parse_body(req.body);
    if (!body.contains("tokens")) throw ApiError(400, "tokens: is required", "tokens");
    const auto ids = token_ids(body["tokens"], "tokens", vocab());
    reply(res, 200, {{"content", loaded.tokenizer->decode(ids)}});
  });
  http.Post("/v1/attention", [this](const httplib::Request& req, httplib::Response& res) { attention(req, res); });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
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
  // One thread per open connection: every slot and queue place may hold a stream, and a few more
  // answer /health, /metrics and the page meanwhile.
  const SchedulerOptions& so = s.options.scheduler;
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(so.slots) + so.queue + 16, 1024);
  s.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.http.set_payload_max_length(s.options.max_body_bytes);
  s.http.set_tcp_nodelay(true);
  s.http.set_socket_options([&s](socket_t sock) {
    httplib::default_socket_options(sock);  // SO_REUSEADDR, as without this callback
    s.socket_fd = sock;
  });  // each event leaves at once (Nagle would hold small writes for an ACK)
  s.routes();
}

Server::~Server() { stop(); }

int Server::bind() {
  State& s = *state_;
  const int port = s.options.port == 0 ? s.http.bind_to_any_port(s.options.host)
                   : s.http.bind_to_port(s.options.host, s.options.port) ? s.options.port : -1;
  BRRR_CHECK(port > 0, "brrr serve: cannot listen on ", s.options.host, ":", s.options.port,
             " (the port is in use, or the host is not an address of this machine)");
  // cpp-httplib listens with a backlog of 5 connections (CPPHTTPLIB_LISTEN_BACKLOG, fixed when
  // Debian built it): a burst of clients connecting at once overflowed it and some got their
  // connection reset (tests/serve's 24 at once did). Listening again on the socket raises it.
  if (s.socket_fd >= 0) ::listen(s.socket_fd, SOMAXCONN);
  return port;
}

void Server::start() {
  State& s = *state_;
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
  s.loading = std::thread([&s] {
    try {
      LoadedModel m = s.loader();
      auto runner = std::make_unique<ModelRunner>(m.model, s.options.weights);
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
  s.http.stop();
  if (s.listener.joinable()) s.listener.join();
}

}  // namespace brrr::serve
