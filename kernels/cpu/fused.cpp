// kernels/cpu/fused.cpp: the CPU references for the fused kernels of chapters 12 to 16:
// bias + GELU, the GEMM with a bias + GELU epilogue (chapter 14), residual add + LayerNorm,
// the fused cross-entropy and multi-tensor AdamW.
// Each is the unfused CPU kernels of nn.cpp and optim.cpp run back to back, so the fused CUDA
// kernels are checked against exactly what the unfused path computes. One is also a CPU
// kernel in its own right: cross_entropy_fused's "rowwise" variant (float32), the default on
// the CPU, one pass per row (chapter 18 measured the unfused pair at 5% of a training step).
// Read before: nn.cpp, optim.cpp. Read next: kernels/cuda/gelu.cu.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/registry.h"

namespace brrr::kernels::cpu {

// out (N, C) = gelu(x + bias): the add, then nn.cpp's gelu_forward on the sum.
template <class T>
void bias_gelu_forward(T* out, const T* x, const T* bias, std::int64_t N, std::int64_t C, Stream stream) {
  parallel_for(N * C, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = x[i] + bias[i % C];
  });
  gelu_forward<T>(out, out, N * C, stream);
}

// out = gelu(a @ b + bias), pre = a @ b: the registry's CPU matmul into out (gemm_blocked.cpp
// in float32 on AVX-512), a copy into pre, then bias_gelu_forward in place on each matrix.
template <class T>
void matmul_bias_gelu(T* out, T* pre, const T* a, const T* b, const T* bias, const MatmulShape& shape,
                      Stream stream) {
  BRRR_CHECK(!shape.accumulate, "matmul_bias_gelu: accumulate is not supported (out = gelu(a @ b + bias) overwrites)");
  BRRR_CHECK(bias != nullptr || shape.N == 0, "matmul_bias_gelu: bias is null; it must hold N = ", shape.N, " values");
  static Kernel<matmul_fn<T>> gemm(op::matmul<T>);
  gemm(DeviceType::CPU)(out, a, b, shape, stream);
  const std::int64_t size = shape.M * shape.N;
  for (std::int64_t z = 0; z < shape.batch && size > 0; ++z) {
    T* matrix = out + z * shape.stride_out;
    if (pre) std::copy(matrix, matrix + size, pre + z * shape.stride_out);
    bias_gelu_forward<T>(matrix, matrix, bias, shape.M, shape.N, stream);
  }
}

// dx = dout * gelu'(x + bias) (nn.cpp's gelu_backward on the sum); dbias = the column sums
// of dx, added row by row in double (one fixed order: deterministic).
template <class T>
void bias_gelu_backward(T* dx, T* dbias, const T* dout, const T* x, const T* bias, std::int64_t N, std::int64_t C,
                        Stream stream) {
  std::vector<T> sum(static_cast<std::size_t>(N * C));
  parallel_for(N * C, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) sum[i] = x[i] + bias[i % C];
  });
  gelu_backward<T>(dx, dout, sum.data(), N * C, stream);
  if (!dbias) return;
  parallel_for(C, 64, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t c = b; c < e; ++c) {
      double total = 0.0;
      for (std::int64_t n = 0; n < N; ++n) total += dx[n * C + c];
      dbias[c] = static_cast<T>(total);
    }
  });
}

// sum (N, C) = x + residual, then nn.cpp's layernorm_forward on sum.
template <class T>
void residual_layernorm_forward(T* sum, T* out, T* mean, T* rstd, const T* x, const T* residual, const T* weight,
                                const T* bias, std::int64_t N, std::int64_t C, T eps, Stream stream) {
  parallel_for(N * C, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) sum[i] = x[i] + residual[i];
  });
  layernorm_forward<T>(out, mean, rstd, sum, weight, bias, N, C, eps, stream);
}

