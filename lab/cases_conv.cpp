// lab/cases_conv.cpp: the kernel lab's cases for convolution and pooling (chapter 09,
// convolutions). Read before: cases.h, kernels/cpu/conv.cpp. Read next: kernel_lab.cpp.
//
// A convolution's sizes are N, C_in, H, W, C_out, a square kernel k, and the options stride,
// pad, dil (dilation) and groups, each the same along both axes; pooling's are planes (N C),
// H, W, k, stride, pad. The references are the definitions, written again here in double:
//   out[n, co, oh, ow] = bias[co] + sum_{c, kh, kw} x[n, g cin_g + c, oh s - p + kh d, ow s - p + kw d] w[co, c, kh, kw]
// The shapes mix odd sizes, padding wider than the kernel's half-width, stride > 1, dilation,
// groups and depthwise layers; perf's CPU size is a ResNet-like layer (32, 64 -> 64, 56x56, 3x3).
#include <limits>

#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

using i64 = std::int64_t;

kernels::ConvShape conv_shape(const Dims& d) {
  kernels::ConvShape s;
  s.N = d[0], s.C_in = d[1], s.H = d[2], s.W = d[3], s.C_out = d[4], s.kH = s.kW = d[5];
  s.stride_h = s.stride_w = d[6], s.pad_h = s.pad_w = d[7], s.dil_h = s.dil_w = d[8], s.groups = d[9];
  s.H_out = (s.H + 2 * s.pad_h - s.dil_h * (s.kH - 1) - 1) / s.stride_h + 1;
  s.W_out = (s.W + 2 * s.pad_w - s.dil_w * (s.kW - 1) - 1) / s.stride_w + 1;
  return s;
}
i64 x_size(const kernels::ConvShape& s) { return s.N * s.C_in * s.H * s.W; }
i64 w_size(const kernels::ConvShape& s) { return s.C_out * (s.C_in / s.groups) * s.kH * s.kW; }
i64 out_size(const kernels::ConvShape& s) { return s.N * s.C_out * s.H_out * s.W_out; }

template <class T>
void call_conv_forward(kernels::conv2d_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), a.f<T>("weight"), a.f<T>("bias"), conv_shape(a.dims), a.stream);
}
template <class T>
void call_conv_backward_input(kernels::conv2d_backward_input_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dout"), a.f<T>("weight"), conv_shape(a.dims), a.stream);
}
template <class T>
void call_conv_backward_weight(kernels::conv2d_backward_weight_fn<T> f, const Args& a) {
  f(a.f<T>("dweight"), a.f<T>("dbias"), a.f<T>("dout"), a.f<T>("x"), conv_shape(a.dims), a.stream);
}

// The definition, in double: out (N, C_out, H_out, W_out).
std::vector<double> conv_reference(const kernels::ConvShape& s, const std::vector<double>& x,
                                   const std::vector<double>& w, const std::vector<double>& bias) {
  const i64 cin_g = s.C_in / s.groups, cout_g = s.C_out / s.groups;
  std::vector<double> out(out_size(s));
  parallel_rows(s.N, [&](i64 n) {  // each image's outputs are its own
    for (i64 co = 0; co < s.C_out; ++co)
      for (i64 oh = 0; oh < s.H_out; ++oh)
        for (i64 ow = 0; ow < s.W_out; ++ow) {
          double acc = bias[co];
          for (i64 c = 0; c < cin_g; ++c)
            for (i64 kh = 0; kh < s.kH; ++kh)
              for (i64 kw = 0; kw < s.kW; ++kw) {
                const i64 ih = oh * s.stride_h - s.pad_h + kh * s.dil_h, iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                acc += x[((n * s.C_in + co / cout_g * cin_g + c) * s.H + ih) * s.W + iw] *
                       w[((co * cin_g + c) * s.kH + kh) * s.kW + kw];
              }
          out[((n * s.C_out + co) * s.H_out + oh) * s.W_out + ow] = acc;
        }
  });
  return out;
}

