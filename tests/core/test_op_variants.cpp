// tests/core/test_op_variants.cpp: the registry alone picks how LayerNorm, GELU, the loss
// and attention are computed (framework/src/op_variants.cpp). Chapter 04 (the registry) and
// chapter 07 (the composed ops). Read before: tests/core/test_fused_vs_composed.cpp.
//
// What a user relies on: the defaults are the ops with kernels of their own; selecting
// "composed" (one op, or every op with "*=composed", as BRRR_KERNELS does) makes the public
// op return exactly what the composed op returns, bit for bit; reset_selection goes back.
#include <doctest/doctest.h>

#include <vector>

#include "brrr/brrr.h"

using namespace brrr;

namespace {

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.contiguous().to_vector<double>() == b.contiguous().to_vector<double>();
}

std::string selected(const char* op, DType dtype = kFloat32) {
  ops::register_op_variants();
  return kernels::selected(op, DeviceType::CPU, dtype);
}

struct Inputs {
  Generator g{11};
  Tensor x = randn({6, 10}, g), r = randn({6, 10}, g), w = randn({10}, g), b = randn({10}, g);
  Tensor logits = randn({6, 7}, g);
  Tensor targets = from_vector(std::vector<double>{0, 6, 3, 2, 5, 1}, {6}, TensorOptions().dtype(kInt64));
  Tensor q = randn({1, 2, 5, 4}, g), k = randn({1, 2, 5, 4}, g), v = randn({1, 2, 5, 4}, g);
};

}  // namespace

TEST_CASE("the defaults are the ops with kernels, and attention is composed on the CPU") {
  kernels::reset_selection();
  CHECK(selected("layer_norm") == "kernels");
  CHECK(selected("residual_layer_norm") == "fused");
  CHECK(selected("gelu") == "kernels");
  CHECK(selected("linear_gelu") == "bias_in_gemm");
  CHECK(selected("cross_entropy") == "fused");
  CHECK(selected("cross_entropy", kFloat64) == "fused");
  CHECK(selected("causal_attention") == "composed");
  const Inputs in;
  CHECK(same_bits(ops::layer_norm(in.x, in.w, in.b), ops::layer_norm_kernels(in.x, in.w, in.b)));
  CHECK(same_bits(ops::gelu(in.x), ops::gelu_kernels(in.x)));
  CHECK(same_bits(ops::cross_entropy(in.logits, in.targets), ops::cross_entropy_kernels(in.logits, in.targets)));
}

TEST_CASE("'*=composed' selects every op's composed variant, and the ops then are the composed ones") {
  const Inputs in;
  kernels::select_from_spec("*=composed");
  for (const char* op : {"layer_norm", "residual_layer_norm", "gelu", "linear_gelu", "cross_entropy", "causal_attention"}) {
    CAPTURE(op);
    CHECK(selected(op) == "composed");
    CHECK(selected(op, kFloat64) == "composed");
  }
  CHECK(same_bits(ops::layer_norm(in.x, in.w, in.b), ops::layer_norm_composed(in.x, in.w, in.b)));
  CHECK(same_bits(ops::gelu(in.x), ops::gelu_composed(in.x)));
  CHECK(same_bits(ops::linear_gelu(in.x, in.x, in.b.narrow(0, 0, 6)),
                  ops::gelu_composed(ops::linear(in.x, in.x, in.b.narrow(0, 0, 6)))));
  CHECK(same_bits(ops::cross_entropy(in.logits, in.targets), ops::cross_entropy_composed(in.logits, in.targets)));
  const auto [sum, out] = ops::residual_layer_norm(in.x, in.r, in.w, in.b);
  CHECK(same_bits(sum, ops::add(in.x, in.r)));
  CHECK(same_bits(out, ops::layer_norm_composed(ops::add(in.x, in.r), in.w, in.b)));
  // Autograd derives the composed op's backward: the gradients are the composed op's too.
  Tensor x1 = in.x.clone().requires_grad_(true), x2 = in.x.clone().requires_grad_(true);
  ops::sum(ops::mul(ops::layer_norm(x1, in.w, in.b), in.r)).backward();
  ops::sum(ops::mul(ops::layer_norm_composed(x2, in.w, in.b), in.r)).backward();
  CHECK(same_bits(x1.grad(), x2.grad()));
  kernels::reset_selection();
  CHECK(selected("layer_norm") == "kernels");
  CHECK(same_bits(ops::layer_norm(in.x, in.w, in.b), ops::layer_norm_kernels(in.x, in.w, in.b)));
}

TEST_CASE("one op's selection leaves the others alone, and ops::select_composed is '*=composed'") {
  kernels::select_from_spec("gelu=composed");
  CHECK(selected("gelu") == "composed");
  CHECK(selected("layer_norm") == "kernels");
  kernels::reset_selection();
  ops::select_composed();
  CHECK(selected("cross_entropy") == "composed");
  CHECK(selected("causal_attention") == "composed");
  kernels::reset_selection();
}

