// tests/train/test_device_waits.cpp: a training step on a CUDA device does not make the host
// wait for the device (no read back, no synchronisation) unless it logs, evaluates or saves.
// Chapter 17 (putting it together; the step as a CUDA graph needs it), with the data of
// chapter 08. Run on the SIMT emulator, whose runtime counts the same waits a GPU's does
// (kernels/cuda/runtime.h), so CI holds the GPU's step to it without a GPU.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "brrr/tokenizer/token_file.h"
#include "tests/slow_cpu.h"
#include "tests/train/train_helpers.h"
#include "train/data.h"
#include "train/trainer.h"

using namespace brrr;
namespace fs = std::filesystem;

namespace {
std::string scratch(const std::string& name) { return train_test::scratch("test-waits", name); }
std::string small_text() { return train_test::small_text("test-waits", 20000); }
}  // namespace

TEST_CASE("the waits are counted: a loss read back is a device-to-host copy, synchronize() a synchronisation") {
  cuda::use_emulator();
  const Tensor x = ones({4}, TensorOptions().device(Device::cuda()));
  const cuda::Waits before = cuda::waits();
  const Tensor y = ops::sum(ops::mul(x, x));  // queued work: no wait
  CHECK(cuda::waits().total() == before.total());
  CHECK(y.item<double>() == 4.0);  // the host needs the value: it waits
  CHECK(cuda::waits().device_to_host_copies == before.device_to_host_copies + 1);
  cuda::synchronize();
  CHECK(cuda::waits().synchronizations == before.synchronizations + 1);
  // A batch of token ids goes to the device without a wait (it is staged), a big copy waits.
  const Tensor ids = from_vector(std::vector<std::int32_t>(1024, 3), {1024}, kInt32);
  const cuda::Waits staged = cuda::waits();
  (void)ids.to(Device::cuda());
  CHECK(cuda::waits().total() == staged.total());
  (void)zeros({2 << 20}).to(Device::cuda());  // 8 MiB: more than a staging buffer holds
  CHECK(cuda::waits().synchronizations == staged.synchronizations + 1);
}

TEST_CASE("training steps on a CUDA device never wait for it, only logging, evaluation and saving do") {
  train::TrainConfig c = train::TrainConfig::from_preset("cpu-tiny");
  c.data = small_text();
  c.out_dir = scratch("steps");
  c.device = "emulator";
  c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.batch_size = 2;
  // 9 steps; under BRRR_SLOW_CPU=1 (qemu, tests/slow_cpu.h, where 9 took 273 s) 5: still steps
  // that log (0, 3), evaluate first (0, 4), save (3) and do none of these (1, 2).
  const int steps = test::sized(9, 5);
  c.max_iters = c.lr_decay_iters = steps;
  c.warmup_iters = 2, c.eval_interval = 4, c.eval_iters = 1;
  c.log_interval = 3, c.grad_accum = 2, c.grad_clip = 1.0, c.sample_tokens = 0;
  const train::TrainResult r = train::run_training(c);
  CHECK(r.steps_done == steps);
  CHECK(r.losses.size() == static_cast<std::size_t>(steps));  // every step's loss still reaches the log, read in batches
  CHECK(r.step_waits == 0);
  // The waits that do happen (reading the losses, evaluating, saving) were counted: the
  // counter is not simply stuck at zero.
  CHECK(cuda::waits().device_to_host_copies > 0);
}

TEST_CASE("a bad device index is found on the device, without a wait, and reported at the next read back") {
  cuda::use_emulator();
  const Tensor weight = ones({5, 3}, TensorOptions().device(Device::cuda()));
  const Tensor idx = from_vector(std::vector<std::int32_t>{0, 4, 7, 9}, {4}, kInt32).to(Device::cuda());
  const cuda::Waits before = cuda::waits();
  const Tensor out = ops::embedding(weight, idx);  // no throw yet, and no wait
  CHECK(cuda::waits().total() == before.total());
  CHECK_THROWS_WITH_AS(out.to(kCPU), doctest::Contains("embedding: index 7 at position 2 is out of range for 5 entries"),
                       Error);
  CHECK_NOTHROW(out.to(kCPU));  // reported once
  // The targets of the GPT's loss likewise.
  const Tensor logits = zeros({2, 4}, TensorOptions().device(Device::cuda())).requires_grad_();
  const Tensor targets = from_vector(std::vector<std::int32_t>{1, 4}, {2}, kInt32).to(Device::cuda());
  const Tensor loss = ops::cross_entropy_fused(logits, targets, ops::kNoIgnoreIndex);
  CHECK_THROWS_WITH_AS(loss.item<double>(),
                       doctest::Contains("cross_entropy_fused: index 4 at position 1 is out of range for 4 entries"),
                       Error);
}

TEST_CASE("with BRRR_DEVICE_CHECKS=1 device indices are checked at once, naming the bad one") {
  ::setenv("BRRR_DEVICE_CHECKS", "1", 1);  // read at each check
  struct Unset {  // the tests after this one, in the same process, check on the device again
    ~Unset() { ::unsetenv("BRRR_DEVICE_CHECKS"); }
  } unset;
  cuda::use_emulator();
  const Tensor weight = ones({5, 3}, TensorOptions().device(Device::cuda()));
  const Tensor idx = from_vector(std::vector<std::int32_t>{0, 4, 7}, {3}, kInt32).to(Device::cuda());
  CHECK_THROWS_WITH_AS(ops::embedding(weight, idx),
                       doctest::Contains("embedding: index 7 at position 2 is out of range for 5 entries"), Error);
}

TEST_CASE("the data loader checks every token id against the vocabulary where it makes them") {
  const std::string dir = scratch("bad-ids");
  train::DataOptions d;
  d.input = small_text();
  d.cache_dir = dir;
  d.verbose = false;
  std::uint64_t vocab = 0;
  {
    train::TextDataset ok(d);  // writes the cache: the tokenizer and the token file
    vocab = static_cast<std::uint64_t>(ok.vocab_size());
  }
  std::string tokens;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tokens") tokens = e.path().string();
  REQUIRE(!tokens.empty());
  const std::uint32_t bad[] = {1, 2, static_cast<std::uint32_t>(vocab)};  // one past the vocabulary
  tokenizer::write_token_file(tokens, bad, vocab + 1, 2);  // a header that disagrees with the tokenizer
  CHECK_THROWS_WITH_AS(train::TextDataset{d}, doctest::Contains(": written for a vocabulary of"), Error);
  // A header that agrees with the tokenizer over an id that does not (write_token_file itself
  // refuses such a file, so the header's vocab_size, bytes 24-31, is patched in place).
  tokenizer::write_token_file(tokens, bad, vocab + 1, 2);
  {
    std::fstream f(tokens, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(24);
    f.write(reinterpret_cast<const char*>(&vocab), sizeof vocab);
  }
  const std::string expected = "token " + std::to_string(vocab) + " at position 2 is out of range";
  CHECK_THROWS_WITH_AS(train::TextDataset{d}, doctest::Contains(expected.c_str()), Error);
}
