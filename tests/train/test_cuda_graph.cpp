// tests/train/test_cuda_graph.cpp: CUDA graphs (chapter 17): capture records without running,
// each replay runs the work again on the same tensors, what would break a graph is refused in
// the capture, the graph's memory pool keeps its blocks from other tensors, AdamW in a graph
// reads its per-step numbers from memory, and a training run that replays its whole step as a
// graph gives the plain run's losses and weights bit for bit.
// On the SIMT emulator, whose runtime records and replays as a GPU's does (and refuses the
// same things with the same messages), so CI holds the GPU's graphs to it without a GPU.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/safetensors.h"
#include "tests/slow_cpu.h"
#include "tests/train/train_helpers.h"
#include "train/trainer.h"

using namespace brrr;
namespace fs = std::filesystem;

namespace {
const TensorOptions kOnDevice = TensorOptions().device(Device::cuda());

std::vector<float> host(const Tensor& t) { return t.to(kCPU).to_vector<float>(); }

std::string scratch(const std::string& name) { return train_test::scratch("test-graph", name); }
std::string small_text() { return train_test::small_text("test-graph", 20000); }

using train_test::tensors_of;

// 7 steps; under BRRR_SLOW_CPU=1 (qemu, tests/slow_cpu.h, where the two runs of 7 took 232 s)
// 5: still a capture, replays on both sides of the evaluation at step 4, and 3 steps after the
// first two, whose blocks are counted.
int tiny_steps() { return test::sized(7, 5); }

train::TrainConfig tiny(const std::string& out_dir) {
  train::TrainConfig c = train::TrainConfig::from_preset("cpu-tiny");
  c.data = small_text();
  c.out_dir = out_dir;
  c.device = "emulator";
  c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.batch_size = 2;
  c.max_iters = c.lr_decay_iters = tiny_steps();
  c.warmup_iters = 2, c.eval_interval = 4, c.eval_iters = 1;
  c.log_interval = 2, c.grad_clip = 0.5, c.sample_tokens = 0;
  return c;
}
}  // namespace

TEST_CASE("a captured graph runs nothing until it is replayed, and each replay runs all of it again") {
  cuda::use_emulator();
  Tensor counter = zeros({5}, kOnDevice);
  Tensor doubled;
  const cuda::Graph graph = cuda::Graph::capture([&] {
    counter.add_(ones({5}, kOnDevice));        // a tensor made inside the capture, and a kernel on it
    doubled = ops::mul(counter, 2.0);          // a result the graph makes: read it after a replay
  });
  CHECK(graph.nodes() >= 3);                    // the fill of ones, the add, the multiply
  CHECK(host(counter) == std::vector<float>(5, 0.0f));  // captured, not run
  graph.replay();
  CHECK(host(counter) == std::vector<float>(5, 1.0f));
  CHECK(host(doubled) == std::vector<float>(5, 2.0f));
  // The inputs of a replay are what the graph's tensors hold then: change them between replays.
  counter.copy_(full({5}, 10.0));
  graph.replay();
  graph.replay();
  CHECK(host(counter) == std::vector<float>(5, 12.0f));
  CHECK(host(doubled) == std::vector<float>(5, 24.0f));
  CHECK_THROWS_WITH_AS(cuda::Graph().replay(), doctest::Contains("this graph is empty"), Error);
}

