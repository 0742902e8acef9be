// kernels/cpu/conv_im2col.cpp: convolution lowered to matrix multiplication (im2col + GEMM),
// the default CPU variant. Chapter 09 (convolutions). Read before: conv.cpp (the definition).
// Read next: pool.cpp.
//
// A convolution is a matmul in disguise. Copy every window the kernel visits into a column:
// for a group of images, the matrix
//   col (C_in kH kW, nb H_out W_out),  col[(ci, kh, kw), (b, oh, ow)] = x[b, ci, ih, iw] or 0
// ("image to columns"). Then each output channel is one row of the weight, (C_in kH kW), times
// col, and the whole layer is one GEMM:
//   out (C_out, nb H_out W_out) = weight (C_out, C_in kH kW) @ col
// with groups as a batch of G smaller GEMMs. The GEMM is the registry's (gemm_blocked.cpp for
// float32 on AVX-512), so the convolution runs at matmul speed for the price of a copy that is
// kH kW times the input. The backward is two more GEMMs over the same col:
//   dweight = dout (C_out, nb P) @ col^T          (summed over the image groups in order)
//   dcol    = weight^T @ dout, then col2im: each column entry added back to the pixel it
//             was copied from (the transpose of im2col).
// Images go in groups (nb, below) so col stays a few MiB however large the batch. Every copy
// is split over threads by rows, the GEMM is bitwise the same for any thread count, and sums
// across image groups go in order: the result does not depend on the number of threads.
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/registry.h"

namespace brrr::kernels::cpu {

namespace {
using i64 = std::int64_t;

// At most this many elements of col at once (16 MiB of float32): measured at the ResNet-like
// layer (docs/measurements.md), larger groups of images were no faster.
constexpr i64 kColBudget = i64{1} << 22;

i64 images_per_group(const ConvShape& s) {
  const i64 per_image = s.C_in * s.kH * s.kW * s.H_out * s.W_out;
  return std::max<i64>(1, std::min<i64>(s.N, kColBudget / std::max<i64>(per_image, 1)));
}

// The output columns [lo, hi) whose tap kw reads inside the image (iw = ow stride - pad + kw dil
// in [0, W)): outside them im2col writes zeros and col2im adds nothing, so the loops over the
// inside run without a bounds check (and with stride 1 they are plain copies).
struct Span {
  i64 lo, hi;
};
Span inside(i64 offset, i64 stride, i64 size, i64 out) {  // first/last o with 0 <= o stride + offset < size
  const i64 lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const i64 hi = size - offset <= 0 ? 0 : (size - 1 - offset) / stride + 1;
  return {std::min(lo, out), std::max(std::min(hi, out), std::min(lo, out))};
}

// col (C_in kH kW, nb P) from images x (nb, C_in, H, W), P = H_out W_out.
template <class T>
void im2col(T* col, const T* x, i64 nb, const ConvShape& s) {
  const i64 P = s.H_out * s.W_out, rows = s.C_in * s.kH * s.kW;
  parallel_for(rows, grain(nb * P, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 r = begin; r < end; ++r) {
      const i64 ci = r / (s.kH * s.kW), kh = r / s.kW % s.kH, kw = r % s.kW;
      const i64 off_w = kw * s.dil_w - s.pad_w;
      const Span in = inside(off_w, s.stride_w, s.W, s.W_out);
      for (i64 b = 0; b < nb; ++b) {
        const T* plane = x + (b * s.C_in + ci) * s.H * s.W;
        T* dst = col + r * nb * P + b * P;
        for (i64 oh = 0; oh < s.H_out; ++oh) {
          const i64 ih = oh * s.stride_h - s.pad_h + kh * s.dil_h;
          T* line = dst + oh * s.W_out;
          if (ih < 0 || ih >= s.H) {
            std::fill(line, line + s.W_out, T(0));
            continue;
          }
          const T* src = plane + ih * s.W + off_w;  // src[ow * stride_w] is x[.., ih, iw]
          std::fill(line, line + in.lo, T(0));
          if (s.stride_w == 1) std::copy(src + in.lo, src + in.hi, line + in.lo);
          else
            for (i64 ow = in.lo; ow < in.hi; ++ow) line[ow] = src[ow * s.stride_w];
          std::fill(line + in.hi, line + s.W_out, T(0));
        }
      }
    }
  });
}

// dx (nb, C_in, H, W) = col2im(dcol): every entry of dcol added to the pixel im2col copied it
// from. Threads split the (image, channel) planes; within a plane the taps add in order.
template <class T>
void col2im(T* dx, const T* dcol, i64 nb, const ConvShape& s) {
  const i64 P = s.H_out * s.W_out;
  parallel_for(nb * s.C_in, grain(s.kH * s.kW * P, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 bc = begin; bc < end; ++bc) {
      const i64 b = bc / s.C_in, ci = bc % s.C_in;
      T* plane = dx + bc * s.H * s.W;
      std::fill(plane, plane + s.H * s.W, T(0));
      for (i64 kh = 0; kh < s.kH; ++kh)
        for (i64 kw = 0; kw < s.kW; ++kw) {
          const T* src = dcol + ((ci * s.kH + kh) * s.kW + kw) * nb * P + b * P;
          const i64 off_w = kw * s.dil_w - s.pad_w;
          const Span in = inside(off_w, s.stride_w, s.W, s.W_out);
          for (i64 oh = 0; oh < s.H_out; ++oh) {
            const i64 ih = oh * s.stride_h - s.pad_h + kh * s.dil_h;
            if (ih < 0 || ih >= s.H) continue;
            T* dst = plane + ih * s.W + off_w;
            const T* line = src + oh * s.W_out;
            for (i64 ow = in.lo; ow < in.hi; ++ow) dst[ow * s.stride_w] += line[ow];
          }
        }
    }
  });
}

