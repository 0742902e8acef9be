// tests/tokenizer/test_pretokenize.cpp: the split regex and special tokens (chapter 06).
#include <doctest/doctest.h>

#include <random>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/pretokenize.h"
#include "tokenizer_test_util.h"

using namespace brrr::tokenizer;
using brrr::tokenizer::test::kSanitized;

static std::vector<std::string> pieces_of(const SplitPattern& p, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view s : split(p, text)) out.emplace_back(s);
  return out;
}

TEST_CASE("pretokenize: the GPT-2 pattern splits words, numbers, punctuation and spaces") {
  SplitPattern gpt2(pattern_by_name("gpt2"));
  using V = std::vector<std::string>;
  CHECK(pieces_of(gpt2, "Hello world's 123 ok!!  \n\nDone") ==
        V{"Hello", " world", "'s", " 123", " ok", "!!", "  \n", "\n", "Done"});
  // Unicode letters are letters (\p{L}), and a space before a word joins it.
  CHECK(pieces_of(gpt2, "caf\xc3\xa9 na\xc3\xafve") == V{"caf\xc3\xa9", " na\xc3\xafve"});
  // Trailing whitespace is one piece; the last space before a word goes with the word.
  CHECK(pieces_of(gpt2, "a   b   ") == V{"a", "  ", " b", "   "});
}

TEST_CASE("pretokenize: the cl100k pattern groups at most three digits and keeps newlines apart") {
  SplitPattern cl100k(pattern_by_name("cl100k"));
  using V = std::vector<std::string>;
  CHECK(pieces_of(cl100k, "12345 I'LL go.\n\nok") ==
        V{"123", "45", " I", "'LL", " go", ".\n\n", "ok"});
}

TEST_CASE("pretokenize: every byte lands in exactly one piece, invalid UTF-8 and NULs included") {
  SplitPattern gpt2(pattern_by_name("gpt2"));
  std::mt19937 rng(1);
  for (int trial = 0; trial < 300; trial++) {
    std::string text = test::random_bytes(rng, rng() % 400);
    std::string joined;
    for (std::string_view piece : split(gpt2, text)) {
      REQUIRE(!piece.empty());
      joined += piece;
    }
    REQUIRE(joined == text);
  }
  // Invalid bytes no match covers become pieces of their own.
  using V = std::vector<std::string>;
  CHECK(pieces_of(gpt2, std::string("ab\xff\xfe cd\0e", 9)) ==
        V{"ab", "\xff\xfe", " cd", std::string("\0", 1), "e"});
}

TEST_CASE("pretokenize: a custom pattern, and a bad one is an error that names the offset") {
  SplitPattern words(pattern_by_name(R"(\p{L}+|\d)"));
  using V = std::vector<std::string>;
  CHECK(pieces_of(words, "ab 12") == V{"ab", " ", "1", "2"});  // " " is a gap piece
  CHECK_THROWS_WITH_AS(SplitPattern("(unclosed"), doctest::Contains("offset 9"), brrr::Error);
  CHECK_THROWS_WITH_AS(pattern_by_name(""), "pattern: empty split pattern (use gpt2, cl100k or a regex)", brrr::Error);
}

TEST_CASE("pretokenize: special tokens are cut out leftmost first, longest first") {
  std::string text = "a<|eot|>b<|eot|><|eot|><|e";
  std::vector<Segment> s = find_special_tokens(text, {"<|eot|>"});
  REQUIRE(s.size() == 6);
  CHECK((s[0].begin == 0 && s[0].end == 1 && s[0].special == -1));
  CHECK((s[1].begin == 1 && s[1].end == 8 && s[1].special == 0));
  CHECK((s[2].special == -1 && text.substr(s[2].begin, 1) == "b"));
  CHECK((s[3].special == 0 && s[4].special == 0));
  CHECK((s[5].special == -1 && text.substr(s[5].begin) == "<|e"));
  // Overlapping specials: at the same byte the longer wins; later overlaps are skipped.
  std::vector<Segment> o = find_special_tokens("x<|ab|>y", {"<|a", "<|ab|>", "b|>y"});
  REQUIRE(o.size() == 3);
  CHECK((o[1].special == 1 && o[1].begin == 1 && o[1].end == 7));
  CHECK(o[2].special == -1);
}

// Splitting chunk by chunk gives the pieces of the whole, for the built-in patterns.
static void check_chunks_match_whole(const std::string& pattern, const std::string& text) {
  SplitPattern p(pattern);
  Splitter splitter(p);
  std::vector<Segment> segments = find_special_tokens(text, {"<|endoftext|>"});
  std::vector<std::string_view> whole, chunked;
  auto keep = [](std::vector<std::string_view>& v) {
    return [&v](std::string_view piece) { v.push_back(piece); };
  };
  auto special = [&](int) { whole.push_back("<special>"); };
  REQUIRE(for_each_piece(splitter, text, segments, 0, text.size(), keep(whole), special));
  std::vector<size_t> bounds = find_chunks(text, segments, 64, 1000);
  REQUIRE(bounds.size() > 10);
  for (size_t c = 0; c + 1 < bounds.size(); c++)
    REQUIRE(for_each_piece(splitter, text, segments, bounds[c], bounds[c + 1], keep(chunked),
                           [&](int) { chunked.push_back("<special>"); }));
  CHECK(whole == chunked);
}

TEST_CASE("pretokenize: chunks cut where the whole-text split cuts (GPT-2 and cl100k)") {
  std::mt19937 rng(2);
  std::string text = test::shakespeare().substr(0, kSanitized ? 100000 : 400000);
  for (int i = 0; i < 50; i++) text += test::random_bytes(rng, 500) + test::random_unicode(rng, 300);
  check_chunks_match_whole(std::string(kGpt2Pattern), text);
  check_chunks_match_whole(std::string(kCl100kPattern), text);
}

TEST_CASE("pretokenize: a pattern that does not cut at the chunks is detected") {
  // [a-z ]+ runs across "word word", so a chunk boundary between them is not a cut.
  SplitPattern p("[a-z ]+");
  Splitter splitter(p);
  std::string text = "abc def ghi jkl";
  std::vector<Segment> segments = find_special_tokens(text, {});
  splitter.start(text, 0, 3);  // "abc" then the boundary before " def": the match runs on
  std::string_view piece;
  while (splitter.next(&piece)) {
  }
  CHECK_FALSE(splitter.ended_cleanly());
  SplitPattern gpt2(pattern_by_name("gpt2"));
  Splitter good(gpt2);
  good.start(text, 0, 3);
  while (good.next(&piece)) {
  }
  CHECK(good.ended_cleanly());
}
