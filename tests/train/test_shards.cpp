// tests/train/test_shards.cpp: brrr train --data over shards of token ids (chapters 06 and 08):
// the same batches as the text they were cut from, every id reachable, the seed's order, resume,
// and bad shards refused by name.
#include <doctest/doctest.h>

#include <filesystem>
#include <set>

#include "brrr/brrr.h"
#include "brrr/tokenizer/char_tokenizer.h"
#include "brrr/tokenizer/shards.h"
#include "brrr/tokenizer/token_file.h"
#include "tests/train/train_helpers.h"
#include "train/data.h"
#include "train/trainer.h"

using namespace brrr;
namespace fs = std::filesystem;
namespace tok = brrr::tokenizer;

namespace {
std::string scratch(const std::string& name) { return train_test::scratch("test-shards", name); }
std::string small_text() { return train_test::small_text("test-shards", 40000); }

train::DataOptions options(const std::string& input, const std::string& cache) {
  train::DataOptions d;
  d.input = input;
  d.cache_dir = cache;
  d.verbose = false;
  return d;
}

// The text's cached ids and tokenizer (train::TextDataset's cache) cut into shards of `per_shard`
// ids in `dir`, with the tokenizer beside them, as brrr tokenizer encode --shards writes them.
void shard_the_cache(const std::string& cache, const std::string& dir, std::uint64_t per_shard,
                     const std::string& stem = "text") {
  std::string tokens, tokenizer;
  for (const fs::directory_entry& e : fs::directory_iterator(cache)) {
    if (e.path().extension() == ".tokens") tokens = e.path().string();
    if (e.path().extension() == ".tokenizer") tokenizer = e.path().string();
  }
  REQUIRE((!tokens.empty() && !tokenizer.empty()));
  fs::create_directories(dir);
  const std::string bytes = read_file(tokenizer);
  if (!fs::exists(dir + "/tokenizer.txt")) write_file_atomic(dir + "/tokenizer.txt", bytes);
  const std::vector<std::uint32_t> ids = tok::read_token_file(tokens);
  tok::TokenFileSpec spec;
  spec.vocab_size = tok::TextTokenizer::load(tokenizer)->vocab_size();
  spec.tokenizer_hash = tok::tokenizer_hash(bytes);
  spec.tokenizer_name = "chars";
  tok::ShardWriter w(dir, stem, per_shard, spec);
  w.write(ids);
  w.finish();
}

std::vector<std::int64_t> draw(const train::TextDataset& d, train::Split split, std::uint64_t seed, int batches,
                               std::int64_t B, std::int64_t T) {
  Generator g(seed);
  std::vector<std::int64_t> all;
  for (int i = 0; i < batches; ++i) {
    Tensor x, y;
    d.batch(split, B, T, g, x, y);
    for (std::int64_t v : x.to_vector<std::int64_t>()) all.push_back(v);
    for (std::int64_t v : y.to_vector<std::int64_t>()) all.push_back(v);
  }
  return all;
}
}  // namespace

TEST_CASE("shards: a text and its shards give the same splits and the same batches, windows crossing shards") {
  const std::string cache = scratch("same-cache"), dir = scratch("same-shards");
  const train::TextDataset text(options(small_text(), cache));
  shard_the_cache(cache, dir, 1000);  // 40 KB of characters: 40 shards
  const train::TextDataset shards(options(dir, cache));
  CHECK(shards.files() == 40);
  CHECK(shards.vocab_size() == text.vocab_size());
  CHECK(shards.size(train::Split::Train) == text.size(train::Split::Train));
  CHECK(shards.size(train::Split::Val) == text.size(train::Split::Val));
  // Windows of 65 over shards of 1000: about one in 15 crosses a boundary.
  for (train::Split split : {train::Split::Train, train::Split::Val})
    CHECK(draw(shards, split, 5, 20, 4, 64) == draw(text, split, 5, 20, 4, 64));
  // A glob of the same shards, and the same seed again: the same batches; another seed: others.
  const train::TextDataset globbed(options(dir + "/text_0000*.bin", cache));
  CHECK(globbed.files() == 40);
  CHECK(draw(globbed, train::Split::Train, 5, 20, 4, 64) == draw(text, train::Split::Train, 5, 20, 4, 64));
  CHECK(draw(shards, train::Split::Train, 6, 20, 4, 64) != draw(text, train::Split::Train, 5, 20, 4, 64));
}

