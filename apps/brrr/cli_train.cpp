// apps/brrr/cli_train.cpp: `brrr train` and `brrr sample` (chapter 08).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>

#include "brrr/strings.h"
#include "brrr/io.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/generate.h"
#include "brrr/parallel.h"
#include "commands.h"
#include "brrr/tokenizer/text_tokenizer.h"
#include "train/model_source.h"
#include "train/trainer.h"

namespace brrr::cli {

namespace fs = std::filesystem;

std::string preset_in(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--preset" && i + 1 < argc) return argv[i + 1];
    if (a.rfind("--preset=", 0) == 0) return a.substr(9);
  }
  return "cpu-tiny";
}

namespace {
// A setting's value as the help shows it: "5000", "0.0006", "true", "bpe".
std::string default_text(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) {
    std::ostringstream s;
    s << value.get<double>();
    return s.str();
  }
  return value.dump();
}
}  // namespace

void add_train_commands(CLI::App& app, const std::string& preset_for_help) {
  // ---- brrr train ----
  struct TrainArgs {
    std::string preset = "cpu-tiny", config_file;
    bool resume = false;
    std::map<std::string, std::string> values;  // --key value, applied last
  };
  auto args = std::make_shared<TrainArgs>();
  CLI::App* train = app.add_subcommand("train", "Train a GPT on a text file (default: ../shared/data/tinyshakespeare.txt) or on shards of token ids");
  train->footer("Settings apply in this order: the preset, then --config, then each flag. Every flag also has the "
                "spelling with dashes (--max-iters), and is a key of the JSON config file.");
  train->add_option("--preset", args->preset, "Named configuration that sets every default below: " +
                                                  join(train::TrainConfig::preset_names()))
      ->check(CLI::IsMember(train::TrainConfig::preset_names()))
      ->capture_default_str()
      ->group("Run");
  train->add_option("--config", args->config_file, "JSON file of settings (keys as the flags below)")
      ->check(CLI::ExistingFile)
      ->group("Run");
  train->add_flag("--resume", args->resume, "Continue from the newest checkpoint in --out_dir, bit for bit")
      ->group("Run");
  // The defaults shown are the preset's (an unknown --preset shows cpu-tiny's; the run then
  // says the preset is unknown).
  nlohmann::json defaults;
  try {
    defaults = nlohmann::json::parse(train::TrainConfig::from_preset(preset_for_help).to_json());
  } catch (const Error&) {
    defaults = nlohmann::json::parse(train::TrainConfig::from_preset("cpu-tiny").to_json());
  }
  for (const train::TrainConfig::Key& key : train::TrainConfig::keys()) {
    if (key.name == "preset") continue;
    const std::string type = key.type == "integer" ? "INT" : key.type == "number" ? "FLOAT" : key.type == "bool" ? "BOOL" : "TEXT";
    CLI::Option* option = train->add_option_function<std::string>(
        "--" + key.name, [args, name = key.name](const std::string& v) { args->values[name] = v; }, key.help);
    option->type_name(type)->group(key.group);
    if (defaults.contains(key.name) && !(key.name == "data" && defaults[key.name] == ""))
      option->default_str(default_text(defaults[key.name]));
  }
  train->callback([args] {
    train::TrainConfig c = train::TrainConfig::from_preset(args->preset);
    std::vector<std::string> given;  // the settings written by the user, which --init_from's model must agree with
    if (!args->config_file.empty()) {
      const std::string text = read_file(args->config_file);
      c.apply_json(text);
      const nlohmann::json written = nlohmann::json::parse(text);  // apply_json accepted it
      for (const auto& [key, value] : written.items()) {
        std::string k = key;  // "n-layer" is "n_layer", as apply_json reads it
        std::replace(k.begin(), k.end(), '-', '_');
        given.push_back(k);
      }
    }
    // Flags last: each becomes a JSON value of the key's type, so one parser checks them all.
    nlohmann::json j = nlohmann::json::object();
    std::map<std::string, std::string> types;
    for (const train::TrainConfig::Key& k : train::TrainConfig::keys()) types[k.name] = k.type;
    for (const auto& [key, value] : args->values) {
      const std::string& type = types[key];
      // A value of the wrong type is a usage mistake (exit 2), like an unknown flag.
      const auto wrong = [&](const char* expected) {
        return CLI::ValidationError("--" + key, std::string("expects ") + expected + ", got '" + value + "'");
      };
      if (type == "string") {
        j[key] = value;
      } else if (type == "bool") {
        if (value != "true" && value != "false" && value != "1" && value != "0") throw wrong("true or false");
        j[key] = value == "true" || value == "1";
      } else {
        std::size_t used = 0;
        try {
          if (type == "integer") j[key] = std::stoll(value, &used);
          else j[key] = std::stod(value, &used);
        } catch (const std::logic_error&) {
          used = 0;
        }
        if (used == 0 || used != value.size()) throw wrong(type == "integer" ? "an integer" : "a number");
        // std::stod reads "nan" and "inf", which JSON cannot hold (they would arrive as null).
        if (type != "integer" && !std::isfinite(j[key].get<double>())) throw wrong("a finite number");
      }
    }
    if (!j.empty()) c.apply_json(j.dump());
    for (const auto& [key, value] : args->values) given.push_back(key);
    c.apply_init_from(given);
    c.resume = args->resume;
    const train::TrainResult r = train::run_training(c);
    if (r.interrupted) throw CLI::RuntimeError(130);
  });

  // ---- brrr sample ----
  struct SampleArgs {
    std::string checkpoint = "out", prompt = "\n", tokenizer;
    models::GenerateOptions options;
    bool no_cache = false, stats = false;
    std::string kv_cache = "float32", dtype = "float32", device = "cpu";
  };
  auto s = std::make_shared<SampleArgs>();
  CLI::App* sample = app.add_subcommand("sample", "Generate text from a trained checkpoint, streaming tokens as they come");
  sample->add_option("--checkpoint", s->checkpoint, "A checkpoint file, a training --out_dir (its newest checkpoint), "
                     "or a Hugging Face GPT-2 folder (config.json, model.safetensors, tokenizer.json)")->capture_default_str();
  sample->add_option("--tokenizer", s->tokenizer, "Tokenizer file (default: the one saved beside the checkpoint, or the folder's)");
  sample->add_option("--prompt", s->prompt, "Text to continue");
  sample->add_option("--max_new_tokens", s->options.max_new_tokens, "Tokens to generate")->check(CLI::PositiveNumber)->capture_default_str();
  sample->add_option("--temperature", s->options.temperature, "Softmax temperature (0: greedy, the most likely token each step)")->check(CLI::NonNegativeNumber)->capture_default_str();
  sample->add_option("--top_k", s->options.top_k, "Keep the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber)->capture_default_str();
  sample->add_option("--top_p", s->options.top_p, "Keep the most likely tokens up to this probability")->check(CLI::Range(1e-9, 1.0))->capture_default_str();
  sample->add_option("--seed", s->options.seed, "Random seed")->capture_default_str();
  sample->add_flag("--no_kv_cache", s->no_cache, "Recompute the whole context for every token (slower)");
  sample->add_option("--kv_cache", s->kv_cache, "How the KV cache keeps keys and values: float32, or int8 (a scale per "
                     "head and position, 3.6x smaller; chapter 18)")
      ->check(CLI::IsMember({"float32", "int8"}))
      ->capture_default_str();
  sample->add_option("--dtype", s->dtype, "The weights generation reads: float32, or bf16 (rounded to bfloat16 once, half "
                     "the bytes per token; products and sums in float32; the float32 KV cache; BRRR_AMX=1 puts the "
                     "products on AMX's tile unit where the CPU has one, faster for long prompts, slower per token)")
      ->check(CLI::IsMember({"float32", "bf16"}))
      ->capture_default_str();
  sample->add_option("--device", s->device, "cpu, cuda (the Decoder's pass as CUDA kernels, the KV cache in device "
                     "memory; chapter 20), emulator (those kernels on the CPU, slowly) or auto")
      ->check(CLI::IsMember({"cpu", "cuda", "emulator", "auto"}))
      ->capture_default_str();
  sample->add_flag("--stats", s->stats, "Print tokens per second at the end");
  sample->callback([s] {
    // The checkpoint first: a missing or damaged one is the real problem, whatever else is missing.
    const train::ModelSource source = train::open_model_and_tokenizer(s->checkpoint, s->tokenizer);
    auto& model = source.model;
    auto& tokenizer = source.tokenizer;
    model->to(train::resolve_device(s->device, stderr));
    s->options.kv_cache = !s->no_cache;
    s->options.kv_cache_int8 = s->kv_cache == "int8";
    BRRR_CHECK(!(s->no_cache && s->options.kv_cache_int8), "--kv_cache int8 and --no_kv_cache contradict each other");
    s->options.weights = s->dtype == "bf16" ? kBFloat16 : kFloat32;
    BRRR_CHECK(s->dtype != "bf16" || (s->options.kv_cache && !s->options.kv_cache_int8),
               "--dtype bf16 needs the float32 KV cache (drop --no_kv_cache and --kv_cache int8)");
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
                   !s->options.kv_cache ? "no KV cache" : s->options.kv_cache_int8 ? "int8 KV cache"
                   : s->dtype == "bf16" ? "KV cache, bf16 weights" : "KV cache");
  });
}

}  // namespace brrr::cli
