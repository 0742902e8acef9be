// tokenizer/src/bpe_naive.cpp: BPE the slow way, as a reference for the fast code.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/bpe_naive.h. Read next:
// bpe_train.cpp (training that only updates the words a merge touches) and bpe_encode.cpp.
//
// Everything here is written for clarity, not speed: std::map for pair counts (iterates in
// pair order, which gives the tie rule for free), strings concatenated to look tokens up.
#include <chrono>
#include <map>
#include <utility>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe_naive.h"

namespace brrr::tokenizer::naive {

// ----------------------------------------------------------------------------
// Training

// Replaces every (a, b) in word by id, left to right ("aaa" with (a, a) gives "aa", "a").
static void merge_in_word(std::vector<uint32_t>& word, uint32_t a, uint32_t b, uint32_t id) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < word.size(); i++) {
    if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
      out.push_back(id);
      i++;
    } else {
      out.push_back(word[i]);
    }
  }
  word = std::move(out);
}

Bpe train_words(const WordCounts& counts, const TrainOptions& options, TrainStats* stats) {
  size_t fixed = 256 + options.special_tokens.size();
  BRRR_CHECK(options.vocab_size >= fixed, "naive::train: vocab_size ", options.vocab_size,
             " is smaller than the 256 byte tokens plus ", options.special_tokens.size(),
             " special tokens");
  size_t merges_wanted = options.vocab_size - fixed;
  auto t0 = std::chrono::steady_clock::now();

  // Every word starts as its bytes; token b is byte b.
  std::vector<Token> tokens(256);
  std::map<std::string, uint32_t> token_of_bytes;
  for (int b = 0; b < 256; b++) {
    tokens[b] = Token{Token::kByte, kNoToken, kNoToken, std::string(1, char(b))};
    token_of_bytes[tokens[b].bytes] = b;
  }
  std::vector<std::vector<uint32_t>> words;
  for (const std::string& w : counts.words) {
    words.emplace_back();
    for (char c : w) words.back().push_back(static_cast<unsigned char>(c));
  }

  TrainStats local;
  size_t made = 0;
  while (made < merges_wanted) {
    // 1. Count every adjacent pair of every word, weighted by how often the word occurs.
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> pair_counts;
    for (size_t w = 0; w < words.size(); w++)
      for (size_t i = 0; i + 1 < words[w].size(); i++)
        pair_counts[{words[w][i], words[w][i + 1]}] += counts.counts[w];
    if (pair_counts.empty()) break;  // every word is a single token: nothing left to merge

    // 2. The most frequent pair; the map is in (left, right) order and only a strictly
    //    larger count replaces the best, so ties go to the smallest pair.
    auto best = pair_counts.begin();
    for (auto it = pair_counts.begin(); it != pair_counts.end(); ++it)
      if (it->second > best->second) best = it;
    auto [a, b] = best->first;

    // 3. The token it makes: new, or (rarely) one that already has these bytes.
    std::string bytes = tokens[a].bytes + tokens[b].bytes;
    uint32_t id;
    if (auto found = token_of_bytes.find(bytes); found != token_of_bytes.end()) {
      id = found->second;
      local.alias_merges++;
    } else {
      id = uint32_t(tokens.size());
      tokens.push_back(Token{Token::kMerge, a, b, bytes});
      token_of_bytes[bytes] = id;
      made++;
    }
    local.history.push_back({a, b, id, best->second});

    // 4. Merge it everywhere.
    for (auto& word : words) merge_in_word(word, a, b, id);
  }

  for (const std::string& s : options.special_tokens)
    tokens.push_back(Token{Token::kSpecial, kNoToken, kNoToken, s});
  local.merges = made;
  local.unique_words = counts.words.size();
  local.pieces = counts.pieces;
  local.merge_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (stats) *stats = std::move(local);
  return Bpe(std::move(tokens), options.pattern);
}

Bpe train(std::string_view text, const TrainOptions& options, TrainStats* stats) {
  SplitPattern pattern(options.pattern);
  WordCounts counts = count_words(text, pattern, options.special_tokens, 1);
  Bpe bpe = train_words(counts, options, stats);
  if (stats) stats->text_bytes = text.size();
  return bpe;
}

// ----------------------------------------------------------------------------
// Encoding

// tiktoken's byte_pair_merge, literally: parts are byte strings; the rank of a pair is the
// id of the token its concatenation makes.
void encode_piece(const Bpe& bpe, std::string_view piece, std::vector<uint32_t>* out) {
  if (uint32_t whole = bpe.find_token(piece); whole != kNoToken) {  // rule 2
    out->push_back(whole);
    return;
  }
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    uint32_t best_rank = kNoToken;
    size_t best = 0;
    for (size_t i = 0; i + 1 < parts.size(); i++) {
      uint32_t rank = bpe.find_token(parts[i] + parts[i + 1]);
      if (rank < best_rank) best_rank = rank, best = i;  // strict: the leftmost wins ties
    }
    if (best_rank == kNoToken) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + best + 1);
  }
  for (const std::string& p : parts) out->push_back(bpe.find_token(p));
}

std::vector<uint32_t> encode(const Bpe& bpe, std::string_view text) {
  std::vector<uint32_t> ids;
  for (const Segment& seg : find_special_tokens(text, bpe.special_tokens())) {
    if (seg.special >= 0) {
      ids.push_back(bpe.special_ids()[seg.special]);
      continue;
    }
    for (std::string_view piece :
         split(bpe.split_pattern(), text.substr(seg.begin, seg.end - seg.begin)))
      encode_piece(bpe, piece, &ids);
  }
  return ids;
}

PairMap recorded_merges(const Bpe& bpe) {
  PairMap merges;
  for (uint32_t id = 0; id < bpe.vocab_size(); id++)
    if (bpe.token(id).kind == Token::kMerge)
      merges.insert(bpe.token(id).left, bpe.token(id).right, id);
  return merges;
}

void encode_piece_with_merge_list(const Bpe& bpe, const PairMap& merges, std::string_view piece,
                                  std::vector<uint32_t>* out) {
  std::vector<uint32_t> parts;
  for (char c : piece) parts.push_back(bpe.byte_token(static_cast<unsigned char>(c)));
  while (parts.size() > 1) {
    uint32_t best_rank = kNoToken;
    size_t best = 0;
    for (size_t i = 0; i + 1 < parts.size(); i++) {
      uint32_t rank = merges.find(parts[i], parts[i + 1]);
      if (rank < best_rank) best_rank = rank, best = i;
    }
    if (best_rank == kNoToken) break;
    parts[best] = best_rank;
    parts.erase(parts.begin() + best + 1);
  }
  out->insert(out->end(), parts.begin(), parts.end());
}

}  // namespace brrr::tokenizer::naive
