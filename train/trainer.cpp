// train/trainer.cpp: the training loop, evaluation, checkpoints and resume. Chapter 08.
// Read before: trainer.h.
#include "train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "brrr/brrr.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/generate.h"
#include "brrr/models/gpt.h"
#include "brrr/profiler.h"
#include "train/data.h"

namespace brrr::train {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// config

TrainConfig TrainConfig::from_preset(const std::string& name) {
  TrainConfig c;
  c.preset = name;
  if (name == "cpu-tiny") {
    // nanoGPT's shakespeare_char config with the README's CPU overrides.
  } else if (name == "shakespeare-char") {
    c.n_layer = 6, c.n_head = 6, c.n_embd = 384, c.block_size = 256, c.dropout = 0.2;
    c.batch_size = 64, c.max_iters = 5000, c.lr_decay_iters = 5000, c.eval_interval = 250, c.eval_iters = 200;
  } else if (name == "gpt-12m") {
    c.n_layer = 6, c.n_head = 6, c.n_embd = 384, c.block_size = 256, c.dropout = 0.0;
    c.tokenizer = "bpe", c.bpe_vocab_size = 4096;
    c.batch_size = 32, c.max_iters = 5000, c.lr_decay_iters = 5000, c.learning_rate = 6e-4, c.min_lr = 6e-5;
    c.beta2 = 0.95, c.eval_iters = 50;
  } else {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    detail::fail("unknown preset '", name, "' (presets: ", names, ")");
  }
  return c;
}

std::vector<std::string> TrainConfig::preset_names() { return {"cpu-tiny", "shakespeare-char", "gpt-12m"}; }

namespace {
// One table of every key, so JSON in and JSON out cannot drift apart.
template <class F>
void for_each_field(TrainConfig& c, F&& f) {
  f("preset", c.preset), f("n_layer", c.n_layer), f("n_head", c.n_head), f("n_embd", c.n_embd);
  f("block_size", c.block_size), f("dropout", c.dropout), f("bias", c.bias), f("fused", c.fused);
  f("data", c.data), f("tokenizer", c.tokenizer), f("bpe_vocab_size", c.bpe_vocab_size), f("val_fraction", c.val_fraction);
  f("batch_size", c.batch_size), f("grad_accum", c.grad_accum), f("max_iters", c.max_iters);
  f("warmup_iters", c.warmup_iters), f("lr_decay_iters", c.lr_decay_iters), f("learning_rate", c.learning_rate);
  f("min_lr", c.min_lr), f("weight_decay", c.weight_decay), f("beta1", c.beta1), f("beta2", c.beta2);
  f("grad_clip", c.grad_clip), f("eval_interval", c.eval_interval), f("eval_iters", c.eval_iters);
  f("log_interval", c.log_interval), f("checkpoint_interval", c.checkpoint_interval);
  f("keep_checkpoints", c.keep_checkpoints), f("sample_tokens", c.sample_tokens), f("out_dir", c.out_dir);
  f("device", c.device), f("seed", c.seed), f("threads", c.threads), f("profile", c.profile);
}
}  // namespace

void TrainConfig::apply_json(const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    detail::fail("config: invalid JSON: ", e.what());
  }
  BRRR_CHECK(j.is_object(), "config: expected a JSON object, got ", j.type_name());
  if (j.contains("preset")) {  // a preset sets the defaults the other keys then override
    BRRR_CHECK(j["preset"].is_string(), "config: 'preset' must be a string");
    const std::string out = out_dir, data_path = data;
    *this = from_preset(j["preset"].get<std::string>());
    out_dir = out, data = data_path;
  }
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for_each_field(*this, [&](const char* name, auto& field) {
      if (key != name) return;
      known = true;
      try {
        field = value.get<std::decay_t<decltype(field)>>();
      } catch (const Json::exception&) {
        detail::fail("config: key '", key, "' has the wrong type (got ", value.dump(), ")");
      }
    });
    BRRR_CHECK(known, "config: unknown key '", key, "'");
  }
}

std::vector<std::pair<std::string, std::string>> TrainConfig::keys() {
  std::vector<std::pair<std::string, std::string>> out;
  TrainConfig c;
  for_each_field(c, [&](const char* name, auto& field) {
    using T = std::decay_t<decltype(field)>;
    out.emplace_back(name, std::is_same_v<T, bool> ? "bool" : std::is_same_v<T, std::string> ? "string"
                                                       : std::is_floating_point_v<T>      ? "number"
                                                                                           : "integer");
  });
  return out;
}

std::string TrainConfig::to_json() const {
  Json j = Json::object();
  TrainConfig copy = *this;
  for_each_field(copy, [&](const char* name, auto& field) { j[name] = field; });
  return j.dump();
}

