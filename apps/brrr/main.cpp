// apps/brrr/main.cpp: the brrr program (chapter 08 walks through it). `brrr --help` lists the
// subcommands, `brrr --version` what this build is.
// Each group of subcommands lives in its own cli_*.cpp (see commands.h).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <set>
#include <string>
#include <vector>

#include "brrr/error.h"
#include "brrr/kernels.h"
#include "brrr/ops.h"
#include "brrr/strings.h"
#include "commands.h"
#include "exercises/grader.h"

namespace {

// Every long option of app and its subcommands, as written in the program ("--max_iters").
void long_options(const CLI::App& app, std::set<std::string>& names) {
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) names.insert("--" + name);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) long_options(*sub, names);
}

// --max-iters and --max_iters are one option: an argument that names no option as typed, but
// does with its dashes and underscores swapped, is rewritten to the spelling the program
// uses (which is the one --help shows).
std::vector<std::string> spelled_as_defined(const CLI::App& app, int argc, char** argv) {
  std::set<std::string> names;
  long_options(app, names);
  std::vector<std::string> args(argv, argv + argc);
  for (std::size_t i = 1; i < args.size(); ++i) {
    std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) continue;
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq), rest = eq == std::string::npos ? "" : arg.substr(eq);
    if (names.count(name)) continue;
    for (const auto& [from, to] : {std::pair{'-', '_'}, std::pair{'_', '-'}}) {
      std::string other = name;
      std::replace(other.begin() + 2, other.end(), from, to);
      if (names.count(other)) {
        arg = other + rest;
        break;
      }
    }
  }
  return args;
}

// The deepest subcommand the command line chose ("train", "tokenizer encode"), or app.
const CLI::App* chosen(const CLI::App& app) {
  const CLI::App* at = &app;
  for (;;) {
    const std::vector<const CLI::App*> used = at->get_subcommands([](const CLI::App* s) { return s->parsed(); });
    if (used.empty()) return at;
    at = used.front();
  }
}

// "brrr train: unknown option --lerning_rate; did you mean --learning_rate?", one line.
std::string unknown_option_message(const CLI::App& app, const std::string& first) {
  const CLI::App* sub = chosen(app);
  std::string path;
  for (const CLI::App* a = sub; a != nullptr && a != &app; a = a->get_parent()) path = " " + a->get_name() + path;
  std::string message = "brrr" + path + ": unknown " + (first.rfind("-", 0) == 0 ? "option " : "argument ") + first;
  if (first.rfind("--", 0) == 0) {
    std::string best;
    const std::string key = first.substr(0, first.find('='));
    // A suggestion within a third of the name's letters (two at least: "--inptu"), or none.
    std::size_t best_distance = std::max<std::size_t>(2, (key.size() - 2) / 3) + 1;
    for (const CLI::Option* option : sub->get_options())
      for (const std::string& name : option->get_lnames()) {
        const std::size_t d = brrr::edit_distance(key, "--" + name);
        if (d < best_distance) best_distance = d, best = "--" + name;
      }
    if (!best.empty()) message += "; did you mean " + best + "?";
  }
  return message + " (brrr" + path + " --help lists the options)";
}

// The first unknown option CLI11 lists ("The following arguments were not expected: 3 --x"
// names a stray value before its option), or the first word when it lists no option.
std::string first_extra(const CLI::ExtrasError& e) {
  std::string unknown = e.what();
  if (const std::size_t colon = unknown.find(": "); colon != std::string::npos) unknown = unknown.substr(colon + 2);
  for (std::size_t at = 0; at < unknown.size();) {
    const std::size_t end = std::min(unknown.find(' ', at), unknown.size());
    if (unknown.compare(at, 2, "--") == 0) return unknown.substr(at, end - at);
    at = end + 1;
  }
  return unknown.substr(0, unknown.find(' '));
}

// An option on the command line that the chosen subcommand (and those above it) does not
// have. CLI11 reports a missing required option before an unknown one; a user who mistyped
// --input as --inptu should hear about the typo, not that --input is missing.
std::string unknown_long_option(const CLI::App& app, const std::vector<std::string>& args) {
  std::set<std::string> known;
  for (const CLI::App* a = chosen(app); a != nullptr; a = a->get_parent())
    for (const CLI::Option* option : a->get_options())
      for (const std::string& name : option->get_lnames()) known.insert("--" + name);
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (args[i].rfind("--", 0) != 0) continue;
    const std::string name = args[i].substr(0, args[i].find('='));
    if (!known.count(name)) return name;
  }
  return "";
}

