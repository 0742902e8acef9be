// serve/model_runner.cpp: the batch-invariant forward pass over many sequences (chapter 20).
// Read before: serve/model_runner.h. Read next: serve/scheduler.cpp.
//
// The same GPT-2 block as models/gpt/gpt.cpp, written over raw float rows:
//
//   x = wte[token] + wpe[pos]                          (R, C)   R: the step's new tokens
//   per layer:  qkv = ln_1(x) @ c_attn^T + b            (R, 3C)
//               append k, v to each row's sequence cache, attend over its positions 0..pos
//               x += att @ c_proj^T + b;  x += gelu(ln_2(x) @ c_fc^T + b) @ c_proj^T + b
//   logits = ln_f(x) @ head^T                          (R, V)   only for the rows asked for
//
// Every number of a row is computed from that row's inputs alone, in an order fixed by the
// code, by one thread: so a request's logits are the same bits alone or beside any others, at
// any thread count (tests/serve/test_serve.cpp checks both). The linear layers and LayerNorm
// are the Decoder's kernels (kernels/cpu/decode.h: linear_rows reads each weight once for all
// the step's rows, and sums every output element in one order whatever the rows around it), and
// so is attention (attend_row, each row over its own sequence's cache).
#include "serve/model_runner.h"

#include <algorithm>
#include <cmath>

#include "brrr/error.h"
#include "brrr/parallel.h"
#include "kernels/cpu/decode.h"

