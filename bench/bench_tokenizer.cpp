// bench/bench_tokenizer.cpp: how fast brrr's tokenizer trains and encodes (chapter 06).
// Read first: docs/chapters/06-tokenization.md. bench/tokenizer.sh runs this beside the
// Python peers (bench/tokenizer_peers.py) and prints one table; docs/measurements.md
// records it.
//
//   bench_tokenizer --corpus FILE [--vocab-size 4096] [--threads "1 2"] [--pattern gpt2]
//                   [--repeat 3] [--out-dir DIR] [--naive]
//
// Prints rows `ROW|corpus|tool|task|threads|time|MB/s|note`, the median of --repeat runs. With --out-dir it also writes the trained tokenizer (tok.txt) and its tiktoken ranks
// (brrr.tiktoken), which the peers load so that every encoder has the same vocabulary.
// With --naive it also times the naive trainer and encoders (bpe_naive.h) on the corpus,
// and one long piece, naive against heap, to show O(n^2) against O(n log n).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include "brrr/io.h"
#include <vector>

#include "brrr/median_timer.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/bpe_naive.h"

using namespace brrr::tokenizer;

// The median of `repeat` timed runs, with no untimed warm-up run (brrr/median_timer.h).
static double median_seconds(int repeat, const std::function<void()>& run) {
  return brrr::time_median(run, 0, repeat).median;
}


// 0.549 s, 4.34 ms, 2.29 us: three significant digits in a unit that suits.
static std::string format_time(double seconds) {
  char buffer[32];
  if (seconds >= 1) std::snprintf(buffer, sizeof buffer, "%.3g s", seconds);
  else if (seconds >= 1e-3) std::snprintf(buffer, sizeof buffer, "%.3g ms", seconds * 1e3);
  else std::snprintf(buffer, sizeof buffer, "%.3g us", seconds * 1e6);
  return buffer;
}

static std::string corpus_name;
static void row(const char* tool, const std::string& task, int threads, double seconds,
                double megabytes, const std::string& note) {
  char rate[32] = "";
  if (megabytes > 0) std::snprintf(rate, sizeof rate, "%.1f", megabytes / seconds);
  std::printf("ROW|%s|%s|%s|%d|%s|%s|%s\n", corpus_name.c_str(), tool, task.c_str(), threads,
              format_time(seconds).c_str(), rate, note.c_str());
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  std::string corpus, out_dir, pattern = "gpt2", threads_list = "1";
  size_t vocab_size = 4096;
  int repeat = 3;
  bool naive_too = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_tokenizer: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--corpus") corpus = value();
    else if (a == "--vocab-size") vocab_size = std::stoul(value());
    else if (a == "--threads") threads_list = value();
    else if (a == "--pattern") pattern = value();
    else if (a == "--repeat") repeat = std::stoi(value());
    else if (a == "--out-dir") out_dir = value();
    else if (a == "--naive") naive_too = true;
    else {
      std::fprintf(stderr,
                   "usage: bench_tokenizer --corpus FILE [--vocab-size N] [--threads \"1 2\"] "
                   "[--pattern gpt2] [--repeat 3] [--out-dir DIR] [--naive]\n");
      return 2;
    }
  }
  if (corpus.empty()) {
    std::fprintf(stderr, "bench_tokenizer: --corpus FILE is required\n");
    return 2;
  }
  std::vector<int> threads;
  std::istringstream tl(threads_list);
  for (int t; tl >> t;) threads.push_back(t);

  std::string text = brrr::read_file(corpus);
  corpus_name = corpus.substr(corpus.rfind('/') + 1);
  double mb = text.size() / 1e6;
  std::fprintf(stderr, "bench_tokenizer: %s, %.2f MB, vocab %zu, pattern %s, repeat %d\n",
               corpus.c_str(), mb, vocab_size, pattern.c_str(), repeat);

  TrainOptions options;
  options.vocab_size = vocab_size;
  options.pattern = pattern_by_name(pattern);

  // Training: the whole of Bpe::train (split and count words, then merge).
  Bpe bpe;
  for (int t : threads) {
    options.threads = t;
    TrainStats stats;
    double s = median_seconds(repeat, [&] { bpe = Bpe::train(text, options, &stats); });
    std::ostringstream note;
    note.precision(3);
    note << "count " << stats.count_seconds << " s + merge " << stats.merge_seconds << " s; "
         << stats.unique_words << " distinct words";
    row("brrr", "train", t, s, mb, note.str());
  }

  // Encoding with the tokenizer just trained.
  std::vector<uint32_t> ids;
  for (int t : threads) {
    double s = median_seconds(repeat, [&] {
      ids = t == 1 ? bpe.encode_ordinary(text) : bpe.encode_parallel(text, t, false);
    });
    row("brrr", "encode", t, s, mb, std::to_string(ids.size()) + " tokens");
  }
  // The cache's share: every piece through the heap merge, no cache.
  {
    std::vector<uint32_t> uncached;
    double s = median_seconds(1, [&] {
      uncached.clear();
      for (std::string_view piece : split(bpe.split_pattern(), text)) bpe.encode_piece(piece, &uncached);
    });
    row("brrr", "encode, no cache", 1, s, mb, uncached == ids ? "same ids" : "DIFFERENT IDS");
  }
  {
    std::string back;
    double s = median_seconds(repeat, [&] { back = bpe.decode(ids); });
    row("brrr", "decode", 1, s, mb, back == text ? "round trip ok" : "ROUND TRIP FAILED");
  }

  if (naive_too) {
    TrainStats stats;
    Bpe slow;
    options.threads = 1;
    double s = median_seconds(1, [&] { slow = naive::train(text, options, &stats); });
    bool same = slow.vocab_size() == bpe.vocab_size();
    for (uint32_t id = 0; same && id < bpe.vocab_size(); id++) same = slow.token(id).bytes == bpe.token(id).bytes;
    row("brrr naive", "train", 1, s, mb, same ? "same merges as fast" : "DIFFERENT MERGES");
    std::vector<uint32_t> naive_ids;
    s = median_seconds(1, [&] { naive_ids = naive::encode(bpe, text); });
    row("brrr naive", "encode", 1, s, mb, naive_ids == bpe.encode(text) ? "same ids" : "DIFFERENT IDS");
    // One long piece: a run of letters with no space (a URL, a base64 blob, DNA...).
    for (size_t n : {100, 1000, 10000, 100000}) {
      std::string piece;
      for (size_t i = 0; i < n; i++) piece += text[(i * 7919) % text.size()] | 0x60;  // letters-ish
      std::vector<uint32_t> a, b;
      double fast_s = median_seconds(repeat, [&] { a.clear(); bpe.encode_piece(piece, &a); });
      double slow_s = n <= 10000 ? median_seconds(1, [&] { b.clear(); naive::encode_piece(bpe, piece, &b); }) : 0;
      row("brrr", "one piece of " + std::to_string(n) + " bytes", 1, fast_s, 0, "heap + linked list");
      if (slow_s > 0)
        row("brrr naive", "one piece of " + std::to_string(n) + " bytes", 1, slow_s, 0,
            a == b ? "same ids" : "DIFFERENT IDS");
    }
  }

  if (!out_dir.empty()) {
    std::filesystem::create_directories(out_dir);
    bpe.save(out_dir + "/tok.txt");
    bpe.export_tiktoken(out_dir + "/brrr.tiktoken");
    std::fprintf(stderr, "bench_tokenizer: wrote %s/tok.txt and %s/brrr.tiktoken\n", out_dir.c_str(),
                 out_dir.c_str());
  }
  return 0;
}
