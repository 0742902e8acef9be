// tokenizer/src/hf_export.cpp: brrr's tokenizers written as Hugging Face tokenizer.json text.
// Chapter 08 (training: "Pretrained models"). Read before: brrr/tokenizer/hf_tokenizer.h
// (hf_tokenizer_json says why the merge list holds every pair, not one per token).
#include <nlohmann/json.hpp>

#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/char_tokenizer.h"
#include "brrr/tokenizer/hf_tokenizer.h"

namespace brrr::tokenizer {

namespace {

nlohmann::ordered_json added_token(std::uint32_t id, const std::string& content) {
  return {{"id", id},        {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false}, {"normalized", false}, {"special", true}};
}

nlohmann::ordered_json bpe_model(const nlohmann::ordered_json& vocab, const nlohmann::ordered_json& merges, bool ignore_merges) {
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", nullptr},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", false},
          {"byte_fallback", false},
          {"ignore_merges", ignore_merges},
          {"vocab", vocab},
          {"merges", merges}};
}

}  // namespace

std::string hf_tokenizer_json(const Bpe& bpe) {
  // GPT-2's pattern is the only one Hugging Face's ByteLevel pre-tokenizer applies.
  BRRR_CHECK(bpe.pattern() == kGpt2Pattern || bpe.pattern() == kHfGpt2Pattern,
             "export: this BPE splits with the pattern ", bpe.pattern(),
             "; Hugging Face's byte-level BPE splits with GPT-2's only");
  auto text = [](const std::string& bytes) {
    std::string s;
    for (unsigned char b : bytes) s += byte_to_unicode(b);
    return s;
  };
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object(), merges = nlohmann::ordered_json::array();
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (std::uint32_t id = 0; id < bpe.vocab_size(); ++id) {
    const Token& t = bpe.token(id);
    if (t.kind == Token::kSpecial) {
      added.push_back(added_token(id, t.bytes));
      continue;
    }
    vocab[text(t.bytes)] = id;
    // Every way the token's bytes split into two tokens, in id order of the result.
    for (std::size_t k = 1; k < t.bytes.size(); ++k) {
      const std::uint32_t x = bpe.find_token(std::string_view(t.bytes).substr(0, k));
      const std::uint32_t y = bpe.find_token(std::string_view(t.bytes).substr(k));
      if (x != kNoToken && y != kNoToken) merges.push_back({text(bpe.token(x).bytes), text(bpe.token(y).bytes)});
    }
  }
  const nlohmann::ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  const nlohmann::ordered_json j = {{"version", "1.0"},      {"truncation", nullptr},    {"padding", nullptr},
                                    {"added_tokens", added}, {"normalizer", nullptr},    {"pre_tokenizer", byte_level},
                                    {"post_processor", nullptr}, {"decoder", byte_level}, {"model", bpe_model(vocab, merges, true)}};
  return j.dump(2) + "\n";
}

std::string hf_tokenizer_json(const CharTokenizer& chars) {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (std::uint32_t id = 0; id < chars.vocab_size(); ++id) vocab[chars.chars()[id]] = id;
  const nlohmann::ordered_json j = {{"version", "1.0"},
                                    {"truncation", nullptr},
                                    {"padding", nullptr},
                                    {"added_tokens", nlohmann::ordered_json::array()},
                                    {"normalizer", nullptr},
                                    {"pre_tokenizer", nullptr},
                                    {"post_processor", nullptr},
                                    {"decoder", {{"type", "Fuse"}}},
                                    {"model", bpe_model(vocab, nlohmann::ordered_json::array(), false)}};
  return j.dump(2) + "\n";
}

}  // namespace brrr::tokenizer
