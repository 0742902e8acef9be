// models/gpt/open.cpp: a brrr checkpoint, a training run's newest one, or a Hugging Face folder.
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/open.h.
#include "brrr/models/open.h"

#include <algorithm>
#include <filesystem>

#include "brrr/error.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/hf.h"
#include "brrr/safetensors.h"

namespace brrr::models {

namespace fs = std::filesystem;

namespace {

void check_exists(const std::string& path) {
  BRRR_CHECK(fs::exists(path), "no checkpoint at '", path,
             "' (a checkpoint file, the --out_dir of a training run, or a Hugging Face model folder)");
}

}  // namespace

std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  if (!fs::exists(dir)) return found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name.size() == 5 + 8 + 12 && name.substr(13) == ".safetensors")
      found.emplace_back(std::stoll(name.substr(5, 8)), e.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

OpenedModel open_model(const std::string& path) {
  check_exists(path);
  OpenedModel m;
  m.model_path = path;
  if (is_hf_folder(path)) {
    m.hugging_face = true;
    m.model = load_hf_model(path);
    m.tokenizer_path = path;
    return m;
  }
  if (fs::is_directory(path)) {
    const auto found = list_checkpoints(path);
    BRRR_CHECK(!found.empty(), "no checkpoint (ckpt-*.safetensors) in '", path,
               "', and no config.json (not a Hugging Face model either); train first with brrr train --out_dir ", path);
    m.model_path = found.back().second;
  }
  m.model = load_model(m.model_path);  // a damaged file: the safetensors reader says what is wrong
  m.tokenizer_path = (fs::path(m.model_path).parent_path() / "tokenizer").string();
  return m;
}

GPTConfig model_config_of(const std::string& path) {
  check_exists(path);
  if (is_hf_folder(path)) return read_hf_config(path);
  std::string file = path;
  if (fs::is_directory(path)) {
    const auto found = list_checkpoints(path);
    BRRR_CHECK(!found.empty(), "no checkpoint (ckpt-*.safetensors) in '", path, "', and no config.json");
    file = found.back().second;
  }
  const safetensors::File f(file);
  const auto it = f.metadata().find("config");
  BRRR_CHECK(it != f.metadata().end(), file, ": no 'config' in the metadata; not a brrr model checkpoint");
  return GPTConfig::from_json(it->second);
}

}  // namespace brrr::models
