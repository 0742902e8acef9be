// apps/brrr/cli_tokenizer.cpp: `brrr tokenizer train|encode|decode` (chapter 06).
// Read first: tokenizer/include/brrr/tokenizer/bpe.h. Read next: chapter 07, whose trainer
// reads the token files `encode` writes (tokenizer/include/brrr/tokenizer/token_file.h).
//
//   brrr tokenizer train  --input shakespeare.txt --vocab-size 4096 --out tok.txt
//   brrr tokenizer encode --tokenizer tok.txt --input shakespeare.txt --out shakespeare.bin
//   brrr tokenizer encode --tokenizer tok.txt --input corpus.txt --out shards/ --shards
//   brrr tokenizer decode --tokenizer tok.txt --input shakespeare.bin --out back.txt
//
// `train --char` makes the character-level tokenizer instead; encode and decode read either
// kind (the file's first line says which), and tiktoken's rank files too:
//   brrr tokenizer encode --tokenizer gpt2.tiktoken --pattern gpt2 --input t.txt --out t.bin
//   brrr tokenizer info gpt2.tiktoken
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "brrr/error.h"
#include "brrr/io.h"
#include "brrr/parallel.h"
#include "brrr/strings.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/char_tokenizer.h"
#include "brrr/tokenizer/shards.h"
#include "brrr/tokenizer/stream_encode.h"
#include "brrr/tokenizer/token_file.h"
#include "commands.h"

namespace brrr::cli {

namespace tok = brrr::tokenizer;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string read_input(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  BRRR_CHECK(f.good(), path, ": cannot open");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// What a tiktoken rank file needs besides its ranks: the split pattern and the special
// tokens (which the file does not hold; they get the ids after the ranks).
struct TiktokenOptions {
  std::string pattern = "gpt2";
  std::vector<std::string> specials = {std::string(tok::kEndOfText)};
};

// A tiktoken rank file: "base64 rank" on each line (no header, unlike brrr's own files).
bool looks_like_tiktoken(const std::string& first_line) {
  const std::size_t space = first_line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= first_line.size()) return false;
  for (std::size_t i = space + 1; i < first_line.size(); ++i)
    if (first_line[i] < '0' || first_line[i] > '9') return false;
  return first_line.rfind("brrr-", 0) != 0;
}

// A BPE or a character tokenizer, whichever the file holds (brrr's formats or tiktoken's).
struct AnyTokenizer {
  std::optional<tok::Bpe> bpe;
  std::optional<tok::CharTokenizer> chars;
  bool tiktoken = false;