TEST_CASE("shards: every id is reachable, and each window is consecutive ids across shard boundaries") {
  // Ids 0..N-1 in order over shards of 7, 0, 5, 1 and 9 ids; the tokenizer has N characters.
  const std::string dir = scratch("reach");
  const std::uint64_t sizes[] = {7, 0, 5, 1, 9};
  std::uint32_t n = 0;
  for (std::uint64_t s : sizes) n += static_cast<std::uint32_t>(s);
  std::vector<std::string> chars;
  for (std::uint32_t i = 0; i < n; ++i) chars.push_back(std::string(1, static_cast<char>('A' + i)));
  tok::CharTokenizer(chars).save(dir + "/tokenizer.txt");
  tok::TokenFileSpec spec;
  spec.vocab_size = n;
  spec.tokenizer_hash = tok::tokenizer_hash(read_file(dir + "/tokenizer.txt"));
  std::uint32_t next = 0;
  for (std::size_t k = 0; k < 5; ++k) {
    tok::TokenFileWriter w(dir + "/" + tok::shard_file_name("ids", k), spec);
    for (std::uint64_t i = 0; i < sizes[k]; ++i, ++next) w.write(std::vector<std::uint32_t>{next});
    w.commit();
  }
  train::DataOptions d = options(dir, scratch("reach-cache"));
  d.val_fraction = 0;
  const train::TextDataset data(d);
  CHECK(data.size(train::Split::Train) == n);
  const std::int64_t T = 4;
  Generator g(11);
  std::set<std::int64_t> seen;
  for (int b = 0; b < 100; ++b) {
    Tensor x, y;
    data.batch(train::Split::Train, 8, T, g, x, y);
    const std::vector<std::int64_t> xs = x.to_vector<std::int64_t>(), ys = y.to_vector<std::int64_t>();
    for (std::size_t i = 0; i < xs.size(); ++i) {
      CHECK(ys[i] == xs[i] + 1);  // each target is the next id, across every boundary
      if (i % T) CHECK(xs[i] == xs[i - 1] + 1);
      seen.insert(xs[i]);
      seen.insert(ys[i]);
    }
  }
  CHECK(seen.size() == n);  // all of 0..n-1: the first only as an input, the last only as a target
}

TEST_CASE("shards: the shards named val are the validation split") {
  const std::string cache = scratch("val-cache"), dir = scratch("val-shards");
  const train::TextDataset text(options(small_text(), cache));
  shard_the_cache(cache, dir, 30000, "corpus_train");
  shard_the_cache(cache, dir, 5000, "corpus_val");
  const train::TextDataset data(options(dir, cache));
  const std::uint64_t all = text.size(train::Split::Train) + text.size(train::Split::Val);
  CHECK(data.size(train::Split::Train) == all);
  CHECK(data.size(train::Split::Val) == all);
  CHECK(data.files() == 2 + 8);
}

TEST_CASE("shards: a run on shards resumes bit for bit") {
  const std::string cache = scratch("resume-cache"), dir = scratch("resume-shards");
  const train::TextDataset text(options(small_text(), cache));
  shard_the_cache(cache, dir, 4000);
  auto config = [&](const std::string& out) {
    train::TrainConfig c = train::TrainConfig::from_preset("cpu-tiny");
    c.data = dir;
    c.out_dir = out;
    c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.batch_size = 4;
    c.max_iters = 8, c.warmup_iters = 2, c.lr_decay_iters = 8, c.eval_interval = 4, c.eval_iters = 2, c.log_interval = 100;
    c.dropout = 0.1, c.sample_tokens = 0;
    return c;
  };
  const train::TrainResult whole = train::run_training(config(scratch("resume-full")));
  train::TrainConfig first = config(scratch("resume-split"));
  first.max_iters = 5;
  const train::TrainResult part1 = train::run_training(first);
  train::TrainConfig second = first;
  second.max_iters = 8, second.resume = true;
  const train::TrainResult part2 = train::run_training(second);
  std::vector<double> joined = part1.losses;
  joined.insert(joined.end(), part2.losses.begin(), part2.losses.end());
  CHECK(joined == whole.losses);
  CHECK(train_test::tensors_of(part2.last_checkpoint) == train_test::tensors_of(whole.last_checkpoint));
  // The same run on the text file: the same losses (the batches are the same).
  train::TrainConfig on_text = config(scratch("resume-text"));
  on_text.data = small_text();
  CHECK(train::run_training(on_text).losses == whole.losses);
}

