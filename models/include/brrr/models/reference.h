// brrr/models/reference.h: checking brrr's GPT against a PyTorch reference file.
// Chapter 07 (attention and the GPT). The command `brrr verify-reference FILE` prints this.
//
// ../shared/reference/make_reference.py writes the file: a config (metadata "config"), the
// initial parameters (param.*), a batch (input.idx, input.targets), PyTorch's logits, loss and
// gradients (expected.*, grad.*), the parameters after one AdamW step (step1.param.*) and the
// losses of N AdamW steps on that batch (expected.losses).
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "brrr/dtype.h"

namespace brrr::models {

struct ReferenceCheck {
  std::string name;       // "logits", "loss", "grad.<param>", "step1.<param>", "loss[3]"
  double max_abs_error;   // max |brrr - reference|
  double max_rel_error;   // max_abs_error / max(|reference|), the scale-free view
  double tolerance;       // the bar max_abs_error must stay under
  bool ok() const { return max_abs_error <= tolerance; }
  // How many times the error fits under the bar: above 1 passes (infinite when exact).
  double margin() const { return max_abs_error > 0 ? tolerance / max_abs_error : INFINITY; }
};

struct ReferenceReport {
  std::string config_json;
  std::vector<ReferenceCheck> checks;
  bool passed() const;
};

struct ReferenceOptions {
  Device device = Device::cpu();  // the ops run as the registry picks (ops::select_composed())
};

// The bar of the logits and of every gradient, relative to that tensor's largest magnitude.
inline constexpr double kRelativeBar = 1e-5;

// Builds the model from the file's config, loads its parameters and compares everything.
// Bars: logits and each gradient kRelativeBar * max|ref| (so a gradient 1% off fails, whatever
// its scale); loss 1e-5; step-1 parameters 0.05 * lr; every loss of the N steps 1e-4.
ReferenceReport verify_reference(const std::string& path, const ReferenceOptions& options = {});

}  // namespace brrr::models