namespace brrr::serve {

namespace {

using i64 = std::int64_t;

const float* floats(const Tensor& t, const char* what) {
  BRRR_CHECK(t.defined() && t.device().is_cpu() && t.dtype() == kFloat32 && t.is_contiguous(),
             "brrr serve: the model's ", what, " must be a contiguous float32 tensor on the CPU");
  return t.data_ptr<float>();
}

}  // namespace

ModelRunner::ModelRunner(std::shared_ptr<models::GPT> model) : model_(std::move(model)), config_(model_->config()) {
  // A model without biases: nullptr, which the kernels read as zeros.
  auto bias = [&](const Tensor& t, const char* what) { return t.defined() ? floats(t, what) : nullptr; };
  wte_ = floats(model_->wte->weight, "wte");
  wpe_ = floats(model_->wpe->weight, "wpe");
  lnf_w_ = floats(model_->ln_f->weight, "ln_f");
  lnf_b_ = bias(model_->ln_f->bias, "ln_f bias");
  head_ = floats(model_->head_weight(), "lm_head");
  for (i64 l = 0; l < config_.n_layer; ++l) {
    const auto& block = model_->h->at<models::Block>(static_cast<std::size_t>(l));
    layers_.push_back({floats(block->ln_1->weight, "ln_1"), bias(block->ln_1->bias, "ln_1 bias"),
                       floats(block->attn->c_attn->weight, "c_attn"), bias(block->attn->c_attn->bias, "c_attn bias"),
                       floats(block->attn->c_proj->weight, "c_proj"), bias(block->attn->c_proj->bias, "c_proj bias"),
                       floats(block->ln_2->weight, "ln_2"), bias(block->ln_2->bias, "ln_2 bias"),
                       floats(block->mlp->c_fc->weight, "c_fc"), bias(block->mlp->c_fc->bias, "c_fc bias"),
                       floats(block->mlp->c_proj->weight, "mlp c_proj"), bias(block->mlp->c_proj->bias, "mlp c_proj bias")});
  }
}

SequenceCache ModelRunner::new_cache() const {
  SequenceCache cache;
  const auto n = static_cast<std::size_t>(config_.n_layer * config_.block_size * config_.n_embd);
  cache.keys.assign(n, 0.0f);
  cache.values.assign(n, 0.0f);
  return cache;
}

std::int64_t ModelRunner::cache_bytes_per_sequence() const {
  return 2 * config_.n_layer * config_.block_size * config_.n_embd * static_cast<i64>(sizeof(float));
}

// Each row's keys and values go into its sequence's cache first (all of them: a prompt's row
// p must see rows 0..p of the same step), then each (row, head) attends over positions 0..pos:
// one job per (row, head), one thread each. capture, when set, receives the last row's softmax
// weights per head: (n_head, pos + 1).
void ModelRunner::attention(const std::vector<Row>& rows, std::size_t layer, const float* qkv, float* out,
                            float* capture) const {
  const i64 C = config_.n_embd, H = config_.n_head, hs = C / H, T = config_.block_size;
  const i64 R = static_cast<i64>(rows.size());
  for (i64 r = 0; r < R; ++r) {
    float* k = rows[r].cache->keys.data() + (static_cast<i64>(layer) * T + rows[r].pos) * C;
    float* v = rows[r].cache->values.data() + (static_cast<i64>(layer) * T + rows[r].pos) * C;
    std::copy(qkv + r * 3 * C + C, qkv + r * 3 * C + 2 * C, k);
    std::copy(qkv + r * 3 * C + 2 * C, qkv + r * 3 * C + 3 * C, v);
  }
  // The Decoder's attention of one query (kernels/cpu/decode.h, attend_row): each (row, head)
  // on its own, claimed one at a time (late rows of a prompt attend over more keys).
  if (scores_.size() < static_cast<std::size_t>(R * H * T)) scores_.resize(static_cast<std::size_t>(R * H * T));
  kernels::cpu::decode_parallel(R * H, 1, [&](i64 b, i64 e) {
    for (i64 job = b; job < e; ++job) {
      const i64 r = job / H, h = job % H, n = rows[r].pos + 1;
      const i64 at = static_cast<i64>(layer) * T * C + h * hs;
      float* scores = scores_.data() + job * T;
      kernels::cpu::attend_row(out + r * C + h * hs, qkv + r * 3 * C + h * hs, rows[r].cache->keys.data() + at,
                               rows[r].cache->values.data() + at, n, C, hs, scores);
      if (capture && r == R - 1) {  // the weights: attend_row leaves exp(s - max) in scores
        float total = 0.0f;
        for (i64 t = 0; t < n; ++t) total += scores[t];
        for (i64 t = 0; t < n; ++t) capture[h * n + t] = scores[t] / total;
      }
    }
  });
}

std::vector<std::vector<std::vector<float>>> ModelRunner::step(std::vector<StepInput>& inputs) {
  const i64 C = config_.n_embd, V = config_.vocab_size, T = config_.block_size;
  std::vector<Row> rows;
  for (const StepInput& in : inputs) {
    BRRR_CHECK(in.cache && !in.tokens.empty(), "ModelRunner::step: an input without a cache or tokens");
    BRRR_CHECK(in.cache->length + static_cast<i64>(in.tokens.size()) <= T, "ModelRunner::step: ",
               in.cache->length, " cached + ", in.tokens.size(), " new positions exceed block_size ", T);
    for (std::size_t i = 0; i < in.tokens.size(); ++i) {
      BRRR_CHECK(in.tokens[i] < V, "ModelRunner::step: token ", in.tokens[i], " is outside the vocabulary (", V, ")");
      rows.push_back({in.cache, in.cache->length + static_cast<i64>(i)});
    }
  }
  const i64 R = static_cast<i64>(rows.size());
  aligned_vector<float> x(R * C), h(R * C), qkv(R * 3 * C), att(R * C), fc(R * 4 * C);
  for (i64 r = 0, at = 0; at < static_cast<i64>(inputs.size()); ++at)
    for (std::uint32_t token : inputs[at].tokens) {
      for (i64 c = 0; c < C; ++c) x[r * C + c] = wte_[token * C + c] + wpe_[rows[r].pos * C + c];
      ++r;
    }
  using kernels::cpu::Epilogue;
  using kernels::cpu::layer_norm_rows;
  using kernels::cpu::linear_rows;
  const auto eps = static_cast<float>(config_.layer_norm_eps);
  const Epilogue gelu = config_.activation == "gelu_erf" ? Epilogue::kGeluErf : Epilogue::kGeluTanh;
  std::vector<float>* capture = capture_;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    layer_norm_rows(h.data(), x.data(), L.ln1_w, L.ln1_b, R, C, eps);
    linear_rows(qkv.data(), h.data(), L.attn_w, L.attn_b, R, 3 * C, C, Epilogue::kStore);
    attention(rows, l, qkv.data(), att.data(),
              capture ? capture->data() + l * config_.n_head * (rows.back().pos + 1) : nullptr);
    linear_rows(x.data(), att.data(), L.proj_w, L.proj_b, R, C, C, Epilogue::kAdd);  // x += attention's projection
    layer_norm_rows(h.data(), x.data(), L.ln2_w, L.ln2_b, R, C, eps);
    linear_rows(fc.data(), h.data(), L.fc_w, L.fc_b, R, 4 * C, C, gelu);
    linear_rows(x.data(), fc.data(), L.fc_proj_w, L.fc_proj_b, R, C, 4 * C, Epilogue::kAdd);  // x += the MLP's
  }
  for (Row& row : rows) row.cache->length = std::max(row.cache->length, row.pos + 1);
  // The logits of the rows asked for: each input's last, or all of its rows.
  std::vector<i64> wanted;
  for (i64 r = 0, at = 0; at < static_cast<i64>(inputs.size()); ++at) {
    const i64 n = static_cast<i64>(inputs[at].tokens.size());
    for (i64 i = inputs[at].all_logits ? 0 : n - 1; i < n; ++i) wanted.push_back(r + i);
    r += n;
  }
  const i64 W = static_cast<i64>(wanted.size());
  aligned_vector<float> picked(W * C), normed(W * C), logits(W * V);
  for (i64 w = 0; w < W; ++w) std::copy(x.begin() + wanted[w] * C, x.begin() + (wanted[w] + 1) * C, picked.begin() + w * C);
  layer_norm_rows(normed.data(), picked.data(), lnf_w_, lnf_b_, W, C, eps);
  linear_rows(logits.data(), normed.data(), head_, nullptr, W, V, C, Epilogue::kStore);
  std::vector<std::vector<std::vector<float>>> result(inputs.size());
  for (i64 w = 0, at = 0; at < static_cast<i64>(inputs.size()); ++at) {
    const i64 count = inputs[at].all_logits ? static_cast<i64>(inputs[at].tokens.size()) : 1;
    for (i64 i = 0; i < count; ++i, ++w) result[at].emplace_back(logits.begin() + w * V, logits.begin() + (w + 1) * V);
  }
  return result;
}

std::vector<float> ModelRunner::attention_of_last(const std::vector<std::uint32_t>& tokens) {
  BRRR_CHECK(!tokens.empty(), "attention: no tokens");
  const i64 n = static_cast<i64>(tokens.size());
  std::vector<float> weights(static_cast<std::size_t>(config_.n_layer * config_.n_head * n));
  SequenceCache cache = new_cache();
  std::vector<StepInput> inputs{{&cache, tokens, false}};
  capture_ = &weights;
  try {
    step(inputs);
  } catch (...) {
    capture_ = nullptr;
    throw;
  }
  capture_ = nullptr;
  return weights;
}

}  // namespace brrr::serve
