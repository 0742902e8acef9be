// serve/scheduler.cpp: the scheduler thread and continuous batching (chapter 20).
// Read before: serve/scheduler.h. Read next: serve/api.cpp.
#include "serve/scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <future>
#include <limits>
#include <numeric>

#include "brrr/parallel.h"
#include "brrr/tokenizer/bpe.h"
#include "serve/text_stream.h"

namespace brrr::serve {

namespace {

using Clock = std::chrono::steady_clock;

// The token's log-probability under softmax(logits) and the n most likely tokens (ties: lower
// id first). The log-sum-exp is summed in double, in index order.
TokenInfo token_info(const std::vector<float>& logits, std::uint32_t id, int n_top) {
  const float largest = *std::max_element(logits.begin(), logits.end());
  double total = 0.0;
  for (float l : logits) total += std::exp(static_cast<double>(l) - largest);
  const double lse = largest + std::log(total);
  TokenInfo info{id, static_cast<float>(logits[id] - lse), {}};
  if (n_top > 0) {
    std::vector<std::uint32_t> order(logits.size());
    std::iota(order.begin(), order.end(), 0u);
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(n_top), order.size());
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                      [&](std::uint32_t a, std::uint32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (std::size_t i = 0; i < n; ++i) info.top.emplace_back(order[i], static_cast<float>(logits[order[i]] - lse));
  }
  return info;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// a request's events

void Mailbox::push(Event e) {
  std::function<void()> listener;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.push_back(std::move(e));
    listener = listener_;
  }
  ready_.notify_all();
  if (listener) listener();
}

bool Mailbox::try_next(Event& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.empty()) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

void Mailbox::listen(std::function<void()> listener) {
  bool waiting = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    listener_ = listener;
    waiting = !events_.empty();
  }
  if (waiting && listener) listener();
}

bool Mailbox::next(Event& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  out = std::move(events_.front());
  events_.pop_front();
  return true;
}

// ---------------------------------------------------------------------------------------------
// the scheduler

struct Scheduler::Sequence {
  std::shared_ptr<Request> request;
  SequenceCache cache;
  Generator gen;
  bool prefilled = false, finished = false;
  std::size_t prompt_fed = 0;          // prompt tokens in the cache so far
  std::vector<TokenInfo> prompt_info;  // with echo and logprobs: prompt tokens 1, 2, ... as their logits came
  std::vector<std::uint32_t> generated;
  std::size_t text_sent = 0;  // bytes of the generated text already sent
};

Scheduler::Scheduler(ModelRunner& runner, const tokenizer::TextTokenizer& tokenizer, SchedulerOptions options)
    : runner_(runner),
      tokenizer_(tokenizer),
      options_(options),
      vocab_(std::min<std::size_t>(static_cast<std::size_t>(runner.config().vocab_size), tokenizer.vocab_size())),
      end_of_text_(tokenizer.special_token(tokenizer::kEndOfText)) {
  BRRR_CHECK(options_.slots >= 1, "brrr serve: --slots must be at least 1, got ", options_.slots);
  runner_.limit_draws(static_cast<std::int64_t>(vocab_));  // tokens drawn on the device stay the tokenizer's
  for (int i = 0; i < options_.slots; ++i) free_caches_.push_back(runner_.new_cache());
  metrics_.ttft_buckets.assign(std::size(kTtftBounds), 0);
  thread_ = std::thread([this] {
    if (options_.threads > 0) set_num_threads(options_.threads);  // the thread count is per thread
    loop();
  });
}

Scheduler::~Scheduler() { shutdown(); }

Scheduler::Submitted Scheduler::submit(const std::shared_ptr<Request>& request) {
  return submit(std::vector<std::shared_ptr<Request>>{request});
}

Scheduler::Submitted Scheduler::submit(const std::vector<std::shared_ptr<Request>>& requests) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return Submitted::kShuttingDown;
    // Sequences that the next step admits into free slots do not wait: only those beyond them
    // count against the queue (so --queue 0 means: refused unless a slot is free). A request
    // joins whole or not at all, half its prompts answered and half refused being no answer: the
    // bound is checked on arrival, and a request of more prompts than the queue holds runs when it
    // finds the queue below its bound.
    if (waiting_.size() >= options_.queue + free_caches_.size()) return Submitted::kQueueFull;
    waiting_.insert(waiting_.end(), requests.begin(), requests.end());
    metrics_.queue_depth = waiting_.size();
  }
  wake_.notify_one();
  return Submitted::kQueued;
}

