// models/cnn/cnn.cpp: the handwritten digits, a LeNet-style CNN, and its training loop.
// Chapter 09 (convolutions). Read before: models/mlp/mlp.cpp (the same loop on an MLP).
#include "brrr/models/cnn.h"

#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "brrr/autograd.h"
#include "brrr/ops.h"
#include "brrr/optim.h"
#include "brrr/plot.h"

namespace brrr::models {

// ---------------------------------------------------------------------------------------------
// The data

namespace {
constexpr int kSide = 8, kPixels = kSide * kSide, kClasses = 10;
constexpr std::size_t kTestEvery = 5;  // digits 0, 5, 10, ... of the file are the test set

// The whole file, decompressed (gzip through zlib's gzread; a plain file reads as is).
std::string read_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  BRRR_CHECK(f != nullptr, "load_digits: cannot open ", path);
  std::string text;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  int err = Z_OK;
  const char* message = n < 0 ? gzerror(f, &err) : nullptr;
  const std::string why = message ? message : "";
  gzclose(f);
  BRRR_CHECK(n == 0, "load_digits: ", path, " is not a readable gzip file: ", why);
  return text;
}

// The digits whose position in the file is (or is not) a multiple of kTestEvery.
Digits make_digits(const std::vector<float>& pixels, const std::vector<std::int64_t>& labels, bool test) {
  std::vector<float> px;
  std::vector<std::int64_t> lb;
  for (std::size_t i = 0; i < labels.size(); ++i)
    if ((i % kTestEvery == 0) == test) {
      px.insert(px.end(), pixels.begin() + static_cast<std::ptrdiff_t>(i * kPixels),
                pixels.begin() + static_cast<std::ptrdiff_t>((i + 1) * kPixels));
      lb.push_back(labels[i]);
    }
  const auto n = static_cast<std::int64_t>(lb.size());
  return {from_vector(px, {n, 1, kSide, kSide}), from_vector(lb, {n}, kInt64)};
}
}  // namespace

DigitsSplit load_digits(const std::string& path_in) {
  const std::string path = path_in.empty() ? kDigitsPath : path_in;
  BRRR_CHECK(std::filesystem::exists(path), "load_digits: ", path,
             " not found: the handwritten digits come with Debian's python3-sklearn package "
             "(sudo apt-get install python3-sklearn; scripts/setup.sh installs it), or pass the path of a copy of "
             "digits.csv.gz");
  std::istringstream lines(read_gzip(path));
  std::vector<float> pixels;
  std::vector<std::int64_t> labels;
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    std::string field;
    std::vector<int> values;
    while (std::getline(fields, field, ',')) {
      char* end = nullptr;
      const long v = std::strtol(field.c_str(), &end, 10);
      BRRR_CHECK(end != field.c_str() && v >= 0 && v <= 16, "load_digits: ", path, " line ", number, ": '", field,
                 "' is not a value in 0..16");
      values.push_back(static_cast<int>(v));
    }
    BRRR_CHECK(values.size() == kPixels + 1 && values.back() < kClasses, "load_digits: ", path, " line ", number,
               ": expected 64 pixels and a label 0..9, got ", values.size(), " fields");
    for (int i = 0; i < kPixels; ++i) pixels.push_back(static_cast<float>(values[i]) / 16.0f);
    labels.push_back(values.back());
  }
  const auto n = static_cast<std::int64_t>(labels.size());
  BRRR_CHECK(n >= 100, "load_digits: ", path, " holds ", n, " digits, expected 1797");
  return {make_digits(pixels, labels, false), make_digits(pixels, labels, true)};
}

// ---------------------------------------------------------------------------------------------
// The network

CNN::CNN(int c1, int c2, int hidden, Generator& gen, TensorOptions options) {
  const nn::ConvOptions pad1 = nn::ConvOptions().padding(1);
  conv1 = register_module("conv1", std::make_shared<nn::Conv2d>(1, c1, 3, gen, pad1, options));
  conv2 = register_module("conv2", std::make_shared<nn::Conv2d>(c1, c2, 3, gen, pad1, options));
  fc1 = register_module("fc1", std::make_shared<nn::Linear>(c2 * 2 * 2, hidden, gen, true, options));
  fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, kClasses, gen, true, options));
}

