// tests/train/test_train.cpp: brrr train and brrr sample (chapter 08).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "brrr/brrr.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/generate.h"
#include "brrr/safetensors.h"
#include "tests/slow_cpu.h"
#include "tests/train/train_helpers.h"
#include "train/data.h"
#include "train/trainer.h"

using namespace brrr;
namespace fs = std::filesystem;

namespace {
// A small run: 40 KB of Shakespeare, a 1-layer model, 4 x 16 batches.
std::string scratch(const std::string& name) { return train_test::scratch("test-train", name); }
std::string small_text() { return train_test::small_text("test-train", 40000); }

train::TrainConfig small_config(const std::string& out) {
  train::TrainConfig c = train::TrainConfig::from_preset("cpu-tiny");
  c.data = small_text();
  c.out_dir = out;
  c.n_layer = 1, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.batch_size = 4;
  c.max_iters = 8, c.warmup_iters = 2, c.lr_decay_iters = 8, c.eval_interval = 4, c.eval_iters = 2, c.log_interval = 100;
  c.dropout = 0.1;  // so the dropout generators' state matters for resume
  c.sample_tokens = 0;
  return c;
}

std::vector<std::vector<float>> parameters_of(const std::string& checkpoint) { return train_test::tensors_of(checkpoint); }

// Runs `dtype` training for 8 steps whole, and again as 5 steps then --resume to 8, under
// scratch folders named after `name`; checks that the resumed run's losses and final parameters
// are the uninterrupted run's, bit for bit, and returns the uninterrupted run.
train::TrainResult check_resume_is_bitwise(const std::string& dtype, const std::string& name, double dropout = 0.1) {
  train::TrainConfig full = small_config(scratch(name + "-full"));
  full.dtype = dtype;
  full.dropout = dropout;
  const train::TrainResult whole = train::run_training(full);

  train::TrainConfig first = small_config(scratch(name + "-split"));
  first.dtype = dtype;
  first.dropout = dropout;
  first.max_iters = 5;  // stop after 5 of the 8 steps (lr_decay_iters stays 8, so the schedule is the same)
  const train::TrainResult part1 = train::run_training(first);
  train::TrainConfig second = first;
  second.max_iters = 8;
  second.resume = true;
  const train::TrainResult part2 = train::run_training(second);

  std::vector<double> joined = part1.losses;
  joined.insert(joined.end(), part2.losses.begin(), part2.losses.end());
  CHECK(joined == whole.losses);
  CHECK(parameters_of(part2.last_checkpoint) == parameters_of(whole.last_checkpoint));
  return whole;
}

}  // namespace

TEST_CASE("training config: presets, JSON, unknown keys and wrong types") {
  train::TrainConfig c = train::TrainConfig::from_preset("shakespeare-char");
  CHECK(c.n_embd == 384);
  c.apply_json(R"({"n_layer": 2, "learning_rate": 3e-4, "composed": true})");
  CHECK(c.n_layer == 2);
  CHECK(c.learning_rate == 3e-4);
  CHECK(c.composed);
  CHECK_THROWS_WITH_AS(c.apply_json(R"({"n_layers": 2})"), doctest::Contains("unknown key 'n_layers'"), Error);
  CHECK_THROWS_WITH_AS(c.apply_json(R"({"n_layer": "two"})"), doctest::Contains("'n_layer' has the wrong type"), Error);
  CHECK_THROWS_WITH_AS(c.apply_json("{oops"), doctest::Contains("invalid JSON"), Error);
  CHECK_THROWS_WITH_AS(train::TrainConfig::from_preset("huge"), doctest::Contains("unknown preset 'huge' (presets: cpu-tiny"), Error);
  train::TrainConfig round;
  round.apply_json(c.to_json());
  CHECK(round.to_json() == c.to_json());
}

