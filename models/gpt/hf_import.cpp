// models/gpt/hf_import.cpp: reading a Hugging Face GPT-2 folder (config.json + safetensors).
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/hf.h.
#include "brrr/models/hf.h"

#include <filesystem>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "brrr/io.h"
#include "brrr/safetensors.h"
#include "brrr/strings.h"

namespace brrr::models {

namespace fs = std::filesystem;

bool is_hf_folder(const std::string& dir) { return fs::is_directory(dir) && fs::exists(fs::path(dir) / "config.json"); }

// GPT-2's Conv1D layers store (in, out): brrr's Linear weight is the transpose.
bool hf_transposed(const std::string& name) {
  for (const char* layer : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const std::string suffix = layer;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) return true;
  }
  return false;
}

namespace {

// brrr's name ("transformer.h.0.ln_1.weight", "lm_head.weight") as Hugging Face's file may
// spell it: GPT2LMHeadModel keeps "transformer.", GPT2Model (the original upload) has none.
std::string without_transformer(const std::string& name) {
  const std::string prefix = "transformer.";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

// The causal mask GPT-2 once saved as a buffer (h.N.attn.bias, h.N.attn.masked_bias): not a weight.
bool is_attention_mask(const std::string& name) {
  const std::string n = without_transformer(name);
  auto ends = [&](const std::string& s) { return n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0; };
  return n.rfind("h.", 0) == 0 && (ends(".attn.bias") || ends(".attn.masked_bias"));
}

}  // namespace

GPTConfig read_hf_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  BRRR_CHECK(fs::exists(path), dir, ": no config.json (not a Hugging Face model folder)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    detail::fail(path, ": invalid JSON: ", e.what());
  }
  BRRR_CHECK(j.is_object(), path, ": expected a JSON object");
  auto has = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  const std::string model_type = has("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  BRRR_CHECK(model_type == "gpt2", path, ": model_type is '", model_type, "'; brrr reads GPT-2 models (model_type \"gpt2\") only");
  GPTConfig c;
  c.dropout = 0.0;  // Hugging Face's dropouts are for its training; brrr's --dropout sets its own
  auto integer = [&](const char* key, std::int64_t& out) {
    if (!has(key)) return;  // transformers' default, which is GPT-2's, as brrr's is
    BRRR_CHECK(j[key].is_number_integer() && j[key].get<std::int64_t>() > 0, path, ": '", key,
               "' must be a positive integer, got ", j[key].dump());
    out = j[key].get<std::int64_t>();
  };
  c.vocab_size = 50257, c.block_size = 1024, c.n_layer = 12, c.n_head = 12, c.n_embd = 768;  // GPT2Config()
  integer("vocab_size", c.vocab_size);
  integer("n_positions", c.block_size);
  integer("n_layer", c.n_layer);
  integer("n_head", c.n_head);
  integer("n_embd", c.n_embd);
  BRRR_CHECK(c.n_embd % c.n_head == 0, path, ": n_embd (", c.n_embd, ") is not a multiple of n_head (", c.n_head, ")");
  if (has("n_inner"))
    BRRR_CHECK(j["n_inner"].is_number_integer() && j["n_inner"].get<std::int64_t>() == 4 * c.n_embd, path,
               ": n_inner is ", j["n_inner"].dump(), "; brrr's MLP is 4 * n_embd (", 4 * c.n_embd, ") wide");
  if (has("layer_norm_epsilon")) {
    BRRR_CHECK(j["layer_norm_epsilon"].is_number() && j["layer_norm_epsilon"].get<double>() > 0, path,
               ": layer_norm_epsilon must be a positive number, got ", j["layer_norm_epsilon"].dump());
    c.layer_norm_eps = j["layer_norm_epsilon"].get<double>();
  }
  if (has("activation_function")) {
    const std::string a = j["activation_function"].is_string() ? j["activation_function"].get<std::string>() : j["activation_function"].dump();
    // gelu_new and gelu_pytorch_tanh are GPT-2's tanh form; gelu is the exact x Phi(x).
    BRRR_CHECK(a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu", path, ": activation_function '", a,
               "' is not implemented (brrr has gelu_new, gelu_pytorch_tanh and gelu)");
    if (a == "gelu") c.activation = "gelu_erf";
  }
  if (has("tie_word_embeddings")) {
    BRRR_CHECK(j["tie_word_embeddings"].is_boolean(), path, ": tie_word_embeddings must be true or false");
    c.tie_head = j["tie_word_embeddings"].get<bool>();
  }
  // Variants of GPT-2 brrr's attention does not compute: refused rather than run wrong.
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"})
    BRRR_CHECK(!has(key) || j[key] == false, path, ": '", key, "' is ", j[key].dump(), "; brrr implements only false");
  BRRR_CHECK(!has("scale_attn_weights") || j["scale_attn_weights"] == true, path,
             ": 'scale_attn_weights' is false; brrr's attention always scales by 1/sqrt(head size)");
  try {
    c.validate();
  } catch (const Error& e) {
    detail::fail(path, ": ", e.what());
  }
  return c;
}

namespace {

// Where each tensor of a folder is: one model.safetensors, or the shards its index names.
struct WeightFiles {
  std::map<std::string, std::shared_ptr<safetensors::File>> by_tensor;  // HF name -> open file
  std::vector<std::shared_ptr<safetensors::File>> files;
};

WeightFiles open_weights(const std::string& dir) {
  const fs::path d(dir);
  WeightFiles w;
  if (fs::exists(d / "model.safetensors")) {
    auto file = std::make_shared<safetensors::File>((d / "model.safetensors").string());
    w.files.push_back(file);
    for (const auto& t : file->tensors()) w.by_tensor[t.name] = file;
    return w;
  }
  const fs::path index = d / "model.safetensors.index.json";
  if (fs::exists(index)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(index.string()));
    } catch (const nlohmann::json::exception& e) {
      detail::fail(index.string(), ": invalid JSON: ", e.what());
    }
    BRRR_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index.string(),
               ": no \"weight_map\" object");
    std::map<std::string, std::shared_ptr<safetensors::File>> shards;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      BRRR_CHECK(shard.is_string(), index.string(), ": the shard of '", name, "' is not a file name");
      const std::string file = shard.get<std::string>();
      BRRR_CHECK(file.find('/') == std::string::npos && file != ".." && !file.empty(), index.string(), ": shard '", file,
                 "' is not a file name in the folder");
      auto& open = shards[file];
      if (!open) {
        BRRR_CHECK(fs::exists(d / file), index.string(), ": shard '", file, "' (holding '", name, "') is missing");
        open = std::make_shared<safetensors::File>((d / file).string());
        w.files.push_back(open);
      }
      BRRR_CHECK(open->contains(name), (d / file).string(), ": no tensor '", name, "', though ", index.string(),
                 " puts it there");
      w.by_tensor[name] = open;
    }
    return w;
  }
  if (fs::exists(d / "pytorch_model.bin"))
    detail::fail((d / "pytorch_model.bin").string(),
                 ": a PyTorch pickle, which brrr does not read (unpickling runs code). Convert it to safetensors: "
                 "python3 -c \"from transformers import GPT2LMHeadModel; GPT2LMHeadModel.from_pretrained('",
                 dir, "').save_pretrained('", dir, "', safe_serialization=True)\"");
  detail::fail(dir, ": no weights (model.safetensors or model.safetensors.index.json)");
}

}  // namespace