Tensor CNN::forward(const Tensor& x) {
  Tensor h = ops::max_pool2d(ops::relu((*conv1)(x)), 2);  // (N, c1, 4, 4)
  h = ops::max_pool2d(ops::relu((*conv2)(h)), 2);         // (N, c2, 2, 2)
  h = ops::relu((*fc1)(h.flatten(1)));                    // (N, hidden)
  return (*fc2)(h);                                        // (N, 10)
}

// ---------------------------------------------------------------------------------------------
// Training

namespace {
// The digits `idx` as a batch (N, 1, 8, 8), gathered on the host (the data set is 460 KB).
// With shift > 0 each is moved by a random (dy, dx) in [-shift, shift]^2, blank where it moved
// from: the writers of the test set place their digits differently, and these copies teach
// the network that where a stroke is matters less than its shape.
Tensor batch_of(const std::vector<float>& all, const std::vector<std::int64_t>& idx, int shift, Generator& gen) {
  std::vector<float> out(idx.size() * kPixels, 0.0f);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const float* src = all.data() + idx[i] * kPixels;
    float* dst = out.data() + i * kPixels;
    const int span = 2 * shift + 1;
    const int dy = shift ? static_cast<int>(gen.next_u64() % span) - shift : 0;
    const int dx = shift ? static_cast<int>(gen.next_u64() % span) - shift : 0;
    for (int y = 0; y < kSide; ++y)
      for (int x = 0; x < kSide; ++x) {
        const int sy = y - dy, sx = x - dx;
        if (sy >= 0 && sy < kSide && sx >= 0 && sx < kSide) dst[y * kSide + x] = src[sy * kSide + sx];
      }
  }
  return from_vector(out, {static_cast<std::int64_t>(idx.size()), 1, kSide, kSide});
}

struct Eval {
  double loss, accuracy;
  std::vector<std::int64_t> predictions;
};
Eval evaluate(CNN& model, const Digits& d, Device device) {
  NoGradGuard no_grad;
  model.eval();
  const Tensor logits = model(d.images.to(device));
  model.train();
  Eval e{ops::cross_entropy(logits, d.labels.to(device)).to(kCPU).item<double>(), 0.0,
         ops::argmax(logits, 1).to(kCPU).to_vector<std::int64_t>()};
  const std::vector<std::int64_t> truth = d.labels.to_vector<std::int64_t>();
  std::int64_t right = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) right += e.predictions[i] == truth[i];
  e.accuracy = static_cast<double>(right) / static_cast<double>(truth.size());
  return e;
}
}  // namespace

