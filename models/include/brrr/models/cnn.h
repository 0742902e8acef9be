// brrr/models/cnn.h: a LeNet-style convolutional network trained on real handwritten digits.
// Chapter 09 (convolutions). Read before: brrr/nn.h (Conv2d, MaxPool2d), brrr/models/mlp.h.
//
// The data: the 1,797 handwritten 8x8 digits of UCI's "Optical Recognition of Handwritten
// Digits" test set, as Debian's python3-sklearn ships them (sklearn/datasets/data/digits.csv.gz:
// one image a line, 64 grey levels 0..16 row by row, then the label). brrr reads that file
// itself (zlib); Python is not involved.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "brrr/generator.h"
#include "brrr/nn.h"

namespace brrr::models {

// Where python3-sklearn puts the digits on Debian.
inline constexpr const char* kDigitsPath = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";

// images (N, 1, 8, 8) float32 scaled to [0, 1], labels (N) int64.
struct Digits {
  Tensor images, labels;
  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};
// The fixed split: every fifth digit of the file (0, 5, 10, ...: 360) is a test digit, the
// other 1,437 train. The file lists the digits writer by writer, so every writer has digits
// on both sides, as with sklearn's shuffled splits. (Holding out the last 360, writers the
// network never saw, is harder: docs/measurements.md has both.)
struct DigitsSplit {
  Digits train, test;
};
// Reads the file (kDigitsPath when path is empty). A missing file is an error that names the
// package to install; a malformed line, one that names the line.
DigitsSplit load_digits(const std::string& path = "");

// conv(1 -> c1, 3x3, pad 1) -> ReLU -> maxpool 2 -> conv(c1 -> c2, 3x3, pad 1) -> ReLU ->
// maxpool 2 -> flatten -> linear(4 c2 -> hidden) -> ReLU -> linear(hidden -> 10).
// Parameters conv1.weight, conv1.bias, conv2.*, fc1.*, fc2.*: PyTorch's shapes, so the state
// dict loads into the same nn.Module written in PyTorch (tests/models/cnn_in_torch.py).
class CNN : public nn::Module {
 public:
  CNN(int c1, int c2, int hidden, Generator& gen, TensorOptions options = {});
  Tensor forward(const Tensor& x) override;  // (N, 1, 8, 8) -> logits (N, 10)
  std::shared_ptr<nn::Conv2d> conv1, conv2;
  std::shared_ptr<nn::Linear> fc1, fc2;
};

struct CNNTrainOptions {
  int c1 = 32, c2 = 64, hidden = 128;
  int epochs = 30;
  int batch = 32;
  double lr = 2e-3;
  double weight_decay = 1e-4;
  // Training digits move by up to this many pixels each way (0: as they are). It helps on
  // writers the network never saw (the harder split in docs/measurements.md), not on this one.
  int shift = 0;
  std::uint64_t seed = 1337;
  // Where the model and the batches live: kCPU, or Device::cuda() (a GPU, or the emulator once
  // cuda::use_emulator() was called; kernels/cuda/conv.cu). Same seed, same initial weights.
  Device device = kCPU;
  std::string data;     // the digits file; empty: kDigitsPath
  std::string out_dir;  // PNGs go here when not empty
  bool verbose = true;
};

struct CNNTrainResult {
  std::vector<double> losses;       // training loss, one per step
  std::vector<double> test_losses;  // test loss after each epoch
  double test_accuracy = 0.0;       // after the last epoch
  double train_accuracy = 0.0;
  double seconds = 0.0;             // wall time of the training loop
  std::vector<std::string> images;  // the PNGs written
};

CNNTrainResult train_cnn(const CNNTrainOptions& options);

}  // namespace brrr::models
