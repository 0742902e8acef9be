// train/model_source.cpp: a model (brrr/models/open.h) and its tokenizer.
// Chapter 08 (training: "Pretrained models"). Read before: train/model_source.h.
#include "train/model_source.h"

#include <filesystem>

#include "brrr/error.h"
#include "brrr/models/open.h"
#include "brrr/tokenizer/hf_tokenizer.h"

namespace brrr::train {

namespace fs = std::filesystem;

ModelSource open_model_and_tokenizer(const std::string& path, const std::string& tokenizer_path) {
  models::OpenedModel m = models::open_model(path);
  ModelSource s;
  s.model = std::move(m.model);
  s.model_path = m.model_path;
  s.hugging_face = m.hugging_face;
  s.tokenizer_path = tokenizer_path.empty() ? m.tokenizer_path : tokenizer_path;
  BRRR_CHECK(m.hugging_face || !tokenizer_path.empty() || fs::exists(s.tokenizer_path), "no tokenizer at '",
             s.tokenizer_path, "' (the training run saves one beside its checkpoints; or pass --tokenizer FILE)");
  BRRR_CHECK(fs::exists(s.tokenizer_path), "no tokenizer at '", s.tokenizer_path, "'");
  s.tokenizer = fs::is_directory(s.tokenizer_path) ? tokenizer::HfTokenizer::from_folder(s.tokenizer_path)
                                                   : tokenizer::TextTokenizer::load(s.tokenizer_path);
  // A model's vocabulary may be larger than its tokenizer's (a Hugging Face model padded for
  // speed, or a brrr model fine-tuned from one), never smaller.
  const auto n = static_cast<std::int64_t>(s.tokenizer->vocab_size()), v = s.model->config().vocab_size;
  BRRR_CHECK(n <= v, "the tokenizer '", s.tokenizer_path, "' has ", n,
             " tokens but the model's vocabulary is ", v, " (", s.model_path, ")");
  return s;
}

}  // namespace brrr::train
