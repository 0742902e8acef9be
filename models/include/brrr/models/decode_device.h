// brrr/models/decode_device.h: the Decoder on the GPU (chapter 20, "Decoding on the GPU"): the
// same pass as brrr/models/decode.h's, over the same rows, with its buffers and the KV cache in
// device memory and every layer's work done by CUDA kernels (on a GPU, or on the SIMT emulator:
// `--device emulator`). Read before: brrr/models/decode.h (the CPU Decoder, whose contract this
// keeps), kernels/cuda/rows/rows.h (its kernels). Read next: models/gpt/decode_device.cpp.
//
// What differs from the CPU's Decoder is where a sequence's cache lives. A GPU kernel that
// serves several sequences in one launch must find each one's keys from a device pointer and an
// index, so the DeviceDecoder owns one cache of `slots` sequences, each block_size positions,
// every layer: (n_layer, slots, block_size, C) for the keys and again for the values. A
// sequence is a slot (acquire() hands out a free one, release() takes it back) and its length.
// The row kernels get, per row, its slot and its length after the row (int32 arrays on the
// device): append_cache writes the row's key and value at length - 1, attend_cache reads
// positions 0 .. length - 1.
//
// The two promises of the CPU's Decoder hold here too, by the kernels' construction
// (kernels/cuda/rows/rows.h): a row's bits do not depend on the rows beside it (each kernel sums
// in an order fixed by the row's own sizes), and a prompt fed whole gives the bits of its tokens
// fed one at a time (a prefill's rows are decoding rows of one slot at lengths t + 1 .. t + n).
// The numbers are not the CPU Decoder's bits: the GPU kernels add in other orders (a
// warp's shuffles, K split in chunks of 512), so they agree with it to float32 rounding.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "brrr/cuda.h"
#include "brrr/dtype.h"
#include "brrr/models/gpt.h"
#include "brrr/tensor.h"

namespace brrr::models {

// One sequence of a DeviceDecoder: its slot of the decoder's cache and the positions it holds.
struct DeviceDecodeState {
  std::int32_t slot = -1;  // -1: none (acquire() gives one)
  std::int64_t length = 0;
  void clear() { length = 0; }  // forget the sequence, keep the slot
};

class DeviceDecoder {
 public:
  // The model's parameters must be float32 on Device::cuda(); weights kFloat32 reads them in
  // place (the model must outlive the decoder), kBFloat16 makes a bfloat16 copy of the matrices
  // on the device (half the bytes a step reads; x rounded to bf16 at each matmul's input, every
  // sum float32). The cache holds `slots` sequences of block_size positions, in float32.
  DeviceDecoder(const GPT& model, std::int64_t slots = 1, DType weights = kFloat32);

  const GPTConfig& config() const { return config_; }
  DType weight_dtype() const { return dtype_; }
  std::int64_t slots() const { return slots_; }
  std::int64_t cache_bytes() const;  // the device memory of the whole cache

  // A free slot, at length 0; brrr::Error when every slot is taken. release() frees it.
  DeviceDecodeState acquire();
  void release(DeviceDecodeState& state);

  // As Decoder's (brrr/models/decode.h): the logits on the host, valid until the next call.
  const float* prefill(DeviceDecodeState& state, const std::uint32_t* tokens, std::int64_t n);
  const float* step(DeviceDecodeState* const* states, const std::uint32_t* tokens, std::int64_t n);
  const float* forward(DeviceDecodeState* const* states, const std::int64_t* counts, std::int64_t n,
                       const std::uint32_t* tokens, const std::int64_t* wanted, std::int64_t W);