TEST_CASE("a selection of every op names the variant no op has") {
  ops::register_op_variants();
  CHECK_THROWS_WITH_AS(kernels::select_from_spec("*=compsoed"), doctest::Contains("no op has a variant 'compsoed'"),
                       Error);
  kernels::reset_selection();
}

TEST_CASE("bfloat16 tensors take the kernels whatever is selected, and other dtypes' errors name the op") {
  Generator g(5);
  const Tensor x = randn({4, 6}, g).to(kBFloat16), w = ones({6}).to(kBFloat16);
  ops::select_composed();
  CHECK(same_bits(ops::layer_norm(x, w, Tensor()), ops::layer_norm_kernels(x, w, Tensor())));
  CHECK(same_bits(ops::gelu(x), ops::gelu_kernels(x)));
  kernels::reset_selection();
  const Tensor ints = from_vector(std::vector<double>{1, 2, 3}, {3}, TensorOptions().dtype(kInt64));
  CHECK_THROWS_WITH_AS(ops::gelu(ints), doctest::Contains("gelu"), Error);
  CHECK_THROWS_WITH_AS(ops::layer_norm(ints, ints, Tensor()), doctest::Contains("layer_norm"), Error);
}

// ---------------------------------------------------------------------------------------------
// Eligibility (issue 29): one decision per call. A variant carries a rule (the largest head size
// its tiles hold, whether it has dropout, whether it rounds to bf16); the registry runs the
// selected variant if the call keeps its rule (an error naming the rule if not), else the
// highest-priority variant whose rule the call keeps, and `brrr kernels OP --head-size N`
// (kernels::explain) says why each other variant was passed over.

TEST_CASE("attention with dropout runs the composed variant, the one whose rule allows dropout") {
  kernels::reset_selection();
  ops::register_op_variants();
  kernels::Call call;
  call.dropout = 0.1;
  call.head_size = 160;
  CHECK(kernels::chosen("causal_attention", DeviceType::CPU, kFloat32, call) == "composed");
  // The same with flash selected: the selection holds for calls without dropout.
  kernels::select("causal_attention", "flash", DeviceType::CPU);
  CHECK(kernels::chosen("causal_attention", DeviceType::CPU, kFloat32, {}) == "flash");
  const Inputs in;
  Generator a(3), b(3);
  // ... and with dropout the selected flash is refused, naming the rule the call breaks.
  CHECK_THROWS_WITH_AS(ops::causal_attention(in.q, in.k, in.v, 0.1, &a),
                       doctest::Contains("the selected variant 'flash' cannot run this call"), Error);
  CHECK_THROWS_WITH_AS(ops::causal_attention(in.q, in.k, in.v, 0.1, &a),
                       doctest::Contains("no dropout on the attention weights"), Error);
  kernels::reset_selection();
  // The default runs the composed op with its dropout, as the op itself does with the same seed.
  CHECK(same_bits(ops::causal_attention(in.q, in.k, in.v, 0.5, &a), ops::causal_attention_composed(in.q, in.k, in.v, 0.5, &b)));
}

TEST_CASE("kernels::explain says which variant runs a call and why each other one was passed over") {
  kernels::reset_selection();
  ops::register_op_variants();
  kernels::Call call;
  call.dropout = 0.1;
  call.head_size = 160;
  const std::string text = kernels::explain("causal_attention", call);
  INFO(text);
  CHECK(text.find("causal_attention for float32 products, head size 160, dropout 0.1:") == 0);
  CHECK(text.find("cpu float32: composed runs; passed over: flash (no dropout on the attention weights)") !=
        std::string::npos);
  // A plain call on the CPU: composed by priority, flash eligible.
  const std::string plain = kernels::explain("causal_attention", {});
  CHECK(plain.find("cpu float32: composed runs; passed over: flash (eligible, lower priority)") != std::string::npos);
  CHECK_THROWS_WITH_AS(kernels::explain("no_such_op", {}), doctest::Contains("no op 'no_such_op'"), Error);
}

