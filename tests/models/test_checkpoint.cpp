// tests/models/test_checkpoint.cpp: GPT checkpoints (chapter 08).
#include <doctest/doctest.h>

#include <filesystem>

#include "brrr/brrr.h"
#include "brrr/models/checkpoint.h"

using namespace brrr;

TEST_CASE("a saved GPT loads back with the same config and parameters") {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-checkpoint";
  std::filesystem::create_directories(dir);
  Generator g(2);
  models::GPTConfig c = models::gpt_preset("cpu-tiny");
  c.n_layer = 2;
  models::GPT model(c, g);
  models::save_model(dir + "/m.safetensors", model, {{"step", "7"}});
  auto loaded = models::load_model(dir + "/m.safetensors");
  CHECK(loaded->config().to_json() == c.to_json());
  const auto a = model.named_parameters(), b = loaded->named_parameters();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].first == b[i].first);
    CHECK(a[i].second.to_vector<float>() == b[i].second.to_vector<float>());
  }
  CHECK(safetensors::File(dir + "/m.safetensors").metadata().at("step") == "7");
}

TEST_CASE("a config's activation survives a checkpoint, and one brrr does not have is refused") {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-checkpoint";
  std::filesystem::create_directories(dir);
  Generator g(3);
  models::GPTConfig c = models::gpt_preset("cpu-tiny");
  c.n_layer = 1, c.activation = "gelu_erf";
  models::GPT model(c, g);
  models::save_model(dir + "/erf.safetensors", model);
  CHECK(models::load_model(dir + "/erf.safetensors")->config().activation == "gelu_erf");
  // The default is not written, so checkpoints from before the field read the same.
  CHECK(models::gpt_preset("cpu-tiny").to_json().find("activation") == std::string::npos);
  CHECK_THROWS_WITH(models::GPTConfig::from_json(R"({"activation": "relu"})"),
                    doctest::Contains("activation must be gelu_tanh or gelu_erf, got 'relu'"));
}

TEST_CASE("loading a checkpoint into the wrong model names the tensor") {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-checkpoint";
  std::filesystem::create_directories(dir);
  Generator g(2);
  models::GPTConfig small = models::gpt_preset("cpu-tiny");
  small.n_layer = 1;
  models::GPT one_layer(small, g);
  models::save_model(dir + "/one.safetensors", one_layer);
  models::GPTConfig two = small;
  two.n_layer = 2;
  models::GPT two_layers(two, g);
  safetensors::File file(dir + "/one.safetensors");
  CHECK_THROWS_WITH_AS(models::load_parameters(file, two_layers), doctest::Contains("has no tensor 'transformer.h.1.ln_1.weight'"), Error);
  models::GPTConfig wide = small;
  wide.n_embd = 64;
  models::GPT wider(wide, g);
  CHECK_THROWS_WITH_AS(models::load_parameters(file, wider), doctest::Contains("tensor 'transformer.wte.weight' has shape (65, 128), expected (65, 64)"), Error);
  models::save_model(dir + "/two.safetensors", two_layers);
  CHECK_THROWS_WITH_AS(models::load_parameters(safetensors::File(dir + "/two.safetensors"), one_layer),
                       doctest::Contains("tensor 'transformer.h.1.ln_1.weight' does not belong to this model"), Error);
  safetensors::save(dir + "/noconfig.safetensors", {{"x", ones({1})}});
  CHECK_THROWS_WITH_AS(models::load_model(dir + "/noconfig.safetensors"), doctest::Contains("no 'config' in the metadata"), Error);
}
