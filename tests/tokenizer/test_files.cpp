// tests/tokenizer/test_files.cpp: tokenizer files, tiktoken files, token id files, and the
// errors bad files give (chapter 06).
#include <doctest/doctest.h>

#include <random>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/token_file.h"
#include "tokenizer_test_util.h"

using namespace brrr::tokenizer;
using test::TempDir;
using test::write_text;

TEST_CASE("files: save and load give back the same tokenizer") {
  const Bpe& bpe = test::shakespeare_bpe();
  TempDir dir;
  bpe.save(dir.file("tok.txt"));
  Bpe loaded = Bpe::load(dir.file("tok.txt"));
  REQUIRE(loaded.vocab_size() == bpe.vocab_size());
  CHECK(loaded.pattern() == bpe.pattern());
  for (uint32_t id = 0; id < bpe.vocab_size(); id++) {
    REQUIRE(loaded.token(id).bytes == bpe.token(id).bytes);
    REQUIRE(loaded.token(id).kind == bpe.token(id).kind);
  }
  std::string text = test::shakespeare().substr(0, 100000);
  CHECK(loaded.encode(text) == bpe.encode(text));
  // The file is text a person can read: a merge line shows its bytes.
  std::string file = test::read_text(dir.file("tok.txt"));
  CHECK(file.rfind("brrr-bpe 1\n", 0) == 0);
  CHECK(file.find("\n1023 special \"<|endoftext|>\"\n") != std::string::npos);
  CHECK(file.find("\n10 byte \"\\n\"\n") != std::string::npos);
}

TEST_CASE("files: tiktoken export and import give back the same ranks and ids") {
  const Bpe& bpe = test::shakespeare_bpe();
  TempDir dir;
  bpe.export_tiktoken(dir.file("tok.tiktoken"));
  std::string file = test::read_text(dir.file("tok.tiktoken"));
  CHECK(file.rfind("AA== 0\nAQ== 1\n", 0) == 0);  // byte 0, byte 1
  Bpe back = Bpe::import_tiktoken(dir.file("tok.tiktoken"), "gpt2", {"<|endoftext|>"});
  REQUIRE(back.vocab_size() == bpe.vocab_size());
  for (uint32_t id = 0; id < bpe.vocab_size(); id++) REQUIRE(back.token(id).bytes == bpe.token(id).bytes);
  std::string text = test::shakespeare().substr(0, 100000);
  CHECK(back.encode(text) == bpe.encode(text));
}

// Loading `content` as a brrr tokenizer file fails with a message containing `expected`.
static void check_bad_file(const std::string& content, const std::string& expected) {
  TempDir dir;
  write_text(dir.file("bad.txt"), content);
  CAPTURE(expected);
  CHECK_THROWS_WITH_AS(Bpe::load(dir.file("bad.txt")), doctest::Contains(expected.c_str()), brrr::Error);
}

