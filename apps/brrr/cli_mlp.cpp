// apps/brrr/cli_mlp.cpp: `brrr mlp`, train the chapter-05 MLP on spirals (chapter 05).
#include <filesystem>

#include "brrr/models/mlp.h"
#include "brrr/parallel.h"
#include "commands.h"

namespace brrr::cli {

void add_mlp_commands(CLI::App& app) {
  auto options = std::make_shared<models::MLPTrainOptions>();
  options->out_dir = "out";
  CLI::App* cmd = app.add_subcommand("mlp", "Train the chapter-05 MLP on 2-D spirals; writes loss and decision-boundary PNGs");
  cmd->add_option("--steps", options->steps, "Full-batch training steps")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--points", options->points_per_class, "Points per class")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--classes", options->classes, "Classes (spiral arms)")->check(CLI::Range(2, 8))->capture_default_str();
  cmd->add_option("--hidden", options->hidden, "Hidden width")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--lr", options->lr, "AdamW learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--seed", options->seed, "Random seed")->capture_default_str();
  cmd->add_option("--out", options->out_dir, "Directory for the PNG images")->capture_default_str();
  cmd->callback([options] {
    std::filesystem::create_directories(options->out_dir);
    const models::MLPTrainResult r = models::train_mlp(*options);
    if (r.accuracy < 0.99) std::printf("note: accuracy below 99%%; try more --steps\n");
  });
}

}  // namespace brrr::cli
