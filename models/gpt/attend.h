// models/gpt/attend.h: attention of new queries over every key so far, shared by the attention
// maps (gpt.cpp) and the KV cache (kv_cache.cpp). Internal to models/gpt. Chapter 07 and 08.
#pragma once
#include <cstdint>

#include "brrr/tensor.h"

namespace brrr::models {

// Attention of n new queries (B, H, n, hs) over all keys and values so far (B, H, t0 + n, hs):
// query i sits at position t0 + i and may see keys 0 .. t0 + i. weights, if set, receives the
// softmax weights (B, H, n, t0 + n).
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t t0, Tensor* weights = nullptr);

}  // namespace brrr::models