void make_conv(Problem& p, Random& r) {
  const kernels::ConvShape s = conv_shape(p.dims);
  p.input("x", r.normal(x_size(s)));
  p.input("weight", r.normal(w_size(s), 0.0f, 0.3f));
  p.input("bias", r.normal(s.C_out));
}
void make_conv_forward(Problem& p, Random& r) {
  make_conv(p, r);
  p.output("out", out_size(conv_shape(p.dims)));
}
void conv_forward_reference(Problem& p) {
  p.out("out") = conv_reference(conv_shape(p.dims), p.in("x"), p.in("weight"), p.in("bias"));
}
void make_conv_backward_input(Problem& p, Random& r) {
  make_conv(p, r);
  const kernels::ConvShape s = conv_shape(p.dims);
  p.input("dout", r.normal(out_size(s)));
  p.output("dx", x_size(s));
}
void make_conv_backward_weight(Problem& p, Random& r) {
  make_conv(p, r);
  const kernels::ConvShape s = conv_shape(p.dims);
  p.input("dout", r.normal(out_size(s)));
  p.output("dweight", w_size(s));
  p.output("dbias", s.C_out);
}
double conv_loss(const Problem& p) {  // sum(dout * conv(x, weight) + bias)
  return dot(p.in("dout"), conv_reference(conv_shape(p.dims), p.in("x"), p.in("weight"), p.in("bias")));
}
// dx[n, ci, ih, iw] = sum of dout * w over every output and tap that read x[n, ci, ih, iw]:
// the forward's loop, scattering instead of gathering.
void conv_backward_input_reference(Problem& p) {
  const kernels::ConvShape s = conv_shape(p.dims);
  const i64 cin_g = s.C_in / s.groups, cout_g = s.C_out / s.groups;
  const std::vector<double>&dout = p.in("dout"), &w = p.in("weight");
  std::vector<double>& dx = p.out("dx");
  std::fill(dx.begin(), dx.end(), 0.0);
  parallel_rows(s.N, [&](i64 n) {  // each image's dx is its own
    for (i64 co = 0; co < s.C_out; ++co)
      for (i64 oh = 0; oh < s.H_out; ++oh)
        for (i64 ow = 0; ow < s.W_out; ++ow)
          for (i64 c = 0; c < cin_g; ++c)
            for (i64 kh = 0; kh < s.kH; ++kh)
              for (i64 kw = 0; kw < s.kW; ++kw) {
                const i64 ih = oh * s.stride_h - s.pad_h + kh * s.dil_h, iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                dx[((n * s.C_in + co / cout_g * cin_g + c) * s.H + ih) * s.W + iw] +=
                    dout[((n * s.C_out + co) * s.H_out + oh) * s.W_out + ow] * w[((co * cin_g + c) * s.kH + kh) * s.kW + kw];
              }
  });
}
void conv_backward_weight_reference(Problem& p) {
  const kernels::ConvShape s = conv_shape(p.dims);
  const i64 cin_g = s.C_in / s.groups, cout_g = s.C_out / s.groups;
  const std::vector<double>&dout = p.in("dout"), &x = p.in("x");
  std::vector<double>&dw = p.out("dweight"), &db = p.out("dbias");
  std::fill(dw.begin(), dw.end(), 0.0);
  std::fill(db.begin(), db.end(), 0.0);
  // Each output channel's dweight and dbias are its own; the images are summed in order.
  parallel_rows(s.C_out, [&](i64 co) {
    for (i64 n = 0; n < s.N; ++n)
      for (i64 oh = 0; oh < s.H_out; ++oh)
        for (i64 ow = 0; ow < s.W_out; ++ow) {
          const double d = dout[((n * s.C_out + co) * s.H_out + oh) * s.W_out + ow];
          db[co] += d;
          for (i64 c = 0; c < cin_g; ++c)
            for (i64 kh = 0; kh < s.kH; ++kh)
              for (i64 kw = 0; kw < s.kW; ++kw) {
                const i64 ih = oh * s.stride_h - s.pad_h + kh * s.dil_h, iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                dw[((co * cin_g + c) * s.kH + kh) * s.kW + kw] += d * x[((n * s.C_in + co / cout_g * cin_g + c) * s.H + ih) * s.W + iw];
              }
        }
  });
}

double conv_flops(const Dims& d) {
  const kernels::ConvShape s = conv_shape(d);
  return 2.0 * out_size(s) * (s.C_in / s.groups) * s.kH * s.kW;
}