TEST_CASE("inside a capture, whatever would make the host wait or read host memory is refused") {
  cuda::use_emulator();
  const Tensor x = ones({4}, kOnDevice);
  const char* refused = "inside a CUDA graph capture";
  CHECK_THROWS_WITH_AS(cuda::Graph::capture([&] { (void)ops::sum(x).item<double>(); }), doctest::Contains(refused), Error);
  CHECK_THROWS_WITH_AS(cuda::Graph::capture([&] { (void)full({4}, 2.0).to(Device::cuda()); }),
                       doctest::Contains("a copy from the host to the device inside a CUDA graph capture"), Error);
  CHECK_THROWS_WITH_AS(cuda::Graph::capture([] { cuda::synchronize(); }), doctest::Contains(refused), Error);
  Generator gen(1);
  CHECK_THROWS_WITH_AS(cuda::Graph::capture([&] { (void)ops::dropout(x, 0.5, gen, true); }),
                       doctest::Contains("dropout inside a CUDA graph capture"), Error);
  CHECK_THROWS_WITH_AS(cuda::Graph::capture([&] { (void)randn({4}, gen, kOnDevice); }), doctest::Contains(refused),
                       Error);
  CHECK_FALSE(cuda::capturing());  // each failed capture was ended
  // and the next one works
  Tensor y = zeros({4}, kOnDevice);
  const cuda::Graph graph = cuda::Graph::capture([&] { y.add_(x); });
  graph.replay();
  CHECK(host(y) == std::vector<float>(4, 1.0f));
  CHECK_THROWS_WITH_AS(cuda::Graph::capture([&] { (void)cuda::Graph::capture([] {}); }),
                       doctest::Contains("already"), Error);
}

TEST_CASE("a bad index from before a capture is reported when the capture starts, and leaves no pool behind") {
  cuda::use_emulator();
  const Tensor weight = ones({5, 3}, kOnDevice);
  const Tensor idx = from_vector(std::vector<std::int32_t>{0, 9}, {2}, kInt32).to(Device::cuda());
  (void)ops::embedding(weight, idx);  // checked on the device, reported at the next read back
  CHECK_THROWS_WITH_AS(cuda::Graph::capture([] {}), doctest::Contains("index 9 at position 1"), Error);
  CHECK_FALSE(cuda::capturing());
  { const Tensor after = zeros({100}, kOnDevice); }  // made and freed outside any graph
  CHECK(cuda::graph_pool_free_bytes() == 0);
}

TEST_CASE("a graph's memory pool: its blocks go to no other tensor while the graph lives") {
  cuda::use_emulator();
  cuda::empty_cache();
  const Tensor x = full({1000}, 3.0, kOnDevice);
  Tensor out;
  const void* temporary = nullptr;
  std::optional<cuda::Graph> graph = cuda::Graph::capture([&] {
    const Tensor t = ops::mul(x, 2.0);  // freed inside the capture: the replay still writes it
    temporary = t.raw_data();
    out = ops::add(t, 1.0);
  });
  CHECK(cuda::graph_pool_free_bytes() > 0);
  for (int i = 0; i < 4; ++i) {  // tensors of the same size made outside never get that block
    const Tensor other = zeros({1000}, kOnDevice);
    CHECK(other.raw_data() != temporary);
  }
  graph->replay();
  CHECK(host(out) == std::vector<float>(1000, 7.0f));
  graph.reset();  // the pool joins the cache: the block serves tensors made outside now
  CHECK(cuda::graph_pool_free_bytes() == 0);
  bool reused = false;
  std::vector<Tensor> keep;
  for (int i = 0; i < 4 && !reused; ++i) {
    keep.push_back(zeros({1000}, kOnDevice));
    reused = keep.back().raw_data() == temporary;
  }
  CHECK(reused);
}

TEST_CASE("an index checked on the device inside a graph is reported at the read back after the replay") {
  cuda::use_emulator();
  const Tensor weight = ones({5, 3}, kOnDevice);
  Tensor idx = from_vector(std::vector<std::int32_t>{0, 1, 2, 3}, {4}, kInt32).to(Device::cuda());
  Tensor rows;
  const cuda::Graph graph = cuda::Graph::capture([&] { rows = ops::embedding(weight, idx); });
  graph.replay();
  CHECK(host(rows) == std::vector<float>(12, 1.0f));
  idx.copy_(from_vector(std::vector<std::int32_t>{0, 1, 9, 3}, {4}, kInt32));
  graph.replay();
  CHECK_THROWS_WITH_AS((void)rows.to(kCPU), doctest::Contains("index 9 at position 2 is out of range for 5"), Error);
  idx.copy_(from_vector(std::vector<std::int32_t>{4, 4, 4, 4}, {4}, kInt32));
  graph.replay();  // each replay starts from a clean table
  CHECK(host(rows) == std::vector<float>(12, 1.0f));
}

