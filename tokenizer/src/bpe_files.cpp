// tokenizer/src/bpe_files.cpp: saving and loading a tokenizer; tiktoken's rank files.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/bpe.h. Read next: token_file.cpp.
//
// brrr's tokenizer file is plain text, one token a line, so a person can read what the
// tokenizer learned:
//
//   brrr-bpe 1
//   # comments and blank lines are skipped
//   pattern "'(?:[sdmt]|ll|ve|re)| ?\\p{L}++| ..."
//   tokens 4096
//   0 byte "\x00"
//   ...
//   116 byte "t"
//   256 merge 32 116 " t"
//   257 merge 104 101 "he"
//   ...
//   4095 special "<|endoftext|>"
//
// Lines: `ID byte "B"` (one byte), `ID merge LEFT RIGHT "BYTES"` (the bytes of LEFT then
// RIGHT, repeated so the reader need not work them out), `ID special "TEXT"`. Ids come in
// order 0, 1, 2, ...; `tokens N` says how many lines follow, so a cut-off file is caught.
// Strings are quoted: printable text as itself, \" \\ \n \r \t, any other byte as \xHH.
//
// tiktoken's format: one line per ordinary token, `base64(bytes) rank`, in rank order;
// special tokens are not in the file (tiktoken takes them as a separate dict).
#include <algorithm>
#include <charconv>
#include <map>
#include <sstream>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/io.h"
#include "file_util.h"

namespace brrr::tokenizer {

using internal::quote;
using internal::unquote;

namespace {

// Reads a file line by line and words within a line; every error names file and line.
class LineReader {
 public:
  LineReader(std::string path) : path_(std::move(path)), text_(read_file(path_)) {}

  // The next line that is neither blank nor a comment; false at the end of the file.
  bool next_line() {
    while (pos_ < text_.size()) {
      size_t end = text_.find('\n', pos_);
      if (end == std::string::npos) end = text_.size();
      line_ = std::string_view(text_).substr(pos_, end - pos_);
      if (!line_.empty() && line_.back() == '\r') line_.remove_suffix(1);
      pos_ = end + 1;
      number_++;
      col_ = 0;
      skip_spaces();
      if (col_ < line_.size() && line_[col_] != '#') return true;
    }
    return false;
  }

  template <class... Parts>
  [[noreturn]] void fail(const Parts&... parts) const {
    ::brrr::detail::fail(path_, ":", number_, ": ", parts...);
  }

  std::string_view word() {
    skip_spaces();
    size_t start = col_;
    while (col_ < line_.size() && line_[col_] != ' ' && line_[col_] != '\t') col_++;
    if (start == col_) fail("line ends early: ", line_);
    return line_.substr(start, col_ - start);
  }
  uint64_t number(const char* what) {
    std::string_view w = word();
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(w.data(), w.data() + w.size(), value);
    if (ec != std::errc() || end != w.data() + w.size())
      fail("expected ", what, " (a number), found '", w, "'");
    return value;
  }
  std::string quoted() {
    skip_spaces();
    std::string bytes, error;
    size_t used = 0;
    if (!unquote(line_.substr(col_), &bytes, &used, &error)) fail(error, ": ", line_);
    col_ += used;
    return bytes;
  }
  void end_of_line() {
    skip_spaces();
    if (col_ < line_.size()) fail("unexpected text at the end of the line: ", line_.substr(col_));
  }
  void expect(std::string_view keyword) {
    std::string_view w = word();
    if (w != keyword) fail("expected '", keyword, "', found '", w, "'");
  }

  const std::string& path() const { return path_; }
  size_t line_number() const { return number_; }

