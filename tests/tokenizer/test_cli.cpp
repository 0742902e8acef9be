// tests/tokenizer/test_cli.cpp: `brrr tokenizer train|encode|decode` end to end (chapter 06).
// Runs the brrr program of this build (tests/tokenizer/CMakeLists.txt builds it first).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/shards.h"
#include "brrr/tokenizer/token_file.h"
#include "tokenizer_test_util.h"

using namespace brrr::tokenizer;

static std::string brrr_program() { return BRRR_CLI; }

// Runs a shell command; returns its exit status and, in *output, stdout and stderr.
static int run(const std::string& command, std::string* output) {
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n;
  output->clear();
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output->append(buffer, n);
  int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_CASE("cli: train, encode and decode round-trip a file, and a wrong option prints usage") {
  REQUIRE_MESSAGE(std::filesystem::exists(brrr_program()), brrr_program(), " is not built");
  test::TempDir dir;
  std::string text = test::shakespeare().substr(0, 200000);
  test::write_text(dir.file("in.txt"), text);
  std::string out, b = brrr_program();
  REQUIRE(run(b + " tokenizer train --input " + dir.file("in.txt") + " --vocab-size 600 --out " +
                  dir.file("tok.txt") + " --tiktoken " + dir.file("tok.tiktoken"),
              &out) == 0);
  CHECK(out.find("merges/s") != std::string::npos);  // the progress bar
  Bpe bpe = Bpe::load(dir.file("tok.txt"));
  CHECK(bpe.vocab_size() == 600);
  REQUIRE(run(b + " tokenizer encode --tokenizer " + dir.file("tok.txt") + " --input " +
                  dir.file("in.txt") + " --out " + dir.file("ids.bin"),
              &out) == 0);
  CHECK(out.find("MB/s") != std::string::npos);
  TokenFileHeader header;
  CHECK(read_token_file(dir.file("ids.bin"), &header) == bpe.encode(text));
  CHECK(header.id_bytes == 2);
  REQUIRE(run(b + " tokenizer decode --tokenizer " + dir.file("tok.txt") + " --input " +
                  dir.file("ids.bin") + " --out " + dir.file("back.txt"),
              &out) == 0);
  CHECK(test::read_text(dir.file("back.txt")) == text);

  // Mistakes say what is wrong in one line and fail; they do not crash.
  CHECK(run(b + " tokenizer encode --tokenizer " + dir.file("tok.txt") + " --bogus", &out) == 2);
  CHECK(out.find("brrr tokenizer encode: unknown option --bogus") != std::string::npos);
  CHECK(out.find("Usage:") == std::string::npos);
  CHECK(run(b + " tokenizer train --input " + dir.file("in.txt") + " --vocab-size 12 --out x", &out) != 0);
  CHECK(out.find("--vocab-size") != std::string::npos);
  CHECK(run(b + " tokenizer decode --tokenizer " + dir.file("in.txt") + " --input " +
                dir.file("ids.bin"),
            &out) == 1);
  CHECK(out.find("in.txt: not a tokenizer file brrr knows") != std::string::npos);
}

TEST_CASE("cli: encode --shards streams a text into shards with the in-memory ids, and llm.c's format") {
  REQUIRE_MESSAGE(std::filesystem::exists(brrr_program()), brrr_program(), " is not built");
  test::TempDir dir;
  const std::string text = test::shakespeare().substr(0, 60000) + "<|endoftext|> the end  \n";
  test::write_text(dir.file("in.txt"), text);
  const Bpe& bpe = test::shakespeare_bpe();
  bpe.save(dir.file("tok.txt"));
  const std::vector<uint32_t> expected = bpe.encode(text);
  const std::string b = brrr_program();
  std::string out;
  // Chunks of ~100 bytes on 2 threads, 5000 ids a shard.
  REQUIRE(run(b + " tokenizer encode --tokenizer " + dir.file("tok.txt") + " --input " + dir.file("in.txt") +
                  " --out " + dir.file("shards") + " --shards --shard-tokens 5000 --chunk-bytes 100 --threads 2",
              &out) == 0);
  INFO(out);
  const std::vector<std::string> paths = find_shards(dir.file("shards"));
  REQUIRE(paths.size() == (expected.size() + 4999) / 5000);
  CHECK(std::filesystem::path(paths[0]).filename() == "in_000000.bin");
  std::vector<uint32_t> ids;
  const uint64_t hash = tokenizer_hash(test::read_text(dir.file("shards/tokenizer.txt")));
  for (const std::string& p : paths) {
    MappedTokenFile f(p);
    CHECK(f.info().tokenizer_hash == hash);
    CHECK(f.info().tokenizer_name == "tok");
    CHECK(f.vocab_size() == bpe.vocab_size());
    for (uint64_t i = 0; i < f.size(); i++) ids.push_back(f[i]);
  }
  CHECK(ids == expected);
  // Again into the same folder: refused, the old shards named.
  CHECK(run(b + " tokenizer encode --tokenizer " + dir.file("tok.txt") + " --input " + dir.file("in.txt") + " --out " +
                dir.file("shards") + " --shards",
            &out) == 1);
  CHECK(out.find("in_000000.bin: already there") != std::string::npos);
  // Another tokenizer into the same folder: refused, before any shard is written.
  REQUIRE(run(b + " tokenizer train --char --input " + dir.file("in.txt") + " --out " + dir.file("chars.txt"), &out) == 0);
  test::write_text(dir.file("other.txt"), "more text");
  CHECK(run(b + " tokenizer encode --tokenizer " + dir.file("chars.txt") + " --input " + dir.file("other.txt") +
                " --out " + dir.file("shards") + " --shards",
            &out) == 1);
  CHECK(out.find("tokenizer.txt: holds another tokenizer than") != std::string::npos);
  CHECK(!std::filesystem::exists(dir.file("shards/other_000000.bin")));
  // One file in llm.c's format; decode reads it back.
  REQUIRE(run(b + " tokenizer encode --tokenizer " + dir.file("tok.txt") + " --input " + dir.file("in.txt") +
                  " --out " + dir.file("llmc.bin") + " --format llmc",
              &out) == 0);
  MappedTokenFile llmc(dir.file("llmc.bin"));
  CHECK(llmc.info().format == TokenFileFormat::kLlmc);
  CHECK(read_token_file(dir.file("llmc.bin")) == expected);
  REQUIRE(run(b + " tokenizer decode --tokenizer " + dir.file("tok.txt") + " --input " + dir.file("llmc.bin") +
                  " --out " + dir.file("back.txt"),
              &out) == 0);
  CHECK(test::read_text(dir.file("back.txt")) == text);
}
