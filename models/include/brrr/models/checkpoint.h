// brrr/models/checkpoint.h: saving and loading a GPT as a safetensors file.
// Chapter 08 (training: checkpoints). Read before: brrr/safetensors.h.
//
// A model checkpoint holds every parameter under its nanoGPT name (the tied lm_head is not
// stored; PyTorch loads it with strict=False or by tying) and the config as JSON in the
// metadata key "config". Training checkpoints (chapter 08) add the optimizer state.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "brrr/models/gpt.h"
#include "brrr/safetensors.h"

namespace brrr::models {

void save_model(const std::string& path, const GPT& model, std::map<std::string, std::string> metadata = {});
// Builds the GPT the file's config describes and loads its parameters.
std::shared_ptr<GPT> load_model(const std::string& path);
// Copies `prefix + name` for every parameter of model from file. Missing tensors and shape
// mismatches are errors naming the file and the tensor; so are tensors under `prefix` that
// the model lacks ("lm_head.weight", the tied head, is allowed).
void load_parameters(const safetensors::File& file, GPT& model, const std::string& prefix = "");

}  // namespace brrr::models
