// apps/brrr/cli_kernel_lab.cpp: `brrr kernel-lab OP`, the workbench of chapter 11 (the roofline
// and the kernel lab), and `brrr kernels`, the registry's list. Read before: kernel_lab.h,
// which does the work; this file only turns the command line into lab::Options (the sizes:
// lab_sizes.h).
//
//   brrr kernels                                       every op: devices, variants, the default
//   brrr kernels causal_attention --head-size 160 --dropout 0.1
//                                                      which variant that call runs, and why not the others
//   brrr kernel-lab --list                             the lab's cases, chapter by chapter
//   brrr kernel-lab gelu_forward                       every variant on the GPU, default size
//   brrr kernel-lab matmul --device emulator --size 64x64x64 --mode check
//   brrr kernel-lab layernorm_backward --device cpu --mode grad
//   brrr kernel-lab layernorm_forward --variant student --size N=4096,C=768 --size C=1024
//   brrr kernel-lab adamw_step --device cpu --seed 7 --repeat 20
//   brrr kernel-lab gelu_forward --device emulator --mode counters   memory counters (lab/counters.h)
//   brrr conformance                                   the emulator against the GPU (lab/conformance.h)
//
// Exit status 0 when every variant passed its check, 1 (with one line per failure) if not.
#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <random>

#include "brrr/cuda.h"
#include "brrr/error.h"
#include "brrr/kernels.h"
#include "brrr/ops.h"
#include "brrr/strings.h"
#include "commands.h"
#include "lab_sizes.h"
#include "kernels/cuda/runtime.h"
#include "lab/conformance.h"
#include "lab/counters.h"
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

// `brrr kernels`: for each op, each device and dtype it is registered for, its variants with
// the default marked and each one's line of description.
std::string registry_listing(const std::string& only) {
  ops::register_op_variants();  // the ops built from ops join the registry
  std::string text;
  for (const std::string& op : kernels::ops()) {  // "matmul" shows "matmul:bf16" too
    if (!only.empty() && op != only && op != only + kernels::kBf16Suffix) continue;
    text += op + "\n";
    // Per device: one line per set of dtypes whose variants (and default) are the same, then
    // each variant's description once.
    for (const char* device : {"cpu", "cuda"}) {
      // "cpu*, naive" -> its dtypes, in the order of DType (float32 first): the order of the
      // variants' names would put float32's line first or not as the CPU has AVX-512 or not.
      std::vector<std::pair<std::string, std::vector<std::string>>> dtypes_of;
      std::map<std::string, std::string> about;                   // variant -> its description
      std::map<DType, std::vector<std::string>> names;
      for (const kernels::VariantInfo& v : kernels::variants(op)) {
        if (std::string(v.device.is_cuda() ? "cuda" : "cpu") != device) continue;
        names[v.dtype].push_back(v.variant + (v.selected ? "*" : ""));
        // Its eligibility rule, where it has one (a head size, dropout, bf16 products); a rule
        // that differs by dtype gets a line per dtype.
        const bool ruled = v.meta.max_head_size > 0 || v.meta.dropout || v.meta.bf16_inputs;
        const std::string line = v.meta.about + (ruled ? " [runs: " + kernels::rule_text(v.meta) + "]" : "");
        if (v.meta.about.empty()) continue;
        if (!about.emplace(v.variant, line).second && about[v.variant] != line)
          about.emplace(v.variant + " (" + dtype_name(v.dtype) + ")", line);
      }
      for (const auto& [dtype, list] : names) {
        const std::string variants = join(list);
        const auto same = std::find_if(dtypes_of.begin(), dtypes_of.end(),
                                       [&](const auto& e) { return e.first == variants; });
        if (same == dtypes_of.end()) dtypes_of.push_back({variants, {dtype_name(dtype)}});
        else same->second.push_back(dtype_name(dtype));
      }
      for (const auto& [list, dtypes] : dtypes_of) text += "  " + std::string(device) + " " + join(dtypes) + ": " + list + "\n";
      for (const auto& [variant, line] : about) text += "    " + variant + ": " + line + "\n";
    }
  }
  BRRR_CHECK(!text.empty(), "kernels: no op '", only, "' (ops: ", join(kernels::ops()), ")");
  return text + "* the default: what the registry runs for a plain call of its slot (brrr --kernels OP=VARIANT, "
                "or OP:bf16=VARIANT for the bf16 products autocast calls, picks another); [runs: ...] each "
                "variant's eligibility rule\n";
}