  static AnyTokenizer load(const std::string& path, const TiktokenOptions& o = {}) {
    std::ifstream f(path);
    BRRR_CHECK(f.good(), path, ": cannot open");
    std::string first;
    std::getline(f, first);
    AnyTokenizer t;
    if (first.rfind("brrr-char", 0) == 0) {
      t.chars = tok::CharTokenizer::load(path);
    } else if (looks_like_tiktoken(first)) {
      t.bpe = tok::Bpe::import_tiktoken(path, tok::pattern_by_name(o.pattern), o.specials);
      t.tiktoken = true;
    } else {
      BRRR_CHECK(first.rfind("brrr-bpe", 0) == 0, path, ": not a tokenizer file brrr knows (its first line is '",
                 first.substr(0, 40), "'; expected brrr-bpe, brrr-char, or tiktoken's 'base64 rank' lines)");
      t.bpe = tok::Bpe::load(path);
    }
    return t;
  }
  size_t vocab_size() const { return bpe ? bpe->vocab_size() : chars->vocab_size(); }
  std::vector<uint32_t> encode(std::string_view text, int threads, bool specials) const {
    if (chars) return chars->encode(text);
    return bpe->encode_parallel(text, threads, specials);
  }
  std::string decode(std::span<const uint32_t> ids) const {
    return bpe ? bpe->decode(ids) : chars->decode(ids);
  }
  void save(const std::string& path) const {
    if (bpe) bpe->save(path);
    else chars->save(path);
  }
  tok::StreamStats encode_stream(const tok::ReadBytes& read, const tok::StreamOptions& o, bool specials,
                                 const tok::WriteIds& write) const {
    if (chars) return tok::encode_stream(*chars, read, o, write);
    return tok::encode_stream(*bpe, specials, read, o, write);
  }
};

// [#########-----------]  1234/3839 merges  41.2k merges/s  0.03 s
// Redrawn in place at most 10 times a second on a terminal; into a file or pipe, one line
// a second and the last.
void print_progress(const tok::TrainProgress& p) {
  static const bool terminal = isatty(fileno(stderr));
  static double last = -1;
  bool done = p.merges_done == p.merges_total;
  if (!done && last >= 0 && p.seconds - last < (terminal ? 0.1 : 1.0)) return;
  last = p.seconds;
  constexpr int kWidth = 30;
  int filled = p.merges_total ? int(kWidth * p.merges_done / p.merges_total) : kWidth;
  double rate = p.seconds > 0 ? p.merges_done / p.seconds : 0;
  std::fprintf(stderr, "%s[%s%s] %5zu/%zu merges  %7.1fk merges/s  %.2f s%s", terminal ? "\r" : "",
               std::string(filled, '#').c_str(), std::string(kWidth - filled, '-').c_str(),
               p.merges_done, p.merges_total, rate / 1000, p.seconds,
               terminal && !done ? "" : "\n");
  std::fflush(stderr);
}

struct TrainArgs {
  std::string input, out, pattern = "gpt2", tiktoken_out;
  size_t vocab_size = 4096;
  std::vector<std::string> specials = {std::string(tok::kEndOfText)};
  bool no_special = false, chars = false;
  int threads = 0;
};

void train(const TrainArgs& a) {
  auto t0 = std::chrono::steady_clock::now();
  std::string text = read_input(a.input);
  if (a.chars) {
    tok::CharTokenizer chars = tok::CharTokenizer::from_text(text);
    chars.save(a.out);
    std::printf("wrote %s: %zu characters\n", a.out.c_str(), chars.vocab_size());
    return;
  }
  tok::TrainOptions options;
  options.vocab_size = a.vocab_size;
  options.pattern = tok::pattern_by_name(a.pattern);
  options.special_tokens = a.no_special ? std::vector<std::string>{} : a.specials;
  options.threads = a.threads;
  options.progress = print_progress;

  auto t_count = std::chrono::steady_clock::now();
  tok::SplitPattern pattern(options.pattern);
  tok::WordCounts words = tok::count_words(text, pattern, options.special_tokens, a.threads);
  double count_s = seconds_since(t_count);
  std::fprintf(stderr, "counted %zu pieces, %zu distinct, in %.2f MB: %.3f s (%.1f MB/s)\n",
               words.pieces, words.words.size(), text.size() / 1e6, count_s,
               text.size() / 1e6 / count_s);
  tok::TrainStats stats;
  tok::Bpe bpe = tok::Bpe::train_words(words, options, &stats);
  bpe.save(a.out);
  std::printf("wrote %s: %zu tokens (256 bytes, %zu merges, %zu special) in %.2f s\n",
              a.out.c_str(), bpe.vocab_size(), stats.merges, options.special_tokens.size(),
              seconds_since(t0));
  if (bpe.vocab_size() < a.vocab_size)
    std::printf("note: the text ran out of pairs to merge before %zu tokens\n", a.vocab_size);
  if (!a.tiktoken_out.empty()) {
    bpe.export_tiktoken(a.tiktoken_out);
    std::printf("wrote %s (tiktoken ranks; special tokens follow at id %zu)\n",
                a.tiktoken_out.c_str(), bpe.vocab_size() - options.special_tokens.size());
  }
}

struct CodeArgs {
  std::string tokenizer, input, out, dtype = "auto", format = "brrr";
  int threads = 0;
  bool ordinary = false, shards = false;
  uint64_t shard_tokens = 100'000'000;
  size_t chunk_bytes = size_t(1) << 20;
  TiktokenOptions tiktoken;
};

// The tokenizer's bytes in brrr's format: what a token file's header names by their hash.
std::string tokenizer_bytes(const AnyTokenizer& t, const std::string& beside) {
  const std::string tmp = beside + ".tokenizer.tmp";
  t.save(tmp);
  std::string bytes = read_input(tmp);
  std::filesystem::remove(tmp);
  return bytes;
}

// Reads the text a block at a time, encodes each block on all cores, and writes the ids as they
// come (stream_encode.h): memory holds a block, not the text. The ids are encode()'s.
void encode(const CodeArgs& a) {
  namespace fs = std::filesystem;
  AnyTokenizer t = AnyTokenizer::load(a.tokenizer, a.tiktoken);
  tok::TokenFileSpec spec;
  spec.vocab_size = t.vocab_size();
  spec.id_bytes = a.dtype == "uint16" ? 2 : a.dtype == "uint32" ? 4 : 0;
  spec.format = a.format == "llmc" ? tok::TokenFileFormat::kLlmc : tok::TokenFileFormat::kBrrr;
  spec.tokenizer_name = fs::path(a.tokenizer).stem().string();
  std::string bytes;
  if (a.shards) {
    // The tokenizer goes beside the shards; a second corpus encoded into the folder (a val.txt
    // beside train.txt) must use the same one.
    fs::create_directories(a.out);
    const std::string path = (fs::path(a.out) / tok::kShardTokenizerFile).string();
    bytes = tokenizer_bytes(t, path);
    if (fs::exists(path))
      BRRR_CHECK(read_input(path) == bytes, path, ": holds another tokenizer than ", a.tokenizer,
                 "; shards of two tokenizers cannot share a folder");
    else
      write_file_atomic(path, bytes);
  } else {
    bytes = tokenizer_bytes(t, a.out);
  }
  spec.tokenizer_hash = tok::tokenizer_hash(bytes);

  std::unique_ptr<tok::TokenFileWriter> file;
  std::unique_ptr<tok::ShardWriter> shards;
  if (a.shards) shards = std::make_unique<tok::ShardWriter>(a.out, fs::path(a.input).stem().string(), a.shard_tokens, spec);
  else file = std::make_unique<tok::TokenFileWriter>(a.out, spec);

  std::FILE* in = std::fopen(a.input.c_str(), "rb");
  BRRR_CHECK(in != nullptr, a.input, ": cannot open");
  tok::StreamOptions options;
  options.threads = a.threads;
  options.chunk_bytes = a.chunk_bytes;
  const bool terminal = isatty(fileno(stderr));
  auto t0 = std::chrono::steady_clock::now();
  double shown = 0;
  uint64_t written = 0;
  tok::StreamStats stats;
  try {
    stats = t.encode_stream(tok::read_file_stream(in, a.input), options, !a.ordinary, [&](std::span<const uint32_t> ids) {
      if (shards) shards->write(ids);
      else file->write(ids);
      written += ids.size();
      const double s = seconds_since(t0);
      if (terminal && s - shown >= 1) {
        shown = s;
        std::fprintf(stderr, "\r%.1fM tokens, %.1f s", written / 1e6, s);
      }
    });
  } catch (...) {
    std::fclose(in);
    throw;
  }
  std::fclose(in);
  if (terminal && shown > 0) std::fprintf(stderr, "\n");
  std::vector<std::string> paths;
  if (shards) paths = shards->finish();
  else file->commit();
  const double s = seconds_since(t0);
  std::printf("encoded %.2f MB into %llu tokens in %.3f s: %.1f MB/s, %.2f bytes per token (%d threads, %llu chunks)\n",
              stats.bytes / 1e6, static_cast<unsigned long long>(stats.tokens), s, stats.bytes / 1e6 / s,
              stats.tokens ? double(stats.bytes) / double(stats.tokens) : 0.0,
              a.threads > 0 ? a.threads : get_num_threads(), static_cast<unsigned long long>(stats.chunks));
  const bool wide = spec.id_bytes == 4 || (spec.id_bytes == 0 && t.vocab_size() > 65536);
  const char* kind = spec.format == tok::TokenFileFormat::kLlmc ? "llm.c's format, uint16" : wide ? "uint32" : "uint16";
  if (shards)
    std::printf("wrote %zu shards into %s (%s ids, at most %llu a shard) and %s\n", paths.size(), a.out.c_str(), kind,
                static_cast<unsigned long long>(a.shard_tokens), std::string(tok::kShardTokenizerFile).c_str());
  else
    std::printf("wrote %s (%s ids)\n", a.out.c_str(), kind);
}

void decode(const CodeArgs& a) {
  AnyTokenizer t = AnyTokenizer::load(a.tokenizer, a.tiktoken);
  tok::TokenFileHeader header;
  std::vector<uint32_t> ids = tok::read_token_file(a.input, &header);
  std::string text = t.decode(ids);
  if (a.out.empty() || a.out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream f(a.out, std::ios::binary);
  BRRR_CHECK(f.good(), a.out, ": cannot open for writing");
  f.write(text.data(), std::streamsize(text.size()));
  BRRR_CHECK(f.good(), a.out, ": write failed");
  std::fprintf(stderr, "decoded %zu tokens into %zu bytes: %s\n", ids.size(), text.size(),
               a.out.c_str());
}

// brrr tokenizer info FILE: what a tokenizer is.
void info(const std::string& path, const TiktokenOptions& o) {
  const AnyTokenizer t = AnyTokenizer::load(path, o);
  if (t.chars) {
    std::printf("%s: character tokenizer, %zu tokens\n", path.c_str(), t.chars->vocab_size());
    return;
  }
  const tok::Bpe& bpe = *t.bpe;
  std::vector<std::string> specials;
  std::vector<std::uint32_t> longest;
  for (std::uint32_t id = 0; id < bpe.vocab_size(); ++id) {
    if (bpe.token(id).kind == tok::Token::kSpecial) specials.push_back(bpe.token(id).bytes);
    else longest.push_back(id);
  }
  std::stable_sort(longest.begin(), longest.end(), [&](std::uint32_t a, std::uint32_t b) {
    return bpe.token(a).bytes.size() > bpe.token(b).bytes.size();
  });
  std::printf("%s: byte-level BPE (%s), %zu tokens: 256 bytes, %zu merges, %zu special\n", path.c_str(),
              t.tiktoken ? "tiktoken ranks" : "brrr's format", bpe.vocab_size(),
              bpe.vocab_size() - 256 - specials.size(), specials.size());
  std::printf("split pattern: %s\n", bpe.pattern().c_str());
  std::printf("special tokens: %s\n", specials.empty() ? "none" : join(specials).c_str());
  std::printf("longest tokens:");
  for (std::size_t i = 0; i < std::min<std::size_t>(10, longest.size()); ++i) {
    std::string shown;
    for (unsigned char c : bpe.token(longest[i]).bytes) shown += c >= 32 && c < 127 ? std::string(1, char(c)) : "\\x" + std::to_string(c);
    std::printf(" [%s]", shown.c_str());
  }
  std::printf("\n");
}

void add_tiktoken_options(CLI::App* cmd, TiktokenOptions& o) {
  cmd->add_option("--pattern", o.pattern, "For a tiktoken rank file: its split pattern, gpt2 or cl100k (or a regex)")
      ->capture_default_str();
  cmd->add_option("--special", o.specials, "For a tiktoken rank file: its special tokens, ids after the ranks (repeatable)")
      ->capture_default_str();
}

}  // namespace

void add_tokenizer_commands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("tokenizer", "Byte-level BPE tokenizer (chapter 06): train, encode, decode, info");
  group->require_subcommand(1);