TEST_CASE("the dataset caches its tokens and draws the same batches from the same seed") {
  train::DataOptions d;
  d.input = small_text();
  d.cache_dir = scratch("data");
  d.verbose = false;
  train::TextDataset a(d);
  CHECK(a.vocab_size() > 30);
  CHECK(a.size(train::Split::Val) == doctest::Approx(0.1 * (a.size(train::Split::Train) + a.size(train::Split::Val))).epsilon(0.01));
  train::TextDataset b(d);  // from the cache
  Generator g1(3), g2(3);
  Tensor x1, y1, x2, y2;
  a.batch(train::Split::Train, 4, 16, g1, x1, y1);
  b.batch(train::Split::Train, 4, 16, g2, x2, y2);
  CHECK(x1.to_vector<std::int64_t>() == x2.to_vector<std::int64_t>());
  // y is x shifted by one: the target of each position is the next token
  CHECK(x1.at<std::int64_t>({0, 1}) == y1.at<std::int64_t>({0, 0}));
  // the tokens decode back to the text
  const std::string text = read_file(small_text());
  CHECK(a.tokenizer().decode(a.tokenizer().encode(text.substr(0, 500))) == text.substr(0, 500));
  d.input = "/nonexistent.txt";
  CHECK_THROWS_WITH_AS(train::TextDataset{d}, doctest::Contains("cannot read the training text '/nonexistent.txt'"), Error);
}

TEST_CASE("a resumed run continues bitwise identically to an uninterrupted one") {
  check_resume_is_bitwise("float32", "resume");
}

TEST_CASE("a bf16 (mixed precision) run resumes bit for bit, and differs from float32 by rounding only") {
  const train::TrainResult whole = check_resume_is_bitwise("bf16", "bf16");
  // The same run in float32: other bits (the matmuls' operands were rounded), the same losses
  // to within the rounding. Checkpoints hold float32 either way.
  const train::TrainResult f32 = train::run_training(small_config(scratch("bf16-f32")));
  REQUIRE(f32.losses.size() == whole.losses.size());
  CHECK(f32.losses != whole.losses);
  for (std::size_t i = 0; i < f32.losses.size(); ++i) CHECK(std::abs(f32.losses[i] - whole.losses[i]) < 0.02);
  CHECK(safetensors::File(whole.last_checkpoint).info("transformer.wte.weight").dtype == kFloat32);
  train::TrainConfig bad = small_config(scratch("bf16-bad"));
  bad.dtype = "fp16";
  CHECK_THROWS_WITH_AS(train::run_training(bad), doctest::Contains("dtype must be float32 or bf16, got 'fp16'"), Error);
}

// Without dropout, and with causal_attention=flash, attention runs through the fused kernels,
// which under bf16 are attention_forward:bf16 / attention_backward:bf16 (chapter 18): the run
// still resumes bit for bit, and a run on 1 thread gives the bits of a run on 2.
TEST_CASE("a bf16 run through the fused attention kernels resumes bit for bit and gives the same bits on 1 and 2 threads") {
  struct Reset {
    int threads = get_num_threads();
    ~Reset() {
      kernels::reset_selection();
      set_num_threads(threads);
    }
  } reset;
  ops::register_op_variants();  // the framework's op variants (causal_attention) are in the registry
  kernels::select("causal_attention", "flash", DeviceType::CPU);
  const train::TrainResult whole = check_resume_is_bitwise("bf16", "bf16-flash", 0.0);
  train::TrainConfig one = small_config(scratch("bf16-flash-1-thread"));
  one.dtype = "bf16", one.dropout = 0.0, one.threads = 1;
  train::TrainConfig two = small_config(scratch("bf16-flash-2-threads"));
  two.dtype = "bf16", two.dropout = 0.0, two.threads = 2;
  const train::TrainResult a = train::run_training(one), b = train::run_training(two);
  CHECK(a.losses == b.losses);
  CHECK(a.losses == whole.losses);
  CHECK(parameters_of(a.last_checkpoint) == parameters_of(b.last_checkpoint));
}

TEST_CASE("a NaN loss stops training, naming the step and the last good checkpoint") {
  train::TrainConfig c = small_config(scratch("nan"));
  c.learning_rate = 1e30, c.min_lr = 1e30, c.grad_clip = 0.0, c.max_iters = 50, c.checkpoint_interval = 1;
  c.warmup_iters = 0;
  CHECK_THROWS_WITH_AS(train::run_training(c), doctest::Contains("at step"), Error);
  CHECK_THROWS_WITH_AS(train::run_training(c), doctest::Contains("The last good checkpoint is"), Error);
}

