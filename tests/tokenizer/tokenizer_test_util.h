// tests/tokenizer/tokenizer_test_util.h: shared helpers of the tokenizer tests (chapter 06).
// Inputs are smaller under AddressSanitizer, which makes the code 10-20x slower.
#pragma once
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "brrr/tokenizer/bpe.h"

namespace brrr::tokenizer::test {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

inline std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string shakespeare_path() { return std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt"; }

// The whole of tinyshakespeare (1.1 MB).
inline const std::string& shakespeare() {
  static const std::string text = read_text(shakespeare_path());
  return text;
}

// A tokenizer of 1024 tokens trained on tinyshakespeare (trained once per test program).
inline const Bpe& shakespeare_bpe() {
  static const Bpe bpe = [] {
    TrainOptions options;
    options.vocab_size = 1024;
    return Bpe::train(shakespeare(), options);
  }();
  return bpe;
}

// Random bytes meant to hurt: NULs, stray continuation bytes, truncated and valid UTF-8,
// whitespace runs, text that looks like a special token, and plain letters.
inline std::string random_bytes(std::mt19937& rng, size_t length) {
  static const char* pieces[] = {"\0", "\x80", "\xff", "\xc3", "\xe2\x82", "\xc3\xa9", "\xe2\x82\xac",
                                 "\xf0\x9f\x98\x80", " ", "  ", "\n", "\n\n", "\t", "\r\n", "'s", "<|",
                                 "|>", "<|endoftext|>", "123", "the", " The", "!?"};
  static const size_t sizes[] = {1, 1, 1, 1, 2, 2, 3, 4, 1, 2, 1, 2, 1, 2, 2, 2, 2, 13, 3, 3, 4, 2};
  std::string s;
  while (s.size() < length) {
    uint32_t r = rng() % 100;
    if (r < 40) {
      s += char(rng() & 0xFF);  // any byte at all
    } else {
      size_t k = rng() % (sizeof(sizes) / sizeof(sizes[0]));
      s.append(pieces[k], sizes[k]);
    }
  }
  s.resize(length);
  return s;
}

// Random valid Unicode text from blocks every Unicode version since 6.0 agrees on
// (so PCRE2's and Rust's tables classify it alike): ASCII, Latin-1 letters, Greek,
// Cyrillic, CJK, emoji, digits of other scripts, combining marks, Unicode spaces.
inline std::string random_unicode(std::mt19937& rng, size_t chars) {
  auto utf8 = [](uint32_t cp) {
    std::string out;
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
    return out;
  };
  static const uint32_t ranges[][2] = {
      {0x20, 0x7E}, {0x61, 0x7A}, {0x61, 0x7A}, {0x30, 0x39}, {0x0A, 0x0A}, {0x20, 0x20},
      {0xC0, 0xFF}, {0x391, 0x3A9}, {0x410, 0x44F}, {0x4E00, 0x4F00}, {0x1F600, 0x1F64F},
      {0x660, 0x669}, {0x300, 0x36F}, {0x2000, 0x200A}, {0x3000, 0x3000}, {0xA0, 0xA0},
      {0x09, 0x0D}};
  std::string s;
  for (size_t i = 0; i < chars; i++) {
    const uint32_t* r = ranges[rng() % (sizeof(ranges) / sizeof(ranges[0]))];
    s += utf8(r[0] + rng() % (r[1] - r[0] + 1));
  }
  return s;
}

// A fresh temporary folder, removed when the object goes.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "brrr_tok_XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

}  // namespace brrr::tokenizer::test