Case conv(Case c) {
  c.chapter = "09";
  c.dim_names = {"N", "C_in", "H", "W", "C_out", "k", "stride", "pad", "dil", "groups"};
  c.cpu_size = {32, 64, 56, 56, 64, 3, 1, 1, 1, 1};  // a ResNet-like layer
  c.gpu_size = c.cpu_size;
  c.emulator_size = {2, 8, 12, 12, 8, 3, 1, 1, 1, 1};
  c.shapes = {{1, 1, 1, 1, 1, 1, 1, 0, 1, 1},   {2, 3, 7, 9, 5, 3, 1, 1, 1, 1},  {3, 4, 9, 7, 6, 3, 2, 3, 1, 2},
              {2, 6, 11, 10, 6, 3, 2, 1, 1, 6}, {1, 5, 13, 8, 7, 2, 3, 2, 2, 1}, {2, 4, 8, 8, 8, 5, 1, 2, 1, 4}};
  c.grad_shape = {2, 4, 5, 6, 4, 3, 2, 2, 1, 2};
  c.report_flops = true;
  c.flops = &conv_flops;
  return c;
}

// --- pooling: dims planes, H, W, k, stride, pad --------------------------------------------------

kernels::PoolShape pool_shape(const Dims& d) {
  kernels::PoolShape s;
  s.planes = d[0], s.H = d[1], s.W = d[2], s.kH = s.kW = d[3], s.stride_h = s.stride_w = d[4];
  s.pad_h = s.pad_w = d[5];
  s.H_out = (s.H + 2 * s.pad_h - s.kH) / s.stride_h + 1;
  s.W_out = (s.W + 2 * s.pad_w - s.kW) / s.stride_w + 1;
  return s;
}
i64 pool_in(const kernels::PoolShape& s) { return s.planes * s.H * s.W; }
i64 pool_out(const kernels::PoolShape& s) { return s.planes * s.H_out * s.W_out; }

template <class T>
void call_max_forward(kernels::max_pool2d_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), static_cast<i64*>(a.get("index")), a.f<T>("x"), pool_shape(a.dims), a.stream);
}
template <class T>
void call_max_backward(kernels::max_pool2d_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dout"), static_cast<const i64*>(a.get("index")), pool_shape(a.dims), a.stream);
}
template <class T>
void call_avg_forward(kernels::avg_pool2d_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), pool_shape(a.dims), a.stream);
}
template <class T>
void call_avg_backward(kernels::avg_pool2d_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dout"), pool_shape(a.dims), a.stream);
}

// Each window's largest input (the first, scanning rows then columns) and where it is
// (h W + w in its plane); with avg, the window's sum over k^2 (padding adds zeros).
void pool_reference(const kernels::PoolShape& s, const std::vector<double>& x, bool max, std::vector<double>& out,
                    std::vector<double>* index) {
  for (i64 pl = 0; pl < s.planes; ++pl)
    for (i64 oh = 0; oh < s.H_out; ++oh)
      for (i64 ow = 0; ow < s.W_out; ++ow) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        i64 at = -1;
        for (i64 kh = 0; kh < s.kH; ++kh)
          for (i64 kw = 0; kw < s.kW; ++kw) {
            const i64 ih = oh * s.stride_h - s.pad_h + kh, iw = ow * s.stride_w - s.pad_w + kw;
            if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
            const double v = x[(pl * s.H + ih) * s.W + iw];
            sum += v;
            if (at < 0 || v > best) best = v, at = ih * s.W + iw;
          }
        const i64 o = (pl * s.H_out + oh) * s.W_out + ow;
        out[o] = max ? best : sum / static_cast<double>(s.kH * s.kW);
        if (index) (*index)[o] = static_cast<double>(at);
      }
}

void make_pool_forward(Problem& p, Random& r) {
  const kernels::PoolShape s = pool_shape(p.dims);
  p.input("x", r.normal(pool_in(s)));
  p.output("out", pool_out(s));
}
void make_max_forward(Problem& p, Random& r) {
  make_pool_forward(p, r);
  p.output("index", pool_out(pool_shape(p.dims)), Array::kInt64);
}
void max_forward_reference(Problem& p) {
  pool_reference(pool_shape(p.dims), p.in("x"), true, p.out("out"), &p.out("index"));
}
void avg_forward_reference(Problem& p) { pool_reference(pool_shape(p.dims), p.in("x"), false, p.out("out"), nullptr); }

