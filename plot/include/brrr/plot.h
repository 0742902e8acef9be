// brrr/plot.h: small PNG plots (loss curves, rooflines, decision boundaries, heat maps), with
// no dependency beyond stb_image_write and brrr's base. Log axes are ticked in real units, as
// matplotlib does. It takes plain numbers, never tensors: the library sits below the framework
// (plot/CMakeLists.txt). Chapter 05 (the first MLP) introduces it; chapter 08 plots loss
// curves and attention maps, chapter 11 the roofline. Read next: plot/src/plot.cpp.
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
  Color get(int x, int y) const;  // the pixel at (x, y), which must be inside
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
  std::string label;  // shown in the legend; a series with an empty label has no entry
  std::vector<double> x, y;
  Color color;
};

// How an axis maps values to positions. On a log axis equal ratios take equal lengths and the
// ticks sit at powers of the base, labelled in the data's own units (1, 10, 100 GFLOP/s;
// 1/8, 1/4 ... 256 flop/byte), as matplotlib draws them.
enum class Scale { linear, log10, log2 };

// One tick of an axis. Major ticks carry a label and a grid line; minor ticks (2, 3 ... 9
// times a power of ten on a log10 axis, the subdivisions of a linear step) are short marks,
// labelled only where the axis spans too little for the majors to say where we are.
struct Tick {
  double value;       // in the data's units, not log units
  std::string label;  // empty for an unlabelled minor tick
  bool major;
};

// The ticks of an axis showing [lo, hi] (data units; both > 0 on a log axis), in increasing
// order, all inside [lo, hi]. Always at least two labelled ticks when lo < hi.
std::vector<Tick> axis_ticks(double lo, double hi, Scale scale);

struct Rect {
  int x0 = 0, y0 = 0, x1 = 0, y1 = 0;  // [x0, x1) x [y0, y1), in pixels
  bool empty() const { return x1 <= x0 || y1 <= y0; }
  bool overlaps(const Rect& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

struct LinePlotOptions {
  std::string title;
  std::string x_label = "step";
  std::string y_label = "loss";
  Scale y_scale = Scale::linear;  // Scale::log10 for a loss that falls over decades
  Scale x_scale = Scale::linear;
  int width = 800, height = 500;
};

// A drawn plot before it is saved: the image, the rectangle the data is drawn in, and where
// the legend went (empty when no series has a label). The legend goes in the first corner of
// the plot area where it covers no data; where every corner holds data, outside on the right.
struct Figure {
  Canvas image;
  Rect plot_area, legend;
  void save_png(const std::string& path) const { image.save_png(path); }
};

// Lines with axes, ticks and a legend. A series of one point is drawn as a dot.
Figure draw_line_plot(const std::vector<Series>& series, const LinePlotOptions& options);
void line_plot(const std::string& path, const std::vector<Series>& series, const LinePlotOptions& options);

// One measured kernel on a roofline: its arithmetic intensity and the rate it reached.
struct RooflinePoint {
  std::string label;  // the kernel, e.g. "matmul 256x256x256 (blocked)"
  double intensity;   // flop per byte moved to and from memory
  double gflops;      // GFLOP/s reached
};

// The roofline model of chapter 11 on log-log axes: the roof min(peak, bandwidth x intensity),
// the ridge point where the two meet (marked and labelled with its intensity), and each point
// as a dot labelled with its kernel.
Figure draw_roofline(double peak_gflops, double bandwidth_gbs, const std::vector<RooflinePoint>& points,
                     const std::string& title);
void roofline(const std::string& path, double peak_gflops, double bandwidth_gbs,
              const std::vector<RooflinePoint>& points, const std::string& title);

// A 2-D classifier's view: `classes` (rows x cols, row 0 at the top) painted as the
// background over the box [x_min, x_max] x [y_min, y_max], and labelled points on top.
void decision_boundary(const std::string& path, const std::vector<int>& classes, int rows, int cols, double x_min,
                       double x_max, double y_min, double y_max, const std::vector<double>& px,
                       const std::vector<double>& py, const std::vector<int>& labels, const std::string& title);

// A matrix as a heat map (white = low, dark = high) with a colour bar giving the scale, e.g.
// one head's attention weights.
void heatmap(const std::string& path, const std::vector<double>& values, int rows, int cols, const std::string& title,
             const std::vector<std::string>& row_labels = {}, const std::vector<std::string>& col_labels = {});

// Small images in a grid, each (rows x cols) values in row-major order, drawn in grey
// (white = its lowest value, black = its highest: each image scaled on its own) with a caption
// under it, e.g. misclassified digits ("7 as 1") or a conv layer's filters (chapter 09).
void image_grid(const std::string& path, const std::vector<std::vector<double>>& images, int rows, int cols,
                const std::vector<std::string>& captions, const std::string& title, int columns = 10);

Color palette(int i);  // distinct colours for series and classes

}  // namespace brrr::plot
