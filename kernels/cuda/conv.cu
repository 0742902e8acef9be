// kernels/cuda/conv.cu: convolution and pooling on the GPU, forward and backward.
// Chapter 09 (convolutions), its GPU section. Read before: kernels/cpu/conv_im2col.cpp (the
// same lowering on the CPU), kernels/cuda/matmul/ (the GEMMs it calls). Read next:
// tests/emulator/test_conv_cuda.cpp (how it is checked).
//
// Two ways to convolve, as on the CPU:
//   1. im2col + GEMM (the default): copy every window into a column of
//        col (C_in kH kW, nb H_out W_out)
//      for a group of nb images, then out = weight @ col is one matrix multiplication per
//      convolution group, done by the registry's CUDA matmul (cuBLAS on a GPU, the hand-written
//      kernels of kernels/cuda/matmul/ in the emulator). The backward is two more GEMMs over the same
//      layout: dweight = dout @ col^T, dcol = weight^T @ dout, then col2im sends each entry
//      of dcol back to the pixel it came from. All the arithmetic runs in the GEMM, the
//      fastest kernel there is; the price is col, kH kW times the input, in device memory.
//   2. direct, tiled (forward only): a block computes an 8 x 16 tile of output pixels for 8
//      output channels, staging, one input channel at a time, the input patch the tile reads
//      and the 8 channels' weights in shared memory. No col buffer and one launch, but the
//      inner loop is a handful of multiply-adds per shared-memory load, far from what a GEMM's
//      register blocking reaches at wide layers; it wins where a GEMM is starved (few channels,
//      depthwise layers, where each group's GEMM is a single row).
// Pooling is a thread per output for the forward and, for the backward, a thread per input
// that gathers the outputs whose windows cover it: windows overlap when stride < kernel, and a
// scatter would need atomics (and float atomics add in an order that changes run to run).
// col2im gathers for the same reason. Every result here is the same, bit for bit, every run.
//
// Everything is checked against kernels/cpu/conv.cpp and pool.cpp by the kernel lab
// (`brrr kernel-lab conv2d_forward --device cuda`, and the emulator in ctest at ragged shapes).
#include "kernels/cuda/conv.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {
using i64 = std::int64_t;

// Elementwise kernels use grid-stride loops over at most one wave of blocks (132 SMs x 8
// blocks of 256 threads on an H100), so any size launches.
constexpr int kBlockSize = 256;
constexpr int kMaxBlocks = 132 * 8;

// col and the rearranged dout together hold at most this many elements (64 MiB of float32):
// images go through the GEMMs in groups small enough to fit it. One image of the ResNet-like
// layer (64 -> 64 channels, 56 x 56, 3 x 3) needs 2 M of them, so its groups are 8 images.
// (Tests lower it with set_conv_workspace_budget, so tiny shapes take the several-groups path.)
i64 workspace_budget = i64{1} << 24;

i64 images_per_group(const ConvShape& s) {
  const i64 per_image = (s.C_in * s.kH * s.kW + s.C_out) * s.H_out * s.W_out;
  return std::max<i64>(1, std::min<i64>(s.N, workspace_budget / std::max<i64>(per_image, 1)));
}

// Rounds an element count up to 64, so buffers carved one after another from the workspace
// start 256-byte aligned (the GEMMs' vector loads want 16).
i64 padded(i64 n) { return (n + 63) / 64 * 64; }
}  // namespace

// std::min is not a device function without nvcc's --expt-relaxed-constexpr.
static __device__ inline i64 min_of(i64 a, i64 b) { return a < b ? a : b; }

std::int64_t set_conv_workspace_budget(std::int64_t elements) {
  const i64 old = workspace_budget;
  workspace_budget = std::max<i64>(elements, 1);
  return old;
}

// =============================================================================================
// Variant 1: im2col + GEMM.

