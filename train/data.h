// train/data.h: text in, batches of token windows out.
// Chapter 08 (training). Read before: text_tokenizer.h, brrr/tokenizer/token_file.h.
//
// The first run over a text file trains the tokenizer and encodes the file once, writing a
// token file and the tokenizer into a cache directory; later runs map the token file (mmap)
// and start at once. The last val_fraction of the tokens is the validation split. A batch is
// B random windows of T+1 tokens drawn from a Generator: x is the first T, y the next T (each
// position's target is the token after it). Same seed, same batches.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "brrr/generator.h"
#include "brrr/tensor.h"
#include "brrr/tokenizer/token_file.h"
#include "brrr/tokenizer/text_tokenizer.h"

namespace brrr::train {

using tokenizer::TextTokenizer;

struct DataOptions {
  std::string input;             // a UTF-8 text file
  std::string tokenizer = "char";  // "char" or "bpe"
  // A ready tokenizer (brrr train --init_from: the model's own), used as it is instead of
  // training one; given_key names it in the cache (it changes when the tokenizer does).
  std::shared_ptr<const TextTokenizer> given;
  std::string given_key;
  int bpe_vocab_size = 4096;
  double val_fraction = 0.1;
  std::string cache_dir = "out/cache";
  bool verbose = true;
};

enum class Split { Train, Val };

class TextDataset {
 public:
  explicit TextDataset(const DataOptions& options);

  const TextTokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& tokenizer_path() const { return tokenizer_path_; }
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(tokenizer_->vocab_size()); }
  std::uint64_t size(Split split) const { return split == Split::Train ? train_end_ : tokens_->size() - train_end_; }

  // x, y: (B, T) int64; windows start uniformly at random within the split.
  void batch(Split split, std::int64_t B, std::int64_t T, Generator& gen, Tensor& x, Tensor& y) const;
  // Advances gen past n such batches without making them: what another rank of a data-parallel
  // run draws (chapter 19), so every rank's generator stays where a single process's would be.
  void skip_batches(std::int64_t n, std::int64_t B, Generator& gen) const;

 private:
  std::unique_ptr<TextTokenizer> tokenizer_;
  std::unique_ptr<tokenizer::MappedTokenFile> tokens_;
  std::string tokenizer_path_;
  std::uint64_t train_end_ = 0;
};

}  // namespace brrr::train
