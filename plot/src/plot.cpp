// plot/src/plot.cpp: a tiny rasterizer for PNG plots, from plain numbers (no tensors).
// Chapter 05 (the first MLP). Read before: brrr/plot.h. stb_image_write encodes the PNG; stb_easy_font gives the
// glyphs (quads we fill ourselves).
#include "brrr/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "brrr/error.h"
#include "brrr/io.h"

#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stb_image_write.h>
#include <stb_easy_font.h>
#pragma GCC diagnostic pop

namespace brrr::plot {

Canvas::Canvas(int width, int height, Color bg) : width_(width), height_(height) {
  BRRR_CHECK(width > 0 && height > 0 && width <= 16384 && height <= 16384, "Canvas: invalid size ", width, " x ", height);
  pixels_.resize(static_cast<std::size_t>(width) * height * 3);
  for (std::size_t i = 0; i < pixels_.size(); i += 3) {
    pixels_[i] = bg.r;
    pixels_[i + 1] = bg.g;
    pixels_[i + 2] = bg.b;
  }
}

void Canvas::set(int x, int y, Color c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  std::uint8_t* p = &pixels_[(static_cast<std::size_t>(y) * width_ + x) * 3];
  p[0] = c.r;
  p[1] = c.g;
  p[2] = c.b;
}

Color Canvas::get(int x, int y) const {
  BRRR_CHECK(x >= 0 && y >= 0 && x < width_ && y < height_, "Canvas::get: (", x, ", ", y, ") is outside ", width_, " x ",
             height_);
  const std::uint8_t* p = &pixels_[(static_cast<std::size_t>(y) * width_ + x) * 3];
  return {p[0], p[1], p[2]};
}

void Canvas::fill_rect(int x0, int y0, int x1, int y1, Color c) {
  for (int y = std::max(0, y0); y < std::min(height_, y1); ++y)
    for (int x = std::max(0, x0); x < std::min(width_, x1); ++x) set(x, y, c);
}

void Canvas::line(double x0, double y0, double x1, double y1, Color c, int thickness) {
  const double steps = std::max(std::fabs(x1 - x0), std::fabs(y1 - y0)) + 1;
  if (!std::isfinite(steps) || steps > 1e5) return;
  const int r = thickness / 2;
  for (int i = 0; i <= static_cast<int>(steps); ++i) {
    const double t = i / steps;
    const int x = static_cast<int>(std::lround(x0 + t * (x1 - x0))), y = static_cast<int>(std::lround(y0 + t * (y1 - y0)));
    fill_rect(x - r, y - r, x - r + thickness, y - r + thickness, c);
  }
}

void Canvas::circle(int cx, int cy, int radius, Color c) {
  for (int y = -radius; y <= radius; ++y)
    for (int x = -radius; x <= radius; ++x)
      if (x * x + y * y <= radius * radius) set(cx + x, cy + y, c);
}

void Canvas::text(int x, int y, const std::string& s, Color c, int scale) {
  static char buffer[99999];
  const int quads = stb_easy_font_print(0, 0, const_cast<char*>(s.c_str()), nullptr, buffer, sizeof buffer);
  const float* v = reinterpret_cast<const float*>(buffer);  // 4 vertices of (x, y, z, color) per quad
  for (int q = 0; q < quads; ++q) {
    const float* quad = v + q * 16;
    const int qx0 = static_cast<int>(quad[0]), qy0 = static_cast<int>(quad[1]);
    const int qx1 = static_cast<int>(quad[8]), qy1 = static_cast<int>(quad[9]);
    fill_rect(x + qx0 * scale, y + qy0 * scale, x + qx1 * scale, y + qy1 * scale, c);
  }
}

int Canvas::text_width(const std::string& s, int scale) { return stb_easy_font_width(const_cast<char*>(s.c_str())) * scale; }

void Canvas::save_png(const std::string& path) const {
  std::string bytes;
  stbi_write_png_to_func(
      [](void* context, void* data, int size) { static_cast<std::string*>(context)->append(static_cast<char*>(data), size); },
      &bytes, width_, height_, 3, pixels_.data(), width_ * 3);
  BRRR_CHECK(!bytes.empty(), "save_png: could not encode '", path, "'");
  write_file_atomic(path, bytes);
}

Color palette(int i) {
  static const Color colors[] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44}, {214, 39, 40},
                                 {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};
  return colors[((i % 8) + 8) % 8];
}