// col (C_in kH kW, nb P) from images x (nb, C_in, H, W), P = H_out W_out: one thread per entry
// of col, in col's order, so consecutive threads write consecutive addresses; reads of one
// row of taps are `stride_w` apart.
template <class T>
__global__ void im2col_kernel(T* col, const T* x, i64 nb, ConvShape s) {
  const i64 P = s.H_out * s.W_out, total = s.C_in * s.kH * s.kW * nb * P;
  const i64 step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const i64 r = i / (nb * P), b = i / P % nb, p = i % P;
    const i64 ci = r / (s.kH * s.kW), kh = r / s.kW % s.kH, kw = r % s.kW;
    const i64 ih = p / s.W_out * s.stride_h - s.pad_h + kh * s.dil_h;
    const i64 iw = p % s.W_out * s.stride_w - s.pad_w + kw * s.dil_w;
    const bool inside = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W;
    col[i] = inside ? x[((b * s.C_in + ci) * s.H + ih) * s.W + iw] : T(0);
  }
}

// dx (nb, C_in, H, W) = col2im(dcol): one thread per input pixel, adding the entries of dcol
// that im2col copied from it, taps in order. Tap (kh, kw) copied pixel ih into output row oh
// when ih = oh stride - pad + kh dil, so oh = (ih + pad - kh dil) / stride if that divides
// evenly and lands inside [0, H_out).
template <class T>
__global__ void col2im_kernel(T* dx, const T* dcol, i64 nb, ConvShape s) {
  const i64 P = s.H_out * s.W_out, total = nb * s.C_in * s.H * s.W;
  const i64 step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const i64 iw = i % s.W, ih = i / s.W % s.H, ci = i / (s.H * s.W) % s.C_in, b = i / (s.C_in * s.H * s.W);
    T sum = 0;
    for (i64 kh = 0; kh < s.kH; ++kh) {
      const i64 th = ih + s.pad_h - kh * s.dil_h;
      if (th < 0 || th % s.stride_h != 0 || th / s.stride_h >= s.H_out) continue;
      for (i64 kw = 0; kw < s.kW; ++kw) {
        const i64 tw = iw + s.pad_w - kw * s.dil_w;
        if (tw < 0 || tw % s.stride_w != 0 || tw / s.stride_w >= s.W_out) continue;
        const i64 r = (ci * s.kH + kh) * s.kW + kw;
        sum += dcol[r * nb * P + b * P + th / s.stride_h * s.W_out + tw / s.stride_w];
      }
    }
    dx[i] = sum;
  }
}

// out (nb, C_out, P) = rows (C_out, nb P), + bias[co] (bias may be nullptr).
template <class T>
__global__ void rows_to_images_kernel(T* out, const T* rows, const T* bias, i64 nb, i64 C_out, i64 P) {
  const i64 total = nb * C_out * P, step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const i64 p = i % P, co = i / P % C_out, b = i / (C_out * P);
    out[i] = rows[(co * nb + b) * P + p] + (bias ? bias[co] : T(0));
  }
}

// rows (C_out, nb P) = dout (nb, C_out, P): the transpose of the above, no bias.
template <class T>
__global__ void images_to_rows_kernel(T* rows, const T* dout, i64 nb, i64 C_out, i64 P) {
  const i64 total = nb * C_out * P, step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const i64 p = i % P, b = i / P % nb, co = i / (nb * P);
    rows[i] = dout[(b * C_out + co) * P + p];
  }
}

// dbias[co] = the sum of dout[n, co, :] over images and positions: a block per channel, each
// thread a fixed strided share, then block_sum's fixed tree. Deterministic, no atomics.
template <class T>
__global__ void bias_grad_kernel(T* dbias, const T* dout, i64 N, i64 C_out, i64 P) {
  __shared__ T scratch[32];
  const i64 co = blockIdx.x;
  T sum = 0;
  for (i64 i = threadIdx.x; i < N * P; i += blockDim.x) sum += dout[(i / P * C_out + co) * P + i % P];
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) dbias[co] = sum;
}

