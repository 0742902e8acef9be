// tests/tokenizer/test_stream.cpp: a corpus larger than memory (chapter 06): streaming encode
// gives encode()'s ids; token files of both versions and llm.c's; shards.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/char_tokenizer.h"
#include "brrr/tokenizer/shards.h"
#include "brrr/tokenizer/stream_encode.h"
#include "brrr/tokenizer/token_file.h"
#include "tokenizer_test_util.h"

using namespace brrr::tokenizer;

namespace {

// The ids of `text` encoded as a stream: chunks of about `chunk` bytes, read `piece` bytes at a time.
std::vector<uint32_t> streamed(const Bpe& bpe, std::string_view text, size_t chunk, int threads,
                               bool specials = true, size_t piece = size_t(1) << 20) {
  StreamOptions o;
  o.threads = threads;
  o.chunk_bytes = chunk;
  std::vector<uint32_t> ids;
  const StreamStats stats = encode_stream(bpe, specials, read_string_stream(text, piece), o,
                                          [&](std::span<const uint32_t> s) { ids.insert(ids.end(), s.begin(), s.end()); });
  CHECK(stats.bytes == text.size());
  CHECK(stats.tokens == ids.size());
  return ids;
}

// Texts whose chunk boundaries are hard: whitespace runs before words and at the end, " \n"
// before a word, newlines, tabs, contractions, numbers, special tokens, Unicode, raw bytes.
std::vector<std::string> tricky_texts() {
  std::mt19937 rng(7);
  std::vector<std::string> texts = {
      "Hello world's 123 ok!!  \n\nDone",
      "a  b   c \n d\n\n e \t\n f    ",
      " \nX \n Y\n \nZ \n",
      "x.  \n  y,   \r\n z;\t\t w  ",
      "one two<|endoftext|> three <|endoftext|><|endoftext|> four <|endoftext|>",
      "it's   we'll  they've\n\n\n  I'm 2024 1234567 ... !!! ???   ",
      "",
      " ",
      "no-safe-cut-in-this-whole-text",
      "code()\n{\n  x = 1;\n}\nend\n\n\nlast\n123\n.\n'll\nit's\r\nok\n",
  };
  std::string mix;
  for (int i = 0; i < 300; i++) {
    static const char* parts[] = {"a", " ", "  ", "\n", " \n", "\n ", "word", ".", "'s", "12", "\t", "é", "<|endoftext|>", "!", "\r\n", ".\n"};
    mix += parts[rng() % 16];
  }
  texts.push_back(mix);
  texts.push_back(test::random_unicode(rng, 2000));
  texts.push_back(test::random_bytes(rng, 3000));
  texts.push_back(test::shakespeare().substr(0, test::kSanitized ? 20000 : 100000));
  return texts;
}

std::vector<uint32_t> concat(const std::vector<std::vector<uint32_t>>& parts) {
  std::vector<uint32_t> all;
  for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
  return all;
}

}  // namespace

TEST_CASE("stream: a cut after a newline would change the pieces, a safe cut does not") {
  SplitPattern gpt2(std::string{kGpt2Pattern});
  // " \nX": the whole text's pieces are " ", "\n", "X"; a chunk ending after the newline
  // would split " \n" as one piece (\s++$).
  CHECK(split(gpt2, " \nX") == std::vector<std::string_view>{" ", "\n", "X"});
  CHECK(split(gpt2, " \n") == std::vector<std::string_view>{" \n"});
  CHECK_FALSE(is_safe_cut(" \nX", 2, {}));
  // The safe cuts: an ASCII non-space before a space, outside every special token.
  CHECK(is_safe_cut("ab cd", 2, {}));
  CHECK_FALSE(is_safe_cut("ab cd", 3, {}));
  CHECK_FALSE(is_safe_cut("a\n b", 2, {}));
  CHECK(is_safe_cut("ab\ncd", 2, {}));      // a letter or digit before a newline
  CHECK(is_safe_cut("12\n", 2, {}));
  CHECK_FALSE(is_safe_cut("a.\nb", 2, {}));  // cl100k's pieces are "a", ".\n", "b"
  CHECK(split(SplitPattern(std::string{kCl100kPattern}), "a.\nb") == std::vector<std::string_view>{"a", ".\n", "b"});
  CHECK_FALSE(is_safe_cut("\xc3\xa9 b", 2, {}));  // é: not ASCII
  CHECK_FALSE(is_safe_cut("x<| |>y", 3, {"<| |>"}));
  CHECK(is_safe_cut("x<| |>y", 3, {"<|endoftext|>"}));
  // Every safe cut of every tricky text is a cut of the whole text's split, with both patterns,
  // and splitting the two sides apart gives the same pieces.
  SplitPattern cl100k(std::string{kCl100kPattern});
  for (const SplitPattern* p : {&gpt2, &cl100k}) {
    for (const std::string& text : tricky_texts()) {
      if (text.size() > 5000) continue;
      const std::vector<std::string_view> whole = split(*p, text);
      for (size_t i = 1; i < text.size(); i++) {
        if (!is_safe_cut(text, i, {}) || text.find("<|") != std::string::npos) continue;
        std::vector<std::string_view> parts = split(*p, std::string_view(text).substr(0, i));
        const std::vector<std::string_view> rest = split(*p, std::string_view(text).substr(i));
        parts.insert(parts.end(), rest.begin(), rest.end());
        REQUIRE(parts.size() == whole.size());
        for (size_t k = 0; k < parts.size(); k++) CHECK(parts[k] == whole[k]);
      }
    }
  }
}

