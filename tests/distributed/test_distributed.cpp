// tests/distributed/test_distributed.cpp: data-parallel training over MPI, 2 ranks on the CPU
// (chapter 19). Every case runs `mpirun -np 2 brrr train ...` as a user would and compares
// what the ranks wrote with what one process writes. Skipped (exit 77) where there is no
// mpirun or brrr was built without MPI; scripts/check_required_tests.py makes CI run them.
#include <doctest/doctest.h>

#include <signal.h>

#include <thread>

#include "tests/distributed/distributed_test_util.h"
#include "tests/skip.h"

using namespace brrr;
using namespace brrr::test;

TEST_CASE("2 ranks x batch B train as 1 process with batch B and grad_accum 2 over the same samples") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  // One step without clipping: every parameter but the tied embedding is bit for bit the same.
  // The embedding (transformer.wte, also the output layer) gets two gradients in each backward;
  // one process adds the four of its two micro-steps one after another, ((a0 + b0) + a1) + b1,
  // two ranks add (a0 + b0) + (a1 + b1): float addition is not associative, so it differs in
  // the last bits, and after the first step so does everything that depends on it.
  const std::string one = scratch("one-step-single"), two = scratch("one-step-ranks");
  const Run a = run(cli() + " " + train_args(one, "--max_iters 1 --grad_clip 0 --grad_accum 2"), one);
  REQUIRE_MESSAGE(a.status == 0, a.output);
  const Run b = run(mpirun() + " -np 2 " + cli() + " " + train_args(two, "--max_iters 1 --grad_clip 0"), two);
  REQUIRE_MESSAGE(b.status == 0, b.output);
  CHECK(b.output.find("data parallel: 2 ranks") != std::string::npos);
  REQUIRE(losses(one).size() == 1);
  REQUIRE(losses(two).size() == 1);
  CHECK(losses(one)[0] == losses(two)[0]);  // the same samples, the same bits

  safetensors::File x(ckpt(one, 1)), y(ckpt(two, 1));
  REQUIRE(x.tensors().size() == y.tensors().size());
  int identical = 0;
  for (const auto& info : x.tensors()) {
    CAPTURE(info.name);
    const Tensor tx = x.tensor(info.name), ty = y.tensor(info.name);
    if (info.name.find("wte") != std::string::npos) {
      const double d = max_abs_difference(tx, ty);
      MESSAGE(info.name, ": largest difference ", d);
      CHECK(d < 1e-6);
    } else {
      CHECK(same_bits(tx, ty));
      ++identical;
    }
  }
  CHECK(identical > 10);

  // Six steps with clipping: the losses agree to about float32's precision.
  const std::string one6 = scratch("six-single"), two6 = scratch("six-ranks");
  REQUIRE(run(cli() + " " + train_args(one6, "--grad_accum 2"), one6).status == 0);
  const Run c = run(mpirun() + " -np 2 " + cli() + " " + train_args(two6), two6);
  REQUIRE_MESSAGE(c.status == 0, c.output);
  const std::vector<double> l1 = losses(one6), l2 = losses(two6);
  REQUIRE(l1.size() == 6);
  REQUIRE(l2.size() == 6);
  CHECK(l1[0] == l2[0]);
  double worst = 0;
  for (std::size_t i = 0; i < l1.size(); ++i) worst = std::max(worst, std::abs(l1[i] - l2[i]) / l1[i]);
  MESSAGE("largest relative difference of the losses over 6 steps: ", worst);
  CHECK(worst < 1e-5);
  // Only rank 0 wrote: one log line a step, and the run's share of time in collectives.
  CHECK(data_parallel_event(two6)["ranks"] == 2);
}