TEST_CASE("files: bad tokenizer files give errors with the file name and line number") {
  // A small valid file: the 256 bytes and two merges.
  std::string head = "brrr-bpe 1\npattern \"\\\\S+|\\\\s+\"\ntokens 259\n";
  std::string bytes;
  for (int b = 0; b < 256; b++) {
    std::string q = b == '"' ? "\\\"" : b == '\\' ? "\\\\" : (b >= 32 && b < 127) ? std::string(1, char(b)) : "";
    if (q.empty()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", b);
      q = hex;
    }
    bytes += std::to_string(b) + " byte \"" + q + "\"\n";
  }
  std::string good = head + bytes + "256 merge 116 104 \"th\"\n257 merge 256 101 \"the\"\n258 special \"<|eot|>\"\n";
  {
    TempDir dir;
    write_text(dir.file("good.txt"), good);
    Bpe bpe = Bpe::load(dir.file("good.txt"));
    CHECK(bpe.encode("the<|eot|>") == std::vector<uint32_t>{257, 258});
  }
  // Line numbers: the header is lines 1-3, byte b is line 4 + b, merge 256 is line 260.
  check_bad_file("", "bad.txt:0: empty file");
  check_bad_file("brrr-bpe 2\n", "bad.txt:1: unknown format version");
  check_bad_file("hello\n", "bad.txt:1: expected 'brrr-bpe'");
  check_bad_file("brrr-bpe 1\npattern \"(\"\ntokens 1\n", "bad.txt:2: split pattern");
  check_bad_file("brrr-bpe 1\npattern \"a\\q\"\n", "bad.txt:2: unknown escape \\q");
  check_bad_file(head + bytes.substr(0, bytes.find("100 byte")), "file ends after 100 of the 259");
  check_bad_file(head + bytes + "256 merge 116 999 \"th\"\n",
                 "bad.txt:260: merge 256 names unknown token 999");
  check_bad_file(head + bytes + "256 merge 116 104 \"ht\"\n", "bad.txt:260: merge 256 says its bytes are");
  check_bad_file(head + bytes + "255 merge 116 104 \"th\"\n", "bad.txt:260: duplicate token id 255");
  check_bad_file(head + bytes + "300 merge 116 104 \"th\"\n", "bad.txt:260: expected token id 256, found 300");
  check_bad_file(head + bytes + "256 merge 116 104 \"th\"\n257 merge 116 104 \"th\"\n",
                 "bad.txt:261: token 257 has the same bytes as token 256");
  check_bad_file(head + bytes + "256 blend 116 104 \"th\"\n", "bad.txt:260: unknown token kind 'blend'");
  check_bad_file(head + bytes + "256 merge 116 104 \"th\n", "bad.txt:260: string has no closing quote");
  check_bad_file(head + bytes + "256 merge 116 104 \"th\" extra\n", "bad.txt:260: unexpected text");
  check_bad_file(head + bytes + "256 merge 116 x \"th\"\n", "bad.txt:260: expected the right token");
  check_bad_file(good + "259 special \"<|more|>\"\n", "bad.txt:263: more tokens than the 259");
  // Byte 65 ('A') written as a second 'B'.
  std::string twice = bytes;
  twice.replace(twice.find("65 byte \"A\""), 11, "65 byte \"B\"");
  check_bad_file(head + twice, "bad.txt:70: byte 66 already is token 65");
}

TEST_CASE("files: bad tiktoken files give errors with the file name and line number") {
  TempDir dir;
  // Build a valid file from a real export, then break it.
  Bpe bytes_only;
  bytes_only.export_tiktoken(dir.file("bytes.tiktoken"));
  std::string base = test::read_text(dir.file("bytes.tiktoken"));
  auto check = [&](const std::string& content, const std::string& expected) {
    write_text(dir.file("bad.tiktoken"), content);
    CAPTURE(expected);
    CHECK_THROWS_WITH_AS(Bpe::import_tiktoken(dir.file("bad.tiktoken"), "gpt2"),
                         doctest::Contains(expected.c_str()), brrr::Error);
  };
  CHECK(Bpe::import_tiktoken(dir.file("bytes.tiktoken"), "gpt2").vocab_size() == 256);
  write_text(dir.file("ok.tiktoken"), base + "dGg= 256\n");
  CHECK(Bpe::import_tiktoken(dir.file("ok.tiktoken"), "gpt2").encode("th") == std::vector<uint32_t>{256});
  check(base + "dGg 256\n", "bad.tiktoken:257: bad base64 'dGg'");
  check(base + "d*g= 256\n", "bad.tiktoken:257: bad base64");
  check(base + "dGg= 255\n", "bad.tiktoken:257: duplicate rank 255 (first on line 256)");
  check(base + "dGg= 300\n", "rank 256 is missing");
  check(base + "dGg= x\n", "bad.tiktoken:257: expected a rank");
  check(base + "dA== 256\n", "bad.tiktoken:257: token \"t\" already has rank 116");
  check(base.substr(base.find('\n') + 1), "rank 0 is missing");
}

