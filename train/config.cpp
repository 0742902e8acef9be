// train/config.cpp: TrainConfig: the presets (the model's shape from its own preset, the
// training settings here), the JSON form of a run's settings, and their validation.
// Chapter 08 (training). Read before: trainer.h.
#include <algorithm>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "brrr/strings.h"
#include "brrr/error.h"
#include "brrr/models/gpt.h"
#include "brrr/models/open.h"
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
  f("data", c.data), f("init_from", c.init_from), f("tokenizer", c.tokenizer), f("bpe_vocab_size", c.bpe_vocab_size), f("val_fraction", c.val_fraction);
  f("batch_size", c.batch_size), f("grad_accum", c.grad_accum), f("max_iters", c.max_iters);
  f("warmup_iters", c.warmup_iters), f("lr_decay_iters", c.lr_decay_iters), f("learning_rate", c.learning_rate);
  f("min_lr", c.min_lr), f("weight_decay", c.weight_decay), f("beta1", c.beta1), f("beta2", c.beta2);
  f("grad_clip", c.grad_clip), f("eval_interval", c.eval_interval), f("eval_iters", c.eval_iters);
  f("log_interval", c.log_interval), f("checkpoint_interval", c.checkpoint_interval);
  f("keep_checkpoints", c.keep_checkpoints), f("sample_tokens", c.sample_tokens), f("out_dir", c.out_dir);
  f("device", c.device), f("dtype", c.dtype), f("residual", c.residual), f("seed", c.seed), f("threads", c.threads), f("profile", c.profile);
  f("profile_trace", c.profile_trace);
  f("cuda_graph", c.cuda_graph), f("tf32", c.tf32);
  f("zero", c.zero), f("bucket_mb", c.bucket_mb), f("overlap_comm", c.overlap_comm);
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
  for (const auto& [written, value] : j.items()) {
    std::string key = written;  // "max-iters" is "max_iters", as on the command line
    std::replace(key.begin(), key.end(), '-', '_');
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
    if (!known) {
      std::string best;
      std::size_t best_distance = key.size() / 2 + 1;  // closer than this, or no suggestion
      for (const Key& k : keys())
        if (const std::size_t d = edit_distance(key, k.name); d < best_distance) best_distance = d, best = k.name;
      detail::fail("config: unknown key '", written, "'", best.empty() ? "" : "; did you mean '" + best + "'?");
    }
  }
}

void TrainConfig::apply_init_from(const std::vector<std::string>& given) {
  if (init_from.empty()) return;
  const models::GPTConfig m = models::model_config_of(init_from);
  auto take = [&](const char* key, std::int64_t& field, std::int64_t value) {
    const bool written = std::find(given.begin(), given.end(), key) != given.end();
    BRRR_CHECK(!written || field == value, "--", key, " ", field, " contradicts --init_from ", init_from, ", whose ", key,
               " is ", value, " (leave it out: the model's shape is used)");
    field = value;
  };
  take("n_layer", n_layer, m.n_layer);
  take("n_head", n_head, m.n_head);
  take("n_embd", n_embd, m.n_embd);
  take("block_size", block_size, m.block_size);
}

