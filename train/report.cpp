// train/report.cpp: what a training run shows and leaves behind besides checkpoints: the
// progress line, the loss curves and one attention head's map as PNG files, and a sample.
// Chapter 08 (training). Read before: report.h.
#include "train/report.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/models/generate.h"

namespace brrr::train {

using Json = nlohmann::json;

std::string duration(double seconds) {
  char s[32];
  const long t = static_cast<long>(seconds + 0.5);
  if (t >= 3600) std::snprintf(s, sizeof s, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else std::snprintf(s, sizeof s, "%ldm%02lds", t / 60, t % 60);
  return s;
}

void progress_bar(std::int64_t step, std::int64_t total, double eta) {
  if (!::isatty(STDOUT_FILENO)) return;
  const int width = 30, filled = total ? static_cast<int>(width * step / total) : width;
  std::printf("\r[%s%s] %lld/%lld ETA %s ", std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
              static_cast<long long>(step), static_cast<long long>(total), duration(eta).c_str());
  std::fflush(stdout);
}

// The loss curves, from the whole log (so a resumed run shows all of it).
void plot_loss_curves(const std::string& out_dir, const std::string& preset) {
  std::vector<double> eval_steps, eval_train, eval_val, step_x, step_loss;
  {
    std::ifstream in(out_dir + "/log.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("event")) continue;
      if (j["event"] == "eval") {
        eval_steps.push_back(j["step"].get<double>());
        eval_train.push_back(j["train_loss"].get<double>());
        eval_val.push_back(j["val_loss"].get<double>());
      } else if (j["event"] == "step") {
        step_x.push_back(j["step"].get<double>());
        step_loss.push_back(j["loss"].get<double>());
      }
    }
  }
  plot::Series train_curve{"train (each step)", step_x, step_loss, plot::Color{190, 190, 230}};
  plot::Series train_eval{"train (eval)", eval_steps, eval_train, plot::palette(0)};
  plot::Series val_eval{"val (eval)", eval_steps, eval_val, plot::palette(1)};
  plot::line_plot(out_dir + "/loss.png", {train_curve, train_eval, val_eval},
                  {"brrr train: " + preset, "step", "cross-entropy loss", false});
}

// What one attention head (layer 0, head 0) looks at in a fixed sentence.
void plot_attention(const std::string& out_dir, models::GPT& model, const tokenizer::TextTokenizer& tokenizer,
                    std::int64_t block_size) {
  const std::string sentence = "ROMEO: But soft, what light through yonder window breaks?";
  std::vector<std::uint32_t> ids = tokenizer.encode(sentence);
  if (static_cast<std::int64_t>(ids.size()) > block_size) ids.resize(static_cast<std::size_t>(block_size));
  std::vector<std::int64_t> ids64(ids.begin(), ids.end());
  const Tensor att = model.attention_weights(from_vector(ids64, {1, static_cast<std::int64_t>(ids.size())}, kInt64), 0, 0);
  std::vector<std::string> labels;
  for (std::uint32_t id : ids) labels.push_back(tokenizer.decode(std::vector<std::uint32_t>{id}));
  const int n = static_cast<int>(ids.size());
  plot::heatmap(out_dir + "/attention.png", att.to_vector<double>(), n, n, "layer 0, head 0 attention", labels, labels);
  std::printf("wrote %s/loss.png and %s/attention.png\n", out_dir.c_str(), out_dir.c_str());

}

void print_sample(models::GPT& model, const tokenizer::TextTokenizer& tokenizer, std::int64_t tokens,
                  std::uint64_t seed) {
  models::GenerateOptions g;
  g.max_new_tokens = tokens;
  g.seed = seed;
  const std::vector<std::uint32_t> prompt = tokenizer.encode("\n");
  std::printf("\n--- sample (%lld tokens) ---\n", static_cast<long long>(tokens));
  models::generate(model, prompt, g, [&](std::uint32_t t) {
    std::fputs(tokenizer.decode(std::vector<std::uint32_t>{t}).c_str(), stdout);
    std::fflush(stdout);
  });
  std::printf("\n---\n");
}

}  // namespace brrr::train
