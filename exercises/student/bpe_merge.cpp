// exercises/student/bpe_merge.cpp: exercise ex06.1, one BPE merge step (chapter 06, tokenization).
// Read before: docs/chapters/06-tokenization.md ("The idea"). Try it before you read
// tokenizer/src/bpe_naive.cpp, which holds the answer inside naive::train_words.
//
// What to write: the two functions at the heart of BPE training. The grader starts from the
// bytes of every distinct word of a text and their counts, then repeats
//     (a, b) = most_frequent_pair(words, counts)      // yours
//     id     = a new token with the bytes of a and b  (or the token that already has them)
//     merge_pair(word, a, b, id) for every word        // yours
// and compares each step, pair, count and id, with the merges of the real trainer,
// Bpe::train_words (tokenizer/src/bpe_train.cpp):
//
//   build/brrr exercises check ex06.1      (or: ctest --test-dir build -L ex06.1)
//
// Requirements
//   most_frequent_pair
//   - Count every adjacent pair (words[w][i], words[w][i + 1]) of every word, each occurrence
//     weighted by counts[w] (a word seen 40 times in the text adds 40 per occurrence).
//   - Return the pair with the largest total; on a tie the smaller pair, comparing left ids
//     first, then right ids. This tie rule is what makes training reproducible.
//   - No word with two tokens: return {kNoPair, kNoPair}.
//   merge_pair
//   - Replace every occurrence of a followed by b with id, scanning left to right, and never
//     reuse a token that was just merged: "a a a" with (a, a) becomes "aa a", not "a aa".
//   - A word shorter than two tokens is left as it is.
//
// A plan
//   1. merge_pair first: build a new vector, copy tokens across, and when word[i], word[i+1]
//      are (a, b) push id and step over both. Check "a a a", "a b a b", "b a" by hand.
//   2. most_frequent_pair: a std::map<std::pair<uint32_t, uint32_t>, uint64_t> iterates in
//      (left, right) order, which gives the tie rule if only a strictly larger count
//      replaces the best so far.
//   3. Run the grader. It stops at the first step where your merge differs and prints both.
//   4. Then read bpe_train.cpp: it finds the same merges without recounting every pair of
//      every word at every step. Where would the "a a a" case break an update of the counts?
#include "exercises/student/student.h"

namespace brrr::student {

std::pair<std::uint32_t, std::uint32_t> most_frequent_pair(const std::vector<std::vector<std::uint32_t>>& words,
                                                           const std::vector<std::uint64_t>& counts) {
  // TODO(ex06.1): the most frequent adjacent pair, ties to the smaller (left, right).
  not_written("ex06.1", "bpe_merge");
}

void merge_pair(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id) {
  // TODO(ex06.1): replace every (a, b) in word by id, left to right.
  not_written("ex06.1", "bpe_merge");
}

}  // namespace brrr::student
