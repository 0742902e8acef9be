// brrr/models/mlp.h: the course's first model, an MLP that classifies 2-D points.
// Chapter 05 (modules, optimizers and the first MLP). Read before: brrr/nn.h, brrr/optim.h.
// Read next: docs/chapters/06-tokenization.md.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brrr/generator.h"
#include "brrr/nn.h"

namespace brrr::models {

// Interleaved spirals, one arm per class (the cs231n data set): points (N*K, 2) float32 and
// labels (N*K) int64. Noise is the standard deviation added to each arm's angle.
struct Dataset {
  Tensor points, labels;
  int classes;
};
Dataset make_spirals(int points_per_class, int classes, double noise, Generator& gen);

// in -> hidden -> ... -> hidden -> classes, ReLU between layers.
class MLP : public nn::Module {
 public:
  MLP(int in, int hidden, int layers, int classes, Generator& gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<nn::Sequential> net_;
};

struct MLPTrainOptions {
  int points_per_class = 100;
  int classes = 3;
  double noise = 0.2;
  int hidden = 64;
  int layers = 2;
  int steps = 1500;
  double lr = 1e-2;
  std::uint64_t seed = 1337;
  std::string out_dir;  // PNGs go here when not empty
  bool verbose = true;
};

struct MLPTrainResult {
  std::vector<double> losses;  // one per step, full-batch
  double accuracy = 0.0;       // on the training set after the last step
  std::vector<std::string> images;
};

MLPTrainResult train_mlp(const MLPTrainOptions& options);

}  // namespace brrr::models