void make_pool_backward(Problem& p, Random& r, bool max) {
  const kernels::PoolShape s = pool_shape(p.dims);
  const std::vector<float> x = r.normal(pool_in(s));
  p.input("x", x);  // not read by the kernel: grad mode's forward (and max's indices)
  p.input("dout", r.normal(pool_out(s)));
  if (max) {
    std::vector<double> out(pool_out(s)), index(pool_out(s));
    pool_reference(s, {x.begin(), x.end()}, true, out, &index);
    p.indices("index", {index.begin(), index.end()});
    p.array("index").type = Array::kInt64;
  }
  p.output("dx", pool_in(s));
}
void max_backward_reference(Problem& p) {  // dout added at each window's winner
  const kernels::PoolShape s = pool_shape(p.dims);
  const std::vector<double>&dout = p.in("dout"), &index = p.in("index");
  std::vector<double>& dx = p.out("dx");
  std::fill(dx.begin(), dx.end(), 0.0);
  for (i64 pl = 0; pl < s.planes; ++pl)
    for (i64 o = 0; o < s.H_out * s.W_out; ++o)
      dx[pl * s.H * s.W + static_cast<i64>(index[pl * s.H_out * s.W_out + o])] += dout[pl * s.H_out * s.W_out + o];
}
void avg_backward_reference(Problem& p) {  // dout / k^2 added to each input of the window
  const kernels::PoolShape s = pool_shape(p.dims);
  const std::vector<double>& dout = p.in("dout");
  std::vector<double>& dx = p.out("dx");
  std::fill(dx.begin(), dx.end(), 0.0);
  for (i64 pl = 0; pl < s.planes; ++pl)
    for (i64 oh = 0; oh < s.H_out; ++oh)
      for (i64 ow = 0; ow < s.W_out; ++ow)
        for (i64 kh = 0; kh < s.kH; ++kh)
          for (i64 kw = 0; kw < s.kW; ++kw) {
            const i64 ih = oh * s.stride_h - s.pad_h + kh, iw = ow * s.stride_w - s.pad_w + kw;
            if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
            dx[(pl * s.H + ih) * s.W + iw] += dout[(pl * s.H_out + oh) * s.W_out + ow] / static_cast<double>(s.kH * s.kW);
          }
}
double pool_loss(const Problem& p, bool max) {
  const kernels::PoolShape s = pool_shape(p.dims);
  std::vector<double> out(pool_out(s));
  pool_reference(s, p.in("x"), max, out, nullptr);
  return dot(p.in("dout"), out);
}

Case pool(Case c) {
  c.chapter = "09";
  c.dim_names = {"planes", "H", "W", "k", "stride", "pad"};
  c.cpu_size = {32 * 64, 112, 112, 3, 2, 1};  // ResNet's first pooling
  c.gpu_size = c.cpu_size;
  c.emulator_size = {16, 24, 24, 3, 2, 1};
  c.shapes = {{1, 1, 1, 1, 1, 0}, {3, 7, 9, 2, 2, 0}, {5, 9, 8, 3, 2, 1}, {2, 11, 13, 3, 1, 1}, {4, 6, 10, 4, 3, 2}};
  c.grad_shape = {2, 7, 6, 3, 2, 1};
  return c;
}

}  // namespace

