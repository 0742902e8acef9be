// tokenizer/src/bpe_train.cpp: fast BPE training.
// Chapter 06 (tokenization). Read first: bpe_naive.cpp (the same algorithm, slowly).
// Read next: bpe_encode.cpp.
//
// Two ideas make training fast:
//
// 1. Count words, not text. The corpus is split into pieces once (on all cores, each
//    thread counting its chunks in its own table, the tables added up at the end). From
//    then on training sees only the distinct words and their counts: a 50 MB corpus of
//    English has tens of thousands of distinct words, not tens of millions of bytes.
//
// 2. Update, do not recount. The naive trainer recounts every pair after every merge. Here
//    each pair keeps its count and the list of words it occurs in. Merging (a, b) visits
//    only the words on (a, b)'s list: it takes each such word's pairs out of the counts,
//    merges, and puts the word's new pairs back. The next merge comes from a priority queue
//    (a binary heap) of (count, pair) entries. Counts change all the time, and finding an
//    entry inside a heap to fix it is slow, so entries are never fixed: a popped entry is
//    checked against the pair's current count ("lazy deletion") and, if stale, pushed
//    back with the current count or dropped. A pair whose count grows gets a fresh entry.
//
// The tie rule (bpe.h) is in the heap's order: larger count first, then smaller
// (left, right). It gives the same merges as the naive trainer, which the tests check.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <exception>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"

