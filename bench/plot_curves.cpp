// bench/plot_curves.cpp: draw the evaluation curves of two or more training logs on one plot,
// and print each run's final losses and median step time (chapter 08).
//   build/bench/plot_curves OUT.png LABEL=RUN/log.jsonl [LABEL=RUN/log.jsonl ...]
// Logs are JSON lines as `brrr train` and bench/train_peer.py write them.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brrr/plot.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: plot_curves OUT.png LABEL=log.jsonl [LABEL=log.jsonl ...]\n");
    return 2;
  }
  std::vector<brrr::plot::Series> series;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::size_t eq = arg.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "plot_curves: '%s' is not LABEL=FILE\n", argv[i]);
      return 2;
    }
    const std::string label = arg.substr(0, eq), path = arg.substr(eq + 1);
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "plot_curves: cannot read '%s'\n", path.c_str());
      return 1;
    }
    brrr::plot::Series train{label + " train", {}, {}, brrr::plot::palette(2 * (i - 2))};
    brrr::plot::Series val{label + " val", {}, {}, brrr::plot::palette(2 * (i - 2) + 1)};
    std::vector<double> ms;
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("event")) continue;
      if (j["event"] == "eval") {
        train.x.push_back(j["step"].get<double>()), train.y.push_back(j["train_loss"].get<double>());
        val.x.push_back(j["step"].get<double>()), val.y.push_back(j["val_loss"].get<double>());
      } else if (j["event"] == "step" && j.contains("ms")) {
        ms.push_back(j["ms"].get<double>());
      }
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%-10s final train loss %.4f, val loss %.4f, median %.1f ms/step over %zu steps\n", label.c_str(),
                train.y.empty() ? 0.0 : train.y.back(), val.y.empty() ? 0.0 : val.y.back(),
                ms.empty() ? 0.0 : ms[ms.size() / 2], ms.size());
    series.push_back(train);
    series.push_back(val);
  }
  brrr::plot::line_plot(argv[1], series, {"training curves", "step", "cross-entropy loss"});
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
