// models/gpt/decode.cpp: the Decoder, GPT-2's forward pass for generation as loops over
// preallocated buffers (chapter 08). Read before: brrr/models/decode.h, kernels/cpu/rows/rows.h.
// Read next: generate.cpp (which drives it).
//
// A pass over R rows (the n tokens of one sequence's prefill, or one token of each of R
// sequences) is the block of gpt.cpp, spelled out:
//   x = wte[token] + wpe[position]
//   per layer:  qkv = ln_1(x) W_attn^T + b;  k, v written into the cache at the row's position;
//               each head of q attends over its sequence's keys 0 .. position;
//               x += attended W_proj^T + b;  x += gelu(ln_2(x) W_fc^T + b) W_proj2^T + b
//   logits = ln_f(x) W_head^T (only the rows whose logits are asked for)
#include "brrr/models/decode.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "brrr/bfloat16.h"
#include "kernels/cpu/rows/rows.h"
#include "models/gpt/decode_checks.h"

namespace brrr::models {

namespace kc = brrr::kernels::cpu;

std::int64_t DecodeState::bytes() const {
  std::int64_t total = 0;
  for (const auto* list : {&keys, &values})
    for (const auto& layer : *list) total += static_cast<std::int64_t>(layer.capacity() * sizeof(float));
  return total;
}

namespace {
const float* floats(const Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }
}  // namespace

Decoder::Decoder(const GPT& model, DType weights) : config_(model.config()), dtype_(weights) {
  BRRR_CHECK(weights == kFloat32 || weights == kBFloat16, "Decoder: weights must be float32 or bfloat16, got ",
             dtype_name(weights));
  for (const auto& [name, p] : model.named_parameters())
    BRRR_CHECK(p.device().is_cpu() && p.dtype() == kFloat32 && p.is_contiguous(), "Decoder: parameter ", name,
               " must be a contiguous float32 tensor on the CPU, got ", dtype_name(p.dtype()), " on ",
               p.device().str());
  // The matrices, in the order a step reads them; in bfloat16 they are copied (rounded to the
  // nearest, ties to even) into one store, and the pointers set once it has its final size.
  std::vector<const Tensor*> matrices;
  for (std::int64_t l = 0; l < config_.n_layer; ++l) {
    const auto block = model.h->at<Block>(static_cast<std::size_t>(l));
    Layer layer;
    layer.ln_1_w = floats(block->ln_1->weight), layer.ln_1_b = floats(block->ln_1->bias);
    layer.ln_2_w = floats(block->ln_2->weight), layer.ln_2_b = floats(block->ln_2->bias);
    layer.c_attn_b = floats(block->attn->c_attn->bias), layer.attn_proj_b = floats(block->attn->c_proj->bias);
    layer.c_fc_b = floats(block->mlp->c_fc->bias), layer.mlp_proj_b = floats(block->mlp->c_proj->bias);
    for (const Tensor* w : {&block->attn->c_attn->weight, &block->attn->c_proj->weight, &block->mlp->c_fc->weight,
                            &block->mlp->c_proj->weight})
      matrices.push_back(w);
    layers_.push_back(layer);
  }
  matrices.push_back(&model.head_weight());
  std::vector<const void*> stored;
  if (dtype_ == kFloat32) {
    for (const Tensor* w : matrices) stored.push_back(w->data_ptr<float>());
  } else {
    // bf16: each matrix rounded (to nearest, ties to even) into pair panels (kernels/cpu/rows/
    // rows.h), the layout the bf16 kernels read, packed once here.
    std::int64_t total = 0;
    for (const Tensor* w : matrices) total += kc::bf16_panels_size(w->size(0), w->size(1));
    bf16_store_.resize(static_cast<std::size_t>(total));
    std::int64_t at = 0;
    for (const Tensor* w : matrices) {
      std::uint16_t* dst = bf16_store_.data() + at;
      kc::pack_bf16_panels(dst, w->data_ptr<float>(), w->size(0), w->size(1));
      stored.push_back(dst);
      at += kc::bf16_panels_size(w->size(0), w->size(1));
    }
  }
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    layers_[l].c_attn = stored[4 * l], layers_[l].attn_proj = stored[4 * l + 1];
    layers_[l].c_fc = stored[4 * l + 2], layers_[l].mlp_proj = stored[4 * l + 3];
  }
  head_ = stored.back();
  wte_ = floats(model.wte->weight), wpe_ = floats(model.wpe->weight);
  ln_f_w_ = floats(model.ln_f->weight), ln_f_b_ = floats(model.ln_f->bias);
}

std::int64_t weight_bytes_per_token(const GPTConfig& config, DType weights) {
  const std::int64_t C = config.n_embd, V = config.vocab_size, w = weights == kFloat32 ? 4 : 2;
  const std::int64_t matrices = config.n_layer * (C * 3 * C + C * C + C * 4 * C + 4 * C * C) + V * C;
  const std::int64_t b = config.bias ? 1 : 0;
  const std::int64_t vectors = config.n_layer * (2 * C * (1 + b) + b * (3 * C + C + 4 * C + C)) + C * (1 + b);
  return matrices * w + vectors * 4;
}

