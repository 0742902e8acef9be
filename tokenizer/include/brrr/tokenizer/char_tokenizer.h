// brrr/tokenizer/char_tokenizer.h: the simplest tokenizer: one token per character.
// Chapter 06 (tokenization); used by the first GPT of chapter 07. Read first: nothing (this
// is where the chapter starts). Read next: pretokenize.h and bpe.h.
//
// The vocabulary is the sorted set of characters of a text, as in nanoGPT's shakespeare_char
// (`chars = sorted(set(text))`): tinyshakespeare gives 65 tokens. A character is a valid
// UTF-8 sequence; a byte that is not part of one counts as a character of its own, so any
// byte string has a vocabulary and round-trips. Sorting by bytes is sorting by code point.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brrr::tokenizer {

class CharTokenizer {
 public:
  CharTokenizer() : CharTokenizer(std::vector<std::string>{}) {}
  // The vocabulary of `text`: its distinct characters, sorted.
  static CharTokenizer from_text(std::string_view text);
  // A given vocabulary (distinct, each one character); it is sorted.
  explicit CharTokenizer(std::vector<std::string> chars);

  // Throws brrr::Error naming the character and its byte offset when it is not in the
  // vocabulary.
  std::vector<uint32_t> encode(std::string_view text) const;
  std::string decode(std::span<const uint32_t> ids) const;

  size_t vocab_size() const { return chars_.size(); }
  const std::vector<std::string>& chars() const { return chars_; }

  // Text file: "brrr-char 1", "chars N", then `ID "CHAR"` lines (quoted as in bpe_files.cpp).
  void save(const std::string& path) const;
  static CharTokenizer load(const std::string& path);

  // Splits text into characters (valid UTF-8 sequences or single stray bytes).
  static std::vector<std::string_view> characters(std::string_view text);
  // The offset of the first stray byte of text (one that does not begin a valid UTF-8 sequence,
  // or begins one that breaks off), or std::string_view::npos when text is all UTF-8. brrr
  // train refuses to make a vocabulary of "characters" from a file that is not text.
  static size_t first_stray_byte(std::string_view text);

 private:
  uint32_t id_of(std::string_view ch) const;  // kNoToken (bpe.h) when absent
  std::vector<std::string> chars_;
  uint32_t single_byte_[256];  // id of each one-byte character, or ~0u
};

}  // namespace brrr::tokenizer
