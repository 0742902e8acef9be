// apps/brrr/cli_kernel_lab.cpp: `brrr kernel-lab OP`, the workbench of chapter 10 (the roofline
// and the kernel lab). Read before: kernel_lab.h, which does the work; this file only turns
// the command line into lab::Options.
//
//   brrr kernel-lab gelu_forward                      every variant on the GPU, default size
//   brrr kernel-lab matmul --device emulator --size 64x64x64
//   brrr kernel-lab layernorm_forward --variant student --size N=4096,C=768 --size C=1024
//   brrr kernel-lab adamw_step --device cpu --seed 7 --repeat 20
//
// Exit status 0 when every variant passed its check, 1 (with one line per failure) if not.
#include <fstream>
#include <random>

#include "brrr/error.h"
#include "commands.h"
#include "lab/kernel_lab.h"

namespace brrr::cli {

namespace {

// --json: lines are appended, as the trainer's log.jsonl is, so several runs of the lab (one
// per op, as scripts/gpu.sh makes them) fill one file.
void append_file(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::app | std::ios::binary);
  file << text;
  file.flush();
  BRRR_CHECK(file.good(), "kernel-lab: cannot append to --json file '", path, "'");
}

}  // namespace

void add_kernel_lab_commands(CLI::App& app) {
  struct Args {
    std::string op, variant = "all", device = "cuda";
    std::vector<std::string> sizes;
    int repeat = 0;
    std::uint64_t seed = 0;
    bool check_only = false;
    double tolerance = -1;
    std::string json;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("kernel-lab",
                                     "Check every variant of a kernel against the CPU reference, then time it against "
                                     "the device's measured peaks");
  std::string ops = "Ops (and their sizes):\n";
  for (const lab::Case& c : lab::cases()) {
    std::string dims;
    for (const std::string& d : c.dim_names) dims += (dims.empty() ? "" : ", ") + d;
    ops += "  " + c.op + " (" + dims + "): " + c.what + "\n";
  }
  cmd->footer(ops);
  cmd->add_option("op", args->op, "The op, e.g. matmul or layernorm_forward (listed below)")->required();
  cmd->add_option("--variant", args->variant, "One variant's name, or all")->capture_default_str();
  cmd->add_option("--size", args->sizes,
                  "Sizes in the op's order (4096x768, or 4096,768), some by name (C=1024), or one for all; "
                  "2^26 is allowed. Repeat for several sizes (default: the device's)");
  cmd->add_option("--device", args->device, "cuda (the GPU), emulator (the CUDA kernels on the CPU) or cpu")
      ->check(CLI::IsMember({"cuda", "emulator", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--repeat", args->repeat,
                  "Timed runs per variant (default: 50 on a GPU, 10 on the CPU, 3 on the emulator; fewer past 2 s)")
      ->check(CLI::PositiveNumber);
  CLI::Option* seed =
      cmd->add_option("--seed", args->seed, "Seed of the random inputs (default: a fresh one, printed)");
  cmd->add_flag("--check-only", args->check_only, "Check the variants; do not time them");
  cmd->add_option("--tolerance", args->tolerance, "Largest relative error allowed (default: the op's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", args->json,
                  "Also append the results to this file, one JSON object per variant and size (for scripts)");
  cmd->callback([args, seed] {
    const lab::Case& c = lab::find_case(args->op);
    lab::Options options;
    options.device = lab::parse_device(args->device);
    options.variant = args->variant;
    options.repeat = args->repeat;
    options.time = !args->check_only;
    options.tolerance = args->tolerance;
    options.seed = seed->count() ? args->seed : std::random_device{}() % 1000000;  // short, to retype
    std::vector<lab::Dims> sizes;
    for (const std::string& text : args->sizes)
      sizes.push_back(lab::parse_size(c, text, c.default_size(options.device)));
    if (sizes.empty()) sizes.push_back({});  // the device's default
    std::vector<std::string> failures;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (i > 0) std::printf("\n");
      options.size = sizes[i];
      const lab::Report report = lab::run(c, options);
      for (const std::string& f : report.failures()) failures.push_back(f);
      if (!args->json.empty()) append_file(args->json, lab::json_lines(report));
    }
    if (!failures.empty()) {
      std::string message = "kernel-lab: " + std::to_string(failures.size()) + " variant(s) failed the check:";
      for (const std::string& f : failures) message += "\n  " + f;
      throw Error(message);
    }
  });
}

}  // namespace brrr::cli
