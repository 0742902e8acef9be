// brrr/models/hf.h: GPT-2 models in Hugging Face's format, read and written.
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/checkpoint.h,
// brrr/safetensors.h. Read next: brrr/tokenizer/hf_tokenizer.h (the same folder's tokenizer).
//
// A Hugging Face model is a folder:
//
//   config.json                    {"model_type": "gpt2", "n_layer": 12, "n_head": 12, ...}
//   model.safetensors              the weights, or
//   model.safetensors.index.json   {"weight_map": {"h.0.ln_1.weight": "model-00001-of-00002.safetensors", ...}}
//
// The names are brrr's without "transformer." (files saved from GPT2LMHeadModel keep it; the
// original gpt2 upload does not: both are read). The difference that matters is the layout:
// GPT-2's c_attn, c_proj and c_fc are Conv1D modules whose weight is (in, out), the transpose
// of nn.Linear's (out, in) that brrr (and PyTorch's Linear) use, so those four matrices a
// layer are transposed on the way in and out. lm_head is tied to wte unless the config says
// "tie_word_embeddings": false, when the file holds lm_head.weight (V, C) of its own.
#pragma once
#include <memory>
#include <string>

#include "brrr/models/gpt.h"

namespace brrr::models {

// Whether dir looks like a Hugging Face model folder (it has a config.json).
bool is_hf_folder(const std::string& dir);

// Whether the parameter `name` (brrr's: "transformer.h.0.attn.c_attn.weight") is one of GPT-2's
// Conv1D weights, stored (in, out) in a Hugging Face file: the one rule import and export share
// for which weights are transposed (c_attn, attn.c_proj, c_fc, mlp.c_proj in every block).
bool hf_transposed(const std::string& name);

// The GPTConfig of dir/config.json. Settings brrr does not implement (another model_type,
// scale_attn_by_inverse_layer_idx, reorder_and_upcast_attn, add_cross_attention, an
// activation other than GELU's two forms (gelu_new and gelu_pytorch_tanh, the tanh form; gelu,
// the exact x Phi(x), read as GPTConfig::activation "gelu_erf"), ...) are errors naming the
// file and the key.
GPTConfig read_hf_config(const std::string& dir);

// The model in dir: config.json, then model.safetensors or its sharded index. A missing,
// truncated or contradicting weight file is an error naming the file and the tensor; a folder
// with only pytorch_model.bin says how to convert it. Weights are copied into the model and
// the file pages dropped as they are read, so the weights are never held twice.
std::shared_ptr<GPT> load_hf_model(const std::string& dir);

// Writes config.json and model.safetensors for model into the folder dir (which must exist),
// each file atomically; GPT2LMHeadModel.from_pretrained(dir) loads them. (brrr export writes
// a whole folder at once: into a temporary folder beside it, renamed into place when complete.)
void save_hf_model(const std::string& dir, const GPT& model);

}  // namespace brrr::models
