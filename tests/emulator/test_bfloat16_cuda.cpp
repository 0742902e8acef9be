// tests/emulator/test_bfloat16_cuda.cpp: mixed precision on the CUDA device, run on the SIMT
// emulator (chapter 18): BFloat16 tensors on the device hold what they hold on the CPU (the
// expectations of tests/core/test_bfloat16_tensor.cpp, on a CUDA tensor), and autocast sends
// a CUDA matmul to matmul:bf16 (the tensor-core variant 9 here, cuBLAS on a GPU).
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "brrr/bfloat16.h"
#include "brrr/brrr.h"

using namespace brrr;

namespace {

const Device kCuda = Device::cuda();
const TensorOptions kBF16Cuda = TensorOptions().dtype(kBFloat16).device(Device::cuda());

std::uint16_t bits(float x) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16); }
std::vector<std::uint32_t> all_bits(const std::vector<float>& x) {
  std::vector<std::uint32_t> out;
  for (float v : x) out.push_back(std::bit_cast<std::uint32_t>(v));
  return out;
}
double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(kFloat64).to_vector<double>(), y = b.to(kFloat64).to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}
double max_abs(const Tensor& a) {
  double m = 0;
  for (double v : a.to(kFloat64).to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}
// Is every element of got within one bf16 step of want's (a step is at most 2^-7 of the value)?
bool within_bf16_step(const Tensor& got, const Tensor& want) {
  const std::vector<double> x = got.to(kFloat64).to_vector<double>(), y = want.to(kFloat64).to_vector<double>();
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (std::abs(x[i] - y[i]) > std::abs(y[i]) * 0x1p-7) return false;
  return true;
}

}  // namespace

