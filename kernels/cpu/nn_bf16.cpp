// kernels/cpu/nn_bf16.cpp: GELU, bias + GELU, LayerNorm, residual + LayerNorm and cross-entropy
// on bfloat16 data (chapter 18): the CPU kernels of ops on bf16 tensors, what the CPU's bf16
// training step runs, and the references of the bf16 variants in kernels/cuda (gelu.cu,
// layernorm.cu, residual_layernorm.cu, crossentropy.cu).
// Read before: kernels/cpu/nn.cpp, kernels/cpu/fused.cpp (the float32 kernels these follow).
// Read next: kernels/cpu/attention.cpp (attention on bf16 data, the same way).
// At the end, matmul_epilogue: the bf16 GEMM with its bias and GELU (section 11 of chapter 18).
//
// bf16 in memory, float32 inside, one pass: each kernel reads its bf16 inputs once, computes in
// float32 (the very expressions of the float32 kernels, from cpu.h) and rounds each output to
// bf16 once, as it stores it. Elementwise kernels convert in the loop itself; row kernels
// (LayerNorm, cross-entropy) widen one row into a float32 buffer that stays in the L1 cache and
// run the float32 row code on it (bf16_convert.h). So every output is the float32 kernel's on
// the widened inputs, rounded once, bit for bit (tests/core/test_nn_bf16.cpp), and no kernel
// writes or reads a float32 copy of a whole tensor, as the first version of this file did (the
// bf16 step took 1.8x float32's time with those copies; docs/measurements.md).
//
// Two statistics a backward needs are not taken from bf16: layernorm_backward recomputes the
// mean from x in float32, cross_entropy_backward the log-sum-exp from the logits. Saved in bf16
// they are off by up to 2^-9 of themselves: an lse near 5 off by 0.01, which is a 1% error in
// every probability of the row. cross_entropy_fused needs no saved statistic: it takes the loss
// and the gradient from the row in one call (float32 losses, a bf16 gradient). residual +
// LayerNorm keeps its statistics in float32 (4 bytes a row), so its backward reads them.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "brrr/bfloat16.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/matmul_epilogue.h"
#include "kernels/registry.h"

namespace brrr::kernels::cpu {

namespace {

std::vector<float> widened(const bf16* x, std::int64_t n) {  // a weight or bias (C values)
  std::vector<float> out(static_cast<std::size_t>(n));
  widen_row(out.data(), x, n);
  return out;
}

// Rows per parallel block: about kElementwiseGrain values each, as the float32 kernels.
inline std::int64_t row_grain(std::int64_t C) { return grain(C, kElementwiseGrain); }

// LayerNorm's backward over rows in chunks of kRows, whose partial column sums (dweight,
// dbias) are added in chunk order: nn.cpp's layernorm_backward, with each row widened first.
// row(n, x_row, g_row) fills the float32 rows and returns the row's mean and rstd; finish(n,
// dx_row) stores the row's float32 dx.
constexpr std::int64_t kRows = 64;

struct Stats {  // a row's mean and rstd, as the backward uses them
  float mean, rstd;
};

template <class Row, class Finish>
void layernorm_backward_rows(bf16* dweight, bf16* dbias, const bf16* weight, std::int64_t N, std::int64_t C, Row row,
                             Finish finish) {
  const std::int64_t chunks = (N + kRows - 1) / kRows;
  const std::vector<float> w = widened(weight, C);
  std::vector<double> partial_w(static_cast<std::size_t>(chunks * C), 0.0), partial_b(partial_w.size(), 0.0);
  parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> x(static_cast<std::size_t>(C)), g(x.size()), d(x.size());
    for (std::int64_t chunk = begin; chunk < end; ++chunk)
      for (std::int64_t n = chunk * kRows; n < std::min(N, (chunk + 1) * kRows); ++n) {
        const auto [m, s] = row(n, x.data(), g.data());
        layernorm_backward_row(d.data(), partial_w.data() + chunk * C, partial_b.data() + chunk * C, g.data(),
                               x.data(), w.data(), static_cast<double>(m), static_cast<double>(s), C);  // cpu.h
        finish(n, d.data());
      }
  });
  for (std::int64_t c = 0; c < C; ++c) {
    double sw = 0.0, sb = 0.0;
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      sw += partial_w[chunk * C + c];
      sb += partial_b[chunk * C + c];
    }
    dweight[c] = bf16(static_cast<float>(sw));
    if (dbias) dbias[c] = bf16(static_cast<float>(sb));
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// GELU: each value widened, cpu.h's float32 formula, rounded once.

void gelu_forward_bf16(bf16* out, const bf16* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) store_rounded(out[i], gelu_tanh_value(static_cast<float>(x[i])));
  });
}

