// tests/cuda/test_gpu.cpp: the CUDA backend on a real GPU (ctest label `cuda`). Every test
// case starts by asking for a GPU; where there is none it calls test::skip (tests/skip.h) and
// ctest reports it as skipped. The emulator runs the same kernels in CI (tests/emulator);
// these check what only hardware can: real device memory, cuBLAS, tensor cores, timing.
// Chapter 10 (the GPU and the emulator). Read before: tests/emulator/test_device.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "lab/kernel_lab.h"
#include "tests/linear_gelu_check.h"
#include "tests/skip.h"

using namespace brrr;

namespace {

bool have_gpu() {
  if (cuda::gpu_available()) return true;
  test::skip("no CUDA GPU (these tests need one; the emulator tests cover the kernels without)");
  return false;
}

const Device kCuda = Device::cuda();

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

}  // namespace

TEST_CASE("device memory, copies and the caching allocator") {
  if (!have_gpu()) return;
  CHECK_FALSE(cuda::is_emulated());
  MESSAGE("device: ", cuda::device_name());
  Generator gen(1);
  const Tensor a = randn({257, 129}, gen);
  const Tensor d = a.to(kCuda);
  CHECK(d.to(kCPU).to_vector<float>() == a.to_vector<float>());
  CHECK(d.transpose(0, 1).to(kCPU).to_vector<float>() == a.transpose(0, 1).contiguous().to_vector<float>());
  const cuda::MemoryStats before = cuda::memory_stats();
  { const Tensor t = empty({1 << 20}, TensorOptions().device(kCuda)); }
  { const Tensor t = empty({1 << 20}, TensorOptions().device(kCuda)); }
  CHECK(cuda::memory_stats().cache_hits >= before.cache_hits + 1);
  CHECK(ops::add(d, d).to(kCPU).to_vector<float>() == ops::add(a, a).to_vector<float>());
}

// A case of its own: compute-sanitizer reports the failed cudaMalloc as an API error, so
// scripts/gpu.sh runs the sanitizers with this one case left out.
TEST_CASE("out of memory: an error with the bytes, and the device still works afterwards") {
  if (!have_gpu()) return;
  Generator gen(1);
  const Tensor a = randn({257, 129}, gen);
  const Tensor d = a.to(kCuda);
  std::string message;
  try {
    const Tensor huge = empty({std::int64_t{1} << 40}, TensorOptions().device(kCuda));  // 4 TiB
  } catch (const Error& e) {
    message = e.what();
  }
  CHECK(message.find("CUDA out of memory: tried to allocate 4398046511104 bytes") != std::string::npos);
  CHECK(ops::add(d, d).to(kCPU).to_vector<float>() == ops::add(a, a).to_vector<float>());
}

// The kernel lab's table, as tests/train and tests/emulator run it: every case's shapes,
// aligned and misaligned, float32 and float64 (an op on bf16 data only, such as
// matmul/bf16, in bf16), then grad mode where the op has a backward.
TEST_CASE("every CUDA kernel variant passes the kernel lab's check and grad modes") {
  if (!have_gpu()) return;
  int runs = 0;
  for (const lab::Case& c : lab::cases()) {
    std::vector<std::string> failures;
    const bool bf16_only = c.call.one_dtype && c.call.dtype == kBFloat16;
    for (DType dtype : bf16_only ? std::vector<DType>{kBFloat16} : std::vector<DType>{kFloat32, kFloat64}) {
      for (const std::string& f : lab::run_shapes(c, lab::LabDevice::CUDA, lab::Mode::Check, dtype, nullptr, &runs))
        failures.push_back(f);
      if (c.has_grad())
        for (const std::string& f : lab::run_shapes(c, lab::LabDevice::CUDA, lab::Mode::Grad, dtype, nullptr, &runs))
          failures.push_back(f);
    }
    INFO(c.name);
    for (const std::string& f : failures) MESSAGE(f);
    CHECK(failures.empty());
  }
  CHECK(runs > 300);
}

TEST_CASE("the GPT's loss and gradients match the CPU, fused and composed") {
  if (!have_gpu()) return;
  for (bool fused : {true, false}) {
    models::GPTConfig c = models::gpt_preset("cpu-tiny");
    c.dropout = 0.0;
    if (fused) kernels::reset_selection();
    else ops::select_composed();  // the registry's composed variants, on both devices
    Generator g1(3), g2(3), data(4);
    models::GPT cpu(c, g1), gpu(c, g2);
    gpu.to(kCuda);
    const Tensor idx = randint(0, c.vocab_size, {4, c.block_size}, data);
    const Tensor tgt = randint(0, c.vocab_size, {4, c.block_size}, data);
    Tensor l1 = cpu.loss(cpu.forward(idx), tgt), l2 = gpu.loss(gpu.forward(idx), tgt);
    l1.backward();
    l2.backward();
    CAPTURE(fused);
    CHECK(l2.item<double>() == doctest::Approx(l1.item<double>()).epsilon(1e-5));
    const auto pc = cpu.named_parameters(), pg = gpu.named_parameters();
    for (std::size_t i = 0; i < pc.size(); ++i) {
      CAPTURE(pc[i].first);
      CHECK(max_abs_diff(pc[i].second.grad(), pg[i].second.grad()) < 1e-4);
    }
  }
  kernels::reset_selection();
}

