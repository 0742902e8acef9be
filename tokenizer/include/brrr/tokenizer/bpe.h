// brrr/tokenizer/bpe.h: the byte-level BPE tokenizer: train, encode, decode, save, load.
// Chapter 06 (tokenization), docs/chapters/06-tokenization.md. Read first: pretokenize.h,
// hash.h. Read next: bpe_naive.h (the slow reference, read it before the fast code), then
// src/bpe_train.cpp, src/bpe_encode.cpp, src/bpe_files.cpp.
//
// The vocabulary. Token ids are ranks: ids 0..255 are the 256 single bytes (id b is byte b
// for a trained tokenizer), then one token per merge in the order training found them,
// then the special tokens. Every merge token's bytes are the bytes of two earlier tokens,
// `left` and `right`; no two ordinary tokens have the same bytes.
//
// The encoding rule (the same as tiktoken's, so tiktoken loaded with brrr's exported ranks
// gives identical ids):
//   1. cut out special tokens, split the rest into pieces with the regex (pretokenize.h);
//   2. a piece that is itself a token is that token;
//   3. otherwise start from the piece's bytes and repeatedly merge the adjacent pair whose
//      concatenated bytes form the token of lowest id, the leftmost such pair on a tie,
//      until no adjacent pair forms a token.
// Rule 3 looks at concatenated bytes, not at which merge made the token: if "abc" was made
// as "ab"+"c", the parts "a","bc" still merge into it. GPT-2's original encoder (a list of
// merges, applied by merge rank) would leave "a","bc" alone. The two rules agree on almost
// every piece; the chapter measures how rarely they differ, and naive::encode_with_merge_list
// keeps the other rule for that comparison.
//
// Training picks, at each step, the most frequent adjacent pair over all words; ties go to
// the pair with the smallest (left id, right id). So the same corpus and options always give
// the same merges. A pair whose bytes are already a token (made earlier from another pair)
// is merged into that token and adds no new one ("alias" merges, rare).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "brrr/tokenizer/hash.h"
#include "brrr/tokenizer/pretokenize.h"

namespace brrr::tokenizer {

inline constexpr uint32_t kNoToken = PairMap::kNone;
inline constexpr std::string_view kEndOfText = "<|endoftext|>";

// One entry of the vocabulary.
struct Token {
  enum Kind : uint8_t { kByte, kMerge, kSpecial };
  Kind kind = kByte;
  uint32_t left = kNoToken, right = kNoToken;  // kMerge: bytes == bytes(left) + bytes(right)
  std::string bytes;
};

struct TrainProgress {
  size_t merges_done = 0;
  size_t merges_total = 0;  // the merges wanted: vocab_size - 256 - specials
  double seconds = 0;       // since the merge loop began
};

struct TrainOptions {
  size_t vocab_size = 4096;                  // bytes + merges + special tokens
  std::string pattern = std::string(kGpt2Pattern);
  std::vector<std::string> special_tokens = {std::string(kEndOfText)};
  int threads = 0;                           // counting words; 0: all cores
  std::function<void(const TrainProgress&)> progress;  // called now and then, and at the end
};

// One step of training, for the record: pair (left, right) seen `count` times became `id`.
struct MergeRecord {
  uint32_t left, right, id;
  uint64_t count;
};

struct TrainStats {
  size_t text_bytes = 0;
  size_t pieces = 0;        // pieces the regex cut (special tokens not counted)
  size_t unique_words = 0;  // distinct pieces
  size_t merges = 0;        // new tokens made
  size_t alias_merges = 0;  // steps whose pair was already a token
  double count_seconds = 0;
  double merge_seconds = 0;
  std::vector<MergeRecord> history;  // every step, in order
};

// The distinct pieces of a training text and how often each occurs, sorted by bytes.
struct WordCounts {
  std::vector<std::string> words;
  std::vector<uint64_t> counts;
  size_t pieces = 0;
};

// Splits text (special tokens cut out and dropped, then the regex) and counts the pieces,
// on `threads` threads (0: all cores), each counting its own chunk in its own table.
WordCounts count_words(std::string_view text, const SplitPattern& pattern,
                       const std::vector<std::string>& special_tokens, int threads);

class Bpe {
 public:
  // The 256 byte tokens alone, with the GPT-2 pattern and no special tokens.
  Bpe();
  // A vocabulary from its tokens (checked: see check_tokens in bpe.cpp) and split pattern.
  Bpe(std::vector<Token> tokens, std::string pattern);