void Decoder::ensure_rows(std::int64_t rows) {
  if (rows <= rows_) return;
  const std::int64_t C = config_.n_embd;
  rows_ = rows;
  const auto n = static_cast<std::size_t>(rows);
  x_.resize(n * C), normed_.resize(n * C), qkv_.resize(n * 3 * C), attended_.resize(n * C);
  hidden_.resize(n * 4 * C);
}

void Decoder::reserve(DecodeState& s, std::int64_t positions) const {
  if (s.keys.size() != static_cast<std::size_t>(config_.n_layer))
    s.keys.assign(config_.n_layer, {}), s.values.assign(config_.n_layer, {}), s.capacity = 0, s.length = 0;
  if (positions <= s.capacity) return;
  // Doubling, so a sequence grown a token at a time reallocates log2(block_size) times.
  const std::int64_t capacity = std::min(config_.block_size, std::max({positions, 2 * s.capacity, std::int64_t{16}}));
  for (auto* list : {&s.keys, &s.values})
    for (auto& layer : *list) layer.resize(static_cast<std::size_t>(capacity * config_.n_embd));
  s.capacity = capacity;
}

namespace {

void linear(float* y, const float* x, const void* w, DType dtype, const float* bias, std::int64_t M, std::int64_t N,
            std::int64_t K, kc::Epilogue e) {
  if (dtype == kFloat32) kc::linear_rows(y, x, static_cast<const float*>(w), bias, M, N, K, e);
  else kc::linear_rows_panels(y, x, static_cast<const std::uint16_t*>(w), bias, M, N, K, e);
}

}  // namespace

// The pass over R rows: row r is token tokens[r] of states[r] at position positions[r] (the
// row's keys and values go there). Rows of one sequence come in increasing position, so a row
// sees the keys its sequence's earlier rows wrote. wanted: the W rows (ascending) whose logits
// are computed (into logits_, one row of V each).
const float* Decoder::run(DecodeState* const* states, const std::uint32_t* tokens, const std::int64_t* positions,
                          std::int64_t R, const std::int64_t* wanted, std::int64_t W, float* attention) {
  const std::int64_t C = config_.n_embd, H = config_.n_head, hs = C / H, V = config_.vocab_size;
  const std::int64_t T = config_.block_size;
  ensure_rows(R);
  const std::size_t score_room = static_cast<std::size_t>(R * H * T);
  if (scores_.size() < score_room) scores_.resize(score_room);
  for (std::int64_t r = 0; r < R; ++r) {
    const float* te = wte_ + static_cast<std::int64_t>(tokens[r]) * C;
    const float* pe = wpe_ + positions[r] * C;
    float* x = x_.data() + r * C;
    for (std::int64_t c = 0; c < C; ++c) x[c] = te[c] + pe[c];
  }
  const float eps = static_cast<float>(config_.layer_norm_eps);
  const kc::Epilogue gelu = config_.activation == "gelu_erf" ? kc::Epilogue::kGeluErf : kc::Epilogue::kGeluTanh;
  // Attention works on groups of up to kc::kAttendGroup (64) consecutive rows of one sequence (a
  // prefill's), whose scores are tiles of dot products (kc::attend_rows); a decoding step's rows
  // are one each.
  groups_.clear();
  for (std::int64_t r = 0; r < R; ++r)
    if (r == 0 || states[r] != states[r - 1] || positions[r] != positions[r - 1] + 1 ||
        r - groups_.back() == kc::kAttendGroup)
      groups_.push_back(r);
  const auto G = static_cast<std::int64_t>(groups_.size());
  groups_.push_back(R);
  const std::int64_t scores_stride = H * T;  // row r, head h: scores_ + r * scores_stride + h * T
  const bool every_row = W == R;             // wanted is then 0, 1, ..., R - 1
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    const bool last = l + 1 == layers_.size();
    kc::layer_norm_rows(normed_.data(), x_.data(), L.ln_1_w, L.ln_1_b, R, C, eps);
    linear(qkv_.data(), normed_.data(), L.c_attn, dtype_, L.c_attn_b, R, 3 * C, C, kc::Epilogue::kStore);
    for (std::int64_t r = 0; r < R; ++r) {  // the keys and values, in place
      const float* qkv = qkv_.data() + r * 3 * C;
      const std::size_t at = static_cast<std::size_t>(positions[r] * C);
      std::memcpy(states[r]->keys[l].data() + at, qkv + C, C * sizeof(float));
      std::memcpy(states[r]->values[l].data() + at, qkv + 2 * C, C * sizeof(float));
    }
    // The last layer's other rows only write their keys and values: nothing reads the rest of
    // their pass, so it runs on the wanted rows alone (a prefill's last), gathered to the top
    // of the buffers (row w of them is row wanted[w]; rows ascending, so w <= wanted[w] and no
    // row is overwritten before it is read).
    const std::int64_t rows = last ? W : R;
    if (!last || every_row) {
      // Each (group, head) on its own, claimed one at a time, the late groups first: a
      // prefill's late rows attend over more keys than its early ones (the numbers do not
      // depend on who computes them).
      kc::rows_parallel(G * H, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          const std::int64_t g = G - 1 - i / H, h = i % H, r0 = groups_[g], n = groups_[g + 1] - r0;
          kc::attend_rows(attended_.data() + r0 * C + h * hs, C, qkv_.data() + r0 * 3 * C + h * hs, 3 * C,
                          states[r0]->keys[l].data() + h * hs, states[r0]->values[l].data() + h * hs,
                          positions[r0], n, C, hs, scores_.data() + r0 * scores_stride + h * T, scores_stride);
        }
      });
    } else {
      kc::rows_parallel(W * H, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          const std::int64_t w = W - 1 - i / H, h = i % H, r = wanted[w];
          kc::attend_row(attended_.data() + w * C + h * hs, qkv_.data() + r * 3 * C + h * hs,
                         states[r]->keys[l].data() + h * hs, states[r]->values[l].data() + h * hs,
                         positions[r] + 1, C, hs, scores_.data() + r * scores_stride + h * T);
        }
      });
      for (std::int64_t w = 0; w < W; ++w)
        if (wanted[w] != w) std::memcpy(x_.data() + w * C, x_.data() + wanted[w] * C, C * sizeof(float));
    }
    if (attention) {  // the last row's softmax weights: attend_row(s) leave exp(s - max) in its scores
      const std::int64_t n = positions[R - 1] + 1;
      for (std::int64_t h = 0; h < H; ++h) {
        const float* sc = scores_.data() + (R - 1) * scores_stride + h * T;
        const float total = kc::softmax_total(sc, n);  // the total attend_row divided by
        for (std::int64_t t = 0; t < n; ++t) attention[(static_cast<std::int64_t>(l) * H + h) * n + t] = sc[t] / total;
      }
    }
    float* x = x_.data();
    linear(x, attended_.data(), L.attn_proj, dtype_, L.attn_proj_b, rows, C, C, kc::Epilogue::kAdd);
    kc::layer_norm_rows(normed_.data(), x, L.ln_2_w, L.ln_2_b, rows, C, eps);
    linear(hidden_.data(), normed_.data(), L.c_fc, dtype_, L.c_fc_b, rows, 4 * C, C, gelu);
    linear(x, hidden_.data(), L.mlp_proj, dtype_, L.mlp_proj_b, rows, C, 4 * C, kc::Epilogue::kAdd);
  }
  if (logits_.size() < static_cast<std::size_t>(W * V)) logits_.resize(static_cast<std::size_t>(W * V));
  kc::layer_norm_rows(normed_.data(), x_.data(), ln_f_w_, ln_f_b_, W, C, eps);
  linear(logits_.data(), normed_.data(), head_, dtype_, nullptr, W, V, C, kc::Epilogue::kStore);
  return logits_.data();
}