namespace {

// ---------------------------------------------------------------------------------------------
// Ticks

double to_axis(double v, Scale s) { return s == Scale::log10 ? std::log10(v) : s == Scale::log2 ? std::log2(v) : v; }
double from_axis(double t, Scale s) { return s == Scale::log10 ? std::pow(10.0, t) : s == Scale::log2 ? std::exp2(t) : t; }

// A value of a linear axis whose step is `step`, with as many decimals as the step needs
// (0.30000000000000004 prints as 0.3), and in e-notation when very large or small.
std::string linear_label(double v, double step) {
  char s[32];
  if (std::fabs(v) < step * 1e-6) v = 0;  // not "-0" or "2.8e-17"
  if (v != 0 && (std::fabs(v) >= 1e6 || std::fabs(v) < 1e-4)) {
    std::snprintf(s, sizeof s, "%.3g", v);
  } else {
    const int decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    std::snprintf(s, sizeof s, "%.*f", std::min(decimals, 6), v);
  }
  return s;
}

// m x 10^k, as "0.02", "300", "1e6" or "2e-5".
std::string log10_label(double v) {
  char s[32];
  if (v >= 1e6 || v < 1e-3) {
    const int k = static_cast<int>(std::floor(std::log10(v) + 1e-9));
    std::snprintf(s, sizeof s, "%.0fe%d", v / std::pow(10.0, k), k);
  } else {
    std::snprintf(s, sizeof s, "%g", v);
  }
  return s;
}

// 2^e, as "1/8", "1", "256", or "2^20" and "2^-12" beyond.
std::string log2_label(int e) {
  char s[32];
  if (e >= 0 && e <= 16) std::snprintf(s, sizeof s, "%.0f", std::exp2(e));
  else if (e < 0 && e >= -10) std::snprintf(s, sizeof s, "1/%.0f", std::exp2(-e));
  else std::snprintf(s, sizeof s, "2^%d", e);
  return s;
}

// About `n` ticks 1, 2 or 5 times a power of ten apart, with the subdivisions matplotlib's
// AutoMinorLocator uses (5 of a step of 1 or 5, 4 of a step of 2) as minor ticks.
std::vector<Tick> linear_ticks(double lo, double hi, int n) {
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const int mantissa = raw / mag < 1.5 ? 1 : raw / mag < 3.5 ? 2 : raw / mag < 7.5 ? 5 : 10;
  const double step = mantissa * mag;
  const int divisions = mantissa == 2 ? 4 : 5;
  const double minor = step / divisions;
  std::vector<Tick> ticks;
  const double eps = minor * 1e-9;
  for (auto k = static_cast<long long>(std::ceil((lo - eps) / minor)); k * minor <= hi + eps; ++k) {
    const double v = k * minor;
    const bool major = k % divisions == 0;
    ticks.push_back({v, major ? linear_label(v, step) : "", major});
  }
  return ticks;
}

std::vector<Tick> log10_ticks(double lo, double hi) {
  const double eps = 1e-9;
  const int k_lo = static_cast<int>(std::floor(std::log10(lo) + eps)), k_hi = static_cast<int>(std::floor(std::log10(hi) + eps));
  const int decades = k_hi - k_lo;
  const int stride = decades > 10 ? (decades + 7) / 8 : 1;  // at most about 10 labelled decades
  int majors = 0;
  for (int k = k_lo; k <= k_hi; ++k)
    if (std::pow(10.0, k) >= lo * (1 - eps) && k % stride == 0) ++majors;
  // Under two decades in view: label the minor ticks too, as matplotlib does, all of them on a
  // short axis, 2, 3 and 5 on a longer one.
  const bool label_minors = majors < 2;
  const bool all_minors = std::log10(hi / lo) < 0.6;
  std::vector<Tick> ticks;
  for (int k = k_lo; k <= k_hi; ++k) {
    for (int m = 1; m <= 9; ++m) {
      const double v = m * std::pow(10.0, k);
      if (v < lo * (1 - eps) || v > hi * (1 + eps)) continue;
      if (m == 1) {
        if (k % stride == 0) ticks.push_back({v, log10_label(v), true});
        else ticks.push_back({v, "", false});
      } else if (stride == 1) {
        const bool labelled = label_minors && (all_minors || m == 2 || m == 3 || m == 5);
        ticks.push_back({v, labelled ? log10_label(v) : "", false});
      }
    }
  }
  return ticks;
}

std::vector<Tick> log2_ticks(double lo, double hi) {
  const double eps = 1e-9;
  const int e_lo = static_cast<int>(std::ceil(std::log2(lo) - eps)), e_hi = static_cast<int>(std::floor(std::log2(hi) + eps));
  const int powers = e_hi - e_lo + 1;
  const int stride = powers > 14 ? (powers + 11) / 12 : 1;
  std::vector<Tick> ticks;
  for (int e = e_lo; e <= e_hi; ++e) {
    if (e % stride == 0) ticks.push_back({std::exp2(e), log2_label(e), true});
    else ticks.push_back({std::exp2(e), "", false});
  }
  return ticks;
}

int labelled(const std::vector<Tick>& ticks) {
  return static_cast<int>(std::count_if(ticks.begin(), ticks.end(), [](const Tick& t) { return !t.label.empty(); }));
}

}  // namespace

