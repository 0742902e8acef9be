// models/gpt/checkpoint.cpp: GPT checkpoints over safetensors.
// Chapter 08 (training: checkpoints).
#include "brrr/models/checkpoint.h"

#include <set>

namespace brrr::models {

void save_model(const std::string& path, const GPT& model, std::map<std::string, std::string> metadata) {
  metadata["config"] = model.config().to_json();
  metadata["format"] = "brrr-gpt-1";
  safetensors::save(path, model.named_parameters(), metadata);
}

void load_parameters(const safetensors::File& file, GPT& model, const std::string& prefix) {
  std::set<std::string> expected;
  for (auto& [name, p] : model.named_parameters()) {
    BRRR_CHECK(file.contains(prefix + name), file.path(), ": checkpoint has no tensor '", prefix + name,
               "' (the model expects one of shape ", shape_str(p.shape()), ")");
    file.copy_into(prefix + name, p);
    expected.insert(prefix + name);
  }
  for (const auto& t : file.tensors()) {
    if (t.name.rfind(prefix, 0) != 0 || expected.count(t.name)) continue;
    if (t.name == prefix + "lm_head.weight") continue;  // tied to transformer.wte.weight
    if (!prefix.empty() || t.name.rfind("transformer.", 0) == 0)
      detail::fail(file.path(), ": tensor '", t.name, "' does not belong to this model (config ", model.config().to_json(), ")");
  }
}

std::shared_ptr<GPT> load_model(const std::string& path) {
  safetensors::File file(path);
  const auto it = file.metadata().find("config");
  BRRR_CHECK(it != file.metadata().end(), path, ": no 'config' in the metadata; not a brrr model checkpoint");
  GPTConfig config;
  try {
    config = GPTConfig::from_json(it->second);
  } catch (const Error& e) {
    detail::fail(path, ": ", e.what());
  }
  Generator gen(0);
  auto model = std::make_shared<GPT>(config, gen);
  load_parameters(file, *model);
  return model;
}

}  // namespace brrr::models
