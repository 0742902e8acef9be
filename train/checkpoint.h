// train/checkpoint.h: saving and loading a training run (inside brrr::train; the public side
// is models::list_checkpoints in brrr/models/open.h). Chapter 08 (training). Read next: checkpoint.cpp.
#pragma once
#include <cstdint>
#include <string>

#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "train/trainer.h"

namespace brrr::train {

// What a checkpoint holds, besides the tokenizer file beside it: the run's settings, the
// model, the optimizer, the data generator, and the steps completed.
struct TrainingState {
  TrainConfig config;
  models::GPT& model;
  optim::AdamW& opt;
  Generator& data_gen;
  std::int64_t step;  // steps completed
};

// "ckpt-NNNNNNNN.safetensors", the name of the checkpoint after `step` steps.
std::string checkpoint_name(std::int64_t step);
// Writes out_dir/ckpt-NNNNNNNN.safetensors (atomically), keeps the newest keep_checkpoints,
// and returns the path.
std::string save_checkpoint(const TrainingState& s, const std::string& tokenizer_path);
// Restores s from path (the model and optimizer must have the checkpoint's shapes).
void load_checkpoint(const std::string& path, TrainingState& s);

}  // namespace brrr::train
