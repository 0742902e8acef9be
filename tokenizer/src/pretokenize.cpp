// tokenizer/src/pretokenize.cpp: the split regex (PCRE2 with JIT) and special tokens.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/pretokenize.h. Read next: bpe.cpp.
//
// PCRE2 options, and why:
//   PCRE2_UTF                the subject is UTF-8, so \p{L} sees characters, not bytes;
//   PCRE2_UCP                \s and friends use Unicode properties, as tiktoken's regex does;
//   PCRE2_MATCH_INVALID_UTF  invalid UTF-8 is allowed in the subject: it simply never
//                            matches, and Splitter returns it as a "gap" piece;
//   PCRE2_DOLLAR_ENDONLY     `$` means the end of the text only, as in Rust's regex.
// The pattern is JIT compiled (pcre2_jit_compile): matching runs machine code instead of
// the interpreter, several times faster. Each Splitter owns its match data and a JIT stack
// (grown up to 16 MiB, for long runs of whitespace that the lookahead backtracks over).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "brrr/error.h"
#include "brrr/tokenizer/pretokenize.h"

namespace brrr::tokenizer {

std::string pattern_by_name(std::string_view name_or_regex) {
  if (name_or_regex == "gpt2" || name_or_regex == "r50k") return std::string(kGpt2Pattern);
  if (name_or_regex == "cl100k" || name_or_regex == "gpt4") return std::string(kCl100kPattern);
  BRRR_CHECK(!name_or_regex.empty(), "pattern: empty split pattern (use gpt2, cl100k or a regex)");
  return std::string(name_or_regex);
}

// ----------------------------------------------------------------------------
// SplitPattern

static std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return std::string(reinterpret_cast<const char*>(buffer));
}

SplitPattern::SplitPattern(std::string pattern) : pattern_(std::move(pattern)) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                   options, &error, &error_offset, nullptr);
  BRRR_CHECK(code != nullptr, "split pattern: does not compile at offset ", error_offset, ": ",
             pcre2_message(error), " (pattern: ", pattern_, ")");
  int rc = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  if (rc != 0) {
    pcre2_code_free(code);
    ::brrr::detail::fail("split pattern: PCRE2 JIT compilation failed: ", pcre2_message(rc),
                 " (is this PCRE2 built without JIT?)");
  }
  code_ = code;
}

SplitPattern::~SplitPattern() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

// ----------------------------------------------------------------------------
// Splitter

struct Splitter::Impl {
  const pcre2_code* code;
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ~Impl() {
    pcre2_match_data_free(match);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

Splitter::Splitter(const SplitPattern& pattern) : impl_(std::make_unique<Impl>()) {
  impl_->code = static_cast<const pcre2_code*>(pattern.code());
  impl_->match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  impl_->context = pcre2_match_context_create(nullptr);
  impl_->stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  BRRR_CHECK(impl_->match && impl_->context && impl_->stack, "split pattern: out of memory");
  pcre2_jit_stack_assign(impl_->context, nullptr, impl_->stack);
}

Splitter::~Splitter() = default;

void Splitter::start(std::string_view text, size_t begin, size_t end) {
  BRRR_CHECK(begin <= end && end <= text.size(), "Splitter::start: range [", begin, ", ", end,
             ") is not inside a text of ", text.size(), " bytes");
  text_ = text;
  end_ = end;
  pos_ = search_ = begin;
  have_match_ = false;
  done_ = false;
  clean_end_ = false;
}

// Each call returns the next piece: either the gap of unmatched bytes before the next match,
// or the match itself. Pieces stop once they reach end_ (the last may run past it when a
// match straddles the end; the chunk is then not clean).
bool Splitter::next(std::string_view* piece) {
  while (!done_) {
    if (pos_ >= end_) {
      // Clean when the last piece was a match that ended exactly here (or nothing was
      // returned yet), or a gap that ends exactly where the next match starts.
      done_ = true;
      clean_end_ = pos_ == end_ && (!have_match_ || gap_end_ == end_);
      return false;
    }
    if (!have_match_) {
      // Find the next non-empty match at or after search_ (none: a virtual one at the end).
      size_t s = text_.size(), e = text_.size();
      if (search_ < text_.size()) {
        int rc = pcre2_jit_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text_.data()),
                                 text_.size(), search_, 0, impl_->match, impl_->context);
        if (rc >= 0) {
          const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(impl_->match);
          s = ovector[0];
          e = ovector[1];
          if (e == s) {  // an empty match: no piece; look again one byte further on
            search_ = s + 1;
            continue;
          }
        } else if (rc != PCRE2_ERROR_NOMATCH) {
          ::brrr::detail::fail("split pattern: PCRE2 match failed at byte ", search_, ": ",
                       pcre2_message(rc));
        }
      }
      gap_end_ = s;
      match_end_ = e;
      have_match_ = true;
    }
    if (gap_end_ > pos_) {  // unmatched bytes before the match: a piece of their own
      size_t gap_end = std::min(gap_end_, end_);
      *piece = text_.substr(pos_, gap_end - pos_);
      pos_ = gap_end;
      return true;
    }
    BRRR_CHECK(match_end_ > gap_end_, "Splitter::next: lost its place at byte ", pos_);
    *piece = text_.substr(gap_end_, match_end_ - gap_end_);
    pos_ = search_ = match_end_;
    have_match_ = false;
    return true;
  }
  return false;
}