template <class T>
__global__ void conv_zero_kernel(T* out, i64 n) {
  const i64 step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) out[i] = T(0);
}

namespace {

// The registry's matmul for T on this device (the GPU's or the emulator's, whichever
// registered), looked up once per registry generation, so a student's selected matmul
// (BRRR_KERNELS=matmul=...) runs inside the convolution too. No matmul variant uses
// workspace(), which holds col while the GEMM runs.
template <class T>
matmul_fn<T> gemm() {
  static Kernel<matmul_fn<T>> k(op::matmul<T>);
  return k(DeviceType::CUDA);
}

// G GEMMs as one batched call, one per convolution group: out_g (M, N) = a_g @ b_g.
template <class T>
void grouped_gemm(T* out, const T* a, const T* b, i64 G, i64 M, i64 N, i64 K, bool trans_a, bool trans_b,
                  bool accumulate, Stream stream) {
  gemm<T>()(out, a, b, MatmulShape::grouped(G, M, N, K, trans_a, trans_b, accumulate), stream);
}

template <class T>
void zero(T* out, i64 n, Stream stream) {
  if (n > 0) BRRR_LAUNCH((conv_zero_kernel<T>), grid_for(n, kBlockSize, kMaxBlocks), kBlockSize, 0, stream, out, n);
}

int elementwise_grid(i64 n) { return grid_for(n, kBlockSize, kMaxBlocks); }

// The device workspace as col (C_in kH kW, nb_max P) followed by rows (C_out, nb_max P).
template <class T>
struct ConvBuffers {
  T* col;
  T* rows;
};
template <class T>
ConvBuffers<T> conv_buffers(const ConvShape& s, i64 nb_max, Stream stream) {
  const i64 P = s.H_out * s.W_out, col = padded(s.C_in * s.kH * s.kW * nb_max * P);
  const i64 rows = padded(s.C_out * nb_max * P);
  T* base = static_cast<T*>(workspace(static_cast<std::size_t>(col + rows) * sizeof(T), stream));
  return {base, base + col};
}

}  // namespace

template <class T>
void conv2d_im2col_forward(T* out, const T* x, const T* w, const T* bias, const ConvShape& s, Stream stream) {
  const i64 P = s.H_out * s.W_out, G = s.groups, cout_g = s.C_out / G, kg = s.C_in / G * s.kH * s.kW;
  if (s.N * s.C_out * P == 0) return;
  const i64 nb_max = images_per_group(s);
  const ConvBuffers<T> buf = conv_buffers<T>(s, nb_max, stream);
  for (i64 n0 = 0; n0 < s.N; n0 += nb_max) {
    const i64 nb = std::min(nb_max, s.N - n0);
    BRRR_LAUNCH((im2col_kernel<T>), elementwise_grid(s.C_in * s.kH * s.kW * nb * P), kBlockSize, 0, stream, buf.col,
                x + n0 * s.C_in * s.H * s.W, nb, s);
    // rows_g (cout_g, nb P) = weight_g (cout_g, kg) @ col_g (kg, nb P), then to (nb, C_out, P) + bias.
    grouped_gemm(buf.rows, w, buf.col, G, cout_g, nb * P, kg, false, false, false, stream);
    BRRR_LAUNCH((rows_to_images_kernel<T>), elementwise_grid(nb * s.C_out * P), kBlockSize, 0, stream,
                out + n0 * s.C_out * P, buf.rows, bias, nb, s.C_out, P);
  }
}

