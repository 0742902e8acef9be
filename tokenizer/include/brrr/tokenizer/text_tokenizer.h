// brrr/tokenizer/text_tokenizer.h: one interface over the two tokenizers of chapter 06, so the trainer
// and the sampler do not care which one a run uses.
// Chapter 08 (training). Read before: brrr/tokenizer/{char_tokenizer,bpe}.h.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brrr::tokenizer {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<std::uint32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(std::span<const std::uint32_t> ids) const = 0;
  virtual std::size_t vocab_size() const = 0;
  virtual std::string kind() const = 0;  // "char", "bpe" or "hf" (Hugging Face's tokenizer.json, hf_tokenizer.h)
  virtual void save(const std::string& path) const = 0;
  // The same tokenizer as Hugging Face's tokenizer.json (hf_tokenizer.h), for brrr export.
  virtual std::string to_hf_json() const = 0;
  // The id of the special token written `text` (such as "<|endoftext|>"), if this tokenizer has
  // one: what a generator stops at (serve/scheduler.cpp). A character tokenizer has none.
  virtual std::optional<std::uint32_t> special_token(std::string_view text) const = 0;

  // "char": the characters of text; "bpe": byte-level BPE trained on text to vocab_size.
  static std::unique_ptr<TextTokenizer> train(const std::string& kind, std::string_view text, int vocab_size, bool verbose);
  // Loads any kind, telling them apart by the file's first line ("{": a tokenizer.json).
  static std::unique_ptr<TextTokenizer> load(const std::string& path);
};

}  // namespace brrr::tokenizer