  // Training (bpe_train.cpp): the fast trainer. naive::train (bpe_naive.h) is the reference.
  static Bpe train(std::string_view text, const TrainOptions& options,
                   TrainStats* stats = nullptr);
  // Training on pre-counted words (both trainers share count_words).
  static Bpe train_words(const WordCounts& words, const TrainOptions& options,
                         TrainStats* stats = nullptr);

  // Encoding (bpe_encode.cpp). encode() recognises special tokens in the text;
  // encode_ordinary() treats them as plain text. encode_parallel() splits the text into
  // chunks at piece boundaries and encodes them on `threads` threads (0: all cores); the
  // ids are the same as encode()'s (or encode_ordinary()'s, with specials = false).
  std::vector<uint32_t> encode(std::string_view text) const;
  std::vector<uint32_t> encode_ordinary(std::string_view text) const;
  std::vector<uint32_t> encode_parallel(std::string_view text, int threads = 0,
                                        bool specials = true) const;
  // One piece, no splitting: rules 2 and 3 above (heap + linked list). Appends to out.
  void encode_piece(std::string_view piece, std::vector<uint32_t>* out) const;

  // The bytes of the ids, one after another. Throws on an id outside the vocabulary.
  std::string decode(std::span<const uint32_t> ids) const;

  // Files (bpe_files.cpp). save/load: brrr's own text format, documented in bpe_files.cpp.
  // export_tiktoken/import_tiktoken: one "base64(bytes) rank" line per ordinary token, the
  // format tiktoken's load_tiktoken_bpe reads (special tokens are not in it; import takes
  // them as an argument and gives them the ids after the ranks). Files are written
  // atomically (a temporary file, fsync, rename). Bad files throw brrr::Error naming the
  // file and line.
  void save(const std::string& path) const;
  static Bpe load(const std::string& path);
  void export_tiktoken(const std::string& path) const;
  static Bpe import_tiktoken(const std::string& path, const std::string& pattern,
                             const std::vector<std::string>& special_tokens = {});

  // The vocabulary.
  size_t vocab_size() const { return tokens_.size(); }
  const Token& token(uint32_t id) const { return tokens_.at(id); }
  const std::vector<Token>& tokens() const { return tokens_; }
  const std::string& pattern() const { return pattern_; }
  const SplitPattern& split_pattern() const { return *split_; }
  uint32_t byte_token(unsigned char b) const { return byte_token_[b]; }
  // The ordinary token with exactly these bytes, or kNoToken.
  uint32_t find_token(std::string_view bytes) const;
  // The token that the adjacent pair (left, right) merges into, or kNoToken.
  uint32_t merged(uint32_t left, uint32_t right) const { return pairs_.find(left, right); }
  // Special tokens, in id order, and their ids.
  const std::vector<std::string>& special_tokens() const { return special_texts_; }
  const std::vector<uint32_t>& special_ids() const { return special_ids_; }

 private:
  std::vector<uint32_t> encode_range(std::string_view text, bool specials, int threads) const;

  std::vector<Token> tokens_;
  std::string pattern_;
  std::shared_ptr<const SplitPattern> split_;  // shared by copies of this Bpe
  std::array<uint32_t, 256> byte_token_{};
  PairMap pairs_;                       // every (x, y) with bytes(x)+bytes(y) a token
  BytesMap<uint32_t> token_index_;      // bytes -> ordinary token
  std::vector<std::string> special_texts_;
  std::vector<uint32_t> special_ids_;
};

// One thread's encoder for a text that arrives in chunks (stream_encode.h): its splitter, its
// cache of encoded pieces (kept from chunk to chunk) and its scratch space.
class BpeChunkEncoder {
 public:
  BpeChunkEncoder(const Bpe& bpe, bool specials);
  ~BpeChunkEncoder();
  BpeChunkEncoder(const BpeChunkEncoder&) = delete;
  BpeChunkEncoder& operator=(const BpeChunkEncoder&) = delete;

  // Appends the ids of text[0, end) to out, as the encoding of a longer text would have them
  // there, given that that text starts a piece at 0 and its bytes after `end` begin with
  // text[end, text.size()) (a lookahead for the regex). Returns false when the split did not
  // end exactly at `end` (a custom pattern whose pieces cross it).
  bool encode(std::string_view text, size_t end, std::vector<uint32_t>* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace brrr::tokenizer