 private:
  void skip_spaces() {
    while (col_ < line_.size() && (line_[col_] == ' ' || line_[col_] == '\t')) col_++;
  }
  std::string path_;
  std::string text_;
  size_t pos_ = 0;
  std::string_view line_;
  size_t col_ = 0;
  size_t number_ = 0;
};

}  // namespace

// ----------------------------------------------------------------------------
// brrr's text format

void Bpe::save(const std::string& path) const {
  std::ostringstream out;
  out << "brrr-bpe 1\n"
      << "# A byte-level BPE tokenizer written by brrr; the format is documented in\n"
      << "# tokenizer/src/bpe_files.cpp and docs/chapters/06-tokenization.md.\n"
      << "# One token a line:  ID byte \"B\"  |  ID merge LEFT RIGHT \"BYTES\"  |  ID special \"TEXT\"\n"
      << "pattern " << quote(pattern_) << "\n"
      << "tokens " << tokens_.size() << "\n";
  for (uint32_t id = 0; id < tokens_.size(); id++) {
    const Token& t = tokens_[id];
    out << id;
    if (t.kind == Token::kByte) out << " byte ";
    if (t.kind == Token::kMerge) out << " merge " << t.left << " " << t.right << " ";
    if (t.kind == Token::kSpecial) out << " special ";
    out << quote(t.bytes) << "\n";
  }
  AtomicFile file(path);
  file.write(out.str());
  file.commit();
}

Bpe Bpe::load(const std::string& path) {
  LineReader in(path);
  if (!in.next_line()) in.fail("empty file, expected the header 'brrr-bpe 1'");
  in.expect("brrr-bpe");
  if (in.number("the format version") != 1) in.fail("unknown format version (this brrr reads 1)");
  in.end_of_line();

  if (!in.next_line()) in.fail("file ends before the 'pattern' line");
  in.expect("pattern");
  std::string pattern = in.quoted();
  in.end_of_line();
  try {
    SplitPattern check(pattern);
  } catch (const Error& e) {
    in.fail(e.what());
  }

  if (!in.next_line()) in.fail("file ends before the 'tokens' line");
  in.expect("tokens");
  uint64_t count = in.number("the number of tokens");
  in.end_of_line();
  if (count >= kNoToken) in.fail("too many tokens: ", count);

  std::vector<Token> tokens;
  BytesMap<uint32_t> ordinary, special;
  std::vector<int> byte_seen(256, -1);
  while (tokens.size() < count) {
    if (!in.next_line())
      in.fail("file ends after ", tokens.size(), " of the ", count,
              " tokens the header announces (truncated?)");
    uint64_t id = in.number("a token id");
    if (id < tokens.size()) in.fail("duplicate token id ", id);
    if (id != tokens.size())
      in.fail("expected token id ", tokens.size(), ", found ", id,
              " (ids must be consecutive, in order)");
    Token t;
    std::string_view kind = in.word();
    if (kind == "byte") {
      t.kind = Token::kByte;
      t.bytes = in.quoted();
      if (t.bytes.size() != 1) in.fail("byte token ", id, " must be exactly one byte, has ", t.bytes.size());
      int b = static_cast<unsigned char>(t.bytes[0]);
      if (byte_seen[b] >= 0) in.fail("byte ", b, " already is token ", byte_seen[b]);
      byte_seen[b] = int(id);
    } else if (kind == "merge") {
      t.kind = Token::kMerge;
      uint64_t left = in.number("the left token"), right = in.number("the right token");
      for (uint64_t part : {left, right}) {
        if (part >= id)
          in.fail("merge ", id, " names unknown token ", part, " (only tokens 0..", id - 1,
                  " come before it)");
        if (tokens[part].kind == Token::kSpecial)
          in.fail("merge ", id, " names special token ", part);
      }
      t.left = uint32_t(left);
      t.right = uint32_t(right);
      t.bytes = in.quoted();
      std::string made = tokens[left].bytes + tokens[right].bytes;
      if (t.bytes != made)
        in.fail("merge ", id, " says its bytes are ", quote(t.bytes), " but tokens ", left,
                " and ", right, " make ", quote(made));
    } else if (kind == "special") {
      t.kind = Token::kSpecial;
      t.bytes = in.quoted();
      if (t.bytes.empty()) in.fail("special token ", id, " is empty");
      uint64_t h = hash_bytes(t.bytes);
      if (const uint32_t* other = special.find(t.bytes, h))
        in.fail("special token ", id, " repeats special token ", *other);
      special(t.bytes, h) = uint32_t(id);
    } else {
      in.fail("unknown token kind '", kind, "' (expected byte, merge or special)");
    }
    in.end_of_line();
    if (t.kind != Token::kSpecial) {
      uint64_t h = hash_bytes(t.bytes);
      if (const uint32_t* other = ordinary.find(t.bytes, h))
        in.fail("token ", id, " has the same bytes as token ", *other);
      ordinary(t.bytes, h) = uint32_t(id);
    }
    tokens.push_back(std::move(t));
  }
  if (in.next_line())
    in.fail("more tokens than the ", count, " the header announces");
  for (int b = 0; b < 256; b++)
    if (byte_seen[b] < 0) in.fail("no token for byte ", b, " (every byte needs one)");
  return Bpe(std::move(tokens), std::move(pattern));
}

// ----------------------------------------------------------------------------
// tiktoken's format

void Bpe::export_tiktoken(const std::string& path) const {
  std::string out;
  for (uint32_t id = 0; id < tokens_.size(); id++) {
    if (tokens_[id].kind == Token::kSpecial) continue;
    out += internal::base64_encode(tokens_[id].bytes);
    out += ' ';
    out += std::to_string(id);
    out += '\n';
  }
  AtomicFile file(path);
  file.write(out);
  file.commit();
}

Bpe Bpe::import_tiktoken(const std::string& path, const std::string& pattern,
                         const std::vector<std::string>& special_tokens) {
  LineReader in(path);
  std::vector<std::string> by_rank;
  std::vector<size_t> line_of;  // for errors found after reading
  BytesMap<uint32_t> rank_of;
  while (in.next_line()) {
    std::string_view encoded = in.word();
    uint64_t rank = in.number("a rank");
    in.end_of_line();
    std::string bytes;
    if (!internal::base64_decode(encoded, &bytes) || bytes.empty())
      in.fail("bad base64 '", encoded, "'");
    if (rank >= kNoToken - special_tokens.size()) in.fail("rank ", rank, " is too large");
    if (rank >= by_rank.size()) by_rank.resize(rank + 1), line_of.resize(rank + 1, 0);
    if (line_of[rank] != 0) in.fail("duplicate rank ", rank, " (first on line ", line_of[rank], ")");
    uint64_t h = hash_bytes(bytes);
    if (const uint32_t* other = rank_of.find(bytes, h))
      in.fail("token ", quote(bytes), " already has rank ", *other);
    rank_of(bytes, h) = uint32_t(rank);
    by_rank[rank] = std::move(bytes);
    line_of[rank] = in.line_number();
  }
  if (by_rank.empty()) in.fail("no tokens in the file");
  for (size_t r = 0; r < by_rank.size(); r++)
    if (line_of[r] == 0)
      ::brrr::detail::fail(path, ": rank ", r, " is missing (ranks must be 0..", by_rank.size() - 1,
                           " with no gaps)");

  // tiktoken files carry no merges. A token of rank r is made of the two parts that BPE
  // with only the ranks below r leaves of its bytes (as minbpe recovers GPT-4's merges).
  std::vector<Token> tokens(by_rank.size());
  for (uint32_t r = 0; r < by_rank.size(); r++) {
    Token& t = tokens[r];
    t.bytes = by_rank[r];
    if (t.bytes.size() == 1) {
      t.kind = Token::kByte;
      continue;
    }
    std::vector<std::string> parts;
    for (char c : t.bytes) parts.emplace_back(1, c);
    while (parts.size() > 2) {
      uint32_t best_rank = kNoToken;
      size_t best = 0;
      for (size_t i = 0; i + 1 < parts.size(); i++) {
        std::string joined = parts[i] + parts[i + 1];
        const uint32_t* rank = rank_of.find(joined, hash_bytes(joined));
        if (rank && *rank < r && *rank < best_rank) best_rank = *rank, best = i;
      }
      if (best_rank == kNoToken) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + best + 1);
    }
    const uint32_t* left = parts.size() == 2 ? rank_of.find(parts[0], hash_bytes(parts[0])) : nullptr;
    const uint32_t* right = parts.size() == 2 ? rank_of.find(parts[1], hash_bytes(parts[1])) : nullptr;
    if (!left || !right || *left >= r || *right >= r) {
      // BPE got stuck: take any split into two lower-ranked tokens.
      left = right = nullptr;
      for (size_t cut = 1; cut < t.bytes.size() && !(left && right); cut++) {
        std::string_view a = std::string_view(t.bytes).substr(0, cut);
        std::string_view b = std::string_view(t.bytes).substr(cut);
        left = rank_of.find(a, hash_bytes(a));
        right = rank_of.find(b, hash_bytes(b));
        if (left && *left >= r) left = nullptr;
        if (right && *right >= r) right = nullptr;
      }
    }
    if (!left || !right)
      ::brrr::detail::fail(path, ":", line_of[r], ": token ", quote(t.bytes), " (rank ", r,
                           ") is not two tokens of lower rank put together");
    t.kind = Token::kMerge;
    t.left = *left;
    t.right = *right;
  }
  for (int b = 0; b < 256; b++) {
    std::string one(1, char(b));
    if (!rank_of.find(one, hash_bytes(one)))
      ::brrr::detail::fail(path, ": no token for byte ", b, " (every byte needs one)");
  }
  for (const std::string& s : special_tokens)
    tokens.push_back(Token{Token::kSpecial, kNoToken, kNoToken, s});
  return Bpe(std::move(tokens), pattern_by_name(pattern));
}

}  // namespace brrr::tokenizer
