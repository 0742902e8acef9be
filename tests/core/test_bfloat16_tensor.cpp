// tests/core/test_bfloat16_tensor.cpp: the BFloat16 dtype on the CPU (chapter 18): creation,
// conversion both ways (round to nearest even; NaN, infinities and signed zeros kept),
// printing, ops computed in float32 and rounded once, sums accumulated in float32, autograd
// through bf16 tensors, and safetensors BF16 files that PyTorch reads and writes.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <limits>

#include "brrr/bfloat16.h"
#include "brrr/brrr.h"
#include "brrr/safetensors.h"
#include "tests/models/test_util.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

const TensorOptions kBF16 = TensorOptions().dtype(kBFloat16);

std::uint16_t bits(float x) { return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(x) >> 16); }

// x's elements (float32) rounded to bf16 one at a time by brrr::bf16: the expected values.
std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> out;
  for (float v : x) out.push_back(round_to_bf16(v));
  return out;
}

}  // namespace

TEST_CASE("bfloat16 tensors: creation, 2 bytes an element, and exact widening") {
  const Tensor z = zeros({2, 3}, kBF16), o = ones({4}, kBF16), f = full({3}, 0.1, kBF16);
  CHECK(z.dtype() == kBFloat16);
  CHECK(dtype_size(z.dtype()) == 2);
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(o.to_vector<float>() == std::vector<float>(4, 1.0f));
  CHECK(f.to_vector<float>() == std::vector<float>(3, round_to_bf16(0.1f)));  // 0.10009765625
  CHECK(f.to_vector<double>()[0] == 0.10009765625);
  CHECK(full({}, 0.1, kBF16).item<float>() == 0.10009765625f);
  // Every bf16 value widens to float32 exactly, and narrows back to itself.
  std::vector<float> all;
  for (std::uint32_t b = 0; b < 0x10000; ++b)
    if ((b & 0x7f80) != 0x7f80) all.push_back(std::bit_cast<float>(b << 16));  // the finite ones
  const Tensor t = from_vector(all, {static_cast<std::int64_t>(all.size())}, kBF16);
  CHECK(t.to_vector<float>() == all);
  CHECK(t.to(kFloat32).to(kBFloat16).to(kFloat64).to_vector<float>() == all);
}

TEST_CASE("bfloat16 tensors: float32 -> bf16 rounds to nearest even and keeps NaN, infinities and -0") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float tie_down = 1.0f + 0x1p-8f;       // halfway between 1 and 1 + 2^-7: to 1 (even)
  const float tie_up = 1.0f + 3 * 0x1p-8f;     // halfway between 1 + 2^-7 and 1 + 2^-6: up (even)
  const float above = 1.0f + 0x1p-8f + 0x1p-20f;  // just above a tie: up
  const float big = std::numeric_limits<float>::max();  // rounds up past the largest bf16: inf
  const float tiny = 0x1p-140f;                // a subnormal, kept (no flush to zero)
  const std::vector<float> x = {tie_down, tie_up, above, -tie_up, big, -big, inf, -inf, nan, -0.0f, tiny, 0x1.fep-127f};
  const std::vector<float> y = from_vector(x, {12}).to(kBFloat16).to_vector<float>();
  CHECK(y[0] == 1.0f);
  CHECK(y[1] == 1.0f + 0x1p-6f);
  CHECK(y[2] == 1.0f + 0x1p-7f);
  CHECK(y[3] == -(1.0f + 0x1p-6f));
  CHECK(y[4] == inf);
  CHECK(y[5] == -inf);
  CHECK(y[6] == inf);
  CHECK(y[7] == -inf);
  CHECK(std::isnan(y[8]));
  CHECK((y[9] == 0.0f && std::signbit(y[9])));
  CHECK(bits(y[10]) == bits(tiny));
  CHECK(y[11] == 0x1p-126f);  // the largest subnormal bf16 rounds up to the smallest normal
  const std::vector<float> r = rounded(x);  // one more: all as brrr::bf16 rounds them
  for (std::size_t i = 0; i < x.size(); ++i)
    if (i != 8) CHECK(bits(y[i]) == bits(r[i]));
}

TEST_CASE("bfloat16 tensors print with their dtype") {
  CHECK(full({2}, 1.5, kBF16).str() == "tensor([1.5000, 1.5000], dtype=bfloat16)");
  CHECK(from_vector(std::vector<float>{3.14159f}, {1}, kBF16).str() == "tensor([3.1406], dtype=bfloat16)");
}

TEST_CASE("bfloat16 ops compute in float32 and round once, and sums accumulate in float32") {
  Generator g(41);
  const Tensor a32 = randn({5, 7}, g), b32 = randn({7}, g);
  const Tensor a = a32.to(kBFloat16), b = b32.to(kBFloat16);
  const Tensor af = a.to(kFloat32), bf = b.to(kFloat32);  // exactly a and b
  auto same = [](const char* what, const Tensor& got, const Tensor& want32) {
    INFO(std::string(what));
    CHECK(got.dtype() == kBFloat16);
    CHECK(got.to_vector<float>() == rounded(want32.to_vector<float>()));
  };
  same("a + b", a + b, af + bf);  // broadcast
  same("a * b", a * b, af * bf);
  same("a / b", a / b, af / bf);
  same("a - 1.5", a - 1.5, af - 1.5);
  same("ops::exp(a)", ops::exp(a), ops::exp(af));
  same("ops::tanh(a)", ops::tanh(a), ops::tanh(af));
  same("ops::pow(a", ops::pow(a, 2.0), ops::pow(af, 2.0));
  same("ops::sum(a", ops::sum(a, {1}), ops::sum(af, {1}));
  same("ops::mean(a", ops::mean(a, {0}), ops::mean(af, {0}));
  // 1000 ones: a bf16 accumulator stops at 256 (256 + 1 rounds back to 256); float32 does not.
  CHECK(ops::sum(ones({1000}, kBF16)).item<float>() == 1000.0f);
  // Mixing dtypes is an error, as for float32 with float64.
  CHECK_THROWS_WITH_AS(a + b32, doctest::Contains("bfloat16"), Error);
}

