// tests/emulator/test_conv_cuda.cpp: convolution and pooling on Device::cuda(), backed by the
// emulator (kernels/cuda/conv.cu): the ops and the digits' CNN end to end against the same
// ops on the CPU, forward and backward, every CUDA variant. Chapter 09 (convolutions).
// Read before: kernels/cuda/conv.cu. The kernels one by one, at the lab's ragged shapes, are
// checked by test_lab_table.cpp (chapter 09).
//
// Shapes stay tiny (every CUDA thread is a fiber here) but keep what goes wrong: odd H and W,
// padding wider than the kernel's half-width, stride > 1, dilation, groups and depthwise
// layers, pooling windows that overlap (stride < kernel), and more images than one group.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/cuda.h"
#include "brrr/kernels.h"
#include "brrr/models/cnn.h"
#include "kernels/cuda/conv.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

Device gpu() { return Device::cuda(); }

// The largest |a - b| / max(|b|, 1), both tensors brought to the CPU.
double max_error(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to(kCPU).to_vector<double>(), y = b.to(kCPU).to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double e = std::fabs(x[i] - y[i]) / std::max(std::fabs(y[i]), 1.0);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kCPU).to_vector<double>(), y = b.to(kCPU).to_vector<double>();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
}

struct ConvCase {
  std::int64_t N, C_in, H, W, C_out, k, stride, pad, dil, groups;
};

// conv2d (with bias) then a pooling, summed against a fixed random tensor: every backward
// kernel of conv.cu runs. Returns the loss; the leaves' .grad hold the gradients.
Tensor conv_loss(const ConvCase& c, const Tensor& x, const Tensor& w, const Tensor& b, bool max_pool) {
  const Tensor y = ops::conv2d(x, w, b, c.stride, c.pad, c.dil, c.groups);
  const Tensor pooled = max_pool ? ops::max_pool2d(y, 3, 2, 1) : ops::avg_pool2d(y, 2, 1, 1);
  Generator gen(99);
  const Tensor weights = randn(pooled.shape(), gen, pooled.dtype()).to(pooled.device());
  return (pooled * weights).sum();
}

// Runs conv_loss on the CPU and on the device for one dtype and compares the loss and the
// three gradients.
void check_against_cpu(const ConvCase& c, DType dtype, bool max_pool, double tol) {
  Generator gen(5);
  const Tensor x0 = randn({c.N, c.C_in, c.H, c.W}, gen, dtype);
  const Tensor w0 = randn({c.C_out, c.C_in / c.groups, c.k, c.k}, gen, dtype) * 0.3;
  const Tensor b0 = randn({c.C_out}, gen, dtype);
  std::vector<Tensor> cpu = {x0.clone().requires_grad_(true), w0.clone().requires_grad_(true),
                             b0.clone().requires_grad_(true)};
  std::vector<Tensor> dev = {x0.to(gpu()).requires_grad_(true), w0.to(gpu()).requires_grad_(true),
                             b0.to(gpu()).requires_grad_(true)};
  const Tensor cpu_loss = conv_loss(c, cpu[0], cpu[1], cpu[2], max_pool);
  const Tensor dev_loss = conv_loss(c, dev[0], dev[1], dev[2], max_pool);
  CHECK(dev_loss.device() == gpu());
  CHECK(max_error(dev_loss, cpu_loss) < tol);
  cpu_loss.backward();
  dev_loss.backward();
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    REQUIRE(dev[i].grad().defined());
    CHECK(dev[i].grad().device() == gpu());
    CHECK(max_error(dev[i].grad(), cpu[i].grad()) < tol);
  }
}

const std::vector<ConvCase> kCases = {
    {2, 3, 7, 9, 4, 3, 1, 1, 1, 1},   // odd H and W, "same" padding
    {3, 4, 9, 7, 6, 3, 2, 3, 1, 2},   // stride 2, padding 3 > the half-width 1, two groups
    {2, 6, 11, 10, 6, 3, 2, 1, 1, 6}, // depthwise, stride 2
    {1, 5, 13, 8, 7, 2, 3, 2, 2, 1},  // dilation 2, stride 3, an even kernel
    {2, 2, 6, 5, 9, 1, 1, 0, 1, 1},   // 1x1: the GEMM alone; 9 channels, a ragged channel tile
};

}  // namespace