template <class T>
void conv2d_im2col_backward_input(T* dx, const T* dout, const T* w, const ConvShape& s, Stream stream) {
  const i64 P = s.H_out * s.W_out, G = s.groups, cout_g = s.C_out / G, kg = s.C_in / G * s.kH * s.kW;
  if (s.N * s.C_in * s.H * s.W == 0) return;
  if (P == 0) return zero(dx, s.N * s.C_in * s.H * s.W, stream);  // no output read any pixel
  const i64 nb_max = images_per_group(s);
  const ConvBuffers<T> buf = conv_buffers<T>(s, nb_max, stream);
  for (i64 n0 = 0; n0 < s.N; n0 += nb_max) {
    const i64 nb = std::min(nb_max, s.N - n0);
    BRRR_LAUNCH((images_to_rows_kernel<T>), elementwise_grid(nb * s.C_out * P), kBlockSize, 0, stream, buf.rows,
                dout + n0 * s.C_out * P, nb, s.C_out, P);
    // dcol_g (kg, nb P) = weight_g^T (kg, cout_g) @ dout_g (cout_g, nb P), into col's buffer.
    grouped_gemm(buf.col, w, buf.rows, G, kg, nb * P, cout_g, true, false, false, stream);
    BRRR_LAUNCH((col2im_kernel<T>), elementwise_grid(nb * s.C_in * s.H * s.W), kBlockSize, 0, stream,
                dx + n0 * s.C_in * s.H * s.W, buf.col, nb, s);
  }
}

template <class T>
void conv2d_im2col_backward_weight(T* dw, T* dbias, const T* dout, const T* x, const ConvShape& s, Stream stream) {
  const i64 P = s.H_out * s.W_out, G = s.groups, cout_g = s.C_out / G, kg = s.C_in / G * s.kH * s.kW;
  if (dbias && s.C_out > 0) {
    if (s.N * P == 0) zero(dbias, s.C_out, stream);
    else BRRR_LAUNCH((bias_grad_kernel<T>), static_cast<int>(s.C_out), kBlockSize, 0, stream, dbias, dout, s.N, s.C_out, P);
  }
  if (s.C_out * kg == 0) return;
  if (s.N * P == 0) return zero(dw, s.C_out * kg, stream);  // an empty sum
  const i64 nb_max = images_per_group(s);
  const ConvBuffers<T> buf = conv_buffers<T>(s, nb_max, stream);
  for (i64 n0 = 0; n0 < s.N; n0 += nb_max) {
    const i64 nb = std::min(nb_max, s.N - n0);
    BRRR_LAUNCH((im2col_kernel<T>), elementwise_grid(s.C_in * s.kH * s.kW * nb * P), kBlockSize, 0, stream, buf.col,
                x + n0 * s.C_in * s.H * s.W, nb, s);
    BRRR_LAUNCH((images_to_rows_kernel<T>), elementwise_grid(nb * s.C_out * P), kBlockSize, 0, stream, buf.rows,
                dout + n0 * s.C_out * P, nb, s.C_out, P);
    // dweight_g (cout_g, kg) (+)= dout_g (cout_g, nb P) @ col_g^T (nb P, kg): the first group
    // of images overwrites, the others add, in order.
    grouped_gemm(dw, buf.rows, buf.col, G, cout_g, kg, nb * P, false, true, n0 > 0, stream);
  }
}

// =============================================================================================
// Variant 2: direct, an output tile per block.
//
// Block (16, 8) computes out[n, co0 .. co0 + 8, oh0 .. oh0 + 8, ow0 .. ow0 + 16]: each thread
// one pixel for 8 output channels, 8 running sums in registers. For each input channel of
// the group, the block stages in shared memory
//   - the input patch the tile reads: ((8 - 1) stride_h + (kH - 1) dil_h + 1) rows by
//     ((16 - 1) stride_w + (kW - 1) dil_w + 1) columns, zeros where it hangs over the padding,
//     loaded once by all 128 threads (without it, each input pixel of a 3 x 3 stride-1 layer
//     would be loaded from global memory by 9 threads, for each of the 8 channels' loops);
//   - the 8 channels' kH x kW weights for that input channel,
// then every thread does kH kW x 8 multiply-adds from shared memory. The grid is
// (tiles along W x channel tiles, tiles along H, images x groups); a channel tile never
// crosses a group, so a depthwise layer (one channel per group) leaves 7 of the 8 sums idle.
// Expect it to lose to im2col + cuBLAS at the ResNet-like layer (64 channels: each staged
// pixel feeds only 8 channels, where a GEMM tile reuses it across 64 or 128) and to do
// better where the GEMM's rows are few.

