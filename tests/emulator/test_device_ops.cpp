// tests/emulator/test_device_ops.cpp: brrr's ops end to end on Device::cuda(), backed by the
// emulator: tensors made on the CPU, moved with .to(Device::cuda()), run through brrr::ops
// (so through the registry to the CUDA kernels), moved back and compared with the same ops
// on the CPU; then autograd through those ops on the device, and random numbers that are the
// same on both devices for the same seed. Chapter 10 (the GPU and the emulator).
// Read before: tests/emulator/test_core_ops.cpp (the kernels one by one).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/cuda.h"
#include "brrr/kernels.h"

using namespace brrr;

namespace {

Device gpu() { return Device::cuda(); }

// The largest |a - b| / max(|b|, 1) over the elements, with a and b on any device; NaN
// matches NaN. Shapes must agree.
double max_error(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to(kCPU).to_vector<double>(), y = b.to(kCPU).to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (std::isnan(x[i]) != std::isnan(y[i])) return INFINITY;
      continue;
    }
    if (std::isinf(x[i]) || std::isinf(y[i])) {
      if (x[i] != y[i]) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::fabs(x[i] - y[i]) / std::max(std::fabs(y[i]), 1.0));
  }
  return worst;
}

// Whether two float32 tensors hold the same bits.
bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to(kCPU).to_vector<float>(), y = b.to(kCPU).to_vector<float>();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

bool on_gpu(const Tensor& t) { return t.device() == Device::cuda(); }

}  // namespace

TEST_CASE("device ops: every core op has a \"simple\" CUDA kernel, float32 and float64") {
  cuda::use_emulator();
  CHECK(cuda::is_emulated());
  for (const char* op : {"fill", "copy", "cast", "uniform", "normal", "dropout_mask", "neg", "exp", "log", "sqrt",
                         "tanh", "relu", "sigmoid", "pow_scalar", "relu_backward", "add", "sub", "mul", "div",
                         "masked_fill", "sum_dim", "max_dim", "max_dim_backward", "embedding_forward",
                         "embedding_backward", "softmax_forward", "softmax_backward", "log_softmax_forward",
                         "log_softmax_backward"}) {
    for (DType dt : {kFloat32, kFloat64}) {
      CAPTURE(op);
      CAPTURE(dtype_name(dt));
      bool found = false;
      for (const kernels::VariantInfo& v : kernels::variants(op))
        found = found || (v.device.is_cuda() && v.dtype == dt && v.variant == "simple");
      CHECK(found);
    }
  }
}

TEST_CASE("device ops: creation, to(dtype) and copies between devices keep every value") {
  cuda::use_emulator();
  Generator gen(1);
  const Tensor x = randn({3, 5}, gen);
  const Tensor d = x.to(gpu());
  CHECK(on_gpu(d));
  CHECK(same_bits(d, x));
  CHECK(same_bits(zeros({4, 3}, TensorOptions().device(gpu())), zeros({4, 3})));
  CHECK(same_bits(full({7}, 2.5, TensorOptions().device(gpu())), full({7}, 2.5)));
  CHECK(full({5}, 3.0, TensorOptions().dtype(kInt64).device(gpu())).to(kCPU).to_vector<std::int64_t>() ==
        std::vector<std::int64_t>(5, 3));
  // cast on the device, every direction through int32 and float64
  const Tensor scaled = x * 100.0;
  CHECK(scaled.to(gpu()).to(kInt32).to(kCPU).to_vector<std::int32_t>() == scaled.to(kInt32).to_vector<std::int32_t>());
  CHECK(max_error(x.to(gpu()).to(kFloat64).to(kFloat32), x) == 0.0);
  CHECK(max_error(x.to(gpu()).to(kInt64).to(kFloat32), x.to(kInt64).to(kFloat32)) == 0.0);
  // an empty tensor round-trips
  CHECK(zeros({0, 3}, TensorOptions().device(gpu())).to(kCPU).numel() == 0);
}