namespace brrr::tokenizer {

// ----------------------------------------------------------------------------
// Counting words

static int thread_count(int threads) { return threads > 0 ? threads : omp_get_max_threads(); }

WordCounts count_words(std::string_view text, const SplitPattern& pattern,
                       const std::vector<std::string>& special_tokens, int threads) {
  threads = thread_count(threads);
  std::vector<Segment> segments = find_special_tokens(text, special_tokens);
  // Several chunks per thread, so a thread that finishes early takes another.
  std::vector<size_t> bounds =
      threads == 1 ? std::vector<size_t>{0, text.size()}
                   : find_chunks(text, segments, size_t(threads) * 4, size_t(1) << 18);
  size_t chunks = bounds.size() - 1;

  std::vector<BytesMap<uint64_t>> tables(threads);
  std::vector<size_t> pieces(threads, 0);
  std::vector<char> clean(chunks, 1);
  std::exception_ptr error;
#pragma omp parallel num_threads(threads)
  {
    int me = omp_get_thread_num();
    try {
      Splitter splitter(pattern);
      BytesMap<uint64_t> table;  // this thread's own (not tables[me]: see below)
      size_t count = 0;
#pragma omp for schedule(dynamic, 1)
      for (size_t c = 0; c < chunks; c++) {
        clean[c] = for_each_piece(
            splitter, text, segments, bounds[c], bounds[c + 1],
            [&](std::string_view piece) {
              table(piece, hash_bytes(piece))++;
              count++;
            },
            [](int) {});  // special tokens are not words
      }
      // Counting into locals and storing once at the end matters: neighbouring elements of
      // a vector share a cache line, and two cores writing one line in turn ("false
      // sharing") made two threads take 0.38 s instead of 0.27 s on the 51.6 MB corpus.
      tables[me] = std::move(table);
      pieces[me] = count;
    } catch (...) {
#pragma omp critical
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  if (std::find(clean.begin(), clean.end(), 0) != clean.end()) {
    // A custom pattern did not cut where the chunks were cut: count on one thread.
    return count_words(text, pattern, special_tokens, 1);
  }

  // Add the tables up, then sort the words so the result does not depend on thread timing.
  BytesMap<uint64_t>& total = tables[0];
  for (int t = 1; t < threads; t++)
    tables[t].for_each([&](std::string_view word, uint64_t n) { total(word, hash_bytes(word)) += n; });
  std::vector<std::pair<std::string_view, uint64_t>> sorted;
  sorted.reserve(total.size());
  total.for_each([&](std::string_view word, uint64_t n) { sorted.emplace_back(word, n); });
  std::sort(sorted.begin(), sorted.end());

  WordCounts result;
  result.words.reserve(sorted.size());
  result.counts.reserve(sorted.size());
  for (auto& [word, n] : sorted) {
    result.words.emplace_back(word);
    result.counts.push_back(n);
  }
  for (size_t p : pieces) result.pieces += p;
  return result;
}

// ----------------------------------------------------------------------------
// The merge loop

namespace {

// What training knows about one pair.
struct PairStats {
  uint32_t left, right;
  int64_t count = 0;            // occurrences in all words, weighted by word counts
  std::vector<uint32_t> words;  // words it occurs in (may hold words it has left since)
};

// A heap entry: the pair's count when pushed.
struct HeapEntry {
  int64_t count;
  uint32_t left, right;
};
// std::push_heap keeps the "largest" on top: larger count, then smaller (left, right).
bool operator<(const HeapEntry& x, const HeapEntry& y) {
  if (x.count != y.count) return x.count < y.count;
  if (x.left != y.left) return x.left > y.left;
  return x.right > y.right;
}

class Trainer {
 public:
  Trainer(const WordCounts& counts) : word_count_(counts.counts) {
    tokens_.resize(256);
    for (int b = 0; b < 256; b++) {
      tokens_[b] = Token{Token::kByte, kNoToken, kNoToken, std::string(1, char(b))};
      index_(tokens_[b].bytes, hash_bytes(tokens_[b].bytes)) = b;
    }
    // All words' symbols in one array; word w is symbols_[begin_[w], begin_[w] + length_[w]).
    for (const std::string& w : counts.words) {
      begin_.push_back(symbols_.size());
      length_.push_back(uint32_t(w.size()));
      for (char c : w) symbols_.push_back(static_cast<unsigned char>(c));
    }
    seen_.assign(counts.words.size(), kNoToken);
    for (uint32_t w = 0; w < begin_.size(); w++) {
      const uint32_t* s = &symbols_[begin_[w]];
      for (uint32_t i = 0; i + 1 < length_[w]; i++) {
        PairStats& p = stats_of(s[i], s[i + 1]);
        p.count += int64_t(word_count_[w]);
        if (p.words.empty() || p.words.back() != w) p.words.push_back(w);
      }
    }
    for (const PairStats& p : pairs_) heap_.push_back({p.count, p.left, p.right});
    std::make_heap(heap_.begin(), heap_.end());
  }

  // One step: pops the best pair and merges it. False when no pair is left.
  bool step(uint32_t step_number, MergeRecord* record) {
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end());
      HeapEntry top = heap_.back();
      heap_.pop_back();
      uint32_t at = pair_index_.find(top.left, top.right);
      int64_t now = pairs_[at].count;
      if (now == top.count) {
        merge(at, step_number, record);
        return true;
      }
      // Stale. A smaller count goes back in; a larger one already has its own entry.
      if (now < top.count && now > 0) push(now, top.left, top.right);
    }
    return false;
  }

  std::vector<Token>& tokens() { return tokens_; }

 private:
  PairStats& stats_of(uint32_t left, uint32_t right) {
    uint32_t at = pair_index_.find(left, right);
    if (at == PairMap::kNone) {
      at = uint32_t(pairs_.size());
      pair_index_.insert(left, right, at);
      pairs_.push_back(PairStats{left, right, 0, {}});
    }
    return pairs_[at];
  }

  void push(int64_t count, uint32_t left, uint32_t right) {
    heap_.push_back({count, left, right});
    std::push_heap(heap_.begin(), heap_.end());
  }

  // Merges pair number `at` in every word that has it.
  void merge(uint32_t at, uint32_t step_number, MergeRecord* record) {
    uint32_t a = pairs_[at].left, b = pairs_[at].right;
    std::string bytes = tokens_[a].bytes + tokens_[b].bytes;
    uint64_t h = hash_bytes(bytes);
    uint32_t id;
    if (const uint32_t* existing = index_.find(bytes, h)) {
      id = *existing;  // an alias merge: these bytes are a token already
    } else {
      id = uint32_t(tokens_.size());
      tokens_.push_back(Token{Token::kMerge, a, b, bytes});
      index_(bytes, h) = id;
    }
    *record = MergeRecord{a, b, id, uint64_t(pairs_[at].count)};

    std::vector<uint32_t> words = std::move(pairs_[at].words);
    pairs_[at].words.clear();
    grown_.clear();
    for (uint32_t w : words) {
      if (seen_[w] == step_number) continue;  // listed twice
      seen_[w] = step_number;
      uint32_t* s = &symbols_[begin_[w]];
      uint32_t n = length_[w];
      bool has = false;
      for (uint32_t i = 0; i + 1 < n && !has; i++) has = s[i] == a && s[i + 1] == b;
      if (!has) continue;  // the pair left this word in an earlier merge
      int64_t f = int64_t(word_count_[w]);
      // Take the word's pairs out, merge, put its new pairs in.
      for (uint32_t i = 0; i + 1 < n; i++) stats_of(s[i], s[i + 1]).count -= f;
      uint32_t out = 0;
      for (uint32_t i = 0; i < n;) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
          s[out++] = id;
          i += 2;
        } else {
          s[out++] = s[i++];
        }
      }
      length_[w] = n = out;
      for (uint32_t i = 0; i + 1 < n; i++) {
        PairStats& p = stats_of(s[i], s[i + 1]);
        p.count += f;
        if (s[i] == id || s[i + 1] == id) {  // a pair the merge made: it may have grown
          if (p.words.empty() || p.words.back() != w) p.words.push_back(w);
          grown_.push_back(pair_index_.find(s[i], s[i + 1]));
        }
      }
    }
    // A fresh heap entry for every pair that grew.
    std::sort(grown_.begin(), grown_.end());
    grown_.erase(std::unique(grown_.begin(), grown_.end()), grown_.end());
    for (uint32_t g : grown_)
      if (pairs_[g].count > 0) push(pairs_[g].count, pairs_[g].left, pairs_[g].right);
  }

