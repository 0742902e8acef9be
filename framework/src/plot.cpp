// framework/src/plot.cpp: a tiny rasterizer for PNG plots.
// Chapter 05 (the first MLP). stb_image_write encodes the PNG; stb_easy_font gives the
// glyphs (quads we fill ourselves).
#include "brrr/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

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

std::string tick_label(double v) {
  char s[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3)) std::snprintf(s, sizeof s, "%.1e", v);
  else std::snprintf(s, sizeof s, "%g", std::round(v * 1000) / 1000);
  return s;
}

// About n "nice" tick values (1, 2 or 5 times a power of ten apart) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int n) {
  const double raw = (hi - lo) / n;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = raw / mag < 1.5 ? mag : raw / mag < 3.5 ? 2 * mag : raw / mag < 7.5 ? 5 * mag : 10 * mag;
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

}  // namespace

void line_plot(const std::string& path, const std::vector<Series>& series, const LinePlotOptions& o) {
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const Series& s : series) {
    BRRR_CHECK(s.x.size() == s.y.size(), "line_plot: series '", s.label, "' has ", s.x.size(), " x values and ", s.y.size(),
               " y values");
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      double y = o.log_y ? std::log10(s.y[i]) : s.y[i];
      if (!std::isfinite(y) || !std::isfinite(s.x[i])) continue;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      ymin = std::min(ymin, y);
      ymax = std::max(ymax, y);
    }
  }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  if (ymax == ymin) ymax = ymin + 1;
  const double pad = 0.05 * (ymax - ymin);
  ymin -= pad;
  ymax += pad;

  Canvas c(o.width, o.height);
  const int left = 70, right = o.width - 20, top = 40, bottom = o.height - 50;
  auto px = [&](double x) { return left + (x - xmin) / (xmax - xmin) * (right - left); };
  auto py = [&](double y) { return bottom - (y - ymin) / (ymax - ymin) * (bottom - top); };
  const Color axis{60, 60, 60}, grid{225, 225, 225};
  for (double t : nice_ticks(xmin, xmax, 8)) {
    c.line(px(t), top, px(t), bottom, grid);
    const std::string s = tick_label(t);
    c.text(static_cast<int>(px(t)) - Canvas::text_width(s) / 2, bottom + 6, s, axis);
  }
  for (double t : nice_ticks(ymin, ymax, 6)) {
    c.line(left, py(t), right, py(t), grid);
    const std::string s = tick_label(o.log_y ? std::pow(10.0, t) : t);
    c.text(left - 6 - Canvas::text_width(s), static_cast<int>(py(t)) - 3, s, axis);
  }
  c.line(left, bottom, right, bottom, axis);
  c.line(left, top, left, bottom, axis);
  for (const Series& s : series) {
    for (std::size_t i = 1; i < s.x.size(); ++i) {
      const double y0 = o.log_y ? std::log10(s.y[i - 1]) : s.y[i - 1], y1 = o.log_y ? std::log10(s.y[i]) : s.y[i];
      if (std::isfinite(y0) && std::isfinite(y1)) c.line(px(s.x[i - 1]), py(y0), px(s.x[i]), py(y1), s.color, 2);
    }
    if (s.x.size() == 1) {  // a single point: a dot, on the same (log) scale as the lines
      const double y = o.log_y ? std::log10(s.y[0]) : s.y[0];
      if (std::isfinite(y)) c.circle(static_cast<int>(px(s.x[0])), static_cast<int>(py(y)), 3, s.color);
    }
  }
  c.text(o.width / 2 - Canvas::text_width(o.title, 2) / 2, 10, o.title, {0, 0, 0}, 2);
  c.text((left + right) / 2 - Canvas::text_width(o.x_label) / 2, o.height - 22, o.x_label, axis);
  c.text(8, top - 14, o.y_label + (o.log_y ? " (log)" : ""), axis);
  int ly = top + 8;
  for (const Series& s : series) {  // legend, top right
    const int w = Canvas::text_width(s.label);
    c.fill_rect(right - w - 34, ly, right - w - 14, ly + 4, s.color);
    c.text(right - w - 8, ly - 2, s.label, axis);
    ly += 14;
  }
  c.save_png(path);
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
  const int cell = std::max(4, std::min(40, 640 / std::max(rows, cols)));
  int label_w = 0;
  for (const auto& l : row_labels) label_w = std::max(label_w, Canvas::text_width(l));
  const int left = label_w + 12, top = 40, bottom_labels = col_labels.empty() ? 10 : 60;
  Canvas c(left + cols * cell + 10, top + rows * cell + bottom_labels);
  for (int r = 0; r < rows; ++r)
    for (int k = 0; k < cols; ++k) {
      const double v = values[r * cols + k];
      const double t = std::isfinite(v) ? (v - lo) / (hi - lo) : 0.0;
      const auto shade = static_cast<std::uint8_t>(255 - t * 200);
      c.fill_rect(left + k * cell, top + r * cell, left + (k + 1) * cell, top + (r + 1) * cell,
                  {shade, shade, static_cast<std::uint8_t>(std::min(255.0, shade + 40.0))});
    }
  for (int r = 0; r < static_cast<int>(row_labels.size()) && r < rows; ++r)
    c.text(4, top + r * cell + cell / 2 - 3, row_labels[r], {0, 0, 0});
  for (int k = 0; k < static_cast<int>(col_labels.size()) && k < cols; ++k)
    c.text(left + k * cell + 1, top + rows * cell + 4 + (k % 4) * 12, col_labels[k], {0, 0, 0});
  c.text(8, 10, title, {0, 0, 0}, 2);
  c.save_png(path);
}

}  // namespace brrr::plot
