// tokenizer/src/hf_tokenizer.cpp: Hugging Face's byte-level BPE read from its files, encoding and
// decoding as tokenizers does. Chapter 08 (training: "Pretrained models").
// Read before: brrr/tokenizer/hf_tokenizer.h.
#include "brrr/tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <limits>
#include <sstream>
#include <nlohmann/json.hpp>

#include "brrr/error.h"
#include "brrr/io.h"

namespace brrr::tokenizer {

namespace fs = std::filesystem;

namespace {

// GPT-2's bytes_to_unicode (encoder.py): the 188 printable bytes ('!'..'~', '¡'..'¬', '®'..'ÿ')
// stand for themselves; the other 68, in order, become U+0100, U+0101, ...
std::array<std::uint32_t, 256> make_byte_codepoints() {
  std::array<std::uint32_t, 256> cp{};
  std::uint32_t next = 256;
  for (std::uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cp[b] = printable ? b : next++;
  }
  return cp;
}

std::string utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

const std::array<std::string, 256>& byte_chars() {
  static const std::array<std::string, 256> chars = [] {
    std::array<std::string, 256> c;
    const auto cp = make_byte_codepoints();
    for (int b = 0; b < 256; ++b) c[b] = utf8(cp[b]);
    return c;
  }();
  return chars;
}

// The inverse: the byte each of those characters stands for (by code point; -1 if none).
int char_to_byte(std::uint32_t cp) {
  static const std::vector<int> table = [] {
    std::vector<int> t(512, -1);
    const auto cps = make_byte_codepoints();
    for (int b = 0; b < 256; ++b) t[cps[b]] = b;
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

nlohmann::json parse_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    detail::fail(path, ": invalid JSON: ", e.what());
  }
}

}  // namespace

std::string byte_to_unicode(unsigned char b) { return byte_chars()[b]; }

std::unique_ptr<HfTokenizer> HfTokenizer::from_folder(const std::string& dir) {
  const fs::path d(dir);
  if (fs::exists(d / "tokenizer.json")) return from_tokenizer_json((d / "tokenizer.json").string());
  if (fs::exists(d / "vocab.json") && fs::exists(d / "merges.txt"))
    return from_vocab_merges((d / "vocab.json").string(), (d / "merges.txt").string());
  detail::fail(dir, ": no tokenizer (tokenizer.json, or vocab.json and merges.txt)");
}

std::unique_ptr<HfTokenizer> HfTokenizer::from_tokenizer_json(const std::string& path) {
  const nlohmann::json j = parse_json(path);
  BRRR_CHECK(j.is_object() && j.contains("model") && j["model"].is_object(), path, ": no \"model\" object");
  const nlohmann::json& m = j["model"];
  const std::string type = m.value("type", std::string("BPE"));
  BRRR_CHECK(type == "BPE", path, ": model type '", type, "'; brrr reads byte-level BPE tokenizers only");
  BRRR_CHECK(!j.contains("normalizer") || j["normalizer"].is_null(), path,
             ": has a normalizer (", j["normalizer"].dump(), "); GPT-2's byte-level BPE has none");
  BRRR_CHECK(j.contains("pre_tokenizer") && j["pre_tokenizer"].is_object() &&
                 j["pre_tokenizer"].value("type", std::string()) == "ByteLevel",
             path, ": pre_tokenizer is not ByteLevel (", j.value("pre_tokenizer", nlohmann::json()).dump(),
             "); brrr reads GPT-2's byte-level BPE only");
  const nlohmann::json& pre = j["pre_tokenizer"];
  BRRR_CHECK(!pre.value("add_prefix_space", false), path, ": pre_tokenizer.add_prefix_space is true; brrr implements only false (GPT-2's)");
  BRRR_CHECK(pre.value("use_regex", true), path, ": pre_tokenizer.use_regex is false; brrr implements only true (GPT-2's)");
  BRRR_CHECK(!m.value("byte_fallback", false), path, ": model.byte_fallback is true; not a byte-level BPE setting brrr implements");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"})
    BRRR_CHECK(!m.contains(key) || m[key].is_null() || m[key] == "", path, ": model.", key, " is ", m[key].dump(),
               "; brrr implements only null");
  BRRR_CHECK(m.contains("vocab") && m["vocab"].is_object(), path, ": model.vocab is not an object");
  BRRR_CHECK(m.contains("merges") && m["merges"].is_array(), path, ": model.merges is not a list");

  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  t->ignore_merges_ = m.value("ignore_merges", false);
  for (const auto& [token, id] : m["vocab"].items()) {
    BRRR_CHECK(id.is_number_unsigned() && id.get<std::uint64_t>() < std::numeric_limits<std::uint32_t>::max(), path,
               ": the id of token '", token, "' is ", id.dump(), ", not a non-negative integer");
    t->vocab_[token] = id.get<std::uint32_t>();
  }
  for (const auto& merge : m["merges"]) {
    // "Ġ t" (tokenizers before 0.20) or ["Ġ", "t"] (0.20 on).
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const std::size_t space = s.find(' ');
      BRRR_CHECK(space != std::string::npos && space > 0 && space + 1 < s.size() && s.find(' ', space + 1) == std::string::npos,
                 path, ": merge '", s, "' is not two tokens separated by one space");
      t->merges_.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      BRRR_CHECK(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(), path, ": merge ",
                 merge.dump(), " is not a pair of tokens");
      t->merges_.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    BRRR_CHECK(j["added_tokens"].is_array(), path, ": added_tokens is not a list");
    for (const auto& a : j["added_tokens"]) {
      BRRR_CHECK(a.is_object() && a.contains("id") && a["id"].is_number_unsigned() && a.contains("content") &&
                     a["content"].is_string() && !a["content"].get<std::string>().empty(),
                 path, ": added token ", a.dump(), " needs an id and a non-empty content");
      for (const char* key : {"lstrip", "rstrip", "single_word"})
        BRRR_CHECK(!a.value(key, false), path, ": added token '", a["content"].get<std::string>(), "' has ", key,
                   " true; brrr implements only false");
      t->added_.push_back(a["content"].get<std::string>());
      t->added_ids_.push_back(a["id"].get<std::uint32_t>());
    }
  }
  t->finish(path);
  return t;
}

std::unique_ptr<HfTokenizer> HfTokenizer::from_vocab_merges(const std::string& vocab_path, const std::string& merges_path) {
  const nlohmann::json v = parse_json(vocab_path);
  BRRR_CHECK(v.is_object(), vocab_path, ": expected a JSON object of token -> id");
  std::unique_ptr<HfTokenizer> t(new HfTokenizer());
  for (const auto& [token, id] : v.items()) {
    BRRR_CHECK(id.is_number_unsigned() && id.get<std::uint64_t>() < std::numeric_limits<std::uint32_t>::max(), vocab_path,
               ": the id of token '", token, "' is ", id.dump(), ", not a non-negative integer");
    t->vocab_[token] = id.get<std::uint32_t>();
  }
  std::istringstream lines(read_file(merges_path));
  std::string line;
  for (std::size_t number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0)) continue;
    const std::size_t space = line.find(' ');
    BRRR_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size(), merges_path, ":", number, ": '", line,
               "' is not two tokens separated by a space");
    t->merges_.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  // GPT2Tokenizer's one special token, when the vocabulary has it.
  if (auto it = t->vocab_.find("<|endoftext|>"); it != t->vocab_.end()) {
    t->added_.push_back(it->first);
    t->added_ids_.push_back(it->second);
  }
  t->finish(vocab_path);
  return t;
}

