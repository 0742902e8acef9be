// kernels/cpu/pool.cpp: max and average pooling over (H, W) planes, with their backward.
// Chapter 09 (convolutions). Read before: conv_im2col.cpp. Read next: register.cpp.
//
// Pooling is a convolution-shaped window with a fixed reduction instead of learned weights:
// max or mean over each (kH, kW) window, every plane (one channel of one image) on its own.
// Max pooling's backward needs to know which input won each window, so the forward keeps its
// index (h * W + w inside the plane, as PyTorch's return_indices) and the backward adds dout
// there. Threads split the planes; a plane's windows may overlap (stride < kernel), so its
// backward adds them one at a time, in order: deterministic.
#include <limits>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace brrr::kernels::cpu {

namespace {
using i64 = std::int64_t;
}  // namespace

// A window's first largest input wins; NaN counts as largest (as torch.max), so it propagates.
template <class T>
void max_pool2d_forward(T* out, i64* index, const T* x, const PoolShape& s, Stream) {
  parallel_for(s.planes, grain(s.H * s.W + s.H_out * s.W_out * s.kH * s.kW, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 pl = begin; pl < end; ++pl) {
      const T* in = x + pl * s.H * s.W;
      for (i64 oh = 0; oh < s.H_out; ++oh)
        for (i64 ow = 0; ow < s.W_out; ++ow) {
          T best = -std::numeric_limits<T>::infinity();
          i64 best_i = -1;
          for (i64 kh = 0; kh < s.kH; ++kh) {
            const i64 ih = oh * s.stride_h - s.pad_h + kh;
            if (ih < 0 || ih >= s.H) continue;
            for (i64 kw = 0; kw < s.kW; ++kw) {
              const i64 iw = ow * s.stride_w - s.pad_w + kw;
              if (iw < 0 || iw >= s.W) continue;
              const T v = in[ih * s.W + iw];
              if (best_i < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
                best = v;
                best_i = ih * s.W + iw;
              }
            }
          }
          out[(pl * s.H_out + oh) * s.W_out + ow] = best;
          index[(pl * s.H_out + oh) * s.W_out + ow] = best_i;
        }
    }
  });
}

template <class T>
void max_pool2d_backward(T* dx, const T* dout, const i64* index, const PoolShape& s, Stream) {
  parallel_for(s.planes, grain(s.H * s.W + s.H_out * s.W_out * s.kH * s.kW, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 pl = begin; pl < end; ++pl) {
      T* d = dx + pl * s.H * s.W;
      std::fill(d, d + s.H * s.W, T(0));
      for (i64 o = 0; o < s.H_out * s.W_out; ++o) {
        const i64 i = index[pl * s.H_out * s.W_out + o];
        if (i >= 0) d[i] += dout[pl * s.H_out * s.W_out + o];
      }
    }
  });
}

// The mean of each window, padding counted as zeros: divisor kH kW.
template <class T>
void avg_pool2d_forward(T* out, const T* x, const PoolShape& s, Stream) {
  const double scale = 1.0 / static_cast<double>(s.kH * s.kW);
  parallel_for(s.planes, grain(s.H * s.W + s.H_out * s.W_out * s.kH * s.kW, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 pl = begin; pl < end; ++pl) {
      const T* in = x + pl * s.H * s.W;
      for (i64 oh = 0; oh < s.H_out; ++oh)
        for (i64 ow = 0; ow < s.W_out; ++ow) {
          double acc = 0.0;
          for (i64 kh = 0; kh < s.kH; ++kh) {
            const i64 ih = oh * s.stride_h - s.pad_h + kh;
            if (ih < 0 || ih >= s.H) continue;
            for (i64 kw = 0; kw < s.kW; ++kw) {
              const i64 iw = ow * s.stride_w - s.pad_w + kw;
              if (iw >= 0 && iw < s.W) acc += in[ih * s.W + iw];
            }
          }
          out[(pl * s.H_out + oh) * s.W_out + ow] = static_cast<T>(acc * scale);
        }
    }
  });
}

// Each output's gradient, divided by kH kW, goes to every input of its window.
template <class T>
void avg_pool2d_backward(T* dx, const T* dout, const PoolShape& s, Stream) {
  const T scale = T(1) / static_cast<T>(s.kH * s.kW);
  parallel_for(s.planes, grain(s.H * s.W + s.H_out * s.W_out * s.kH * s.kW, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 pl = begin; pl < end; ++pl) {
      T* d = dx + pl * s.H * s.W;
      std::fill(d, d + s.H * s.W, T(0));
      for (i64 oh = 0; oh < s.H_out; ++oh)
        for (i64 ow = 0; ow < s.W_out; ++ow) {
          const T g = dout[(pl * s.H_out + oh) * s.W_out + ow] * scale;
          for (i64 kh = 0; kh < s.kH; ++kh) {
            const i64 ih = oh * s.stride_h - s.pad_h + kh;
            if (ih < 0 || ih >= s.H) continue;
            for (i64 kw = 0; kw < s.kW; ++kw) {
              const i64 iw = ow * s.stride_w - s.pad_w + kw;
              if (iw >= 0 && iw < s.W) d[ih * s.W + iw] += g;
            }
          }
        }
    }
  });
}

#define BRRR_POOL(T)                                                                       \
  template void max_pool2d_forward<T>(T*, i64*, const T*, const PoolShape&, Stream);       \
  template void max_pool2d_backward<T>(T*, const T*, const i64*, const PoolShape&, Stream); \
  template void avg_pool2d_forward<T>(T*, const T*, const PoolShape&, Stream);             \
  template void avg_pool2d_backward<T>(T*, const T*, const PoolShape&, Stream);
BRRR_POOL(float)
BRRR_POOL(double)
#undef BRRR_POOL

}  // namespace brrr::kernels::cpu