namespace {
// What each key does, for `brrr train --help`, by the group the help shows it in. A key of
// for_each_field without a line here is an error (a test checks that every key has one).
struct KeyHelp {
  const char* name;
  const char* group;
  const char* help;
};
constexpr KeyHelp kKeyHelp[] = {
    {"preset", "Run", "named configuration that sets every default below"},
    {"n_layer", "Model", "transformer blocks"},
    {"n_head", "Model", "attention heads per block (n_embd must be a multiple of it)"},
    {"n_embd", "Model", "width of the residual stream, in channels per token"},
    {"block_size", "Model", "context length, in tokens"},
    {"dropout", "Model", "dropout probability on the attention weights and residual branches (0: none)"},
    {"bias", "Model", "biases in the Linear and LayerNorm layers (GPT-2 has them)"},
    {"composed", "Model", "build LayerNorm, GELU, attention and the loss from primitives (the teaching versions)"},
    {"data", "Data", "UTF-8 text file to train on (default: ../shared/data/tinyshakespeare.txt), or shards of token ids: a folder, a glob or a token file (brrr tokenizer encode --shards)"},
    {"init_from", "Model", "start from this model (a Hugging Face GPT-2 folder or a brrr checkpoint): its weights, "
                           "shape and tokenizer; a shape setting that differs from the model's is an error"},
    {"tokenizer", "Data", "char (a token per character) or bpe (byte-level BPE trained on the data)"},
    {"bpe_vocab_size", "Data", "vocabulary of the BPE tokenizer, in tokens"},
    {"val_fraction", "Data", "fraction of the tokens held out for validation (the end of the text)"},
    {"batch_size", "Optimisation", "sequences per micro-step"},
    {"grad_accum", "Optimisation", "micro-steps whose gradients add up to one step"},
    {"max_iters", "Optimisation", "training steps in all"},
    {"learning_rate", "Optimisation", "peak learning rate, reached after the warmup"},
    {"min_lr", "Optimisation", "learning rate at the end of the cosine decay"},
    {"weight_decay", "Optimisation", "AdamW's decoupled weight decay, on tensors of 2 or more dims"},
    {"beta1", "Optimisation", "AdamW's decay of the gradient's running mean"},
    {"beta2", "Optimisation", "AdamW's decay of the squared gradient's running mean"},
    {"grad_clip", "Optimisation", "largest global L2 norm of the gradients (0: no clipping)"},
    {"warmup_iters", "Schedule", "steps of linear warmup from 0 to learning_rate"},
    {"lr_decay_iters", "Schedule", "step at which the cosine decay reaches min_lr"},
    {"eval_interval", "Evaluation", "evaluate on both splits every this many steps"},
    {"eval_iters", "Evaluation", "batches per evaluation, on each split"},
    {"log_interval", "Evaluation", "print a progress line every this many steps"},
    {"sample_tokens", "Evaluation", "tokens to sample from the model at the end (0: none)"},
    {"checkpoint_interval", "Checkpoints", "save every this many steps (0: at every evaluation)"},
    {"keep_checkpoints", "Checkpoints", "the newest checkpoints to keep; older ones are deleted"},
    {"out_dir", "Checkpoints", "folder of the checkpoints, the log, the plots and the tokenizer"},
    {"device", "Device", "cpu, cuda (a GPU), emulator (the CUDA kernels on the CPU, slowly) or auto"},
    {"dtype", "Device", "float32, or bf16: bf16 activations in memory, float32 sums and master weights (chapter 18)"},
    {"residual", "Device", "under dtype bf16, the residual stream's dtype: bf16 or float32 (chapter 18)"},
    {"seed", "Device", "seed of the initial weights, the data order and dropout"},
    {"threads", "Device", "CPU threads (0: all cores)"},
    {"profile", "Device", "print where the time went, op by op, at the end"},
    {"profile_trace", "Device", "also write every op as a timeline to this file, a Chrome trace (open it in ui.perfetto.dev)"},
    {"cuda_graph", "Device", "on a CUDA device: replay the whole training step as one CUDA graph; on by default, "
                             "plain steps where a graph cannot be (dropout, grad_accum, several ranks, --profile), "
                             "saying why; false: plain steps"},
    {"tf32", "Device", "on a CUDA device: float32 matmuls in TF32 on the tensor cores (about 1e-3 relative error, "
                       "PyTorch's allow_tf32); false, the default: full float32"},
    {"zero", "Distributed", "under mpirun: 1 shards AdamW's moments over the ranks (ZeRO stage 1), 0 keeps them whole"},
    {"bucket_mb", "Distributed", "under mpirun: gradients are summed over the ranks in buckets of this many MB"},
    {"overlap_comm", "Distributed", "under mpirun: sum each bucket while the backward goes on (false: after it; same bits)"},
};
}  // namespace

