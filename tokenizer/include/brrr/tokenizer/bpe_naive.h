// brrr/tokenizer/bpe_naive.h: the slow, obviously correct BPE, kept as the reference.
// Chapter 06 (tokenization). Read first: bpe.h. Read next: src/bpe_naive.cpp, then the fast
// versions in src/bpe_train.cpp and src/bpe_encode.cpp, which the tests check against these.
//
// naive::train recounts every pair of every word after every merge: O(merges x symbols).
// naive::encode scans all adjacent pairs of a piece for the lowest rank, merges it and scans
// again: O(n^2) for a piece of n bytes. Both follow the same rules as the fast versions
// (bpe.h), so the results must be identical, only slower.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "brrr/tokenizer/bpe.h"

namespace brrr::tokenizer::naive {

// Trains on pre-counted words (count_words in bpe.h) by recounting all pairs each step.
Bpe train_words(const WordCounts& words, const TrainOptions& options,
                TrainStats* stats = nullptr);
Bpe train(std::string_view text, const TrainOptions& options, TrainStats* stats = nullptr);

// Encodes piece by piece with the quadratic merge loop (special tokens recognised).
std::vector<uint32_t> encode(const Bpe& bpe, std::string_view text);
void encode_piece(const Bpe& bpe, std::string_view piece, std::vector<uint32_t>* out);

// GPT-2's original rule, for comparison only: apply the recorded merges (left, right) by
// rank; a pair that only concatenates to a token, without being its recorded merge, is not
// merged, and there is no whole-piece shortcut. Differs from encode() on rare pieces.
// recorded_merges(bpe) is the table of (left, right) -> token of the recorded merges.
PairMap recorded_merges(const Bpe& bpe);
void encode_piece_with_merge_list(const Bpe& bpe, const PairMap& merges, std::string_view piece,
                                  std::vector<uint32_t>* out);

}  // namespace brrr::tokenizer::naive