TEST_CASE("ZeRO stage 1 gives the unsharded run's bits, with half the optimizer state a rank") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  const std::string plain = scratch("zero0"), sharded = scratch("zero1");
  const Run a = run(mpirun() + " -np 2 " + cli() + " " + train_args(plain), plain);
  REQUIRE_MESSAGE(a.status == 0, a.output);
  const Run b = run(mpirun() + " -np 2 " + cli() + " " + train_args(sharded, "--zero 1"), sharded);
  REQUIRE_MESSAGE(b.status == 0, b.output);
  CHECK(losses(plain) == losses(sharded));
  safetensors::File x(ckpt(plain, 6)), y(ckpt(sharded, 6));
  REQUIRE(x.tensors().size() == y.tensors().size());
  int moments = 0;
  for (const auto& info : x.tensors()) {
    CAPTURE(info.name);
    CHECK(same_bits(x.tensor(info.name), y.tensor(info.name)));  // parameters and AdamW's moments
    moments += info.name.rfind("optimizer.", 0) == 0;
  }
  CHECK(moments > 10);
  const double full = data_parallel_event(plain)["optimizer_state_bytes"].get<double>();
  const double shard = data_parallel_event(sharded)["optimizer_state_bytes"].get<double>();
  MESSAGE("AdamW's moments on rank 0: ", full, " bytes unsharded, ", shard, " with --zero 1");
  CHECK(shard < 0.6 * full);
  CHECK(shard > 0.4 * full);
}

TEST_CASE("a 2-rank run resumes with 2 ranks bit for bit, and its checkpoint samples in one process") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  // Dropout on, so each rank's own dropout stream must be restored; ZeRO on, so the gathered
  // moments must be split again.
  const std::string args = "--dropout 0.1 --zero 1 --checkpoint_interval 3";
  const std::string straight = scratch("resume-straight"), resumed = scratch("resume");
  REQUIRE(run(mpirun() + " -np 2 " + cli() + " " + train_args(straight, args), straight).status == 0);
  REQUIRE(run(mpirun() + " -np 2 " + cli() + " " + train_args(resumed, args), resumed).status == 0);
  // The run "stopped" after step 3: its last checkpoint is gone, and it continues from step 3.
  fs::remove(ckpt(resumed, 6));
  const Run again = run(mpirun() + " -np 2 " + cli() + " " + train_args(resumed, args) + " --resume", resumed);
  REQUIRE_MESSAGE(again.status == 0, again.output);
  CHECK(again.output.find("resumed from " + ckpt(resumed, 3)) != std::string::npos);
  safetensors::File x(ckpt(straight, 6)), y(ckpt(resumed, 6));
  for (const auto& info : x.tensors()) {
    CAPTURE(info.name);
    CHECK(same_bits(x.tensor(info.name), y.tensor(info.name)));
  }
  CHECK(x.metadata().at("rng.data") == y.metadata().at("rng.data"));
  CHECK(x.metadata().at("ranks") == "2");

  const Run sample = run(cli() + " sample --checkpoint " + resumed + " --max_new_tokens 20 --seed 3", resumed);
  CHECK_MESSAGE(sample.status == 0, sample.output);
  CHECK(sample.output.size() >= 20);
}

TEST_CASE("ranks started with different settings or data stop at start-up, naming what differs") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  const std::string out = scratch("mismatch");
  // mpirun's MPMD form: rank 0 and rank 1 get different command lines.
  const Run seeds = run(mpirun() + " -np 1 " + cli() + " " + train_args(out, "--seed 1") + " : -np 1 " + cli() + " " +
                            train_args(out, "--seed 2"),
                        out, 60);
  CHECK(seeds.status != 0);
  CHECK(seeds.status != 124);  // stopped, not hung
  CHECK_MESSAGE(seeds.output.find("different settings: seed (1 on rank 0, 2 on rank 1)") != std::string::npos,
                seeds.output);
  CHECK(!fs::exists(ckpt(out, 6)));

  const std::string other = out + "/other.txt";
  write_file_atomic(other, read_file(small_text()).substr(0, 30000));
  const std::string data_out = scratch("mismatch-data");
  const Run data = run(mpirun() + " -np 1 " + cli() + " " + train_args(data_out) + " : -np 1 " + cli() + " " +
                           train_args(data_out, "--data " + other),
                       data_out, 60);
  CHECK(data.status != 0);
  CHECK(data.status != 124);
  CHECK_MESSAGE(data.output.find("data_fnv1a") != std::string::npos, data.output);
}