TEST_CASE("bfloat16 on cuda: creation, 2 bytes an element, exact widening on the device") {
  cuda::use_emulator();
  const Tensor z = zeros({2, 3}, kBF16Cuda), o = ones({4}, kBF16Cuda), f = full({3}, 0.1, kBF16Cuda);
  CHECK(z.dtype() == kBFloat16);
  CHECK(z.device() == kCuda);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(o.to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(f.to_vector<double>() == std::vector<double>(3, 0.10009765625));
  // randn in bf16: float32 draws rounded once, the same numbers as on the CPU.
  Generator g1(3), g2(3);
  const Tensor r_cpu = randn({37}, g1, TensorOptions().dtype(kBFloat16)), r_cuda = randn({37}, g2, kBF16Cuda);
  CHECK(r_cuda.dtype() == kBFloat16);
  CHECK(all_bits(r_cuda.to_vector<float>()) == all_bits(r_cpu.to_vector<float>()));
  // Every finite bf16 value crosses to the device and back, and widens and narrows there exactly.
  std::vector<float> all;
  for (std::uint32_t b = 0; b < 0x10000; ++b)
    if ((b & 0x7f80) != 0x7f80) all.push_back(std::bit_cast<float>(b << 16));
  const Tensor t = from_vector(all, {static_cast<std::int64_t>(all.size())}, TensorOptions().dtype(kBFloat16)).to(kCuda);
  const Tensor wide = t.to(kFloat32);  // the conversion kernel, on the device
  CHECK(wide.device() == kCuda);
  CHECK(all_bits(wide.to_vector<float>()) == all_bits(all));
  CHECK(all_bits(wide.to(kBFloat16).to(kFloat64).to_vector<float>()) == all_bits(all));
  CHECK(all_bits(t.to(Device::cpu()).to(kFloat32).to_vector<float>()) == all_bits(all));
}

TEST_CASE("bfloat16 on cuda: float32 -> bf16 on the device rounds as the CPU does, keeping NaN, inf and -0") {
  cuda::use_emulator();
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {1.0f + 0x1p-8f,  1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-20f, -(1.0f + 3 * 0x1p-8f),
                                std::numeric_limits<float>::max(), inf, -inf, nan, -0.0f, 0x1p-140f, 0x1.fep-127f};
  const std::vector<float> on_cuda = from_vector(x, {11}).to(kCuda).to(kBFloat16).to_vector<float>();
  const std::vector<float> on_cpu = from_vector(x, {11}).to(kBFloat16).to_vector<float>();
  CHECK(all_bits(on_cuda) == all_bits(on_cpu));
  CHECK(on_cuda[0] == 1.0f);                  // a tie goes to the even neighbour
  CHECK(on_cuda[1] == 1.0f + 0x1p-6f);
  CHECK(on_cuda[4] == inf);                   // past the largest bf16
  CHECK(std::isnan(on_cuda[7]));
  CHECK((on_cuda[8] == 0.0f && std::signbit(on_cuda[8])));
  CHECK(bits(on_cuda[9]) == bits(0x1p-140f));  // subnormals kept
  // From float64 and int32 on the device too, through float32 as on the CPU.
  const Tensor d = from_vector(std::vector<double>{0.1, 1e300, -3.0}, {3});
  CHECK(all_bits(d.to(kCuda).to(kBFloat16).to_vector<float>()) == all_bits(d.to(kBFloat16).to_vector<float>()));
  const Tensor i = from_vector(std::vector<std::int32_t>{257, -7, 1 << 20}, {3}, kInt32);
  CHECK(i.to(kCuda).to(kBFloat16).to_vector<float>() == i.to(kBFloat16).to_vector<float>());
  CHECK(i.to(kBFloat16).to(kCuda).to(kInt32).to_vector<std::int32_t>() == std::vector<std::int32_t>{256, -7, 1 << 20});
}

TEST_CASE("bfloat16 on cuda prints with its device and dtype") {
  cuda::use_emulator();
  CHECK(full({2}, 1.5, kBF16Cuda).str() == "tensor([1.5000, 1.5000], device='cuda:0', dtype=bfloat16)");
}

TEST_CASE("bfloat16 on cuda: ops compute in float32 and round once as on the CPU, sums accumulate in float32") {
  cuda::use_emulator();
  Generator g(41);
  const Tensor a = randn({5, 7}, g).to(kBFloat16), b = randn({7}, g).to(kBFloat16);
  const Tensor ad = a.to(kCuda), bd = b.to(kCuda);
  auto same = [](const char* what, const Tensor& got, const Tensor& want) {  // bit for bit
    INFO(std::string(what));
    CHECK(got.dtype() == kBFloat16);
    CHECK(got.device() == Device::cuda());
    CHECK(all_bits(got.to_vector<float>()) == all_bits(want.to_vector<float>()));
  };
  same("a + b", ad + bd, a + b);  // broadcast
  same("a * b", ad * bd, a * b);
  same("a / b", ad / bd, a / b);
  same("a - 1.5", ad - 1.5, a - 1.5);
  same("ops::pow(a, 2)", ops::pow(ad, 2.0), ops::pow(a, 2.0));
  same("ops::relu(a)", ops::relu(ad), ops::relu(a));
  same("a.t() contiguous", ad.t().contiguous(), a.t().contiguous());
  // exp and tanh, and sums in another order: within one bf16 step of the CPU.
  auto close = [](const char* what, const Tensor& got, const Tensor& want) {
    INFO(std::string(what));
    CHECK(got.dtype() == kBFloat16);
    CHECK(within_bf16_step(got, want));
  };
  close("ops::exp(a)", ops::exp(ad), ops::exp(a));
  close("ops::tanh(a)", ops::tanh(ad), ops::tanh(a));
  close("ops::sum(a, {1})", ops::sum(ad, {1}), ops::sum(a, {1}));
  close("ops::mean(a, {0})", ops::mean(ad, {0}), ops::mean(a, {0}));
  // 1000 ones: a bf16 accumulator would stop at 256; the device sums in float32.
  CHECK(ops::sum(ones({1000}, kBF16Cuda)).item<float>() == 1000.0f);
  CHECK_THROWS_WITH_AS(ad + b.to(kFloat32).to(kCuda), doctest::Contains("bfloat16"), Error);
}

TEST_CASE("autocast on cuda: matmul and linear take bf16 operands with float32 sums, and off they stay float32") {
  cuda::use_emulator();
  Generator g(7);
  // A batch against one shared matrix (stride 0), ragged sizes; the operands bf16 rounds.
  const Tensor a = randn({2, 19, 40}, g), b = randn({40, 23}, g);
  const Tensor exact_bf16 = ops::matmul(a.to(kBFloat16).to(kFloat64), b.to(kBFloat16).to(kFloat64));
  const Tensor exact_f32 = ops::matmul(a.to(kFloat64), b.to(kFloat64));
  Tensor on;
  {
    const Autocast autocast(kBFloat16);
    on = ops::matmul(a.to(kCuda), b.to(kCuda));
  }
  const Tensor off = ops::matmul(a.to(kCuda), b.to(kCuda));
  CHECK(on.dtype() == kFloat32);
  CHECK(max_abs_diff(on, exact_bf16) < 1e-4);   // float32 sums of the exact bf16 products
  CHECK(max_abs_diff(off, exact_f32) < 1e-4);   // autocast off: the float32 product
  CHECK(max_abs_diff(on, exact_f32) > 1e-3);    // which bf16 operands do not give
  // linear with its backward (transposed operands, accumulation onto the bias) under autocast:
  // the CPU's bf16 GEMM and the device's agree to float32 rounding.
  auto run = [&](Device device) {
    Generator gen(11);
    Tensor x = randn({9, 33}, gen).to(device).requires_grad_(true);
    Tensor w = randn({17, 33}, gen).to(device).requires_grad_(true);
    Tensor bias = randn({17}, gen).to(device).requires_grad_(true);
    const Autocast autocast(kBFloat16);
    const Tensor y = ops::linear(x, w, bias);
    ops::sum(y * y).backward();
    return std::vector<Tensor>{y, x.grad(), w.grad(), bias.grad()};
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), dev = run(kCuda);
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO("output " << i);
    CHECK(max_abs_diff(dev[i], cpu[i]) < 2e-3 * (1 + max_abs(cpu[i])));
  }
  // bf16 tensors on the device multiply as on the CPU: exact products, float32 sums, one rounding.
  const Tensor a16 = randn({9, 40}, g).to(kBFloat16), b16 = randn({40, 11}, g).to(kBFloat16);
  const Tensor c = ops::matmul(a16.to(kCuda), b16.to(kCuda));
  CHECK(c.dtype() == kBFloat16);
  CHECK(within_bf16_step(c, ops::matmul(a16, b16)));
}

