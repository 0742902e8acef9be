// train/trainer.cpp: the training loop: data, model and optimizer on the chosen device,
// evaluation, gradient accumulation and clipping, the schedule, Ctrl-C, and resume.
// Chapter 08 (training). Read before: trainer.h, step.h. The loop calls into pending.cpp
// (reading the losses), checkpoint.cpp (saving and resuming), report.cpp (what it prints and
// draws) and config.cpp (the settings). Its other two steps: graph_step.cpp (chapter 17) and
// zero_step.cpp (chapter 19); data_parallel.cpp holds the rest of chapter 19's part.
#include "train/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>

#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "brrr/models/open.h"
#include "brrr/profiler.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/data_parallel.h"
#include "train/distributed.h"
#include "train/graph_step.h"
#include "train/model_source.h"
#include "train/pending.h"
#include "train/report.h"
#include "train/step.h"
#include "train/zero_step.h"

namespace brrr::train {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// cpu, cuda (a GPU, or an error saying there is none), emulator (the CUDA kernels on the CPU's
// SIMT emulator: slow, for checking), auto (the GPU if there is one, else the CPU, saying so).
Device resolve_device(const std::string& name, std::FILE* report) {
  if (name == "cpu") return kCPU;
  if (name == "emulator") {
    cuda::use_emulator();
    std::fprintf(report, "device: cuda:0 on the SIMT emulator (the CUDA kernels run on the CPU, slowly)\n");
    return Device::cuda();
  }
  if (name == "auto" && !cuda::gpu_available()) {
    std::fprintf(report, "device: auto: no CUDA GPU found; running on the CPU\n");
    return kCPU;
  }
  BRRR_CHECK(cuda::is_available(), "--device cuda: no CUDA GPU is available here",
             cuda::gpu_available() ? "" : " (no GPU or no driver); use --device cpu, auto or emulator");
  std::fprintf(report, "device: cuda:0 (%s)\n", cuda::device_name().c_str());
  return Device::cuda();
}

// ---------------------------------------------------------------------------------------------
// one step

std::vector<Tensor> accumulate_gradients(StepContext& s, const autograd::BackwardHooks& last_hooks) {
  const TrainConfig& c = s.config;
  const std::int64_t micro_steps = c.grad_accum * s.ranks;  // in the whole step, over all ranks
  std::vector<Tensor> losses;
  s.data.skip_batches(c.grad_accum * s.rank, c.batch_size, s.data_gen);
  for (std::int64_t micro = 0; micro < c.grad_accum; ++micro) {
    Tensor x, y;
    s.data.batch(Split::Train, c.batch_size, c.block_size, s.data_gen, x, y);
    x = x.to(s.device), y = y.to(s.device);
    Tensor loss = s.model.loss(s.model.forward(x), y);
    if (micro_steps > 1) loss = loss / static_cast<double>(micro_steps);
    const autograd::BackwardHooksGuard hooks(micro == c.grad_accum - 1 ? last_hooks : autograd::BackwardHooks{});
    loss.backward();
    losses.push_back(loss.detach());
  }
  s.data.skip_batches(c.grad_accum * (s.ranks - 1 - s.rank), c.batch_size, s.data_gen);
  return losses;
}

StepOutput plain_step(StepContext& s, dist::GradientReducer& reducer) {
  s.opt.zero_grad();
  StepOutput out;
  // With several ranks, the last micro-step's backward sends the gradients bucket by bucket as
  // they are final (--overlap_comm, chapter 19).
  out.losses = accumulate_gradients(s, reducer.hooks());
  // So that what follows times the collectives, not a slower rank. With overlap, buckets may
  // still be in flight: MPI moves them on inside this barrier too (counted as waiting).
  dist::wait_for_all();
  reducer.finish();  // the buckets not yet sent, and the wait for all of them
  clip_and_update(s, out);
  return out;
}

void clip_and_update(StepContext& s, StepOutput& out) {
  if (s.config.grad_clip <= 0) {
    s.opt.step();
  } else if (s.ranks == 1 && s.device.is_cuda()) {
    // One pass for the norm and one for the update, the gradients never rewritten
    // (AdamW::step_with_clipping, chapter 16); the graph's step records the same call
    // (graph_step.cpp), so --cuda_graph keeps these bits.
    out.grad_norm = s.opt.step_with_clipping(s.config.grad_clip);
  } else {
    // The CPU, or several ranks: clip_grad_norm's float64 sums in the model's order, which
    // ZeRO's sharded norm gives bit for bit from each rank's part (zero_step.cpp), so --zero 1
    // keeps the unsharded run's bits.
    out.grad_norm = optim::clip_grad_norm(s.model.parameters(), s.config.grad_clip);
    s.opt.step();
  }
}

// ---------------------------------------------------------------------------------------------
// the run

namespace {
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }

// Ctrl-C sets `interrupted` while the loop runs; the handler from before is back afterwards,
// also when an error ends the loop.
class CatchCtrlC {
 public:
  CatchCtrlC() : previous_(std::signal(SIGINT, on_sigint)) { interrupted = false; }
  ~CatchCtrlC() { restore(); }
  void restore() {
    if (previous_ != SIG_ERR) std::signal(SIGINT, previous_);
    previous_ = SIG_ERR;
  }

