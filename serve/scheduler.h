// serve/scheduler.h: one thread owns the model and runs every request, batched.
// Chapter 20 (serving). Read before: serve/model_runner.h. Read next: serve/api.h (the HTTP
// side that submits requests and streams their events back).
//
// HTTP connections never run the model: they submit a Request and are told of its events. The
// scheduler thread keeps up to `slots` sequences running. Every step it admits waiting
// requests into free slots (their prompt is prefilled over the next steps, at most
// prefill_chunk tokens a step, beside the others' decoding), feeds every running
// sequence its new tokens in one ModelRunner::step, samples each one's next token from its own
// seeded Generator, and drops sequences that finished or whose client went away (cancelled).
// This is continuous batching (Orca, vLLM): a request joins or leaves at any step, it never
// waits for a batch to drain. A full queue refuses at once (the API answers 429).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "brrr/models/generate.h"
#include "brrr/tokenizer/text_tokenizer.h"
#include "serve/model_runner.h"

namespace brrr::serve {

// What one completion asks for, already checked by the API (serve/api.cpp). A request of
// several prompts, or with n > 1, is a CompletionParams per choice, each its own sequence.
struct CompletionParams {
  std::vector<std::uint32_t> prompt;  // at least one token, at most block_size
  std::int64_t max_tokens = 16;
  models::GenerateOptions sampling;   // temperature (0: greedy), top_k, top_p, seed
  // Which of the seed's random streams the sampler draws from: choice j of a request's n
  // completions of a prompt draws from stream j, so they differ, and choice 0 is the completion
  // a request with n = 1 gets. Philox is counter-based: stream j starts at counter j * 2^40
  // (kStreamBlocks), a stream of its own that no completion (one draw per token) can exhaust.
  std::uint64_t stream = 0;
  std::vector<std::string> stop;      // generation ends before the first of these in its text
  int logprobs = -1;                  // -1: none; n >= 0: each token's logprob and the n most likely
  bool echo = false;                  // the prompt is part of the answer (its logprobs too)
  bool ignore_eos = false;            // go on past <|endoftext|> (llama.cpp's field; default: stop there)
};

// One token as the client sees it: its id, log-probability under the model (before temperature
// and cuts, as OpenAI reports it; NaN for the first prompt token, which nothing predicts), and
// the most likely alternatives at its position, best first.
struct TokenInfo {
  std::uint32_t id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<std::uint32_t, float>> top;
};

inline constexpr std::uint64_t kStreamBlocks = std::uint64_t{1} << 40;

// What the scheduler tells the waiting HTTP thread. Text is whole UTF-8 characters, held back
// while it could still become a stop string.
struct Event {
  std::vector<TokenInfo> prompt;  // first event only, with echo: the prompt's tokens
  std::vector<TokenInfo> tokens;  // tokens generated since the last event
  std::string text;               // their text
  bool done = false;
  std::string finish_reason;      // "stop", "length" or "cancelled", when done
  std::size_t index = 0;          // the choice it belongs to (Request::index)
};

// The events of one HTTP request, in the order they happened: every choice of the request
// pushes here, so its connection reads one queue however many prompts it sent. A connection
// does not wait on it (an I/O thread never waits): it sets a listener, which push calls on the
// scheduler's thread, and the listener has the connection take what is there (try_next).
class Mailbox {
 public:
  void push(Event e);
  // The next event, or false after timeout (for a caller that may wait: the tests).
  bool next(Event& out, std::chrono::milliseconds timeout);
  // The next event if there is one, at once.
  bool try_next(Event& out);
  // Called after every push from now on, and once now if events are already waiting. It runs
  // on the pushing thread, so it must only hand the work on (serve/http.cpp posts it).
  void listen(std::function<void()> listener);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
  std::function<void()> listener_;
};

// One completion: one sequence in the scheduler. index is its choice's place in the answer
// (prompt i's completion j of n is i * n + j, as OpenAI numbers them), which its events carry.
class Request {
 public:
  explicit Request(CompletionParams p, std::size_t index = 0, std::shared_ptr<Mailbox> mailbox = std::make_shared<Mailbox>())
      : params(std::move(p)), index(index), mailbox_(std::move(mailbox)) {}
  const CompletionParams params;
  const std::size_t index;
  std::atomic<bool> cancelled{false};  // set by the client's thread: freed at the next step
  const std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();