// The lab's row for `op` as the command line asks for it: under --autocast its bf16-products
// row ("matmul" -> "matmul:bf16"), with --dtype bfloat16 its row on bf16 data where it has one
// of its own ("matmul" -> "matmul/bf16"), else `op` itself.
const lab::Case& lab_case(const std::string& op, bool autocast, bool bf16_data) {
  if (autocast) {
    BRRR_CHECK(!bf16_data, "kernel-lab: --autocast is bf16 products on float32 data; --dtype bfloat16 is bf16 "
                           "data: ask for one of them");
    return lab::find_case(op + kernels::kBf16Suffix);
  }
  if (bf16_data)
    for (const lab::Case& c : lab::cases())
      if (c.name == op + "/bf16") return c;
  return lab::find_case(op);
}

// `brrr kernel-lab --list`: the lab's cases, with their sizes, in course order.
std::string case_listing() {
  std::string text;
  for (const lab::Case& c : lab::cases())
    text += "  " + c.name + " (" + join(c.dim_names) + ") [ch. " + c.chapter + (c.has_grad() ? ", grad" : "") +
            "]: " + c.what + "\n";
  return text;
}

}  // namespace

void add_kernel_lab_commands(CLI::App& app) {
  auto only = std::make_shared<std::string>();
  auto emulator = std::make_shared<bool>(false);
  auto call = std::make_shared<kernels::Call>();
  auto autocast = std::make_shared<bool>(false);
  CLI::App* list = app.add_subcommand("kernels", "List the kernel registry: every op, the devices and dtypes it has "
                                                 "kernels for, its variants, the default, and what each is for");
  list->add_option("op", *only, "Only this op");
  list->add_flag("--emulator", *emulator,
                 "List the CUDA kernels as the SIMT emulator registers them (on a machine without a GPU)");
  // A call's facts: with any of them, the op's decision for that call (which variant runs, and
  // why each other one was passed over) instead of the list.
  list->add_option("--head-size", call->head_size, "For a call with this head size (attention)")
      ->check(CLI::PositiveNumber);
  list->add_option("--dropout", call->dropout, "For a call with this dropout on the attention weights")
      ->check(CLI::Range(0.0, 1.0));
  list->add_flag("--autocast", *autocast, "For a call under Autocast(kBFloat16): bf16 products");
  list->callback([only, emulator, call, autocast] {
    if (*emulator) cuda::use_emulator();
    cuda::is_available();  // the CUDA device's kernels register when the backend is chosen
    call->bf16_compute = *autocast;
    if (!(*call == kernels::Call{})) {
      BRRR_CHECK(!only->empty(), "kernels: --head-size, --dropout and --autocast need an op, as in `brrr kernels "
                                 "causal_attention --head-size 160`");
      ops::register_op_variants();
      std::fputs(kernels::explain(*only, *call).c_str(), stdout);
      return;
    }
    std::fputs(registry_listing(*only).c_str(), stdout);
  });

  struct Args {
    std::string op, variant = "all", device = "cuda", mode = "perf", dtype = "float32";
    std::vector<std::string> sizes;
    int repeat = 0;
    std::uint64_t seed = 0;
    bool check_only = false, list = false, misaligned = false, autocast = false;
    double tolerance = -1;
    std::string json;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("kernel-lab",
                                     "Check every variant of a kernel against a float64 reference, check its backward "
                                     "by finite differences, or time it against the device's measured peaks");
  cmd->footer("Ops (and their sizes):\n" + case_listing());
  cmd->add_option("op", args->op, "The op, e.g. matmul or layernorm_forward (listed below)");
  cmd->add_flag("--list", args->list, "List the lab's cases (one or more per registered op) and exit");
  cmd->add_option("--mode", args->mode,
                  "check (against the float64 reference), grad (backward against finite differences), perf "
                  "(check, then time; a size whose reference would take long is checked at a smaller size of "
                  "the same shape), reference (the reference alone, timed) or counters (--device emulator: "
                  "memory requests, sectors, bank conflicts as Nsight Compute counts them; with --variant, by "
                  "source line)")
      ->check(CLI::IsMember({"check", "grad", "perf", "reference", "counters"}))
      ->capture_default_str();
  cmd->add_option("--variant", args->variant, "One variant's name, or all")->capture_default_str();
  cmd->add_option("--size", args->sizes,
                  "Sizes in the op's order (4096x768, or 4096,768), some by name (C=1024), or one for all; "
                  "2^26 is allowed. Repeat for several sizes (default: the device's)");
  cmd->add_option("--device", args->device, "cuda (the GPU), emulator (the CUDA kernels on the CPU) or cpu")
      ->check(CLI::IsMember({"cuda", "emulator", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "The kernels checked: float32, float64 or bfloat16 (bf16 data, chapter 18)")
      ->check(CLI::IsMember({"float32", "float64", "bfloat16"}))
      ->capture_default_str();
  cmd->add_flag("--autocast", args->autocast,
                "The op's bf16-products kernels (float32 data, what Autocast(kBFloat16) runs; chapter 18)");
  cmd->add_flag("--misaligned", args->misaligned, "Start every array one element past an aligned address (as a view x[1:] does)");
  cmd->add_option("--repeat", args->repeat,
                  "Timed runs per variant (default: 50 on a GPU, 10 on the CPU, 3 on the emulator; fewer past 2 s)")
      ->check(CLI::PositiveNumber);
  CLI::Option* seed =
      cmd->add_option("--seed", args->seed, "Seed of the random inputs (default: a fresh one, printed)");
  cmd->add_flag("--check-only", args->check_only, "Check the variants; do not time them (as --mode check)");
  cmd->add_option("--tolerance", args->tolerance, "Largest relative error allowed (default: the op's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--json", args->json,
                  "Also append the results to this file, one JSON object per variant and size (for scripts)");
  cmd->callback([args, seed] {
    if (args->list) {
      std::fputs(case_listing().c_str(), stdout);
      return;
    }
    if (args->op.empty()) throw CLI::RequiredError("op");
    const lab::Case& c = lab_case(args->op, args->autocast, args->dtype == "bfloat16");
    lab::Options options;
    options.device = lab::parse_device(args->device);
    const bool counters = args->mode == "counters" && !args->check_only;
    options.mode = args->check_only ? lab::Mode::Check : counters ? lab::Mode::Check : lab::parse_mode(args->mode);
    options.dtype = args->dtype == "float64" ? kFloat64 : args->dtype == "bfloat16" ? kBFloat16 : kFloat32;
    options.misaligned = args->misaligned;
    options.variant = args->variant;
    options.repeat = args->repeat;
    options.tolerance = args->tolerance;
    options.seed = seed->count() ? args->seed : std::random_device{}() % 1000000;  // short, to retype
    std::vector<lab::Dims> sizes;
    for (const std::string& text : args->sizes)
      sizes.push_back(parse_lab_size(c.name, c.dim_names, text, c.default_size(options.device)));
    if (sizes.empty()) sizes.push_back({});  // the device's default
    std::vector<std::string> failures;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      if (i > 0) std::printf("\n");
      options.size = sizes[i];
      if (counters) {  // lab/counters.h
        const lab::CountersReport report = lab::run_counters(c, options);
        if (!args->json.empty()) append_file(args->json, lab::counters_json_lines(report));
        continue;
      }
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

  // brrr conformance: the emulator against the chip, instruction form by form (lab/conformance.h).
  CLI::App* conformance = app.add_subcommand(
      "conformance", "Run the conformance set (one small kernel per tensor-core and Hopper instruction form) on the "
                     "emulator and, with a GPU, on the GPU: outputs compared bit for bit (chapter 14)");
  auto cases_named = std::make_shared<std::string>(), bits = std::make_shared<std::string>();
  auto emulator_only = std::make_shared<bool>(false);
  conformance->add_option("--case", *cases_named, "Only the cases whose name contains this");
  conformance->add_option("--out", *bits, "Write each case's output words here (hex, one line a case and device)");
  conformance->add_flag("--emulator-only", *emulator_only, "Do not run the cases on the GPU even if there is one");
  conformance->callback([cases_named, bits, emulator_only] {
    const bool gpu = !*emulator_only && gpu::cuda_runtime() != nullptr;
    const int differ = lab::run_conformance_set(stdout, gpu, *cases_named, *bits);
    if (differ > 0)
      throw Error("conformance: " + std::to_string(differ) +
                  " case(s) differ between the emulator and the GPU: the emulator is wrong there (chapter 14)");
  });
}

}  // namespace brrr::cli
