// kernels/cpu/conv.cpp: 2-D convolution by its definition, the reference ("direct").
// Chapter 09 (convolutions). Read before: gemm_blocked.cpp. Read next: conv_im2col.cpp (the
// same convolution lowered to one GEMM, the default), then pool.cpp.
//
// out[n, co, oh, ow] = bias[co] + sum over ci in co's group, kh, kw of
//     x[n, ci, oh * stride_h - pad_h + kh * dil_h, ow * stride_w - pad_w + kw * dil_w] * w[co, ci', kh, kw]
// where a position outside the image reads 0 (the padding) and ci' = ci - group * C_in/groups.
//
// Every kernel here is a gather: each output element is summed by one thread in a fixed order,
// in double, so the result does not depend on the thread count and is as exact as float32
// allows. The backward of a convolution is two more convolutions (the chapter derives them):
//   dx[n, ci, ih, iw] = sum of dout[n, co, oh, ow] * w[co, ci', kh, kw] over every (co, kh, kw)
//                       whose window position (oh, ow) lands on (ih, iw): a convolution of
//                       dout with the flipped, transposed weight;
//   dw[co, ci', kh, kw] = sum over n, oh, ow of dout[n, co, oh, ow] * x[n, ci, ih, iw]:
//                       a convolution of x with dout as the kernel.
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"

namespace brrr::kernels::cpu {

namespace {
using i64 = std::int64_t;
}  // namespace

// out (N, C_out, H_out, W_out): threads split the (n, co) output planes.
template <class T>
void conv2d_direct_forward(T* out, const T* x, const T* w, const T* bias, const ConvShape& s, Stream) {
  const i64 cin_g = s.C_in / s.groups, cout_g = s.C_out / s.groups;
  parallel_for(s.N * s.C_out, grain(s.H_out * s.W_out * cin_g * s.kH * s.kW, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 nc = begin; nc < end; ++nc) {
      const i64 n = nc / s.C_out, co = nc % s.C_out, g = co / cout_g;
      T* o = out + nc * s.H_out * s.W_out;
      for (i64 oh = 0; oh < s.H_out; ++oh)
        for (i64 ow = 0; ow < s.W_out; ++ow) {
          double acc = bias ? static_cast<double>(bias[co]) : 0.0;
          for (i64 c = 0; c < cin_g; ++c) {
            const T* plane = x + (n * s.C_in + g * cin_g + c) * s.H * s.W;
            const T* wk = w + (co * cin_g + c) * s.kH * s.kW;
            for (i64 kh = 0; kh < s.kH; ++kh) {
              const i64 ih = oh * s.stride_h - s.pad_h + kh * s.dil_h;
              if (ih < 0 || ih >= s.H) continue;
              for (i64 kw = 0; kw < s.kW; ++kw) {
                const i64 iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
                if (iw < 0 || iw >= s.W) continue;
                acc += static_cast<double>(plane[ih * s.W + iw]) * wk[kh * s.kW + kw];
              }
            }
          }
          o[oh * s.W_out + ow] = static_cast<T>(acc);
        }
    }
  });
}

// dx (N, C_in, H, W): for each input pixel, the outputs whose windows cover it. An output
// position oh covers ih through tap kh when oh * stride_h = ih + pad_h - kh * dil_h.
template <class T>
void conv2d_direct_backward_input(T* dx, const T* dout, const T* w, const ConvShape& s, Stream) {
  const i64 cin_g = s.C_in / s.groups, cout_g = s.C_out / s.groups;
  parallel_for(s.N * s.C_in, grain(s.H * s.W * s.kH * s.kW * cout_g, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 nc = begin; nc < end; ++nc) {
      const i64 n = nc / s.C_in, ci = nc % s.C_in, g = ci / cin_g, c = ci % cin_g;
      for (i64 ih = 0; ih < s.H; ++ih)
        for (i64 iw = 0; iw < s.W; ++iw) {
          double acc = 0.0;
          for (i64 kh = 0; kh < s.kH; ++kh) {
            const i64 th = ih + s.pad_h - kh * s.dil_h;
            if (th < 0 || th % s.stride_h != 0 || th / s.stride_h >= s.H_out) continue;
            for (i64 kw = 0; kw < s.kW; ++kw) {
              const i64 tw = iw + s.pad_w - kw * s.dil_w;
              if (tw < 0 || tw % s.stride_w != 0 || tw / s.stride_w >= s.W_out) continue;
              const i64 o = (th / s.stride_h) * s.W_out + tw / s.stride_w;
              for (i64 co = g * cout_g; co < (g + 1) * cout_g; ++co)
                acc += static_cast<double>(dout[(n * s.C_out + co) * s.H_out * s.W_out + o]) *
                       w[((co * cin_g + c) * s.kH + kh) * s.kW + kw];
            }
          }
          dx[nc * s.H * s.W + ih * s.W + iw] = static_cast<T>(acc);
        }
    }
  });
}

// dweight (C_out, C_in/groups, kH, kW) and dbias (C_out): threads split the output channels.
template <class T>
void conv2d_direct_backward_weight(T* dw, T* dbias, const T* dout, const T* x, const ConvShape& s, Stream) {
  const i64 cin_g = s.C_in / s.groups, cout_g = s.C_out / s.groups, P = s.H_out * s.W_out;
  parallel_for(s.C_out, grain(cin_g * s.kH * s.kW * s.N * P, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 co = begin; co < end; ++co) {
      const i64 g = co / cout_g;
      for (i64 c = 0; c < cin_g; ++c)
        for (i64 kh = 0; kh < s.kH; ++kh)
          for (i64 kw = 0; kw < s.kW; ++kw) {
            double acc = 0.0;
            for (i64 n = 0; n < s.N; ++n) {
              const T* plane = x + (n * s.C_in + g * cin_g + c) * s.H * s.W;
              const T* d = dout + (n * s.C_out + co) * P;
              for (i64 oh = 0; oh < s.H_out; ++oh) {
                const i64 ih = oh * s.stride_h - s.pad_h + kh * s.dil_h;
                if (ih < 0 || ih >= s.H) continue;
                for (i64 ow = 0; ow < s.W_out; ++ow) {
                  const i64 iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
                  if (iw < 0 || iw >= s.W) continue;
                  acc += static_cast<double>(d[oh * s.W_out + ow]) * plane[ih * s.W + iw];
                }
              }
            }
            dw[((co * cin_g + c) * s.kH + kh) * s.kW + kw] = static_cast<T>(acc);
          }
      if (dbias) {
        double acc = 0.0;
        for (i64 n = 0; n < s.N; ++n)
          for (i64 p = 0; p < P; ++p) acc += dout[(n * s.C_out + co) * P + p];
        dbias[co] = static_cast<T>(acc);
      }
    }
  });
}

#define BRRR_CONV_DIRECT(T)                                                                                  \
  template void conv2d_direct_forward<T>(T*, const T*, const T*, const T*, const ConvShape&, Stream);        \
  template void conv2d_direct_backward_input<T>(T*, const T*, const T*, const ConvShape&, Stream);          \
  template void conv2d_direct_backward_weight<T>(T*, T*, const T*, const T*, const ConvShape&, Stream);
BRRR_CONV_DIRECT(float)
BRRR_CONV_DIRECT(double)
#undef BRRR_CONV_DIRECT

}  // namespace brrr::kernels::cpu