TEST_CASE("a rank that throws or dies stops the others within seconds, and no checkpoint is torn") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  for (const std::string kind : {"throw", "kill"}) {
    CAPTURE(kind);
    const std::string out = scratch("fault-" + kind);
    // Step 4 comes after the checkpoint of step 3.
    const Run r = run("env BRRR_FAULT=" + kind + "@1:4 " + mpirun(true) + " -np 2 " + cli() + " " + train_args(out), out, 60);
    MESSAGE(kind, ": stopped after ", r.seconds, " s with status ", r.status);
    CHECK(r.status != 0);
    CHECK(r.status != 124);  // timeout's status: the run hung
    CHECK(r.seconds < 30);
    if (kind == "throw") CHECK_MESSAGE(r.output.find("rank 1 of 2: error: BRRR_FAULT") != std::string::npos, r.output);
    CHECK(!fs::exists(ckpt(out, 6)));
    // What is there is whole: every checkpoint file loads.
    int checkpoints = 0;
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string name = e.path().filename().string();
      CHECK_MESSAGE(name.find(".tmp") == std::string::npos, name);
      if (name.rfind("ckpt-", 0) == 0) {
        safetensors::File f(e.path().string());
        CHECK(f.tensors().size() > 10);
        ++checkpoints;
      }
    }
    CHECK(checkpoints == 1);  // step 3's
  }
}

TEST_CASE("CUDA tensors on the emulator: 2 ranks, with and without ZeRO or overlap, train as 1 process with grad_accum 2") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  // Without NCCL (or on the emulator) a CUDA tensor's gradients go through the host to MPI.
  const std::string steps =
      "--device emulator --max_iters 2 --eval_interval 100 --eval_iters 1 --log_interval 1 --bucket_mb 0.01";
  const std::string one = scratch("emulator-one"), two = scratch("emulator-two"), zero = scratch("emulator-zero");
  const Run a = run(cli() + " " + train_args(one, steps + " --grad_accum 2"), one, 300);
  REQUIRE_MESSAGE(a.status == 0, a.output);
  const Run b = run(mpirun() + " -np 2 " + cli() + " " + train_args(two, steps), two, 300);
  REQUIRE_MESSAGE(b.status == 0, b.output);
  const Run c = run(mpirun() + " -np 2 " + cli() + " " + train_args(zero, steps + " --zero 1"), zero, 300);
  REQUIRE_MESSAGE(c.status == 0, c.output);
  REQUIRE(losses(one).size() == 2);
  CHECK(losses(one)[0] == losses(two)[0]);
  CHECK(std::abs(losses(one)[1] - losses(two)[1]) < 1e-5 * losses(one)[1]);
  CHECK(losses(two) == losses(zero));
  // The buckets summed after the backward instead of during it: the same bits.
  const std::string after = scratch("emulator-after");
  const Run d = run(mpirun() + " -np 2 " + cli() + " " + train_args(after, steps + " --overlap_comm false"), after, 300);
  REQUIRE_MESSAGE(d.status == 0, d.output);
  CHECK(data_parallel_event(two)["buckets_sent_during_backward"].get<int>() > 3);
  CHECK(data_parallel_event(after)["buckets_sent_during_backward"] == 0);
  check_same_checkpoints(ckpt(two, 2), ckpt(after, 2));
}

