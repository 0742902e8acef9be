// tests/train/test_train_bf16_step.cpp: the bf16 training step with bf16 in memory (chapter 18,
// section 10; `brrr train --dtype bf16`): the activations the step keeps are bf16 (the bytes
// it holds after the forward), its loss and gradients follow float32's within bf16's rounding
// on the CPU, the emulator's follow the CPU's, and its checkpoints are float32 as before.
#include <doctest/doctest.h>

#include <cmath>

#include "brrr/brrr.h"
#include "brrr/memory.h"
#include "brrr/models/gpt.h"
#include "brrr/param_copies.h"
#include "tests/train/train_helpers.h"
#include "train/trainer.h"

using namespace brrr;

namespace {

// A GPT small enough for the emulator: 2 layers, 2 heads of 64 (the head size the device's
// attention on bf16 data takes), a ragged vocabulary of 67.
models::GPTConfig small_gpt(std::int64_t n_layer = 2) {
  models::GPTConfig c;
  c.vocab_size = 67, c.block_size = 24, c.n_layer = n_layer, c.n_head = 2, c.n_embd = 128, c.dropout = 0.0;
  return c;
}

struct StepResult {
  double loss = 0;
  DType logits_dtype = kFloat32;
  // Tensor bytes alive after the forward, beyond those alive before it, less the parameters'
  // bf16 copies (a fixed cost, not the activations').
  std::size_t held = 0;
  std::vector<Tensor> grads;
};

// One forward and backward of a fresh small_gpt(n_layer) (seed 7) on a batch of B sequences,
// on `device`, with activations and residual stream as given.
StepResult one_step(Device device, DType activations, DType residual, std::int64_t B, std::int64_t n_layer = 2) {
  Generator gen(7);
  models::GPT model(small_gpt(n_layer), gen);
  model.to(device);
  model.set_precision(activations, residual);
  Generator data(11);
  const Tensor idx = randint(0, 67, {B, 24}, data).to(device), targets = randint(0, 67, {B, 24}, data).to(device);
  StepResult r;
  std::size_t copies = 0;  // every parameter but wpe (the embeddings read the float32 masters; the head wte's copy)
  if (activations == kBFloat16)
    for (const auto& [name, p] : model.named_parameters())
      if (name != "transformer.wpe.weight") copies += static_cast<std::size_t>(p.numel()) * 2;
  const std::size_t before = tensor_bytes(device.type);
  Tensor logits = model.forward(idx);
  Tensor loss = model.loss(logits, targets);
  r.held = tensor_bytes(device.type) - before - copies;
  r.logits_dtype = logits.dtype();
  r.loss = loss.item<double>();
  logits = Tensor();
  loss.backward();
  for (const Tensor& p : model.parameters()) r.grads.push_back(p.grad().to(kCPU));
  return r;
}

double max_rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::vector<double> x = a[i].to_vector<double>(), y = b[i].to_vector<double>();
    double diff = 0, scale = 1e-12;
    for (std::size_t j = 0; j < x.size(); ++j) diff = std::max(diff, std::abs(x[j] - y[j])), scale = std::max(scale, std::abs(y[j]));
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

train::TrainConfig tiny_run(const std::string& name, const std::string& device, const std::string& dtype) {
  train::TrainConfig c = train::TrainConfig::from_preset("cpu-tiny");
  c.data = train_test::small_text("test-bf16-step", 20000);
  c.out_dir = train_test::scratch("test-bf16-step", name);
  c.device = device, c.dtype = dtype;
  c.n_layer = 1, c.n_head = 2, c.n_embd = 128, c.block_size = 16, c.batch_size = 2;
  c.max_iters = 4, c.warmup_iters = 1, c.lr_decay_iters = 4, c.eval_interval = 100, c.eval_iters = 1;
  c.log_interval = 100, c.dropout = 0, c.sample_tokens = 0;
  return c;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

TEST_CASE("the bf16 step keeps bf16 activations: logits bf16, half the bytes held, float32 gradients") {
  const StepResult f32 = one_step(kCPU, kFloat32, kFloat32, 8);
  const StepResult b16 = one_step(kCPU, kBFloat16, kBFloat16, 8);
  const StepResult mixed = one_step(kCPU, kBFloat16, kFloat32, 8);
  CHECK(f32.logits_dtype == kFloat32);
  CHECK(b16.logits_dtype == kBFloat16);
  CHECK(mixed.logits_dtype == kBFloat16);
  MESSAGE("held after the forward: float32 ", f32.held, " B, bf16 ", b16.held, " B, bf16 with a float32 residual ",
          mixed.held, " B");
  // What the forward keeps for backward is bf16: at most 0.6x float32's bytes (the embeddings'
  // float32 sum, LayerNorm's statistics and the float32 losses and log-sum-exps are the rest);
  // a float32 residual stream keeps more than a bf16 one.
  CHECK(static_cast<double>(b16.held) <= 0.6 * static_cast<double>(f32.held));
  CHECK(b16.held < mixed.held);
  // The loss is a float32 sum of float32 losses, within bf16's rounding of float32's.
  CHECK(std::abs(b16.loss - f32.loss) < 0.02 * f32.loss);
  CHECK(b16.loss != f32.loss);
  // The parameters' gradients are float32 (the masters'), near float32's.
  for (const Tensor& g : b16.grads) CHECK(g.dtype() == kFloat32);
  const double rel = max_rel_diff(b16.grads, f32.grads), rel_mixed = max_rel_diff(mixed.grads, f32.grads);
  MESSAGE("gradients against float32's: bf16 ", rel, ", float32 residual ", rel_mixed);
  CHECK(rel < 0.1);
  CHECK(rel_mixed < 0.1);
}

TEST_CASE("the bf16 step reads one bf16 copy of each parameter per forward") {
  Generator gen(7);
  models::GPT model(small_gpt(), gen);
  model.set_precision(kBFloat16, kBFloat16);
  const Tensor idx = randint(0, 67, {2, 8}, gen);
  {
    const nn::ParameterCopies copies;
    model.forward(idx);
    // Every parameter but the two embeddings' masters (the embeddings are float32, then cast);
    // the tied head reads wte's copy: one copy, not two.
    CHECK(nn::ParameterCopies::size() == model.parameters().size() - 1);
  }
  CHECK(nn::ParameterCopies::size() == 0);
  CHECK_THROWS_WITH_AS(model.set_precision(kFloat32, kBFloat16), doctest::Contains("needs bfloat16 activations"), Error);
  CHECK_THROWS_WITH_AS(model.set_precision(kFloat64, kFloat32), doctest::Contains("must be float32 or bfloat16"), Error);
}

TEST_CASE("the bf16 step on the CUDA emulator gives the CPU's bf16 loss and gradients") {
  cuda::use_emulator();
  const StepResult cpu = one_step(kCPU, kBFloat16, kBFloat16, 2, 1);  // small: the emulator is slow
  const StepResult dev = one_step(Device::cuda(), kBFloat16, kBFloat16, 2, 1);
  CHECK(dev.logits_dtype == kBFloat16);
  MESSAGE("loss cpu ", cpu.loss, " emulator ", dev.loss, "; gradients ", max_rel_diff(dev.grads, cpu.grads));
  // The same bf16 tensors in memory; float32 sums in another order (tensor-core tiles), so a
  // value may land on the other side of a bf16 rounding: within a few bf16 steps.
  CHECK(std::abs(cpu.loss - dev.loss) < 1e-3 * cpu.loss);
  CHECK(max_rel_diff(dev.grads, cpu.grads) < 0.05);
}

// (tests/train/test_train_bf16_cuda.cpp runs the same trainer on the emulator against the CPU.)
TEST_CASE("brrr train --dtype bf16: near float32's losses, float32 checkpoints, either residual stream") {
  const train::TrainResult f32 = train::run_training(tiny_run("cpu-f32", "cpu", "float32"));
  const train::TrainResult b16 = train::run_training(tiny_run("cpu-bf16", "cpu", "bf16"));
  train::TrainConfig mixed_config = tiny_run("cpu-bf16-f32-residual", "cpu", "bf16");
  mixed_config.residual = "float32";
  const train::TrainResult mixed = train::run_training(mixed_config);
  MESSAGE("losses against float32's: bf16 ", max_abs_diff(b16.losses, f32.losses), ", float32 residual ",
          max_abs_diff(mixed.losses, f32.losses));
  CHECK(max_abs_diff(b16.losses, f32.losses) < 0.02);
  CHECK(max_abs_diff(mixed.losses, f32.losses) < 0.02);
  CHECK(b16.losses != f32.losses);
  CHECK(mixed.losses != b16.losses);
  // Checkpoints as before: the same names, float32 weights and AdamW state.
  safetensors::File a(f32.last_checkpoint), b(b16.last_checkpoint);
  REQUIRE(a.tensors().size() == b.tensors().size());
  for (std::size_t i = 0; i < a.tensors().size(); ++i) {
    CHECK(a.tensors()[i].name == b.tensors()[i].name);
    CHECK(a.tensors()[i].dtype == b.tensors()[i].dtype);
    CHECK(a.tensors()[i].shape == b.tensors()[i].shape);
  }
  CHECK(b.info("transformer.wte.weight").dtype == kFloat32);
  train::TrainConfig bad = tiny_run("bad", "cpu", "bf16");
  bad.residual = "fp16";
  CHECK_THROWS_WITH_AS(train::run_training(bad), doctest::Contains("residual must be float32 or bf16, got 'fp16'"), Error);
}