TEST_CASE("stream: the ids are encode()'s for any chunk size, read size and thread count") {
  const Bpe& bpe = test::shakespeare_bpe();
  for (const std::string& text : tricky_texts()) {
    const std::vector<uint32_t> expected = bpe.encode(text), ordinary = bpe.encode_ordinary(text);
    for (size_t chunk : {size_t(1), size_t(3), size_t(17), size_t(1000), size_t(1) << 20}) {
      for (int threads : {1, 2}) {
        CAPTURE(chunk);
        CAPTURE(threads);
        CAPTURE(text.substr(0, 60));
        CHECK(streamed(bpe, text, chunk, threads) == expected);
        CHECK(streamed(bpe, text, chunk, threads, false) == ordinary);
      }
    }
    CHECK(streamed(bpe, text, 5, 2, true, 1) == expected);  // the reader hands out a byte at a time
  }
}

TEST_CASE("stream: GPT-4's pattern and the character tokenizer stream exactly too") {
  TrainOptions options;
  options.vocab_size = 400;
  options.pattern = std::string(kCl100kPattern);
  const Bpe cl100k = Bpe::train(test::shakespeare().substr(0, 50000), options);
  for (const std::string& text : tricky_texts())
    for (size_t chunk : {size_t(1), size_t(9), size_t(4096)}) CHECK(streamed(cl100k, text, chunk, 2) == cl100k.encode(text));

  const std::string text = test::shakespeare().substr(0, 30000) + " \n\n  x";
  const CharTokenizer chars = CharTokenizer::from_text(text);
  StreamOptions o;
  o.threads = 2;
  o.chunk_bytes = 11;
  std::vector<uint32_t> ids;
  encode_stream(chars, read_string_stream(text, 100), o, [&](std::span<const uint32_t> s) { ids.insert(ids.end(), s.begin(), s.end()); });
  CHECK(ids == chars.encode(text));
}

TEST_CASE("stream: a custom pattern whose pieces cross a cut is an error, not other ids") {
  const Bpe& trained = test::shakespeare_bpe();
  const Bpe across(trained.tokens(), "[a-z ]+|.");  // "ab cd" is one piece: it runs over the space
  CHECK_THROWS_WITH_AS(streamed(across, "ab cd ef gh ij kl", 1, 1), doctest::Contains("does not cut where a chunk ends"),
                       brrr::Error);
  // One chunk (no safe cut before the end) is the whole text: fine.
  CHECK(streamed(across, "ab cd", 1 << 20, 1) == across.encode("ab cd"));
}