std::vector<Case> conv_cases() {
  return {
      conv({.name = "conv2d_forward",
            .what = "out (N, C_out, H_out, W_out) = conv(x (N, C_in, H, W), weight (C_out, C_in/groups, k, k)) + bias",
            .tolerance = 1e-4,  // sums of C_in k^2 products: float32 rounding grows like their square root
            .bytes = [](const Dims& d) {
              const kernels::ConvShape s = conv_shape(d);
              return 4.0 * (x_size(s) + w_size(s) + s.C_out + out_size(s));
            },
            .make = &make_conv_forward, .reference = &conv_forward_reference,
            .call = call(op::conv2d_forward<float>, &call_conv_forward<float>, op::conv2d_forward<double>,
                         &call_conv_forward<double>)}),
      conv({.name = "conv2d_backward_input", .what = "dx (N, C_in, H, W) from dout and weight: a transposed convolution",
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) {
              const kernels::ConvShape s = conv_shape(d);
              return 4.0 * (x_size(s) + w_size(s) + out_size(s));
            },
            .make = &make_conv_backward_input, .reference = &conv_backward_input_reference,
            .call = call(op::conv2d_backward_input<float>, &call_conv_backward_input<float>,
                         op::conv2d_backward_input<double>, &call_conv_backward_input<double>),
            .grads = {{.output = "dx", .input = "x"}},
            .loss = &conv_loss}),
      conv({.name = "conv2d_backward_weight",
            .what = "dweight (C_out, C_in/groups, k, k), dbias (C_out) from dout and x",
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) {
              const kernels::ConvShape s = conv_shape(d);
              return 4.0 * (x_size(s) + w_size(s) + s.C_out + out_size(s));
            },
            .make = &make_conv_backward_weight, .reference = &conv_backward_weight_reference,
            .call = call(op::conv2d_backward_weight<float>, &call_conv_backward_weight<float>,
                         op::conv2d_backward_weight<double>, &call_conv_backward_weight<double>),
            .grads = {{.output = "dweight", .input = "weight"}, {.output = "dbias", .input = "bias"}},
            .loss = &conv_loss}),
      pool({.name = "max_pool2d_forward",
            .what = "out, index (planes, H_out, W_out) = each k x k window's max and its position h W + w",
            .tolerance = 0, .tolerance64 = 0,
            .bytes = [](const Dims& d) {
              const kernels::PoolShape s = pool_shape(d);
              return 4.0 * pool_in(s) + 12.0 * pool_out(s);
            },
            .make = &make_max_forward, .reference = &max_forward_reference,
            .call = call(op::max_pool2d_forward<float>, &call_max_forward<float>, op::max_pool2d_forward<double>,
                         &call_max_forward<double>)}),
      pool({.name = "max_pool2d_backward", .what = "dx (planes, H, W): dout added at each window's saved index",
            .tolerance = 1e-5,  // overlapping windows add up to k^2 float32 numbers into one input
            .bytes = [](const Dims& d) {
              const kernels::PoolShape s = pool_shape(d);
              return 4.0 * pool_in(s) + 12.0 * pool_out(s);
            },
            .make = [](Problem& p, Random& r) { make_pool_backward(p, r, true); },
            .reference = &max_backward_reference,
            .call = call(op::max_pool2d_backward<float>, &call_max_backward<float>, op::max_pool2d_backward<double>,
                         &call_max_backward<double>),
            .grads = {{.output = "dx", .input = "x"}},
            .loss = [](const Problem& p) { return pool_loss(p, true); }}),
      pool({.name = "avg_pool2d_forward", .what = "out (planes, H_out, W_out) = each k x k window's mean (padding as 0)",
            .tolerance = 1e-6,
            .bytes = [](const Dims& d) {
              const kernels::PoolShape s = pool_shape(d);
              return 4.0 * (pool_in(s) + pool_out(s));
            },
            .make = &make_pool_forward, .reference = &avg_forward_reference,
            .call = call(op::avg_pool2d_forward<float>, &call_avg_forward<float>, op::avg_pool2d_forward<double>,
                         &call_avg_forward<double>)}),
      pool({.name = "avg_pool2d_backward", .what = "dx (planes, H, W): dout / k^2 added to each input of its window",
            .tolerance = 1e-6,
            .bytes = [](const Dims& d) {
              const kernels::PoolShape s = pool_shape(d);
              return 4.0 * (pool_in(s) + pool_out(s));
            },
            .make = [](Problem& p, Random& r) { make_pool_backward(p, r, false); },
            .reference = &avg_backward_reference,
            .call = call(op::avg_pool2d_backward<float>, &call_avg_backward<float>, op::avg_pool2d_backward<double>,
                         &call_avg_backward<double>),
            .grads = {{.output = "dx", .input = "x"}},
            .loss = [](const Problem& p) { return pool_loss(p, false); }}),
  };
}

}  // namespace brrr::lab