TEST_CASE("the KV cache gives the same logits as recomputing the whole context") {
  Generator g(4);
  models::GPTConfig mc = models::gpt_preset("cpu-tiny");
  mc.n_layer = 2, mc.block_size = 24;
  models::GPT model(mc, g);
  model.eval();
  Tensor idx = randint(0, mc.vocab_size, {1, 20}, g);
  NoGradGuard no_grad;
  const Tensor full = model.forward(idx);
  models::KVCache cache;
  Tensor first = model.forward_cached(idx.narrow(1, 0, 13), cache);  // a prompt, then one token at a time
  std::vector<Tensor> parts = {first};
  for (int t = 13; t < 20; ++t) parts.push_back(model.forward_cached(idx.narrow(1, t, 1), cache));
  const Tensor incremental = ops::cat(parts, 1);
  CHECK(ops::max(ops::sub(full, incremental)).item() < 1e-4);
  CHECK(ops::max(ops::sub(incremental, full)).item() < 1e-4);
  CHECK(cache.length() == 20);
  CHECK_THROWS_WITH_AS(model.forward_cached(idx.narrow(1, 0, 5), cache), doctest::Contains("exceed block_size 24"), Error);
}

TEST_CASE("sampling: temperature, top-k and top-p, seeded") {
  std::vector<float> logits = {0.0f, 5.0f, 4.9f, -3.0f};
  models::GenerateOptions o;
  o.top_k = 1;
  Generator g(1);
  for (int i = 0; i < 20; ++i) CHECK(models::sample_token(logits, o, g) == 1);  // top-1 is greedy
  o.top_k = 0, o.top_p = 0.6;
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 200; ++i) seen.insert(models::sample_token(logits, o, g));
  CHECK(seen == std::set<std::uint32_t>{1, 2});  // the nucleus holds the two close tokens
  o.top_p = 1.0, o.temperature = 100.0;
  seen.clear();
  for (int i = 0; i < 400; ++i) seen.insert(models::sample_token(logits, o, g));
  CHECK(seen.size() == 4);  // a hot temperature reaches every token
  o.temperature = 0.0;  // greedy: the largest logit, whatever top_k and top_p say
  for (int i = 0; i < 20; ++i) CHECK(models::sample_token(logits, o, g) == 1);
  o.temperature = -1.0;
  CHECK_THROWS_WITH_AS(models::sample_token(logits, o, g), doctest::Contains("temperature must be 0 (greedy) or positive"), Error);
  o.temperature = 100.0;
  // generation with and without the cache agrees for the same seed
  Generator mg(2);
  models::GPTConfig mc = models::gpt_preset("cpu-tiny");
  mc.n_layer = 1, mc.block_size = 16;
  models::GPT model(mc, mg);
  models::GenerateOptions go;
  go.max_new_tokens = 40;  // longer than block_size: exercises the cache refill
  go.top_k = 1;
  const auto with = models::generate(model, {1, 2, 3}, go);
  go.kv_cache = false;  // one context-window rule for both (generate.h): the same tokens throughout
  const auto without = models::generate(model, {1, 2, 3}, go);
  CHECK(with == without);
  CHECK(with.size() == 40);
}

// The README's promise: interrupt a run with Ctrl-C, continue it with --resume, and it ends
// exactly where a run never interrupted ends. A child `brrr train` gets SIGINT after a random
// step (printed, so a failure can be replayed with BRRR_SIGINT_STEP=k), resumes, and its final
// checkpoint is compared tensor by tensor, bit for bit, with the uninterrupted run's: the
// parameters, AdamW's moments, the data and dropout generators.
namespace {
// 60 steps: room for the few steps that run between the signal and the stop. Under
// BRRR_SLOW_CPU=1 (qemu, tests/slow_cpu.h: 231 s at 60) 24, with the signal after one of the
// first 8: a step there takes long enough that fewer run before the stop.
int sigint_steps() { return test::sized(60, 24); }

std::string train_args(const std::string& out) {
  return "train --data=" + small_text() + " --out_dir=" + out +
         " --n_layer=2 --n_embd=48 --n_head=2 --block_size=32 --batch_size=8 --dropout=0.1 --max_iters=" +
         std::to_string(sigint_steps()) + " --warmup_iters=5 --lr_decay_iters=" + std::to_string(sigint_steps()) +
         " --eval_interval=15 --eval_iters=2 --log_interval=1 --sample_tokens=0";
}

std::string checkpoint_name(std::int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "/ckpt-%08lld.safetensors", static_cast<long long>(step));
  return name;
}