 private:
  void (*previous_)(int);
};

// out_dir must be a folder, or a path where one can be made: a file in its place, or in the
// place of a folder above it, is named here rather than left to a raw filesystem error.
void check_out_dir(const std::string& out_dir) {
  BRRR_CHECK(!out_dir.empty(), "config: out_dir is empty (the folder a run writes its checkpoints, log and plots to)");
  for (fs::path p = out_dir; !p.empty(); p = p.parent_path()) {
    std::error_code error;
    const fs::file_status status = fs::status(p, error);
    if (fs::exists(status)) {
      if (fs::is_directory(status)) return;
      const std::string what = "(out_dir is the folder a run writes its checkpoints, log and plots to: name another, "
                               "or move the file away)";
      std::string named = out_dir;  // "run/" names the same folder as "run"
      while (named.size() > 1 && named.back() == '/') named.pop_back();
      if (p.lexically_normal() == fs::path(named).lexically_normal())
        detail::fail("out_dir '", out_dir, "' is a file, not a folder ", what);
      detail::fail("out_dir '", out_dir, "' cannot be made: '", p.string(), "' is a file, not a folder ", what);
    }
    if (p == p.parent_path()) break;
  }
}

// The checks and defaults that come before anything is read or written; the device.
Device prepare(TrainConfig& c, int ranks) {
  c.validate();
  check_out_dir(c.out_dir);
  if (c.threads > 0) set_num_threads(c.threads);
  const Device device = resolve_device(c.device);
  if (device.is_cuda()) cuda::set_allow_tf32(c.tf32);  // float32 GEMMs in TF32 only when asked
  if (c.data.empty()) {
    c.data = std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt";
    BRRR_CHECK(fs::exists(c.data), "no --data given and the default corpus ", c.data,
               " is not there (put ../shared beside the checkout or pass --data FILE)");
  }
  if (ranks > 1) {
    check_ranks_agree(c);
    std::printf("data parallel: %d ranks, each %lld x %lld sequences a step%s\n", ranks,
                static_cast<long long>(c.grad_accum), static_cast<long long>(c.batch_size),
                c.zero ? "; AdamW's moments sharded (ZeRO stage 1)" : "");
  }
  if (c.resume) {
    BRRR_CHECK(fs::is_directory(c.out_dir), "--resume: no folder '", c.out_dir,
               "' (resume continues the run whose --out_dir that was)");
    BRRR_CHECK(!models::list_checkpoints(c.out_dir).empty(), "--resume: no checkpoint (ckpt-*.safetensors) in '",
               c.out_dir, "'");
  }
  return device;
}

// --init_from (chapter 08, "Pretrained models"): the model to start from, a Hugging Face folder
// or a brrr checkpoint, whose shape the run's must be (TrainConfig::apply_init_from sets it).
std::optional<ModelSource> open_init(const TrainConfig& c) {
  if (c.init_from.empty()) return std::nullopt;
  ModelSource init = open_model_and_tokenizer(c.init_from);
  const models::GPTConfig& m = init.model->config();
  BRRR_CHECK(c.n_layer == m.n_layer && c.n_head == m.n_head && c.n_embd == m.n_embd && c.block_size == m.block_size,
             "init_from: the run's shape (", c.n_layer, " layers, ", c.n_head, " heads, ", c.n_embd, " wide, context ",
             c.block_size, ") is not ", c.init_from, "'s (", m.n_layer, ", ", m.n_head, ", ", m.n_embd, ", ", m.block_size,
             "); TrainConfig::apply_init_from sets it");
  BRRR_CHECK(c.bias == m.bias, "init_from: --bias ", c.bias ? "true" : "false", " contradicts ", c.init_from);
  return init;
}

// Rank 0 tokenizes the text and writes the cache first; the others then read it. With
// --init_from the tokenizer is the model's.
std::unique_ptr<TextDataset> load_data(const TrainConfig& c, bool main_rank, std::optional<ModelSource>& init) {
  DataOptions d;
  d.input = c.data, d.tokenizer = c.tokenizer, d.bpe_vocab_size = c.bpe_vocab_size, d.val_fraction = c.val_fraction;
  d.cache_dir = c.out_dir + "/cache";
  if (init) {
    d.given = std::shared_ptr<const TextTokenizer>(std::move(init->tokenizer));
    d.given_key = std::to_string(std::hash<std::string>{}(d.given->to_hf_json()));
  }
  std::unique_ptr<TextDataset> data;
  if (main_rank) data = std::make_unique<TextDataset>(d);
  dist::barrier();
  if (!main_rank) data = std::make_unique<TextDataset>(d);
  return data;
}

models::GPTConfig model_config(const TrainConfig& c, const TextDataset& data, const std::optional<ModelSource>& init) {
  models::GPTConfig mc;
  mc.vocab_size = data.vocab_size(), mc.block_size = c.block_size, mc.n_layer = c.n_layer, mc.n_head = c.n_head;
  mc.n_embd = c.n_embd, mc.dropout = c.dropout, mc.bias = c.bias;
  if (c.composed) ops::select_composed();  // the registry's composed variants, for this process
  if (init) {  // a Hugging Face model's vocabulary may be larger than its tokenizer's
    const models::GPTConfig& m = init->model->config();
    mc.vocab_size = m.vocab_size, mc.layer_norm_eps = m.layer_norm_eps, mc.tie_head = m.tie_head;
    mc.activation = m.activation;
  }
  return mc;
}

// --init_from: the model's weights into the run's (the same config, so the same parameters in
// the same order); the model opened is let go.
void copy_init_weights(models::GPT& model, std::optional<ModelSource>& init) {
  if (!init) return;
  NoGradGuard no_grad;
  const auto from = init->model->named_parameters(), to = model.named_parameters();
  for (std::size_t i = 0; i < to.size(); ++i) Tensor(to[i].second).copy_(from[i].second);
  init->model.reset();
  if (dist::is_main()) std::printf("init_from: %s\n", init->model_path.c_str());
}

void print_run(const TrainConfig& c, const models::GPT& model, const TextDataset& data) {
  const models::GPTConfig& mc = model.config();
  std::printf("model: %lld parameters (%lld layers, %lld heads, %lld wide, context %lld, vocab %lld%s); "
              "data: %llu train / %llu val tokens; %d threads%s\n",
              static_cast<long long>(model.num_parameters()), static_cast<long long>(mc.n_layer),
              static_cast<long long>(mc.n_head), static_cast<long long>(mc.n_embd), static_cast<long long>(mc.block_size),
              static_cast<long long>(mc.vocab_size), c.composed ? ", composed ops" : "",
              static_cast<unsigned long long>(data.size(Split::Train)), static_cast<unsigned long long>(data.size(Split::Val)),
              get_num_threads(), c.dtype == "bf16" ? "; bf16 mixed precision" : "");
}

// The mean train and validation loss over eval_iters batches. The batches come from a
// generator seeded by the step, so evaluation never disturbs the training stream (and a
// resumed run evaluates on the same batches).
void evaluate(const StepContext& s, std::int64_t step, std::ofstream& log, TrainResult& result) {
  const TrainConfig& c = s.config;
  NoGradGuard no_grad;
  s.model.eval();
  double means[2];
  for (int split = 0; split < 2; ++split) {
    Generator eval_gen(c.seed * 1000003 + static_cast<std::uint64_t>(step));
    double total = 0;
    for (std::int64_t i = 0; i < c.eval_iters; ++i) {
      Tensor x, y;
      s.data.batch(split == 0 ? Split::Train : Split::Val, c.batch_size, c.block_size, eval_gen, x, y);
      x = x.to(s.device), y = y.to(s.device);
      total += s.model.loss(s.model.forward(x), y).item<double>();
    }
    means[split] = total / static_cast<double>(c.eval_iters);
  }
  s.model.train();
  result.last_train_loss = means[0], result.last_val_loss = means[1];
  if (::isatty(STDOUT_FILENO)) std::printf("\r%60s\r", "");
  std::printf("step %lld: train loss %.4f, val loss %.4f\n", static_cast<long long>(step), means[0], means[1]);
  log << Json{{"event", "eval"}, {"step", step}, {"train_loss", means[0]}, {"val_loss", means[1]}}.dump() << "\n";
  log.flush();
}

// Rank 0 writes the checkpoint (under ZeRO every rank sends it its moments first); no rank
// goes on (or exits, which makes mpirun stop the others) while it writes. Every rank returns
// the path rank 0 wrote (the name depends on the step alone).
std::string save(const TrainingState& state, const ZeroStep* zero, const optim::AdamWOptions& adamw_options,
                 const std::string& tokenizer_copy) {
  std::string path;
  if (zero) path = zero->save(state, adamw_options, tokenizer_copy);
  else if (dist::is_main()) path = save_checkpoint(state, tokenizer_copy);
  dist::barrier();
  return dist::is_main() ? path : state.config.out_dir + "/" + checkpoint_name(state.step);
}

void print_step(const TrainConfig& c, std::int64_t step, double loss, double lr, double ms, double seconds_per_step) {
  if (::isatty(STDOUT_FILENO)) std::printf("\r%60s\r", "");
  const double tokens_per_step = static_cast<double>(c.batch_size * c.block_size * c.grad_accum * dist::world_size());
  std::printf("step %5lld | loss %.4f | lr %.2e | %7.1f ms/step | %7.0f tok/s | ETA %s\n", static_cast<long long>(step),
              loss, lr, ms, tokens_per_step / seconds_per_step,
              duration(seconds_per_step * static_cast<double>(c.max_iters - step - 1)).c_str());
}

void print_profile(const TrainConfig& c, Device device, std::int64_t steps, const TrainResult& result) {
  if (!c.profile && c.profile_trace.empty()) return;
  profiler::enable(false);
  if (!c.profile_trace.empty()) {
    const std::string path = dist::rank() == 0 ? c.profile_trace : c.profile_trace + ".rank" + std::to_string(dist::rank());
    const std::size_t events = profiler::write_trace(path);
    std::printf("\ntrace: %zu ops and steps written to %s (open it in ui.perfetto.dev or chrome://tracing)\n", events,
                path.c_str());
  }
  std::printf("\nwhere the time went (per training step, evaluation included):\n%s",
              profiler::report(static_cast<double>(std::max<std::int64_t>(steps, 1))).c_str());
  if (device.is_cuda())
    std::printf("waits for the device inside the training steps: %llu (device-to-host copies and "
                "synchronisations; logging, evaluation and checkpoints not counted)\n",
                static_cast<unsigned long long>(result.step_waits));
}

// After the last step: evaluate, save, and on rank 0 draw the curves and print a sample.
void finish(StepContext& s, const TrainingState& state, const std::function<std::string()>& save_now,
            std::ofstream& log, TrainResult& result) {
  evaluate(s, state.step, log, result);
  result.last_checkpoint = save_now();
  std::printf("saved %s\n", result.last_checkpoint.c_str());
  log.close();
  if (!dist::is_main()) return;
  const TrainConfig& c = s.config;
  // The attention maps and the sample run float32 activations (matmuls still bf16 under the
  // autocast scope): generation has its own path, whose bf16 means bf16 weights.
  s.model.set_precision(kFloat32, kFloat32);
  plot_loss_curves(c.out_dir, c.preset);
  plot_attention(c.out_dir, s.model, s.data.tokenizer(), c.block_size);
  std::printf("wrote %s/loss.png and %s/attention.png\n", c.out_dir.c_str(), c.out_dir.c_str());
  if (c.sample_tokens > 0) print_sample(s.model, s.data.tokenizer(), c.sample_tokens, c.seed);
}

TrainResult train_this_rank(TrainConfig c) {
  const int rank = dist::rank(), ranks = dist::world_size();
  const Device device = prepare(c, ranks);
  if (dist::is_main()) fs::create_directories(c.out_dir);  // rank 0 writes the log, plots and checkpoints
  std::optional<ModelSource> init = open_init(c);
  const std::unique_ptr<TextDataset> data = load_data(c, dist::is_main(), init);
  Generator init_gen(c.seed);
  models::GPT model(model_config(c, *data, init), init_gen);  // initialised on the CPU: every device starts alike
  copy_init_weights(model, init);
  model.to(device);
  const std::vector<Tensor> params = model.parameters();
  std::optional<ZeroStep> zero;
  if (c.zero == 1 && ranks > 1) zero.emplace(params, rank);
  const std::vector<Tensor> owned = zero ? zero->owned() : params;
  const auto adamw_options = optim::AdamWOptions(c.learning_rate).betas({c.beta1, c.beta2}).weight_decay(c.weight_decay);
  optim::AdamW opt(optim::decay_groups(owned, adamw_options));
  dist::GradientReducer reducer(params, static_cast<std::int64_t>(c.bucket_mb * 1e6), c.overlap_comm);
  Generator data_gen(c.seed + 1);
  StepContext ctx{c, model, opt, *data, data_gen, device, rank, ranks};
  std::optional<GraphStep> graph;
  if (c.cuda_graph && device.is_cuda()) {
    const std::string why = graph_refusal(c, ranks);
    if (why.empty()) graph.emplace(ctx);
    else if (dist::is_main()) std::printf("cuda_graph: plain steps (%s)\n", why.c_str());
  }
  // The step, chosen once: chapter 08's, chapter 17's CUDA graph, or chapter 19's ZeRO.
  std::function<StepOutput()> take_step = [&] { return plain_step(ctx, reducer); };
  if (graph) take_step = [&] { return (*graph)(ctx, reducer); };
  if (zero) take_step = [&] { return (*zero)(ctx); };

  TrainingState state{c, model, opt, data_gen, 0};
  const std::string tokenizer_copy = c.out_dir + "/tokenizer";
  if (dist::is_main()) fs::copy_file(data->tokenizer_path(), tokenizer_copy, fs::copy_options::overwrite_existing);
  const auto save_now = [&] { return save(state, zero ? &*zero : nullptr, adamw_options, tokenizer_copy); };
  TrainResult result;
  result.ranks = ranks;
  if (c.resume) {
    const auto found = models::list_checkpoints(c.out_dir);
    load_checkpoint(found.back().second, state);
    result.last_checkpoint = found.back().second;
    std::printf("resumed from %s at step %lld\n", found.back().second.c_str(), static_cast<long long>(state.step));
  }
  give_dropout_its_rank(model, rank);
  for (const Tensor& p : owned) result.optimizer_state_bytes += 2 * p.numel() * static_cast<std::int64_t>(dtype_size(p.dtype()));
  if (zero)
    std::printf("ZeRO stage 1: this rank keeps AdamW's moments of %zu of %zu parameter tensors, %.2f MB of %.2f MB\n",
                owned.size(), params.size(), static_cast<double>(result.optimizer_state_bytes) / 1e6,
                static_cast<double>(2 * model.num_parameters() * 4) / 1e6);
  print_run(c, model, *data);

  const optim::CosineSchedule schedule{c.learning_rate, c.min_lr, c.warmup_iters, c.lr_decay_iters};
  std::ofstream log;  // rank 0's; the other ranks' stays closed and ignores what is written to it
  if (dist::is_main()) log.open(c.out_dir + "/log.jsonl", c.resume ? std::ios::app : std::ios::trunc);
  // Mixed precision (chapter 18): from here on, evaluation and training steps keep their
  // activations bf16 in memory (GPT::set_precision); the scope rounds the operands of any
  // matmul still on float32 tensors. Parameters, gradients and AdamW's state stay float32.
  const Autocast autocast(c.dtype == "bf16" ? kBFloat16 : kFloat32);
  if (c.dtype == "bf16") model.set_precision(kBFloat16, c.residual == "bf16" ? kBFloat16 : kFloat32);
  CatchCtrlC ctrl_c;
  profiler::reset();
  if (!c.profile_trace.empty()) {  // refused now rather than after the run
    const fs::path folder = fs::absolute(c.profile_trace).parent_path();
    BRRR_CHECK(fs::is_directory(folder), "--profile_trace ", c.profile_trace, ": the folder ", folder.string(),
               " does not exist");
  }
  profiler::trace(!c.profile_trace.empty(), rank);
  profiler::enable(c.profile || !c.profile_trace.empty());
  const auto run_start = std::chrono::steady_clock::now();
  std::int64_t steps_this_run = 0;
  PendingSteps pending(ranks, log, result);
  StepClock clock;
  const std::int64_t every = c.checkpoint_interval > 0 ? c.checkpoint_interval : c.eval_interval;

  model.train();
  while (state.step < c.max_iters) {
    const std::int64_t step = state.step;
    if (step % c.eval_interval == 0) {
      pending.read();
      const profiler::Span span("evaluate");
      evaluate(ctx, step, log, result);
    }
    pending.before_step();
    const cuda::Waits waits_before = cuda::waits();
    const cuda::MemoryStats memory_before = device.is_cuda() ? cuda::memory_stats() : cuda::MemoryStats{};
    const double lr = schedule.lr(step);
    opt.set_lr(lr);
    fault_drill(step);
    clock.start();
    StepOutput out;
    {
      const profiler::Span span("step " + std::to_string(step));
      out = take_step();
    }
    clock.stop();
    pending.add(step, lr, std::move(out));
    result.step_waits += cuda::waits().total() - waits_before.total();
    if (device.is_cuda() && steps_this_run >= 2) {
      const cuda::MemoryStats memory = cuda::memory_stats();
      result.later_step_blocks += memory.allocations - memory_before.allocations;
      result.later_step_device_allocations += memory.device_allocations - memory_before.device_allocations;
    }
    state.step = step + 1;
    ++steps_this_run;
    const bool last = state.step == c.max_iters;
    const bool periodic = state.step % every == 0 && !last;  // the last one is saved by finish()
    // Ctrl-C reaches the ranks at different moments; they stop together, at the first step
    // after which any rank has seen it (one more tiny collective a step, under mpirun only).
    // `interrupted` itself is only ever set, by the handler: a signal that lands while the
    // ranks compare notes is counted at the next step.
    const bool stop = ranks > 1 ? dist::sum_over_ranks({interrupted ? 1.0 : 0.0})[0] > 0 : interrupted.load();
    if (step % c.log_interval == 0 || last || periodic || stop) pending.read();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    const double per_step = elapsed / static_cast<double>(steps_this_run);
    if (step % c.log_interval == 0 || last) print_step(c, step, result.losses.back(), lr, pending.last_ms(), per_step);
    progress_bar(state.step, c.max_iters, per_step * static_cast<double>(c.max_iters - state.step));
    if (periodic || stop) result.last_checkpoint = save_now();
    if (stop) {
      std::printf("\ninterrupted: saved %s; continue with --resume\n", result.last_checkpoint.c_str());
      result.interrupted = true;
      break;
    }
  }
  pending.read();
  ctrl_c.restore();
  print_profile(c, device, steps_this_run, result);
  result.steps_done = state.step;
  clock.report(c, ranks, zero.has_value(), reducer, steps_this_run, log, result);
  if (!result.interrupted) finish(ctx, state, save_now, log, result);
  return result;
}


// Running out of memory says what to lower. The tensors' allocators name the bytes
// (framework/src/storage.cpp, cuda.cpp) and the batch names its tensors (data.cpp); anything
// else that runs out throws std::bad_alloc, which names nothing.
TrainResult train_with_memory_advice(TrainConfig c) {
  const std::string advice = "; lower --batch_size (" + std::to_string(c.batch_size) + ") or --block_size (" +
                             std::to_string(c.block_size) + "), or the model's size (--n_layer, --n_embd)";
  try {
    return train_this_rank(std::move(c));
  } catch (const std::bad_alloc&) {
    detail::fail("out of memory: an allocation outside the tensors failed (std::bad_alloc)", advice);
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find("out of CPU memory") == std::string::npos && what.find("CUDA out of memory") == std::string::npos) throw;
    detail::fail(what, advice);
  }
}
}  // namespace

std::string graph_refusal(const TrainConfig& c, int ranks) {
  if (c.dropout != 0.0) {
    char text[96];
    std::snprintf(text, sizeof text, "dropout %g: a graph would replay the masks' random offsets", c.dropout);
    return std::string(text) + ", the same mask every step";
  }
  if (c.grad_accum != 1) return "grad_accum " + std::to_string(c.grad_accum) + ": the graph holds one micro-step";
  if (ranks > 1) return std::to_string(ranks) + " ranks: the graph is one process's";
  if (c.profile || !c.profile_trace.empty()) return "the profiler times each launch, and a replay launches none";
  return "";
}

TrainResult run_training(TrainConfig c) {
  if (dist::init() == 1) return train_with_memory_advice(std::move(c));
  // Several ranks: an error on this one must stop the others, which would otherwise wait for
  // it in the next collective forever. abort_all prints it and has mpirun end every rank.
  try {
    return train_with_memory_advice(std::move(c));
  } catch (const std::exception& e) {
    dist::abort_all(e.what());
  }
}

}  // namespace brrr::train
