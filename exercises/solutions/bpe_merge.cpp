// exercises/solutions/bpe_merge.cpp: the reference solution of exercise ex06.1, one BPE
// merge step (chapter 06). The student's file is exercises/student/bpe_merge.cpp.
#include <map>

#include "exercises/solutions/solutions.h"

namespace brrr::solution {

std::pair<std::uint32_t, std::uint32_t> most_frequent_pair(const std::vector<std::vector<std::uint32_t>>& words,
                                                           const std::vector<std::uint64_t>& counts) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> pair_counts;
  for (std::size_t w = 0; w < words.size(); w++)
    for (std::size_t i = 0; i + 1 < words[w].size(); i++) pair_counts[{words[w][i], words[w][i + 1]}] += counts[w];
  // The map iterates in (left, right) order and only a strictly larger count replaces the
  // best, so a tie goes to the smaller pair.
  std::pair<std::uint32_t, std::uint32_t> best{0xFFFFFFFFu, 0xFFFFFFFFu};
  std::uint64_t best_count = 0;
  for (const auto& [pair, count] : pair_counts)
    if (count > best_count) best = pair, best_count = count;
  return best;
}

void merge_pair(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id) {
  std::vector<std::uint32_t> out;
  out.reserve(word.size());
  for (std::size_t i = 0; i < word.size(); i++) {
    if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
      out.push_back(id);
      i++;  // both tokens are used up: "a a a" with (a, a) gives "aa a"
    } else {
      out.push_back(word[i]);
    }
  }
  word = std::move(out);
}

}  // namespace brrr::solution
