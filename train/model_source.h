// train/model_source.h: one way to open "a model": a brrr checkpoint (a file, or a training run's
// --out_dir) or a Hugging Face GPT-2 folder, with its tokenizer. brrr sample, brrr eval, brrr
// export and brrr train --init_from all take their model from here.
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/checkpoint.h, brrr/models/hf.h,
// brrr/tokenizer/hf_tokenizer.h.
#pragma once
#include <memory>
#include <string>

#include "brrr/models/gpt.h"
#include "brrr/tokenizer/text_tokenizer.h"

namespace brrr::train {

struct ModelSource {
  std::shared_ptr<models::GPT> model;
  std::unique_ptr<tokenizer::TextTokenizer> tokenizer;
  std::string model_path;      // the checkpoint file, or the Hugging Face folder
  std::string tokenizer_path;  // the tokenizer file, or the folder it was read from
  bool hugging_face = false;
};

// Opens `path`: a folder with config.json is a Hugging Face model (its tokenizer.json, or
// vocab.json + merges.txt); another folder is a training run (its newest ckpt-*.safetensors and
// the tokenizer saved beside it); a file is a brrr checkpoint (the tokenizer beside it).
// tokenizer_path, when not empty, names the tokenizer instead. A tokenizer whose ids do not
// fit the model's vocabulary is an error naming both.
ModelSource open_model(const std::string& path, const std::string& tokenizer_path = "");

// The shape of the model open_model(path) would open, read from its config alone.
models::GPTConfig model_config_of(const std::string& path);

}  // namespace brrr::train
