// brrr/models/decode.h: fast inference on the CPU, a GPT's forward pass for generation written
// as plain loops over preallocated buffers (chapter 08, "Why decoding is memory-bound").
// Read before: brrr/models/gpt.h (GPT, KVCache), generate.h. Read next: models/gpt/decode.cpp,
// kernels/cpu/rows/rows.h (the matrix-vector kernels).
//
// Generating one token at batch 1 multiplies one vector by every weight matrix: each weight is
// read once and used for one multiply-add, so the time is the weights' bytes over the memory
// bandwidth, not the arithmetic. The Decoder therefore
//   - streams each weight matrix once per step (a GEMV, kernels/cpu/rows/rows.h), as float32 or as
//     bfloat16 (half the bytes; every product and sum still in float32),
//   - appends each new key and value in place to the sequence's cache (no concatenation),
//   - allocates nothing and works out no shapes per token: its activations and logits are
//     buffers made once, the shapes are the model's.
//
// The state of one sequence (its cache and position) is a DecodeState, apart from the Decoder,
// so one Decoder (one copy of the weights) serves many sequences: a server keeps a DecodeState
// per request and advances several of them in one step() call, one pass over the weights.
// Batch invariance: every number a sequence gets (its logits, its cache) is the same bits
// whether it ran alone or beside others, and whatever the thread count: each output is one dot
// product whose order of additions is fixed by the model's shape alone.
#pragma once
#include <cstdint>
#include <vector>

#include "brrr/aligned_vector.h"
#include "brrr/dtype.h"
#include "brrr/models/gpt.h"

namespace brrr::models {

// The bytes of weights one decoding step reads with matrices in `weights` (float32 or bfloat16):
// every matrix, bias and LayerNorm, and the output projection (the embedding rows read are one
// per token and not counted). The bandwidth floor of a step is this over the memory's bandwidth.
std::int64_t weight_bytes_per_token(const GPTConfig& config, DType weights);

// One sequence's keys and values, every layer, position-major: layer l's key for position p
// is keys[l][p * C .. p * C + C) (head h at h * hs), C = n_embd. Grows by doubling up to the
// model's block_size; a new position is written in place.
struct DecodeState {
  std::int64_t length = 0;    // positions held; the next token goes at this position
  std::int64_t capacity = 0;  // positions allocated
  std::vector<aligned_vector<float>> keys, values;  // per layer, (capacity, C)
  void clear() { length = 0; }  // forget the sequence, keep the memory
  std::int64_t bytes() const;   // the memory the cache holds
};

class Decoder {
 public:
  // One block's weights: matrices (out, in) in the Decoder's dtype, the rest float32; a bias
  // is nullptr when the model has none.
  struct Layer {
    const float *ln_1_w = nullptr, *ln_1_b = nullptr, *ln_2_w = nullptr, *ln_2_b = nullptr;
    const void *c_attn = nullptr, *attn_proj = nullptr, *c_fc = nullptr, *mlp_proj = nullptr;
    const float *c_attn_b = nullptr, *attn_proj_b = nullptr, *c_fc_b = nullptr, *mlp_proj_b = nullptr;
  };

  // The model's weights as `weights` (kFloat32: the model's own tensors, used in place, so the
  // model must outlive the Decoder; kBFloat16: a copy rounded to bfloat16, half the bytes).
  // The model must be on the CPU, its parameters float32.
  explicit Decoder(const GPT& model, DType weights = kFloat32);

  const GPTConfig& config() const { return config_; }
  DType weight_dtype() const { return dtype_; }
  // The bytes of weights one step reads (the free function above).
  std::int64_t weight_bytes_per_token() const { return models::weight_bytes_per_token(config_, dtype_); }

  // Runs n tokens at positions state.length .. state.length + n - 1, appending their keys and
  // values, and returns the logits (V) after the last one. The pointer stays valid until the
  // next call. Fails (brrr::Error) past block_size or on a token outside the vocabulary.
  const float* prefill(DecodeState& state, const std::uint32_t* tokens, std::int64_t n);
  const float* prefill(DecodeState& state, const std::vector<std::uint32_t>& tokens) {
    return prefill(state, tokens.data(), static_cast<std::int64_t>(tokens.size()));
  }
  // One token for one sequence: prefill of one token.
  const float* step(DecodeState& state, std::uint32_t token) { return prefill(state, &token, 1); }
  // One token for each of n sequences (states[i] gets tokens[i]) in one pass over the weights:
  // returns the logits (n, V), row i for states[i], the same bits as step(*states[i], tokens[i]).
  const float* step(DecodeState* const* states, const std::uint32_t* tokens, std::int64_t n);
  // The general pass (what brrr serve's steps are): n distinct sequences, sequence i taking
  // counts[i] tokens, consecutive in `tokens` (R in all), at positions states[i]->length on.
  // Returns the logits of the W rows `wanted` (indexes into `tokens`, ascending), W rows of V
  // in that order. Every row's numbers are those it gets from prefill or step alone.
  // attention, when not nullptr, receives the softmax weights of the pass's last row, every
  // layer and head: (n_layer, n_head, that row's position + 1), for brrr serve's attention map;
  // the last row's logits must then be wanted. The numbers of the pass do not change.
  const float* forward(DecodeState* const* states, const std::int64_t* counts, std::int64_t n,
                       const std::uint32_t* tokens, const std::int64_t* wanted, std::int64_t W,
                       float* attention = nullptr);

  // Makes room in `state` for `positions` positions (up to block_size), so that no step
  // reallocates it: a server reserves each slot's state whole when the slot is made.
  void reserve(DecodeState& state, std::int64_t positions) const;

 private:
  void ensure_rows(std::int64_t rows);
  // The pass over R rows (decode.cpp): row r is tokens[r] of *states[r] at positions[r];
  // attention as forward's.
  const float* run(DecodeState* const* states, const std::uint32_t* tokens, const std::int64_t* positions,
                   std::int64_t R, const std::int64_t* wanted, std::int64_t W, float* attention);

  GPTConfig config_;
  DType dtype_;
  std::vector<Layer> layers_;
  const float* wte_ = nullptr;  // (V, C) float32: the embedding rows
  const float* wpe_ = nullptr;  // (block_size, C)
  const float *ln_f_w_ = nullptr, *ln_f_b_ = nullptr;
  const void* head_ = nullptr;  // (V, C) in dtype_
  aligned_vector<std::uint16_t> bf16_store_;  // the bfloat16 copies as pair panels (rows.h), when dtype_ is kBFloat16
  // Activations for up to rows_ rows (positions of one sequence or sequences of one step).
  std::int64_t rows_ = 0;
  aligned_vector<float> x_, normed_, qkv_, attended_, hidden_, logits_, scores_;
  std::vector<DecodeState*> row_states_;
  std::vector<std::int64_t> row_positions_;
  std::vector<std::int64_t> groups_;  // run's attention groups: the first row of each, then R
  std::vector<std::int64_t> ones_, every_;  // step's counts (all 1) and rows wanted (0, 1, ...), grown as n grows
};

}  // namespace brrr::models
