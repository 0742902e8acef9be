// tests/tokenizer/test_bpe.cpp: BPE training and encoding, fast against naive (chapter 06).
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/bpe_naive.h"
#include "tokenizer_test_util.h"

using namespace brrr::tokenizer;
using brrr::tokenizer::test::kSanitized;

static void check_same_history(const TrainStats& a, const TrainStats& b) {
  REQUIRE(a.history.size() == b.history.size());
  for (size_t i = 0; i < a.history.size(); i++) {
    INFO("merge step ", i);
    REQUIRE(a.history[i].left == b.history[i].left);
    REQUIRE(a.history[i].right == b.history[i].right);
    REQUIRE(a.history[i].id == b.history[i].id);
    REQUIRE(a.history[i].count == b.history[i].count);
  }
}

static void check_same_tokens(const Bpe& a, const Bpe& b) {
  REQUIRE(a.vocab_size() == b.vocab_size());
  for (uint32_t id = 0; id < a.vocab_size(); id++) {
    INFO("token ", id);
    REQUIRE(a.token(id).kind == b.token(id).kind);
    REQUIRE(a.token(id).left == b.token(id).left);
    REQUIRE(a.token(id).right == b.token(id).right);
    REQUIRE(a.token(id).bytes == b.token(id).bytes);
  }
}

TEST_CASE("bpe: 256 byte tokens alone encode bytes as themselves") {
  Bpe bytes;
  CHECK(bytes.vocab_size() == 256);
  CHECK(bytes.encode("hi!") == std::vector<uint32_t>{'h', 'i', '!'});
  CHECK(bytes.encode("").empty());
  CHECK(bytes.decode(std::vector<uint32_t>{0, 255}) == std::string("\0\xff", 2));
}

TEST_CASE("bpe: training makes the asked vocabulary, special tokens last") {
  const Bpe& bpe = test::shakespeare_bpe();
  CHECK(bpe.vocab_size() == 1024);
  CHECK(bpe.token(1023).kind == Token::kSpecial);
  CHECK(bpe.token(1023).bytes == "<|endoftext|>");
  CHECK(bpe.special_ids() == std::vector<uint32_t>{1023});
  for (uint32_t id = 256; id < 1023; id++) {
    const Token& t = bpe.token(id);
    REQUIRE(t.kind == Token::kMerge);
    REQUIRE(t.bytes == bpe.token(t.left).bytes + bpe.token(t.right).bytes);
  }
  // Real text compresses: far fewer tokens than bytes.
  std::vector<uint32_t> ids = bpe.encode(test::shakespeare());
  CHECK(ids.size() < test::shakespeare().size() / 2);
}

TEST_CASE("bpe: ties go to the smallest (left, right) pair") {
  WordCounts words;
  words.words = {"ab", "cd", "xy"};
  words.counts = {5, 5, 5};
  TrainOptions options;
  options.vocab_size = 256 + 3;
  options.special_tokens = {};
  TrainStats stats;
  Bpe bpe = Bpe::train_words(words, options, &stats);
  REQUIRE(stats.history.size() == 3);
  CHECK((stats.history[0].left == 'a' && stats.history[0].right == 'b'));
  CHECK((stats.history[1].left == 'c' && stats.history[1].right == 'd'));
  CHECK((stats.history[2].left == 'x' && stats.history[2].right == 'y'));
  // Larger count first, whatever the ids.
  words.counts = {5, 5, 6};
  bpe = Bpe::train_words(words, options, &stats);
  CHECK(stats.history[0].left == 'x');
}

TEST_CASE("bpe: the chapter's example, aaabdaaabac") {
  WordCounts words;
  words.words = {"aaabdaaabac"};
  words.counts = {1};
  TrainOptions options;
  options.vocab_size = 256 + 3;
  options.special_tokens = {};
  TrainStats stats;
  Bpe bpe = Bpe::train_words(words, options, &stats);
  REQUIRE(stats.history.size() == 3);
  CHECK((stats.history[0].left == 'a' && stats.history[0].right == 'a' && stats.history[0].count == 4));
  CHECK((stats.history[1].left == 'a' && stats.history[1].right == 'b' && stats.history[1].count == 2));
  CHECK((stats.history[2].left == 256 && stats.history[2].right == 257 && stats.history[2].count == 2));
  CHECK(bpe.token(258).bytes == "aaab");
  std::vector<uint32_t> ids;
  bpe.encode_piece("aaabdaaabac", &ids);
  CHECK(ids == std::vector<uint32_t>{258, 'd', 258, 'a', 'c'});
}