// The registry's matmul for T on the CPU, looked up once per generation.
template <class T>
matmul_fn<T> gemm() {
  static Kernel<matmul_fn<T>> k(op::matmul<T>);
  return k(DeviceType::CPU);
}

// G GEMMs, one per group: out_g (M, N) = a_g @ b_g, each operand's groups `stride` apart.
template <class T>
void grouped_gemm(T* out, const T* a, const T* b, i64 G, i64 M, i64 N, i64 K, bool trans_a, bool trans_b,
                  bool accumulate) {
  gemm<T>()(out, a, b, MatmulShape::grouped(G, M, N, K, trans_a, trans_b, accumulate), nullptr);
}

// dout of images [n0, n0 + nb) as (C_out, nb P): for one image it is dout itself; for more,
// a transposing copy into buf.
template <class T>
const T* dout_as_rows(std::vector<T>& buf, const T* dout, i64 n0, i64 nb, const ConvShape& s) {
  const i64 P = s.H_out * s.W_out;
  if (nb == 1) return dout + n0 * s.C_out * P;
  buf.resize(s.C_out * nb * P);
  parallel_for(s.C_out * nb, grain(P, kLayerGrain), [&](i64 begin, i64 end) {
    for (i64 cb = begin; cb < end; ++cb) {
      const i64 co = cb / nb, b = cb % nb;
      std::copy_n(dout + ((n0 + b) * s.C_out + co) * P, P, buf.data() + cb * P);
    }
  });
  return buf.data();
}
}  // namespace

