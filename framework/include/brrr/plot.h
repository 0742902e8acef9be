// brrr/plot.h: small PNG plots (loss curves, decision boundaries, heat maps), with no
// dependency beyond stb_image_write.
// Chapter 05 (the first MLP) introduces it; chapter 08 plots loss curves and attention maps.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brrr::plot {

struct Color {
  std::uint8_t r, g, b;
};

// An RGB image you can draw on, then save as PNG (atomically).
class Canvas {
 public:
  Canvas(int width, int height, Color background = {255, 255, 255});
  int width() const { return width_; }
  int height() const { return height_; }
  void set(int x, int y, Color c);
  void fill_rect(int x0, int y0, int x1, int y1, Color c);
  void line(double x0, double y0, double x1, double y1, Color c, int thickness = 1);
  void circle(int cx, int cy, int radius, Color c);
  // Text in stb_easy_font's 5x7 pixel font, scaled by `scale`.
  void text(int x, int y, const std::string& s, Color c, int scale = 1);
  static int text_width(const std::string& s, int scale = 1);
  void save_png(const std::string& path) const;

 private:
  int width_, height_;
  std::vector<std::uint8_t> pixels_;
};

struct Series {
  std::string label;
  std::vector<double> x, y;
  Color color;
};

struct LinePlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label = "loss";
  bool log_y = false;
  int width = 800, height = 500;
};

// Lines with axes, ticks and a legend.
void line_plot(const std::string& path, const std::vector<Series>& series, const LinePlotOptions& options);

// A 2-D classifier's view: `classes` (rows x cols, row 0 at the top) painted as the
// background over the box [x_min, x_max] x [y_min, y_max], and labelled points on top.
void decision_boundary(const std::string& path, const std::vector<int>& classes, int rows, int cols, double x_min,
                       double x_max, double y_min, double y_max, const std::vector<double>& px,
                       const std::vector<double>& py, const std::vector<int>& labels, const std::string& title);

// A matrix as a heat map (white = low, dark = high), e.g. one head's attention weights.
void heatmap(const std::string& path, const std::vector<double>& values, int rows, int cols, const std::string& title,
             const std::vector<std::string>& row_labels = {}, const std::vector<std::string>& col_labels = {});

Color palette(int i);  // distinct colours for series and classes

}  // namespace brrr::plot