  auto t = std::make_shared<TrainArgs>();
  CLI::App* train_cmd = group->add_subcommand("train", "Train a BPE (or --char) tokenizer on a text file");
  train_cmd->add_option("--input", t->input, "Training text")->required()->check(CLI::ExistingFile);
  train_cmd->add_option("--vocab-size", t->vocab_size, "Tokens in all: 256 bytes + merges + special tokens")
      ->check(CLI::Range(size_t(257), size_t(1) << 24))->capture_default_str();
  train_cmd->add_option("--out", t->out, "Tokenizer file to write")->required();
  train_cmd->add_option("--pattern", t->pattern, "Split pattern: gpt2, cl100k or a PCRE2 regex")->capture_default_str();
  train_cmd->add_option("--special", t->specials, "Special tokens (repeatable)")->capture_default_str();
  train_cmd->add_flag("--no-special", t->no_special, "No special tokens");
  train_cmd->add_option("--threads", t->threads, "Threads for counting words (0: all cores)")->capture_default_str();
  train_cmd->add_option("--tiktoken", t->tiktoken_out, "Also export the ranks in tiktoken's format");
  train_cmd->add_flag("--char", t->chars, "Make the character-level tokenizer instead");
  train_cmd->callback([t] { train(*t); });

  auto e = std::make_shared<CodeArgs>();
  CLI::App* encode_cmd = group->add_subcommand("encode", "Encode a text file into a token file or a folder of shards (uint16/uint32 ids), streaming");
  encode_cmd->add_option("--tokenizer", e->tokenizer, "Tokenizer file")->required()->check(CLI::ExistingFile);
  encode_cmd->add_option("--input", e->input, "Text to encode")->required()->check(CLI::ExistingFile);
  encode_cmd->add_option("--out", e->out, "Token file to write (with --shards: the folder)")->required();
  encode_cmd->add_option("--dtype", e->dtype, "Id type: auto, uint16 or uint32")
      ->check(CLI::IsMember({"auto", "uint16", "uint32"}))->capture_default_str();
  encode_cmd->add_option("--threads", e->threads, "Threads (0: all cores)")->capture_default_str();
  encode_cmd->add_flag("--ordinary", e->ordinary, "Treat special tokens in the text as plain text");
  encode_cmd->add_flag("--shards", e->shards, "Write a folder of shards (INPUTSTEM_000000.bin, ...) and tokenizer.txt");
  encode_cmd->add_option("--shard-tokens", e->shard_tokens, "With --shards: ids a shard")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 40))->capture_default_str();
  encode_cmd->add_option("--format", e->format, "brrr (a header naming the tokenizer) or llmc (llm.c's .bin: uint16 ids)")
      ->check(CLI::IsMember({"brrr", "llmc"}))->capture_default_str();
  encode_cmd->add_option("--chunk-bytes", e->chunk_bytes, "Bytes a chunk, about (cut at the next safe place)")
      ->check(CLI::Range(size_t(1), size_t(1) << 30))->capture_default_str();
  add_tiktoken_options(encode_cmd, e->tiktoken);
  encode_cmd->callback([e] { encode(*e); });

  auto d = std::make_shared<CodeArgs>();
  CLI::App* decode_cmd = group->add_subcommand("decode", "Decode a token file back into text");
  decode_cmd->add_option("--tokenizer", d->tokenizer, "Tokenizer file")->required()->check(CLI::ExistingFile);
  decode_cmd->add_option("--input", d->input, "Token file")->required()->check(CLI::ExistingFile);
  decode_cmd->add_option("--out", d->out, "Text file to write (default: standard output)");
  add_tiktoken_options(decode_cmd, d->tiktoken);
  decode_cmd->callback([d] { decode(*d); });

  auto i = std::make_shared<std::pair<std::string, TiktokenOptions>>();
  CLI::App* info_cmd = group->add_subcommand("info", "Say what a tokenizer file holds: size, pattern, special tokens, longest tokens");
  info_cmd->add_option("file", i->first, "Tokenizer file (brrr's, or tiktoken's ranks)")->required()->check(CLI::ExistingFile);
  add_tiktoken_options(info_cmd, i->second);
  info_cmd->callback([i] { info(i->first, i->second); });
}

}  // namespace brrr::cli