TEST_CASE("Ctrl-C on one rank stops every rank after the same step, with a checkpoint that resumes bit for bit") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  const std::string args = "--eval_interval 1000 --log_interval 1";
  const std::string out = scratch("sigint");
  const std::string console = out + "/console.txt";
  const std::string command = "timeout 120 " + mpirun() + " -np 2 " + cli() + " " +
                              train_args(out, args + " --max_iters 100000") + " > " + console + " 2>&1";
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Steps in the log (flushed a line at a time) mean that both ranks are in the loop, where
  // Ctrl-C is handled (rank 0 cannot finish step 0 before rank 1 gets there): then SIGINT to
  // one rank (the newest brrr process of this run).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (losses(out).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const std::string find = "pgrep -n -f '^" + cli() + " train .*" + out + " '";
  FILE* pipe = ::popen(find.c_str(), "r");
  REQUIRE(pipe);
  int rank_pid = 0;
  CHECK(std::fscanf(pipe, "%d", &rank_pid) == 1);
  ::pclose(pipe);
  REQUIRE(rank_pid > 0);
  ::kill(rank_pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string printed = read_file(console);
  REQUIRE_MESSAGE(WIFEXITED(status), printed);
  CHECK_MESSAGE(WEXITSTATUS(status) == 130, printed);  // the ranks' status, passed on by mpirun
  int stopped = 0;  // the newest checkpoint's step
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0) stopped = std::max(stopped, std::stoi(name.substr(5, 8)));
  }
  MESSAGE("stopped after ", stopped, " steps");
  REQUIRE(stopped > 0);
  CHECK(losses(out).size() == static_cast<std::size_t>(stopped));  // every step logged once, by rank 0

  // Resumed to 5 steps further, against a run straight there.
  const std::string end = " --max_iters " + std::to_string(stopped + 5);
  const Run again = run(mpirun() + " -np 2 " + cli() + " " + train_args(out, args + end) + " --resume", out);
  REQUIRE_MESSAGE(again.status == 0, again.output);
  const std::string straight = scratch("sigint-straight");
  REQUIRE(run(mpirun() + " -np 2 " + cli() + " " + train_args(straight, args + end), straight).status == 0);
  safetensors::File x(ckpt(straight, stopped + 5)), y(ckpt(out, stopped + 5));
  for (const auto& info : x.tensors()) {
    CAPTURE(info.name);
    CHECK(same_bits(x.tensor(info.name), y.tensor(info.name)));
  }
}

TEST_CASE("overlapping the gradient sums with the backward changes no bit") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  // Buckets of 10 kB: the 1-layer model's gradients make several, and with --overlap_comm each
  // leaves from inside the backward of the step's last micro-batch (grad_accum 2: the first
  // micro-batch's backward only accumulates).
  const std::string args = "--max_iters 3 --grad_accum 2 --bucket_mb 0.01";
  const std::string on = scratch("overlap-on"), off = scratch("overlap-off");
  const Run a = run(mpirun() + " -np 2 " + cli() + " " + train_args(on, args), on);
  REQUIRE_MESSAGE(a.status == 0, a.output);
  const Run b = run(mpirun() + " -np 2 " + cli() + " " + train_args(off, args + " --overlap_comm false"), off);
  REQUIRE_MESSAGE(b.status == 0, b.output);
  const nlohmann::json overlapped = data_parallel_event(on), after = data_parallel_event(off);
  MESSAGE(overlapped.dump());
  CHECK(overlapped["buckets"].get<int>() > 3);
  CHECK(overlapped["buckets_sent_during_backward"] == overlapped["buckets"]);
  CHECK(after["buckets"] == overlapped["buckets"]);
  CHECK(after["buckets_sent_during_backward"] == 0);
  CHECK(losses(on) == losses(off));
  check_same_checkpoints(ckpt(on, 3), ckpt(off, 3));
}

TEST_CASE("one rank forced through the collectives (BRRR_FORCE_COLLECTIVES=1) gives the plain run's bits") {
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  // The check that awaits a GPU (test_distributed_gpu.cpp, NCCL) on the CPU and on the emulator,
  // where the forced path is MPI's: a sum over one rank must change nothing.
  for (const std::string device : {"cpu", "emulator"}) {
    CAPTURE(device);
    const std::string args = "--device " + device + " --max_iters 2 --eval_interval 100 --eval_iters 1 --bucket_mb 0.01";
    const auto [plain, forced] = run_plain_and_forced("force-" + device, args);
    CHECK(data_parallel_event(plain).is_null());  // a plain run never reaches the collectives
    CHECK(data_parallel_event(forced)["buckets_sent_during_backward"].get<int>() > 3);
    CHECK(losses(plain) == losses(forced));
    check_same_checkpoints(ckpt(plain, 2), ckpt(forced, 2));
  }
}