constexpr int kTileW = 16, kTileH = 8, kTileC = 8;
constexpr std::size_t kMaxDirectShared = 48 * 1024;  // what a block gets without opting in

// __launch_bounds__: 8 running sums and the index arithmetic take 72 registers (82 in double),
// too many for a 1024-thread block; the block is 128 threads, and saying so lets ptxas plan
// for it (scripts/check_kernel_resources.py).
template <class T>
__global__ void __launch_bounds__(kTileW * kTileH) conv2d_direct_kernel(T* out, const T* x, const T* w, const T* bias, ConvShape s, int patch_h,
                                     int patch_w, i64 channel_tiles) {
  BRRR_DYNAMIC_SHARED(T, smem);
  const i64 taps = s.kH * s.kW, cin_g = s.C_in / s.groups, cout_g = s.C_out / s.groups;
  T* patch = smem;                      // (patch_h, patch_w)
  T* weights = smem + patch_h * patch_w;  // (kTileC, kH, kW)
  const i64 tile_w = blockIdx.x / channel_tiles, ctile = blockIdx.x % channel_tiles;
  const i64 n = blockIdx.z / s.groups, g = blockIdx.z % s.groups;
  const i64 oh0 = static_cast<i64>(blockIdx.y) * kTileH, ow0 = tile_w * kTileW;
  const i64 oh = oh0 + threadIdx.y, ow = ow0 + threadIdx.x;
  const i64 co0 = g * cout_g + ctile * kTileC, channels = min_of(kTileC, cout_g - ctile * kTileC);
  const i64 ih0 = oh0 * s.stride_h - s.pad_h, iw0 = ow0 * s.stride_w - s.pad_w;
  const int tid = threadIdx.y * kTileW + threadIdx.x, threads = kTileW * kTileH;

  T acc[kTileC];
  for (int j = 0; j < kTileC; ++j) acc[j] = T(0);
  for (i64 c = 0; c < cin_g; ++c) {
    const T* plane = x + (n * s.C_in + g * cin_g + c) * s.H * s.W;
    __syncthreads();  // the previous channel's patch and weights are no longer read
    for (int i = tid; i < patch_h * patch_w; i += threads) {
      const i64 ih = ih0 + i / patch_w, iw = iw0 + i % patch_w;
      patch[i] = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W ? plane[ih * s.W + iw] : T(0);
    }
    for (int i = tid; i < kTileC * taps; i += threads) {
      const i64 j = i / taps;
      weights[i] = j < channels ? w[((co0 + j) * cin_g + c) * taps + i % taps] : T(0);
    }
    __syncthreads();
    for (i64 kh = 0; kh < s.kH; ++kh)
      for (i64 kw = 0; kw < s.kW; ++kw) {
        const T v = patch[(threadIdx.y * s.stride_h + kh * s.dil_h) * patch_w + threadIdx.x * s.stride_w + kw * s.dil_w];
        for (int j = 0; j < kTileC; ++j) acc[j] += v * weights[j * taps + kh * s.kW + kw];
      }
  }
  if (oh >= s.H_out || ow >= s.W_out) return;
  for (i64 j = 0; j < channels; ++j)
    out[((n * s.C_out + co0 + j) * s.H_out + oh) * s.W_out + ow] = acc[j] + (bias ? bias[co0 + j] : T(0));
}

