// apps/brrr/cli_cnn.cpp: `brrr cnn`, train the LeNet-style CNN on handwritten digits (chapter 09,
// convolutions).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "brrr/cuda.h"
#include "brrr/models/cnn.h"
#include "commands.h"

namespace brrr::cli {

void add_cnn_commands(CLI::App& app) {
  auto options = std::make_shared<models::CNNTrainOptions>();
  options->out_dir = "out";
  CLI::App* cmd = app.add_subcommand(
      "cnn", "Train a LeNet-style CNN on 1,797 handwritten 8x8 digits (python3-sklearn's); writes loss, "
             "misclassified-digit and filter PNGs");
  cmd->add_option("--epochs", options->epochs, "Passes over the 1,437 training digits")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Training");
  cmd->add_option("--batch", options->batch, "Digits per step")->check(CLI::PositiveNumber)->capture_default_str()->group("Training");
  cmd->add_option("--lr", options->lr, "AdamW peak learning rate (cosine decay to 0)")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Training");
  cmd->add_option("--shift", options->shift, "Move each training digit by up to this many pixels (0: no augmentation)")
      ->check(CLI::Range(0, 3))->capture_default_str()->group("Training");
  cmd->add_option("--seed", options->seed, "Random seed (initialisation and shuffling)")->capture_default_str()->group("Training");
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("--device", *device, "cpu, cuda (the GPU) or emulator (the CUDA kernels on the CPU: slow, for checking)")
      ->check(CLI::IsMember({"cpu", "cuda", "emulator"}))->capture_default_str()->group("Training");
  cmd->add_option("--channels1", options->c1, "Filters in the first conv layer")->check(CLI::PositiveNumber)->capture_default_str()->group("Model");
  cmd->add_option("--channels2", options->c2, "Filters in the second conv layer")->check(CLI::PositiveNumber)->capture_default_str()->group("Model");
  cmd->add_option("--hidden", options->hidden, "Width of the hidden linear layer")->check(CLI::PositiveNumber)->capture_default_str()->group("Model");
  cmd->add_option("--data", options->data, "The digits file (default: python3-sklearn's digits.csv.gz)")->group("Files");
  cmd->add_option("--out", options->out_dir, "Directory for the PNG images")->capture_default_str()->group("Files");
  cmd->callback([options, device] {
    if (*device == "emulator") cuda::use_emulator();
    options->device = *device == "cpu" ? kCPU : Device::cuda();
    if (options->device.is_cuda()) std::printf("device: cuda:0 (%s)\n", cuda::device_name().c_str());
    std::filesystem::create_directories(options->out_dir);
    const models::CNNTrainResult r = models::train_cnn(*options);
    if (r.test_accuracy < 0.97) std::printf("note: test accuracy below 97%%; try more --epochs\n");
  });
}

}  // namespace brrr::cli
