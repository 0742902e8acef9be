// brrr/models/open.h: one way to find and load "a model": a brrr checkpoint (a file, or a
// training run's --out_dir) or a Hugging Face GPT-2 folder. brrr sample, eval, export, serve and
// train --init_from all take their model from here (through train/model_source.h, which adds the
// tokenizer: models/ and tokenizer/ do not see each other, docs/design.md "Models from elsewhere").
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/checkpoint.h, brrr/models/hf.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "brrr/models/gpt.h"

namespace brrr::models {

struct OpenedModel {
  std::shared_ptr<GPT> model;
  std::string model_path;      // the checkpoint file, or the Hugging Face folder
  std::string tokenizer_path;  // where its tokenizer is: the folder, or the file "tokenizer" beside the checkpoint
  bool hugging_face = false;
};

// Opens `path`: a folder with config.json is a Hugging Face model; another folder is a training
// run (its newest ckpt-*.safetensors); a file is a brrr checkpoint. The tokenizer is not read
// (tokenizer/ is another layer): tokenizer_path says where it would be.
OpenedModel open_model(const std::string& path);

// The shape of the model open_model(path) would open, read from its config alone.
GPTConfig model_config_of(const std::string& path);

// The checkpoints (ckpt-NNNNNNNN.safetensors) in dir as (step, path), oldest first.
std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& dir);

}  // namespace brrr::models