void gelu_backward_bf16(bf16* dx, const bf16* dout, const bf16* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i)
      store_rounded(dx[i], gelu_tanh_slope(static_cast<float>(x[i])) * static_cast<float>(dout[i]));
  });
}

void gelu_erf_forward_bf16(bf16* out, const bf16* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) store_rounded(out[i], gelu_erf_value(static_cast<float>(x[i])));
  });
}

void gelu_erf_backward_bf16(bf16* dx, const bf16* dout, const bf16* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i)
      store_rounded(dx[i], gelu_erf_slope(static_cast<float>(x[i])) * static_cast<float>(dout[i]));
  });
}

// bias + GELU: the float32 sum x + bias (as fused.cpp's), then GELU, rounded once.
void bias_gelu_forward_bf16(bf16* out, const bf16* x, const bf16* bias, std::int64_t N, std::int64_t C, Stream) {
  const std::vector<float> b32 = widened(bias, C);
  parallel_for(N, row_grain(C), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const bf16* xr = x + n * C;
      bf16* o = out + n * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) store_rounded(o[c], gelu_tanh_value(static_cast<float>(xr[c]) + b32[c]));
    }
  });
}

// dbias is the column sums of the float32 dx, in double, row after row (fused.cpp's order),
// rounded once: not a sum of the rounded dx. Blocks of columns run in parallel, each walking
// every row, so dx is rounded and summed in the same pass.
void bias_gelu_backward_bf16(bf16* dx, bf16* dbias, const bf16* dout, const bf16* x, const bf16* bias, std::int64_t N,
                             std::int64_t C, Stream) {
  constexpr std::int64_t kCols = 64;
  const std::vector<float> b32 = widened(bias, C);
  parallel_for((C + kCols - 1) / kCols, grain(N * kCols, kElementwiseGrain), [&](std::int64_t begin, std::int64_t end) {
    double total[kCols];
    for (std::int64_t block = begin; block < end; ++block) {
      const std::int64_t c0 = block * kCols, width = std::min(C, c0 + kCols) - c0;
      std::fill(total, total + kCols, 0.0);
      for (std::int64_t n = 0; n < N; ++n) {
        const std::int64_t at = n * C + c0;
#pragma omp simd
        for (std::int64_t c = 0; c < width; ++c) {
          const float d = gelu_tanh_slope(static_cast<float>(x[at + c]) + b32[c0 + c]) *
                          static_cast<float>(dout[at + c]);
          store_rounded(dx[at + c], d);
          total[c] += d;
        }
      }
      if (dbias)
        for (std::int64_t c = 0; c < width; ++c) dbias[c0 + c] = bf16(static_cast<float>(total[c]));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// LayerNorm: each row widened, cpu.h's layer_norm_row (the float32 kernel's), out rounded once.
// mean and rstd are bf16 here (layernorm.cu variant 4's layout).

void layernorm_forward_bf16(bf16* out, bf16* mean, bf16* rstd, const bf16* x, const bf16* weight, const bf16* bias,
                            std::int64_t N, std::int64_t C, bf16 eps, Stream) {
  const std::vector<float> w = widened(weight, C), b = bias ? widened(bias, C) : std::vector<float>();
  parallel_for(N, row_grain(C), [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(static_cast<std::size_t>(C)), y(row.size());
    for (std::int64_t n = begin; n < end; ++n) {
      widen_row(row.data(), x + n * C, C);
      double m, s;
      layer_norm_row(y.data(), m, s, row.data(), w.data(), bias ? b.data() : nullptr, C, static_cast<float>(eps));
      round_row(out + n * C, y.data(), C);
      mean[n] = bf16(static_cast<float>(m));
      rstd[n] = bf16(static_cast<float>(s));
    }
  });
}

// The mean comes again from x, in float32: saved in bf16 it is off by up to 2^-9 of itself,
// which is much of x - mean where |mean| is large beside the spread of the row. rstd is taken
// as saved: its 2^-9 is a relative error of dx of the same size, as the rounding of dx itself.
void layernorm_backward_bf16(bf16* dx, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* x, const bf16* weight,
                             const bf16*, const bf16* rstd, std::int64_t N, std::int64_t C, Stream) {
  auto row = [&](std::int64_t n, float* xr, float* g) {
    widen_row(xr, x + n * C, C);
    widen_row(g, dout + n * C, C);
    // As the forward takes it (cpu.h), vectorized: a chain of scalar double adds made this
    // backward 1.4x the float32 kernel's time (kernel-lab, N 16384, C 768).
    const float m = C ? static_cast<float>(layer_norm_mean(xr, C)) : 0.0f;
    return Stats{m, static_cast<float>(rstd[n])};
  };
  layernorm_backward_rows(dweight, dbias, weight, N, C, row, [&](std::int64_t n, const float* d) {
    round_row(dx + n * C, d, C);
  });
}

// Residual + LayerNorm (the CUDA kernels are residual_layernorm.cu): sum = x + residual rounded
// to bf16 once, then the float32 LayerNorm of that stored sum, so out normalizes the row the
// backward will read. mean and rstd stay float32.
void residual_layernorm_forward_bf16(bf16* sum, bf16* out, float* mean, float* rstd, const bf16* x,
                                     const bf16* residual, const bf16* weight, const bf16* bias, std::int64_t N,
                                     std::int64_t C, float eps, Stream) {
  const std::vector<float> w = widened(weight, C), b = bias ? widened(bias, C) : std::vector<float>();
  parallel_for(N, row_grain(C), [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> row(static_cast<std::size_t>(C)), y(row.size());
    for (std::int64_t n = begin; n < end; ++n) {
      const bf16 *xr = x + n * C, *rr = residual + n * C;
      bf16* sr = sum + n * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) {
        const std::uint16_t bits = bf16::round_bits(static_cast<float>(xr[c]) + static_cast<float>(rr[c]));
        sr[c].bits = bits;
        row[c] = static_cast<float>(bf16::from_bits(bits));
      }
      double m, s;
      layer_norm_row(y.data(), m, s, row.data(), w.data(), bias ? b.data() : nullptr, C, eps);
      round_row(out + n * C, y.data(), C);
      mean[n] = static_cast<float>(m);
      rstd[n] = static_cast<float>(s);
    }
  });
}

// dsum = dres + LayerNorm's dx in float32, rounded once; the forward's float32 mean and rstd as
// they are (nothing recomputed, unlike layernorm_backward_bf16 above, whose are bf16).
void residual_layernorm_backward_bf16(bf16* dsum, bf16* dweight, bf16* dbias, const bf16* dout, const bf16* dres,
                                      const bf16* sum, const bf16* weight, const float* mean, const float* rstd,
                                      std::int64_t N, std::int64_t C, Stream) {
  auto row = [&](std::int64_t n, float* xr, float* g) {
    widen_row(xr, sum + n * C, C);
    widen_row(g, dout + n * C, C);
    return Stats{mean[n], rstd[n]};
  };
  layernorm_backward_rows(dweight, dbias, weight, N, C, row, [&](std::int64_t n, float* d) {
    if (dres) {
      const bf16* r = dres + n * C;
#pragma omp simd
      for (std::int64_t c = 0; c < C; ++c) d[c] += static_cast<float>(r[c]);
    }
    round_row(dsum + n * C, d, C);
  });
}

// ---------------------------------------------------------------------------------------------
// cross-entropy: each row widened, nn.cpp's and fused.cpp's float32 kernels on that one row.

void cross_entropy_forward_bf16(bf16* losses, bf16* lse, const bf16* logits, const std::int32_t* targets,
                                std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream s) {
  parallel_for(N, row_grain(V), [&](std::int64_t b, std::int64_t e) {
    std::vector<float> row(static_cast<std::size_t>(V));
    for (std::int64_t n = b; n < e; ++n) {
      widen_row(row.data(), logits + n * V, V);
      float l, m;
      cross_entropy_forward<float>(&l, &m, row.data(), &targets[n], 1, V, ignore_index, s);
      losses[n] = bf16(l);
      lse[n] = bf16(m);
    }
  });
}

// The saved lse (bf16) is not used: it comes again from the logits, in float32.
void cross_entropy_backward_bf16(bf16* dlogits, const bf16* dlosses, const bf16* logits, const bf16*,
                                 const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index,
                                 Stream s) {
  parallel_for(N, row_grain(V), [&](std::int64_t b, std::int64_t e) {
    std::vector<float> row(static_cast<std::size_t>(V)), d(row.size());
    for (std::int64_t n = b; n < e; ++n) {
      widen_row(row.data(), logits + n * V, V);
      float l, m;
      cross_entropy_forward<float>(&l, &m, row.data(), &targets[n], 1, V, ignore_index, s);
      const float g = static_cast<float>(dlosses[n]);
      cross_entropy_backward<float>(d.data(), &g, row.data(), &m, &targets[n], 1, V, ignore_index, s);
      round_row(dlogits + n * V, d.data(), V);
    }
  });
}

// The loss and the gradient in one call, as the float32 "rowwise" variant (fused.cpp) computes
// them, a row at a time. A row is widened before its gradient is written, so dlogits may be
// logits (in place).
void cross_entropy_fused_bf16(float* losses, bf16* dlogits, const bf16* logits, const std::int32_t* targets,
                              std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream s) {
  parallel_for(N, row_grain(V), [&](std::int64_t b, std::int64_t e) {
    std::vector<float> row(static_cast<std::size_t>(V)), d(row.size());
    for (std::int64_t n = b; n < e; ++n) {
      widen_row(row.data(), logits + n * V, V);
      cross_entropy_fused_rowwise(&losses[n], d.data(), row.data(), &targets[n], 1, V, ignore_index, dloss, s);
      round_row(dlogits + n * V, d.data(), V);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// matmul_epilogue: the bf16 GEMM with its epilogue (chapter 18, section 11). The reference of
// the CUDA variants (kernels/cuda/matmul/epilogue.cu, kernels/cuda/cublaslt.cu) and what the
// CPU's bf16 linear layers run. Each row of a float32 buffer starts as the bias, the registry's
// matmul on bf16 data (gemm_bf16.cpp) adds a @ b into it, and one pass rounds it into out,
// through GELU (pre kept) when asked. Without GELU these are the bits of the bf16 linear layer
// before this op, which made the same sums in a float32 tensor and rounded it with a cast.
void matmul_epilogue_bf16(bf16* out, bf16* pre, const bf16* a, const bf16* b, const bf16* bias, bool gelu,
                          const MatmulShape& s, Stream stream) {
  check_matmul_epilogue("matmul_epilogue", s, out, a, b);
  const std::int64_t M = s.M, N = s.N;
  if (M == 0 || N == 0) return;
  std::unique_ptr<float[]> sums(new float[static_cast<std::size_t>(M * N)]);  // every value written below
  if (bias) {
    const std::vector<float> b32 = widened(bias, N);
    parallel_for(M, row_grain(N), [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t m = begin; m < end; ++m) std::copy(b32.begin(), b32.end(), sums.get() + m * N);
    });
  }
  MatmulShape g = s;
  g.stride_out = M * N;
  g.accumulate = bias != nullptr;
  static Kernel<matmul_on_bf16_fn> gemm(op::matmul_on_bf16);
  gemm(DeviceType::CPU)(sums.get(), a, b, g, stream);  // K = 0: the sums stay the bias (or become 0)
  parallel_for(M * N, kElementwiseGrain, [&](std::int64_t begin, std::int64_t end) {
    const float* v = sums.get();
    if (!gelu) {
#pragma omp simd
      for (std::int64_t i = begin; i < end; ++i) store_rounded(out[i], v[i]);
    } else {
      if (pre)
#pragma omp simd
        for (std::int64_t i = begin; i < end; ++i) store_rounded(pre[i], v[i]);
#pragma omp simd
      for (std::int64_t i = begin; i < end; ++i) store_rounded(out[i], gelu_tanh_value(v[i]));
    }
  });
}

}  // namespace brrr::kernels::cpu
