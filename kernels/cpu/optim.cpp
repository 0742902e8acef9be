// kernels/cpu/optim.cpp: the AdamW and SGD updates, one parameter tensor at a time.
// Chapter 05 (modules, optimizers and the first MLP). Read before: nn.cpp.
// Read next: framework/src/optim.cpp (the optimizers that call these).
#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "brrr/error.h"
#include "kernels/cpu/cpu.h"

namespace brrr::kernels::cpu {

// AdamW as torch.optim.AdamW computes it, operation by operation, so float32 results match
// PyTorch's bit for bit where the formulas allow:
//   p  = p * (1 - lr * wd)                    decoupled weight decay
//   m  = beta1 * m + (1 - beta1) * g          first moment
//   v  = beta2 * v + (1 - beta2) * g * g      second moment
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// scale multiplies each gradient as it is read: 1 for adamw_step (the same bits as the gradient
// itself), the clipping coefficient for adamw_clipped_multi_step below.
template <class T>
static void adamw_update(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWParams& hp, T scale) {
  const T decay = static_cast<T>(1.0 - hp.lr * hp.weight_decay);
  const T b1 = static_cast<T>(hp.beta1), one_minus_b1 = static_cast<T>(1.0 - hp.beta1);
  const T b2 = static_cast<T>(hp.beta2), one_minus_b2 = static_cast<T>(1.0 - hp.beta2);
  const double bias_correction1 = 1.0 - std::pow(hp.beta1, static_cast<double>(hp.step));
  const double bias_correction2 = 1.0 - std::pow(hp.beta2, static_cast<double>(hp.step));
  const T step_size = static_cast<T>(hp.lr / bias_correction1);
  const T bc2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  const T eps = static_cast<T>(hp.eps);
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) {
      const T g = grad[i] * scale;
      const T p = param[i] * decay;
      const T mi = m[i] * b1 + g * one_minus_b1;
      const T vi = v[i] * b2 + g * g * one_minus_b2;
      const T denom = std::sqrt(vi) / bc2_sqrt + eps;
      param[i] = p - step_size * (mi / denom);
      m[i] = mi;
      v[i] = vi;
    }
  });
}

template <class T>
void adamw_step(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWParams& hp, Stream) {
  adamw_update(param, grad, m, v, n, hp, T(1));
}

// AdamW with the gradients clipped by their global norm, as clip_grad_norm_ then the step but
// without writing the clipped gradients (chapter 16; the CUDA kernels are adamw.cu's). The sum
// of squares is taken in T over fixed chunks of 1024 values of each tensor, and the chunks'
// sums added in order: the same bits for any thread count. norm is one T, host memory here.
template <class T>
void adamw_clipped_multi_step(T* norm, const AdamWTensor<T>* tensors, int count, const AdamWParams& hp,
                              double max_norm, Stream) {
  BRRR_CHECK(max_norm > 0.0 && std::isfinite(max_norm), "adamw_clipped_multi_step: max_norm must be positive, got ",
             max_norm);
  BRRR_CHECK(hp.constants == nullptr, "adamw_clipped_multi_step: constants in device memory are for a CUDA graph's "
             "step, not the CPU");
  constexpr std::int64_t kChunk = 1024;
  T total = 0;
  for (int t = 0; t < count; ++t) {
    const T* g = tensors[t].grad;
    const std::int64_t n = tensors[t].n, chunks = (n + kChunk - 1) / kChunk;
    std::vector<T> sums(static_cast<std::size_t>(chunks));
    parallel_for(chunks, grain(kChunk, kElementwiseGrain), [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t c = b; c < e; ++c) {
        T s = 0;
        for (std::int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i) s += g[i] * g[i];
        sums[c] = s;
      }
    });
    for (T s : sums) total += s;
  }
  *norm = std::sqrt(total);
  const T coefficient = static_cast<T>(max_norm) / (*norm + T(1e-6));
  const T scale = coefficient < T(1) ? coefficient : T(1);
  for (int t = 0; t < count; ++t) {
    AdamWParams own = hp;
    own.weight_decay = tensors[t].weight_decay;
    adamw_update(tensors[t].param, tensors[t].grad, tensors[t].m, tensors[t].v, tensors[t].n, own, scale);
  }
}

// SGD with momentum, as torch.optim.SGD:
//   d = g + wd * p;  buf = d (first step) or momentum * buf + (1 - dampening) * d
//   d = d + momentum * buf (nesterov) or buf;  p -= lr * d
template <class T>
void sgd_step(T* param, const T* grad, T* buf, std::int64_t n, const SGDParams& hp, Stream) {
  const T lr = static_cast<T>(hp.lr), wd = static_cast<T>(hp.weight_decay);
  const T mom = static_cast<T>(hp.momentum), damp = static_cast<T>(1.0 - hp.dampening);
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      T d = grad[i] + wd * param[i];
      if (hp.momentum != 0.0) {
        const T bi = hp.first_step ? d : mom * buf[i] + damp * d;
        buf[i] = bi;
        d = hp.nesterov ? d + mom * bi : bi;
      }
      param[i] -= lr * d;
    }
  });
}

template void adamw_step<float>(float*, const float*, float*, float*, std::int64_t, const AdamWParams&, Stream);
template void adamw_step<double>(double*, const double*, double*, double*, std::int64_t, const AdamWParams&, Stream);
template void adamw_clipped_multi_step<float>(float*, const AdamWTensor<float>*, int, const AdamWParams&, double,
                                              Stream);
template void adamw_clipped_multi_step<double>(double*, const AdamWTensor<double>*, int, const AdamWParams&, double,
                                               Stream);
template void sgd_step<float>(float*, const float*, float*, std::int64_t, const SGDParams&, Stream);
template void sgd_step<double>(double*, const double*, double*, std::int64_t, const SGDParams&, Stream);

}  // namespace brrr::kernels::cpu