std::vector<Tick> axis_ticks(double lo, double hi, Scale scale) {
  BRRR_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo < hi, "axis_ticks: invalid range [", lo, ", ", hi, "]");
  if (scale == Scale::linear) return linear_ticks(lo, hi, 8);
  BRRR_CHECK(lo > 0, "axis_ticks: a log axis needs positive values, not [", lo, ", ", hi, "]");
  std::vector<Tick> ticks = scale == Scale::log10 ? log10_ticks(lo, hi) : log2_ticks(lo, hi);
  // Too narrow a range for the powers of the base: a linear axis's ticks, at their places on
  // the log axis (matplotlib does the same).
  if (labelled(ticks) < 2) ticks = linear_ticks(lo, hi, 4);
  return ticks;
}

namespace {

// ---------------------------------------------------------------------------------------------
// A frame: the plot area and its two axes. Data is drawn twice, on the image and on `ink`, a
// mask of where the data is, so that the legend and the point labels can find empty space.

const Color kAxis{60, 60, 60}, kGrid{225, 225, 225}, kMinorGrid{242, 242, 242}, kWhite{255, 255, 255};

struct Frame {
  Canvas image, ink;
  Rect area;
  Scale xs, ys;
  double x0, x1, y0, y1;  // the visible range, in axis units (log units on a log axis)

  Frame(int w, int h, Rect a, Scale x_scale, Scale y_scale, double xa, double xb, double ya, double yb)
      : image(w, h), ink(w, h), area(a), xs(x_scale), ys(y_scale), x0(xa), x1(xb), y0(ya), y1(yb) {}

  // Data units to pixels (NaN for a value a log axis cannot show).
  double px(double x) const { return area.x0 + (to_axis(x, xs) - x0) / (x1 - x0) * (area.x1 - 1 - area.x0); }
  double py(double y) const { return area.y1 - 1 - (to_axis(y, ys) - y0) / (y1 - y0) * (area.y1 - 1 - area.y0); }

  void data_line(double xa, double ya, double xb, double yb, Color c, int thickness, int dash = 0) {
    const double ax = px(xa), ay = py(ya), bx = px(xb), by = py(yb);
    if (!std::isfinite(ax) || !std::isfinite(ay) || !std::isfinite(bx) || !std::isfinite(by)) return;
    if (dash <= 0) {
      image.line(ax, ay, bx, by, c, thickness);
      ink.line(ax, ay, bx, by, {0, 0, 0}, thickness + 2);
      return;
    }
    const double length = std::hypot(bx - ax, by - ay);
    for (double s = 0; s < length; s += 2 * dash) {
      const double t0 = s / length, t1 = std::min(1.0, (s + dash) / length);
      image.line(ax + t0 * (bx - ax), ay + t0 * (by - ay), ax + t1 * (bx - ax), ay + t1 * (by - ay), c, thickness);
    }
    ink.line(ax, ay, bx, by, {0, 0, 0}, thickness + 2);
  }

  void data_dot(double x, double y, int radius, Color c) {
    const double cx = px(x), cy = py(y);
    if (!std::isfinite(cx) || !std::isfinite(cy)) return;
    image.circle(static_cast<int>(std::lround(cx)), static_cast<int>(std::lround(cy)), radius, c);
    ink.circle(static_cast<int>(std::lround(cx)), static_cast<int>(std::lround(cy)), radius + 2, {0, 0, 0});
  }

