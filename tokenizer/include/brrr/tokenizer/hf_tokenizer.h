// brrr/tokenizer/hf_tokenizer.h: Hugging Face's byte-level BPE (GPT-2's tokenizer), read from
// tokenizer.json or from vocab.json + merges.txt, giving the ids Hugging Face's tokenizers gives.
// Chapter 08 (training: "Pretrained models"). Read before: bpe.h (brrr's own BPE), chapter 06.
// Read next: brrr/models/hf.h (the model beside it in the folder).
//
// Three differences from brrr's Bpe, each of which changes ids:
//   1. Token strings are not bytes: every byte b is first written as one printable character
//      (GPT-2's bytes_to_unicode: the printable bytes stand for themselves, the other 68 are
//      shifted to U+0100 and up, so a space is "Ġ" and a newline "Ċ"), and the vocabulary maps
//      those strings to ids.
//   2. A piece is encoded by its merge list: repeatedly the adjacent pair of lowest merge
//      rank (leftmost on a tie) becomes one symbol, not the pair whose result has the lowest
//      id (bpe.h's rule 3).
//   3. Added tokens ("<|endoftext|>" and any others in "added_tokens") are cut out of the text
//      first, leftmost and then longest, and never split.
// The split regex is GPT-2's as Hugging Face writes it (pretokenize.h's kGpt2Pattern cuts the
// same pieces).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "brrr/tokenizer/pretokenize.h"
#include "brrr/tokenizer/text_tokenizer.h"

namespace brrr::tokenizer {

// GPT-2's split pattern exactly as tokenizers' ByteLevel pre-tokenizer and GPT-2's encoder.py write it.
inline constexpr std::string_view kHfGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The character GPT-2's byte-level BPE writes for byte b, as UTF-8 ("Ġ" for ' ').
std::string byte_to_unicode(unsigned char b);

class Bpe;
class CharTokenizer;

// tokenizer.json text that Hugging Face's tokenizers loads and encodes to the same ids as
// brrr's own tokenizers (brrr export --format hf; tokenizer/src/hf_export.cpp):
//   Bpe: a byte-level BPE whose merge list has every pair (x, y) whose bytes join into a token
//   t, ranked by t's id, with ignore_merges (a piece that is a token is that token): so
//   Hugging Face's rule (lowest merge rank first) is bpe.h's (lowest resulting id first);
//   special tokens are added tokens.
//   CharTokenizer: a BPE with the characters as its vocabulary and no merges, no
//   pre-tokenizer, and the Fuse decoder (tokens joined with nothing between them).
std::string hf_tokenizer_json(const Bpe& bpe);
std::string hf_tokenizer_json(const CharTokenizer& chars);

class HfTokenizer final : public TextTokenizer {
 public:
  // The tokenizer of a Hugging Face folder: dir/tokenizer.json, else dir/vocab.json +
  // dir/merges.txt. Anything else (another model type, a normalizer, byte_fallback, a merge
  // of tokens missing from the vocabulary) is an error naming the file and what is wrong.
  static std::unique_ptr<HfTokenizer> from_folder(const std::string& dir);
  static std::unique_ptr<HfTokenizer> from_tokenizer_json(const std::string& path);
  static std::unique_ptr<HfTokenizer> from_vocab_merges(const std::string& vocab_path, const std::string& merges_path);

  std::vector<std::uint32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const std::uint32_t> ids) const override;
  // One more than the largest id (the vocabulary and the added tokens).
  std::size_t vocab_size() const override { return id_to_token_.size(); }
  std::string kind() const override { return "hf"; }
  // Writes the tokenizer.json this tokenizer was read from (or an equivalent one), atomically.
  void save(const std::string& path) const override;
  std::string to_hf_json() const override;
  // An added token written `text`, else a vocabulary entry of that text (vocab.json + merges.txt
  // list GPT-2's "<|endoftext|>" among the tokens, not as an added token).
  std::optional<std::uint32_t> special_token(std::string_view text) const override;

  const std::vector<std::string>& added_tokens() const { return added_; }

 private:
  HfTokenizer() = default;
  void finish(const std::string& label);  // checks the tables and compiles the pattern
  void encode_piece(std::string_view piece, std::vector<std::uint32_t>* out) const;

  std::unordered_map<std::string, std::uint32_t> vocab_;        // token string -> id
  std::vector<std::string> id_to_token_;                         // id -> token string ("" if unused)
  std::vector<std::pair<std::string, std::string>> merges_;      // in rank order
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<std::uint32_t, std::uint32_t>> merge_of_;  // (a, b) -> (rank, merged id)
  std::vector<std::string> added_;                               // added tokens' contents
  std::vector<std::uint32_t> added_ids_;
  std::vector<bool> is_added_;                                   // per id: decoded as written
  bool ignore_merges_ = false;  // a piece that is a whole token is that token (rule 2 of bpe.h)
  std::unique_ptr<SplitPattern> split_;
};

}  // namespace brrr::tokenizer
