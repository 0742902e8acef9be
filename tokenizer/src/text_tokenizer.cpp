// tokenizer/src/text_tokenizer.cpp: TextTokenizer over CharTokenizer and Bpe. Chapter 08.
#include "brrr/tokenizer/text_tokenizer.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/char_tokenizer.h"
#include "brrr/tokenizer/hf_tokenizer.h"

namespace brrr::tokenizer {

namespace {

class CharText final : public TextTokenizer {
 public:
  explicit CharText(CharTokenizer t) : t_(std::move(t)) {}
  std::vector<std::uint32_t> encode(std::string_view text) const override { return t_.encode(text); }
  std::string decode(std::span<const std::uint32_t> ids) const override { return t_.decode(ids); }
  std::size_t vocab_size() const override { return t_.vocab_size(); }
  std::string kind() const override { return "char"; }
  void save(const std::string& path) const override { t_.save(path); }
  std::string to_hf_json() const override { return hf_tokenizer_json(t_); }
  std::optional<std::uint32_t> special_token(std::string_view) const override { return std::nullopt; }

 private:
  CharTokenizer t_;
};

class BpeText final : public TextTokenizer {
 public:
  explicit BpeText(Bpe t) : t_(std::move(t)) {}
  std::vector<std::uint32_t> encode(std::string_view text) const override { return t_.encode_parallel(text); }
  std::string decode(std::span<const std::uint32_t> ids) const override { return t_.decode(ids); }
  std::size_t vocab_size() const override { return t_.vocab_size(); }
  std::string kind() const override { return "bpe"; }
  void save(const std::string& path) const override { t_.save(path); }
  std::string to_hf_json() const override { return hf_tokenizer_json(t_); }
  std::optional<std::uint32_t> special_token(std::string_view text) const override {
    for (std::size_t i = 0; i < t_.special_tokens().size(); ++i)
      if (t_.special_tokens()[i] == text) return t_.special_ids()[i];
    return std::nullopt;
  }

 private:
  Bpe t_;
};

}  // namespace

std::unique_ptr<TextTokenizer> TextTokenizer::train(const std::string& kind, std::string_view text, int vocab_size,
                                                    bool verbose) {
  if (kind == "char") return std::make_unique<CharText>(CharTokenizer::from_text(text));
  BRRR_CHECK(kind == "bpe", "unknown tokenizer '", kind, "' (expected char or bpe)");
  TrainOptions options;
  options.vocab_size = static_cast<std::size_t>(vocab_size);
  if (verbose)
    options.progress = [terminal = ::isatty(STDERR_FILENO) != 0, tenth = std::size_t{0}](const TrainProgress& p) mutable {
      const bool done = p.merges_done == p.merges_total;
      if (terminal) {  // redrawn in place
        std::fprintf(stderr, "\rtraining BPE: %zu/%zu merges%s", p.merges_done, p.merges_total, done ? "\n" : "");
        return;
      }
      // Into a file or a pipe: a plain line at every tenth of the way, and at the end.
      const std::size_t now = p.merges_total ? 10 * p.merges_done / p.merges_total : 10;
      if (now > tenth || done) {
        tenth = now;
        std::fprintf(stderr, "training BPE: %zu/%zu merges\n", p.merges_done, p.merges_total);
      }
    };
  return std::make_unique<BpeText>(Bpe::train(text, options));
}

std::unique_ptr<TextTokenizer> TextTokenizer::load(const std::string& path) {
  std::ifstream in(path);
  BRRR_CHECK(in.good(), "cannot read tokenizer '", path, "'");
  std::string first;
  std::getline(in, first);
  if (first.rfind("brrr-char", 0) == 0) return std::make_unique<CharText>(CharTokenizer::load(path));
  if (first.rfind("brrr-bpe", 0) == 0) return std::make_unique<BpeText>(Bpe::load(path));
  if (first.rfind("{", 0) == 0) return HfTokenizer::from_tokenizer_json(path);  // Hugging Face's tokenizer.json
  detail::fail("'", path, "' is not a brrr tokenizer file (first line '", first, "')");
}

}  // namespace brrr::tokenizer