std::shared_ptr<GPT> load_hf_model(const std::string& dir) {
  BRRR_CHECK(fs::is_directory(dir), "'", dir, "' is not a folder (a Hugging Face model is a folder with config.json)");
  const GPTConfig config = read_hf_config(dir);
  WeightFiles w = open_weights(dir);
  Generator gen(0);
  auto model = std::make_shared<GPT>(config, gen);
  // brrr's name -> the name in the files: with "transformer." or without, as the files spell it.
  std::set<std::string> used;
  for (auto& [name, p] : model->named_parameters()) {
    std::string hf;
    for (const std::string& candidate : {name, without_transformer(name)})
      if (w.by_tensor.count(candidate)) hf = candidate;
    if (hf.empty())
      detail::fail(w.files.size() == 1 ? w.files[0]->path() : dir, ": no tensor '", without_transformer(name),
                   "' (config.json describes a model that has one, of shape ",
                   shape_str(hf_transposed(name) ? Shape{p.size(1), p.size(0)} : p.shape()), ")");
    w.by_tensor.at(hf)->copy_into(hf, p, hf_transposed(name));
    used.insert(hf);
  }
  for (const auto& [name, file] : w.by_tensor) {
    if (used.count(name) || is_attention_mask(name)) continue;
    if (config.tie_head && name == "lm_head.weight") continue;  // a tied head saved anyway: wte's copy
    detail::fail(file->path(), ": tensor '", name, "' does not belong to the GPT-2 model config.json describes");
  }
  return model;
}

}  // namespace brrr::models