// What this build is: brrr --version.
std::string version_text() {
  std::string s = "brrr " BRRR_VERSION;
#ifdef BRRR_WITH_CUDA
  s += "\nCUDA backend: on (the GPU when one is present; the SIMT emulator with --device emulator)";
#else
  s += "\nCUDA backend: off (built without nvcc; the SIMT emulator runs the CUDA kernels)";
#endif
  s += "\nCPU code: ";
#if defined(__AVX512F__)
  s += "AVX-512";
#elif defined(__AVX2__)
  s += "AVX2";
#elif defined(__x86_64__)
  s += "baseline x86-64";
#elif defined(__aarch64__)
  s += "arm64 (Advanced SIMD, NEON)";
#else
  s += "portable C++ (no kernel for this CPU's vector instructions)";
#endif
  s += BRRR_NATIVE_BUILD ? " (built for this machine's CPU, -march=native)" : " (portable build)";
#if defined(__AVX512BF16__)
  s += "\nBF16: AVX512-BF16 instructions (vdpbf16ps) available";
#else
  s += "\nBF16: no AVX512-BF16 instructions in this build";
#endif
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line into a file or a pipe too: `brrr train > log` shows each step as it happens.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // The framework's op variants (causal_attention, linear_gelu) join the registry before its
  // first use, which applies BRRR_KERNELS: so BRRR_KERNELS=causal_attention=flash can name them.
  brrr::ops::register_op_variants();
  brrr::exercises::install();  // the exercises' "student" and "solution" variants, for --kernels
  CLI::App app{"brrr: a deep learning framework written to be read as a course"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Every subcommand's help");
  app.set_version_flag("--version", version_text(), "What this build is: version, CUDA, CPU instructions");
  // A parse error is one line and a pointer to --help, not the whole help.
  app.name("brrr");
  app.get_formatter()->column_width(34);  // room for "--learning_rate FLOAT=0.0006" and its text  // usage lines say "brrr train", not the path the program was run by
  app.failure_message([&app](const CLI::App*, const CLI::Error& e) {
    std::string path;
    for (const CLI::App* a = chosen(app); a != nullptr && a != &app; a = a->get_parent())
      path = " " + a->get_name() + path;
    return "brrr" + path + ": " + e.what() + " (brrr" + path + " --help lists the options)\n";
  });
  std::string kernel_spec;
  app.add_option("--kernels", kernel_spec,
                 "Kernel variants to use, e.g. layernorm_forward=student or matmul:bf16=plain (the bf16-products "
                 "slot autocast calls), as BRRR_KERNELS");
  app.parse_complete_callback([&] {
    if (!kernel_spec.empty()) brrr::kernels::select_from_spec(kernel_spec);
  });
  brrr::cli::add_mlp_commands(app);
  brrr::cli::add_cnn_commands(app);
  brrr::cli::add_tokenizer_commands(app);
  brrr::cli::add_verify_commands(app);
  brrr::cli::add_train_commands(app, brrr::cli::preset_in(argc, argv));
  brrr::cli::add_eval_commands(app);
  brrr::cli::add_export_commands(app);
  brrr::cli::add_serve_commands(app);
  brrr::cli::add_kernel_lab_commands(app);
  brrr::cli::add_exercise_commands(app);
  const std::vector<std::string> args = spelled_as_defined(app, argc, argv);
  std::vector<char*> pointers;
  for (const std::string& a : args) pointers.push_back(const_cast<char*>(a.c_str()));
  try {
    app.parse(static_cast<int>(pointers.size()), pointers.data());
  } catch (const CLI::ExtrasError& e) {
    std::fprintf(stderr, "%s\n", unknown_option_message(app, first_extra(e)).c_str());
    return 2;
  } catch (const CLI::RuntimeError& e) {  // a command's own exit code (130: interrupted by Ctrl-C)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {  // --help and --version exit 0; a usage mistake exits 2
    if (e.get_exit_code() == 0) return app.exit(e);
    if (const std::string unknown = unknown_long_option(app, args); !unknown.empty()) {
      std::fprintf(stderr, "%s\n", unknown_option_message(app, unknown).c_str());
      return 2;
    }
    app.exit(e);
    return 2;
  } catch (const std::exception& e) {  // brrr::Error and anything else: one line, exit 1
    std::fflush(stdout);
    std::fprintf(stderr, "brrr: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
