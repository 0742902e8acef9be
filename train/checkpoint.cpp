// train/checkpoint.cpp: a training run's checkpoints: everything --resume needs to continue
// bit for bit (parameters, AdamW's moments and step, the data and dropout generators' states),
// in one safetensors file written atomically. Chapter 08 (training). Read before: checkpoint.h.
#include "train/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "brrr/models/checkpoint.h"
#include "brrr/models/open.h"
#include "brrr/safetensors.h"
#include "train/distributed.h"

namespace brrr::train {

namespace fs = std::filesystem;

namespace {

std::string checkpoint_path(const std::string& dir, std::int64_t step) { return dir + "/" + checkpoint_name(step); }

}  // namespace

std::string checkpoint_name(std::int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%08lld.safetensors", static_cast<long long>(step));
  return name;
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

}  // namespace

std::string save_checkpoint(const TrainingState& s, const std::string& tokenizer_path) {
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
                                             {"ranks", std::to_string(dist::world_size())},
                                             {"tokenizer", fs::path(tokenizer_path).filename().string()}};
  for (auto& [path, d] : dropouts(s.model)) meta["rng." + path] = generator_state(d->gen);
  const std::string path = checkpoint_path(s.config.out_dir, s.step);
  safetensors::save(path, tensors, meta);
  // Keep the newest keep_checkpoints; the one just written is never removed.
  auto all = models::list_checkpoints(s.config.out_dir);
  for (std::size_t i = 0; i + static_cast<std::size_t>(s.config.keep_checkpoints) < all.size(); ++i) fs::remove(all[i].second);
  return path;
}

void load_checkpoint(const std::string& path, TrainingState& s) {
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

}  // namespace brrr::train