TEST_CASE("AdamW in a graph: its learning rate and step count come through memory, and the bits are step()'s") {
  cuda::use_emulator();
  // Two groups (weight decay 0.1 and 0), a learning rate that changes every step; step() and
  // step_with_clipping (the trainer's, one launch for the norm and the update), whose norm of
  // about 15 is clipped to 0.5.
  auto make = [](std::vector<Tensor>& params) {
    Generator gen(7);
    params = {randn({37, 5}, gen).to(Device::cuda()), randn({37}, gen).to(Device::cuda())};
    for (Tensor& p : params) p.requires_grad_(true);
    return optim::AdamW({{{params[0]}, optim::AdamWOptions(1e-2).weight_decay(0.1)},
                         {{params[1]}, optim::AdamWOptions(1e-2).weight_decay(0.0)}});
  };
  auto set_grads = [](std::vector<Tensor>& params, int step) {  // in place: the graph keeps the tensors
    for (std::size_t i = 0; i < params.size(); ++i) {
      Generator gen(100 + static_cast<std::uint64_t>(step) * 10 + i);
      if (!params[i].grad().defined()) params[i].set_grad(zeros_like(params[i]));
      Tensor g = params[i].grad();
      g.copy_(randn(params[i].shape(), gen));
    }
  };
  for (const bool clipped : {false, true}) {
    CAPTURE(clipped);
    std::vector<Tensor> plain_params, graph_params;
    optim::AdamW plain = make(plain_params), replayed = make(graph_params);
    Tensor plain_norm, graph_norm;
    const auto update = [&](optim::AdamW& opt, Tensor& norm) {
      if (clipped) norm = opt.step_with_clipping(0.5);
      else opt.step();
    };
    cuda::Graph graph;
    for (int step = 0; step < 5; ++step) {
      const double lr = 1e-2 / (step + 1);
      plain.set_lr(lr), replayed.set_lr(lr);
      set_grads(plain_params, step), set_grads(graph_params, step);
      update(plain, plain_norm);
      if (step == 0) {
        // Makes the moments (and the clipped kernels' workspace). The capture frees this norm
        // (pool 0's), which a later step's plain norm takes: the replays leave it alone.
        update(replayed, graph_norm);
        continue;
      }
      replayed.prepare_graph_step();
      if (!graph.defined()) graph = cuda::Graph::capture([&] { update(replayed, graph_norm); });
      graph.replay();
      if (clipped) {
        CHECK(host(graph_norm) == host(plain_norm));
        CHECK(host(plain_norm)[0] > 5.0f);  // so the update was clipped
      }
    }
    CHECK(replayed.step_count() == 5);
    for (std::size_t i = 0; i < plain_params.size(); ++i) CHECK(host(graph_params[i]) == host(plain_params[i]));
    const std::vector<Tensor> a = plain.state(), b = replayed.state();
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(host(a[i]) == host(b[i]));
    // Without its numbers in memory, or inside the capture, it says what to do.
    std::vector<Tensor> fresh_params;
    optim::AdamW fresh = make(fresh_params);
    set_grads(fresh_params, 0);
    Tensor unused;
    CHECK_THROWS_WITH_AS(cuda::Graph::capture([&] { update(fresh, unused); }),
                         doctest::Contains("take one step outside the graph"), Error);
    CHECK_THROWS_WITH_AS(cuda::Graph::capture([&] { replayed.prepare_graph_step(); }),
                         doctest::Contains("not inside the capture"), Error);
  }
}

