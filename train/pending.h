// train/pending.h: the steps' losses and gradient norms, read from the device only when the
// loop logs, evaluates or saves (inside brrr::train). Chapter 08 (training), for chapter 17's
// sake. Read before: step.h. Read next: pending.cpp.
//
// A step leaves its loss and gradient norm where they were computed. On a GPU every read
// makes the host wait for the device, so the loop reads them in one copy for all the steps
// since the last read: the steps in between never wait, the GPU stays busy, and a step can be
// captured as a CUDA graph (chapter 17).
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>
#include <vector>

#include "train/step.h"
#include "train/trainer.h"

namespace brrr::train {

class PendingSteps {
 public:
  // log: where each step's line goes (rank 0's log.jsonl; a closed stream on the other ranks);
  // result: where each step's loss goes, and the last checkpoint that an error names.
  PendingSteps(int ranks, std::ofstream& log, TrainResult& result) : ranks_(ranks), log_(log), result_(result) {}
  // Called before each step: while nothing is pending, the clock restarts (so that it times
  // the steps, not the evaluation or the checkpoints between them).
  void before_step();
  void add(std::int64_t step, double lr, StepOutput out);
  // Copies every pending value to the host at once (summing the ranks' shares of the losses),
  // appends one line a step to the log and the loss to result.losses. Throws, naming the step
  // and the last good checkpoint, on a NaN or infinite loss.
  void read();
  double last_ms() const { return last_ms_; }  // per step, over the steps of the last read

 private:
  struct Pending {
    std::int64_t step;
    double lr;
    StepOutput out;
  };
  int ranks_;
  std::ofstream& log_;
  TrainResult& result_;
  std::vector<Pending> pending_;
  std::chrono::steady_clock::time_point last_read_ = std::chrono::steady_clock::now();
  double last_ms_ = 0;
};

}  // namespace brrr::train
