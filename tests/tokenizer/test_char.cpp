// tests/tokenizer/test_char.cpp: the character-level tokenizer (chapter 06, used in 07).
#include <doctest/doctest.h>

#include <random>

#include "brrr/error.h"
#include "brrr/tokenizer/char_tokenizer.h"
#include "tokenizer_test_util.h"

using namespace brrr::tokenizer;

TEST_CASE("char: tinyshakespeare has nanoGPT's 65 characters") {
  CharTokenizer chars = CharTokenizer::from_text(test::shakespeare());
  CHECK(chars.vocab_size() == 65);
  CHECK(chars.chars()[0] == "\n");
  CHECK(chars.chars()[1] == " ");
  CHECK(chars.chars()[64] == "z");
  std::vector<uint32_t> ids = chars.encode("hii there");
  CHECK(ids == std::vector<uint32_t>{46, 47, 47, 1, 58, 46, 43, 56, 43});  // as in nanoGPT
  CHECK(chars.decode(ids) == "hii there");
  CHECK(chars.decode(chars.encode(test::shakespeare())) == test::shakespeare());
}

TEST_CASE("char: UTF-8 characters are one token each, stray bytes are characters too") {
  std::string text = "caf\xc3\xa9 \xe2\x82\xac \xff\xfe";
  CharTokenizer chars = CharTokenizer::from_text(text);
  CHECK(chars.encode("\xc3\xa9").size() == 1);
  CHECK(chars.encode("\xe2\x82\xac").size() == 1);
  CHECK(chars.decode(chars.encode(text)) == text);
  std::mt19937 rng(5);
  for (int trial = 0; trial < 100; trial++) {
    std::string random = test::random_bytes(rng, rng() % 500);
    CharTokenizer c = CharTokenizer::from_text(random);
    REQUIRE(c.decode(c.encode(random)) == random);
  }
}

TEST_CASE("char: unknown characters and ids are errors, files round-trip and are checked") {
  CharTokenizer chars = CharTokenizer::from_text("abc\n");
  CHECK_THROWS_WITH_AS(chars.encode("abz"), doctest::Contains("\"z\" at byte 2"), brrr::Error);
  CHECK_THROWS_WITH_AS(chars.decode(std::vector<uint32_t>{4}), doctest::Contains("id 4"), brrr::Error);
  test::TempDir dir;
  chars.save(dir.file("c.txt"));
  CharTokenizer back = CharTokenizer::load(dir.file("c.txt"));
  CHECK(back.chars() == chars.chars());
  auto bad = [&](const std::string& content, const std::string& expected) {
    test::write_text(dir.file("bad.txt"), content);
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS(CharTokenizer::load(dir.file("bad.txt")), doctest::Contains(expected.c_str()),
                         brrr::Error);
  };
  bad("brrr-char 2\n", "bad.txt:1: expected the header");
  bad("brrr-char 1\nchars x\n", "bad.txt:2: expected 'chars N'");
  bad("brrr-char 1\nchars 3\n0 \"a\"\n1 \"b\"\n", "bad.txt:4: file ends after 2 of 3");
  bad("brrr-char 1\nchars 2\n0 \"b\"\n1 \"a\"\n", "bad.txt:4: characters must be distinct and sorted");
  bad("brrr-char 1\nchars 2\n0 \"a\"\n2 \"b\"\n", "bad.txt:4: expected id 1, found 2");
  bad("brrr-char 1\nchars 1\n0 \"ab\"\n", "is not one character");
}
