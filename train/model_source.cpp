// train/model_source.cpp: a brrr checkpoint or a Hugging Face folder, and its tokenizer.
// Chapter 08 (training: "Pretrained models"). Read before: train/model_source.h.
#include "train/model_source.h"

#include <filesystem>

#include "brrr/error.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/hf.h"
#include "brrr/safetensors.h"
#include "brrr/tokenizer/hf_tokenizer.h"
#include "train/trainer.h"

namespace brrr::train {

namespace fs = std::filesystem;

ModelSource open_model(const std::string& path, const std::string& tokenizer_path) {
  ModelSource s;
  BRRR_CHECK(fs::exists(path), "no checkpoint at '", path,
             "' (a checkpoint file, the --out_dir of a training run, or a Hugging Face model folder)");
  if (models::is_hf_folder(path)) {
    s.hugging_face = true;
    s.model_path = path;
    s.model = models::load_hf_model(path);
    s.tokenizer_path = tokenizer_path.empty() ? path : tokenizer_path;
    if (tokenizer_path.empty()) s.tokenizer = tokenizer::HfTokenizer::from_folder(path);
  } else {
    s.model_path = path;
    if (fs::is_directory(path)) {
      const auto found = list_checkpoints(path);
      BRRR_CHECK(!found.empty(), "no checkpoint (ckpt-*.safetensors) in '", path,
                 "', and no config.json (not a Hugging Face model either); train first with brrr train --out_dir ", path);
      s.model_path = found.back().second;
    }
    s.model = models::load_model(s.model_path);  // a damaged file: the safetensors reader says what is wrong
    s.tokenizer_path = tokenizer_path.empty() ? (fs::path(s.model_path).parent_path() / "tokenizer").string() : tokenizer_path;
    BRRR_CHECK(!tokenizer_path.empty() || fs::exists(s.tokenizer_path), "no tokenizer at '", s.tokenizer_path,
               "' (the training run saves one beside its checkpoints; or pass --tokenizer FILE)");
  }
  if (!s.tokenizer) {
    BRRR_CHECK(fs::exists(s.tokenizer_path), "no tokenizer at '", s.tokenizer_path, "'");
    s.tokenizer = fs::is_directory(s.tokenizer_path) ? tokenizer::HfTokenizer::from_folder(s.tokenizer_path)
                                                     : tokenizer::TextTokenizer::load(s.tokenizer_path);
  }
  // A model's vocabulary may be larger than its tokenizer's (a Hugging Face model padded for
  // speed, or a brrr model fine-tuned from one), never smaller.
  const auto n = static_cast<std::int64_t>(s.tokenizer->vocab_size()), v = s.model->config().vocab_size;
  BRRR_CHECK(n <= v, "the tokenizer '", s.tokenizer_path, "' has ", n,
             " tokens but the model's vocabulary is ", v, " (", s.model_path, ")");
  return s;
}

models::GPTConfig model_config_of(const std::string& path) {
  BRRR_CHECK(fs::exists(path), "no checkpoint at '", path,
             "' (a checkpoint file, the --out_dir of a training run, or a Hugging Face model folder)");
  if (models::is_hf_folder(path)) return models::read_hf_config(path);
  std::string file = path;
  if (fs::is_directory(path)) {
    const auto found = list_checkpoints(path);
    BRRR_CHECK(!found.empty(), "no checkpoint (ckpt-*.safetensors) in '", path, "', and no config.json");
    file = found.back().second;
  }
  const safetensors::File f(file);
  const auto it = f.metadata().find("config");
  BRRR_CHECK(it != f.metadata().end(), file, ": no 'config' in the metadata; not a brrr model checkpoint");
  return models::GPTConfig::from_json(it->second);
}

}  // namespace brrr::train
