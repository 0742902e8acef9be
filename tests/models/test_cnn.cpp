// tests/models/test_cnn.cpp: the digits loader, and the CNN against the same network in PyTorch
// (chapter 09, convolutions). `brrr cnn`'s bar, >= 97% on the held-out digits, is
// tests/models/test_cnn_train.cpp.
// The digits come with python3-sklearn (scripts/setup.sh); without it these say Skipped, and
// scripts/check_required_tests.py fails a CI run on that.
#include <doctest/doctest.h>

#include <filesystem>

#include "brrr/brrr.h"
#include "brrr/models/cnn.h"
#include "brrr/safetensors.h"
#include "tests/models/test_util.h"
#include "tests/skip.h"

using namespace brrr;

TEST_CASE("cnn: the digits load with the fixed split, and a missing file names the package") {
  std::string message;
  try {
    models::load_digits("/nonexistent/digits.csv.gz");
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("python3-sklearn") != std::string::npos);
  if (!test::have_digits()) return test::skip("python3-sklearn's digits.csv.gz is not installed (scripts/setup.sh)");
  const models::DigitsSplit d = models::load_digits();
  CHECK(d.train.size() == 1437);
  CHECK(d.test.size() == 360);
  CHECK(d.train.images.shape() == Shape{1437, 1, 8, 8});
  CHECK(ops::max(d.train.images).item<double>() == 1.0);
  CHECK(ops::max(ops::neg(d.test.images)).item<double>() == 0.0);  // grey levels 0..16 / 16
  // Every digit appears in both parts, about a tenth each.
  for (const Tensor& labels : {d.train.labels, d.test.labels}) {
    std::vector<int> count(10);
    for (std::int64_t v : labels.to_vector<std::int64_t>()) ++count.at(static_cast<std::size_t>(v));
    for (int c : count) CHECK(c > labels.size(0) / 20);
  }
  // The file's first digit, the first test digit, is a 0 with a hollow middle (sklearn's
  // load_digits().images[0]); the second, the first training digit, is a 1.
  const std::vector<float> first = d.test.images.narrow(0, 0, 1).to_vector<float>();
  CHECK(d.test.labels.to_vector<std::int64_t>()[0] == 0);
  CHECK(d.train.labels.to_vector<std::int64_t>()[0] == 1);
  CHECK(first[2] == 5.0f / 16);
  CHECK(first[3 * 8 + 3] == 0.0f);
}

TEST_CASE("cnn: a brrr CNN's state dict loads in PyTorch and gives the same logits and gradients") {
  if (!test::python_has("torch")) return test::skip(BRRR_PYTHON " cannot import torch (scripts/setup.sh installs it)");
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-cnn-torch";
  std::filesystem::create_directories(dir);
  Generator g(11);
  models::CNN model(4, 6, 8, g, kFloat64);  // float64, so the two agree to 1e-10
  const Tensor x = randn({3, 1, 8, 8}, g, kFloat64).requires_grad_(true);
  const Tensor logits = model(x);
  const Tensor w = randn(logits.shape(), g, kFloat64);
  ops::sum(ops::mul(logits, w)).backward();
  safetensors::NamedTensors state, io{{"x", x.detach()}, {"w", w}, {"logits", logits.detach()}, {"grad.x", x.grad()}};
  for (const auto& [name, p] : model.named_parameters()) {
    state.emplace_back(name, p.detach());
    io.emplace_back("grad." + name, p.grad());
  }
  safetensors::save(dir + "/state.safetensors", state);
  safetensors::save(dir + "/io.safetensors", io);
  std::string out;
  const int rc = test::run(std::string(BRRR_PYTHON) + " " + BRRR_SOURCE_DIR + "/tests/models/cnn_in_torch.py " + dir +
                               "/state.safetensors " + dir + "/io.safetensors",
                           &out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("max abs difference") != std::string::npos);
}