void Scheduler::run_on_model(const std::function<void(ModelRunner&)>& f) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> result = done->get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    BRRR_CHECK(!stopping_, "brrr serve: the server is shutting down");
    jobs_.push_back([this, f, done] {
      try {
        f(runner_);
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
  }
  wake_.notify_one();
  result.get();
}

void Scheduler::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

Metrics Scheduler::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Metrics m = metrics_;
  m.requests_finished = finished_;
  m.requests_cancelled = cancelled_;
  if (recent_.size() >= 2) {
    std::uint64_t tokens = 0;
    for (std::size_t i = 1; i < recent_.size(); ++i) tokens += recent_[i].second;
    const double span = std::chrono::duration<double>(recent_.back().first - recent_.front().first).count();
    m.tokens_per_second = span > 0 ? static_cast<double>(tokens) / span : 0.0;
  }
  return m;
}

void Scheduler::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !jobs_.empty() || !running_.empty() || !waiting_.empty(); });
    if (stopping_) break;
    while (!jobs_.empty()) {
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
    admit(lock);
    if (running_.empty()) continue;
    lock.unlock();
    run_step();
    lock.lock();
  }
  // Shutting down: every request still here ends now, told so.
  for (auto& s : running_) finish(*s, "cancelled");
  for (auto& r : waiting_) r->push(Event{{}, {}, "", true, "cancelled"});
  cancelled_ += waiting_.size();
  running_.clear();
  waiting_.clear();
  for (auto& job : jobs_) job();  // the last attention maps: the runner outlives the scheduler
  jobs_.clear();
}

// Waiting requests take free slots, oldest first; those whose client left already are dropped.
void Scheduler::admit(std::unique_lock<std::mutex>&) {
  while (!waiting_.empty() && !free_caches_.empty()) {
    std::shared_ptr<Request> r = std::move(waiting_.front());
    waiting_.pop_front();
    if (r->cancelled) {
      r->push(Event{{}, {}, "", true, "cancelled"});
      ++cancelled_;
      continue;
    }
    auto s = std::make_unique<Sequence>();
    s->request = std::move(r);
    s->cache = std::move(free_caches_.back());
    free_caches_.pop_back();
    s->cache.clear();
    s->gen.set_state(s->request->params.sampling.seed, s->request->params.stream * kStreamBlocks);
    running_.push_back(std::move(s));
  }
  metrics_.queue_depth = waiting_.size();
  metrics_.running = running_.size();
}

void Scheduler::finish(Sequence& s, const std::string& reason, Event e) {
  s.finished = true;
  if (reason == "cancelled") ++cancelled_;
  else ++finished_;
  e.done = true;
  e.finish_reason = reason;
  s.request->push(std::move(e));
}