TEST_CASE("training steps are deterministic: the same seed gives the same bits") {
  if (!have_gpu()) return;
  auto losses = [] {
    models::GPTConfig c = models::gpt_preset("cpu-tiny");
    c.dropout = 0.1;  // dropout masks come from Philox: deterministic too
    Generator init(11), data(12);
    models::GPT model(c, init);
    model.to(kCuda);
    optim::AdamW opt(optim::decay_groups(model.parameters(), optim::AdamWOptions(1e-3)));
    std::vector<double> out;
    for (int step = 0; step < 5; ++step) {
      const Tensor idx = randint(0, c.vocab_size, {8, c.block_size}, data);
      const Tensor tgt = randint(0, c.vocab_size, {8, c.block_size}, data);
      opt.zero_grad();
      Tensor loss = model.loss(model.forward(idx), tgt);
      loss.backward();
      optim::clip_grad_norm_(model.parameters(), 1.0);
      opt.step();
      out.push_back(loss.item<double>());
    }
    return out;
  };
  const std::vector<double> first = losses(), second = losses();
  CHECK(first == second);
}

TEST_CASE("the training step replayed as a CUDA graph gives the plain step's bits") {
  if (!have_gpu()) return;
  // Chapter 17: the whole step (forward, backward, clipping, AdamW) captured at the second
  // step and replayed after, against the same steps run plainly. On the emulator this is
  // tests/train/test_cuda_graph.cpp; here the real capture meets cuBLAS and the driver.
  auto run = [](bool use_graph) {
    models::GPTConfig c = models::gpt_preset("cpu-tiny");
    Generator init(11), data(12);
    models::GPT model(c, init);
    model.to(kCuda);
    optim::AdamW opt(optim::decay_groups(model.parameters(), optim::AdamWOptions(1e-3)));
    cuda::Graph graph;
    Tensor graph_idx, graph_tgt, graph_loss;
    std::vector<double> losses;
    for (int step = 0; step < 6; ++step) {
      opt.set_lr(1e-3 / (step + 1));
      const Tensor idx = randint(0, c.vocab_size, {8, c.block_size}, data);
      const Tensor tgt = randint(0, c.vocab_size, {8, c.block_size}, data);
      if (!use_graph || step == 0) {
        opt.zero_grad();
        Tensor loss = model.loss(model.forward(idx.to(kCuda)), tgt.to(kCuda));
        loss.backward();
        optim::clip_grad_norm(model.parameters(), 1.0);
        opt.step();
        losses.push_back(loss.item<double>());
        continue;
      }
      opt.prepare_graph_step();
      if (!graph.defined()) {
        graph_idx = idx.to(kCuda), graph_tgt = tgt.to(kCuda);
        opt.zero_grad();
        graph = cuda::Graph::capture([&] {
          Tensor loss = model.loss(model.forward(graph_idx), graph_tgt);
          loss.backward();
          optim::clip_grad_norm(model.parameters(), 1.0);
          opt.step();
          graph_loss = loss.detach();
        });
      } else {
        graph_idx.copy_(idx), graph_tgt.copy_(tgt);
      }
      graph.replay();
      losses.push_back(graph_loss.item<double>());
    }
    std::vector<std::vector<float>> params;
    for (const Tensor& p : model.parameters()) params.push_back(p.to(kCPU).to_vector<float>());
    return std::make_pair(losses, params);
  };
  const auto plain = run(false), replayed = run(true);
  CHECK(plain.first == replayed.first);
  CHECK(plain.second == replayed.second);
}

// cuBLASLt's GELU epilogue (kernels/cuda/cublaslt.cu, matmul_epilogue's default on a GPU) must be
// brrr's tanh form: nearly every output the bf16 rounding of gelu_tanh(x) (its tanh may differ from
// the CPU's in a last float32 bit, which can move a rounding), and the kept pre exact.
TEST_CASE("linear_gelu on bf16 tensors on the GPU: cuBLASLt's epilogue applies GELU's tanh form, pre exact") {
  if (!have_gpu()) return;
  const test::GeluForm form = test::linear_gelu_form(kCuda);
  MESSAGE("outputs equal to bf16(gelu_tanh(x)): ", form.tanh_share, ", to bf16(gelu_erf(x)): ", form.erf_share);
  CHECK(form.tanh_share >= 0.99);
  CHECK(form.tanh_share > form.erf_share);
  CHECK(form.pre_exact);
}
