// train/evaluate.h: a model's loss and perplexity on a whole text (brrr eval).
// Chapter 08 (training: "Pretrained models"). Read before: brrr/models/gpt.h (GPT::loss).
//
// The definition (brrr eval --help and the chapter say the same): the text's tokens t0..tN-1 are
// cut into consecutive windows of the model's context length; each window is fed from a fresh
// start and predicts its next tokens (window k feeds t[kB .. kB+B-1] and predicts t[kB+1 .. kB+B];
// the last window may be shorter), so every token but the first is predicted exactly once.
// The loss is the mean over those N - 1 predictions, in nats per token; perplexity is e^loss.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "brrr/models/decode.h"
#include "brrr/models/decode_device.h"
#include "brrr/models/gpt.h"
#include "brrr/tokenizer/text_tokenizer.h"

namespace brrr::train {

struct EvalResult {
  std::int64_t predicted = 0;  // N - 1
  double loss = 0;             // nats per token
  double perplexity = 0;       // exp(loss)
};

// The ids brrr eval scores: `data` is a text file, encoded with `tok`; or token files (one file, a
// folder of shards, a glob: tokenizer/shards.h, the forms brrr train --data takes; brrr's format
// or llm.c's), read one after another as a single sequence, as training reads them. A file that
// records its vocabulary must have tok's; one that names its tokenizer must name tok's file
// (tokenizer_path, when that is a brrr tokenizer file): ids made by another tokenizer would be
// scored as if they were tok's, a loss that means nothing.
std::vector<std::uint32_t> eval_tokens(const std::string& data, const tokenizer::TextTokenizer& tok,
                                       const std::string& tokenizer_path);

// batch_size full windows go through the model at a time; progress(done, total) is called
// after each batch with the predictions made so far.
EvalResult evaluate_tokens(models::GPT& model, const std::vector<std::uint32_t>& tokens, std::int64_t batch_size = 8,
                           const std::function<void(std::int64_t, std::int64_t)>& progress = {});

// The same definition through the generation path (brrr sample's and serve's Decoder, float32 or
// bfloat16 weights): each window one prefill from a fresh cache, every row's logits; the loss
// of each prediction is log-sum-exp of the logits minus the target's, in double.
EvalResult evaluate_tokens(models::Decoder& decoder, const std::vector<std::uint32_t>& tokens,
                           const std::function<void(std::int64_t, std::int64_t)>& progress = {});
// The same on the GPU's DeviceDecoder (brrr eval --decoder --device cuda or emulator), in one slot.
EvalResult evaluate_tokens(models::DeviceDecoder& decoder, const std::vector<std::uint32_t>& tokens,
                           const std::function<void(std::int64_t, std::int64_t)>& progress = {});

}  // namespace brrr::train