void HfTokenizer::finish(const std::string& label) {
  std::uint32_t largest = 0;
  for (const auto& [token, id] : vocab_) largest = std::max(largest, id);
  for (std::uint32_t id : added_ids_) largest = std::max(largest, id);
  BRRR_CHECK(!vocab_.empty(), label, ": the vocabulary is empty");
  id_to_token_.assign(largest + 1, "");
  is_added_.assign(largest + 1, false);
  for (const auto& [token, id] : vocab_) {
    BRRR_CHECK(id_to_token_[id].empty(), label, ": id ", id, " is given to both '", id_to_token_[id], "' and '", token, "'");
    id_to_token_[id] = token;
  }
  for (std::size_t i = 0; i < added_.size(); ++i) {
    const std::uint32_t id = added_ids_[i];
    BRRR_CHECK(id_to_token_[id].empty() || id_to_token_[id] == added_[i], label, ": added token '", added_[i], "' has id ",
               id, ", which the vocabulary gives to '", id_to_token_[id], "'");
    id_to_token_[id] = added_[i];
    is_added_[id] = true;
  }
  for (std::size_t rank = 0; rank < merges_.size(); ++rank) {
    const auto& [a, b] = merges_[rank];
    const auto ia = vocab_.find(a), ib = vocab_.find(b), iab = vocab_.find(a + b);
    BRRR_CHECK(ia != vocab_.end() && ib != vocab_.end() && iab != vocab_.end(), label, ": merge ", rank, " ('", a, "' '", b,
               "') uses or makes a token the vocabulary lacks");
    merge_of_.emplace(std::make_pair(ia->second, ib->second), std::make_pair(static_cast<std::uint32_t>(rank), iab->second));
  }
  split_ = std::make_unique<SplitPattern>(std::string(kHfGpt2Pattern));
}