CNNTrainResult train_cnn(const CNNTrainOptions& o) {
  BRRR_CHECK(o.epochs > 0 && o.batch > 0 && o.c1 > 0 && o.c2 > 0 && o.hidden > 0,
             "train_cnn: epochs, batch and the layer sizes must be positive");
  const DigitsSplit data = load_digits(o.data);
  Generator gen(o.seed);
  CNN model(o.c1, o.c2, o.hidden, gen);  // initialised on the CPU, then moved: same weights anywhere
  model.to(o.device);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  const std::int64_t n = data.train.size();
  if (o.verbose)
    std::printf("cnn: %lld training and %lld test digits (8x8), %lld parameters, %d epochs of batch %d, AdamW lr %g\n",
                static_cast<long long>(n), static_cast<long long>(data.test.size()),
                static_cast<long long>(model.num_parameters()), o.epochs, o.batch, o.lr);

  const std::vector<float> pixels = data.train.images.to_vector<float>();
  const std::vector<std::int64_t> labels = data.train.labels.to_vector<std::int64_t>();
  std::vector<std::int64_t> order(n);
  for (std::int64_t i = 0; i < n; ++i) order[i] = i;
  CNNTrainResult result;
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    for (std::int64_t i = n - 1; i > 0; --i)  // a fresh shuffle each epoch (Fisher-Yates)
      std::swap(order[i], order[static_cast<std::int64_t>(gen.next_u64() % static_cast<std::uint64_t>(i + 1))]);
    // Cosine decay to zero over the run: the last epochs settle instead of jumping around.
    for (std::int64_t b0 = 0; b0 < n; b0 += o.batch) {
      const double progress = (static_cast<double>(epoch) + static_cast<double>(b0) / n) / o.epochs;
      opt.set_lr(o.lr * 0.5 * (1.0 + std::cos(3.141592653589793 * progress)));
      const std::vector<std::int64_t> idx(order.begin() + b0, order.begin() + std::min(n, b0 + o.batch));
      std::vector<std::int64_t> y(idx.size());
      for (std::size_t i = 0; i < idx.size(); ++i) y[i] = labels[idx[i]];
      const Tensor loss = ops::cross_entropy(model(batch_of(pixels, idx, o.shift, gen).to(o.device)),
                                             from_vector(y, {static_cast<std::int64_t>(y.size())}, kInt64).to(o.device));
      opt.zero_grad();
      loss.backward();
      opt.step();
      result.losses.push_back(loss.to(kCPU).item<double>());
    }
    const Eval test = evaluate(model, data.test, o.device);
    result.test_losses.push_back(test.loss);
    if (o.verbose && (epoch % std::max(1, o.epochs / 10) == 0 || epoch == o.epochs - 1))
      std::printf("epoch %3d  train loss %.4f  test loss %.4f  test accuracy %.2f%%\n", epoch, result.losses.back(),
                  test.loss, 100.0 * test.accuracy);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Eval test = evaluate(model, data.test, o.device);
  result.test_accuracy = test.accuracy;
  result.train_accuracy = evaluate(model, data.train, o.device).accuracy;
  if (o.verbose)
    std::printf("test accuracy: %.2f%% (%lld of %lld held-out digits), train accuracy %.2f%%, %.1f s of training\n",
                100.0 * result.test_accuracy,
                static_cast<long long>(std::lround(result.test_accuracy * static_cast<double>(data.test.size()))),
                static_cast<long long>(data.test.size()), 100.0 * result.train_accuracy, result.seconds);

  if (!o.out_dir.empty()) {
    NoGradGuard no_grad;
    // The loss curve: every step's training loss, and the test loss at the end of each epoch.
    const double steps_per_epoch = static_cast<double>(result.losses.size()) / o.epochs;
    plot::Series train_curve{"train loss (per step)", {}, result.losses, plot::palette(0)};
    for (std::size_t i = 0; i < train_curve.y.size(); ++i) train_curve.x.push_back(static_cast<double>(i));
    plot::Series test_curve{"test loss (per epoch)", {}, result.test_losses, plot::palette(1)};
    for (std::size_t e = 0; e < test_curve.y.size(); ++e) test_curve.x.push_back((e + 1) * steps_per_epoch);
    const std::string loss_png = o.out_dir + "/cnn_loss.png";
    plot::line_plot(loss_png, {train_curve, test_curve},
                    {"CNN on handwritten digits: loss", "step", "cross-entropy", plot::Scale::log10});
    // The test digits it got wrong, captioned "true as predicted".
    const std::vector<float> test_px = data.test.images.to_vector<float>();
    const std::vector<std::int64_t> truth = data.test.labels.to_vector<std::int64_t>();
    std::vector<std::vector<double>> wrong;
    std::vector<std::string> captions;
    for (std::size_t i = 0; i < truth.size(); ++i)
      if (test.predictions[i] != truth[i]) {
        wrong.emplace_back(test_px.begin() + static_cast<std::ptrdiff_t>(i) * kPixels,
                           test_px.begin() + static_cast<std::ptrdiff_t>(i + 1) * kPixels);
        captions.push_back(std::to_string(truth[i]) + " as " + std::to_string(test.predictions[i]));
      }
    const std::string wrong_png = o.out_dir + "/cnn_misclassified.png";
    plot::image_grid(wrong_png, wrong, kSide, kSide, captions,
                     "misclassified test digits (" + std::to_string(wrong.size()) + ")");
    // What the first layer learned: each 3x3 filter, scaled on its own.
    const std::vector<float> w = model.conv1->weight.to(kCPU).to_vector<float>();
    std::vector<std::vector<double>> filters;
    std::vector<std::string> names;
    for (int f = 0; f < o.c1; ++f) {
      filters.emplace_back(w.begin() + f * 9, w.begin() + (f + 1) * 9);
      names.push_back("filter " + std::to_string(f));
    }
    const std::string filters_png = o.out_dir + "/cnn_filters.png";
    plot::image_grid(filters_png, filters, 3, 3, names, "conv1 filters (3x3)", 8);
    result.images = {loss_png, wrong_png, filters_png};
    if (o.verbose) std::printf("wrote %s, %s and %s\n", loss_png.c_str(), wrong_png.c_str(), filters_png.c_str());
  }
  return result;
}

}  // namespace brrr::models
