// tokenizer/src/bpe.cpp: the vocabulary: checking it, the lookup tables, decoding.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/bpe.h. Read next: bpe_naive.cpp
// (the slow trainer and encoder), then bpe_train.cpp and bpe_encode.cpp (the fast ones).
#include <string>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"

namespace brrr::tokenizer {

// ----------------------------------------------------------------------------
// Checking a vocabulary

// Throws unless `tokens` is a vocabulary brrr can encode with: every byte value is one
// kByte token, every kMerge token is made of two earlier ordinary tokens and has their
// bytes, no two ordinary tokens share bytes, special tokens are non-empty and distinct.
// The file loaders check the same things line by line, with line numbers.
static void check_tokens(const std::vector<Token>& tokens) {
  BRRR_CHECK(tokens.size() < kNoToken, "Bpe: ", tokens.size(), " tokens is too many");
  std::vector<int> byte_seen(256, -1);
  BytesMap<uint32_t> ordinary, special;
  for (uint32_t id = 0; id < tokens.size(); id++) {
    const Token& t = tokens[id];
    uint64_t h = hash_bytes(t.bytes);
    switch (t.kind) {
      case Token::kByte: {
        BRRR_CHECK(t.bytes.size() == 1, "Bpe: byte token ", id, " has ", t.bytes.size(),
                   " bytes, expected 1");
        unsigned char b = static_cast<unsigned char>(t.bytes[0]);
        BRRR_CHECK(byte_seen[b] < 0, "Bpe: byte ", int(b), " is both token ", byte_seen[b],
                   " and token ", id);
        byte_seen[b] = int(id);
        break;
      }
      case Token::kMerge: {
        for (uint32_t part : {t.left, t.right}) {
          BRRR_CHECK(part < id, "Bpe: merge token ", id, " is made of token ", part,
                     ", which does not come before it");
          BRRR_CHECK(tokens[part].kind != Token::kSpecial, "Bpe: merge token ", id,
                     " is made of special token ", part);
        }
        BRRR_CHECK(t.bytes == tokens[t.left].bytes + tokens[t.right].bytes, "Bpe: merge token ",
                   id, "'s bytes are not the bytes of tokens ", t.left, " and ", t.right);
        break;
      }
      case Token::kSpecial:
        BRRR_CHECK(!t.bytes.empty(), "Bpe: special token ", id, " is empty");
        BRRR_CHECK(special.find(t.bytes, h) == nullptr, "Bpe: special token ", id,
                   " appears twice");
        special(t.bytes, h) = id;
        continue;
    }
    BRRR_CHECK(ordinary.find(t.bytes, h) == nullptr, "Bpe: tokens ", *ordinary.find(t.bytes, h),
               " and ", id, " have the same bytes");
    ordinary(t.bytes, h) = id;
  }
  for (int b = 0; b < 256; b++)
    BRRR_CHECK(byte_seen[b] >= 0, "Bpe: no token for byte ", b, " (every byte needs one)");
}

// ----------------------------------------------------------------------------
// Construction: the tables encoding uses

Bpe::Bpe() {
  std::vector<Token> tokens(256);
  for (int b = 0; b < 256; b++) tokens[b] = Token{Token::kByte, kNoToken, kNoToken, std::string(1, char(b))};
  *this = Bpe(std::move(tokens), std::string(kGpt2Pattern));
}

Bpe::Bpe(std::vector<Token> tokens, std::string pattern)
    : tokens_(std::move(tokens)), pattern_(std::move(pattern)) {
  check_tokens(tokens_);
  split_ = std::make_shared<const SplitPattern>(pattern_);
  for (uint32_t id = 0; id < tokens_.size(); id++) {
    const Token& t = tokens_[id];
    if (t.kind == Token::kSpecial) {
      special_texts_.push_back(t.bytes);
      special_ids_.push_back(id);
      continue;
    }
    if (t.kind == Token::kByte) byte_token_[static_cast<unsigned char>(t.bytes[0])] = id;
    token_index_(t.bytes, hash_bytes(t.bytes)) = id;
  }
  // The pair table holds every split of every token into two tokens, not only the merge
  // that made it: rule 3 of the encoder (bpe.h) merges by concatenated bytes.
  for (uint32_t id = 0; id < tokens_.size(); id++) {
    const Token& t = tokens_[id];
    if (t.kind == Token::kSpecial) continue;
    std::string_view bytes = t.bytes;
    for (size_t cut = 1; cut < bytes.size(); cut++) {
      uint32_t left = find_token(bytes.substr(0, cut));
      uint32_t right = find_token(bytes.substr(cut));
      if (left != kNoToken && right != kNoToken) pairs_.insert(left, right, id);
    }
  }
}

uint32_t Bpe::find_token(std::string_view bytes) const {
  const uint32_t* id = token_index_.find(bytes, hash_bytes(bytes));
  return id ? *id : kNoToken;
}

// ----------------------------------------------------------------------------
// Decoding: the bytes of each token, one after another.

std::string Bpe::decode(std::span<const uint32_t> ids) const {
  size_t bytes = 0;
  for (size_t i = 0; i < ids.size(); i++) {
    BRRR_CHECK(ids[i] < tokens_.size(), "Bpe::decode: id ", ids[i], " at position ", i,
               " is outside the vocabulary of ", tokens_.size(), " tokens");
    bytes += tokens_[ids[i]].bytes.size();
  }
  std::string out;
  out.reserve(bytes);
  for (uint32_t id : ids) out += tokens_[id].bytes;
  return out;
}

}  // namespace brrr::tokenizer
