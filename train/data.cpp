// train/data.cpp: the cached token file or the shards, and random batches. Chapter 08 (training).
#include "train/data.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "brrr/error.h"
#include "brrr/io.h"
#include "brrr/tokenizer/char_tokenizer.h"
#include "brrr/tokenizer/shards.h"

namespace brrr::train {

namespace fs = std::filesystem;

std::string hash_hex(std::uint64_t h) {
  char text[20];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(h));
  return text;
}

namespace {
std::string gigabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GB", bytes / 1e9);
  return text;
}

// A name for the cache that changes whenever the input or the tokenizer settings do.
std::string cache_stem(const DataOptions& o) {
  struct stat st {};
  BRRR_CHECK(::stat(o.input.c_str(), &st) == 0, "cannot read the training text '", o.input,
             "' (point --data at a UTF-8 text file)");
  std::string key = std::filesystem::absolute(o.input).string() + "|" + std::to_string(st.st_size) + "|" +
                    std::to_string(st.st_mtim.tv_sec) + "|" + (o.given ? "given|" + o.given_key : o.tokenizer);
  if (o.tokenizer == "bpe") {  // two appends: "|" + to_string(...) sets off GCC 12's -Wrestrict (bug 105329)
    key += '|';
    key += std::to_string(o.bpe_vocab_size);
  }
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  if (o.given) return std::filesystem::path(o.input).stem().string() + "-init-" + std::string(hex, 8);
  return std::filesystem::path(o.input).stem().string() + "-" + o.tokenizer +
         (o.tokenizer == "bpe" ? std::to_string(o.bpe_vocab_size) : "") + "-" + std::string(hex, 8);
}
// A character tokenizer's vocabulary is the text's characters: of a file that is not UTF-8
// (an archive, an image, random bytes) it would be thousands of stray bytes and fragments, made
// without a word. The first byte that is not part of a UTF-8 character is named instead.
void check_is_text(const std::string& path, const std::string& text) {
  const std::size_t at = tokenizer::CharTokenizer::first_stray_byte(text);
  if (at == std::string::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<unsigned char>(text[at])));
  detail::fail("the training text '", path, "' is not UTF-8: the byte at offset ", at, " (", byte,
               ") is not part of a UTF-8 character, and --tokenizer char makes one token per character of text. "
               "To train on the bytes themselves, use the byte-level BPE tokenizer: --tokenizer bpe (it starts from "
               "the 256 bytes and learns merges of them; --bpe_vocab_size sets its size)");
}
}  // namespace

TextDataset::TextDataset(const DataOptions& o) {
  BRRR_CHECK(o.val_fraction >= 0.0 && o.val_fraction < 1.0, "val_fraction must be in [0, 1), got ", o.val_fraction);
  if (tokenizer::names_token_files(o.input)) open_shards(o);
  else open_text(o);
  BRRR_CHECK(vocab_size() <= static_cast<std::int64_t>(INT32_MAX), "a vocabulary of ", vocab_size(),
             " does not fit int32 ids");
}

void TextDataset::open_text(const DataOptions& o) {
  BRRR_CHECK(o.given || o.tokenizer == "char" || o.tokenizer == "bpe", "unknown tokenizer '", o.tokenizer,
             "' (expected char or bpe)");
  std::filesystem::create_directories(o.cache_dir);
  const std::string stem = o.cache_dir + "/" + cache_stem(o);
  tokenizer_path_ = stem + ".tokenizer";
  const std::string token_path = stem + ".tokens";
  if (!std::filesystem::exists(token_path) || !std::filesystem::exists(tokenizer_path_)) {
    const auto start = std::chrono::steady_clock::now();
    const std::string text = read_file(o.input);
    BRRR_CHECK(!text.empty(), "the training text '", o.input, "' is empty");
    std::shared_ptr<const TextTokenizer> tok = o.given;
    if (!tok && o.tokenizer == "char") check_is_text(o.input, text);
    if (!tok) tok = TextTokenizer::train(o.tokenizer, text, o.bpe_vocab_size, o.verbose);
    const std::vector<std::uint32_t> ids = tok->encode(text);
    tok->save(tokenizer_path_);
    tokenizer::write_token_file(token_path, ids, tok->vocab_size());
    if (o.verbose)
      std::printf("data: %s -> %zu tokens (%s tokenizer, vocab %zu) in %.1f s, cached in %s\n", o.input.c_str(),
                  ids.size(), o.given ? tok->kind().c_str() : o.tokenizer.c_str(), tok->vocab_size(),
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), o.cache_dir.c_str());
  }
  tokenizer_ = TextTokenizer::load(tokenizer_path_);
  auto tokens = std::make_unique<tokenizer::MappedTokenFile>(token_path);
  BRRR_CHECK(tokens->vocab_size() == tokenizer_->vocab_size(), token_path, ": written for a vocabulary of ",
             tokens->vocab_size(), ", the tokenizer has ", tokenizer_->vocab_size(), "; delete the cache");
  // Every id is checked against the vocabulary once, here, where the ids are made: batches
  // can then go to a device as they are, and no op has to read them back to check them.
  const std::uint64_t vocab = tokenizer_->vocab_size();
  for (std::uint64_t i = 0; i < tokens->size(); ++i)
    BRRR_CHECK((*tokens)[i] < vocab, token_path, ": token ", (*tokens)[i], " at position ", i,
               " is out of range for the vocabulary of ", vocab, "; delete the cache");
  all_.add(std::move(tokens));
  const std::uint64_t train_end = static_cast<std::uint64_t>(static_cast<double>(all_.size) * (1.0 - o.val_fraction));
  train_ = {&all_, 0, train_end};
  val_ = {&all_, train_end, all_.size - train_end};
}