TEST_CASE("device ops: broadcasting add sub mul div and unary ops match the CPU") {
  cuda::use_emulator();
  Generator gen(2);
  const Tensor a = randn({4, 5, 6}, gen), b = randn({5, 1}, gen), c = rand({6}, gen) + 0.5;
  const Tensor da = a.to(gpu()), db = b.to(gpu()), dc = c.to(gpu());
  CHECK(same_bits(da + db, a + b));
  CHECK(same_bits(da - dc, a - c));
  CHECK(same_bits(db * dc, b * c));  // (5, 1) * (6) -> (5, 6)
  CHECK(same_bits(da / dc, a / c));
  CHECK(same_bits(da * 3.0 + 1.0, a * 3.0 + 1.0));
  CHECK(same_bits(2.0 / dc, 2.0 / c));
  CHECK(same_bits(-da, -a));
  CHECK(max_error(ops::exp(da), ops::exp(a)) < 1e-6);
  CHECK(max_error(ops::log(dc), ops::log(c)) < 1e-6);
  CHECK(max_error(ops::sqrt(dc), ops::sqrt(c)) < 1e-6);
  CHECK(max_error(ops::tanh(da), ops::tanh(a)) < 1e-6);
  CHECK(max_error(ops::sigmoid(da), ops::sigmoid(a)) < 1e-6);
  CHECK(same_bits(ops::relu(da), ops::relu(a)));
  CHECK(max_error(ops::pow(dc, 1.5), ops::pow(c, 1.5)) < 1e-6);
  CHECK(same_bits(ops::pow(da, 2.0), ops::pow(a, 2.0)));
  // in place on the device
  Tensor e = a.clone().to(gpu());
  e.add_(db).mul_(0.5);
  CHECK(same_bits(e, (a + b) * 0.5));
  // masked_fill with a broadcast mask
  const Tensor mask = from_vector(std::vector<float>{1, 0, 0, 1, 0, 1}, {6});
  CHECK(same_bits(ops::masked_fill(da, mask.to(gpu()), -1e4), ops::masked_fill(a, mask, -1e4)));
}

TEST_CASE("device ops: transposed, permuted and sliced views made contiguous, and copy_ into a view") {
  cuda::use_emulator();
  Generator gen(3);
  const Tensor x = randn({6, 7, 5}, gen);
  const Tensor dx = x.to(gpu());
  CHECK(same_bits(dx.transpose(0, 2).contiguous(), x.transpose(0, 2).contiguous()));
  CHECK(same_bits(dx.permute({1, 2, 0}).contiguous(), x.permute({1, 2, 0}).contiguous()));
  CHECK(same_bits(dx.narrow(1, 2, 3).contiguous(), x.narrow(1, 2, 3).contiguous()));
  CHECK(same_bits(dx.transpose(0, 1).to(kCPU), x.transpose(0, 1)));  // to() makes it contiguous on the device
  CHECK(same_bits(dx.select(2, 4).t().contiguous(), x.select(2, 4).t().contiguous()));
  // an op on a non-contiguous view, and copy_ into a strided slice
  CHECK(same_bits(dx.transpose(0, 1) + 1.0, x.transpose(0, 1) + 1.0));
  Tensor target = zeros({6, 7, 5}), dtarget = target.to(gpu());
  const Tensor row = randn({5}, gen);
  target.narrow(1, 1, 2).copy_(row);
  dtarget.narrow(1, 1, 2).copy_(row.to(gpu()));
  CHECK(same_bits(dtarget, target));
  CHECK(same_bits(ops::cat({dx, dx.narrow(0, 0, 2)}, 0), ops::cat({x, x.narrow(0, 0, 2)}, 0)));
}

TEST_CASE("device ops: sum, mean and max over dims match the CPU") {
  cuda::use_emulator();
  Generator gen(4);
  const Tensor x = randn({5, 37, 9}, gen);
  const Tensor dx = x.to(gpu());
  for (int dim : {0, 1, 2, -1}) {
    CAPTURE(dim);
    CHECK(max_error(dx.sum({dim}), x.sum({dim})) < 1e-6);
    CHECK(max_error(dx.mean({dim}, true), x.mean({dim}, true)) < 1e-6);
    const auto [values, indices] = ops::max(dx, dim);
    const auto [cpu_values, cpu_indices] = ops::max(x, dim);
    CHECK(same_bits(values, cpu_values));
    CHECK(indices.to(kCPU).to_vector<std::int64_t>() == cpu_indices.to_vector<std::int64_t>());
  }
  CHECK(max_error(dx.sum(), x.sum()) < 1e-6);
  CHECK(max_error(dx.sum({0, 2}), x.sum({0, 2})) < 1e-6);  // not adjacent: permuted first
  CHECK(max_error(ops::var(dx, {1}), ops::var(x, {1})) < 1e-5);
  CHECK(same_bits(ops::max(dx), ops::max(x)));
  CHECK(ops::argmax(dx, 1).to(kCPU).to_vector<std::int64_t>() == ops::argmax(x, 1).to_vector<std::int64_t>());
  // a long sum, split into chunks on the device
  const Tensor long_x = randn({20000}, gen);
  CHECK(max_error(long_x.to(gpu()).sum(), long_x.sum()) < 1e-6);
}

TEST_CASE("device ops: softmax, log_softmax and embedding match the CPU") {
  cuda::use_emulator();
  Generator gen(5);
  const Tensor x = randn({4, 3, 50}, gen) * 4.0;
  const Tensor dx = x.to(gpu());
  for (int dim : {-1, 0, 1}) {
    CAPTURE(dim);
    CHECK(max_error(ops::softmax(dx, dim), ops::softmax(x, dim)) < 1e-6);
    CHECK(max_error(ops::log_softmax(dx, dim), ops::log_softmax(x, dim)) < 1e-6);
  }
  const Tensor weight = randn({11, 8}, gen);
  const Tensor idx = from_vector(std::vector<std::int64_t>{3, 0, 10, 3, 3, 7}, {2, 3}, kInt64);
  CHECK(same_bits(ops::embedding(weight.to(gpu()), idx.to(gpu())), ops::embedding(weight, idx)));
  // A bad device index is checked on the device (no wait) and reported at the next read back.
  const Tensor bad = ops::embedding(weight.to(gpu()), from_vector(std::vector<std::int64_t>{2, 11}, {2}, kInt64).to(gpu()));
  CHECK_THROWS_WITH_AS(bad.to(kCPU), doctest::Contains("embedding: index 11 at position 1 is out of range for 11 entries"),
                       brrr::Error);
}