TEST_CASE("bpe: the fast trainer makes the naive trainer's merges (tinyshakespeare)") {
  std::string text = test::shakespeare().substr(0, kSanitized ? 30000 : 150000);
  TrainOptions options;
  options.vocab_size = kSanitized ? 400 : 700;
  TrainStats fast_stats, naive_stats;
  Bpe fast = Bpe::train(text, options, &fast_stats);
  Bpe slow = naive::train(text, options, &naive_stats);
  CHECK(fast_stats.merges == options.vocab_size - 257);
  check_same_history(fast_stats, naive_stats);
  check_same_tokens(fast, slow);
}

TEST_CASE("bpe: the fast trainer makes the naive trainer's merges (random words, many ties)") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; trial++) {
    WordCounts words;
    std::vector<std::string> list;
    int n = 1 + rng() % 30;
    for (int i = 0; i < n; i++) {
      std::string w;
      int length = 1 + rng() % 12;
      for (int j = 0; j < length; j++) w += "aabc\xff"[rng() % 5];
      list.push_back(w);
    }
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
    for (auto& w : list) {
      words.words.push_back(w);
      words.counts.push_back(1 + rng() % 3);  // small counts: ties everywhere
    }
    TrainOptions options;
    options.vocab_size = 256 + 1 + rng() % 60;
    TrainStats a, b;
    Bpe fast = Bpe::train_words(words, options, &a);
    Bpe slow = naive::train_words(words, options, &b);
    INFO("trial ", trial);
    check_same_history(a, b);
    check_same_tokens(fast, slow);
  }
}

TEST_CASE("bpe: training is deterministic, whatever the thread count") {
  std::string text = test::shakespeare().substr(0, kSanitized ? 100000 : 600000);
  TrainOptions options;
  options.vocab_size = 800;
  options.threads = 1;
  Bpe one = Bpe::train(text, options);
  options.threads = 2;
  Bpe two = Bpe::train(text, options);
  options.threads = 3;
  Bpe three = Bpe::train(text, options);
  check_same_tokens(one, two);
  check_same_tokens(one, three);
}

TEST_CASE("bpe: training stops early when nothing is left to merge") {
  TrainOptions options;
  options.vocab_size = 4096;
  TrainStats stats;
  Bpe bpe = Bpe::train("aaaa aaaa", options, &stats);
  // "aaaa" -> "aa" "aa" -> "aaaa"; " aaaa" takes three more: " a", " aaa"... at most a few.
  CHECK(stats.merges < 10);
  CHECK(bpe.vocab_size() == 256 + stats.merges + 1);
  CHECK(bpe.encode("aaaa aaaa").size() == 2);
  Bpe empty = Bpe::train("", options);
  CHECK(empty.vocab_size() == 257);
}

TEST_CASE("bpe: the fast encoder gives the naive encoder's ids on all of tinyshakespeare") {
  const Bpe& bpe = test::shakespeare_bpe();
  std::string text = kSanitized ? test::shakespeare().substr(0, 300000) : test::shakespeare();
  std::vector<uint32_t> fast = bpe.encode(text);
  std::vector<uint32_t> slow = naive::encode(bpe, text);
  REQUIRE(fast.size() == slow.size());
  CHECK(fast == slow);
  CHECK(bpe.decode(fast) == text);
}

TEST_CASE("bpe: fast and naive encoders agree on random bytes, and both round-trip") {
  const Bpe& bpe = test::shakespeare_bpe();
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; trial++) {
    std::string text = test::random_bytes(rng, rng() % 1500);
    std::vector<uint32_t> fast = bpe.encode(text);
    INFO("trial ", trial);
    REQUIRE(fast == naive::encode(bpe, text));
    REQUIRE(bpe.decode(fast) == text);
    REQUIRE(bpe.decode(bpe.encode_ordinary(text)) == text);
  }
  // One piece at a time too, including pieces that are long runs of one byte.
  for (std::string piece : {std::string(300, 'e'), std::string(257, ' '), std::string(100, '\0')}) {
    std::vector<uint32_t> a, b;
    bpe.encode_piece(piece, &a);
    naive::encode_piece(bpe, piece, &b);
    CHECK(a == b);
  }
}