void TrainConfig::validate() const {
  BRRR_CHECK(batch_size > 0 && grad_accum > 0 && max_iters >= 0, "config: batch_size and grad_accum must be positive");
  BRRR_CHECK(learning_rate > 0 && min_lr >= 0 && min_lr <= learning_rate, "config: need 0 <= min_lr <= learning_rate, got ",
             min_lr, " and ", learning_rate);
  BRRR_CHECK(eval_interval > 0 && eval_iters > 0 && log_interval > 0, "config: eval_interval, eval_iters and log_interval must be positive");
  BRRR_CHECK(keep_checkpoints > 0, "config: keep_checkpoints must be at least 1");
  BRRR_CHECK(device == "cpu" || device == "cuda" || device == "auto" || device == "emulator",
             "config: device must be cpu, cuda, emulator or auto, got '", device, "'");
  BRRR_CHECK(tokenizer == "char" || tokenizer == "bpe", "config: tokenizer must be char or bpe, got '", tokenizer, "'");
  BRRR_CHECK(threads >= 0, "config: threads must be 0 (all cores) or positive");
}

// ---------------------------------------------------------------------------------------------
// checkpoints

namespace {

std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }

std::string checkpoint_path(const std::string& dir, std::int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "/ckpt-%08lld.safetensors", static_cast<long long>(step));
  return dir + name;
}

}  // namespace