TEST_CASE("precision is a slot of the op: bf16-rounding variants run autocast's calls and no other") {
  kernels::reset_selection();
  kernels::Call bf16;
  bf16.bf16_compute = true;
  // One op name, two slots: a bf16 call goes to matmul:bf16, whose every variant rounds its
  // inputs, a plain call to the exact one, which has none of them.
  const std::string autocast = kernels::chosen("matmul", DeviceType::CPU, kFloat32, bf16);
  CHECK(autocast == kernels::chosen("matmul:bf16", DeviceType::CPU, kFloat32, {}));
  CHECK(kernels::selected("matmul:bf16", DeviceType::CPU, kFloat32) == autocast);
  for (const kernels::VariantInfo& v : kernels::variants("matmul:bf16")) {
    CAPTURE(v.variant);
    CHECK(v.meta.bf16_inputs);
    CHECK(v.op == "matmul:bf16");
  }
  for (const kernels::VariantInfo& v : kernels::variants("matmul")) CHECK(!v.meta.bf16_inputs);
  CHECK(kernels::chosen("attention_forward", DeviceType::CPU, kFloat32, bf16) == "cpu");
  // No op's name carries its precision: bf16 products are a slot, bf16 data a dtype.
  for (const std::string& op : kernels::ops()) {
    CAPTURE(op);
    CHECK(op.find("_bf16") == std::string::npos);
  }
  CHECK(kernels::chosen("matmul", DeviceType::CPU, kBFloat16, {}) == "cpu");  // bf16 data, float32 out
  // A float32 variant's selection leaves the bf16 calls to their own default, and back.
  kernels::select("matmul", "naive", DeviceType::CPU);
  CHECK(kernels::chosen("matmul", DeviceType::CPU, kFloat32, {}) == "naive");
  CHECK(kernels::chosen("matmul", DeviceType::CPU, kFloat32, bf16) == autocast);
  kernels::reset_selection();
  kernels::select_from_spec("matmul:bf16=plain");
  CHECK(kernels::chosen("matmul", DeviceType::CPU, kFloat32, bf16) == "plain");
  CHECK(kernels::chosen("matmul", DeviceType::CPU, kFloat32, {}) != "plain");
  // "plain" is a variant of the bf16 slot only: the exact one does not have it.
  CHECK_THROWS_WITH_AS(kernels::select_from_spec("matmul=plain"), doctest::Contains("has no variant 'plain'"), Error);
  kernels::reset_selection();
  // The rules as `brrr kernels` prints them.
  kernels::VariantMeta tiled;
  tiled.max_head_size = 128;
  CHECK(kernels::rule_text(tiled) == "full-precision products, head size <= 128");
  CHECK(kernels::why_not(tiled, {160, 0.0, false}) == "head size 160 > 128, the most its tiles hold");
  CHECK(kernels::why_not(tiled, {128, 0.0, false}).empty());
  CHECK(kernels::why_not(tiled, {64, 0.0, true}).empty());  // the precision is the slot's, not a rule
}

// The GPT hands its packed projection qkv (B, T, 3 C) to ops::causal_attention_qkv. Whichever
// variant the registry picks, the values and the gradient of qkv are what causal_attention on
// qkv's head views gives: the flash variant runs flash_attention_qkv, whose backward writes
// d qkv in one tensor instead of three zero-filled ones summed (the same numbers: adding a zero
// changes none).
TEST_CASE("causal_attention_qkv on packed qkv: each variant's values and qkv's gradient, as on qkv's head views") {
  const std::int64_t B = 2, T = 7, H = 3, hs = 4, C = H * hs;
  for (DType dtype : {kFloat32, kFloat64}) {
    for (const char* variant : {"composed", "flash"}) {
      CAPTURE(variant);
      CAPTURE(dtype_name(dtype));
      kernels::reset_selection();
      ops::register_op_variants();
      kernels::select("causal_attention", variant, DeviceType::CPU);
      Generator g(21);
      const Tensor data = randn({B, T, 3 * C}, g).to(dtype), dy = randn({B, H, T, hs}, g).to(dtype);

      const Tensor packed = data.clone().requires_grad_(true);
      const Tensor y = ops::causal_attention_qkv(packed, H);
      (y * dy).sum().backward();

      const Tensor split = data.clone().requires_grad_(true);
      auto heads = [&](int i) { return split.narrow(2, i * C, C).view({B, T, H, hs}).transpose(1, 2); };
      const Tensor y2 = ops::causal_attention(heads(0), heads(1), heads(2));
      (y2 * dy).sum().backward();

      CHECK(same_bits(y, y2));
      REQUIRE(packed.grad().defined());
      CHECK(same_bits(packed.grad(), split.grad()));
    }
  }
  kernels::reset_selection();
  const Tensor odd = zeros({1, 2, 10});
  CHECK_THROWS_WITH_AS(ops::causal_attention_qkv(odd, 4), doctest::Contains("qkv must be (B, T, 3 C)"), Error);
  // With flash selected, a call with dropout is refused as causal_attention refuses it.
  kernels::select("causal_attention", "flash", DeviceType::CPU);
  Generator a(3);
  CHECK_THROWS_WITH_AS(ops::causal_attention_qkv(zeros({1, 2, 12}), 2, 0.1, &a),
                       doctest::Contains("the selected variant 'flash' cannot run this call"), Error);
  kernels::reset_selection();
}