template <class T>
void conv2d_im2col_forward(T* out, const T* x, const T* w, const T* bias, const ConvShape& s, Stream) {
  const i64 P = s.H_out * s.W_out, G = s.groups, cout_g = s.C_out / G, kg = s.C_in / G * s.kH * s.kW;
  const i64 nb_max = images_per_group(s);
  std::vector<T> col(s.C_in * s.kH * s.kW * nb_max * P), tmp(nb_max > 1 ? s.C_out * nb_max * P : 0);
  for (i64 n0 = 0; n0 < s.N; n0 += nb_max) {
    const i64 nb = std::min(nb_max, s.N - n0);
    im2col(col.data(), x + n0 * s.C_in * s.H * s.W, nb, s);
    // One image: the GEMM writes (C_out, P) straight into its output; more: into tmp.
    T* rows = nb == 1 ? out + n0 * s.C_out * P : tmp.data();
    grouped_gemm(rows, w, col.data(), G, cout_g, nb * P, kg, false, false, false);
    parallel_for(nb * s.C_out, grain(P, kLayerGrain), [&](i64 begin, i64 end) {  // (C_out, nb P) -> (nb, C_out, P), + bias
      for (i64 bc = begin; bc < end; ++bc) {
        const i64 b = bc / s.C_out, co = bc % s.C_out;
        T* dst = out + (n0 + b) * s.C_out * P + co * P;
        const T* src = rows + co * nb * P + b * P;
        const T add = bias ? bias[co] : T(0);
        for (i64 p = 0; p < P; ++p) dst[p] = src[p] + add;
      }
    });
  }
}

template <class T>
void conv2d_im2col_backward_input(T* dx, const T* dout, const T* w, const ConvShape& s, Stream) {
  const i64 P = s.H_out * s.W_out, G = s.groups, cout_g = s.C_out / G, kg = s.C_in / G * s.kH * s.kW;
  const i64 nb_max = images_per_group(s);
  std::vector<T> dcol(s.C_in * s.kH * s.kW * nb_max * P), buf;
  for (i64 n0 = 0; n0 < s.N; n0 += nb_max) {
    const i64 nb = std::min(nb_max, s.N - n0);
    const T* d = dout_as_rows(buf, dout, n0, nb, s);
    // dcol_g (kg, nb P) = weight_g^T (kg, cout_g) @ dout_g (cout_g, nb P)
    grouped_gemm(dcol.data(), w, d, G, kg, nb * P, cout_g, true, false, false);
    col2im(dx + n0 * s.C_in * s.H * s.W, dcol.data(), nb, s);
  }
}

template <class T>
void conv2d_im2col_backward_weight(T* dw, T* dbias, const T* dout, const T* x, const ConvShape& s, Stream) {
  const i64 P = s.H_out * s.W_out, G = s.groups, cout_g = s.C_out / G, kg = s.C_in / G * s.kH * s.kW;
  const i64 nb_max = images_per_group(s);
  std::vector<T> col(s.C_in * s.kH * s.kW * nb_max * P), buf;
  for (i64 n0 = 0; n0 < s.N; n0 += nb_max) {
    const i64 nb = std::min(nb_max, s.N - n0);
    im2col(col.data(), x + n0 * s.C_in * s.H * s.W, nb, s);
    const T* d = dout_as_rows(buf, dout, n0, nb, s);
    // dweight_g (cout_g, kg) += dout_g (cout_g, nb P) @ col_g^T; the first group of images
    // overwrites. (An empty batch leaves nothing to add: dweight is zero, set below.)
    grouped_gemm(dw, d, col.data(), G, cout_g, kg, nb * P, false, true, n0 > 0);
  }
  if (s.N == 0) std::fill(dw, dw + s.C_out * kg, T(0));
  if (dbias)  // the sum of dout over images and positions, in double, in order
    parallel_for(s.C_out, grain(s.N * P, kLayerGrain), [&](i64 begin, i64 end) {
      for (i64 co = begin; co < end; ++co) {
        double acc = 0.0;
        for (i64 n = 0; n < s.N; ++n)
          for (i64 p = 0; p < P; ++p) acc += dout[(n * s.C_out + co) * P + p];
        dbias[co] = static_cast<T>(acc);
      }
    });
}

#define BRRR_CONV_IM2COL(T)                                                                                \
  template void conv2d_im2col_forward<T>(T*, const T*, const T*, const T*, const ConvShape&, Stream);      \
  template void conv2d_im2col_backward_input<T>(T*, const T*, const T*, const ConvShape&, Stream);        \
  template void conv2d_im2col_backward_weight<T>(T*, T*, const T*, const T*, const ConvShape&, Stream);
BRRR_CONV_IM2COL(float)
BRRR_CONV_IM2COL(double)
#undef BRRR_CONV_IM2COL

}  // namespace brrr::kernels::cpu