TEST_CASE("conv2d, max_pool2d and avg_pool2d on Device::cuda() match the CPU, forward and backward, float64") {
  cuda::use_emulator();
  for (std::size_t i = 0; i < kCases.size(); ++i) {
    const ConvCase& c = kCases[i];
    const bool max_pool = i % 2 == 0;  // max pooling after cases 0, 2, 4; average after 1, 3
    CAPTURE(c.k);
    CAPTURE(c.stride);
    CAPTURE(c.pad);
    CAPTURE(c.groups);
    CAPTURE(max_pool);
    check_against_cpu(c, kFloat64, max_pool, 1e-12);  // the same sums in another order
  }
}

TEST_CASE("conv2d forward on Device::cuda(): the im2col and direct variants match the CPU, float32") {
  cuda::use_emulator();
  for (const std::string variant : {"im2col", "direct"}) {
    CAPTURE(variant);
    kernels::select("conv2d_forward", variant, DeviceType::CUDA);
    for (const ConvCase& c : {kCases[1], kCases[2], kCases[4]}) {  // groups, depthwise, a ragged channel tile
      CAPTURE(c.k);
      CAPTURE(c.groups);
      // float32 sums of C_in/groups k^2 <= 54 products: a few ulp each, well under 1e-5.
      check_against_cpu(c, kFloat32, true, 1e-5);
    }
  }
  kernels::reset_selection();
  CHECK(kernels::selected("conv2d_forward", DeviceType::CUDA, kFloat32) == "im2col");
}

TEST_CASE("conv and pooling backward on Device::cuda(): the same inputs give the same bits twice (no atomics)") {
  cuda::use_emulator();
  const ConvCase c = kCases[1];
  std::vector<Tensor> first;
  for (int run = 0; run < 2; ++run) {
    Generator gen(11);
    const Tensor x = randn({c.N, c.C_in, c.H, c.W}, gen).to(gpu()).requires_grad_(true);
    const Tensor w = randn({c.C_out, c.C_in / c.groups, c.k, c.k}, gen).to(gpu()).requires_grad_(true);
    const Tensor b = randn({c.C_out}, gen).to(gpu()).requires_grad_(true);
    conv_loss(c, x, w, b, true).backward();
    if (run == 0) first = {x.grad(), w.grad(), b.grad()};
    else {
      CHECK(same_bits(x.grad(), first[0]));
      CHECK(same_bits(w.grad(), first[1]));
      CHECK(same_bits(b.grad(), first[2]));
    }
  }
}

TEST_CASE("conv2d im2col on Device::cuda(): images in several workspace groups (dweight summed over them) match the CPU") {
  cuda::use_emulator();
  // Case 1 (3 images, 7 x 6 outputs) needs (4 * 9 + 6) * 42 = 1764 elements of workspace an
  // image: a budget of 3600 makes groups of 2 and 1 images, a budget of 1 three groups of one.
  for (std::int64_t budget : {3600, 1}) {
    CAPTURE(budget);
    const std::int64_t old = kernels::emu::set_conv_workspace_budget(budget);
    check_against_cpu(kCases[1], kFloat64, true, 1e-12);
    kernels::emu::set_conv_workspace_budget(old);
  }
}

TEST_CASE("the digits' CNN (models::CNN) on Device::cuda() gives the CPU's logits, loss and every gradient") {
  cuda::use_emulator();
  Generator init_cpu(3), init_dev(3), data(4);
  models::CNN cpu_model(4, 6, 16, init_cpu), dev_model(4, 6, 16, init_dev);
  dev_model.to(gpu());
  const Tensor images = rand({5, 1, 8, 8}, data);
  const Tensor labels = from_vector(std::vector<std::int64_t>{3, 0, 9, 4, 7}, {5}, kInt64);
  const Tensor cpu_logits = cpu_model.forward(images);
  const Tensor dev_logits = dev_model.forward(images.to(gpu()));
  CHECK(dev_logits.device() == gpu());
  CHECK(max_error(dev_logits, cpu_logits) < 1e-5);
  const Tensor cpu_loss = ops::cross_entropy(cpu_logits, labels);
  const Tensor dev_loss = ops::cross_entropy(dev_logits, labels.to(gpu()));
  CHECK(max_error(dev_loss, cpu_loss) < 1e-5);
  cpu_loss.backward();
  dev_loss.backward();
  const auto cpu_params = cpu_model.named_parameters(), dev_params = dev_model.named_parameters();
  REQUIRE(cpu_params.size() == dev_params.size());
  for (std::size_t i = 0; i < cpu_params.size(); ++i) {
    CAPTURE(cpu_params[i].first);
    REQUIRE(dev_params[i].second.grad().defined());
    CHECK(max_error(dev_params[i].second.grad(), cpu_params[i].second.grad()) < 1e-5);
  }
}