// The loss as cross_entropy_forward computes it, then dlogits as cross_entropy_backward
// computes it with every row's dloss equal to `dloss`.
template <class T>
void cross_entropy_fused(T* losses, T* dlogits, const T* logits, const std::int32_t* targets, std::int64_t N,
                         std::int64_t V, std::int64_t ignore_index, T dloss, Stream stream) {
  std::vector<T> lse(static_cast<std::size_t>(N)), dlosses(static_cast<std::size_t>(N), dloss);
  cross_entropy_forward<T>(losses, lse.data(), logits, targets, N, V, ignore_index, stream);
  cross_entropy_backward<T>(dlogits, dlosses.data(), logits, lse.data(), targets, N, V, ignore_index, stream);
}

// Variant "rowwise", float32 only (chapter 18: at gpt-12m's 4,096-token vocabulary the
// unfused pair above was 5% of a bf16 training step). The same formulas, one row at a time:
// the row is read from memory once and stays in L1 (16 KiB at V = 4096) for its three passes
// (the max, the sum of exponentials, the gradient), where the pair above reads all N rows
// twice, and the exponentials are exp_vec_or_zero (cpu.h: about 1 ulp, it vectorizes, and a
// -inf logit gets a gradient of exactly 0) where the
// pair calls std::exp one element at a time, in double for the loss. The sum is still added
// in double, in an order fixed by the code, so the bits never depend on the thread count.
void cross_entropy_fused_rowwise(float* losses, float* dlogits, const float* logits, const std::int32_t* targets,
                                 std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream) {
  parallel_for(N, grain(V, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t n = b; n < e; ++n) {
      float* d = dlogits + n * V;
      if (targets[n] == ignore_index) {
        losses[n] = 0.0f;
        std::fill(d, d + V, 0.0f);
        continue;
      }
      const float* row = logits + n * V;
      float maxv = -std::numeric_limits<float>::infinity();
      for (std::int64_t v = 0; v < V; ++v) maxv = std::max(maxv, row[v]);
      double lse = maxv;  // all -inf: the loss is NaN (-inf minus -inf), as in the "cpu" variant
      if (maxv != -std::numeric_limits<float>::infinity()) {
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (std::int64_t v = 0; v < V; ++v) sum += exp_vec_or_zero(row[v] - maxv);
        lse = maxv + std::log(sum);
      }
      losses[n] = static_cast<float>(lse - row[targets[n]]);
      const float l = static_cast<float>(lse);
#pragma omp simd
      for (std::int64_t v = 0; v < V; ++v) d[v] = exp_vec_or_zero(row[v] - l) * dloss;
      d[targets[n]] -= dloss;
    }
  });
}

// adamw_step on each tensor in turn, with the tensor's own weight decay.
template <class T>
void adamw_multi_step(const AdamWTensor<T>* tensors, int count, const AdamWParams& hp, Stream stream) {
  BRRR_CHECK(hp.constants == nullptr, "adamw_multi_step: constants in device memory are for a CUDA graph's step, "
             "not the CPU");
  for (int i = 0; i < count; ++i) {
    AdamWParams own = hp;
    own.weight_decay = tensors[i].weight_decay;
    adamw_step<T>(tensors[i].param, tensors[i].grad, tensors[i].m, tensors[i].v, tensors[i].n, own, stream);
  }
}

#define BRRR_INSTANTIATE(T)                                                                                        \
  template void bias_gelu_forward<T>(T*, const T*, const T*, std::int64_t, std::int64_t, Stream);                \
  template void bias_gelu_backward<T>(T*, T*, const T*, const T*, const T*, std::int64_t, std::int64_t, Stream); \
  template void matmul_bias_gelu<T>(T*, T*, const T*, const T*, const T*, const MatmulShape&, Stream);             \
  template void residual_layernorm_forward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*,            \
                                              std::int64_t, std::int64_t, T, Stream);                            \
  template void cross_entropy_fused<T>(T*, T*, const T*, const std::int32_t*, std::int64_t, std::int64_t,        \
                                       std::int64_t, T, Stream);                                                 \
  template void adamw_multi_step<T>(const AdamWTensor<T>*, int, const AdamWParams&, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

}  // namespace brrr::kernels::cpu