TEST_CASE("bfloat16 on cuda: GELU, bias + GELU, LayerNorm and cross-entropy run their bf16 kernels, as the CPU's") {
  cuda::use_emulator();
  Generator g(44);
  // Ragged sizes: 5 rows of 37 (no multiple of a warp or a pack).
  const Tensor x = randn({5, 37}, g).to(kBFloat16), w = randn({37}, g).to(kBFloat16), b = randn({37}, g).to(kBFloat16);
  const Tensor targets = from_vector(std::vector<std::int64_t>{3, 0, 36, 5, 5}, {5}, kInt64);
  // Each op forward and backward on one device: the outputs and the gradients of x (and w, b).
  auto run = [&](Device device) {
    Tensor xd = x.to(device).detach().requires_grad_(true), wd = w.to(device).detach().requires_grad_(true);
    Tensor bd = b.to(device).detach().requires_grad_(true);
    const Tensor y1 = ops::gelu(xd), y2 = ops::bias_gelu(xd, bd), y3 = ops::layer_norm(xd, wd, bd, 1e-5);
    const Tensor loss = ops::cross_entropy(y3, targets.to(device));  // float32, from bf16 logits
    (ops::sum(y1 * y2) + loss.to(kBFloat16)).backward();
    return std::vector<Tensor>{y1, y2, y3, loss, xd.grad(), wd.grad(), bd.grad()};
  };
  const std::vector<Tensor> cpu = run(Device::cpu()), dev = run(kCuda);
  const char* names[] = {"gelu", "bias_gelu", "layer_norm", "cross_entropy", "dx", "dweight", "dbias"};
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    INFO(names[i]);
    CHECK(dev[i].dtype() == (i == 3 ? kFloat32 : kBFloat16));
    CHECK(dev[i].device() == kCuda);
    // float32 math in another order, then one rounding each: within a bf16 step of the CPU
    // (two for the gradients, which pass through several rounded ops).
    CHECK(max_abs_diff(dev[i], cpu[i]) <= (i < 4 ? 0x1p-7 : 0x1p-6) * std::max(1.0, max_abs(cpu[i])));
  }
  CHECK(within_bf16_step(dev[0], cpu[0]));  // gelu: elementwise, so each element on its own
}