template <class T>
void conv2d_direct_forward(T* out, const T* x, const T* w, const T* bias, const ConvShape& s, Stream stream) {
  if (s.N * s.C_out * s.H_out * s.W_out == 0) return;
  const i64 patch_h = (kTileH - 1) * s.stride_h + (s.kH - 1) * s.dil_h + 1;
  const i64 patch_w = (kTileW - 1) * s.stride_w + (s.kW - 1) * s.dil_w + 1;
  const std::size_t shared = static_cast<std::size_t>(patch_h * patch_w + kTileC * s.kH * s.kW) * sizeof(T);
  BRRR_CHECK(shared <= kMaxDirectShared, "conv2d_forward (direct): a ", kTileH, " x ", kTileW,
             " tile's input patch (", patch_h, " x ", patch_w, ") and weights need ", shared,
             " bytes of shared memory, more than ", kMaxDirectShared,
             " (stride, dilation or kernel too large for this variant; the im2col variant handles any shape)");
  const i64 channel_tiles = ceil_div(s.C_out / s.groups, kTileC);
  const i64 grid_x = ceil_div(s.W_out, kTileW) * channel_tiles, grid_y = ceil_div(s.H_out, kTileH), grid_z = s.N * s.groups;
  BRRR_CHECK(grid_x <= INT_MAX && grid_y <= 65535 && grid_z <= 65535, "conv2d_forward (direct): a grid of (", grid_x,
             ", ", grid_y, ", ", grid_z, ") blocks exceeds CUDA's (2^31 - 1, 65535, 65535); use the im2col variant");
  BRRR_LAUNCH((conv2d_direct_kernel<T>), dim3(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y),
                                              static_cast<unsigned>(grid_z)),
              dim3(kTileW, kTileH), shared, stream, out, x, w, bias, s, static_cast<int>(patch_h),
              static_cast<int>(patch_w), channel_tiles);
}

// =============================================================================================
// Pooling, over planes = N C independent (H, W) images.
//
// The forward is a thread per output: its window is at most a few dozen loads, all from the
// cache lines its neighbours read too. The backward is a thread per input pixel, which looks
// up the outputs whose windows cover it: rows oh with oh stride - pad <= ih <= oh stride - pad
// + kH - 1, that is oh in [ceil((ih + pad - kH + 1) / stride), floor((ih + pad) / stride)],
// and the same along W. Max pooling adds dout[o] where index[o] is this pixel, average
// pooling adds every dout[o] / (kH kW). Each pixel is written once, by one thread, with the
// outputs added in the CPU's order, so the results are the CPU's bit for bit.

// The first output row (or column) whose window, `k` wide, covers input i.
static __device__ inline i64 first_covering(i64 i, i64 pad, i64 k, i64 stride) {
  const i64 t = i + pad - k + 1;
  return t <= 0 ? 0 : (t + stride - 1) / stride;
}

template <class T>
__global__ void max_pool2d_forward_kernel(T* out, i64* index, const T* x, PoolShape s) {
  const i64 total = s.planes * s.H_out * s.W_out, step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 o = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; o < total; o += step) {
    const i64 ow = o % s.W_out, oh = o / s.W_out % s.H_out, pl = o / (s.H_out * s.W_out);
    const T* in = x + pl * s.H * s.W;
    T best = minus_infinity<T>();
    i64 best_i = -1;
    for (i64 kh = 0; kh < s.kH; ++kh) {
      const i64 ih = oh * s.stride_h - s.pad_h + kh;
      if (ih < 0 || ih >= s.H) continue;
      for (i64 kw = 0; kw < s.kW; ++kw) {
        const i64 iw = ow * s.stride_w - s.pad_w + kw;
        if (iw < 0 || iw >= s.W) continue;
        const T v = in[ih * s.W + iw];
        // The first largest wins; a NaN counts as largest (as torch.max), so it propagates.
        if (best_i < 0 || v > best || (v != v && best == best)) {
          best = v;
          best_i = ih * s.W + iw;
        }
      }
    }
    out[o] = best;
    index[o] = best_i;
  }
}