TEST_CASE("shards: bad shards are refused, naming the file") {
  const std::string cache = scratch("bad-cache"), dir = scratch("bad-shards");
  const train::TextDataset text(options(small_text(), cache));
  shard_the_cache(cache, dir, 20000);
  const std::string first = dir + "/text_000000.bin";
  CHECK_THROWS_WITH_AS(train::TextDataset(options(dir + "/nothing_*.bin", cache)),
                       doctest::Contains("nothing_*.bin: no file matches"), Error);
  // A wrong header, and a truncated shard.
  const std::string bytes = read_file(first);
  write_file_atomic(dir + "/text_000009.bin", "BRRRTOX" + bytes.substr(7));
  CHECK_THROWS_WITH_AS(train::TextDataset(options(dir, cache)), doctest::Contains("text_000009.bin: not a brrr token file"), Error);
  write_file_atomic(dir + "/text_000009.bin", bytes.substr(0, bytes.size() - 3));
  CHECK_THROWS_WITH_AS(train::TextDataset(options(dir, cache)),
                       doctest::Contains("text_000009.bin: the header says 20000 ids of 2 bytes"), Error);
  fs::remove(dir + "/text_000009.bin");
  // Shards of another tokenizer beside these.
  std::string other = bytes;
  other[32] ^= 1;  // the tokenizer hash
  write_file_atomic(dir + "/text_000009.bin", other);
  CHECK_THROWS_WITH_AS(train::TextDataset(options(dir, cache)),
                       doctest::Contains("text_000009.bin: encoded with tokenizer 'chars' (hash"), Error);
  CHECK_THROWS_WITH_AS(train::TextDataset(options(dir + "/text_000009.bin", cache)),
                       doctest::Contains("text_000009.bin: encoded with tokenizer 'chars' (hash"), Error);
  fs::remove(dir + "/text_000009.bin");
  // No tokenizer beside the shards; every shard named val.
  fs::rename(dir + "/tokenizer.txt", dir + "/elsewhere.txt");
  CHECK_THROWS_WITH_AS(train::TextDataset(options(dir, cache)), doctest::Contains("tokenizer.txt: not there"), Error);
  fs::rename(dir + "/elsewhere.txt", dir + "/tokenizer.txt");
  const std::string val = scratch("bad-val");
  shard_the_cache(cache, val, 20000, "only_val");
  CHECK_THROWS_WITH_AS(train::TextDataset(options(val, cache)), doctest::Contains("every shard is named as validation data"),
                       Error);
  // An id the tokenizer does not have (llm.c's files name no vocabulary: found as a window reads it).
  const std::string llmc = scratch("bad-llmc");
  fs::copy_file(dir + "/tokenizer.txt", llmc + "/tokenizer.txt");
  tok::TokenFileSpec spec;
  spec.vocab_size = 65536;
  spec.format = tok::TokenFileFormat::kLlmc;
  tok::TokenFileWriter w(llmc + "/x_000000.bin", spec);
  w.write(std::vector<std::uint32_t>(100, 60000));
  w.commit();
  const train::TextDataset bad(options(llmc, cache));
  Generator g(1);
  Tensor x, y;
  CHECK_THROWS_WITH_AS(bad.batch(train::Split::Train, 1, 8, g, x, y),
                       doctest::Contains("x_000000.bin: token 60000 at position"), Error);
}
