// serve/api.h: the OpenAI-style JSON of brrr serve: requests read and checked, answers written.
// Chapter 20 (serving). Read before: serve/scheduler.h (CompletionParams, Event).
// Read next: serve/server.h (the HTTP routes that use these).
//
// A bad request is an ApiError: status 400 and the field it is about ("param"), as OpenAI's
// {"error": {"message", "type", "param", "code"}}. Unknown fields are ignored (clients send
// fields a server may not know), but a known field of the wrong type or out of range is an error.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "brrr/models/gpt.h"
#include "brrr/tokenizer/text_tokenizer.h"
#include "serve/scheduler.h"

namespace brrr::serve {

struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = "", std::string type = "invalid_request_error")
      : std::runtime_error(message), status(status), param(std::move(param)), type(std::move(type)) {}
  int status;
  std::string param, type;
};

// {"error": {"message": ..., "type": ..., "param": ... or null, "code": status}}
std::string error_body(const std::string& message, const std::string& type, const std::string& param, int code);

// The body as a JSON object, or a 400 naming what is wrong with it (not JSON, invalid UTF-8,
// not an object).
nlohmann::json parse_body(const std::string& body);

// The most completions (prompts x n) one request may ask for.
inline constexpr std::size_t kMaxChoices = 2048;

struct CompletionRequest {
  std::vector<std::vector<std::uint32_t>> prompts;  // one or more, each of 1 to block_size tokens
  CompletionParams params;  // what every choice shares (its prompt is left empty)
  std::size_t n = 1;        // completions per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage

  std::size_t choices() const { return prompts.size() * n; }
  // Choice k: prompt k / n, drawing from the seed's random stream k % n (OpenAI's order: every
  // completion of prompt 0, then of prompt 1, ...).
  CompletionParams choice(std::size_t k) const;
};

// POST /v1/completions: prompt, max_tokens, temperature, top_k, top_p, seed, stop, logprobs,
// echo, stream, stream_options, n, best_of (= n). prompt takes every form of OpenAI's: a
// string, an array of strings, an array of token ids, or an array of arrays of token ids; each
// prompt is a choice of its own (n of them with n). Token ids must be below vocab (the model's
// and the tokenizer's). default_seed is used when the request names none.
CompletionRequest parse_completion(const nlohmann::json& body, const tokenizer::TextTokenizer& tokenizer,
                                   const models::GPTConfig& config, std::int64_t vocab, std::uint64_t default_seed);

// Token ids from a JSON array field: each an integer in [0, vocab_size).
std::vector<std::uint32_t> token_ids(const nlohmann::json& value, const std::string& field, std::int64_t vocab_size);

// The "logprobs" object of a completion choice for these tokens (OpenAI's legacy format:
// tokens, token_logprobs, top_logprobs, text_offset) plus brrr's token_ids and
// top_alternatives ([{id, token, logprob}], best first), which the page uses. offset: the
// text_offset of the first token.
nlohmann::json logprobs_json(const std::vector<TokenInfo>& tokens, const tokenizer::TextTokenizer& tokenizer,
                             std::size_t& offset);

// JSON text of j, invalid UTF-8 (a token that ends halfway through a character) replaced by U+FFFD.
std::string dump(const nlohmann::json& j);

}  // namespace brrr::serve