void HfTokenizer::encode_piece(std::string_view piece, std::vector<std::uint32_t>* out) const {
  const auto& chars = byte_chars();
  if (ignore_merges_) {  // a piece that is a whole token is taken as it is
    std::string whole;
    for (unsigned char b : piece) whole += chars[b];
    if (auto it = vocab_.find(whole); it != vocab_.end()) return out->push_back(it->second);
  }
  // One symbol a byte (a byte missing from the vocabulary is dropped, as tokenizers does with no unk_token).
  std::vector<std::uint32_t> symbols;
  symbols.reserve(piece.size());
  for (unsigned char b : piece)
    if (auto it = vocab_.find(chars[b]); it != vocab_.end()) symbols.push_back(it->second);
  // Merge the adjacent pair of lowest rank, the leftmost on a tie, until no pair has a merge.
  for (;;) {
    std::uint32_t best_rank = std::numeric_limits<std::uint32_t>::max(), merged = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merge_of_.find({symbols[i], symbols[i + 1]});
      if (it != merge_of_.end() && it->second.first < best_rank) best_rank = it->second.first, merged = it->second.second, at = i;
    }
    if (best_rank == std::numeric_limits<std::uint32_t>::max()) break;
    symbols[at] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  out->insert(out->end(), symbols.begin(), symbols.end());
}

std::vector<std::uint32_t> HfTokenizer::encode(std::string_view text) const {
  std::vector<std::uint32_t> ids;
  Splitter splitter(*split_);
  for (const Segment& seg : find_special_tokens(text, added_)) {
    if (seg.special >= 0) {
      ids.push_back(added_ids_[static_cast<std::size_t>(seg.special)]);
      continue;
    }
    splitter.start(text.substr(seg.begin, seg.end - seg.begin));
    std::string_view piece;
    while (splitter.next(&piece)) encode_piece(piece, &ids);
  }
  return ids;
}

std::string HfTokenizer::decode(std::span<const std::uint32_t> ids) const {
  std::string out;
  for (std::uint32_t id : ids) {
    BRRR_CHECK(id < id_to_token_.size() && !id_to_token_[id].empty(), "decode: id ", id, " is not in the vocabulary (",
               id_to_token_.size(), " ids)");
    const std::string& token = id_to_token_[id];
    if (is_added_[id]) {
      out += token;
      continue;
    }
    // Each character stands for one byte.
    for (std::size_t i = 0; i < token.size();) {
      const unsigned char c = static_cast<unsigned char>(token[i]);
      std::uint32_t cp = c;
      std::size_t n = 1;
      if (c >= 0xC0 && c < 0xE0 && i + 1 < token.size()) cp = ((c & 0x1Fu) << 6) | (token[i + 1] & 0x3F), n = 2;
      const int b = n == 2 || c < 0x80 ? char_to_byte(cp) : -1;
      if (b >= 0) {
        out += static_cast<char>(b);
        i += n;
      } else {  // not a byte character (a token added to the vocabulary as text): as it is
        out += token[i];
        i += 1;
      }
    }
  }
  return out;
}

void HfTokenizer::save(const std::string& path) const { write_file_atomic(path, to_hf_json()); }

std::optional<std::uint32_t> HfTokenizer::special_token(std::string_view text) const {
  for (std::size_t i = 0; i < added_.size(); ++i)
    if (added_[i] == text) return added_ids_[i];
  if (const auto it = vocab_.find(std::string(text)); it != vocab_.end()) return it->second;
  return std::nullopt;
}

std::string HfTokenizer::to_hf_json() const {
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < added_.size(); ++i)
    added.push_back({{"id", added_ids_[i]}, {"content", added_[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (std::uint32_t id = 0; id < id_to_token_.size(); ++id)
    if (!id_to_token_[id].empty() && vocab_.count(id_to_token_[id])) vocab[id_to_token_[id]] = id;
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (const auto& [a, b] : merges_) merges.push_back(a + " " + b);
  const nlohmann::ordered_json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", ignore_merges_},
        {"vocab", vocab}, {"merges", merges}}},
  };
  return j.dump(2) + "\n";
}

}  // namespace brrr::tokenizer