TEST_CASE("files: token id files round-trip as uint16 and uint32, and mmap") {
  TempDir dir;
  std::vector<uint32_t> ids = {0, 1, 4095, 17, 65535};
  write_token_file(dir.file("a.bin"), ids, 65536);
  TokenFileHeader h;
  CHECK(read_token_file(dir.file("a.bin"), &h) == ids);
  CHECK(h.id_bytes == 2);
  CHECK(h.count == 5);
  CHECK(h.vocab_size == 65536);
  CHECK(std::filesystem::file_size(dir.file("a.bin")) == 32 + 5 * 2);
  std::vector<uint32_t> big = {70000, 3, 100255};
  write_token_file(dir.file("b.bin"), big, 100277);
  CHECK(read_token_file(dir.file("b.bin"), &h) == big);
  CHECK(h.id_bytes == 4);
  MappedTokenFile mapped(dir.file("b.bin"));
  REQUIRE(mapped.size() == 3);
  CHECK(mapped[0] == 70000);
  CHECK(mapped[2] == 100255);
  MappedTokenFile small(dir.file("a.bin"));
  CHECK(small[2] == 4095);
  CHECK(small.id_bytes() == 2);
  // Empty is fine.
  write_token_file(dir.file("e.bin"), std::vector<uint32_t>{}, 10);
  CHECK(read_token_file(dir.file("e.bin")).empty());
}

TEST_CASE("files: bad token id files and bad ids are errors") {
  TempDir dir;
  CHECK_THROWS_WITH_AS(write_token_file(dir.file("x.bin"), std::vector<uint32_t>{5, 10}, 10),
                       doctest::Contains("id 10 at position 1"), brrr::Error);
  CHECK_THROWS_WITH_AS(write_token_file(dir.file("x.bin"), std::vector<uint32_t>{1}, 70000, 2),
                       doctest::Contains("does not fit uint16"), brrr::Error);
  write_token_file(dir.file("a.bin"), std::vector<uint32_t>{1, 2, 3}, 10);
  std::string data = test::read_text(dir.file("a.bin"));
  write_text(dir.file("short.bin"), data.substr(0, data.size() - 1));
  CHECK_THROWS_WITH_AS(read_token_file(dir.file("short.bin")), doctest::Contains("truncated"), brrr::Error);
  CHECK_THROWS_WITH_AS(MappedTokenFile(dir.file("short.bin")), doctest::Contains("truncated"), brrr::Error);
  write_text(dir.file("magic.bin"), "NOTATOKFILE" + data.substr(11));
  CHECK_THROWS_WITH_AS(read_token_file(dir.file("magic.bin")), doctest::Contains("not a brrr token file"), brrr::Error);
  write_text(dir.file("tiny.bin"), "BRRR");
  CHECK_THROWS_WITH_AS(read_token_file(dir.file("tiny.bin")), doctest::Contains("too short"), brrr::Error);
  CHECK_THROWS_WITH_AS(read_token_file(dir.file("missing.bin")), doctest::Contains("missing.bin': No such file"), brrr::Error);
}

TEST_CASE("files: writing is atomic: a failed write leaves the old file and no temporary") {
  TempDir dir;
  write_token_file(dir.file("a.bin"), std::vector<uint32_t>{1, 2}, 10);
  CHECK_THROWS_WITH_AS(write_token_file(dir.file("a.bin"), std::vector<uint32_t>{1, 99}, 10),
                       "write_token_file: id 99 at position 1 is not below vocab_size 10", brrr::Error);
  CHECK(read_token_file(dir.file("a.bin")) == std::vector<uint32_t>{1, 2});
  size_t files = 0;
  for (auto& entry : std::filesystem::directory_iterator(dir.path())) files += entry.is_regular_file();
  CHECK(files == 1);
}