// One step: every running sequence's new tokens through the model together, then each samples.
void Scheduler::run_step() {
  std::vector<StepInput> inputs;
  std::vector<Sequence*> fed;
  std::uint64_t prompt_tokens = 0;
  for (auto& s : running_) {
    if (s->request->cancelled) {
      finish(*s, "cancelled");
      continue;
    }
    const CompletionParams& p = s->request->params;
    StepInput in;
    in.cache = &s->cache;
    if (!s->prefilled) {
      const std::size_t chunk = options_.prefill_chunk == 0 ? p.prompt.size() : options_.prefill_chunk;
      const std::size_t n = std::min(chunk, p.prompt.size() - s->prompt_fed);
      in.tokens.assign(p.prompt.begin() + static_cast<std::ptrdiff_t>(s->prompt_fed),
                       p.prompt.begin() + static_cast<std::ptrdiff_t>(s->prompt_fed + n));
      s->prompt_fed += n;
      in.all_logits = p.echo && p.logprobs >= 0;
      prompt_tokens += n;
    } else {
      in.tokens = {s->generated.back()};
    }
    inputs.push_back(std::move(in));
    fed.push_back(s.get());
  }
  draw_on_device(fed, inputs);
  std::uint64_t generated = 0;
  for (Sequence* s : fed) generated -= s->generated.size();  // + the sizes after: the tokens of this step
  if (!inputs.empty()) {
    try {
      const auto logits = runner_.step(inputs);
      for (std::size_t i = 0; i < fed.size(); ++i) {
        Sequence& s = *fed[i];
        if (inputs[i].all_logits) prompt_logprobs(s, logits[i]);
        if (s.prefilled || s.prompt_fed == s.request->params.prompt.size())
          advance(s, inputs[i].draw ? nullptr : &logits[i].back(), inputs[i].drawn);
      }
    } catch (const std::exception& e) {  // a bug, not a client's mistake: said, and the batch ends
      std::fprintf(stderr, "brrr serve: step failed: %s\n", e.what());
      for (Sequence* s : fed)
        if (!s->finished) finish(*s, "cancelled");
    }
  }
  for (Sequence* s : fed) generated += s->generated.size();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->finished) {
      free_caches_.push_back(std::move((*it)->cache));
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  metrics_.prompt_tokens += prompt_tokens;
  metrics_.generated_tokens += generated;
  for (const StepInput& in : inputs) metrics_.drawn_on_device += in.drawn >= 0 ? 1 : 0;
  metrics_.running = running_.size();
  ++metrics_.steps;
  const auto now = Clock::now();
  recent_.emplace_back(now, generated);
  while (recent_.size() > 2 && now - recent_.front().first > std::chrono::seconds(10)) recent_.pop_front();
}

// The logits of the tokens the tokenizer has: a model's vocabulary may be padded past it (GPT-2
// at 50,304 for the GPU's sake, chapter 17), and those ids are never sampled nor counted.
std::vector<float> Scheduler::usable(const std::vector<float>& logits) const {
  return std::vector<float>(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(std::min(vocab_, logits.size())));
}

// A prefill chunk's rows, with echo and logprobs: row r of the chunk is the prediction of the
// prompt token after it, whose logprob and alternatives are kept (not the V logits of each
// position, which would be 200 MB for a 1,024-token prompt at GPT-2's vocabulary).
void Scheduler::prompt_logprobs(Sequence& s, const std::vector<std::vector<float>>& rows) {
  const CompletionParams& p = s.request->params;
  const std::size_t first = s.prompt_fed - rows.size();  // the chunk's first position
  for (std::size_t r = 0; r < rows.size() && first + r + 1 < p.prompt.size(); ++r)
    s.prompt_info.push_back(token_info(usable(rows[r]), p.prompt[first + r + 1], p.logprobs));
}

// On the CUDA device a step draws its tokens there (one id a row comes back, not V floats) when
// every sequence in it draws a token now and none asks for log-probabilities (which need the
// logits). A model vocabulary larger than the tokenizer's (a padded one) has its extra ids'
// logits set to -infinity there first (ModelRunner::limit_draws, from the constructor), so they
// are never drawn, as usable() leaves them out on the host. Each rule takes the sequence's next uniform
// number where sample_token would have taken it, so the tokens are the same either way
// (kernels/sample_rule.h says how close).
void Scheduler::draw_on_device(const std::vector<Sequence*>& fed, std::vector<StepInput>& inputs) {
  if (!runner_.device().is_cuda()) return;
  for (std::size_t i = 0; i < fed.size(); ++i) {
    const Sequence& s = *fed[i];
    const CompletionParams& p = s.request->params;
    const bool draws_now = s.prefilled || (s.prompt_fed == p.prompt.size() && p.max_tokens > 0);
    if (!draws_now || p.logprobs >= 0 || inputs[i].all_logits) return;
  }
  for (std::size_t i = 0; i < fed.size(); ++i) {
    const models::GenerateOptions& o = fed[i]->request->params.sampling;
    StepInput& in = inputs[i];
    in.draw = true;
    in.rule[0] = o.temperature, in.rule[1] = static_cast<double>(o.top_k), in.rule[2] = o.top_p;
    in.rule[3] = o.temperature > 0.0 ? fed[i]->gen.uniform() : 0.0;
  }
}