  void push(Event e) {
    e.index = index;
    mailbox_->push(std::move(e));
  }
  // The next event of this request's mailbox (with several choices: of any of them).
  bool next(Event& out, std::chrono::milliseconds timeout) { return mailbox_->next(out, timeout); }

 private:
  std::shared_ptr<Mailbox> mailbox_;
};

struct SchedulerOptions {
  int slots = 4;           // sequences running at once, each with its own KV cache
  // Sequences (a request's prompts x n) that may wait for a slot beyond those the free slots
  // take: a request that finds this many waiting is answered 429; one that finds fewer joins
  // with all its sequences.
  std::size_t queue = 64;
  int threads = 0;         // OpenMP threads of the model's step (0: brrr's default)
  // A prompt enters the model at most this many tokens a step (chunked prefill), so the
  // sequences already generating wait one short step for it, not one as long as the prompt
  // (0: the whole prompt in one step).
  std::size_t prefill_chunk = 64;
};

// Counters for GET /metrics (Prometheus text).
struct Metrics {
  std::uint64_t requests_finished = 0, requests_cancelled = 0, prompt_tokens = 0, generated_tokens = 0, steps = 0;
  std::uint64_t drawn_on_device = 0;  // tokens drawn on the CUDA device (no logits copied back)
  std::uint64_t queue_depth = 0, running = 0;
  double ttft_sum = 0.0;  // seconds from submit to the first generated token, summed
  std::uint64_t ttft_count = 0;
  std::vector<std::uint64_t> ttft_buckets;  // counts of TTFT <= kTtftBounds[i]
  double tokens_per_second = 0.0;           // generated tokens over the last 10 s of steps
};
inline constexpr double kTtftBounds[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0};

class Scheduler {
 public:
  Scheduler(ModelRunner& runner, const tokenizer::TextTokenizer& tokenizer, SchedulerOptions options);
  ~Scheduler();  // shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Submitted { kQueued, kQueueFull, kShuttingDown };
  Submitted submit(const std::shared_ptr<Request>& request);
  // A request's choices, queued together or refused together.
  Submitted submit(const std::vector<std::shared_ptr<Request>>& requests);

  // Runs f on the scheduler thread between two steps (the model is its alone) and waits.
  void run_on_model(const std::function<void(ModelRunner&)>& f);

  // Cancels every running and waiting request (each gets a last event, "cancelled") and stops
  // the thread. Idempotent.
  void shutdown();

  Metrics metrics() const;
  const SchedulerOptions& options() const { return options_; }
  std::size_t vocab() const { return vocab_; }

 private:
  struct Sequence;
  void loop();
  void admit(std::unique_lock<std::mutex>& lock);
  void run_step();
  void finish(Sequence& s, const std::string& reason, Event last = {});  // its last event, done
  void prompt_logprobs(Sequence& s, const std::vector<std::vector<float>>& rows);
  void draw_on_device(const std::vector<Sequence*>& fed, std::vector<StepInput>& inputs);
  void advance(Sequence& s, const std::vector<float>* last, std::int64_t drawn);
  std::vector<float> usable(const std::vector<float>& logits) const;

  ModelRunner& runner_;
  const tokenizer::TextTokenizer& tokenizer_;
  const SchedulerOptions options_;
  const std::size_t vocab_;  // ids a completion may hold: the model's and the tokenizer's both
  // <|endoftext|>'s id where the tokenizer has it: a completion that samples it ends there
  // ("stop"), as GPT-2's documents end in training and as OpenAI's and llama.cpp's servers do.
  const std::optional<std::uint32_t> end_of_text_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Request>> waiting_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::unique_ptr<Sequence>> running_;
  std::vector<SequenceCache> free_caches_;
  bool stopping_ = false;
  Metrics metrics_;
  std::atomic<std::uint64_t> finished_{0}, cancelled_{0};  // requests ended, by how
  std::deque<std::pair<std::chrono::steady_clock::time_point, std::uint64_t>> recent_;  // (step end, tokens)
  std::thread thread_;
};

}  // namespace brrr::serve
