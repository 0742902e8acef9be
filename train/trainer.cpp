// train/trainer.cpp: the training loop: data, model and optimizer on the chosen device,
// evaluation, gradient accumulation and clipping, the schedule, Ctrl-C, and resume.
// Chapter 08 (training). Read before: trainer.h. The loop calls into checkpoint.cpp (saving
// and resuming), report.cpp (what it prints and draws) and config.cpp (the settings).
#include "train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "brrr/profiler.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/report.h"

namespace brrr::train {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }
}  // namespace

// ---------------------------------------------------------------------------------------------
// the loop

// cpu, cuda (a GPU, or an error saying there is none), emulator (the CUDA kernels on the CPU's
// SIMT emulator: slow, for checking), auto (the GPU if there is one, else the CPU, saying so).
Device resolve_device(const std::string& name) {
  if (name == "cpu") return kCPU;
  if (name == "emulator") {
    cuda::use_emulator();
    std::printf("device: cuda:0 on the SIMT emulator (the CUDA kernels run on the CPU, slowly)\n");
    return Device::cuda();
  }
  if (name == "auto" && !cuda::gpu_available()) {
    std::printf("device: auto: no CUDA GPU found; training on the CPU\n");
    return kCPU;
  }
  BRRR_CHECK(cuda::is_available(), "--device cuda: no CUDA GPU is available here",
             cuda::gpu_available() ? "" : " (no GPU or no driver); use --device cpu, auto or emulator");
  std::printf("device: cuda:0 (%s)\n", cuda::device_name().c_str());
  return Device::cuda();
}

