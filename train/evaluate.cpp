// train/evaluate.cpp: the mean next-token loss over consecutive windows of a text.
// Chapter 08 (training: "Pretrained models"). Read before: train/evaluate.h.
#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "brrr/autograd.h"
#include "brrr/eval_mode.h"
#include "brrr/error.h"
#include "brrr/io.h"
#include "brrr/ops.h"
#include "brrr/tokenizer/shards.h"
#include "train/data.h"

namespace brrr::train {

std::vector<std::uint32_t> eval_tokens(const std::string& data, const tokenizer::TextTokenizer& tok,
                                       const std::string& tokenizer_path) {
  namespace fs = std::filesystem;
  if (!tokenizer::names_token_files(data)) return tok.encode(read_file(data));
  // The tokenizer's hash, where it is a brrr tokenizer file (a Hugging Face folder's is not in
  // the format the hash is of, so there only the vocabulary's size is compared).
  std::uint64_t hash = 0;
  if (fs::is_regular_file(tokenizer_path)) hash = tokenizer::tokenizer_hash(read_file(tokenizer_path));
  std::vector<std::uint32_t> ids;
  for (const std::string& path : tokenizer::find_shards(data)) {
    const tokenizer::MappedTokenFile file(path);
    const tokenizer::TokenFileInfo& info = file.info();
    BRRR_CHECK(info.vocab_size == 0 || info.vocab_size == tok.vocab_size(), "eval: ", path, " was written for a vocabulary of ",
               info.vocab_size, " tokens; the model's tokenizer (", tokenizer_path, ") has ", tok.vocab_size());
    BRRR_CHECK(info.tokenizer_hash == 0 || hash == 0 || info.tokenizer_hash == hash, "eval: ", path,
               " was encoded with tokenizer '", info.tokenizer_name, "' (hash ", hash_hex(info.tokenizer_hash),
               "), not with the model's ", tokenizer_path, " (hash ", hash_hex(hash), ")");
    ids.reserve(ids.size() + file.size());
    for (std::uint64_t i = 0; i < file.size(); ++i) ids.push_back(file[i]);
  }
  return ids;
}

EvalResult evaluate_tokens(models::GPT& model, const std::vector<std::uint32_t>& tokens, std::int64_t batch_size,
                           const std::function<void(std::int64_t, std::int64_t)>& progress) {
  const std::int64_t n = static_cast<std::int64_t>(tokens.size()), B = model.config().block_size;
  BRRR_CHECK(n >= 2, "eval: the text has ", n, " token", n == 1 ? "" : "s", "; at least 2 are needed to predict one");
  BRRR_CHECK(batch_size >= 1, "eval: batch_size must be positive, got ", batch_size);
  for (std::uint32_t t : tokens)
    BRRR_CHECK(t < model.config().vocab_size, "eval: token ", t, " is outside the model's vocabulary (",
               model.config().vocab_size, ")");
  NoGradGuard no_grad;
  const nn::EvalModeGuard eval_mode(model);
  const std::int64_t total = n - 1;
  double sum = 0;  // of the per-token losses, in double: 1e6 tokens of float sums would drift
  // Windows start at 0, B, 2B, ...; a window starting at s predicts t[s+1 .. s+len].
  std::vector<std::int64_t> x, y;
  std::int64_t rows = 0, len = 0;
  auto flush = [&] {
    if (rows == 0) return;
    const Tensor logits = model.forward(from_vector(x, {rows, len}, kInt64));
    const Tensor loss = model.loss(logits, from_vector(y, {rows, len}, kInt64));
    sum += loss.item() * static_cast<double>(rows * len);
    x.clear(), y.clear(), rows = 0;
  };
  std::int64_t done = 0;
  for (std::int64_t s = 0; s < total; s += B) {
    const std::int64_t l = std::min(B, total - s);
    if (rows > 0 && l != len) flush();  // the shorter last window goes alone
    len = l;
    for (std::int64_t i = 0; i < l; ++i) x.push_back(tokens[s + i]), y.push_back(tokens[s + i + 1]);
    ++rows;
    done += l;
    if (rows == batch_size || done == total) {
      flush();
      if (progress) progress(done, total);
    }
  }
  EvalResult r;
  r.predicted = total;
  r.loss = sum / static_cast<double>(total);
  r.perplexity = std::exp(r.loss);
  return r;
}

namespace {

// The definition through a Decoder: `pass(window, len)` feeds one window from a fresh start and
// returns the logits of its every row (len, V), on the host.
EvalResult evaluate_windows(const models::GPTConfig& c, const std::vector<std::uint32_t>& tokens,
                            const std::function<const float*(const std::uint32_t*, std::int64_t)>& pass,
                            const std::function<void(std::int64_t, std::int64_t)>& progress) {
  const std::int64_t n = static_cast<std::int64_t>(tokens.size()), B = c.block_size, V = c.vocab_size;
  BRRR_CHECK(n >= 2, "eval: the text has ", n, " token", n == 1 ? "" : "s", "; at least 2 are needed to predict one");
  for (std::uint32_t t : tokens)
    BRRR_CHECK(t < V, "eval: token ", t, " is outside the model's vocabulary (", V, ")");
  const std::int64_t total = n - 1;
  double sum = 0;
  for (std::int64_t s = 0; s < total; s += B) {
    const std::int64_t len = std::min(B, total - s);
    const float* logits = pass(tokens.data() + s, len);
    for (std::int64_t i = 0; i < len; ++i) {
      const float* row = logits + i * V;
      const double top = *std::max_element(row, row + V);
      double total_exp = 0;
      for (std::int64_t v = 0; v < V; ++v) total_exp += std::exp(static_cast<double>(row[v]) - top);
      sum += top + std::log(total_exp) - row[tokens[s + i + 1]];
    }
    if (progress) progress(s + len, total);
  }
  EvalResult r;
  r.predicted = total;
  r.loss = sum / static_cast<double>(total);
  r.perplexity = std::exp(r.loss);
  return r;
}

// 0, 1, ..., n - 1: every row of a window wanted.
std::vector<std::int64_t> every_row(std::int64_t n) {
  std::vector<std::int64_t> every(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) every[i] = i;
  return every;
}

}  // namespace

EvalResult evaluate_tokens(models::Decoder& decoder, const std::vector<std::uint32_t>& tokens,
                           const std::function<void(std::int64_t, std::int64_t)>& progress) {
  const std::vector<std::int64_t> every = every_row(decoder.config().block_size);
  return evaluate_windows(decoder.config(), tokens, [&](const std::uint32_t* window, std::int64_t len) {
    models::DecodeState state;
    models::DecodeState* states[] = {&state};
    return decoder.forward(states, &len, 1, window, every.data(), len);
  }, progress);
}

EvalResult evaluate_tokens(models::DeviceDecoder& decoder, const std::vector<std::uint32_t>& tokens,
                           const std::function<void(std::int64_t, std::int64_t)>& progress) {
  const std::vector<std::int64_t> every = every_row(decoder.config().block_size);
  struct Slot {  // the sequence's slot, given back however the evaluation ends
    models::DeviceDecoder& decoder;
    models::DeviceDecodeState state;
    ~Slot() { decoder.release(state); }
  } slot{decoder, decoder.acquire()};
  return evaluate_windows(decoder.config(), tokens, [&](const std::uint32_t* window, std::int64_t len) {
    slot.state.clear();
    models::DeviceDecodeState* states[] = {&slot.state};
    return decoder.forward(states, &len, 1, window, every.data(), len);
  }, progress);
}

}  // namespace brrr::train