TEST_CASE("bpe: encoding on all cores gives the same ids") {
  const Bpe& bpe = test::shakespeare_bpe();
  std::mt19937 rng(4);
  std::string text = kSanitized ? test::shakespeare().substr(0, 300000) : test::shakespeare();
  for (int i = 0; i < 20; i++) text += test::random_bytes(rng, 3000) + "<|endoftext|>";
  std::vector<uint32_t> one = bpe.encode(text);
  CHECK(bpe.encode_parallel(text, 2) == one);
  CHECK(bpe.encode_parallel(text, 3) == one);
  CHECK(bpe.decode(one) == text);
}

TEST_CASE("bpe: a pattern that does not cut at chunk boundaries still encodes the same in parallel") {
  TrainOptions options;
  options.vocab_size = 300;
  options.pattern = "[a-z ]+|[^a-z ]+";
  std::string text = test::shakespeare().substr(0, 400000);
  Bpe bpe = Bpe::train(text, options);
  CHECK(bpe.encode_parallel(text, 2) == bpe.encode(text));
}

TEST_CASE("bpe: special tokens are matched before splitting and never made by merges") {
  std::string doc = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  std::string text;
  for (int i = 0; i < 200; i++) text += doc + "<|endoftext|>";
  TrainOptions options;
  options.vocab_size = 400;
  Bpe bpe = Bpe::train(text, options);
  uint32_t eot = bpe.special_ids().at(0);
  for (uint32_t id = 0; id < bpe.vocab_size(); id++)
    if (bpe.token(id).kind != Token::kSpecial)
      REQUIRE(bpe.token(id).bytes.find("<|endoftext|>") == std::string::npos);
  std::vector<uint32_t> ids = bpe.encode(text);
  CHECK(std::count(ids.begin(), ids.end(), eot) == 200);
  CHECK(bpe.decode(ids) == text);
  // encode_ordinary reads the special token as plain text.
  std::vector<uint32_t> plain = bpe.encode_ordinary("a<|endoftext|>b");
  CHECK(std::count(plain.begin(), plain.end(), eot) == 0);
  CHECK(bpe.decode(plain) == "a<|endoftext|>b");
  CHECK(bpe.encode("a<|endoftext|>b") ==
        std::vector<uint32_t>{bpe.encode("a")[0], eot, bpe.encode("b")[0]});
}

TEST_CASE("bpe: GPT-2's merge-list rule and brrr's rule agree on every piece of tinyshakespeare") {
  const Bpe& bpe = test::shakespeare_bpe();
  PairMap merges = naive::recorded_merges(bpe);
  std::string text = kSanitized ? test::shakespeare().substr(0, 200000) : test::shakespeare();
  size_t differ = 0;
  for (std::string_view piece : split(bpe.split_pattern(), text)) {
    std::vector<uint32_t> a, b;
    bpe.encode_piece(piece, &a);
    naive::encode_piece_with_merge_list(bpe, merges, piece, &b);
    differ += a != b;
  }
  CHECK(differ == 0);
}

TEST_CASE("bpe: bad arguments are errors that say what was expected") {
  const Bpe& bpe = test::shakespeare_bpe();
  CHECK_THROWS_WITH_AS(bpe.decode(std::vector<uint32_t>{5, 1024}),
                       doctest::Contains("id 1024 at position 1"), brrr::Error);
  TrainOptions options;
  options.vocab_size = 200;
  CHECK_THROWS_WITH_AS(Bpe::train("abc", options), doctest::Contains("vocab_size 200"), brrr::Error);
  options.vocab_size = 300;
  options.pattern = "[";
  CHECK_THROWS_WITH_AS(Bpe::train("abc", options), doctest::Contains("split pattern: does not compile at offset 1"),
                       brrr::Error);
  // A vocabulary whose merge does not match its bytes is refused.
  std::vector<Token> tokens = Bpe().tokens();
  tokens.push_back(Token{Token::kMerge, 'a', 'b', "ba"});
  CHECK_THROWS_WITH_AS(Bpe(tokens, std::string(kGpt2Pattern)), doctest::Contains("token 256"),
                       brrr::Error);
}