int steps_logged(const std::string& out) {
  std::ifstream log(out + "/log.jsonl");
  std::string line;
  int steps = 0;
  while (std::getline(log, line)) steps += line.find("\"event\":\"step\"") != std::string::npos;
  return steps;
}
}  // namespace

TEST_CASE("Ctrl-C at a random step, then --resume, ends bit for bit where an uninterrupted run ends") {
  int after = 0;
  if (const char* forced = std::getenv("BRRR_SIGINT_STEP")) {
    after = std::atoi(forced);
  } else {
    std::random_device device;
    after = 1 + static_cast<int>(device() % (sigint_steps() / 3));
  }
  MESSAGE("SIGINT after step ", after, " of ", sigint_steps(), " (replay: BRRR_SIGINT_STEP=", after, ")");

  const std::string straight = scratch("sigint-straight"), out = scratch("sigint");
  REQUIRE(std::system((std::string(BRRR_CLI) + " " + train_args(straight) + " > " + straight + "/stdout.txt 2>&1").c_str()) == 0);

  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!std::freopen((out + "/stdout.txt").c_str(), "w", stdout)) _exit(126);
    execl("/bin/sh", "sh", "-c", ("exec " + std::string(BRRR_CLI) + " " + train_args(out)).c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Poll the log, then interrupt: the run stops after the step it is in.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (steps_logged(out) < after && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE_MESSAGE(WEXITSTATUS(status) == 130, "the run was not interrupted (exit ", WEXITSTATUS(status), ")");
  const std::string printed = read_file(out + "/stdout.txt");
  CHECK(printed.find("interrupted: saved") != std::string::npos);
  const int stopped = steps_logged(out);
  MESSAGE("interrupted after ", stopped, " steps");
  REQUIRE(stopped >= after);
  REQUIRE(stopped < sigint_steps());
  CHECK(fs::exists(out + checkpoint_name(stopped)));

  // --resume with the same arguments: it picks up the saved step and runs to the end.
  REQUIRE(std::system((std::string(BRRR_CLI) + " " + train_args(out) + " --resume > " + out + "/resume.txt 2>&1").c_str()) == 0);
  CHECK(read_file(out + "/resume.txt").find("resumed from " + out + checkpoint_name(stopped)) != std::string::npos);
  CHECK(steps_logged(out) == sigint_steps());

  safetensors::File a(straight + checkpoint_name(sigint_steps())), b(out + checkpoint_name(sigint_steps()));
  REQUIRE(a.tensors().size() == b.tensors().size());
  int parameters = 0;
  for (std::size_t i = 0; i < a.tensors().size(); ++i) {
    const safetensors::TensorInfo &x = a.tensors()[i], &y = b.tensors()[i];
    CAPTURE(x.name);
    REQUIRE(x.name == y.name);
    REQUIRE(x.dtype == y.dtype);
    REQUIRE(x.shape == y.shape);
    const Tensor tx = a.tensor(x.name), ty = b.tensor(y.name);
    const std::size_t bytes = static_cast<std::size_t>(tx.numel()) * dtype_size(tx.dtype());
    CHECK(std::memcmp(tx.raw_data(), ty.raw_data(), bytes) == 0);
    parameters += x.name.find("transformer.") != std::string::npos;
  }
  CHECK(parameters > 10);
}

TEST_CASE("a run can resume from a checkpoint written before the first step") {
  train::TrainConfig c = small_config(scratch("step0"));
  c.max_iters = 0;
  const train::TrainResult none = train::run_training(c);
  CHECK(none.steps_done == 0);
  c.max_iters = 2;
  c.resume = true;
  const train::TrainResult two = train::run_training(c);
  CHECK(two.steps_done == 2);
  CHECK(two.losses.size() == 2);
}