  // Whether any data lies in `r` (or `r` leaves the plot area).
  bool inked(const Rect& r) const {
    if (r.x0 < area.x0 || r.y0 < area.y0 || r.x1 > area.x1 || r.y1 > area.y1) return true;
    for (int y = r.y0; y < r.y1; ++y)
      for (int x = r.x0; x < r.x1; ++x)
        if (ink.get(x, y).r != 255) return true;
    return false;
  }

  void label(int x, int y, const std::string& s, Color c) {  // text that counts as data
    image.text(x, y, s, c);
    ink.fill_rect(x - 2, y - 2, x + Canvas::text_width(s) + 2, y + 10, {0, 0, 0});
  }

  // Grid, axes, tick marks and tick labels. The grid goes under the data, so call it first.
  void grid(const std::vector<Tick>& xt, const std::vector<Tick>& yt) {
    for (const Tick& t : xt) {
      const int x = static_cast<int>(std::lround(px(t.value)));
      image.line(x, area.y0, x, area.y1 - 1, t.label.empty() ? kMinorGrid : kGrid);
    }
    for (const Tick& t : yt) {
      const int y = static_cast<int>(std::lround(py(t.value)));
      image.line(area.x0, y, area.x1 - 1, y, t.label.empty() ? kMinorGrid : kGrid);
    }
  }
  void axes(const std::vector<Tick>& xt, const std::vector<Tick>& yt) {
    image.line(area.x0, area.y1 - 1, area.x1 - 1, area.y1 - 1, kAxis);
    image.line(area.x0, area.y0, area.x0, area.y1 - 1, kAxis);
    for (const Tick& t : xt) {
      const int x = static_cast<int>(std::lround(px(t.value)));
      image.line(x, area.y1, x, area.y1 + (t.major ? 5 : 2), kAxis);
      if (!t.label.empty()) image.text(x - Canvas::text_width(t.label) / 2 + 1, area.y1 + 8, t.label, kAxis);
    }
    for (const Tick& t : yt) {
      const int y = static_cast<int>(std::lround(py(t.value)));
      image.line(area.x0 - (t.major ? 6 : 3), y, area.x0 - 1, y, kAxis);
      if (!t.label.empty()) image.text(area.x0 - 9 - Canvas::text_width(t.label), y - 3, t.label, kAxis);
    }
  }
};

// The visible range of an axis in axis units: the data's, padded by 5% of it (matplotlib's
// margins), or [0, 1] (or [1, 10] on a log axis) when there is no data.
void axis_range(std::vector<double> values, Scale s, double& lo, double& hi, double pad = 0.05) {
  lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values) {
    const double t = to_axis(v, s);
    if (std::isfinite(t)) lo = std::min(lo, t), hi = std::max(hi, t);
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi == lo) lo -= 0.5, hi += 0.5;
  const double p = pad * (hi - lo);
  lo -= p, hi += p;
}

struct LegendEntry {
  std::string label;
  Color color;
  bool dot;  // a dot rather than a line
};

Rect legend_size(const std::vector<LegendEntry>& entries) {
  int w = 0;
  for (const auto& e : entries) w = std::max(w, Canvas::text_width(e.label));
  return {0, 0, entries.empty() ? 0 : w + 40, entries.empty() ? 0 : static_cast<int>(entries.size()) * 14 + 8};
}

// The first place in the plot area where a legend of `size` covers no data: the top right
// corner, then the others and the edges' middles, as matplotlib's loc="best" tries them.
// An empty rectangle where there is none.
Rect find_legend_place(const Frame& f, Rect size) {
  const int w = size.x1, h = size.y1, m = 8;
  const Rect a = f.area;
  const int xs[] = {a.x1 - m - w, a.x0 + m, (a.x0 + a.x1 - w) / 2};
  const int ys[] = {a.y0 + m, a.y1 - m - h, (a.y0 + a.y1 - h) / 2};
  const std::pair<int, int> order[] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {2, 0}, {2, 1}, {0, 2}, {1, 2}};
  for (auto [i, j] : order) {
    const Rect r{xs[i], ys[j], xs[i] + w, ys[j] + h};
    if (!f.inked({r.x0 - 2, r.y0 - 2, r.x1 + 2, r.y1 + 2})) return r;
  }
  return {};
}

