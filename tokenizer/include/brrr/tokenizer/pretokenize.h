// brrr/tokenizer/pretokenize.h: cutting text into pieces before BPE sees it.
// Chapter 06 (tokenization), docs/chapters/06-tokenization.md. Read first: the chapter's
// "Pre-tokenization" section. Read next: bpe.h.
//
// BPE never merges across a piece boundary, so the pieces decide what a token can be: with
// the GPT-2 pattern " dog." is two pieces, " dog" and ".", so the vocabulary learns " dog"
// once instead of once per punctuation mark that may follow it. Two cuts happen, in order:
//
//   1. special tokens ("<|endoftext|>") are found first and cut out whole: they are never
//      split and never produced by merges;
//   2. the ordinary text between them is split by a regex (PCRE2, JIT compiled, UTF-8 mode
//      with Unicode classes such as \p{L}). Bytes no match covers (invalid UTF-8, or
//      characters a custom pattern leaves out) become pieces of their own, so every byte of
//      the input lands in exactly one piece and decoding gives back the input exactly.
//
// Splitting on all cores needs chunk boundaries that the one-thread split would also cut
// at; find_chunks() proposes them and each Splitter run checks its own end (see Splitter).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace brrr::tokenizer {

// The split patterns of GPT-2 (r50k) and GPT-4 (cl100k), as tiktoken 0.14 writes them
// (possessive quantifiers, same pieces as OpenAI's originals).
inline constexpr std::string_view kGpt2Pattern =
    R"('(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s)";
inline constexpr std::string_view kCl100kPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)";

// "gpt2" and "cl100k" name the built-in patterns; anything else is taken as a regex.
std::string pattern_by_name(std::string_view name_or_regex);

// A compiled split pattern. Compiling is slow (JIT), matching is fast; one SplitPattern is
// shared by all threads, each with its own Splitter. Throws brrr::Error naming the offset
// of the problem when the regex does not compile.
class SplitPattern {
 public:
  explicit SplitPattern(std::string pattern);
  ~SplitPattern();
  SplitPattern(const SplitPattern&) = delete;
  SplitPattern& operator=(const SplitPattern&) = delete;

  const std::string& pattern() const { return pattern_; }
  const void* code() const { return code_; }  // the pcre2_code, for Splitter

 private:
  std::string pattern_;
  void* code_ = nullptr;
};

// Walks the pieces of text[begin, end) one next() at a time. The regex sees all of `text`
// (its lookaheads may look past `end`), so a run over a chunk finds exactly the pieces a
// run over the whole text finds there, provided the chunk starts where the whole-text run
// would start a piece. ended_cleanly() says whether this run's last piece ended exactly at
// `end`; if it did, the next chunk's run starts in step with the whole-text run. Holds the
// PCRE2 match data: one Splitter per thread.
class Splitter {
 public:
  explicit Splitter(const SplitPattern& pattern);
  ~Splitter();
  Splitter(const Splitter&) = delete;
  Splitter& operator=(const Splitter&) = delete;

  void start(std::string_view text, size_t begin, size_t end);
  void start(std::string_view text) { start(text, 0, text.size()); }
  bool next(std::string_view* piece);
  bool ended_cleanly() const { return clean_end_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string_view text_;
  size_t end_ = 0;
  size_t pos_ = 0;         // where the previous piece ended
  size_t search_ = 0;      // where the next regex search starts (> pos_ after an empty match)
  size_t gap_end_ = 0;     // a found match waits here while the gap before it is returned
  size_t match_end_ = 0;
  bool have_match_ = false;
  bool done_ = false;
  bool clean_end_ = false;
};

// All pieces of `text` (convenience for tests and small inputs).
std::vector<std::string_view> split(const SplitPattern& pattern, std::string_view text);

// ----------------------------------------------------------------------------
// Special tokens

// A stretch of the input: ordinary text (special == -1) or one special token (its index in
// the list the segments were made with).
struct Segment {
  size_t begin, end;
  int special;
};

// Cuts text into ordinary stretches and special tokens. Where occurrences overlap, the
// leftmost wins, and of those starting at the same byte the longest. Empty ordinary
// stretches are left out.
std::vector<Segment> find_special_tokens(std::string_view text,
                                         const std::vector<std::string>& specials);

// Chunk boundaries for splitting `text` on several threads: about `parts` chunks of at least
// `min_chunk_bytes`, each boundary a byte strictly inside an ordinary segment where an ASCII
// non-space byte is followed by a space (where the built-in patterns always cut). Returns
// the sorted list 0 = b0 < b1 < ... < bk = text.size(). A custom pattern might not cut
// there; Splitter runs detect that (ended_cleanly) and the callers redo the work on one
// thread.
std::vector<size_t> find_chunks(std::string_view text, const std::vector<Segment>& segments,
                                size_t parts, size_t min_chunk_bytes);

// Calls on_piece(std::string_view) for each ordinary piece and on_special(int index) for
// each special token of text[chunk_begin, chunk_end), in order. Returns false when the
// chunk's end lies inside an ordinary segment and the split there did not end cleanly:
// the caller must then not trust this chunk's pieces (see find_chunks).
template <class OnPiece, class OnSpecial>
bool for_each_piece(Splitter& splitter, std::string_view text,
                    const std::vector<Segment>& segments, size_t chunk_begin, size_t chunk_end,
                    OnPiece&& on_piece, OnSpecial&& on_special) {
  // The first segment that ends after chunk_begin (segments are sorted and cover text).
  size_t lo = 0, hi = segments.size();
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (segments[mid].end <= chunk_begin) lo = mid + 1; else hi = mid;
  }
  bool clean = true;
  for (size_t s = lo; s < segments.size() && segments[s].begin < chunk_end; s++) {
    const Segment& seg = segments[s];
    if (seg.special >= 0) {
      on_special(seg.special);
      continue;
    }
    // The regex sees the whole segment (as tiktoken, which splits each slice between
    // special tokens), and walks only the part inside this chunk.
    std::string_view subject = text.substr(seg.begin, seg.end - seg.begin);
    size_t begin = std::max(chunk_begin, seg.begin) - seg.begin;
    size_t end = std::min(chunk_end, seg.end) - seg.begin;
    splitter.start(subject, begin, end);
    std::string_view piece;
    while (splitter.next(&piece)) on_piece(piece);
    if (end < subject.size() && !splitter.ended_cleanly()) clean = false;
  }
  return clean;
}

}  // namespace brrr::tokenizer