template <class T>
__global__ void max_pool2d_backward_kernel(T* dx, const T* dout, const i64* index, PoolShape s) {
  const i64 total = s.planes * s.H * s.W, step = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const i64 iw = i % s.W, ih = i / s.W % s.H, pl = i / (s.H * s.W), here = ih * s.W + iw;
    const i64 oh_end = min_of(s.H_out, (ih + s.pad_h) / s.stride_h + 1);
    const i64 ow_end = min_of(s.W_out, (iw + s.pad_w) / s.stride_w + 1);
    T sum = 0;
    for (i64 oh = first_covering(ih, s.pad_h, s.kH, s.stride_h); oh < oh_end; ++oh)
      for (i64 ow = first_covering(iw, s.pad_w, s.kW, s.stride_w); ow < ow_end; ++ow) {
        const i64 o = (pl * s.H_out + oh) * s.W_out + ow;
        if (index[o] == here) sum += dout[o];
      }
    dx[i] = sum;
  }
}

template <class T>
__global__ void avg_pool2d_forward_kernel(T* out, const T* x, PoolShape s) {
  const i64 total = s.planes * s.H_out * s.W_out, step = static_cast<i64>(gridDim.x) * blockDim.x;
  const T scale = T(1) / static_cast<T>(s.kH * s.kW);
  for (i64 o = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; o < total; o += step) {
    const i64 ow = o % s.W_out, oh = o / s.W_out % s.H_out, pl = o / (s.H_out * s.W_out);
    const T* in = x + pl * s.H * s.W;
    T sum = 0;  // padding adds zeros: the divisor is always kH kW
    for (i64 kh = 0; kh < s.kH; ++kh) {
      const i64 ih = oh * s.stride_h - s.pad_h + kh;
      if (ih < 0 || ih >= s.H) continue;
      for (i64 kw = 0; kw < s.kW; ++kw) {
        const i64 iw = ow * s.stride_w - s.pad_w + kw;
        if (iw >= 0 && iw < s.W) sum += in[ih * s.W + iw];
      }
    }
    out[o] = sum * scale;
  }
}

template <class T>
__global__ void avg_pool2d_backward_kernel(T* dx, const T* dout, PoolShape s) {
  const i64 total = s.planes * s.H * s.W, step = static_cast<i64>(gridDim.x) * blockDim.x;
  const T scale = T(1) / static_cast<T>(s.kH * s.kW);
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const i64 iw = i % s.W, ih = i / s.W % s.H, pl = i / (s.H * s.W);
    const i64 oh_end = min_of(s.H_out, (ih + s.pad_h) / s.stride_h + 1);
    const i64 ow_end = min_of(s.W_out, (iw + s.pad_w) / s.stride_w + 1);
    T sum = 0;
    for (i64 oh = first_covering(ih, s.pad_h, s.kH, s.stride_h); oh < oh_end; ++oh)
      for (i64 ow = first_covering(iw, s.pad_w, s.kW, s.stride_w); ow < ow_end; ++ow)
        sum += dout[(pl * s.H_out + oh) * s.W_out + ow] * scale;
    dx[i] = sum;
  }
}

template <class T>
void max_pool2d_forward(T* out, i64* index, const T* x, const PoolShape& s, Stream stream) {
  const i64 n = s.planes * s.H_out * s.W_out;
  if (n > 0) BRRR_LAUNCH((max_pool2d_forward_kernel<T>), elementwise_grid(n), kBlockSize, 0, stream, out, index, x, s);
}

template <class T>
void max_pool2d_backward(T* dx, const T* dout, const i64* index, const PoolShape& s, Stream stream) {
  const i64 n = s.planes * s.H * s.W;
  if (n > 0) BRRR_LAUNCH((max_pool2d_backward_kernel<T>), elementwise_grid(n), kBlockSize, 0, stream, dx, dout, index, s);
}

