// tests/plot/test_plot.cpp: brrr/plot.h (chapter 05's plots, chapter 11's roofline). Ticks are
// checked as a reader sees them, by their labels; the legend by drawing each plot twice, with
// and without it, and looking at what the legend's rectangle would hide.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "brrr/error.h"
#include "brrr/plot.h"

using namespace brrr;
using plot::Scale;

namespace {

std::vector<std::string> labels(const std::vector<plot::Tick>& ticks) {
  std::vector<std::string> out;
  for (const auto& t : ticks)
    if (!t.label.empty()) out.push_back(t.label);
  return out;
}

std::vector<double> minor_values(const std::vector<plot::Tick>& ticks) {
  std::vector<double> out;
  for (const auto& t : ticks)
    if (!t.major) out.push_back(t.value);
  return out;
}

void check_inside_and_sorted(const std::vector<plot::Tick>& ticks, double lo, double hi) {
  for (std::size_t i = 0; i < ticks.size(); ++i) {
    CHECK(ticks[i].value >= lo * (1 - 1e-9));
    CHECK(ticks[i].value <= hi * (1 + 1e-9));
    if (i) CHECK(ticks[i].value > ticks[i - 1].value);
  }
}

bool same(plot::Color a, plot::Color b) { return a.r == b.r && a.g == b.g && a.b == b.b; }

// Whether any pixel of `r` in `image` has one of the series' colours.
bool shows_data(const plot::Canvas& image, plot::Rect r, const std::vector<plot::Series>& series) {
  for (int y = r.y0; y < r.y1; ++y)
    for (int x = r.x0; x < r.x1; ++x)
      for (const auto& s : series)
        if (same(image.get(x, y), s.color)) return true;
  return false;
}

}  // namespace

TEST_CASE("log10 ticks are powers of ten labelled in real units, with 2..9 as minor ticks") {
  const auto ticks = plot::axis_ticks(1, 300, Scale::log10);
  check_inside_and_sorted(ticks, 1, 300);
  CHECK(labels(ticks) == std::vector<std::string>{"1", "10", "100"});
  CHECK(minor_values(ticks) ==
        std::vector<double>{2, 3, 4, 5, 6, 7, 8, 9, 20, 30, 40, 50, 60, 70, 80, 90, 200, 300});
  CHECK(labels(plot::axis_ticks(0.5, 2000, Scale::log10)) == std::vector<std::string>{"1", "10", "100", "1000"});
  CHECK(labels(plot::axis_ticks(0.004, 0.2, Scale::log10)) == std::vector<std::string>{"0.01", "0.1"});
  CHECK(labels(plot::axis_ticks(3e5, 2e7, Scale::log10)) == std::vector<std::string>{"1e6", "1e7"});
}

TEST_CASE("a log10 axis spanning under two decades labels its minor ticks too") {
  // A loss from 4.3 down to 1.7: no power of ten in view, so 2, 3 and 4 are labelled.
  CHECK(labels(plot::axis_ticks(1.7, 4.3, Scale::log10)) == std::vector<std::string>{"2", "3", "4"});
  // One power of ten in view: 2, 3 and 5 times the decades are labelled beside it.
  CHECK(labels(plot::axis_ticks(3, 30, Scale::log10)) == std::vector<std::string>{"3", "5", "10", "20", "30"});
  // Too narrow for even those: a linear axis's ticks, still at least two, all in range.
  const auto narrow = plot::axis_ticks(1.85, 1.95, Scale::log10);
  check_inside_and_sorted(narrow, 1.85, 1.95);
  CHECK(labels(narrow).size() >= 2);
}

TEST_CASE("a log10 axis over many decades labels every few and keeps the count readable") {
  const auto ticks = plot::axis_ticks(1e-6, 1e12, Scale::log10);
  check_inside_and_sorted(ticks, 1e-6, 1e12);
  CHECK(labels(ticks) == std::vector<std::string>{"1e-6", "0.001", "1", "1000", "1e6", "1e9", "1e12"});
}

TEST_CASE("log2 ticks are powers of two, as fractions below one: 1/8 .. 256 flop/byte") {
  const auto ticks = plot::axis_ticks(0.125, 256, Scale::log2);
  check_inside_and_sorted(ticks, 0.125, 256);
  CHECK(labels(ticks) ==
        std::vector<std::string>{"1/8", "1/4", "1/2", "1", "2", "4", "8", "16", "32", "64", "128", "256"});
  CHECK(labels(plot::axis_ticks(0.1, 3, Scale::log2)) == std::vector<std::string>{"1/8", "1/4", "1/2", "1", "2"});
}

TEST_CASE("linear ticks are 1, 2 or 5 times a power of ten apart, with minor ticks between") {
  const auto ticks = plot::axis_ticks(0, 2000, Scale::linear);
  check_inside_and_sorted(ticks, 0, 2000);
  CHECK(labels(ticks) == std::vector<std::string>{"0", "200", "400", "600", "800", "1000", "1200", "1400", "1600",
                                                  "1800", "2000"});
  CHECK(minor_values(ticks).size() == 30);  // a step of 2 is cut in 4
  // Decimals as the step needs them, no floating-point noise, no "-0".
  CHECK(labels(plot::axis_ticks(0, 0.7, Scale::linear)) ==
        std::vector<std::string>{"0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7"});
  for (const auto& l : labels(plot::axis_ticks(-1, 1, Scale::linear))) CHECK(l.rfind("-0.0", 0) != 0);
}