TEST_CASE("train_cnn (brrr cnn --device emulator) gives the CPU run's losses, step by step, and its accuracy") {
  // 100 made-up digits (the loader's least): random pixels 0..16, labels 0..9 in turn; the
  // fixed split makes 80 training and 20 test digits. One epoch of two steps.
  const std::string path = std::string(BRRR_BINARY_DIR) + "/test-conv-cuda-digits.csv";
  {
    std::ofstream f(path);
    std::mt19937 rng(12);
    for (int i = 0; i < 100; ++i) {
      for (int p = 0; p < 64; ++p) f << rng() % 17 << ',';
      f << i % 10 << '\n';
    }
  }
  models::CNNTrainOptions o;
  o.c1 = 3, o.c2 = 4, o.hidden = 8, o.epochs = 1, o.batch = 40, o.lr = 1e-2, o.data = path, o.verbose = false;
  const models::CNNTrainResult cpu = models::train_cnn(o);
  cuda::use_emulator();
  o.device = gpu();
  const std::size_t blocks_before = cuda::memory_stats().allocations;
  const models::CNNTrainResult dev = models::train_cnn(o);
  // It ran on the device: every activation and gradient of the two steps was a device block.
  CHECK(cuda::memory_stats().allocations - blocks_before > 100);
  std::filesystem::remove(path);
  REQUIRE(dev.losses.size() == 2);
  REQUIRE(cpu.losses.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) CHECK(dev.losses[i] == doctest::Approx(cpu.losses[i]).epsilon(1e-5));
  REQUIRE(dev.test_losses.size() == 1);
  CHECK(dev.test_losses[0] == doctest::Approx(cpu.test_losses[0]).epsilon(1e-5));
  CHECK(dev.test_accuracy == cpu.test_accuracy);
  CHECK(dev.train_accuracy == cpu.train_accuracy);
}

TEST_CASE("conv2d direct (variant 2): a patch too large for shared memory is an error naming the variant") {
  kernels::ConvShape s;
  s.N = 1, s.C_in = 1, s.H = 500, s.W = 500, s.C_out = 1, s.kH = s.kW = 3, s.dil_h = s.dil_w = 100;
  s.H_out = s.W_out = 300;
  try {
    kernels::emu::conv2d_direct_forward<float>(nullptr, nullptr, nullptr, nullptr, s, nullptr);
    FAIL("no error");
  } catch (const Error& e) {
    const std::string what = e.what();
    CHECK(what.find("conv2d_forward (direct)") != std::string::npos);
    CHECK(what.find("shared memory") != std::string::npos);
    CHECK(what.find("im2col") != std::string::npos);
  }
}

// On a real GPU (skipped unless one backs Device::cuda()): every variant at the digits' CNN
// layers and a ResNet-like shape cut down to seconds of CPU reference.
TEST_CASE("conv2d and pooling on a real GPU: every CUDA variant against the CPU (skipped without a GPU)") {
  if (!cuda::gpu_available() || cuda::is_emulated()) return test::skip("no GPU backs Device::cuda() in this process");
  for (const ConvCase& c : {ConvCase{8, 16, 28, 28, 32, 3, 1, 1, 1, 1}, ConvCase{4, 32, 15, 17, 32, 3, 2, 1, 1, 32},
                            ConvCase{4, 8, 14, 14, 16, 5, 1, 4, 2, 2}})
    for (const kernels::VariantInfo& info : kernels::variants("conv2d_forward")) {
      if (!info.device.is_cuda() || info.dtype != kFloat32 || info.variant == "student") continue;
      CAPTURE(info.variant);
      CAPTURE(c.C_in);
      kernels::select("conv2d_forward", info.variant, DeviceType::CUDA);
      check_against_cpu(c, kFloat32, true, 1e-4);
      kernels::reset_selection();
    }
}
