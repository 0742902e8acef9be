// apps/brrr/main.cpp: the brrr program (chapter 08 walks through it). `brrr --help` lists the
// subcommands.
// Each group of subcommands lives in its own cli_*.cpp (see commands.h).
#include <cstdio>
#include <exception>

#include "brrr/error.h"
#include "brrr/kernels.h"
#include "commands.h"
#include "exercises/grader.h"

int main(int argc, char** argv) {
  brrr::exercises::install();  // the exercises' "student" and "solution" variants, for --kernels
  CLI::App app{"brrr: a deep learning framework written to be read as a course"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Every subcommand's help");
  // A mistyped option prints the usage of the command it was given to, not just the error.
  app.failure_message(CLI::FailureMessage::help);
  std::string kernel_spec;
  app.add_option("--kernels", kernel_spec,
                 "Kernel variants to use, e.g. layernorm_forward=student (as BRRR_KERNELS)");
  app.parse_complete_callback([&] {
    if (!kernel_spec.empty()) brrr::kernels::select_from_spec(kernel_spec);
  });
  brrr::cli::add_mlp_commands(app);
  brrr::cli::add_tokenizer_commands(app);
  brrr::cli::add_verify_commands(app);
  brrr::cli::add_train_commands(app);
  brrr::cli::add_kernel_lab_commands(app);
  brrr::cli::add_exercise_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {  // brrr::Error and anything else: one line, exit 1
    std::fflush(stdout);
    std::fprintf(stderr, "brrr: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