TEST_CASE("axis_ticks and the plots refuse what they cannot draw") {
  CHECK_THROWS_AS(plot::axis_ticks(0, 10, Scale::log10), Error);
  CHECK_THROWS_AS(plot::axis_ticks(5, 5, Scale::linear), Error);
  CHECK_THROWS_AS(plot::draw_roofline(-1, 10, {}, "t"), Error);
  CHECK_THROWS_AS(plot::draw_roofline(100, 10, {{"k", 0, 1}}, "t"), Error);
  plot::Canvas c(4, 4);
  CHECK_THROWS_AS(c.get(4, 0), Error);
}

TEST_CASE("the legend never covers data: a free corner inside, else outside the plot") {
  const plot::Color a = plot::palette(0), b = plot::palette(1);
  std::vector<double> steps, falling, rising, noise;
  for (int i = 0; i <= 100; ++i) {
    steps.push_back(i);
    falling.push_back(4.0 * std::exp(-i / 20.0) + 1);
    rising.push_back(1 + 4.0 * (1 - std::exp(-i / 20.0)));
    noise.push_back(i % 2 ? 1 : 5);  // a loss jumping every step: ink everywhere
  }
  struct Case {
    const char* what;
    std::vector<plot::Series> series;
    bool inside;
  };
  const std::vector<Case> cases{
      {"a falling loss: top right is free", {{"train", steps, falling, a}}, true},
      {"a rising curve: top left is free", {{"acc", steps, rising, a}}, true},
      {"falling and rising, crossing: a corner is still free",
       {{"train", steps, falling, a}, {"val", steps, rising, b}}, true},
      {"flat lines along the top and bottom edges: the middle of the right edge",
       {{"top", steps, std::vector<double>(101, 5.0), a}, {"falling", steps, falling, b},
        {"bottom", steps, std::vector<double>(101, 1.0), plot::palette(2)}},
       true},
      {"data everywhere: outside, to the right", {{"noisy", steps, noise, a}}, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    for (Scale y_scale : {Scale::linear, Scale::log10}) {
      const plot::LinePlotOptions o{"legend", "step", "value", y_scale};
      const plot::Figure with = plot::draw_line_plot(c.series, o);
      REQUIRE_FALSE(with.legend.empty());
      CHECK(with.legend.overlaps(with.plot_area) == c.inside);
      // Drawn without labels, so without a legend: what the legend's place shows is no data.
      std::vector<plot::Series> unlabelled = c.series;
      for (auto& s : unlabelled) s.label.clear();
      const plot::Figure without = plot::draw_line_plot(unlabelled, o);
      CHECK(without.legend.empty());
      if (c.inside) {
        CHECK(without.plot_area.x1 == with.plot_area.x1);
        CHECK_FALSE(shows_data(without.image, with.legend, c.series));
      }
    }
  }
}

TEST_CASE("the roofline marks its ridge point and keeps each kernel's label off the data") {
  // 200 GFLOP/s over 20 GB/s: the ridge at 10 flop/byte.
  const std::vector<plot::RooflinePoint> points{
      {"add (simple)", 1.0 / 12, 1.5}, {"matmul 64 (blocked)", 10.7, 40}, {"matmul 256 (blocked)", 42.7, 150}};
  const plot::Figure f = plot::draw_roofline(200, 20, points, "a roofline");
  // Axes in whole powers: 1/32 .. 256 flop/byte (down to half the add's 1/12), 0.1 .. 1000
  // GFLOP/s (half the add's 1.5, twice the peak).
  const double x0 = -5, x1 = 8, y0 = -1, y1 = 3;
  auto px = [&](double i) { return static_cast<int>(std::lround(f.plot_area.x0 + (std::log2(i) - x0) / (x1 - x0) * (f.plot_area.x1 - 1 - f.plot_area.x0))); };
  auto py = [&](double g) { return static_cast<int>(std::lround(f.plot_area.y1 - 1 - (std::log10(g) - y0) / (y1 - y0) * (f.plot_area.y1 - 1 - f.plot_area.y0))); };
  CHECK(same(f.image.get(px(10), py(200)), plot::Color{120, 120, 120}));  // the ridge's dot
  int dashes = 0;  // its dashed drop to the x axis, low down: dashes of 4 pixels, gaps of 4
  for (int y = py(5); y < py(5) + 16; ++y) dashes += same(f.image.get(px(10), y), plot::Color{120, 120, 120});
  CHECK(dashes >= 6);
  CHECK(dashes <= 10);
  for (std::size_t i = 0; i < points.size(); ++i)
    CHECK(same(f.image.get(px(points[i].intensity), py(points[i].gflops)), plot::palette(static_cast<int>(i) + 1)));
  CHECK_FALSE(f.legend.empty());
  for (const auto& p : points) {  // the legend hides no point
    const int x = px(p.intensity), y = py(p.gflops);
    CHECK_FALSE((x >= f.legend.x0 - 4 && x < f.legend.x1 + 4 && y >= f.legend.y0 - 4 && y < f.legend.y1 + 4));
  }
}

TEST_CASE("a heat map with labels and its colour bar is written, and a wrong count of values is refused") {
  const std::string path = (std::filesystem::temp_directory_path() / "brrr_test_heatmap.png").string();
  std::filesystem::remove(path);
  std::vector<double> values;
  for (int r = 0; r < 5; ++r)
    for (int k = 0; k < 5; ++k) values.push_back(k <= r ? 1.0 / (r + 1) : 0.0);  // a causal average
  plot::heatmap(path, values, 5, 5, "attention", {"a", "b", "c", "d", "e"}, {"a", "b", "c", "d", "e"});
  CHECK(std::filesystem::file_size(path) > 100);
  std::filesystem::remove(path);
  CHECK_THROWS_AS(plot::heatmap(path, values, 4, 5, "t"), Error);
}
