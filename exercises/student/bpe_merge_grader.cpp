// exercises/student/bpe_merge_grader.cpp: the grader of ex06.1 (chapter 06), BPE merge steps
// against the real trainer. Read before: the stub beside it, then exercises/grading.h. Read next:
// exercises/student/im2col_grader.cpp (ex09.1).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "exercises/grading.h"
#include "brrr/tokenizer/bpe.h"
#include "exercises/student/student.h"
#if BRRR_EXERCISE_SOLUTIONS
#include "exercises/solutions/solutions.h"
#endif

namespace brrr::exercises {

namespace {
// The text the merges are learned from: the start of tinyshakespeare when it is beside the
// checkout, else a few sentences (the check is the same either way: yours against the trainer's).
std::string bpe_text() {
  const char* dirs[] = {std::getenv("BRRR_SHARED_DIR"), BRRR_SHARED_DIR};
  for (const char* dir : dirs) {
    if (!dir) continue;
    std::ifstream f(std::filesystem::path(dir) / "data" / "tinyshakespeare.txt", std::ios::binary);
    if (!f) continue;
    std::string text(60000, '\0');
    f.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(f.gcount()));
    if (!text.empty()) return text;
  }
  std::string text;
  for (int i = 0; i < 40; ++i)
    text += "The tokenizer counts every pair of tokens in every word, merges the most frequent pair into a "
            "new token, and counts again. Ties go to the smaller pair, so the same text always gives the "
            "same merges. aaa aaaa abab baba " + std::to_string(i * 37) + "\n";
  return text;
}

Result check_bpe_merge(MostFrequentPairFn most_frequent_pair, MergePairFn merge_pair) {
  using Word = std::vector<std::uint32_t>;
  auto show = [](const Word& w) {
    std::string s = "{";
    for (std::size_t i = 0; i < w.size(); ++i) s += (i ? ", " : "") + std::to_string(w[i]);
    return s + "}";
  };
  // merge_pair on the cases that catch the usual slips.
  struct MergeCase {
    Word word;
    std::uint32_t a, b;
    Word expected;
  };
  const std::uint32_t id = 300;
  const std::vector<MergeCase> merges = {
      {{97, 97, 97}, 97, 97, {id, 97}},         {{97, 98, 97, 98}, 97, 98, {id, id}},
      {{98, 97}, 97, 98, {98, 97}},             {{}, 97, 98, {}},
      {{97}, 97, 98, {97}},                     {{99, 97, 98, 97, 98, 98}, 97, 98, {99, id, id, 98}},
  };
  for (const MergeCase& c : merges) {
    Word w = c.word;
    merge_pair(w, c.a, c.b, id);
    if (w != c.expected)
      fail("merge_pair(", show(c.word), ", ", c.a, ", ", c.b, ", ", id, ") gave ", show(w), ", expected ",
           show(c.expected));
  }
  // most_frequent_pair: weights, ties, nothing to merge.
  struct PairCase {
    std::vector<Word> words;
    std::vector<std::uint64_t> counts;
    std::pair<std::uint32_t, std::uint32_t> expected;
  };
  const std::uint32_t none = student::kNoPair;
  const std::vector<PairCase> pairs = {
      {{{1, 2}, {3, 4}}, {1, 1}, {1, 2}},
      {{{3, 4}, {1, 2}}, {1, 1}, {1, 2}},
      {{{1, 2}, {5, 6}}, {1, 3}, {5, 6}},
      {{{7, 7, 7}, {1, 2}}, {1, 1}, {7, 7}},
      {{{2, 1}, {1, 3}}, {2, 2}, {1, 3}},
      {{{1}, {}}, {5, 5}, {none, none}},
  };
  for (const PairCase& c : pairs) {
    const auto got = most_frequent_pair(c.words, c.counts);
    if (got != c.expected) {
      std::string words;
      for (std::size_t w = 0; w < c.words.size(); ++w)
        words += (w ? ", " : "") + show(c.words[w]) + " x" + std::to_string(c.counts[w]);
      fail("most_frequent_pair(", words, ") gave (", got.first, ", ", got.second, "), expected (", c.expected.first,
           ", ", c.expected.second, ")");
    }
  }

  // The whole training run, step by step, against Bpe::train_words.
  using namespace brrr::tokenizer;
  const std::string text = bpe_text();
  const SplitPattern pattern{std::string(kGpt2Pattern)};
  const WordCounts counts = count_words(text, pattern, {}, 1);
  TrainOptions options;
  options.vocab_size = 256 + 300;
  options.special_tokens = {};
  options.threads = 1;
  TrainStats stats;
  Bpe::train_words(counts, options, &stats);

  std::vector<Word> words;  // every word starts as its bytes: token b is byte b
  for (const std::string& w : counts.words) {
    words.emplace_back();
    for (char c : w) words.back().push_back(static_cast<unsigned char>(c));
  }
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  std::size_t made = 0, step = 0;
  while (made < 300) {
    const auto [a, b] = most_frequent_pair(words, counts.counts);
    if (a == none) break;
    if (step >= stats.history.size())
      fail("merge ", step, ": you merged (", a, ", ", b, ") but the trainer had stopped: no pair is left to merge");
    const MergeRecord& want = stats.history[step];
    if (a != want.left || b != want.right)
      fail("merge ", step, ": you merged (", a, ", ", b, "), the trainer (", want.left, ", ", want.right, ") seen ",
           want.count, " times");
    // The new token, or the one that already has these bytes (an "alias" merge, bpe.h).
    const std::string merged = bytes[a] + bytes[b];
    std::uint32_t token = static_cast<std::uint32_t>(std::find(bytes.begin(), bytes.end(), merged) - bytes.begin());
    if (token == bytes.size()) {
      bytes.push_back(merged);
      ++made;
    }
    if (token != want.id) fail("merge ", step, ": (", a, ", ", b, ") became token ", token, ", the trainer's ", want.id);
    for (Word& w : words) merge_pair(w, a, b, token);
    ++step;
  }
  if (step != stats.history.size())
    fail("after ", step, " merges you found no pair left, but the trainer made ", stats.history.size());
  std::ostringstream m;
  m << step << " merges on " << text.size() << " bytes of text match Bpe::train_words";
  return result(Status::Passing, m.str());
}
}  // namespace

Result grade_bpe_merge_variant(const std::string& variant) {
#if BRRR_EXERCISE_SOLUTIONS
  if (variant == "solution") return check_bpe_merge(&solution::most_frequent_pair, &solution::merge_pair);
#endif
  return check_bpe_merge(&student::most_frequent_pair, &student::merge_pair);
}

Result grade_bpe_merge(MostFrequentPairFn most_frequent_pair, MergePairFn merge_pair) {
  return guarded("ex06.1", [&] { return check_bpe_merge(most_frequent_pair, merge_pair); });
}

}  // namespace brrr::exercises