TEST_CASE("device ops: autograd on the device gives the CPU's gradients") {
  cuda::use_emulator();
  Generator gen(6);
  const Tensor x0 = randn({6, 10}, gen), w0 = randn({10}, gen), b0 = randn({6, 1}, gen);
  const Tensor table0 = randn({9, 10}, gen);
  const Tensor idx = from_vector(std::vector<std::int64_t>{1, 4, 4, 0, 8, 4}, {6}, kInt32);
  const Tensor target = rand({6, 10}, gen);

  // loss = sum(softmax(x * w + b + embedding) * target) + sum(max(exp(x) / 3, dim 1))
  //        + mean(log_softmax(relu(x) - x^2, dim 0))
  const auto loss_of = [&](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& table, const Tensor& i,
                           const Tensor& t) {
    const Tensor logits = x * w + b + ops::embedding(table, i);
    Tensor loss = ops::sum(ops::softmax(logits, -1) * t);
    loss = loss + ops::max(ops::exp(x) / 3.0, 1).first.sum();
    loss = loss + ops::log_softmax(ops::relu(x) - ops::pow(x, 2.0), 0).mean();
    return loss;
  };

  std::vector<Tensor> cpu_leaves = {x0.clone().requires_grad_(true), w0.clone().requires_grad_(true),
                                    b0.clone().requires_grad_(true), table0.clone().requires_grad_(true)};
  std::vector<Tensor> gpu_leaves;
  for (const Tensor& t : {x0, w0, b0, table0}) gpu_leaves.push_back(t.to(gpu()).requires_grad_(true));

  const Tensor cpu_loss = loss_of(cpu_leaves[0], cpu_leaves[1], cpu_leaves[2], cpu_leaves[3], idx, target);
  const Tensor gpu_loss =
      loss_of(gpu_leaves[0], gpu_leaves[1], gpu_leaves[2], gpu_leaves[3], idx.to(gpu()), target.to(gpu()));
  CHECK(on_gpu(gpu_loss));
  CHECK(max_error(gpu_loss, cpu_loss) < 1e-6);
  cpu_loss.backward();
  gpu_loss.backward();
  for (int i = 0; i < 4; ++i) {
    CAPTURE(i);
    REQUIRE(gpu_leaves[i].grad().defined());
    CHECK(on_gpu(gpu_leaves[i].grad()));
    CHECK(max_error(gpu_leaves[i].grad(), cpu_leaves[i].grad()) < 1e-5);
  }

  // float64 on the device too (what gradient checks use)
  const Tensor y0 = randn({3, 7}, gen, kFloat64);
  const Tensor cy = y0.clone().requires_grad_(true), gy = y0.to(gpu()).requires_grad_(true);
  (ops::softmax(cy, 0) * ops::sigmoid(cy)).sum().backward();
  (ops::softmax(gy, 0) * ops::sigmoid(gy)).sum().backward();
  CHECK(max_error(gy.grad(), cy.grad()) < 1e-12);
}

TEST_CASE("device ops: the same generator seed gives the same random numbers on both devices") {
  cuda::use_emulator();
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dt));
    Generator on_cpu(42), on_device(42);
    const Tensor a = randn({1001}, on_cpu, dt);
    const Tensor b = randn({1001}, on_device, TensorOptions().dtype(dt).device(gpu()));
    CHECK(on_gpu(b));
    CHECK(max_error(b, a) < 1e-6 * (dt == kFloat32 ? 1.0 : 1e-8));  // a few ulp apart at most
    const Tensor c = rand({2, 333}, on_cpu, dt);
    const Tensor d = rand({2, 333}, on_device, TensorOptions().dtype(dt).device(gpu()));
    CHECK(max_error(d, c) == 0.0);  // uniform: the same bits
    CHECK(on_cpu.offset() == on_device.offset());
  }
  // normal_ and uniform_ in place, and dropout's mask
  Generator g1(7), g2(7);
  Tensor p = zeros({5, 9}), q = zeros({5, 9}, TensorOptions().device(gpu()));
  p.uniform_(-2.0, 3.0, g1);
  q.uniform_(-2.0, 3.0, g2);
  CHECK(same_bits(q, p));
  const Tensor ones_cpu = ones({123});
  CHECK(same_bits(ops::dropout(ones_cpu.to(gpu()), 0.3, g2), ops::dropout(ones_cpu, 0.3, g1)));
}
