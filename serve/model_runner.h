// serve/model_runner.h: the server's one door into the model: a forward pass over many
// sequences at once, each with its own KV cache, whose numbers do not depend on the batch.
// Chapter 20 (serving). Read before: brrr/models/gpt.h (the GPT and its KV cache),
// kernels/cpu/decode.h (the Decoder's kernels, which this uses). Read next: serve/scheduler.h
// (who calls step()).
//
// The scheduler gathers, every step, the new tokens of every running sequence: a whole prompt
// for a sequence that just joined (prefill), one token for each of the others (decode). They
// become the R rows of one (R, C) activation, so every weight matrix is read once per step for
// all of them: R matrix-vector products become one matrix-matrix product (the roofline's
// reason for batching, chapter 20).
//
// Batch invariance: a row's numbers must not depend on which other rows share its step, nor
// on the thread count. The registry's GEMMs do not promise that (Eigen picks its blocking from
// M, N and K, and switches to a matrix-vector product for M = 1), so the linear layers run the
// Decoder's linear_rows (kernels/cpu/decode.h), which computes every output element as one dot
// product in one fixed order, whatever the other rows and the threads; its LayerNorm sums each
// row in order. Attention, here, sums each (row, head) over its positions in order.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "brrr/aligned_vector.h"
#include "brrr/models/gpt.h"

namespace brrr::serve {

// One sequence's keys and values, every layer: (n_layer, block_size, C) each, filled up to
// length(). Reserved whole when the slot is made: 2 * n_layer * block_size * C floats.
struct SequenceCache {
  aligned_vector<float> keys, values;  // on cache lines, as the Decoder's (brrr/aligned_vector.h)
  std::int64_t length = 0;
};

// One sequence's part of a step: its new tokens (they sit at positions cache->length onwards),
// and whether the logits of every new position are wanted (echo with logprobs) or only the last.
struct StepInput {
  SequenceCache* cache = nullptr;
  std::vector<std::uint32_t> tokens;
  bool all_logits = false;
};

class ModelRunner {
 public:
  // The model's parameters are read in place (float32, on the CPU); model is kept alive.
  explicit ModelRunner(std::shared_ptr<models::GPT> model);

  const models::GPTConfig& config() const { return config_; }
  SequenceCache new_cache() const;
  std::int64_t cache_bytes_per_sequence() const;  // 2 * n_layer * block_size * n_embd * 4

  // Runs every input's new tokens through the model, appends their keys and values to their
  // caches, and returns, per input, the logits (V each) of its last position, or of all its new
  // positions when all_logits. Inputs must be distinct sequences whose tokens fit block_size.
  std::vector<std::vector<std::vector<float>>> step(std::vector<StepInput>& inputs);

  // The softmax weights of every layer and head for the last of `tokens` over all of them:
  // (n_layer, n_head, tokens.size()), for the page's attention map. Runs on a fresh cache.
  std::vector<float> attention_of_last(const std::vector<std::uint32_t>& tokens);

 private:
  struct Layer {
    const float *ln1_w, *ln1_b, *attn_w, *attn_b, *proj_w, *proj_b;
    const float *ln2_w, *ln2_b, *fc_w, *fc_b, *fc_proj_w, *fc_proj_b;
  };
  struct Row {  // one new token of the step: its sequence and position
    SequenceCache* cache;
    std::int64_t pos;
  };
  void attention(const std::vector<Row>& rows, std::size_t layer, const float* qkv, float* out,
                 float* capture) const;

  std::shared_ptr<models::GPT> model_;
  models::GPTConfig config_;
  const float *wte_, *wpe_, *lnf_w_, *lnf_b_, *head_;
  std::vector<Layer> layers_;
  std::vector<float>* capture_ = nullptr;  // attention_of_last's weights, while it runs
  mutable std::vector<float> scores_;      // attend_row's room: (rows, heads, block_size)
};

}  // namespace brrr::serve