TEST_CASE("token files: version 2 names the tokenizer, a writer streams, llm.c's bytes") {
  test::TempDir dir;
  TokenFileSpec spec;
  spec.vocab_size = 70000;
  spec.tokenizer_hash = tokenizer_hash("brrr-bpe 1\n...");
  spec.tokenizer_name = "a-tokenizer-with-a-name-longer-than-the-field";
  {
    TokenFileWriter w(dir.file("v2.bin"), spec);
    w.write(std::vector<uint32_t>{1, 69999});
    w.write(std::vector<uint32_t>{});
    w.write(std::vector<uint32_t>{7});
    w.commit();
  }
  MappedTokenFile v2(dir.file("v2.bin"));
  CHECK(v2.info().version == 2);
  CHECK(v2.info().header_bytes == 64);
  CHECK(v2.id_bytes() == 4);  // 70000 tokens do not fit uint16
  CHECK(v2.size() == 3);
  CHECK(v2.vocab_size() == 70000);
  CHECK(v2.info().tokenizer_hash == spec.tokenizer_hash);
  CHECK(v2.info().tokenizer_name == spec.tokenizer_name.substr(0, 23));
  CHECK((v2[0] == 1 && v2[1] == 69999 && v2[2] == 7));
  CHECK(read_token_file(dir.file("v2.bin")) == std::vector<uint32_t>{1, 69999, 7});
  CHECK(std::filesystem::file_size(dir.file("v2.bin")) == 64 + 3 * 4);
  CHECK(tokenizer_hash("") == 14695981039346656037ull);  // FNV-1a's offset basis
  CHECK(tokenizer_hash("a") == 0xaf63dc4c8601ec8cull);   // FNV-1a 64 of "a"

  // A writer given up without commit() leaves nothing; an id out of range names the file.
  {
    TokenFileWriter w(dir.file("gone.bin"), spec);
    w.write(std::vector<uint32_t>{1});
    CHECK_THROWS_WITH_AS(w.write(std::vector<uint32_t>{2, 70000}),
                         doctest::Contains("gone.bin: id 70000 at position 2 is not below vocab_size 70000"), brrr::Error);
  }
  CHECK(std::filesystem::directory_iterator(dir.path())->path().filename() == "v2.bin");

  // llm.c: 256 int32 (magic 20240520, version 1, count, zeros), then uint16 ids.
  TokenFileSpec llmc;
  llmc.vocab_size = 50257;
  llmc.format = TokenFileFormat::kLlmc;
  {
    TokenFileWriter w(dir.file("llmc.bin"), llmc);
    w.write(std::vector<uint32_t>{1, 2, 50256});
    w.commit();
  }
  const std::string bytes = test::read_text(dir.file("llmc.bin"));
  REQUIRE(bytes.size() == 1024 + 3 * 2);
  int32_t header[256];
  std::memcpy(header, bytes.data(), 1024);
  CHECK(header[0] == 20240520);
  CHECK(header[1] == 1);
  CHECK(header[2] == 3);
  for (int i = 3; i < 256; i++) CHECK(header[i] == 0);
  CHECK(bytes.substr(1024) == std::string("\x01\x00\x02\x00\x50\xc4", 6));  // 50256 = 0xc450
  MappedTokenFile mapped(dir.file("llmc.bin"));
  CHECK(mapped.info().format == TokenFileFormat::kLlmc);
  CHECK(mapped.vocab_size() == 0);
  CHECK((mapped.size() == 3 && mapped[2] == 50256));
  llmc.vocab_size = 100277;
  CHECK_THROWS_WITH_AS(TokenFileWriter(dir.file("wide.bin"), llmc), doctest::Contains("does not fit uint16 ids"), brrr::Error);

  // Bad files, each named.
  test::write_text(dir.file("cut.bin"), test::read_text(dir.file("v2.bin")).substr(0, 70));
  CHECK_THROWS_WITH_AS(MappedTokenFile(dir.file("cut.bin")), doctest::Contains("cut.bin: the header says 3 ids of 4 bytes"),
                       brrr::Error);
  test::write_text(dir.file("head.bin"), test::read_text(dir.file("v2.bin")).substr(0, 40));
  CHECK_THROWS_WITH_AS(MappedTokenFile(dir.file("head.bin")), doctest::Contains("head.bin: 40 bytes is too short for the 64-byte header"),
                       brrr::Error);
  test::write_text(dir.file("llmc-cut.bin"), bytes.substr(0, 1027));
  CHECK_THROWS_WITH_AS(MappedTokenFile(dir.file("llmc-cut.bin")), doctest::Contains("(truncated?)"), brrr::Error);
  std::string v9 = test::read_text(dir.file("v2.bin"));
  v9[8] = 9;
  test::write_text(dir.file("v9.bin"), v9);
  CHECK_THROWS_WITH_AS(MappedTokenFile(dir.file("v9.bin")), doctest::Contains("v9.bin: token file version 9"), brrr::Error);
}

TEST_CASE("shards: a writer cuts the ids into shards, find_shards takes a folder, a glob or a file") {
  test::TempDir dir;
  TokenFileSpec spec;
  spec.vocab_size = 100;
  spec.tokenizer_hash = 42;
  std::vector<uint32_t> ids(10);
  for (uint32_t i = 0; i < 10; i++) ids[i] = i;
  ShardWriter w(dir.file("s"), "corpus", 4, spec);
  w.write(std::span<const uint32_t>(ids).first(3));
  w.write(std::span<const uint32_t>(ids).subspan(3));
  const std::vector<std::string> paths = w.finish();
  REQUIRE(paths.size() == 3);
  CHECK(std::filesystem::path(paths[2]).filename() == "corpus_000002.bin");
  std::vector<std::vector<uint32_t>> parts;
  for (const std::string& p : paths) parts.push_back(read_token_file(p));
  CHECK(parts[0].size() == 4);
  CHECK(parts[2].size() == 2);
  CHECK(concat(parts) == ids);
  CHECK(find_shards(dir.file("s")) == paths);
  CHECK(find_shards(dir.file("s") + "/corpus_00000[12].bin").size() == 2);
  CHECK(find_shards(paths[1]) == std::vector<std::string>{paths[1]});
  CHECK_THROWS_WITH_AS(find_shards(dir.file("s") + "/nothing_*.bin"), doctest::Contains("nothing_*.bin: no file matches"),
                       brrr::Error);
  CHECK_THROWS_WITH_AS(ShardWriter(dir.file("s"), "corpus", 4, spec), doctest::Contains("corpus_000000.bin: already there"),
                       brrr::Error);
  CHECK(is_val_shard("data/fineweb_val_000000.bin"));
  CHECK(is_val_shard("val.bin"));
  CHECK(is_val_shard("x/shakespeare-val_000001.bin"));
  CHECK_FALSE(is_val_shard("data/fineweb_train_000001.bin"));
  CHECK_FALSE(is_val_shard("interval_000000.bin"));
  CHECK_FALSE(is_val_shard("val/train_000000.bin"));  // the file's name, not its folder's
}
