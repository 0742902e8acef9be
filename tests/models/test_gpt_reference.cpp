// tests/models/test_gpt_reference.cpp: the GPT against PyTorch (chapter 07): the shared
// reference file, files made now at other shapes, and that the check fails when it should.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "brrr/brrr.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/gpt.h"
#include "brrr/models/reference.h"
#include "brrr/safetensors.h"
#include "test_util.h"
#include "tests/skip.h"

using namespace brrr;

namespace {
const std::string kShared = BRRR_SHARED_DIR;
const std::string kReference = kShared + "/reference/gpt2_tiny.safetensors";

void check_report(const models::ReferenceReport& r) {
  REQUIRE(r.checks.size() > 10);
  for (const auto& c : r.checks) {
    INFO(c.name, ": max abs error ", c.max_abs_error, " > tolerance ", c.tolerance);
    CHECK(c.ok());
  }
  CHECK(r.passed());
}
}  // namespace

TEST_CASE("the GPT matches the shared PyTorch reference: logits, loss, gradients, AdamW steps") {
  REQUIRE_MESSAGE(std::filesystem::exists(kReference), "missing ", kReference);
  check_report(models::verify_reference(kReference));
}

TEST_CASE("the GPT built from composed ops matches the reference too") {
  ops::select_composed();  // the registry's "composed" variants of LayerNorm, GELU, attention, the loss
  check_report(models::verify_reference(kReference));
  kernels::reset_selection();
}

// The bars must catch a small error: a copy of the reference file with one tensor scaled by
// 1.01 (written with brrr's own safetensors writer) must FAIL on exactly that tensor, for
// every kind of tensor the model has. A constant scale is what AdamW's first step cannot see,
// so only the gradient rows can catch it.
namespace {
std::string perturbed_copy(const std::string& name, double factor) {
  const safetensors::File file(kReference);
  safetensors::NamedTensors tensors;
  bool found = false;
  for (const safetensors::TensorInfo& info : file.tensors()) {
    Tensor t = file.tensor(info.name).clone();
    if (info.name == name) t = ops::mul(t, factor), found = true;
    tensors.emplace_back(info.name, t);
  }
  REQUIRE_MESSAGE(found, kReference, " has no tensor ", name);
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-perturbed-references";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + name + ".safetensors";
  safetensors::save(path, tensors, file.metadata());
  return path;
}
}  // namespace

TEST_CASE("verify-reference fails when one tensor of the reference is 1% off, for every kind of tensor") {
  REQUIRE_MESSAGE(std::filesystem::exists(kReference), "missing ", kReference);
  const std::vector<std::string> names = {
      "expected.logits",
      "grad.transformer.wte.weight",             // token embedding (and the tied head)
      "grad.transformer.wpe.weight",             // position embedding
      "grad.transformer.h.0.ln_1.weight",        // LayerNorm weight
      "grad.transformer.h.1.ln_2.bias",          // LayerNorm bias
      "grad.transformer.ln_f.weight",            // the final LayerNorm
      "grad.transformer.h.0.attn.c_attn.weight", // attention weights and biases
      "grad.transformer.h.1.attn.c_attn.bias",
      "grad.transformer.h.1.attn.c_proj.weight",
      "grad.transformer.h.0.attn.c_proj.bias",
      "grad.transformer.h.0.mlp.c_fc.weight",    // MLP weights and biases
      "grad.transformer.h.1.mlp.c_fc.bias",
      "grad.transformer.h.1.mlp.c_proj.weight",
      "grad.transformer.h.0.mlp.c_proj.bias",
  };
  for (const std::string& name : names) {
    CAPTURE(name);
    const models::ReferenceReport r = models::verify_reference(perturbed_copy(name, 1.01));
    CHECK_FALSE(r.passed());
    std::vector<std::string> failed;
    for (const auto& c : r.checks)
      if (!c.ok()) failed.push_back(c.name);
    const std::string row = name.rfind("grad.", 0) == 0 ? name : "logits";
    CHECK(failed == std::vector<std::string>{row});
  }
  // The unperturbed file passes with room: every row at least 5x under its bar.
  for (const auto& c : models::verify_reference(kReference).checks) {
    CAPTURE(c.name);
    CHECK(c.margin() > 5.0);
  }
}

TEST_CASE("brrr verify-reference prints the margins, PASS, and FAIL with exit status 1") {
  std::string out;
  CHECK(test::run(std::string(BRRR_CLI) + " verify-reference " + kReference, &out) == 0);
  INFO(out);
  CHECK(out.find("margin") != std::string::npos);
  CHECK(out.find("smallest margin: ") != std::string::npos);
  CHECK(out.find("\nPASS\n") != std::string::npos);
  CHECK(test::run(std::string(BRRR_CLI) + " verify-reference " + perturbed_copy("grad.transformer.h.0.ln_1.bias", 0.99),
                  &out) == 1);
  CHECK(out.find("grad.transformer.h.0.ln_1.bias") != std::string::npos);
  CHECK(out.find("\nFAIL\n") != std::string::npos);
  CHECK(test::run(std::string(BRRR_CLI) + " verify-reference /nonexistent.safetensors", &out) != 0);
}

