// train/config.cpp: TrainConfig: the presets (the model's shape from its own preset, the
// training settings here), the JSON form of a run's settings, and their validation.
// Chapter 08 (training). Read before: trainer.h.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "brrr/strings.h"
#include "brrr/error.h"
#include "brrr/models/gpt.h"
#include "train/trainer.h"

namespace brrr::train {

using Json = nlohmann::json;

TrainConfig TrainConfig::from_preset(const std::string& name) {
  const std::vector<std::string> names = preset_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    detail::fail("unknown preset '", name, "' (presets: ", join(names), ")");
  }
  // The model's shape is defined once, by the model's own preset; a training preset adds how
  // to train it (and, for a BPE model, the vocabulary its tokenizer must have).
  const models::GPTConfig model = models::gpt_preset(name);
  TrainConfig c;
  c.preset = name;
  c.n_layer = model.n_layer, c.n_head = model.n_head, c.n_embd = model.n_embd, c.block_size = model.block_size;
  c.dropout = model.dropout;
  if (name == "cpu-tiny") {
    // nanoGPT's shakespeare_char config with the README's CPU overrides: the defaults above.
  } else if (name == "shakespeare-char") {
    c.batch_size = 64, c.max_iters = 5000, c.lr_decay_iters = 5000, c.eval_interval = 250, c.eval_iters = 200;
  } else if (name == "gpt-12m") {
    c.tokenizer = "bpe", c.bpe_vocab_size = static_cast<int>(model.vocab_size);
    c.batch_size = 32, c.max_iters = 5000, c.lr_decay_iters = 5000, c.learning_rate = 6e-4, c.min_lr = 6e-5;
    c.beta2 = 0.95, c.eval_iters = 50;
  }
  return c;
}

std::vector<std::string> TrainConfig::preset_names() { return {"cpu-tiny", "shakespeare-char", "gpt-12m"}; }

namespace {
// One table of every key, so JSON in and JSON out cannot drift apart.
template <class F>
void for_each_field(TrainConfig& c, F&& f) {
  f("preset", c.preset), f("n_layer", c.n_layer), f("n_head", c.n_head), f("n_embd", c.n_embd);
  f("block_size", c.block_size), f("dropout", c.dropout), f("bias", c.bias), f("composed", c.composed);
  f("data", c.data), f("tokenizer", c.tokenizer), f("bpe_vocab_size", c.bpe_vocab_size), f("val_fraction", c.val_fraction);
  f("batch_size", c.batch_size), f("grad_accum", c.grad_accum), f("max_iters", c.max_iters);
  f("warmup_iters", c.warmup_iters), f("lr_decay_iters", c.lr_decay_iters), f("learning_rate", c.learning_rate);
  f("min_lr", c.min_lr), f("weight_decay", c.weight_decay), f("beta1", c.beta1), f("beta2", c.beta2);
  f("grad_clip", c.grad_clip), f("eval_interval", c.eval_interval), f("eval_iters", c.eval_iters);
  f("log_interval", c.log_interval), f("checkpoint_interval", c.checkpoint_interval);
  f("keep_checkpoints", c.keep_checkpoints), f("sample_tokens", c.sample_tokens), f("out_dir", c.out_dir);
  f("device", c.device), f("seed", c.seed), f("threads", c.threads), f("profile", c.profile);
}
}  // namespace

void TrainConfig::apply_json(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    detail::fail("config: invalid JSON: ", e.what());
  }
  BRRR_CHECK(j.is_object(), "config: expected a JSON object, got ", j.type_name());
  if (j.contains("preset")) {  // a preset sets the defaults the other keys then override
    BRRR_CHECK(j["preset"].is_string(), "config: 'preset' must be a string");
    const std::string out = out_dir, data_path = data;
    *this = from_preset(j["preset"].get<std::string>());
    out_dir = out, data = data_path;
  }
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for_each_field(*this, [&](const char* name, auto& field) {
      if (key != name) return;
      known = true;
      try {
        field = value.get<std::decay_t<decltype(field)>>();
      } catch (const Json::exception&) {
        detail::fail("config: key '", key, "' has the wrong type (got ", value.dump(), ")");
      }
    });
    BRRR_CHECK(key != "fused", "config: 'fused' is now 'composed', its opposite (\"composed\": true for the ops "
               "built from primitives)");
    BRRR_CHECK(known, "config: unknown key '", key, "'");
  }
}

std::vector<std::pair<std::string, std::string>> TrainConfig::keys() {
  std::vector<std::pair<std::string, std::string>> out;
  TrainConfig c;
  for_each_field(c, [&](const char* name, auto& field) {
    using T = std::decay_t<decltype(field)>;
    out.emplace_back(name, std::is_same_v<T, bool> ? "bool" : std::is_same_v<T, std::string> ? "string"
                                                       : std::is_floating_point_v<T>      ? "number"
                                                                                           : "integer");
  });
  return out;
}

std::string TrainConfig::to_json() const {
  Json j = Json::object();
  TrainConfig copy = *this;
  for_each_field(copy, [&](const char* name, auto& field) { j[name] = field; });
  return j.dump();
}

void TrainConfig::validate() const {
  BRRR_CHECK(batch_size > 0 && grad_accum > 0 && max_iters >= 0, "config: batch_size and grad_accum must be positive");
  BRRR_CHECK(learning_rate > 0 && min_lr >= 0 && min_lr <= learning_rate, "config: need 0 <= min_lr <= learning_rate, got ",
             min_lr, " and ", learning_rate);
  BRRR_CHECK(eval_interval > 0 && eval_iters > 0 && log_interval > 0, "config: eval_interval, eval_iters and log_interval must be positive");
  BRRR_CHECK(keep_checkpoints > 0, "config: keep_checkpoints must be at least 1");
  BRRR_CHECK(device == "cpu" || device == "cuda" || device == "auto" || device == "emulator",
             "config: device must be cpu, cuda, emulator or auto, got '", device, "'");
  BRRR_CHECK(tokenizer == "char" || tokenizer == "bpe", "config: tokenizer must be char or bpe, got '", tokenizer, "'");
  BRRR_CHECK(threads >= 0, "config: threads must be 0 (all cores) or positive");
}

}  // namespace brrr::train
