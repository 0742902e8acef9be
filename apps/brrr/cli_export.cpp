// apps/brrr/cli_export.cpp: `brrr export --format hf`, a model as a Hugging Face GPT-2 folder that
// transformers loads (GPT2LMHeadModel / AutoTokenizer.from_pretrained). Chapter 08 ("Pretrained models").
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "brrr/io.h"
#include "brrr/models/hf.h"
#include "commands.h"
#include "train/model_source.h"

namespace brrr::cli {

namespace fs = std::filesystem;

void add_export_commands(CLI::App& app) {
  struct ExportArgs {
    std::string checkpoint = "out", tokenizer, format = "hf", out;
  };
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "Write a model as a Hugging Face GPT-2 folder (config.json, "
                                                "model.safetensors, tokenizer.json)");
  cmd->add_option("--checkpoint", a->checkpoint, "A checkpoint file, a training --out_dir (its newest checkpoint), "
                  "or a Hugging Face GPT-2 folder")->capture_default_str();
  cmd->add_option("--tokenizer", a->tokenizer, "Tokenizer file (default: the one saved beside the checkpoint)");
  cmd->add_option("--format", a->format, "hf: Hugging Face's GPT-2 folder")->check(CLI::IsMember({"hf"}))->capture_default_str();
  cmd->add_option("--out", a->out, "The folder to write (must not exist, or be empty)")->required();
  cmd->callback([a] {
    const fs::path out = fs::path(a->out).lexically_normal();
    BRRR_CHECK(!fs::exists(out) || (fs::is_directory(out) && fs::is_empty(out)), "export: '", a->out,
               "' exists and is not an empty folder; brrr export writes a new folder");
    const train::ModelSource source = train::open_model_and_tokenizer(a->checkpoint, a->tokenizer);
    const std::string tokenizer_json = source.tokenizer->to_hf_json();  // before anything is written: it may refuse
    // The folder appears whole or not at all: written beside its place, then renamed there.
    const fs::path parent = out.has_parent_path() ? out.parent_path() : fs::path(".");
    fs::create_directories(parent);
    const fs::path tmp = parent / ("." + out.filename().string() + ".tmp" + std::to_string(::getpid()));
    fs::remove_all(tmp);
    fs::create_directory(tmp);
    try {
      models::save_hf_model(tmp.string(), *source.model);
      write_file_atomic((tmp / "tokenizer.json").string(), tokenizer_json);
      const nlohmann::ordered_json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                                             {"model_max_length", source.model->config().block_size},
                                             {"clean_up_tokenization_spaces", false}};
      write_file_atomic((tmp / "tokenizer_config.json").string(), config.dump(2) + "\n");
      if (fs::exists(out)) fs::remove(out);  // empty, checked above
      fs::rename(tmp, out);
    } catch (...) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      throw;
    }
    std::printf("wrote %s (Hugging Face GPT-2: config.json, model.safetensors, tokenizer.json) from %s\n", out.c_str(),
                source.model_path.c_str());
  });
}

}  // namespace brrr::cli