// Shards (brrr/tokenizer/shards.h): mapped as they are, never copied or rewritten. Their ids are
// checked against the vocabulary as each window is read, not here: a pass over 40 GB of shards
// at start-up would take minutes.
void TextDataset::open_shards(const DataOptions& o) {
  const std::vector<std::string> paths = tokenizer::find_shards(o.input);
  std::vector<std::unique_ptr<tokenizer::MappedTokenFile>> files;
  for (const std::string& path : paths) files.push_back(std::make_unique<tokenizer::MappedTokenFile>(path));
  // One tokenizer for all: the shards that name theirs must name the same one.
  const tokenizer::MappedTokenFile* named = nullptr;
  for (const auto& f : files) {
    if (f->info().tokenizer_hash == 0) continue;
    if (!named) named = f.get();
    BRRR_CHECK(f->info().tokenizer_hash == named->info().tokenizer_hash, f->path(), ": encoded with tokenizer '",
               f->info().tokenizer_name, "' (hash ", hash_hex(f->info().tokenizer_hash), "), but ", named->path(),
               " with '", named->info().tokenizer_name, "' (hash ", hash_hex(named->info().tokenizer_hash),
               "): shards of two tokenizers are not one corpus");
  }
  if (o.given) {
    // --init_from: the model's tokenizer (its hash is of another format, so only the sizes are compared).
    tokenizer_path_ = o.cache_dir + "/shards-init-" + o.given_key + ".tokenizer";
    std::filesystem::create_directories(o.cache_dir);
    if (!std::filesystem::exists(tokenizer_path_)) o.given->save(tokenizer_path_);
  } else {
    tokenizer_path_ = (fs::path(paths[0]).parent_path() / tokenizer::kShardTokenizerFile).string();
    BRRR_CHECK(fs::exists(tokenizer_path_), tokenizer_path_, ": not there; shards are read with the tokenizer beside "
               "them (brrr tokenizer encode --shards writes it; beside llm.c's shards, put the tokenizer there as ",
               tokenizer::kShardTokenizerFile, ", or pass --init_from)");
    if (named) {
      const std::uint64_t h = tokenizer::tokenizer_hash(read_file(tokenizer_path_));
      BRRR_CHECK(h == named->info().tokenizer_hash, named->path(), ": encoded with tokenizer '",
                 named->info().tokenizer_name, "' (hash ", hash_hex(named->info().tokenizer_hash), "), not with ",
                 tokenizer_path_, " beside it (hash ", hash_hex(h), ")");
    }
  }
  tokenizer_ = TextTokenizer::load(tokenizer_path_);
  const std::uint64_t vocab = tokenizer_->vocab_size();
  for (const auto& f : files) {
    const std::uint64_t v = f->vocab_size();  // 0: llm.c's files do not say
    BRRR_CHECK(v == 0 || (o.given ? v <= vocab : v == vocab), f->path(), ": written for a vocabulary of ", v,
               ", the tokenizer (", tokenizer_path_, ") has ", vocab);
  }
  // The split: the shards named val, or else the last val_fraction of all the ids.
  std::size_t val_count = 0;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const bool val = tokenizer::is_val_shard(paths[i]);
    val_count += val;
    (val ? val_files_ : all_).add(std::move(files[i]));
  }
  BRRR_CHECK(!all_.files.empty(), o.input, ": every shard is named as validation data (*_val_*); the training "
             "split would be empty");
  if (val_count > 0) {
    train_ = {&all_, 0, all_.size};
    val_ = {&val_files_, 0, val_files_.size};
  } else {
    const std::uint64_t train_end =
        static_cast<std::uint64_t>(static_cast<double>(all_.size) * (1.0 - o.val_fraction));
    train_ = {&all_, 0, train_end};
    val_ = {&all_, train_end, all_.size - train_end};
  }
  if (o.verbose) {
    char split[64];
    if (val_count > 0) std::snprintf(split, sizeof split, "the %zu shards named val", val_count);
    else std::snprintf(split, sizeof split, "the last %g%% of the ids", 100 * o.val_fraction);
    std::printf("data: %zu shards (%s), %llu tokens; tokenizer %s (%s, vocab %llu); validation: %s\n", paths.size(),
                o.input.c_str(), static_cast<unsigned long long>(all_.size + val_files_.size), tokenizer_path_.c_str(),
                tokenizer_->kind().c_str(), static_cast<unsigned long long>(vocab), split);
  }
}