TEST_CASE("the GPT matches PyTorch at other shapes (reference files made now with python3-torch)") {
  if (!test::python_has("torch")) return test::skip(BRRR_PYTHON " cannot import torch (scripts/setup.sh installs it)");
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-references";
  std::filesystem::create_directories(dir);
  // T < block_size, a vocabulary that is a multiple of nothing, one head, many heads, T = 1.
  const std::vector<std::string> shapes = {
      "--vocab 50 --block 24 --layers 3 --heads 3 --embd 48 --batch 3 --seq 21",
      "--vocab 13 --block 8 --layers 1 --heads 1 --embd 8 --batch 1 --seq 1 --steps 3",
      "--vocab 101 --block 32 --layers 2 --heads 8 --embd 64 --batch 2 --seq 32 --seed 7 --steps 5"};
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const std::string file = dir + "/ref" + std::to_string(i) + ".safetensors";
    std::string out;
    const int rc = test::run(std::string(BRRR_PYTHON) + " " + kShared + "/reference/make_reference.py " + file + " " + shapes[i], &out);
    INFO(shapes[i], "\n", out);
    REQUIRE(rc == 0);
    check_report(models::verify_reference(file));
  }
}

TEST_CASE("a config from before the registry chose still loads: \"composed\": true selects the composed ops") {
  kernels::reset_selection();
  const models::GPTConfig c = models::GPTConfig::from_json(R"({"n_layer": 2, "composed": true})");
  CHECK(c.n_layer == 2);
  CHECK(kernels::selected("layer_norm", DeviceType::CPU, kFloat32) == "composed");
  CHECK(kernels::selected("cross_entropy", DeviceType::CPU, kFloat32) == "composed");
  CHECK(c.to_json().find("composed") == std::string::npos);  // what runs is no longer the model's to say
  kernels::reset_selection();
  // Older still: "fused": true was the default, and leaves the registry's defaults alone.
  models::GPTConfig::from_json(R"({"fused": true, "composed": false})");
  CHECK(kernels::selected("layer_norm", DeviceType::CPU, kFloat32) == "kernels");
  models::GPTConfig::from_json(R"({"fused": false})");
  CHECK(kernels::selected("gelu", DeviceType::CPU, kFloat32) == "composed");
  kernels::reset_selection();
}

TEST_CASE("presets and configs") {
  CHECK(models::gpt_preset("gpt-12m").num_parameters() == doctest::Approx(12.3e6).epsilon(0.01));
  CHECK(models::gpt_preset("cpu-tiny").n_embd == 128);
  CHECK_THROWS_WITH_AS(models::gpt_preset("gpt5"), doctest::Contains("unknown GPT preset 'gpt5' (presets: cpu-tiny"), Error);
  Generator g(1);
  models::GPTConfig c = models::gpt_preset("cpu-tiny");
  models::GPT model(c, g);
  CHECK(model.num_parameters() == c.num_parameters());
  CHECK(models::GPTConfig::from_json(c.to_json()).to_json() == c.to_json());
  CHECK_THROWS_WITH_AS(models::GPTConfig::from_json(R"({"n_layers": 3})"), doctest::Contains("unknown key 'n_layers'"), Error);
  CHECK_THROWS_WITH_AS(models::GPTConfig::from_json(R"({"n_embd": 100, "n_head": 3})"), doctest::Contains("multiple of n_head"), Error);
  CHECK_THROWS_WITH_AS(models::GPTConfig::from_json(R"({"n_embd": "wide"})"), doctest::Contains("'n_embd' has the wrong type"), Error);
  // parameter names follow nanoGPT, and the tied head is not a separate parameter
  const auto params = model.named_parameters();
  CHECK(params.front().first == "transformer.wte.weight");
  CHECK(params[4].first == "transformer.h.0.attn.c_attn.weight");
  CHECK(params.back().first == "transformer.ln_f.bias");
  CHECK_THROWS_WITH_AS(model.forward(zeros({1, 65}, kInt64)), doctest::Contains("sequence length 65 is outside 1..block_size (64)"), Error);
}

TEST_CASE("GPT-2 initialisation: weights N(0, 0.02), residual projections scaled, biases zero") {
  Generator g(1);
  models::GPTConfig c = models::gpt_preset("shakespeare-char");
  models::GPT model(c, g);
  for (auto& [name, p] : model.named_parameters()) {
    const double std = std::sqrt(ops::var(p.reshape({-1}), {}, 0).item());
    if (name.find("c_proj.weight") != std::string::npos) CHECK(std == doctest::Approx(0.02 / std::sqrt(12.0)).epsilon(0.05));
    else if (name.find("ln_") != std::string::npos) CHECK(std == 0.0);
    else if (p.dim() == 2) CHECK(std == doctest::Approx(0.02).epsilon(0.05));
    else CHECK(ops::max(p).item() == 0.0);
  }
}

TEST_CASE("a brrr checkpoint loads in PyTorch and gives the same logits") {
  if (!test::python_has("torch")) return test::skip(BRRR_PYTHON " cannot import torch (scripts/setup.sh installs it)");
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-torch-load";
  std::filesystem::create_directories(dir);
  Generator g(5);
  models::GPTConfig c;
  c.vocab_size = 37, c.block_size = 12, c.n_layer = 2, c.n_head = 2, c.n_embd = 16;
  models::GPT model(c, g);
  models::save_model(dir + "/model.safetensors", model);
  Tensor idx = randint(0, 37, {2, 12}, g, kInt64);
  NoGradGuard no_grad;
  safetensors::save(dir + "/io.safetensors", {{"idx", idx.to(kInt32)}, {"logits", model.forward(idx)}});
  std::string out;
  const int rc = test::run(std::string(BRRR_PYTHON) + " " + BRRR_SOURCE_DIR + "/tests/models/load_in_torch.py " +
                               dir + "/model.safetensors " + dir + "/io.safetensors " + BRRR_SHARED_DIR + "/reference",
                           &out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("max abs difference") != std::string::npos);
}
