// tests/models/test_reproducible.cpp: same seed, same bits, for any thread count (chapter 08).
// PyTorch does not promise this on the CPU; brrr does: every reduction is cut into fixed-size
// chunks combined in a fixed order, and the matmul tile grid depends only on the shapes.
#include <doctest/doctest.h>

#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "tests/slow_cpu.h"

using namespace brrr;

namespace {
struct Run {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;
};

Run train(int threads, std::uint64_t seed) {
  const int before = get_num_threads();
  set_num_threads(threads);
  Generator gen(seed);
  models::GPTConfig c = models::gpt_preset("cpu-tiny");
  c.n_layer = 2;
  c.dropout = 0.1;  // dropout draws random numbers too
  models::GPT model(c, gen);
  optim::AdamW opt(optim::decay_groups(model.parameters(), optim::AdamWOptions(1e-3).betas({0.9, 0.95}).weight_decay(0.1)));
  Run run;
  // Under BRRR_SLOW_CPU=1 (qemu, tests/slow_cpu.h: 148 s at 4 steps of 6) 2 steps of 3
  // sequences: still a step whose inputs come from the generator after a step's dropout, and
  // matmuls of 192 rows, which 2 threads share.
  const int steps = test::sized(4, 2);
  const std::int64_t batch = test::sized(6, 3);
  for (int step = 0; step < steps; ++step) {
    Tensor idx = randint(0, c.vocab_size, {batch, c.block_size}, gen);
    Tensor targets = randint(0, c.vocab_size, {batch, c.block_size}, gen);
    Tensor loss = model.loss(model.forward(idx), targets);
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    run.losses.push_back(loss.item<float>());
  }
  for (auto& [name, p] : model.named_parameters()) run.params.push_back(p.to_vector<float>());
  set_num_threads(before);
  return run;
}
}  // namespace

TEST_CASE("GPT training gives bitwise-identical losses and parameters with 1 and 2 threads") {
  const Run one = train(1, 42), two = train(2, 42), again = train(2, 42);
  CHECK(one.losses == two.losses);
  CHECK(two.losses == again.losses);
  REQUIRE(one.params.size() == two.params.size());
  for (std::size_t i = 0; i < one.params.size(); ++i) CHECK(one.params[i] == two.params[i]);
  // and the seed matters
  CHECK(train(2, 43).losses != one.losses);
}
