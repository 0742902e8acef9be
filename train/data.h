// train/data.h: text in, batches of token windows out.
// Chapter 08 (training). Read before: text_tokenizer.h, brrr/tokenizer/token_file.h,
// brrr/tokenizer/shards.h.
//
// The data is a text file or shards of ids. The first run over a text file trains the
// tokenizer and encodes the file once, writing a token file and the tokenizer into a cache
// directory; later runs map the token file (mmap) and start at once. The last val_fraction of
// the tokens is the validation split. Shards (a folder, a glob, or one token file, written by
// `brrr tokenizer encode --shards` or llm.c) are mapped as they are and read as one sequence
// of ids in name order, with the tokenizer.txt beside them; the validation split is the shards
// named *_val_* (shards.h), or else the last val_fraction of the ids, as for a text file.
// A batch is B random windows of T+1 tokens drawn from a Generator: x is the first T, y the next
// T (each position's target is the token after it). A window may run from one shard into the
// next, as it would through the text they were cut from, so every id is reachable. Same seed,
// same batches; a text file and its shards give the same batches.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brrr/generator.h"
#include "brrr/tensor.h"
#include "brrr/tokenizer/token_file.h"
#include "brrr/tokenizer/text_tokenizer.h"

namespace brrr::train {

using tokenizer::TextTokenizer;

struct DataOptions {
  std::string input;             // a UTF-8 text file, or shards: a folder, a glob or a token file
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

// A tokenizer hash (tokenizer/token_file.h) as 16 hex digits, for messages.
std::string hash_hex(std::uint64_t h);

class TextDataset {
 public:
  explicit TextDataset(const DataOptions& options);
  TextDataset(const TextDataset&) = delete;  // its splits point into its own file lists
  TextDataset& operator=(const TextDataset&) = delete;

  const TextTokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& tokenizer_path() const { return tokenizer_path_; }
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(tokenizer_->vocab_size()); }
  std::uint64_t size(Split split) const { return part(split).size; }
  std::size_t files() const { return all_.files.size() + val_files_.files.size(); }  // token files read

  // x, y: (B, T) int64; windows start uniformly at random within the split.
  void batch(Split split, std::int64_t B, std::int64_t T, Generator& gen, Tensor& x, Tensor& y) const;
  // Advances gen past n such batches without making them: what another rank of a data-parallel
  // run draws (chapter 19), so every rank's generator stays where a single process's would be.
  void skip_batches(std::int64_t n, std::int64_t B, Generator& gen) const;

 private:
  // Token files read one after another as a single sequence of ids.
  struct Files {
    std::vector<std::unique_ptr<tokenizer::MappedTokenFile>> files;
    std::vector<std::uint64_t> starts;  // where each file's ids start in the sequence
    std::uint64_t size = 0;
    void add(std::unique_ptr<tokenizer::MappedTokenFile> file);
    // ids [start, start + n) into out, each checked to be below vocab (naming the file if not).
    void read(std::uint64_t start, std::uint64_t n, std::uint64_t vocab, std::uint32_t* out) const;
  };
  // A split: `size` ids of `files` from `begin` on.
  struct Part {
    const Files* files = nullptr;
    std::uint64_t begin = 0, size = 0;
  };
  const Part& part(Split split) const { return split == Split::Train ? train_ : val_; }
  void open_text(const DataOptions& options);
  void open_shards(const DataOptions& options);

  std::unique_ptr<TextTokenizer> tokenizer_;
  std::string tokenizer_path_;
  Files all_, val_files_;  // all_: the text's ids, or the training shards; val_files_: *_val_* shards
  Part train_, val_;
};

}  // namespace brrr::train