void draw_legend(Canvas& c, Rect r, const std::vector<LegendEntry>& entries) {
  c.fill_rect(r.x0, r.y0, r.x1, r.y1, kWhite);
  const Color border{200, 200, 200};
  c.line(r.x0, r.y0, r.x1 - 1, r.y0, border);
  c.line(r.x0, r.y1 - 1, r.x1 - 1, r.y1 - 1, border);
  c.line(r.x0, r.y0, r.x0, r.y1 - 1, border);
  c.line(r.x1 - 1, r.y0, r.x1 - 1, r.y1 - 1, border);
  int y = r.y0 + 6;
  for (const auto& e : entries) {
    if (e.dot) c.circle(r.x0 + 16, y + 3, 3, e.color);
    else c.fill_rect(r.x0 + 6, y + 2, r.x0 + 26, y + 5, e.color);
    c.text(r.x0 + 32, y, e.label, kAxis);
    y += 14;
  }
}

// Everything a line plot and a roofline share: lay out, draw the data with `draw_data`, place
// the legend where it covers no data, and if there is no such place inside, draw it all again
// with the plot area narrowed and the legend to its right.
template <class DrawData>
Figure draw_frame(const LinePlotOptions& o, double x0, double x1, double y0, double y1, const std::vector<LegendEntry>& entries,
                  DrawData draw_data) {
  const Rect size = legend_size(entries);
  std::vector<Tick> xt = axis_ticks(from_axis(x0, o.x_scale), from_axis(x1, o.x_scale), o.x_scale);
  std::vector<Tick> yt = axis_ticks(from_axis(y0, o.y_scale), from_axis(y1, o.y_scale), o.y_scale);
  int label_w = 0;  // room for the y tick labels
  for (const Tick& t : yt) label_w = std::max(label_w, Canvas::text_width(t.label));
  for (int outside = 0; outside < 2; ++outside) {
    Rect area{std::max(60, label_w + 20), 40, o.width - 20, o.height - 50};
    if (outside) area.x1 -= size.x1 + 12;
    BRRR_CHECK(area.x1 - area.x0 > 40 && area.y1 - area.y0 > 40, "line_plot: ", o.width, " x ", o.height,
               " is too small for a plot");
    Frame f(o.width, o.height, area, o.x_scale, o.y_scale, x0, x1, y0, y1);
    f.grid(xt, yt);
    draw_data(f);
    Rect legend{};
    if (!entries.empty()) {
      legend = outside ? Rect{area.x1 + 12, area.y0, area.x1 + 12 + size.x1, area.y0 + size.y1} : find_legend_place(f, size);
      if (legend.empty()) continue;
    }
    f.axes(xt, yt);
    if (!entries.empty()) draw_legend(f.image, legend, entries);
    f.image.text(o.width / 2 - Canvas::text_width(o.title, 2) / 2, 10, o.title, {0, 0, 0}, 2);
    f.image.text((area.x0 + area.x1) / 2 - Canvas::text_width(o.x_label) / 2, o.height - 22, o.x_label, kAxis);
    f.image.text(8, area.y0 - 14, o.y_label, kAxis);
    return {std::move(f.image), area, legend};
  }
  throw Error("line_plot: no room for the legend");  // not reached: outside, there always is
}

}  // namespace

Figure draw_line_plot(const std::vector<Series>& series, const LinePlotOptions& o) {
  std::vector<double> xs, ys;
  std::vector<LegendEntry> entries;
  for (const Series& s : series) {
    BRRR_CHECK(s.x.size() == s.y.size(), "line_plot: series '", s.label, "' has ", s.x.size(), " x values and ", s.y.size(),
               " y values");
    for (std::size_t i = 0; i < s.x.size(); ++i)
      if (std::isfinite(to_axis(s.x[i], o.x_scale)) && std::isfinite(to_axis(s.y[i], o.y_scale)))
        xs.push_back(s.x[i]), ys.push_back(s.y[i]);
    if (!s.label.empty()) entries.push_back({s.label, s.color, s.x.size() == 1});
  }
  double x0, x1, y0, y1;
  axis_range(xs, o.x_scale, x0, x1, o.x_scale == Scale::linear ? 0.0 : 0.05);  // a step axis starts at the first step
  axis_range(ys, o.y_scale, y0, y1);
  return draw_frame(o, x0, x1, y0, y1, entries, [&](Frame& f) {
    for (const Series& s : series) {
      for (std::size_t i = 1; i < s.x.size(); ++i) f.data_line(s.x[i - 1], s.y[i - 1], s.x[i], s.y[i], s.color, 2);
      if (s.x.size() == 1) f.data_dot(s.x[0], s.y[0], 3, s.color);  // a single point: a dot
    }
  });
}

