// serve/api.cpp: reading and checking completion requests, writing their answers (chapter 20).
// Read before: serve/api.h. Read next: serve/server.cpp.
#include "serve/api.h"

#include <cmath>
#include <limits>

namespace brrr::serve {

namespace {

using nlohmann::json;

ApiError bad(const std::string& field, const std::string& what) { return ApiError(400, field + ": " + what, field); }

// An integer field in [lo, hi]: a JSON integer (1.0 and "1" are not).
std::int64_t integer(const json& body, const std::string& field, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
  if (!body.contains(field) || body[field].is_null()) return fallback;
  const json& v = body[field];
  if (!v.is_number_integer()) throw bad(field, "must be an integer, got " + v.dump());
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
    throw bad(field, "must be at most " + std::to_string(hi) + ", got " + v.dump());
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi)
    throw bad(field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v.dump());
  return x;
}

std::string shortest(double x) { return json(x).dump(); }  // 0.0, 1.0, 100.0

double number(const json& body, const std::string& field, double fallback, double lo, double hi, bool open_lo = false) {
  if (!body.contains(field) || body[field].is_null()) return fallback;
  const json& v = body[field];
  if (!v.is_number()) throw bad(field, "must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (open_lo && x == lo))
    throw bad(field, std::string("must be a finite number in ") + (open_lo ? "(" : "[") + shortest(lo) + ", " +
                         shortest(hi) + "], got " + v.dump());
  return x;
}

bool boolean(const json& body, const std::string& field) {
  if (!body.contains(field) || body[field].is_null()) return false;
  if (!body[field].is_boolean()) throw bad(field, "must be true or false, got " + body[field].dump());
  return body[field].get<bool>();
}

std::vector<std::string> stops(const json& body) {
  if (!body.contains("stop") || body["stop"].is_null()) return {};
  const json& v = body["stop"];
  std::vector<std::string> out;
  if (v.is_string()) out.push_back(v.get<std::string>());
  else if (v.is_array() && v.size() <= 4) {
    for (const json& s : v) {
      if (!s.is_string()) throw bad("stop", "each stop sequence must be a string, got " + s.dump());
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad("stop", "must be a string or an array of at most 4 strings");
  }
  for (const std::string& s : out)
    if (s.empty()) throw bad("stop", "a stop sequence must not be empty");
  return out;
}

// The JSON type of a prompt element, as an error names it.
std::string kind_of(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  if (v.is_boolean()) return "a boolean";
  return "null";
}

const char* kPromptForms = "must be a string, an array of strings, an array of token ids, or an array of arrays of token ids";

// One prompt's token ids (an array of integers), named `where` in errors ("prompt[2]").
std::vector<std::uint32_t> prompt_ids(const json& v, const std::string& where, std::int64_t vocab) {
  std::vector<std::uint32_t> ids;
  for (std::size_t k = 0; k < v.size(); ++k) {
    const json& t = v[k];
    if (!t.is_number_integer() || (!t.is_number_unsigned() && t.get<std::int64_t>() < 0) ||
        (t.is_number_unsigned() && t.get<std::uint64_t>() >= static_cast<std::uint64_t>(vocab)))
      throw bad("prompt", where + "[" + std::to_string(k) + "] is " + t.dump() + "; token ids must be integers in [0, " +
                              std::to_string(vocab) + ")");
    ids.push_back(t.get<std::uint32_t>());
  }
  return ids;
}

// prompt in any of OpenAI's four forms: "text", ["text", ...], [ids], [[ids], ...]. Every prompt
// must have 1 to block_size tokens; an error names the prompt (prompt[3]) when there are several.
std::vector<std::vector<std::uint32_t>> prompts_of(const json& body, const tokenizer::TextTokenizer& tokenizer,
                                                   const models::GPTConfig& config, std::int64_t vocab) {
  if (!body.contains("prompt")) throw bad("prompt", "is required");
  const json& v = body["prompt"];
  const std::string context = std::to_string(config.block_size) + " tokens (block_size)";
  if (v.is_string() || (v.is_array() && !v.empty() && v[0].is_number())) {  // one prompt
    std::vector<std::uint32_t> ids;
    if (v.is_string()) ids = tokenizer.encode(v.get<std::string>());
    else ids = token_ids(v, "prompt", vocab);
    if (ids.empty()) throw bad("prompt", "is empty: at least one token is needed");
    if (static_cast<std::int64_t>(ids.size()) > config.block_size)
      throw bad("prompt", "is " + std::to_string(ids.size()) + " tokens, longer than the model's context of " + context);
    return {ids};
  }
  if (!v.is_array()) throw bad("prompt", std::string(kPromptForms) + ", got " + kind_of(v));
  if (v.empty()) throw bad("prompt", "is an empty array: it " + std::string(kPromptForms));
  // A batch: every element a string, or every element an array of token ids.
  const bool texts = v[0].is_string();
  if (!texts && !v[0].is_array()) throw bad("prompt", std::string(kPromptForms) + "; prompt[0] is " + kind_of(v[0]));
  if (v.size() > kMaxChoices)
    throw bad("prompt", "has " + std::to_string(v.size()) + " prompts, more than the " + std::to_string(kMaxChoices) +
                            " a request may hold");
  std::vector<std::vector<std::uint32_t>> prompts;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string where = "prompt[" + std::to_string(i) + "]";
    if (v[i].is_string() != texts || v[i].is_array() == texts)
      throw bad("prompt", std::string(kPromptForms) + ", not a mix: prompt[0] is " + kind_of(v[0]) + " and " + where +
                              " is " + kind_of(v[i]));
    std::vector<std::uint32_t> ids = texts ? tokenizer.encode(v[i].get<std::string>()) : prompt_ids(v[i], where, vocab);
    if (ids.empty()) throw bad("prompt", where + " is empty: every prompt needs at least one token");
    if (static_cast<std::int64_t>(ids.size()) > config.block_size)
      throw bad("prompt", where + " has " + std::to_string(ids.size()) + " tokens; the model's context is " + context);
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

}  // namespace

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string error_body(const std::string& message, const std::string& type, const std::string& param, int code) {
  return dump(json{{"error", {{"message", message}, {"type", type}, {"param", param.empty() ? json(nullptr) : json(param)},
                              {"code", code}}}});
}

json parse_body(const std::string& body) {
  json j;
  try {
    j = json::parse(body);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (const std::size_t at = what.find("] "); at != std::string::npos) what = what.substr(at + 2);
    throw ApiError(400, "the body is not valid JSON: " + what);
  }
  if (!j.is_object()) throw ApiError(400, "the body must be a JSON object, got " + std::string(j.type_name()));
  return j;
}

std::vector<std::uint32_t> token_ids(const json& value, const std::string& field, std::int64_t vocab_size) {
  if (!value.is_array()) throw bad(field, "must be an array of token ids");
  std::vector<std::uint32_t> ids;
  for (const json& t : value) {
    if (!t.is_number_integer() || (!t.is_number_unsigned() && t.get<std::int64_t>() < 0) ||
        (t.is_number_unsigned() && t.get<std::uint64_t>() >= static_cast<std::uint64_t>(vocab_size)))
      throw bad(field, "token ids must be integers in [0, " + std::to_string(vocab_size) + "), got " + t.dump());
    ids.push_back(t.get<std::uint32_t>());
  }
  return ids;
}

CompletionRequest parse_completion(const json& body, const tokenizer::TextTokenizer& tokenizer,
                                   const models::GPTConfig& config, std::int64_t vocab, std::uint64_t default_seed) {
  CompletionRequest r;
  CompletionParams& p = r.params;
  if (body.contains("model") && !body["model"].is_null() && !body["model"].is_string())
    throw bad("model", "must be a string");
  r.prompts = prompts_of(body, tokenizer, config, vocab);
  r.n = static_cast<std::size_t>(integer(body, "n", 1, 1, 128));
  if (r.choices() > kMaxChoices)
    throw bad("n", std::to_string(r.prompts.size()) + " prompts x n " + std::to_string(r.n) + " = " +
                       std::to_string(r.choices()) + " completions, more than the " + std::to_string(kMaxChoices) +
                       " a request may ask for");
  const auto n = static_cast<std::int64_t>(r.n);
  if (integer(body, "best_of", n, 1, 128) != n)
    throw bad("best_of", "must equal n (" + std::to_string(n) + "): every completion made is returned, none is chosen "
                         "among them, got " + body["best_of"].dump());
  p.max_tokens = integer(body, "max_tokens", 16, 0, config.block_size);
  p.sampling.temperature = number(body, "temperature", 1.0, 0.0, 100.0);
  p.sampling.top_k = integer(body, "top_k", 0, 0, vocab);
  p.sampling.top_p = number(body, "top_p", 1.0, 0.0, 1.0, true);
  p.sampling.seed = body.contains("seed") && !body["seed"].is_null()
                        ? static_cast<std::uint64_t>(integer(body, "seed", 0, 0, std::numeric_limits<std::int64_t>::max()))
                        : default_seed;
  p.stop = stops(body);
  p.logprobs = static_cast<int>(integer(body, "logprobs", -1, 0, 20));
  p.echo = boolean(body, "echo");
  p.ignore_eos = boolean(body, "ignore_eos");
  r.stream = boolean(body, "stream");
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& o = body["stream_options"];
    if (!o.is_object()) throw bad("stream_options", "must be an object");
    r.include_usage = boolean(o, "include_usage");
  }
  return r;
}

CompletionParams CompletionRequest::choice(std::size_t k) const {
  CompletionParams p = params;
  p.prompt = prompts[k / n];
  p.stream = k % n;
  return p;
}

json logprobs_json(const std::vector<TokenInfo>& tokens, const tokenizer::TextTokenizer& tokenizer, std::size_t& offset) {
  json pieces = json::array(), logprobs = json::array(), tops = json::array(), offsets = json::array(),
       ids = json::array(), alternatives = json::array();
  auto piece = [&](std::uint32_t id) { return tokenizer.decode(std::vector<std::uint32_t>{id}); };
  for (const TokenInfo& t : tokens) {
    const std::string text = piece(t.id);
    pieces.push_back(text);
    ids.push_back(t.id);
    offsets.push_back(offset);
    offset += text.size();
    const bool known = !std::isnan(t.logprob);
    logprobs.push_back(known ? json(t.logprob) : json(nullptr));
    json top = json::object(), alt = json::array();
    for (const auto& [id, lp] : t.top) {
      const std::string p = piece(id);
      if (!top.contains(p)) top[p] = lp;
      alt.push_back({{"id", id}, {"token", p}, {"logprob", lp}});
    }
    tops.push_back(known ? top : json(nullptr));
    alternatives.push_back(alt);
  }
  return {{"tokens", pieces},  {"token_logprobs", logprobs}, {"top_logprobs", tops},
          {"text_offset", offsets}, {"token_ids", ids}, {"top_alternatives", alternatives}};
}

}  // namespace brrr::serve
