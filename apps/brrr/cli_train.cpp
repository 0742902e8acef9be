// apps/brrr/cli_train.cpp: `brrr train` and `brrr sample` (chapter 08).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "brrr/strings.h"
#include "brrr/io.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/generate.h"
#include "brrr/parallel.h"
#include "commands.h"
#include "brrr/tokenizer/text_tokenizer.h"
#include "train/trainer.h"

namespace brrr::cli {

namespace fs = std::filesystem;

void add_train_commands(CLI::App& app) {
  // ---- brrr train ----
  struct TrainArgs {
    std::string preset = "cpu-tiny", config_file;
    bool resume = false;
    std::map<std::string, std::string> values;  // --key value, applied last
  };
  auto args = std::make_shared<TrainArgs>();
  CLI::App* train = app.add_subcommand("train", "Train a GPT on a text file (default: ../shared/data/tinyshakespeare.txt)");
  train->add_option("--preset", args->preset, "Named configuration: " + join(train::TrainConfig::preset_names()))
      ->capture_default_str();
  train->add_option("--config", args->config_file, "JSON file of settings (keys as the flags below)")->check(CLI::ExistingFile);
  train->add_flag("--resume", args->resume, "Continue from the newest checkpoint in --out_dir");
  for (const auto& [key, type] : train::TrainConfig::keys()) {
    if (key == "preset") continue;
    train->add_option_function<std::string>(
        "--" + key, [args, key = key](const std::string& v) { args->values[key] = v; }, "(" + type + ")");
  }
  train->callback([args] {
    train::TrainConfig c = train::TrainConfig::from_preset(args->preset);
    if (!args->config_file.empty()) c.apply_json(read_file(args->config_file));
    // Flags last: each becomes a JSON value of the key's type, so one parser checks them all.
    nlohmann::json j = nlohmann::json::object();
    std::map<std::string, std::string> types;
    for (const auto& [k, t] : train::TrainConfig::keys()) types[k] = t;
    for (const auto& [key, value] : args->values) {
      const std::string& type = types[key];
      try {
        if (type == "string") j[key] = value;
        else if (type == "bool") {
          BRRR_CHECK(value == "true" || value == "false" || value == "1" || value == "0", "--", key, " expects true or false, got '", value, "'");
          j[key] = value == "true" || value == "1";
        } else if (type == "integer") {
          std::size_t used = 0;
          j[key] = std::stoll(value, &used);
          BRRR_CHECK(used == value.size(), "--", key, " expects an integer, got '", value, "'");
        } else {
          std::size_t used = 0;
          j[key] = std::stod(value, &used);
          BRRR_CHECK(used == value.size(), "--", key, " expects a number, got '", value, "'");
        }
      } catch (const std::logic_error&) {
        detail::fail("--", key, " expects ", type == "integer" ? "an integer" : "a number", ", got '", value, "'");
      }
    }
    if (!j.empty()) c.apply_json(j.dump());
    c.resume = args->resume;
    const train::TrainResult r = train::run_training(c);
    if (r.interrupted) throw CLI::RuntimeError(130);
  });

  // ---- brrr sample ----
  struct SampleArgs {
    std::string checkpoint = "out", prompt = "\n", tokenizer;
    models::GenerateOptions options;
    bool no_cache = false, stats = false;
  };
  auto s = std::make_shared<SampleArgs>();
  CLI::App* sample = app.add_subcommand("sample", "Generate text from a trained checkpoint, streaming tokens as they come");
  sample->add_option("--checkpoint", s->checkpoint, "A checkpoint file, or a training --out_dir (its newest checkpoint)")->capture_default_str();
  sample->add_option("--tokenizer", s->tokenizer, "Tokenizer file (default: the one saved beside the checkpoint)");
  sample->add_option("--prompt", s->prompt, "Text to continue");
  sample->add_option("--max_new_tokens", s->options.max_new_tokens, "Tokens to generate")->check(CLI::PositiveNumber)->capture_default_str();
  sample->add_option("--temperature", s->options.temperature, "Softmax temperature (> 0)")->check(CLI::PositiveNumber)->capture_default_str();
  sample->add_option("--top_k", s->options.top_k, "Keep the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber)->capture_default_str();
  sample->add_option("--top_p", s->options.top_p, "Keep the most likely tokens up to this probability")->check(CLI::Range(1e-9, 1.0))->capture_default_str();
  sample->add_option("--seed", s->options.seed, "Random seed")->capture_default_str();
  sample->add_flag("--no_kv_cache", s->no_cache, "Recompute the whole context for every token (slower)");
  sample->add_flag("--stats", s->stats, "Print tokens per second at the end");
  sample->callback([s] {
    std::string path = s->checkpoint;
    if (fs::is_directory(path)) {
      const auto found = train::list_checkpoints(path);
      BRRR_CHECK(!found.empty(), "no checkpoint (ckpt-*.safetensors) in '", path, "'; train first with brrr train");
      path = found.back().second;
    }
    const std::string tok_path = s->tokenizer.empty() ? (fs::path(path).parent_path() / "tokenizer").string() : s->tokenizer;
    BRRR_CHECK(fs::exists(tok_path), "no tokenizer at '", tok_path, "' (pass --tokenizer FILE)");
    auto tokenizer = tokenizer::TextTokenizer::load(tok_path);
    auto model = models::load_model(path);
    BRRR_CHECK(static_cast<std::int64_t>(tokenizer->vocab_size()) == model->config().vocab_size, "the tokenizer '", tok_path,
               "' has ", tokenizer->vocab_size(), " tokens but the model's vocabulary is ", model->config().vocab_size);
    s->options.kv_cache = !s->no_cache;
    const std::vector<std::uint32_t> prompt = tokenizer->encode(s->prompt);
    std::fputs(s->prompt.c_str(), stdout);
    const auto start = std::chrono::steady_clock::now();
    const auto tokens = models::generate(*model, prompt, s->options, [&](std::uint32_t t) {
      std::fputs(tokenizer->decode(std::vector<std::uint32_t>{t}).c_str(), stdout);
      std::fflush(stdout);
    });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("\n");
    if (s->stats)
      std::fprintf(stderr, "%zu tokens in %.2f s: %.1f tokens/s (%s)\n", tokens.size(), secs, tokens.size() / secs,
                   s->options.kv_cache ? "KV cache" : "no KV cache");
  });
}

}  // namespace brrr::cli
