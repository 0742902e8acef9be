// apps/brrr/cli_verify.cpp: `brrr verify-reference FILE`, brrr's GPT against PyTorch's (chapter 07).
#include <cstdio>

#include "brrr/cuda.h"
#include "brrr/models/reference.h"
#include "brrr/ops.h"
#include "commands.h"

namespace brrr::cli {

void add_verify_commands(CLI::App& app) {
  struct Args {
    std::string file, device = "cpu";
    bool composed = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("verify-reference", "Check the GPT against a PyTorch reference file (prints PASS or FAIL)");
  cmd->add_option("file", args->file, "Reference .safetensors (see ../shared/reference/README.md)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--device", args->device, "cpu, cuda, or emulator (the CUDA kernels on the CPU's SIMT emulator)")
      ->check(CLI::IsMember({"cpu", "cuda", "emulator"}))
      ->capture_default_str();
  cmd->add_flag("--composed", args->composed, "Use the composed ops instead of the fused kernels");
  cmd->callback([args] {
    models::ReferenceOptions options;
    if (args->device == "emulator") cuda::use_emulator();
    options.device = args->device == "cpu" ? kCPU : Device::cuda();
    if (options.device.is_cuda()) std::printf("device: cuda:0 (%s)\n", cuda::device_name().c_str());
    if (args->composed) ops::select_composed();  // the registry's composed variants, for this run
    const models::ReferenceReport r = models::verify_reference(args->file, options);
    std::printf("config: %s\n", r.config_json.c_str());
    // margin: how many times the error fits under the bar (below 1 fails). "err / scale" is the
    // error over the reference tensor's largest magnitude, the scale-free view.
    std::printf("%-50s %12s %12s %12s %10s  %s\n", "tensor", "max abs err", "err / scale", "bar", "margin", "");
    const models::ReferenceCheck* tightest = nullptr;
    for (const auto& c : r.checks) {
      std::printf("%-50s %12.3e %12.3e %12.3e %9.3gx  %s\n", c.name.c_str(), c.max_abs_error, c.max_rel_error,
                  c.tolerance, c.margin(), c.ok() ? "ok" : "FAIL");
      if (!tightest || c.margin() < tightest->margin()) tightest = &c;
    }
    if (tightest) std::printf("smallest margin: %.3gx (%s)\n", tightest->margin(), tightest->name.c_str());
    std::printf("%s\n", r.passed() ? "PASS" : "FAIL");
    if (!r.passed()) throw CLI::RuntimeError(1);
  });
}

}  // namespace brrr::cli