// A sequence's last logits of this step (nullptr: its token was drawn on the device, `drawn`):
// (with echo) its prompt first, then its next token.
void Scheduler::advance(Sequence& s, const std::vector<float>* last_logits, std::int64_t drawn) {
  const CompletionParams& p = s.request->params;
  Event e;
  if (!s.prefilled) {
    s.prefilled = true;
    if (p.echo) {  // the first token has no logprob: nothing predicts it
      e.prompt.push_back(TokenInfo{p.prompt[0], std::numeric_limits<float>::quiet_NaN(), {}});
      for (std::size_t i = 1; i < p.prompt.size(); ++i)
        e.prompt.push_back(p.logprobs >= 0 ? std::move(s.prompt_info[i - 1])
                                           : TokenInfo{p.prompt[i], std::numeric_limits<float>::quiet_NaN(), {}});
      s.prompt_info = {};
    }
    if (p.max_tokens == 0) return finish(s, "length", std::move(e));
  }
  const std::vector<float> last = last_logits ? usable(*last_logits) : std::vector<float>{};
  const auto token = last_logits ? models::sample_token(last, p.sampling, s.gen) : static_cast<std::uint32_t>(drawn);
  if (end_of_text_ && token == *end_of_text_ && !p.ignore_eos) {  // the end of the document: not part of the text
    e.text = tokenizer_.decode(s.generated).substr(s.text_sent);  // with what was held back
    return finish(s, "stop", std::move(e));
  }
  // The token's logprob is a softmax over the vocabulary (50,257 exponentials at GPT-2's):
  // made only when the request asked for logprobs, the one place it is sent.
  e.tokens.push_back(p.logprobs >= 0 ? token_info(last, token, p.logprobs)
                                     : TokenInfo{token, std::numeric_limits<float>::quiet_NaN(), {}});
  s.generated.push_back(token);
  if (s.generated.size() == 1) {
    const double ttft = std::chrono::duration<double>(Clock::now() - s.request->submitted).count();
    std::lock_guard<std::mutex> lock(mutex_);
    metrics_.ttft_sum += ttft;
    ++metrics_.ttft_count;
    for (std::size_t b = 0; b < std::size(kTtftBounds); ++b)
      if (ttft <= kTtftBounds[b]) ++metrics_.ttft_buckets[b];
  }
  const std::string text = tokenizer_.decode(s.generated);
  if (const std::size_t at = find_stop(text, p.stop, s.text_sent); at != std::string::npos) {
    e.text = text.substr(s.text_sent, at - s.text_sent);  // what follows the stop string is never sent
    return finish(s, "stop", std::move(e));
  }
  // The next step would feed this token at position prompt + generated - 1: it must fit.
  const auto used = static_cast<std::int64_t>(p.prompt.size() + s.generated.size());
  if (static_cast<std::int64_t>(s.generated.size()) >= p.max_tokens || used > runner_.config().block_size) {
    e.text = text.substr(s.text_sent);  // with what was held back (an unfinished character, a stop's beginning)
    return finish(s, "length", std::move(e));
  }
  const std::size_t safe = sendable_prefix(text, p.stop);
  if (safe > s.text_sent) {
    e.text = text.substr(s.text_sent, safe - s.text_sent);
    s.text_sent = safe;
  }
  s.request->push(std::move(e));
}

}  // namespace brrr::serve