std::vector<std::pair<std::int64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  if (!fs::exists(dir)) return found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name.size() == 5 + 8 + 12 && name.substr(13) == ".safetensors")
      found.emplace_back(std::stoll(name.substr(5, 8)), e.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

namespace {

std::string generator_state(const Generator& g) { return std::to_string(g.seed()) + ":" + std::to_string(g.offset()); }
void set_generator_state(Generator& g, const std::string& s, const std::string& where) {
  const std::size_t colon = s.find(':');
  BRRR_CHECK(colon != std::string::npos, where, ": bad generator state '", s, "'");
  g.set_state(std::stoull(s.substr(0, colon)), std::stoull(s.substr(colon + 1)));
}

// The dropout modules hold the model's random streams; they are saved by module path.
std::vector<std::pair<std::string, nn::Dropout*>> dropouts(models::GPT& model) {
  std::vector<std::pair<std::string, nn::Dropout*>> out;
  for (auto& [path, m] : model.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(m.get())) out.emplace_back(path, d);
  return out;
}

std::map<const TensorImpl*, std::string> parameter_names(const models::GPT& model) {
  std::map<const TensorImpl*, std::string> names;
  for (auto& [name, p] : model.named_parameters()) names[p.impl()] = name;
  return names;
}

struct State {
  TrainConfig config;
  models::GPT& model;
  optim::AdamW& opt;
  Generator& data_gen;
  std::int64_t step;  // steps completed
};

std::string save_checkpoint(const State& s, const std::string& tokenizer_path) {
  safetensors::NamedTensors tensors = s.model.named_parameters();
  // AdamW keeps its moments in parameter-group order; name each by its parameter.
  const std::vector<Tensor> moments = s.opt.state();
  const std::vector<Tensor> order = s.opt.params();
  const auto names = parameter_names(s.model);
  for (std::size_t i = 0; i < order.size() && 2 * i + 1 < moments.size(); ++i) {
    tensors.emplace_back("optimizer.m." + names.at(order[i].impl()), moments[2 * i]);
    tensors.emplace_back("optimizer.v." + names.at(order[i].impl()), moments[2 * i + 1]);
  }
  std::map<std::string, std::string> meta = {{"format", "brrr-train-1"},
                                             {"config", s.model.config().to_json()},
                                             {"train_config", s.config.to_json()},
                                             {"step", std::to_string(s.step)},
                                             {"optimizer_step", std::to_string(s.opt.step_count())},
                                             {"rng.data", generator_state(s.data_gen)},
                                             {"tokenizer", fs::path(tokenizer_path).filename().string()}};
  for (auto& [path, d] : dropouts(s.model)) meta["rng." + path] = generator_state(d->gen);
  const std::string path = checkpoint_path(s.config.out_dir, s.step);
  safetensors::save(path, tensors, meta);
  // Keep the newest keep_checkpoints; the one just written is never removed.
  auto all = list_checkpoints(s.config.out_dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(s.config.keep_checkpoints) < all.size(); ++i) fs::remove(all[i].second);
  return path;
}

void load_checkpoint(const std::string& path, State& s) {
  safetensors::File file(path);
  const auto& meta = file.metadata();
  BRRR_CHECK(meta.count("format") && meta.at("format") == "brrr-train-1", path, ": not a brrr training checkpoint");
  models::load_parameters(file, s.model);
  const std::int64_t optimizer_step = std::stoll(meta.at("optimizer_step"));
  std::vector<Tensor> moments;
  const auto names = parameter_names(s.model);
  for (const Tensor& p : optimizer_step == 0 ? std::vector<Tensor>{} : s.opt.params()) {  // group order
    for (const char* kind : {"optimizer.m.", "optimizer.v."}) {
      Tensor t = zeros_like(p);
      file.copy_into(kind + names.at(p.impl()), t);
      moments.push_back(t);
    }
  }
  if (optimizer_step > 0) s.opt.load_state(moments, optimizer_step);  // before the first step AdamW has no moments
  s.step = std::stoll(meta.at("step"));
  set_generator_state(s.data_gen, meta.at("rng.data"), path);
  for (auto& [mpath, d] : dropouts(s.model)) {
    const auto it = meta.find("rng." + mpath);
    BRRR_CHECK(it != meta.end(), path, ": no generator state for ", mpath);
    set_generator_state(d->gen, it->second, path);
  }
}

// ---------------------------------------------------------------------------------------------
// printing

std::string duration(double seconds) {
  char s[32];
  const long t = static_cast<long>(seconds + 0.5);
  if (t >= 3600) std::snprintf(s, sizeof s, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else std::snprintf(s, sizeof s, "%ldm%02lds", t / 60, t % 60);
  return s;
}

void progress_bar(std::int64_t step, std::int64_t total, double eta) {
  if (!::isatty(STDOUT_FILENO)) return;
  const int width = 30, filled = total ? static_cast<int>(width * step / total) : width;
  std::printf("\r[%s%s] %lld/%lld ETA %s ", std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
              static_cast<long long>(step), static_cast<long long>(total), duration(eta).c_str());
  std::fflush(stdout);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// the loop

// cpu, cuda (a GPU, or an error saying there is none), emulator (the CUDA kernels on the CPU's
// SIMT emulator: slow, for checking), auto (the GPU if there is one, else the CPU, saying so).
Device resolve_device(const std::string& name) {
  if (name == "cpu") return kCPU;
  if (name == "emulator") {
    cuda::use_emulator();
    std::printf("device: cuda:0 on the SIMT emulator (the CUDA kernels run on the CPU, slowly)\n");
    return Device::cuda();
  }
  if (name == "auto" && !cuda::gpu_available()) {
    std::printf("device: auto: no CUDA GPU found; training on the CPU\n");
    return kCPU;
  }
  BRRR_CHECK(cuda::is_available(), "--device cuda: no CUDA GPU is available here",
             cuda::gpu_available() ? "" : " (no GPU or no driver); use --device cpu, auto or emulator");
  std::printf("device: cuda:0 (%s)\n", cuda::device_name().c_str());
  return Device::cuda();
}

TrainResult run_training(TrainConfig c) {
  c.validate();
  if (c.threads > 0) set_num_threads(c.threads);
  const Device device = resolve_device(c.device);
  if (c.data.empty()) {
    c.data = std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt";
    BRRR_CHECK(fs::exists(c.data), "no --data given and the default corpus ", c.data,
               " is not there (put ../shared beside the checkout or pass --data FILE)");
  }
  fs::create_directories(c.out_dir);

  // Data and model.
  DataOptions d;
  d.input = c.data, d.tokenizer = c.tokenizer, d.bpe_vocab_size = c.bpe_vocab_size, d.val_fraction = c.val_fraction;
  d.cache_dir = c.out_dir + "/cache";
  TextDataset data(d);
  models::GPTConfig mc;
  mc.vocab_size = data.vocab_size(), mc.block_size = c.block_size, mc.n_layer = c.n_layer, mc.n_head = c.n_head;
  mc.n_embd = c.n_embd, mc.dropout = c.dropout, mc.bias = c.bias, mc.fused = c.fused;
  Generator init_gen(c.seed);
  models::GPT model(mc, init_gen);  // initialised on the CPU, so every device starts from the same weights
  model.to(device);
  optim::AdamW opt(optim::decay_groups(model.parameters(), optim::AdamWOptions(c.learning_rate)
                                                               .betas({c.beta1, c.beta2})
                                                               .weight_decay(c.weight_decay)));
  Generator data_gen(c.seed + 1);
  State state{c, model, opt, data_gen, 0};
  const std::string tokenizer_copy = c.out_dir + "/tokenizer";
  fs::copy_file(data.tokenizer_path(), tokenizer_copy, fs::copy_options::overwrite_existing);

  TrainResult result;
  if (c.resume) {
    const auto found = list_checkpoints(c.out_dir);
    BRRR_CHECK(!found.empty(), "--resume: no checkpoint (ckpt-*.safetensors) in ", c.out_dir);
    load_checkpoint(found.back().second, state);
    result.last_checkpoint = found.back().second;
    std::printf("resumed from %s at step %lld\n", found.back().second.c_str(), static_cast<long long>(state.step));
  }
  std::printf("model: %lld parameters (%lld layers, %lld heads, %lld wide, context %lld, vocab %lld, %s ops); "
              "data: %llu train / %llu val tokens; %d threads\n",
              static_cast<long long>(model.num_parameters()), static_cast<long long>(mc.n_layer),
              static_cast<long long>(mc.n_head), static_cast<long long>(mc.n_embd), static_cast<long long>(mc.block_size),
              static_cast<long long>(mc.vocab_size), mc.fused ? "fused" : "composed",
              static_cast<unsigned long long>(data.size(Split::Train)), static_cast<unsigned long long>(data.size(Split::Val)),
              get_num_threads());

  const optim::CosineSchedule schedule{c.learning_rate, c.min_lr, c.warmup_iters, c.lr_decay_iters};
  std::ofstream log(c.out_dir + "/log.jsonl", c.resume ? std::ios::app : std::ios::trunc);

  // Evaluation draws its batches from a generator seeded by the step, so it never disturbs
  // the training stream (and a resumed run evaluates on the same batches).
  auto evaluate = [&](std::int64_t step) {
    NoGradGuard no_grad;
    model.eval();
    double means[2];
    for (int split = 0; split < 2; ++split) {
      Generator eval_gen(c.seed * 1000003 + static_cast<std::uint64_t>(step));
      double total = 0;
      for (std::int64_t i = 0; i < c.eval_iters; ++i) {
        Tensor x, y;
        data.batch(split == 0 ? Split::Train : Split::Val, c.batch_size, c.block_size, eval_gen, x, y);
        x = x.to(device), y = y.to(device);
        total += model.loss(model.forward(x), y).item<double>();
      }
      means[split] = total / static_cast<double>(c.eval_iters);
    }
    model.train();
    result.last_train_loss = means[0], result.last_val_loss = means[1];
    if (::isatty(STDOUT_FILENO)) std::printf("\r%60s\r", "");
    std::printf("step %lld: train loss %.4f, val loss %.4f\n", static_cast<long long>(step), means[0], means[1]);
    log << Json{{"event", "eval"}, {"step", step}, {"train_loss", means[0]}, {"val_loss", means[1]}}.dump() << "\n";
    log.flush();
  };

  interrupted = false;
  auto previous_handler = std::signal(SIGINT, on_sigint);
  profiler::reset();
  profiler::enable(c.profile);
  const auto run_start = std::chrono::steady_clock::now();
  std::int64_t steps_this_run = 0;
  const std::int64_t tokens_per_step = c.batch_size * c.block_size * c.grad_accum;
  model.train();
  while (state.step < c.max_iters) {
    const std::int64_t step = state.step;
    if (step % c.eval_interval == 0) evaluate(step);
    const auto t0 = std::chrono::steady_clock::now();
    const double lr = schedule.lr(step);
    opt.set_lr(lr);
    opt.zero_grad();
    double loss_sum = 0;
    for (std::int64_t micro = 0; micro < c.grad_accum; ++micro) {
      Tensor x, y;
      data.batch(Split::Train, c.batch_size, c.block_size, data_gen, x, y);
      x = x.to(device), y = y.to(device);
      Tensor loss = model.loss(model.forward(x), y);
      if (c.grad_accum > 1) loss = loss / static_cast<double>(c.grad_accum);
      loss.backward();
      loss_sum += loss.item<double>();
    }
    if (!std::isfinite(loss_sum)) {
      std::signal(SIGINT, previous_handler);
      detail::fail("the loss is ", std::isnan(loss_sum) ? "NaN" : "infinite", " at step ", step,
                   "; stopping. The last good checkpoint is ",
                   result.last_checkpoint.empty() ? std::string("none (no checkpoint was written yet)") : result.last_checkpoint);
    }
    const double grad_norm = c.grad_clip > 0 ? optim::clip_grad_norm_(model.parameters(), c.grad_clip) : 0.0;
    opt.step();
    state.step = step + 1;
    ++steps_this_run;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    result.losses.push_back(loss_sum);
    log << Json{{"event", "step"}, {"step", step}, {"loss", loss_sum}, {"lr", lr}, {"grad_norm", grad_norm}, {"ms", ms}}.dump() << "\n";
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    const double per_step = elapsed / static_cast<double>(steps_this_run);
    if (step % c.log_interval == 0 || state.step == c.max_iters) {
      if (::isatty(STDOUT_FILENO)) std::printf("\r%60s\r", "");
      std::printf("step %5lld | loss %.4f | lr %.2e | %7.1f ms/step | %7.0f tok/s | ETA %s\n", static_cast<long long>(step),
                  loss_sum, lr, ms, static_cast<double>(tokens_per_step) / per_step,
                  duration(per_step * static_cast<double>(c.max_iters - state.step)).c_str());
    }
    progress_bar(state.step, c.max_iters, per_step * static_cast<double>(c.max_iters - state.step));
    const std::int64_t every = c.checkpoint_interval > 0 ? c.checkpoint_interval : c.eval_interval;
    const bool periodic = state.step % every == 0 && state.step < c.max_iters;  // the last one is saved below
    if (periodic || interrupted) result.last_checkpoint = save_checkpoint(state, tokenizer_copy);
    if (interrupted) {
      std::printf("\ninterrupted: saved %s; continue with --resume\n", result.last_checkpoint.c_str());
      result.interrupted = true;
      break;
    }
  }
  std::signal(SIGINT, previous_handler);
  if (c.profile) {
    profiler::enable(false);
    std::printf("\nwhere the time went (per training step, evaluation included):\n%s",
                profiler::report(static_cast<double>(std::max<std::int64_t>(steps_this_run, 1))).c_str());
  }
  result.steps_done = state.step;
  if (result.interrupted) return result;
  evaluate(state.step);
  result.last_checkpoint = save_checkpoint(state, tokenizer_copy);
  std::printf("saved %s\n", result.last_checkpoint.c_str());

  // Pictures: the loss curves (from the whole log, so a resumed run shows all of it), and
  // what one attention head looks at.
  log.close();
  std::vector<double> eval_steps, eval_train, eval_val, step_x, step_loss;
  {
    std::ifstream in(c.out_dir + "/log.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const Json j = Json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("event")) continue;
      if (j["event"] == "eval") {
        eval_steps.push_back(j["step"].get<double>());
        eval_train.push_back(j["train_loss"].get<double>());
        eval_val.push_back(j["val_loss"].get<double>());
      } else if (j["event"] == "step") {
        step_x.push_back(j["step"].get<double>());
        step_loss.push_back(j["loss"].get<double>());
      }
    }
  }
  plot::Series train_curve{"train (each step)", step_x, step_loss, plot::Color{190, 190, 230}};
  plot::Series train_eval{"train (eval)", eval_steps, eval_train, plot::palette(0)};
  plot::Series val_eval{"val (eval)", eval_steps, eval_val, plot::palette(1)};
  plot::line_plot(c.out_dir + "/loss.png", {train_curve, train_eval, val_eval},
                  {"brrr train: " + c.preset, "step", "cross-entropy loss", false});
  const std::string sentence = "ROMEO: But soft, what light through yonder window breaks?";
  std::vector<std::uint32_t> ids = data.tokenizer().encode(sentence);
  if (static_cast<std::int64_t>(ids.size()) > c.block_size) ids.resize(static_cast<std::size_t>(c.block_size));
  std::vector<std::int64_t> ids64(ids.begin(), ids.end());
  const Tensor att = model.attention_weights(from_vector(ids64, {1, static_cast<std::int64_t>(ids.size())}, kInt64), 0, 0);
  std::vector<std::string> labels;
  for (std::uint32_t id : ids) labels.push_back(data.tokenizer().decode(std::vector<std::uint32_t>{id}));
  const int n = static_cast<int>(ids.size());
  plot::heatmap(c.out_dir + "/attention.png", att.to_vector<double>(), n, n, "layer 0, head 0 attention", labels, labels);
  std::printf("wrote %s/loss.png and %s/attention.png\n", c.out_dir.c_str(), c.out_dir.c_str());

  if (c.sample_tokens > 0) {
    models::GenerateOptions g;
    g.max_new_tokens = c.sample_tokens;
    g.seed = c.seed;
    const std::vector<std::uint32_t> prompt = data.tokenizer().encode("\n");
    std::printf("\n--- sample (%lld tokens) ---\n", static_cast<long long>(c.sample_tokens));
    models::generate(model, prompt, g, [&](std::uint32_t t) {
      std::fputs(data.tokenizer().decode(std::vector<std::uint32_t>{t}).c_str(), stdout);
      std::fflush(stdout);
    });
    std::printf("\n---\n");
  }
  return result;
}

}  // namespace brrr::train