template <class T>
void avg_pool2d_forward(T* out, const T* x, const PoolShape& s, Stream stream) {
  const i64 n = s.planes * s.H_out * s.W_out;
  if (n > 0) BRRR_LAUNCH((avg_pool2d_forward_kernel<T>), elementwise_grid(n), kBlockSize, 0, stream, out, x, s);
}

template <class T>
void avg_pool2d_backward(T* dx, const T* dout, const PoolShape& s, Stream stream) {
  const i64 n = s.planes * s.H * s.W;
  if (n > 0) BRRR_LAUNCH((avg_pool2d_backward_kernel<T>), elementwise_grid(n), kBlockSize, 0, stream, dx, dout, s);
}

#define BRRR_CUDA_CONV(T)                                                                                         \
  template void conv2d_im2col_forward<T>(T*, const T*, const T*, const T*, const ConvShape&, Stream);             \
  template void conv2d_im2col_backward_input<T>(T*, const T*, const T*, const ConvShape&, Stream);               \
  template void conv2d_im2col_backward_weight<T>(T*, T*, const T*, const T*, const ConvShape&, Stream);          \
  template void conv2d_direct_forward<T>(T*, const T*, const T*, const T*, const ConvShape&, Stream);             \
  template void max_pool2d_forward<T>(T*, i64*, const T*, const PoolShape&, Stream);                              \
  template void max_pool2d_backward<T>(T*, const T*, const i64*, const PoolShape&, Stream);                       \
  template void avg_pool2d_forward<T>(T*, const T*, const PoolShape&, Stream);                                    \
  template void avg_pool2d_backward<T>(T*, const T*, const PoolShape&, Stream);
BRRR_CUDA_CONV(float)
BRRR_CUDA_CONV(double)
#undef BRRR_CUDA_CONV

// im2col + GEMM is the default: at the ResNet-like layer its GEMM is a (64, 576) x (576, 25088)
// matmul per 8 images, cuBLAS's home ground. The direct kernel is there to be compared with it
// (brrr kernel-lab conv2d_forward --device cuda) and for shapes the GEMM handles badly.
template <class T>
static void register_conv_kernels_for() {
  const DeviceType cuda = DeviceType::CUDA;
  add(op::conv2d_forward<T>, cuda, "im2col", &conv2d_im2col_forward<T>, 10,
      about("variant 1: im2col into device memory, then the registry's matmul per group"));
  add(op::conv2d_forward<T>, cuda, "direct", &conv2d_direct_forward<T>, 0,
      about("variant 2: an 8 x 16 x 8-channel output tile per block, input patch and weights in shared memory"));
  add(op::conv2d_backward_input<T>, cuda, "im2col", &conv2d_im2col_backward_input<T>, 10,
      about("weight^T @ dout by the registry's matmul, then col2im gathering per input pixel (no atomics)"));
  add(op::conv2d_backward_weight<T>, cuda, "im2col", &conv2d_im2col_backward_weight<T>, 10,
      about("dout @ col^T by the registry's matmul, image groups added in order; dbias a block per channel"));
  add(op::max_pool2d_forward<T>, cuda, "simple", &max_pool2d_forward<T>, 0,
      about("a thread per output: the first largest of its window and its index"));
  add(op::max_pool2d_backward<T>, cuda, "gather", &max_pool2d_backward<T>, 0,
      about("a thread per input: dout of the covering windows whose index is this pixel (no atomics)"));
  add(op::avg_pool2d_forward<T>, cuda, "simple", &avg_pool2d_forward<T>, 0,
      about("a thread per output: its window's sum over kH kW"));
  add(op::avg_pool2d_backward<T>, cuda, "gather", &avg_pool2d_backward<T>, 0,
      about("a thread per input: dout / (kH kW) of every covering window (no atomics)"));
}

void register_conv_kernels() {
  register_conv_kernels_for<float>();
  register_conv_kernels_for<double>();
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