void line_plot(const std::string& path, const std::vector<Series>& series, const LinePlotOptions& options) {
  draw_line_plot(series, options).save_png(path);
}

Figure draw_roofline(double peak_gflops, double bandwidth_gbs, const std::vector<RooflinePoint>& points,
                     const std::string& title) {
  BRRR_CHECK(peak_gflops > 0 && bandwidth_gbs > 0, "roofline: the peaks must be positive, not ", peak_gflops,
             " GFLOP/s and ", bandwidth_gbs, " GB/s");
  const double ridge = peak_gflops / bandwidth_gbs;  // flop/byte where the two roofs meet
  // x: whole powers of two around 1/8 .. 256 flop/byte, the ridge and the points;
  // y: whole decades around the roof and the points.
  double i_lo = std::min(0.125, ridge / 8), i_hi = std::max(256.0, ridge * 8);
  double g_lo = bandwidth_gbs * i_lo, g_hi = peak_gflops * 2;
  for (const RooflinePoint& p : points) {
    BRRR_CHECK(p.intensity > 0 && p.gflops > 0, "roofline: point '", p.label, "' has intensity ", p.intensity,
               " and ", p.gflops, " GFLOP/s; both must be positive");
    i_lo = std::min(i_lo, p.intensity / 2), i_hi = std::max(i_hi, p.intensity * 2);
    g_lo = std::min(g_lo, p.gflops / 2), g_hi = std::max(g_hi, p.gflops * 2);
  }
  const double x0 = std::floor(std::log2(i_lo)), x1 = std::ceil(std::log2(i_hi));
  const double y0 = std::floor(std::log10(g_lo)), y1 = std::ceil(std::log10(g_hi));
  LinePlotOptions o{title, "arithmetic intensity (flop / byte)", "GFLOP/s", Scale::log10, Scale::log2, 800, 520};
  char roof[96];
  std::snprintf(roof, sizeof roof, "roof: %.3g GB/s x intensity, at most %.4g GFLOP/s", bandwidth_gbs, peak_gflops);
  const Color roof_color = palette(0), ridge_color{120, 120, 120};
  return draw_frame(o, x0, x1, y0, y1, {{roof, roof_color, false}}, [&](Frame& f) {
    const double a = std::exp2(x0), b = std::exp2(x1);
    f.data_line(a, std::min(peak_gflops, bandwidth_gbs * a), ridge, peak_gflops, roof_color, 2);
    f.data_line(ridge, peak_gflops, b, peak_gflops, roof_color, 2);
    // The ridge: a dashed drop to the x axis, a dot, and its intensity.
    f.data_line(ridge, std::pow(10.0, y0), ridge, peak_gflops, ridge_color, 1, 4);
    f.data_dot(ridge, peak_gflops, 4, ridge_color);
    char ridge_label[48];
    std::snprintf(ridge_label, sizeof ridge_label, "ridge: %.3g flop/byte", ridge);
    const int rx = static_cast<int>(f.px(ridge)), ry = static_cast<int>(f.py(peak_gflops));
    f.label(rx + 8, ry + 8, ridge_label, ridge_color);
    for (std::size_t i = 0; i < points.size(); ++i) f.data_dot(points[i].intensity, points[i].gflops, 4, palette(static_cast<int>(i) + 1));
    // Each point's label beside it: the first of right, left, below, above where it covers
    // nothing drawn yet (lines, dots, other labels); right when none is free.
    for (std::size_t i = 0; i < points.size(); ++i) {
      const int x = static_cast<int>(std::lround(f.px(points[i].intensity)));
      const int y = static_cast<int>(std::lround(f.py(points[i].gflops)));
      const int w = Canvas::text_width(points[i].label);
      const std::pair<int, int> places[] = {{x + 9, y - 3}, {x - 9 - w, y - 3}, {x - w / 2, y + 10}, {x - w / 2, y - 17},
                                            {x + 9, y + 8}, {x + 9, y - 14},    {x - 9 - w, y + 8}, {x - 9 - w, y - 14}};
      std::pair<int, int> at = places[0];
      for (auto p : places)
        if (!f.inked({p.first - 2, p.second - 2, p.first + w + 2, p.second + 10})) {
          at = p;
          break;
        }
      f.label(at.first, at.second, points[i].label, {0, 0, 0});
    }
  });
}

