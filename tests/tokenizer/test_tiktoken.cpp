// tests/tokenizer/test_tiktoken.cpp: brrr's ids against tiktoken's, same ranks and pattern
// (chapter 06). Skipped (test::skip: ctest says Skipped) when BRRR_PYTHON cannot import tiktoken;
// scripts/test.sh requires these to run.
#include <doctest/doctest.h>

#include <cstdlib>
#include <random>

#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/token_file.h"
#include "tests/skip.h"
#include "tokenizer_test_util.h"

using namespace brrr::tokenizer;

// tiktoken reads the ranks brrr exported and encodes each input file (allowing the special
// token), writing the ids as a brrr token file next to it.
static const char* kScript = R"PY(
import sys, base64, struct
import tiktoken
ranks_path, pattern_path, special = sys.argv[1], sys.argv[2], sys.argv[3]
ranks = {}
for line in open(ranks_path, "rb"):
    token, rank = line.split()
    ranks[base64.b64decode(token)] = int(rank)
pattern = open(pattern_path, encoding="utf-8", newline="").read()
enc = tiktoken.Encoding(name="brrr", pat_str=pattern, mergeable_ranks=ranks,
                        special_tokens={special: len(ranks)})
for path in sys.argv[4:]:
    text = open(path, encoding="utf-8", newline="").read()
    ids = enc.encode(text, allowed_special="all")
    with open(path + ".ids", "wb") as f:
        f.write(b"BRRRTOK\0" + struct.pack("<IIQQ", 1, 4, len(ids), enc.n_vocab))
        f.write(struct.pack("<%dI" % len(ids), *ids))
)PY";

static bool tiktoken_available() {
  std::string command = std::string(BRRR_PYTHON) + " -c 'import tiktoken' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

static void compare_with_tiktoken(const std::string& pattern_name) {
  if (!tiktoken_available())
    return brrr::test::skip(std::string(BRRR_PYTHON) + " cannot import tiktoken (run scripts/setup.sh)");
  TrainOptions options;
  options.vocab_size = test::kSanitized ? 600 : 2048;
  options.pattern = pattern_by_name(pattern_name);
  std::string corpus = test::shakespeare();
  Bpe bpe = Bpe::train(corpus, options);

  test::TempDir dir;
  bpe.export_tiktoken(dir.file("ranks.tiktoken"));
  test::write_text(dir.file("pattern.txt"), bpe.pattern());
  // The corpus, random Unicode text, and text with special tokens in it.
  std::mt19937 rng(11);
  std::string random, mixed;
  for (int i = 0; i < 200; i++) random += test::random_unicode(rng, rng() % 300) + " ";
  for (int i = 0; i < 50; i++)
    mixed += corpus.substr(rng() % (corpus.size() - 2000), 1000) + "<|endoftext|>" +
             test::random_unicode(rng, 50);
  std::vector<std::pair<std::string, std::string>> inputs = {
      {"corpus.txt", corpus}, {"random.txt", random}, {"mixed.txt", mixed}};
  std::string command = std::string(BRRR_PYTHON) + " " + dir.file("compare.py") + " " +
                        dir.file("ranks.tiktoken") + " " + dir.file("pattern.txt") +
                        " '<|endoftext|>'";
  for (auto& [name, text] : inputs) {
    test::write_text(dir.file(name), text);
    command += ' ';
    command += dir.file(name);
  }
  test::write_text(dir.file("compare.py"), kScript);
  REQUIRE(std::system(command.c_str()) == 0);

  for (auto& [name, text] : inputs) {
    INFO(pattern_name, " on ", name);
    std::vector<uint32_t> theirs = read_token_file(dir.file(name + ".ids"));
    std::vector<uint32_t> ours = bpe.encode(text);
    REQUIRE(ours.size() == theirs.size());
    size_t first_difference = 0;
    while (first_difference < ours.size() && ours[first_difference] == theirs[first_difference])
      first_difference++;
    CHECK(first_difference == ours.size());
    CHECK(bpe.encode_parallel(text, 2) == theirs);
  }
}

TEST_CASE("tiktoken: identical ids with brrr's ranks and the GPT-2 pattern") {
  compare_with_tiktoken("gpt2");
}

TEST_CASE("tiktoken: identical ids with brrr's ranks and the cl100k pattern") {
  compare_with_tiktoken("cl100k");
}
