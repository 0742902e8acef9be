// models/mlp/mlp.cpp: spirals, the MLP, and its training loop.
// Chapter 05 (modules, optimizers and the first MLP).
//
// The loop is the one every later model uses: forward, loss, zero_grad, backward, step.
#include "brrr/models/mlp.h"

#include <cmath>
#include <cstdio>

#include "brrr/autograd.h"
#include "brrr/ops.h"
#include "brrr/optim.h"
#include "brrr/plot.h"

namespace brrr::models {

Dataset make_spirals(int n, int classes, double noise, Generator& gen) {
  BRRR_CHECK(n > 0 && classes > 1, "make_spirals: need points_per_class > 0 and classes > 1, got ", n, " and ", classes);
  std::vector<float> xy;
  std::vector<std::int64_t> labels;
  for (int k = 0; k < classes; ++k)
    for (int i = 0; i < n; ++i) {
      const double r = static_cast<double>(i) / (n - 1 > 0 ? n - 1 : 1);  // radius 0..1
      const double t = k * 4.0 + 4.0 * r + gen.normal() * noise;        // angle, 4 radians per arm
      xy.push_back(static_cast<float>(r * std::sin(t)));
      xy.push_back(static_cast<float>(r * std::cos(t)));
      labels.push_back(k);
    }
  const std::int64_t total = static_cast<std::int64_t>(n) * classes;
  return {from_vector(xy, {total, 2}), from_vector(labels, {total}, kInt64), classes};
}

MLP::MLP(int in, int hidden, int layers, int classes, Generator& gen) {
  net_ = register_module("net", std::make_shared<nn::Sequential>());
  int width = in;
  for (int l = 0; l < layers; ++l) {
    net_->push_back(std::make_shared<nn::Linear>(width, hidden, gen));
    net_->push_back(std::make_shared<nn::ReLU>());
    width = hidden;
  }
  net_->push_back(std::make_shared<nn::Linear>(width, classes, gen));
}

Tensor MLP::forward(const Tensor& x) { return net_->forward(x); }

namespace {
double accuracy(const Tensor& logits, const Tensor& labels) {
  const std::vector<std::int64_t> pred = ops::argmax(logits, 1).to_vector<std::int64_t>();
  const std::vector<std::int64_t> truth = labels.to_vector<std::int64_t>();
  std::int64_t right = 0;
  for (std::size_t i = 0; i < pred.size(); ++i) right += pred[i] == truth[i];
  return static_cast<double>(right) / static_cast<double>(pred.size());
}
}  // namespace

MLPTrainResult train_mlp(const MLPTrainOptions& o) {
  Generator gen(o.seed);
  const Dataset data = make_spirals(o.points_per_class, o.classes, o.noise, gen);
  MLP model(2, o.hidden, o.layers, o.classes, gen);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions(o.lr).weight_decay(0.0));
  if (o.verbose)
    std::printf("mlp: %d spirals x %d points, %lld parameters, %d full-batch steps of AdamW (lr %g)\n", o.classes,
                o.points_per_class, static_cast<long long>(model.num_parameters()), o.steps, o.lr);

  MLPTrainResult result;
  for (int step = 0; step < o.steps; ++step) {
    const Tensor logits = model(data.points);
    const Tensor loss = ops::cross_entropy(logits, data.labels);
    opt.zero_grad();
    loss.backward();
    opt.step();
    result.losses.push_back(loss.item<double>());
    if (o.verbose && (step % (o.steps / 10 > 0 ? o.steps / 10 : 1) == 0 || step == o.steps - 1))
      std::printf("step %5d  loss %.4f\n", step, result.losses.back());
  }
  {
    NoGradGuard no_grad;
    result.accuracy = accuracy(model(data.points), data.labels);
  }
  if (o.verbose) std::printf("training accuracy: %.2f%%\n", 100.0 * result.accuracy);

  if (!o.out_dir.empty()) {
    NoGradGuard no_grad;
    plot::Series curve{"train loss", {}, result.losses, plot::palette(0)};
    for (std::size_t i = 0; i < curve.y.size(); ++i) curve.x.push_back(static_cast<double>(i));
    const std::string loss_png = o.out_dir + "/mlp_loss.png";
    plot::line_plot(loss_png, {curve}, {"MLP on spirals: loss", "step", "cross-entropy", plot::Scale::log10});
    // Classify a grid over the data's box to paint the decision boundary.
    const int grid = 200;
    const double lo = -1.1, hi = 1.1;
    std::vector<float> xy;
    for (int r = 0; r < grid; ++r)
      for (int c = 0; c < grid; ++c) {
        xy.push_back(static_cast<float>(lo + (hi - lo) * (c + 0.5) / grid));
        xy.push_back(static_cast<float>(hi - (hi - lo) * (r + 0.5) / grid));
      }
    const std::vector<std::int64_t> cls = ops::argmax(model(from_vector(xy, {grid * grid, 2})), 1).to_vector<std::int64_t>();
    const std::vector<float> p = data.points.to_vector<float>();
    std::vector<double> px, py;
    for (std::size_t i = 0; i < p.size(); i += 2) px.push_back(p[i]), py.push_back(p[i + 1]);
    const std::vector<std::int64_t> lab = data.labels.to_vector<std::int64_t>();
    const std::string boundary_png = o.out_dir + "/mlp_decision_boundary.png";
    plot::decision_boundary(boundary_png, std::vector<int>(cls.begin(), cls.end()), grid, grid, lo, hi, lo, hi, px, py,
                            std::vector<int>(lab.begin(), lab.end()), "MLP decision boundary");
    result.images = {loss_png, boundary_png};
    if (o.verbose) std::printf("wrote %s and %s\n", loss_png.c_str(), boundary_png.c_str());
  }
  return result;
}

}  // namespace brrr::models