  // forward without the copy: the pass's logits (W, V) stay in device memory, for logits() to
  // copy back or greedy() to reduce there.
  void enqueue(DeviceDecodeState* const* states, const std::int64_t* counts, std::int64_t n,
               const std::uint32_t* tokens, const std::int64_t* wanted, std::int64_t W);
  const float* logits();  // the last pass's logits on the host (W x V floats come back)
  // The most likely token of each of the last pass's W rows, the lowest id on a tie (the CPU's
  // greedy rule, torch.argmax's), found on the device: W numbers come back instead of W x V.
  const std::uint32_t* greedy();
  // A token drawn from each of the last pass's W rows, on the device (kernels/cuda/rows/sample.cu,
  // no vocabulary sorted): row w by the rule rules[4w .. 4w + 3] (temperature > 0, top_k, top_p,
  // the uniform draw u; kernels/sample_rule.h), as sample_token draws (generate.h). W numbers
  // come back; brrr::Error for a rule out of range or logits with a NaN or an infinity.
  const std::uint32_t* sample(const double* rules);
  // Ids at and past `vocabulary` (at most the model's) are never drawn by greedy() and sample():
  // their logits are set to -infinity on the device first (a tokenizer smaller than the model's
  // padded vocabulary, as sample_token skips them on the CPU). logits() then shows them so.
  void limit_draws(std::int64_t vocabulary);

  // A decoding step (one token for each of n sequences, every row's logits: step(), or forward
  // of that shape) is launched kernel by kernel the first time at its n, captured as a CUDA
  // graph (chapter 17) the second, and replayed with one call from then on: one graph per batch
  // size, the same bits as the launched step. The graphs read the buffers as they are; a pass
  // wider than any before grows them and drops every graph (reserve_rows(n) first avoids that).
  void set_cuda_graphs(bool on);
  std::size_t cuda_graphs() const { return graphs_.size(); }
  void reserve_rows(std::int64_t rows) { ensure_rows(rows, rows); }

 private:
  void ensure_rows(std::int64_t rows, std::int64_t wanted);
  // The pass over R rows, whose indices (tokens, positions, slots, lengths: R each, then the W
  // rows wanted) are already in indices_ on the device; the logits (W, V) land in logits_.
  void run(std::int64_t R, std::int64_t W);
  void mask_undrawable();  // limit_draws's -infinity over the last pass's logits

  struct Layer {
    const float *ln_1_w = nullptr, *ln_1_b = nullptr, *ln_2_w = nullptr, *ln_2_b = nullptr;
    const void *c_attn = nullptr, *attn_proj = nullptr, *c_fc = nullptr, *mlp_proj = nullptr;
    const float *c_attn_b = nullptr, *attn_proj_b = nullptr, *c_fc_b = nullptr, *mlp_proj_b = nullptr;
  };
  GPTConfig config_;
  DType dtype_;
  std::int64_t slots_;
  std::vector<Layer> layers_;
  const float *wte_ = nullptr, *wpe_ = nullptr, *ln_f_w_ = nullptr, *ln_f_b_ = nullptr;
  const void* head_ = nullptr;
  std::vector<Tensor> owned_;  // the bfloat16 copies, when dtype_ is kBFloat16
  Tensor keys_, values_;       // (n_layer, slots, block_size, C)
  std::vector<bool> taken_;    // per slot
  // Device buffers for up to rows_ rows and wanted_ rows of logits.
  std::int64_t rows_ = 0, wanted_ = 0;
  Tensor indices_, x_, pe_, normed_, mean_, rstd_, qkv_, attended_, hidden_, gathered_, logits_;
  Tensor top_, top_index_;  // greedy(): each row's largest logit and its id
  Tensor rules_, drawn_;    // sample(): the rows' rules and tokens
  std::int64_t drawable_;   // limit_draws(): ids below it may be drawn (the model's vocabulary unless limited)
  Tensor minus_infinity_;   // one float, copied over the logits of ids past drawable_
  std::int64_t last_W_ = 0;  // the rows of the last pass
  std::vector<std::int32_t> host_indices_;
  std::vector<float> host_logits_;
  std::vector<std::int64_t> host_top_;
  std::vector<std::uint32_t> host_greedy_;  // greedy()'s and sample()'s tokens
  std::vector<std::int32_t> host_drawn_;
  std::vector<std::int64_t> ones_, every_;  // step's counts and rows wanted
  bool use_graphs_ = true;
  std::map<std::int64_t, cuda::Graph> graphs_;  // a decoding step's, by its number of sequences
  std::set<std::int64_t> launched_;             // the batch sizes run once since the buffers were made
};

}  // namespace brrr::models