void TextDataset::Files::add(std::unique_ptr<tokenizer::MappedTokenFile> file) {
  starts.push_back(size);
  size += file->size();
  files.push_back(std::move(file));
}

void TextDataset::Files::read(std::uint64_t start, std::uint64_t n, std::uint64_t vocab, std::uint32_t* out) const {
  // The file holding `start`: the last whose first id is at or before it (empty files skipped).
  std::size_t f = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), start) - starts.begin()) - 1;
  std::uint64_t at = start - starts[f];
  for (std::uint64_t i = 0; i < n; ++i, ++at) {
    while (at >= files[f]->size()) at -= files[f]->size(), ++f;  // on into the next file
    const std::uint32_t id = (*files[f])[at];
    BRRR_CHECK(id < vocab, files[f]->path(), ": token ", id, " at position ", at,
               " is out of range for the vocabulary of ", vocab);
    out[i] = id;
  }
}

void TextDataset::batch(Split split, std::int64_t B, std::int64_t T, Generator& gen, Tensor& x, Tensor& y) const {
  const Part& p = part(split);
  const std::uint64_t begin = p.begin, n = p.size;
  BRRR_CHECK(n > static_cast<std::uint64_t>(T) + 1, "the ", split == Split::Train ? "training" : "validation",
             " split has ", n, " tokens, too few for windows of ", T + 1, " (use a longer text or a smaller block_size)");
  // int32, the type the kernels take (the ids were range-checked at load), so a batch goes to a
  // device as it is: no conversion, and no check that would read it back.
  std::vector<std::int32_t> xs, ys;
  const double bytes = 2.0 * static_cast<double>(B) * static_cast<double>(T) * sizeof(std::int32_t);
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  // Checked before they are allocated: an impossible batch_size is an error that names it, not
  // std::bad_alloc (or, where the kernel lets a process allocate more than there is, the OOM killer).
  const auto too_big = [&](const std::string& what) {
    detail::fail("out of memory: the batch's token ids x and y, two (", B, ", ", T, ") int32 tensors, need ",
                 gigabytes(bytes), what, "; lower --batch_size or --block_size (--grad_accum N with batch_size / N "
                 "keeps the tokens a step)");
  };
  if (bytes >= memory) too_big(", more than this machine's " + gigabytes(memory));
  try {
    xs.resize(static_cast<std::size_t>(B * T));
    ys.resize(xs.size());
  } catch (const std::bad_alloc&) {
    too_big(", which could not be allocated");
  }
  std::vector<std::uint32_t> window(static_cast<std::size_t>(T) + 1);
  const std::uint64_t vocab = tokenizer_->vocab_size();
  for (std::int64_t b = 0; b < B; ++b) {
    const std::uint64_t start = begin + gen.next_u64() % (n - static_cast<std::uint64_t>(T));
    p.files->read(start, window.size(), vocab, window.data());
    for (std::int64_t t = 0; t < T; ++t) {
      xs[b * T + t] = static_cast<std::int32_t>(window[t]);
      ys[b * T + t] = static_cast<std::int32_t>(window[t + 1]);
    }
  }
  x = from_vector(xs, {B, T}, kInt32);
  y = from_vector(ys, {B, T}, kInt32);
}

void TextDataset::skip_batches(std::int64_t n, std::int64_t B, Generator& gen) const {
  for (std::int64_t i = 0; i < n * B; ++i) gen.next_u64();  // one draw per window, as in batch()
}

}  // namespace brrr::train