  const std::vector<uint64_t>& word_count_;
  std::vector<Token> tokens_;
  BytesMap<uint32_t> index_;  // bytes -> token, to spot alias merges
  std::vector<uint32_t> symbols_;
  std::vector<size_t> begin_;
  std::vector<uint32_t> length_;
  std::vector<uint32_t> seen_;  // the last step that visited each word
  PairMap pair_index_;          // (left, right) -> index in pairs_
  std::vector<PairStats> pairs_;
  std::vector<HeapEntry> heap_;
  std::vector<uint32_t> grown_;
};

}  // namespace

Bpe Bpe::train_words(const WordCounts& counts, const TrainOptions& options, TrainStats* stats) {
  size_t fixed = 256 + options.special_tokens.size();
  BRRR_CHECK(options.vocab_size >= fixed, "Bpe::train: vocab_size ", options.vocab_size,
             " is smaller than the 256 byte tokens plus ", options.special_tokens.size(),
             " special tokens");
  size_t merges_wanted = options.vocab_size - fixed;
  auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };

  Trainer trainer(counts);
  TrainStats local;
  size_t made = 0;
  size_t report_every = std::max<size_t>(1, merges_wanted / 200);
  for (uint32_t step = 0; made < merges_wanted; step++) {
    MergeRecord record;
    if (!trainer.step(step, &record)) break;  // every word is one token: nothing to merge
    if (record.id >= 256 + made) made++;
    else local.alias_merges++;
    local.history.push_back(record);
    if (options.progress && made % report_every == 0)
      options.progress(TrainProgress{made, merges_wanted, seconds()});
  }
  if (options.progress) options.progress(TrainProgress{made, merges_wanted, seconds()});

  std::vector<Token>& tokens = trainer.tokens();
  for (const std::string& s : options.special_tokens)
    tokens.push_back(Token{Token::kSpecial, kNoToken, kNoToken, s});
  local.merges = made;
  local.unique_words = counts.words.size();
  local.pieces = counts.pieces;
  local.merge_seconds = seconds();
  if (stats) *stats = std::move(local);
  return Bpe(std::move(tokens), options.pattern);
}

Bpe Bpe::train(std::string_view text, const TrainOptions& options, TrainStats* stats) {
  auto t0 = std::chrono::steady_clock::now();
  SplitPattern pattern(options.pattern);
  WordCounts counts = count_words(text, pattern, options.special_tokens, options.threads);
  double count_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Bpe bpe = train_words(counts, options, stats);
  if (stats) {
    stats->text_bytes = text.size();
    stats->count_seconds = count_seconds;
  }
  return bpe;
}

}  // namespace brrr::tokenizer
