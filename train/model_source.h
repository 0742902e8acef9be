// train/model_source.h: a model and its tokenizer, joined. The model is found and loaded by
// brrr/models/open.h (models::open_model), the tokenizer read from where it says, or from
// --tokenizer; this join lives here, above both, because models/ and tokenizer/ do not see each
// other (docs/design.md, "Models from elsewhere"). brrr sample, brrr eval, brrr export, brrr serve
// and brrr train --init_from all take their model from here.
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/open.h,
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

// models::open_model(path), and its tokenizer: a Hugging Face folder's tokenizer.json (or
// vocab.json + merges.txt), a training run's tokenizer saved beside its checkpoints; or
// tokenizer_path, when not empty. A tokenizer whose ids do not fit the model's vocabulary is an
// error naming both.
ModelSource open_model_and_tokenizer(const std::string& path, const std::string& tokenizer_path = "");

}  // namespace brrr::train