TrainResult run_training(TrainConfig c) {
  c.validate();
  if (c.threads > 0) set_num_threads(c.threads);
  const Device device = resolve_device(c.device);
  if (c.data.empty()) {
    c.data = std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt";
    BRRR_CHECK(fs::exists(c.data), "no --data given and the default corpus ", c.data,
               " is not there (put ../shared beside the checkout or pass --data FILE)");
  }
  if (c.resume) {  // before the data is read or anything is written
    BRRR_CHECK(fs::is_directory(c.out_dir), "--resume: no folder '", c.out_dir,
               "' (resume continues the run whose --out_dir that was)");
    BRRR_CHECK(!list_checkpoints(c.out_dir).empty(), "--resume: no checkpoint (ckpt-*.safetensors) in '",
               c.out_dir, "'");
  }
  fs::create_directories(c.out_dir);

  // Data and model.
  DataOptions d;
  d.input = c.data, d.tokenizer = c.tokenizer, d.bpe_vocab_size = c.bpe_vocab_size, d.val_fraction = c.val_fraction;
  d.cache_dir = c.out_dir + "/cache";
  TextDataset data(d);
  models::GPTConfig mc;
  mc.vocab_size = data.vocab_size(), mc.block_size = c.block_size, mc.n_layer = c.n_layer, mc.n_head = c.n_head;
  mc.n_embd = c.n_embd, mc.dropout = c.dropout, mc.bias = c.bias, mc.composed = c.composed;
  Generator init_gen(c.seed);
  models::GPT model(mc, init_gen);  // initialised on the CPU, so every device starts from the same weights
  model.to(device);
  optim::AdamW opt(optim::decay_groups(model.parameters(), optim::AdamWOptions(c.learning_rate)
                                                               .betas({c.beta1, c.beta2})
                                                               .weight_decay(c.weight_decay)));
  Generator data_gen(c.seed + 1);
  TrainingState state{c, model, opt, data_gen, 0};
  const std::string tokenizer_copy = c.out_dir + "/tokenizer";
  fs::copy_file(data.tokenizer_path(), tokenizer_copy, fs::copy_options::overwrite_existing);

  TrainResult result;
  if (c.resume) {
    const auto found = list_checkpoints(c.out_dir);
    load_checkpoint(found.back().second, state);
    result.last_checkpoint = found.back().second;
    std::printf("resumed from %s at step %lld\n", found.back().second.c_str(), static_cast<long long>(state.step));
  }
  std::printf("model: %lld parameters (%lld layers, %lld heads, %lld wide, context %lld, vocab %lld%s); "
              "data: %llu train / %llu val tokens; %d threads%s\n",
              static_cast<long long>(model.num_parameters()), static_cast<long long>(mc.n_layer),
              static_cast<long long>(mc.n_head), static_cast<long long>(mc.n_embd), static_cast<long long>(mc.block_size),
              static_cast<long long>(mc.vocab_size), mc.composed ? ", composed ops" : "",
              static_cast<unsigned long long>(data.size(Split::Train)), static_cast<unsigned long long>(data.size(Split::Val)),
              get_num_threads(), c.dtype == "bf16" ? "; bf16 mixed precision" : "");

  const optim::CosineSchedule schedule{c.learning_rate, c.min_lr, c.warmup_iters, c.lr_decay_iters};
  std::ofstream log(c.out_dir + "/log.jsonl", c.resume ? std::ios::app : std::ios::trunc);

  // Evaluation draws its batches from a generator seeded by the step, so it never disturbs
  // the training stream (and a resumed run evaluates on the same batches).
  auto evaluate = [&](std::int64_t step) {
    NoGradGuard no_grad;
    model.eval();
    double means[2];
    for (int split = 0; split < 2; ++split) {
      Generator eval_gen(c.seed * 1000003 + static_cast<std::uint64_t>(step));
      double total = 0;
      for (std::int64_t i = 0; i < c.eval_iters; ++i) {
        Tensor x, y;
        data.batch(split == 0 ? Split::Train : Split::Val, c.batch_size, c.block_size, eval_gen, x, y);
        x = x.to(device), y = y.to(device);
        total += model.loss(model.forward(x), y).item<double>();
      }
      means[split] = total / static_cast<double>(c.eval_iters);
    }
    model.train();
    result.last_train_loss = means[0], result.last_val_loss = means[1];
    if (::isatty(STDOUT_FILENO)) std::printf("\r%60s\r", "");
    std::printf("step %lld: train loss %.4f, val loss %.4f\n", static_cast<long long>(step), means[0], means[1]);
    log << Json{{"event", "eval"}, {"step", step}, {"train_loss", means[0]}, {"val_loss", means[1]}}.dump() << "\n";
    log.flush();
  };

  // Mixed precision (chapter 17): from here on, evaluation and training steps (forward and
  // backward) run their matmuls on bf16 copies; nothing else changes.
  const Autocast autocast(c.dtype == "bf16" ? kBFloat16 : kFloat32);

  interrupted = false;
  auto previous_handler = std::signal(SIGINT, on_sigint);
  profiler::reset();
  profiler::enable(c.profile);
  const auto run_start = std::chrono::steady_clock::now();
  std::int64_t steps_this_run = 0;
  const std::int64_t tokens_per_step = c.batch_size * c.block_size * c.grad_accum;

  // A step leaves its loss and gradient norm where they were computed; they are read (one
  // copy for all of them) only when the loop logs, evaluates or saves. On a GPU every read
  // makes the host wait for the device, so the steps in between never wait: the GPU stays
  // busy, and such a step could be captured as a CUDA graph (chapter 16).
  struct Pending {
    std::int64_t step;
    double lr;
    std::vector<Tensor> losses;  // one per micro-step
    Tensor grad_norm;            // undefined without clipping
  };
  std::vector<Pending> pending;
  auto last_read = std::chrono::steady_clock::now();
  double last_ms = 0;  // per step, over the steps of the last read
  auto read_pending = [&] {
    if (pending.empty()) return;
    std::vector<Tensor> scalars;
    for (const Pending& p : pending) {
      for (const Tensor& l : p.losses) scalars.push_back(l.reshape({1}).to(kFloat64));
      if (p.grad_norm.defined()) scalars.push_back(p.grad_norm.reshape({1}).to(kFloat64));
    }
    const std::vector<double> values = ops::cat(scalars).to_vector<double>();
    const auto now = std::chrono::steady_clock::now();
    last_ms = std::chrono::duration<double, std::milli>(now - last_read).count() / static_cast<double>(pending.size());
    std::size_t at = 0;
    for (const Pending& p : pending) {
      double loss_sum = 0;
      for (std::size_t i = 0; i < p.losses.size(); ++i) loss_sum += values[at++];
      const double grad_norm = p.grad_norm.defined() ? values[at++] : 0.0;
      if (!std::isfinite(loss_sum)) {
        std::signal(SIGINT, previous_handler);
        detail::fail("the loss is ", std::isnan(loss_sum) ? "NaN" : "infinite", " at step ", p.step,
                     "; stopping. The last good checkpoint is ",
                     result.last_checkpoint.empty() ? std::string("none (no checkpoint was written yet)")
                                                    : result.last_checkpoint);
      }
      result.losses.push_back(loss_sum);
      log << Json{{"event", "step"}, {"step", p.step}, {"loss", loss_sum}, {"lr", p.lr}, {"grad_norm", grad_norm},
                  {"ms", last_ms}}.dump()
          << "\n";
    }
    pending.clear();
  };

  model.train();
  while (state.step < c.max_iters) {
    const std::int64_t step = state.step;
    if (step % c.eval_interval == 0) {
      read_pending();
      evaluate(step);
    }
    if (pending.empty()) last_read = std::chrono::steady_clock::now();  // time the steps, not the evaluation
    const cuda::Waits waits_before = cuda::waits();
    const double lr = schedule.lr(step);
    opt.set_lr(lr);
    opt.zero_grad();
    Pending done{step, lr, {}, Tensor()};
    for (std::int64_t micro = 0; micro < c.grad_accum; ++micro) {
      Tensor x, y;
      data.batch(Split::Train, c.batch_size, c.block_size, data_gen, x, y);
      x = x.to(device), y = y.to(device);
      Tensor loss = model.loss(model.forward(x), y);
      if (c.grad_accum > 1) loss = loss / static_cast<double>(c.grad_accum);
      loss.backward();
      done.losses.push_back(loss.detach());
    }
    if (c.grad_clip > 0) done.grad_norm = optim::clip_grad_norm(model.parameters(), c.grad_clip);
    opt.step();
    pending.push_back(std::move(done));
    result.step_waits += cuda::waits().total() - waits_before.total();
    state.step = step + 1;
    ++steps_this_run;
    const bool last = state.step == c.max_iters;
    const std::int64_t every = c.checkpoint_interval > 0 ? c.checkpoint_interval : c.eval_interval;
    const bool periodic = state.step % every == 0 && !last;  // the last one is saved below
    if (step % c.log_interval == 0 || last || periodic || interrupted) read_pending();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    const double per_step = elapsed / static_cast<double>(steps_this_run);
    if (step % c.log_interval == 0 || last) {
      if (::isatty(STDOUT_FILENO)) std::printf("\r%60s\r", "");
      std::printf("step %5lld | loss %.4f | lr %.2e | %7.1f ms/step | %7.0f tok/s | ETA %s\n", static_cast<long long>(step),
                  result.losses.back(), lr, last_ms, static_cast<double>(tokens_per_step) / per_step,
                  duration(per_step * static_cast<double>(c.max_iters - state.step)).c_str());
    }
    progress_bar(state.step, c.max_iters, per_step * static_cast<double>(c.max_iters - state.step));
    if (periodic || interrupted) result.last_checkpoint = save_checkpoint(state, tokenizer_copy);
    if (interrupted) {
      std::printf("\ninterrupted: saved %s; continue with --resume\n", result.last_checkpoint.c_str());
      result.interrupted = true;
      break;
    }
  }
  read_pending();
  std::signal(SIGINT, previous_handler);
  if (c.profile) {
    profiler::enable(false);
    std::printf("\nwhere the time went (per training step, evaluation included):\n%s",
                profiler::report(static_cast<double>(std::max<std::int64_t>(steps_this_run, 1))).c_str());
    if (device.is_cuda())
      std::printf("waits for the device inside the training steps: %llu (device-to-host copies and "
                  "synchronisations; logging, evaluation and checkpoints not counted)\n",
                  static_cast<unsigned long long>(result.step_waits));
  }
  result.steps_done = state.step;
  if (result.interrupted) return result;
  evaluate(state.step);
  result.last_checkpoint = save_checkpoint(state, tokenizer_copy);
  std::printf("saved %s\n", result.last_checkpoint.c_str());

  log.close();
  plot_loss_curves(c.out_dir, c.preset);
  plot_attention(c.out_dir, model, data.tokenizer(), c.block_size);
  std::printf("wrote %s/loss.png and %s/attention.png\n", c.out_dir.c_str(), c.out_dir.c_str());
  if (c.sample_tokens > 0) print_sample(model, data.tokenizer(), c.sample_tokens, c.seed);
  return result;
}

}  // namespace brrr::train
