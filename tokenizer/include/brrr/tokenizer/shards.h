// brrr/tokenizer/shards.h: a corpus's ids as a folder of token files ("shards").
// Chapter 06 (tokenization), "A corpus larger than memory". Read first: token_file.h,
// stream_encode.h. Read next: train/data.h, whose loader reads a folder of shards as one stream.
//
// `brrr tokenizer encode --shards` writes, into a folder:
//
//   tokenizer.txt            the tokenizer, in brrr's format (what the shards' header hashes)
//   STEM_000000.bin          the first shard_tokens ids of the text (STEM: the input's name)
//   STEM_000001.bin          the next, ... the last holds the rest
//
// Each shard is a token file (version 2: it names the tokenizer by the hash of tokenizer.txt's
// bytes), or llm.c's format on request; each is written atomically. The shards in name order
// are the text's ids in order: a document may run on from one shard into the next, as in
// llm.c's shards, and the loader reads across the boundary.
//
// The validation split (train/data.h): the shards whose name has "val" as a word of its own
// (split at '_', '-' and '.': llm.c's "fineweb_val_000000.bin") are the validation split and
// the others the training split; with no such shard, the last val_fraction of all the ids is
// the validation split, as for a text file.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brrr/tokenizer/token_file.h"

namespace brrr::tokenizer {

inline constexpr std::string_view kShardTokenizerFile = "tokenizer.txt";

// STEM_000042.bin
std::string shard_file_name(const std::string& stem, uint64_t index);

// Whether a shard's file name marks it as validation data (above).
bool is_val_shard(const std::string& path);

// The shards `spec` names, sorted by name: a folder (its *.bin files), a glob ("data/*.bin",
// "data/fineweb_train_*.bin"), or one token file. Throws brrr::Error naming the spec when
// nothing matches.
std::vector<std::string> find_shards(const std::string& spec);

// Whether the file at `path` starts like a token file (brrr's magic or llm.c's).
bool looks_like_token_file(const std::string& path);

// Whether `spec` names token files rather than a text: a folder, a glob, or one token file
// (brrr train --data and brrr eval --data read it by find_shards then).
bool names_token_files(const std::string& spec);

// Writes ids into shards of at most shard_tokens ids each, as they arrive. Refuses to start in
// a folder that already holds shards of this stem (stale ones would be read with the new).
class ShardWriter {
 public:
  ShardWriter(std::string dir, std::string stem, uint64_t shard_tokens, const TokenFileSpec& spec);
  ~ShardWriter();
  void write(std::span<const uint32_t> ids);
  // Commits the last shard; returns every shard's path.
  std::vector<std::string> finish();
  uint64_t tokens() const { return tokens_; }

 private:
  std::string dir_, stem_;
  uint64_t shard_tokens_;
  TokenFileSpec spec_;
  std::unique_ptr<TokenFileWriter> current_;
  std::vector<std::string> paths_;
  uint64_t tokens_ = 0;
};

}  // namespace brrr::tokenizer