void roofline(const std::string& path, double peak_gflops, double bandwidth_gbs, const std::vector<RooflinePoint>& points,
              const std::string& title) {
  draw_roofline(peak_gflops, bandwidth_gbs, points, title).save_png(path);
}

void decision_boundary(const std::string& path, const std::vector<int>& classes, int rows, int cols, double x_min,
                       double x_max, double y_min, double y_max, const std::vector<double>& px,
                       const std::vector<double>& py, const std::vector<int>& labels, const std::string& title) {
  BRRR_CHECK(static_cast<int>(classes.size()) == rows * cols, "decision_boundary: ", classes.size(),
             " classes for a ", rows, " x ", cols, " grid");
  BRRR_CHECK(px.size() == py.size() && px.size() == labels.size(), "decision_boundary: points and labels differ in count");
  const int size = 500, top = 36;
  Canvas c(size, size + top);
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const int r = y * rows / size, col = x * cols / size;
      const Color k = palette(classes[r * cols + col]);
      c.set(x, top + y, {static_cast<std::uint8_t>((k.r + 3 * 255) / 4), static_cast<std::uint8_t>((k.g + 3 * 255) / 4),
                         static_cast<std::uint8_t>((k.b + 3 * 255) / 4)});
    }
  for (std::size_t i = 0; i < px.size(); ++i) {
    const int x = static_cast<int>((px[i] - x_min) / (x_max - x_min) * size);
    const int y = top + static_cast<int>((y_max - py[i]) / (y_max - y_min) * size);
    c.circle(x, y, 3, {0, 0, 0});
    c.circle(x, y, 2, palette(labels[i]));
  }
  c.text(size / 2 - Canvas::text_width(title, 2) / 2, 8, title, {0, 0, 0}, 2);
  c.save_png(path);
}

void heatmap(const std::string& path, const std::vector<double>& values, int rows, int cols, const std::string& title,
             const std::vector<std::string>& row_labels, const std::vector<std::string>& col_labels) {
  BRRR_CHECK(static_cast<int>(values.size()) == rows * cols, "heatmap: ", values.size(), " values for ", rows, " x ", cols);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (double v : values)
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(hi > lo)) hi = lo + 1;
  auto shade_of = [&](double v) -> Color {  // white (lo) to dark blue (hi)
    const double t = std::isfinite(v) ? (v - lo) / (hi - lo) : 0.0;
    const auto shade = static_cast<std::uint8_t>(255 - t * 200);
    return {shade, shade, static_cast<std::uint8_t>(std::min(255.0, shade + 40.0))};
  };
  const int cell = std::max(4, std::min(40, 640 / std::max(rows, cols)));
  int label_w = 0, col_label_w = 0;
  for (const auto& l : row_labels) label_w = std::max(label_w, Canvas::text_width(l));
  for (const auto& l : col_labels) col_label_w = std::max(col_label_w, Canvas::text_width(l));
  // Column labels wider than a cell are staggered over as many lines as it takes (at most 4).
  const int label_lines = col_labels.empty() ? 0 : std::min(4, (col_label_w + cell) / cell);
  const int left = label_w + 12, top = 40, bottom = top + rows * cell, bottom_labels = 10 + label_lines * 12;
  // A colour bar on the right, as matplotlib's colorbar(): lo at the bottom, hi at the top,
  // ticked in the values' units.
  const int bar_x = left + cols * cell + 16, bar_w = 14;
  const std::vector<Tick> ticks = axis_ticks(lo, hi, Scale::linear);
  int tick_w = 0;
  for (const Tick& t : ticks) tick_w = std::max(tick_w, Canvas::text_width(t.label));
  Canvas c(bar_x + bar_w + 10 + tick_w + 8, std::max(bottom + bottom_labels, top + 120));
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols; ++k)
      c.fill_rect(left + k * cell, top + r * cell, left + (k + 1) * cell, top + (r + 1) * cell, shade_of(values[r * cols + k]));
  for (int r = 0; r < static_cast<int>(row_labels.size()) && r < rows; ++r)
    c.text(4, top + r * cell + cell / 2 - 3, row_labels[r], {0, 0, 0});
  for (int k = 0; k < static_cast<int>(col_labels.size()) && k < cols; ++k)
    c.text(left + k * cell + (cell - Canvas::text_width(col_labels[k])) / 2 + 1, bottom + 4 + (k % label_lines) * 12,
           col_labels[k], {0, 0, 0});
  const int bar_top = top, bar_bottom = std::max(bottom, top + 100);
  for (int y = bar_top; y < bar_bottom; ++y)
    c.fill_rect(bar_x, y, bar_x + bar_w, y + 1, shade_of(hi - (hi - lo) * (y - bar_top) / (bar_bottom - 1 - bar_top)));
  const Color axis{60, 60, 60};
  c.line(bar_x - 1, bar_top - 1, bar_x + bar_w, bar_top - 1, axis);
  c.line(bar_x - 1, bar_bottom, bar_x + bar_w, bar_bottom, axis);
  c.line(bar_x - 1, bar_top - 1, bar_x - 1, bar_bottom, axis);
  c.line(bar_x + bar_w, bar_top - 1, bar_x + bar_w, bar_bottom, axis);
  for (const Tick& t : ticks) {
    const int y = bar_bottom - 1 - static_cast<int>(std::lround((t.value - lo) / (hi - lo) * (bar_bottom - 1 - bar_top)));
    c.line(bar_x + bar_w, y, bar_x + bar_w + (t.major ? 4 : 2), y, axis);
    if (!t.label.empty()) c.text(bar_x + bar_w + 7, y - 3, t.label, axis);
  }
  c.text(8, 10, title, {0, 0, 0}, 2);
  c.save_png(path);
}

