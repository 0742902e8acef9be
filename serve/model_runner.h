// serve/model_runner.h: the server's one door into the model: a forward pass over many
// sequences at once, each with its own KV cache, whose numbers do not depend on the batch.
// Chapter 20 (serving). Read before: brrr/models/gpt.h (the GPT and its KV cache),
// kernels/cpu/rows/rows.h (the Decoder's kernels, which this uses). Read next: serve/scheduler.h
// (who calls step()).
//
// The scheduler gathers, every step, the new tokens of every running sequence: a whole prompt
// for a sequence that just joined (prefill), one token for each of the others (decode). They
// become the R rows of one (R, C) activation, so every weight matrix is read once per step for
// all of them: R matrix-vector products become one matrix-matrix product (the roofline's
// reason for batching, chapter 20).
//
// The pass itself is the Decoder's (brrr/models/decode.h, chapter 08): Decoder::forward takes
// several sequences' new tokens in one pass, and a sequence's cache is its DecodeState.
//
// Batch invariance: a row's numbers must not depend on which other rows share its step, nor
// on the thread count. The registry's GEMMs do not promise that (Eigen picks its blocking from
// M, N and K, and switches to a matrix-vector product for M = 1); the Decoder's kernels
// (kernels/cpu/rows/rows.h) compute every output element as one dot product in one fixed order,
// whatever the other rows and the threads; LayerNorm sums each row in order, and attention
// each (row, head) over its positions in order.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "brrr/models/decode.h"
#include "brrr/models/decode_device.h"
#include "brrr/models/gpt.h"

namespace brrr::serve {

// One sequence's keys and values, every layer: on the CPU the Decoder's DecodeState, reserved
// whole (block_size positions) when the slot is made: 2 * n_layer * block_size * C floats; on the
// CUDA device a slot of the DeviceDecoder's cache (brrr/models/decode_device.h), the same bytes
// in device memory.
struct SequenceCache {
  models::DecodeState cpu;
  models::DeviceDecodeState device;
  void clear() { cpu.clear(), device.clear(); }  // forget the sequence, keep the memory (or slot)
};

// One sequence's part of a step: its new tokens (they sit at positions cache->length onwards),
// and whether the logits of every new position are wanted (echo with logprobs) or only the last.
// On the CUDA device the next token may be drawn there instead (the scheduler asks it of every
// input of a step or of none): draw set, rule holds sample_token's rule with the sequence's
// uniform number (temperature, top_k, top_p, u: kernels/sample_rule.h; temperature 0 is greedy),
// and step() writes the token to `drawn` and returns no logits for the input: one id a row
// comes back instead of V floats.
struct StepInput {
  SequenceCache* cache = nullptr;
  std::vector<std::uint32_t> tokens;
  bool all_logits = false;
  bool draw = false;
  double rule[4] = {0.0, 0.0, 1.0, 0.0};
  std::int64_t drawn = -1;
};

class ModelRunner {
 public:
  // The model's parameters are read in place (float32, on the CPU), or, with weights kBFloat16,
  // its matrices rounded once to a bfloat16 copy (half the bytes a step reads; with BRRR_AMX=1
  // on a CPU with AMX, the tile unit's products: kernels/cpu/rows/amx.cpp); model is kept alive.
  // On Device::cuda() (a GPU, or the emulator) the model is moved there and the steps are the
  // DeviceDecoder's, whose cache holds `slots` sequences: new_cache() hands out one each.
  explicit ModelRunner(std::shared_ptr<models::GPT> model, DType weights = kFloat32, Device device = kCPU,
                       std::int64_t slots = 1);

  const models::GPTConfig& config() const { return config_; }
  Device device() const { return device_ ? Device::cuda() : kCPU; }
  SequenceCache new_cache();
  std::int64_t cache_bytes_per_sequence() const;  // 2 * n_layer * block_size * n_embd * 4

  // Runs every input's new tokens through the model, appends their keys and values to their
  // caches, and returns, per input, the logits (V each) of its last position, or of all its new
  // positions when all_logits; or, when every input asks to `draw` (CUDA device only), no
  // logits and each input's token in `drawn`. Inputs must be distinct sequences whose tokens
  // fit block_size.
  // attention, when not nullptr, receives the last input's last row's softmax weights
  // (Decoder::forward's `attention`).
  std::vector<std::vector<std::vector<float>>> step(std::vector<StepInput>& inputs, float* attention = nullptr);

  // The softmax weights of every layer and head for the last of `tokens` over all of them:
  // (n_layer, n_head, tokens.size()), for the page's attention map. Runs on a fresh cache of
  // the CPU's Decoder (on the CUDA device, on a copy of the model on the CPU, made by the first
  // call and kept: the map is offered for small models only, ServerOptions::attention_limit).
  std::vector<float> attention_of_last(const std::vector<std::uint32_t>& tokens);
  // On the CUDA device: ids at and past `vocabulary` are never drawn by a step's `draw`
  // (DeviceDecoder::limit_draws; a tokenizer smaller than the model's vocabulary). Nothing on the CPU.
  void limit_draws(std::int64_t vocabulary);

 private:
  void draw_on_device(std::vector<StepInput>& inputs);
  std::shared_ptr<models::GPT> model_;
  models::GPTConfig config_;
  // On the CPU the steps' Decoder (the model's own weights in place, or their bf16 copy); on the
  // CUDA device the attention maps', over cpu_copy_, made by the first attention_of_last.
  std::unique_ptr<models::Decoder> decoder_;
  std::unique_ptr<models::DeviceDecoder> device_;  // on the CUDA device: the steps'
  std::shared_ptr<models::GPT> cpu_copy_;
  DType weights_;
  std::vector<models::DecodeState*> states_;  // step's scratch
  std::vector<models::DeviceDecodeState*> device_states_;
  std::vector<std::int64_t> counts_, wanted_;
  std::vector<std::uint32_t> tokens_;
  std::vector<double> rules_;
};

}  // namespace brrr::serve
