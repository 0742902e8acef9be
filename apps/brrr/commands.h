// apps/brrr/commands.h: the groups of subcommands of the brrr program, one function per file.
// Each command belongs to its chapter (listed beside it); chapter 08 walks through train/.
// Each adds its subcommands to the app; main.cpp calls them all.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace brrr::cli {
void add_mlp_commands(CLI::App& app);        // cli_mlp.cpp: brrr mlp (chapter 05)
void add_cnn_commands(CLI::App& app);        // cli_cnn.cpp: brrr cnn (chapter 09, convolutions)
void add_tokenizer_commands(CLI::App& app);  // cli_tokenizer.cpp: brrr tokenizer ... (chapter 06)
void add_verify_commands(CLI::App& app);     // cli_verify.cpp: brrr verify-reference (chapter 07)
// cli_train.cpp: brrr train, brrr sample (chapter 08). The help of `train` shows the defaults
// of `preset` (preset_in: the --preset on the command line, else cpu-tiny).
void add_train_commands(CLI::App& app, const std::string& preset);
std::string preset_in(int argc, char** argv);
void add_eval_commands(CLI::App& app);       // cli_eval.cpp: brrr eval (chapter 08, pretrained models)
void add_export_commands(CLI::App& app);     // cli_export.cpp: brrr export --format hf (chapter 08)
void add_serve_commands(CLI::App& app);      // cli_serve.cpp: brrr serve (chapter 20, serving)
void add_kernel_lab_commands(CLI::App& app); // cli_kernel_lab.cpp: brrr kernel-lab (chapter 11), brrr conformance (14)
void add_exercise_commands(CLI::App& app);   // cli_exercises.cpp: brrr exercises (docs/teaching.md)
}  // namespace brrr::cli
