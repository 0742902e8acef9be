// models/gpt/hf_export.cpp: writing a GPT as a Hugging Face GPT-2 folder (config.json + safetensors).
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/hf.h, hf_import.cpp (the reverse).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "brrr/io.h"
#include "brrr/models/hf.h"
#include "brrr/safetensors.h"

namespace brrr::models {

namespace fs = std::filesystem;

void save_hf_model(const std::string& dir, const GPT& model) {
  BRRR_CHECK(fs::is_directory(dir), "save_hf_model: '", dir, "' is not a folder");
  const GPTConfig& c = model.config();
  // GPT2Config's keys; what brrr does not vary is written as GPT-2 has it.
  nlohmann::ordered_json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", c.vocab_size},
      {"n_positions", c.block_size},
      {"n_ctx", c.block_size},
      {"n_embd", c.n_embd},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_inner", nullptr},
      {"activation_function", c.activation == "gelu_erf" ? "gelu" : "gelu_new"},
      {"layer_norm_epsilon", c.layer_norm_eps},
      {"resid_pdrop", c.dropout},
      {"embd_pdrop", c.dropout},
      {"attn_pdrop", c.dropout},
      {"initializer_range", 0.02},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", c.tie_head}
  };
  BRRR_CHECK(c.bias, "save_hf_model: GPT-2 has biases; this model was built with bias = false");
  // GPT2LMHeadModel's names: brrr's, with the four Conv1D weights a layer transposed to (in, out)
  // (hf_transposed, the rule the import reads them back by).
  safetensors::NamedTensors tensors;
  for (const auto& [name, p] : model.named_parameters())
    tensors.emplace_back(name, hf_transposed(name) ? p.detach().transpose(0, 1).contiguous() : p.detach());
  safetensors::save((fs::path(dir) / "model.safetensors").string(), tensors, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "config.json").string(), j.dump(2) + "\n");
}

}  // namespace brrr::models