TEST_CASE("brrr train on a CUDA device replays the step as a graph by default: the plain steps' losses and weights bit for bit, no block allocated") {
  train::TrainConfig plain = tiny(scratch("plain"));
  train::TrainConfig graph = tiny(scratch("graph"));  // cuda_graph, the default
  plain.cuda_graph = false;
  const train::TrainResult a = train::run_training(plain);
  const train::TrainResult b = train::run_training(graph);
  const int later = tiny_steps() - 2;  // the steps after the first two (the capture's)
  REQUIRE(b.losses.size() == static_cast<std::size_t>(tiny_steps()));
  CHECK(a.losses == b.losses);
  CHECK(a.last_val_loss == b.last_val_loss);
  CHECK(b.step_waits == 0);  // replays, their inputs' copies and the loss's clone never wait for the device
  // Steps 3 to the last: no device allocation; of the allocator's cached blocks, the replays take
  // the loss's and the norm's copies alone (2 a step), the plain steps one per activation.
  CHECK(b.later_step_device_allocations == 0);
  CHECK(b.later_step_blocks == 2u * later);
  CHECK(a.later_step_blocks > 20u * later);
  CHECK(tensors_of(a.last_checkpoint) == tensors_of(b.last_checkpoint));  // weights, moments, generators
  // The clipping inside the graph was at work: the logged norms (the graph's) exceed 0.5.
  std::ifstream log(graph.out_dir + "/log.jsonl");
  int clipped = 0;
  for (std::string line; std::getline(log, line);) {
    const auto event = nlohmann::json::parse(line);
    if (event["event"] == "step" && event["step"].get<int>() > 0 && event["grad_norm"].get<double>() > 0.5) ++clipped;
  }
  CHECK(clipped >= 3);
}

TEST_CASE("cuda_graph: a run a graph cannot be (dropout, grad_accum, ranks, profiler) takes plain steps, and says why") {
  train::TrainConfig c = tiny(scratch("fallback"));
  CHECK(train::graph_refusal(c, 1).empty());
  CHECK(train::graph_refusal(c, 2) == "2 ranks: the graph is one process's");
  c.grad_accum = 2;
  CHECK(train::graph_refusal(c, 1) == "grad_accum 2: the graph holds one micro-step");
  c.grad_accum = 1, c.profile = true;
  CHECK(train::graph_refusal(c, 1) == "the profiler times each launch, and a replay launches none");
  c.profile = false, c.dropout = 0.1;
  CHECK(train::graph_refusal(c, 1) == "dropout 0.1: a graph would replay the masks' random offsets, the same mask every step");
  // With dropout the run trains, on plain steps (the third allocates as plain steps do).
  c.max_iters = 3, c.eval_interval = 3, c.lr_decay_iters = 3;
  const train::TrainResult r = train::run_training(c);
  CHECK(r.steps_done == 3);
  CHECK(r.later_step_blocks > 0);
}

TEST_CASE("tf32: float32 matmuls stay full float32 unless a run asks (--tf32 true), and the config keeps the choice") {
  train::TrainConfig c = tiny(scratch("tf32"));
  c.max_iters = c.lr_decay_iters = 1;
  c.eval_interval = 1;
  CHECK_FALSE(c.tf32);  // the default, as PyTorch's for matmuls
  cuda::set_allow_tf32(true);  // whatever was set before, a run without the flag turns TF32 off
  train::run_training(c);
  CHECK_FALSE(cuda::allow_tf32());
  c.tf32 = true;
  c.out_dir = scratch("tf32-on");
  train::run_training(c);
  CHECK(cuda::allow_tf32());
  train::TrainConfig read = train::TrainConfig::from_preset("cpu-tiny");
  read.apply_json(c.to_json());
  CHECK(read.tf32);
  cuda::set_allow_tf32(false);
}