std::vector<std::string_view> split(const SplitPattern& pattern, std::string_view text) {
  std::vector<std::string_view> pieces;
  Splitter splitter(pattern);
  splitter.start(text);
  std::string_view piece;
  while (splitter.next(&piece)) pieces.push_back(piece);
  return pieces;
}

// ----------------------------------------------------------------------------
// Special tokens

std::vector<Segment> find_special_tokens(std::string_view text,
                                         const std::vector<std::string>& specials) {
  // Every occurrence of every special token: (begin, -length, index), so that sorting puts
  // the leftmost first and, at the same byte, the longest first.
  struct Hit {
    size_t begin;
    size_t length;
    int index;
  };
  std::vector<Hit> hits;
  for (size_t i = 0; i < specials.size(); i++) {
    const std::string& s = specials[i];
    if (s.empty()) continue;
    for (size_t at = text.find(s); at != std::string_view::npos; at = text.find(s, at + 1))
      hits.push_back({at, s.size(), static_cast<int>(i)});
  }
  std::sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.length != b.length) return a.length > b.length;
    return a.index < b.index;
  });
  std::vector<Segment> segments;
  size_t pos = 0;
  for (const Hit& h : hits) {
    if (h.begin < pos) continue;  // overlaps a special token already taken
    if (h.begin > pos) segments.push_back({pos, h.begin, -1});
    segments.push_back({h.begin, h.begin + h.length, h.index});
    pos = h.begin + h.length;
  }
  if (pos < text.size()) segments.push_back({pos, text.size(), -1});
  return segments;
}

std::vector<size_t> find_chunks(std::string_view text, const std::vector<Segment>& segments,
                                size_t parts, size_t min_chunk_bytes) {
  std::vector<size_t> bounds = {0};
  size_t n = text.size();
  size_t target = std::max(min_chunk_bytes, parts ? n / parts : n);
  size_t seg = 0;
  for (size_t want = target; want < n; want = bounds.back() + target) {
    // From `want` on, the first ordinary byte i with text[i-1] an ASCII non-space byte and
    // text[i] a space, strictly inside its segment.
    size_t cut = n;
    for (size_t i = std::max<size_t>(want, 1); i < n; i++) {
      while (seg < segments.size() && segments[seg].end <= i) seg++;
      if (seg == segments.size()) break;
      const Segment& s = segments[seg];
      if (s.special >= 0 || i <= s.begin) continue;
      unsigned char before = static_cast<unsigned char>(text[i - 1]);
      if (text[i] == ' ' && before < 0x80 && before > ' ') {
        cut = i;
        break;
      }
    }
    if (cut >= n) break;
    bounds.push_back(cut);
  }
  bounds.push_back(n);
  if (n == 0) bounds.resize(1);  // an empty text has the single boundary 0
  return bounds;
}

}  // namespace brrr::tokenizer