void image_grid(const std::string& path, const std::vector<std::vector<double>>& images, int rows, int cols,
                const std::vector<std::string>& captions, const std::string& title, int columns) {
  BRRR_CHECK(rows > 0 && cols > 0 && columns > 0, "image_grid: need positive sizes, got ", rows, " x ", cols,
             " images in ", columns, " columns");
  for (std::size_t i = 0; i < images.size(); ++i)
    BRRR_CHECK(static_cast<int>(images[i].size()) == rows * cols, "image_grid: image ", i, " has ",
               images[i].size(), " values, expected ", rows, " x ", cols);
  const int n = static_cast<int>(images.size()), per_row = std::max(1, std::min(columns, n));
  const int grid_rows = (n + per_row - 1) / per_row;
  const int scale = std::max(2, 64 / std::max(rows, cols));  // each image about 64 pixels wide
  const int cell_w = std::max(cols * scale, Canvas::text_width("0000000")) + 12, cell_h = rows * scale + 24;
  const int top = 36;
  Canvas c(std::max(per_row * cell_w + 12, Canvas::text_width(title, 2) + 20), top + grid_rows * cell_h + 8);
  c.text(10, 10, title, {0, 0, 0}, 2);
  for (int i = 0; i < n; ++i) {
    const int x0 = 10 + (i % per_row) * cell_w, y0 = top + (i / per_row) * cell_h;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (double v : images[i])
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
    if (!(hi > lo)) hi = lo + 1;
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < cols; ++k) {
        const double v = images[i][r * cols + k], t = std::isfinite(v) ? (v - lo) / (hi - lo) : 0.0;
        const auto shade = static_cast<std::uint8_t>(std::lround(255 * (1 - t)));
        c.fill_rect(x0 + k * scale, y0 + r * scale, x0 + (k + 1) * scale, y0 + (r + 1) * scale, {shade, shade, shade});
      }
    const Color frame{150, 150, 150};
    c.line(x0 - 1, y0 - 1, x0 + cols * scale, y0 - 1, frame);
    c.line(x0 - 1, y0 + rows * scale, x0 + cols * scale, y0 + rows * scale, frame);
    c.line(x0 - 1, y0 - 1, x0 - 1, y0 + rows * scale, frame);
    c.line(x0 + cols * scale, y0 - 1, x0 + cols * scale, y0 + rows * scale, frame);
    if (i < static_cast<int>(captions.size())) c.text(x0, y0 + rows * scale + 6, captions[i], {0, 0, 0});
  }
  c.save_png(path);
}

}  // namespace brrr::plot