const float* Decoder::forward(DecodeState* const* states, const std::int64_t* counts, std::int64_t n,
                              const std::uint32_t* tokens, const std::int64_t* wanted, std::int64_t W,
                              float* attention) {
  // The positions a state holds: none until reserve gives it this model's layers.
  const auto held = [&](const DecodeState& s) {
    return s.keys.size() == static_cast<std::size_t>(config_.n_layer) ? s.length : std::int64_t{0};
  };
  const std::int64_t R = detail::check_pass(config_, states, held, counts, n, tokens, wanted, W);
  BRRR_CHECK(!attention || wanted[W - 1] == R - 1, "Decoder: the attention map needs the last row's logits");
  if (static_cast<std::int64_t>(row_states_.size()) < R) row_states_.resize(R), row_positions_.resize(R);
  for (std::int64_t i = 0, r = 0; i < n; ++i) {
    DecodeState& s = *states[i];
    const std::int64_t t = held(s);
    reserve(s, t + counts[i]);
    for (std::int64_t j = 0; j < counts[i]; ++j, ++r) row_states_[r] = &s, row_positions_[r] = t + j;
  }
  const float* logits = run(row_states_.data(), tokens, row_positions_.data(), R, wanted, W, attention);
  for (std::int64_t i = 0, r = 0; i < n; r += counts[i], ++i) states[i]->length = row_positions_[r + counts[i] - 1] + 1;
  return logits;
}

const float* Decoder::prefill(DecodeState& state, const std::uint32_t* tokens, std::int64_t n) {
  BRRR_CHECK(n >= 1, "Decoder::prefill: no tokens");
  DecodeState* s = &state;
  const std::int64_t last = n - 1;
  return forward(&s, &n, 1, tokens, &last, 1);
}

const float* Decoder::step(DecodeState* const* states, const std::uint32_t* tokens, std::int64_t n) {
  BRRR_CHECK(n >= 1, "Decoder::step: no sequences");
  for (auto i = static_cast<std::int64_t>(every_.size()); i < n; ++i) ones_.push_back(1), every_.push_back(i);
  return forward(states, ones_.data(), n, tokens, every_.data(), n);
}

}  // namespace brrr::models
