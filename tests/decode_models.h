// tests/decode_models.h: the small GPTs the Decoders' tests generate from (tests/models/
// test_decode.cpp on the CPU, tests/emulator/test_decode_device.cpp on the CUDA kernels): random
// weights far from ties, so that greedy tokens do not hinge on a last bit.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "brrr/autograd.h"
#include "brrr/models/gpt.h"

namespace brrr::test {

// Every matrix N(0, 0.1) instead of GPT-2's 0.02, the biases N(0, 0.05): logits far apart.
inline std::unique_ptr<models::GPT> far_from_ties_model(const models::GPTConfig& c, std::uint64_t seed) {
  Generator g(seed);
  auto model = std::make_unique<models::GPT>(c, g);
  NoGradGuard no_grad;
  for (auto& [name, p] : model->named_parameters())
    if (p.dim() == 2) p.normal_(0.0, 0.1, g);
    else if (name.find(".bias") != std::string::npos) p.normal_(0.0, 0.05, g);
  model->eval();
  return model;
}

inline models::GPTConfig gpt_shape(std::int64_t layers, std::int64_t heads, std::int64_t width, std::int64_t vocab,
                                   bool bias, bool tied, const char* activation, std::int64_t block_size) {
  models::GPTConfig c;
  c.n_layer = layers, c.n_head = heads, c.n_embd = width, c.vocab_size = vocab, c.block_size = block_size;
  c.bias = bias, c.tie_head = tied, c.activation = activation;
  return c;
}

}  // namespace brrr::test
