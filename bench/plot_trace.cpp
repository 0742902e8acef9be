// bench/plot_trace.cpp: draw one training step of a brrr trace as a PNG (chapter 08): the
// timeline that ui.perfetto.dev shows, as a picture for the chapter.
//   build/bench/plot_trace TRACE.json OUT.png [STEP]
// TRACE.json is what `brrr train --profile_trace` or `bench_gpt_step --trace` write
// (brrr/profiler.h); STEP is the name of the slice to draw ("step 2"), by default the last one.
// One row per nesting level under the step: forward ops blue, backward orange, the optimizer
// green; each slice labelled with its op's name where it is wide enough.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "brrr/io.h"
#include "brrr/plot.h"

namespace {
struct Slice {
  std::string name, category;
  double start, end;  // microseconds
  int level = 0;      // 0: directly under the step
};
brrr::plot::Color color_of(const std::string& category) {
  if (category == "backward") return {230, 140, 60};
  if (category == "optimizer") return {90, 170, 90};
  return {70, 120, 200};
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: plot_trace TRACE.json OUT.png [STEP]\n");
    return 2;
  }
  try {
    const nlohmann::json trace = nlohmann::json::parse(brrr::read_file(argv[1]));
    std::vector<Slice> all, steps;
    for (const auto& e : trace.at("traceEvents")) {
      if (e.at("ph") != "X" || e.at("tid") != 0) continue;  // the host thread that trains
      const double ts = e.at("ts").get<double>();
      Slice s{e.at("name").get<std::string>(), e.at("cat").get<std::string>(), ts, ts + e.at("dur").get<double>()};
      (s.category == "step" && s.name.starts_with("step ") ? steps : all).push_back(s);
    }
    if (steps.empty()) {
      std::fprintf(stderr, "plot_trace: %s has no \"step N\" slice\n", argv[1]);
      return 1;
    }
    const Slice* step = &steps.back();
    if (argc > 3) {
      const auto it = std::find_if(steps.begin(), steps.end(), [&](const Slice& s) { return s.name == argv[3]; });
      if (it == steps.end()) {
        std::fprintf(stderr, "plot_trace: %s has no slice named '%s'\n", argv[1], argv[3]);
        return 1;
      }
      step = &*it;
    }
    // The step's ops, each one level below the innermost op that encloses it.
    std::vector<Slice> ops;
    for (const Slice& s : all)
      if (s.start >= step->start && s.end <= step->end) ops.push_back(s);
    std::sort(ops.begin(), ops.end(), [](const Slice& a, const Slice& b) {
      return a.start != b.start ? a.start < b.start : a.end > b.end;
    });
    std::vector<const Slice*> open;
    int levels = 1;
    for (Slice& s : ops) {
      while (!open.empty() && open.back()->end <= s.start) open.pop_back();
      s.level = static_cast<int>(open.size());
      levels = std::max(levels, s.level + 1);
      open.push_back(&s);
    }
    const int width = 1200, left = 20, right = 20, top = 40, row = 26, bottom = 40;
    brrr::plot::Canvas image(width, top + row * (levels + 1) + bottom);
    const double span = std::max(step->end - step->start, 1.0);
    const auto x_of = [&](double t) { return left + static_cast<int>((t - step->start) / span * (width - left - right)); };
    char title[200];
    std::snprintf(title, sizeof title, "%s: %.2f ms, %zu ops (blue forward, orange backward, green optimizer)",
                  step->name.c_str(), span / 1e3, ops.size());
    image.text(left, 12, title, {0, 0, 0}, 2);
    image.fill_rect(x_of(step->start), top, x_of(step->end), top + row - 2, {150, 150, 150});
    image.text(x_of(step->start) + 4, top + 7, step->name, {255, 255, 255}, 1);
    for (const Slice& s : ops) {
      const int x0 = x_of(s.start), x1 = std::max(x_of(s.end), x0 + 1), y0 = top + row * (s.level + 1);
      image.fill_rect(x0, y0, x1 - 1 > x0 ? x1 - 1 : x1, y0 + row - 2, color_of(s.category));  // a gap between neighbours
      if (x1 - x0 > brrr::plot::Canvas::text_width(s.name) + 6) image.text(x0 + 3, y0 + 7, s.name, {255, 255, 255}, 1);
    }
    const int axis_y = top + row * (levels + 1) + 8;
    image.line(left, axis_y, width - right, axis_y, {0, 0, 0});
    for (int i = 0; i <= 10; ++i) {
      const double t = step->start + span * i / 10;
      const int x = x_of(t);
      image.line(x, axis_y, x, axis_y + 5, {0, 0, 0});
      char label[32];
      std::snprintf(label, sizeof label, "%.1f ms", (t - step->start) / 1e3);
      image.text(std::min(x, width - right - brrr::plot::Canvas::text_width(label)), axis_y + 10, label, {0, 0, 0}, 1);
    }
    image.save_png(argv[2]);
    std::printf("plot_trace: %s, %zu ops on %d levels -> %s\n", step->name.c_str(), ops.size(), levels, argv[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plot_trace: %s\n", e.what());
    return 1;
  }
  return 0;
}