TEST_CASE("bfloat16 matmul multiplies exactly and sums in float32, and gradients flow through bf16 tensors") {
  Generator g(42);
  const Tensor a = randn({9, 40}, g).to(kBFloat16), b = randn({40, 11}, g).to(kBFloat16);
  const Tensor c = ops::matmul(a, b);
  CHECK(c.dtype() == kBFloat16);
  const Tensor ref = ops::matmul(a.to(kFloat64), b.to(kFloat64));  // exact products, double sums
  CHECK(c.to_vector<float>() == rounded(ref.to(kFloat32).to_vector<float>()));
  // d/dx sum(x * x) = 2x, through a bf16 copy of a float32 leaf: the gradient is float32 again.
  Tensor x = randn({6}, g).requires_grad_(true);
  const Tensor x16 = x.to(kBFloat16);
  ops::sum(ops::mul(x16, x16)).backward();
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(x.grad().to_vector<float>() == rounded((x16.to(kFloat32) * 2.0).to_vector<float>()));
}

TEST_CASE("bfloat16 safetensors: brrr writes BF16 that PyTorch reads as bfloat16, and reads PyTorch's") {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-bf16-safetensors";
  std::filesystem::create_directories(dir);
  Generator g(43);
  // Values across the range, ties and specials: PyTorch must see the bits its rounding gives.
  std::vector<float> v = randn({2000}, g).to_vector<float>();
  for (float& x : v) x = std::ldexp(x, static_cast<int>(std::lround(x * 20)));
  for (float x : {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, std::numeric_limits<float>::infinity(), -0.0f,
                  std::numeric_limits<float>::quiet_NaN(), 0x1p-140f, std::numeric_limits<float>::max()})
    v.push_back(x);
  const Tensor x32 = from_vector(v, {static_cast<std::int64_t>(v.size())});
  safetensors::save(dir + "/brrr.safetensors", {{"x", x32.to(kBFloat16)}, {"x32", x32}});
  {
    safetensors::File f(dir + "/brrr.safetensors");
    CHECK(f.info("x").dtype == kBFloat16);
    CHECK(f.tensor("x").to_vector<float>().size() == v.size());
    const Tensor back = zeros({static_cast<std::int64_t>(v.size())});  // converted to float32 on load
    f.copy_into("x", back);
    const std::vector<float> got = back.to_vector<float>(), want = rounded(v);
    for (std::size_t i = 0; i < v.size(); ++i)
      if (!std::isnan(want[i])) CHECK(got[i] == want[i]);
  }
  if (!test::python_has("torch")) return test::skip(BRRR_PYTHON " cannot import torch (scripts/setup.sh installs it)");
  std::string out;
  const int rc = test::run(std::string(BRRR_PYTHON) + " " + BRRR_SOURCE_DIR + "/tests/core/bf16_in_torch.py " + dir, &out);
  INFO(out);
  CHECK(rc == 0);
  CHECK(out.find("0 differ from torch's own rounding") != std::string::npos);
  safetensors::File t(dir + "/torch.safetensors");
  CHECK(t.info("y").dtype == kBFloat16);
  CHECK(t.tensor("y").to_vector<float>() ==
        std::vector<float>{1.0f, -2.5f, 3.140625f, round_to_bf16(1e-3f), 65536.0f, -0.0f});
}

TEST_CASE("bfloat16 GELU, bias + GELU, LayerNorm and cross-entropy: float32 math, each output rounded once") {
  Generator g(43);
  const Tensor x = randn({6, 37}, g).to(kBFloat16), w = randn({37}, g).to(kBFloat16), b = randn({37}, g).to(kBFloat16);
  const Tensor xf = x.to(kFloat32), wf = w.to(kFloat32), bf = b.to(kFloat32);
  auto same = [](const char* what, const Tensor& got, const Tensor& want32) {
    INFO(std::string(what));
    CHECK(got.dtype() == kBFloat16);
    CHECK(got.to_vector<float>() == rounded(want32.to_vector<float>()));
  };
  same("gelu", ops::gelu(x), ops::gelu(xf));
  same("bias_gelu", ops::bias_gelu(x, b), ops::bias_gelu(xf, bf));
  same("layer_norm", ops::layer_norm(x, w, b, 1e-5), ops::layer_norm(xf, wf, bf, 1e-5));
  const Tensor targets = from_vector(std::vector<std::int64_t>{3, 0, 36, 5, 5, 1}, {6}, kInt64);
  // The loss of bf16 logits is float32 (a float32 sum of float32 losses, the fused kernel on bf16
  // data): float32's loss of the same (widened) logits, to float32's rounding.
  const Tensor loss = ops::cross_entropy(x, targets);
  CHECK(loss.dtype() == kFloat32);
  CHECK(std::abs(loss.item<double>() - ops::cross_entropy(xf, targets).item<double>()) <= 1e-6 * loss.item<double>());
  // Gradients flow through them in bf16: gelu's is dout * gelu'(x), rounded once.
  Tensor leaf = x.clone().requires_grad_(true);
  ops::sum(ops::gelu(leaf)).backward();
  Tensor leaf32 = xf.clone().requires_grad_(true);
  ops::sum(ops::gelu(leaf32)).backward();
  same("gelu backward", leaf.grad(), leaf32.grad());
}
