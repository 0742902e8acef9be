// models/gpt/reference.cpp: brrr's GPT against PyTorch's, tensor by tensor.
// Chapter 07 (attention and the GPT). Read before: brrr/models/reference.h.
#include "brrr/models/reference.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "brrr/autograd.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/gpt.h"
#include "brrr/ops.h"
#include "brrr/optim.h"

namespace brrr::models {

bool ReferenceReport::passed() const {
  for (const auto& c : checks)
    if (!c.ok()) return false;
  return !checks.empty();
}

namespace {

// The largest |value| of a reference tensor: the scale its bar is relative to.
double max_magnitude(const Tensor& ref) {
  double m = 0.0;
  for (double v : ref.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

// A bar relative to the tensor's own scale: `relative` x max|ref|. The floor only matters for a
// reference that is all zeros, where the bar would otherwise be 0.
double scaled_bar(const Tensor& ref, double relative) { return std::max(relative * max_magnitude(ref), 1e-30); }

ReferenceCheck compare(const std::string& name, const Tensor& ours, const Tensor& ref, double tolerance) {
  BRRR_CHECK(ours.shape() == ref.shape(), "verify-reference: ", name, " has shape ", shape_str(ours.shape()),
             ", the reference ", shape_str(ref.shape()));
  const std::vector<double> a = ours.to_vector<double>(), b = ref.to_vector<double>();
  double max_err = 0.0, max_ref = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(a[i] - b[i]);
    max_err = std::isnan(err) ? INFINITY : std::max(max_err, err);
    max_ref = std::max(max_ref, std::fabs(b[i]));
  }
  return {name, max_err, max_ref > 0 ? max_err / max_ref : max_err, tolerance};
}

double config_number(const nlohmann::json& cfg, const char* key, const std::string& path) {
  BRRR_CHECK(cfg.contains(key) && cfg[key].is_number(), path, ": the reference config has no number '", key, "'");
  return cfg[key].get<double>();
}

}  // namespace

ReferenceReport verify_reference(const std::string& path, const ReferenceOptions& options) {
  safetensors::File file(path);
  const auto meta = file.metadata().find("config");
  BRRR_CHECK(meta != file.metadata().end(), path, ": no 'config' in the metadata; not a reference file");
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(meta->second);
  } catch (const nlohmann::json::exception& e) {
    detail::fail(path, ": the config metadata is not valid JSON: ", e.what());
  }
  GPTConfig config;
  config.vocab_size = static_cast<std::int64_t>(config_number(cfg, "vocab_size", path));
  config.block_size = static_cast<std::int64_t>(config_number(cfg, "block_size", path));
  config.n_layer = static_cast<std::int64_t>(config_number(cfg, "n_layer", path));
  config.n_head = static_cast<std::int64_t>(config_number(cfg, "n_head", path));
  config.n_embd = static_cast<std::int64_t>(config_number(cfg, "n_embd", path));
  config.dropout = 0.0;
  config.bias = true;
  const double lr = config_number(cfg, "lr", path);
  const optim::AdamWOptions adamw = optim::AdamWOptions(lr)
                                        .betas({config_number(cfg, "beta1", path), config_number(cfg, "beta2", path)})
                                        .eps(config_number(cfg, "eps", path))
                                        .weight_decay(config_number(cfg, "weight_decay", path));

  ReferenceReport report;
  report.config_json = meta->second;
  Generator gen(0);
  GPT model(config, gen);
  load_parameters(file, model, "param.");
  model.to(options.device);
  const Tensor idx = file.tensor("input.idx").to(options.device);
  const Tensor targets = file.tensor("input.targets").to(options.device);

  // Forward and backward once: logits, loss and every gradient.
  Tensor logits = model.forward(idx);
  Tensor loss = model.loss(logits, targets);
  loss.backward();
  // Logits and gradients: within kRelativeBar of each tensor's largest magnitude. float32
  // against PyTorch's float64 measures about 3e-7 of it; a gradient 1% off is 1000x the bar.
  const Tensor expected_logits = file.tensor("expected.logits");
  report.checks.push_back(compare("logits", logits, expected_logits, scaled_bar(expected_logits, kRelativeBar)));
  report.checks.push_back(compare("loss", loss.reshape({1}), file.tensor("expected.loss"), 1e-5));
  for (auto& [name, p] : model.named_parameters()) {
    const Tensor ref = file.tensor("grad." + name);
    BRRR_CHECK(p.grad().defined(), "verify-reference: no gradient reached ", name);
    report.checks.push_back(compare("grad." + name, p.grad(), ref, scaled_bar(ref, kRelativeBar)));
  }

  // One AdamW step (decay on tensors of 2+ dims only), then the parameters.
  optim::AdamW opt(optim::decay_groups(model.parameters(), adamw));
  opt.step();
  for (auto& [name, p] : model.named_parameters())
    report.checks.push_back(compare("step1." + name, p, file.tensor("step1.param." + name), 0.05 * lr));

  // The remaining steps on the same batch: the loss before each one.
  const Tensor expected = file.tensor("expected.losses");
  const std::vector<double> ref_losses = expected.to_vector<double>();
  std::vector<double> ours = {loss.item<double>()};
  for (std::size_t step = 1; step < ref_losses.size(); ++step) {
    opt.zero_grad();
    Tensor l = model.loss(model.forward(idx), targets);
    l.backward();
    opt.step();
    ours.push_back(l.item<double>());
  }
  for (std::size_t i = 0; i < ref_losses.size(); ++i)
    report.checks.push_back({"loss[" + std::to_string(i) + "]", std::fabs(ours[i] - ref_losses[i]),
                             std::fabs(ours[i] - ref_losses[i]) / std::max(std::fabs(ref_losses[i]), 1e-30), 1e-4});
  return report;
}

}  // namespace brrr::models
