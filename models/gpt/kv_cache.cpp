// models/gpt/kv_cache.cpp: the KV cache (chapter 08) and its int8 form (chapter 18): generation's
// forward pass, which runs only the new positions and attends over the cached ones too.
// Read before: brrr/models/gpt.h (KVCache, GPT::forward_cached), gpt.cpp (the blocks).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attend.h"
#include "brrr/autograd.h"
#include "brrr/eval_mode.h"
#include "brrr/models/gpt.h"
#include "brrr/ops.h"

namespace brrr::models {

// ---------------------------------------------------------------------------------------------
// the int8 KV cache (chapter 18)

void QuantizedKV::append(const Tensor& x) {
  BRRR_CHECK(x.dim() == 4 && x.dtype() == kFloat32, "KV cache: expected float32 keys or values (B, H, n, hs), got ",
             shape_str(x.shape()), " ", dtype_name(x.dtype()));
  const std::int64_t b = x.size(0), h = x.size(1), n = x.size(2), d = x.size(3);
  if (t == 0) B = b, H = h, hs = d;
  BRRR_CHECK(b == B && h == H && d == hs, "KV cache: keys of shape ", shape_str(x.shape()), " do not continue (", B,
             ", ", H, ", t, ", hs, ")");
  const std::vector<float> v = x.to_vector<float>();  // (B, H, n, hs)
  for (std::int64_t p = 0; p < n; ++p)
    for (std::int64_t i = 0; i < B * H; ++i) {  // one row: head i % H of batch i / H, position t + p
      const float* row = v.data() + (i * n + p) * hs;
      float largest = 0.0f;
      for (std::int64_t j = 0; j < hs; ++j) largest = std::max(largest, std::abs(row[j]));
      const float s = largest / 127.0f;
      scale.push_back(s);
      for (std::int64_t j = 0; j < hs; ++j)
        q.push_back(static_cast<std::int8_t>(s == 0.0f ? 0.0f : std::nearbyint(row[j] / s)));
    }
  t += n;
}

Tensor QuantizedKV::dequantize(Device device) const {
  std::vector<float> out(static_cast<std::size_t>(B * H * t * hs));
  for (std::int64_t p = 0; p < t; ++p)
    for (std::int64_t i = 0; i < B * H; ++i) {
      const float s = scale[p * B * H + i];
      const std::int8_t* row = q.data() + (p * B * H + i) * hs;
      float* dst = out.data() + (i * t + p) * hs;
      for (std::int64_t j = 0; j < hs; ++j) dst[j] = static_cast<float>(row[j]) * s;
    }
  return from_vector(out, {B, H, t, hs}).to(device);
}

std::int64_t KVCache::bytes() const {
  std::int64_t total = 0;
  for (const auto* list : {&keys, &values})
    for (const Tensor& k : *list)
      if (k.defined()) total += k.numel() * static_cast<std::int64_t>(dtype_size(k.dtype()));
  for (const auto* list : {&qkeys, &qvalues})
    for (const QuantizedKV& k : *list) total += k.bytes();
  return total;
}

namespace {
// Layer `layer`'s attention for this pass's q, k, v (B, H, n, hs) at positions past ..: the
// keys and values are appended to the cache first (quantized when it is int8), and the queries
// attend over everything it then holds.
Tensor attend_cached(KVCache& cache, std::size_t layer, std::int64_t past, const Tensor& q, const Tensor& k,
                     const Tensor& v) {
  if (cache.int8) {
    QuantizedKV& qk = cache.qkeys[layer];
    QuantizedKV& qv = cache.qvalues[layer];
    if (past == 0) qk = {}, qv = {};
    qk.append(k), qv.append(v);
    return attend(q, qk.dequantize(k.device()), qv.dequantize(v.device()), past);
  }
  Tensor& ck = cache.keys[layer];
  Tensor& cv = cache.values[layer];
  ck = past == 0 ? k : ops::cat({ck, k}, 2);
  cv = past == 0 ? v : ops::cat({cv, v}, 2);
  return attend(q, ck, cv, past);
}
}  // namespace

Tensor GPT::forward_cached(const Tensor& input, KVCache& cache) {
  NoGradGuard no_grad;
  const Tensor idx = input.to(wte->weight.device());
  BRRR_CHECK(idx.dim() == 2, "GPT::forward_cached: idx must be (B, n), got ", shape_str(idx.shape()));
  const std::int64_t n = idx.size(1), t0 = cache.length();
  BRRR_CHECK(t0 + n <= config_.block_size, "GPT::forward_cached: ", t0, " cached + ", n, " new positions exceed block_size ",
             config_.block_size);
  if (cache.keys.empty()) cache.keys.resize(config_.n_layer), cache.values.resize(config_.n_layer);
  if (cache.qkeys.empty()) cache.qkeys.resize(config_.n_layer), cache.qvalues.resize(config_.n_layer);
  const nn::EvalModeGuard eval_mode(*this);  // inference: no dropout
  const Tensor pos = arange(static_cast<double>(t0), static_cast<double>(t0 + n), 1.0,
                            TensorOptions().dtype(kInt64).device(idx.device()));
  Tensor x = wte->forward(idx) + wpe->forward(pos);
  for (std::int64_t l = 0; l < config_.n_layer; ++l) {
    // The block as in training, its attention over the cached keys and values too.
    const AttentionExtras extras{[&cache, l, t0](const Tensor& q, const Tensor& k, const Tensor& v) {
      return attend_cached(cache, static_cast<std::size_t>(l), t0, q, k, v);
    }};
    x = h->at<Block>(static_cast<std::size_t>(l))->forward(x, &extras);
  }
  return ops::linear(ln_f->forward(x), head_weight());
}

}  // namespace brrr::models