std::vector<TrainConfig::Key> TrainConfig::keys() {
  std::vector<Key> out;
  TrainConfig c;
  for_each_field(c, [&](const char* name, auto& field) {
    using T = std::decay_t<decltype(field)>;
    const std::string type = std::is_same_v<T, bool>          ? "bool"
                             : std::is_same_v<T, std::string> ? "string"
                             : std::is_floating_point_v<T>    ? "number"
                                                              : "integer";
    const KeyHelp* help = nullptr;
    for (const KeyHelp& h : kKeyHelp)
      if (std::string(h.name) == name) help = &h;
    out.push_back({name, type, help ? help->group : "", help ? help->help : ""});
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
  // Each setting is checked on its own, so the message names the one that is wrong.
  const auto at_least = [](const char* key, auto value, std::int64_t least, const char* meaning) {
    BRRR_CHECK(value >= least, "config: ", key, " must be ", meaning, ", got ", value);
  };
  at_least("batch_size", batch_size, 1, "at least 1 (sequences per micro-batch)");
  at_least("grad_accum", grad_accum, 1, "at least 1 (micro-batches per step)");
  at_least("max_iters", max_iters, 0, "0 or more (training steps; 0 evaluates and saves the model as it starts)");
  at_least("warmup_iters", warmup_iters, 0, "0 or more");
  at_least("lr_decay_iters", lr_decay_iters, 0, "0 or more");
  at_least("eval_interval", eval_interval, 1, "at least 1 (steps between evaluations)");
  at_least("eval_iters", eval_iters, 1, "at least 1 (batches per evaluation)");
  at_least("log_interval", log_interval, 1, "at least 1 (steps between progress lines)");
  at_least("checkpoint_interval", checkpoint_interval, 0, "0 (save at every evaluation) or more");
  at_least("keep_checkpoints", keep_checkpoints, 1, "at least 1");
  at_least("sample_tokens", sample_tokens, 0, "0 (no sample) or more");
  BRRR_CHECK(learning_rate > 0, "config: learning_rate must be positive, got ", learning_rate);
  BRRR_CHECK(min_lr >= 0 && min_lr <= learning_rate, "config: min_lr must be in [0, learning_rate] = [0, ",
             learning_rate, "], got ", min_lr);
  BRRR_CHECK(dropout >= 0 && dropout < 1, "config: dropout must be in [0, 1), got ", dropout);
  BRRR_CHECK(weight_decay >= 0, "config: weight_decay must be 0 or more, got ", weight_decay);
  BRRR_CHECK(beta1 >= 0 && beta1 < 1, "config: beta1 must be in [0, 1), got ", beta1);
  BRRR_CHECK(beta2 >= 0 && beta2 < 1, "config: beta2 must be in [0, 1), got ", beta2);
  BRRR_CHECK(grad_clip >= 0, "config: grad_clip must be 0 (no clipping) or more, got ", grad_clip);
  BRRR_CHECK(val_fraction >= 0 && val_fraction < 1, "config: val_fraction must be in [0, 1), got ", val_fraction);
  BRRR_CHECK(device == "cpu" || device == "cuda" || device == "auto" || device == "emulator",
             "config: device must be cpu, cuda, emulator or auto, got '", device, "'");
  BRRR_CHECK(dtype == "float32" || dtype == "bf16", "config: dtype must be float32 or bf16, got '", dtype, "'");
  BRRR_CHECK(residual == "float32" || residual == "bf16", "config: residual must be float32 or bf16, got '", residual,
             "'");
  BRRR_CHECK(tokenizer == "char" || tokenizer == "bpe", "config: tokenizer must be char or bpe, got '", tokenizer, "'");
  BRRR_CHECK(threads >= 0, "config: threads must be 0 (all cores) or positive, got ", threads);
  BRRR_CHECK(zero == 0 || zero == 1, "config: zero must be 0 (no sharding) or 1 (AdamW's state sharded), got ", zero);
  BRRR_CHECK(bucket_mb > 0, "config: bucket_mb must be positive, got ", bucket_mb);
}

}  // namespace brrr::train
