// tokenizer/src/char_tokenizer.cpp: one token per character.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/char_tokenizer.h. Read next:
// pretokenize.cpp, where the BPE tokenizer starts.
#include "brrr/tokenizer/char_tokenizer.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <sstream>

#include "brrr/error.h"
#include "brrr/io.h"
#include "file_util.h"

namespace brrr::tokenizer {

static constexpr uint32_t kAbsent = ~0u;

std::vector<std::string_view> CharTokenizer::characters(std::string_view text) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < text.size();) {
    size_t n = internal::utf8_char_length(text.substr(i));
    if (n == 0) n = 1;  // a stray byte is a character of its own
    out.push_back(text.substr(i, n));
    i += n;
  }
  return out;
}

size_t CharTokenizer::first_stray_byte(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = internal::utf8_char_length(text.substr(i));
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

CharTokenizer::CharTokenizer(std::vector<std::string> chars) : chars_(std::move(chars)) {
  std::sort(chars_.begin(), chars_.end());
  std::fill(std::begin(single_byte_), std::end(single_byte_), kAbsent);
  for (size_t i = 0; i < chars_.size(); i++) {
    const std::string& c = chars_[i];
    BRRR_CHECK(!c.empty(), "CharTokenizer: empty character in the vocabulary");
    BRRR_CHECK(i == 0 || chars_[i - 1] != c, "CharTokenizer: character ",
               internal::quote(c), " appears twice in the vocabulary");
    size_t n = internal::utf8_char_length(c);
    BRRR_CHECK(n == c.size() || c.size() == 1, "CharTokenizer: ", internal::quote(c),
               " is not one character");
    if (c.size() == 1) single_byte_[static_cast<unsigned char>(c[0])] = uint32_t(i);
  }
}

CharTokenizer CharTokenizer::from_text(std::string_view text) {
  // Most text is ASCII: mark single bytes in a table, collect longer characters in a set.
  bool byte_seen[256] = {};
  std::vector<std::string> chars;
  std::vector<std::string_view> longer;
  for (std::string_view ch : characters(text)) {
    if (ch.size() == 1) byte_seen[static_cast<unsigned char>(ch[0])] = true;
    else longer.push_back(ch);
  }
  for (int b = 0; b < 256; b++)
    if (byte_seen[b]) chars.emplace_back(1, char(b));
  std::sort(longer.begin(), longer.end());
  longer.erase(std::unique(longer.begin(), longer.end()), longer.end());
  for (std::string_view ch : longer) chars.emplace_back(ch);
  return CharTokenizer(std::move(chars));
}

uint32_t CharTokenizer::id_of(std::string_view ch) const {
  if (ch.size() == 1) return single_byte_[static_cast<unsigned char>(ch[0])];
  auto it = std::lower_bound(chars_.begin(), chars_.end(), ch);
  return (it != chars_.end() && *it == ch) ? uint32_t(it - chars_.begin()) : kAbsent;
}

std::vector<uint32_t> CharTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = internal::utf8_char_length(text.substr(i));
    if (n == 0) n = 1;
    uint32_t id = id_of(text.substr(i, n));
    BRRR_CHECK(id != kAbsent, "CharTokenizer::encode: character ",
               internal::quote(text.substr(i, n)), " at byte ", i,
               " is not in the vocabulary of ", chars_.size(), " characters");
    ids.push_back(id);
    i += n;
  }
  return ids;
}

std::string CharTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); i++) {
    BRRR_CHECK(ids[i] < chars_.size(), "CharTokenizer::decode: id ", ids[i], " at position ", i,
               " is outside the vocabulary of ", chars_.size(), " characters");
    out += chars_[ids[i]];
  }
  return out;
}

void CharTokenizer::save(const std::string& path) const {
  std::ostringstream out;
  out << "brrr-char 1\n# A character-level tokenizer written by brrr (chapter 06).\n"
      << "chars " << chars_.size() << "\n";
  for (size_t i = 0; i < chars_.size(); i++) out << i << " " << internal::quote(chars_[i]) << "\n";
  AtomicFile file(path);
  file.write(out.str());
  file.commit();
}

CharTokenizer CharTokenizer::load(const std::string& path) {
  std::string text = read_file(path);
  std::vector<std::string> chars;
  size_t expected = 0, line_number = 0, pos = 0;
  int stage = 0;  // 0: header, 1: count, 2: characters
  auto fail = [&](const auto&... parts) {
    ::brrr::detail::fail(path, ":", line_number, ": ", parts...);
  };
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line = std::string_view(text).substr(pos, end - pos);
    pos = end + 1;
    line_number++;
    if (line.empty() || line[0] == '#') continue;
    if (stage == 0) {
      if (line != "brrr-char 1") fail("expected the header 'brrr-char 1', found '", line, "'");
      stage = 1;
    } else if (stage == 1) {
      auto [p, ec] = line.size() > 6 && line.substr(0, 6) == "chars "
                         ? std::from_chars(line.data() + 6, line.data() + line.size(), expected)
                         : std::from_chars_result{line.data(), std::errc::invalid_argument};
      if (ec != std::errc() || p != line.data() + line.size())
        fail("expected 'chars N', found '", line, "'");
      stage = 2;
    } else {
      size_t id = 0;
      auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), id);
      if (ec != std::errc() || p >= line.data() + line.size() || *p != ' ')
        fail("expected 'ID \"CHAR\"', found '", line, "'");
      if (id != chars.size()) fail("expected id ", chars.size(), ", found ", id);
      std::string ch, error;
      size_t used = 0;
      std::string_view rest = line.substr(p - line.data() + 1);
      if (!internal::unquote(rest, &ch, &used, &error)) fail(error);
      if (used != rest.size()) fail("unexpected text after the character");
      if (chars.size() == expected) fail("more characters than the ", expected, " announced");
      if (!chars.empty() && !(chars.back() < ch))
        fail("characters must be distinct and sorted; ", internal::quote(ch), " comes after ",
             internal::quote(chars.back()));
      chars.push_back(std::move(ch));
    }
  }
  if (stage < 2) fail("file ends before the header and 'chars N' line");
  if (chars.size() != expected)
    fail("file ends after ", chars.size(), " of ", expected, " characters (truncated?)");
  try {
    return CharTokenizer(std::move(chars));
  } catch (const Error& e) {
    fail(e.what());
  }
  return {};  // not reached: fail() throws
}

}  // namespace brrr::tokenizer
