// train/data_parallel.h: what the training loop does besides its step when several ranks
// train together (inside brrr::train). Chapter 19 (data parallelism). Read before:
// distributed.h, zero_step.h. Read next: data_parallel.cpp.
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>

#include "brrr/models/gpt.h"
#include "train/distributed.h"
#include "train/gradient_reducer.h"
#include "train/trainer.h"

namespace brrr::train {

// Before the first step every rank must agree on the settings, --resume and the training text
// itself (its size and an FNV-1a hash of its bytes). Rank 0's is the reference; a rank that
// differs is named with the keys that differ.
void check_ranks_agree(const TrainConfig& c);

// Rank r's dropout masks come from its own stream: the seed moved by r, the offset shared (all
// ranks draw the same amounts). A checkpoint holds rank 0's states; the other ranks move them
// again after loading, so an N-rank run resumes bit for bit.
void give_dropout_its_rank(models::GPT& model, int rank);

// The fault drill of chapter 19 (and its test): BRRR_FAULT=throw@R:S makes rank R throw at
// step S, kill@R:S makes it die at once (SIGKILL); the other ranks must stop, not hang.
void fault_drill(std::int64_t step);

// The training steps' time, and how much of it went to collectives and to waiting for the
// other ranks (chapter 19's measurement).
class StepClock {
 public:
  void start();
  void stop();
  // With collectives active, prints rank 0's shares, appends them to the log and sets
  // result.communication_share.
  void report(const TrainConfig& c, int ranks, bool zero, const dist::GradientReducer& reducer, std::int64_t steps,
              std::ofstream& log, TrainResult& result) const;

 private:
  double seconds_ = 0, communicating_ = 0, waiting_ = 0;
  const double in_backward_at_start_ = dist::seconds_communicating_in_backward();
  std::chrono::steady_clock::time_point start_;
  double communicating_at_start_ = 0, waiting_at_start_ = 0;
};

}  // namespace brrr::train
