// train/trainer.cpp: the training loop: data, model and optimizer on the chosen device,
// evaluation, gradient accumulation and clipping, the schedule, Ctrl-C, and resume.
// Chapter 08 (training). Read before: trainer.h. The loop calls into checkpoint.cpp (saving
// and resuming), report.cpp (what it prints and draws) and config.cpp (the settings).
#include "train/trainer.h"
#include "train/model_source.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "brrr/brrr.h"
#include "brrr/io.h"
#include "brrr/models/gpt.h"
#include "brrr/profiler.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/distributed.h"
#include "train/report.h"

namespace brrr::train {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {
std::atomic<bool> interrupted{false};
extern "C" void on_sigint(int) { interrupted = true; }

// ---------------------------------------------------------------------------------------------
// data parallel (chapter 19)

// What every rank must agree on before the first step: the settings, --resume, and the training
// text itself (its size and an FNV-1a hash of its bytes). Rank 0's is the reference; a rank
// that differs is named with the keys that differ.
std::string run_identity(const TrainConfig& c) {
  Json j = Json::parse(c.to_json());
  j.erase("threads");  // a rank may use its own number of threads: the results do not depend on it
  j.erase("profile");
  j["resume"] = c.resume;
  std::uint64_t h = 1469598103934665603ull;
  const std::string text = read_file(c.data);
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ull;
  j["data_bytes"] = text.size();
  j["data_fnv1a"] = h;
  return j.dump();
}

void check_ranks_agree(const TrainConfig& c) {
  const std::vector<std::string> all = dist::allgather(run_identity(c));
  const Json reference = Json::parse(all[0]);
  for (std::size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    const Json other = Json::parse(all[r]);
    std::string differ;
    for (const auto& [key, value] : reference.items())
      if (!other.contains(key) || other[key] != value)
        differ += (differ.empty() ? "" : ", ") + key + " (" + value.dump() + " on rank 0, " +
                  (other.contains(key) ? other[key].dump() : "nothing") + " on rank " + std::to_string(r) + ")";
    detail::fail("the ranks were started with different settings: ", differ,
                 "; every rank must run the same command on the same data");
  }
}

// Rank r's dropout masks come from its own stream: the seed moved by r, the offset shared (all
// ranks draw the same amounts). A checkpoint holds rank 0's states; the other ranks move them
// again after loading, so an N-rank run resumes bit for bit.
void give_dropout_its_rank(models::GPT& model, int rank) {
  if (rank == 0) return;
  for (auto& [path, m] : model.named_modules())
    if (auto* d = dynamic_cast<nn::Dropout*>(m.get()))
      d->gen.set_state(d->gen.seed() + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank), d->gen.offset());
}

// ZeRO stage 1's clipping: this rank holds the summed gradients of params[split[rank] ..
// split[rank + 1]) only. Each rank computes their sums of squares; the ranks exchange them (one
// value a tensor, zeros elsewhere, so the sum over ranks is exact), and every rank adds them in
// the parameters' order in float64, as clip_grad_norm does: the same norm, bit for bit.
Tensor clip_sharded(const std::vector<Tensor>& params, const std::vector<std::size_t>& split, int rank, double max_norm) {
  NoGradGuard no_grad;
  std::vector<double> squares(params.size(), 0.0);
  for (std::size_t i = split[rank]; i < split[rank + 1]; ++i) {
    const Tensor g = params[i].grad();
    squares[i] = ops::sum(ops::mul(g, g)).item<double>();
  }
  squares = dist::sum_over_ranks(squares);
  double total = 0.0;
  for (double s : squares) total += s;
  const double norm = std::sqrt(total);
  const double scale = max_norm / (norm + 1e-6);  // PyTorch's formula, as in clip_grad_norm
  if (scale < 1.0)
    for (std::size_t i = split[rank]; i < split[rank + 1]; ++i) {
      Tensor g = params[i].grad();
      g.mul_(scale);
    }
  // Where the gradients are, as clip_grad_norm returns it (the loop reads it with the losses).
  return full({}, norm, TensorOptions().dtype(kFloat64).device(params.front().device()));
}

// The fault drill of chapter 19 (and its test): BRRR_FAULT=throw@R:S makes rank R throw at
// step S, kill@R:S makes it die at once (SIGKILL); the other ranks must stop, not hang.
void fault_drill(std::int64_t step) {
  static const char* spec = std::getenv("BRRR_FAULT");
  if (!spec) return;
  const std::string s = spec;
  const std::size_t at = s.find('@'), colon = s.find(':');
  BRRR_CHECK(at != std::string::npos && colon != std::string::npos && colon > at,
             "BRRR_FAULT must be throw@RANK:STEP or kill@RANK:STEP, got '", s, "'");
  if (std::stoi(s.substr(at + 1, colon - at - 1)) != dist::rank() || std::stoll(s.substr(colon + 1)) != step) return;
  if (s.substr(0, at) == "kill") std::raise(SIGKILL);
  detail::fail("BRRR_FAULT: rank ", dist::rank(), " fails at step ", step, " as asked");
}
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

namespace {
TrainResult train_this_rank(TrainConfig c) {
  c.validate();
  const int rank = dist::rank(), ranks = dist::world_size();
  const bool main_rank = rank == 0;  // writes the log, the plots and the checkpoints
  if (c.threads > 0) set_num_threads(c.threads);
  const Device device = resolve_device(c.device);
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
  if (c.resume) {  // before the data is read or anything is written
    BRRR_CHECK(fs::is_directory(c.out_dir), "--resume: no folder '", c.out_dir,
               "' (resume continues the run whose --out_dir that was)");
    BRRR_CHECK(!list_checkpoints(c.out_dir).empty(), "--resume: no checkpoint (ckpt-*.safetensors) in '",
               c.out_dir, "'");
  }
  if (main_rank) fs::create_directories(c.out_dir);

  // Data and model. Rank 0 tokenizes the text and writes the cache first; the others then read it.
  DataOptions d;
  d.input = c.data, d.tokenizer = c.tokenizer, d.bpe_vocab_size = c.bpe_vocab_size, d.val_fraction = c.val_fraction;
  d.cache_dir = c.out_dir + "/cache";
  // --init_from: the model's weights, shape and tokenizer (chapter 08, "Pretrained models").
  std::optional<ModelSource> init;
  if (!c.init_from.empty()) {
    init = open_model(c.init_from);
    const models::GPTConfig& m = init->model->config();
    BRRR_CHECK(c.n_layer == m.n_layer && c.n_head == m.n_head && c.n_embd == m.n_embd && c.block_size == m.block_size,
               "init_from: the run's shape (", c.n_layer, " layers, ", c.n_head, " heads, ", c.n_embd, " wide, context ",
               c.block_size, ") is not ", c.init_from, "'s (", m.n_layer, ", ", m.n_head, ", ", m.n_embd, ", ", m.block_size,
               "); TrainConfig::apply_init_from sets it");
    BRRR_CHECK(c.bias == m.bias, "init_from: --bias ", c.bias ? "true" : "false", " contradicts ", c.init_from);
    d.given = std::shared_ptr<const TextTokenizer>(std::move(init->tokenizer));
    d.given_key = std::to_string(std::hash<std::string>{}(d.given->to_hf_json()));
  }
  std::unique_ptr<TextDataset> data_owner;
  if (main_rank) data_owner = std::make_unique<TextDataset>(d);
  dist::barrier();
  if (!main_rank) data_owner = std::make_unique<TextDataset>(d);
  const TextDataset& data = *data_owner;
  models::GPTConfig mc;
  mc.vocab_size = data.vocab_size(), mc.block_size = c.block_size, mc.n_layer = c.n_layer, mc.n_head = c.n_head;
  mc.n_embd = c.n_embd, mc.dropout = c.dropout, mc.bias = c.bias, mc.composed = c.composed;
  if (init) {  // a Hugging Face model's vocabulary may be larger than its tokenizer's
    const models::GPTConfig& m = init->model->config();
    mc.vocab_size = m.vocab_size, mc.layer_norm_eps = m.layer_norm_eps, mc.tie_head = m.tie_head;
  }
  Generator init_gen(c.seed);
  models::GPT model(mc, init_gen);  // initialised on the CPU, so every device starts from the same weights
  if (init) {  // the same config, so the same parameters in the same order
    NoGradGuard no_grad;
    const auto from = init->model->named_parameters(), to = model.named_parameters();
    for (std::size_t i = 0; i < to.size(); ++i) Tensor(to[i].second).copy_(from[i].second);
    init->model.reset();
    if (main_rank) std::printf("init_from: %s\n", init->model_path.c_str());
  }
  model.to(device);
  const std::vector<Tensor> params = model.parameters();
  const auto adamw_options = optim::AdamWOptions(c.learning_rate).betas({c.beta1, c.beta2}).weight_decay(c.weight_decay);
  // ZeRO stage 1: rank r's AdamW holds only the parameters [split[r], split[r + 1]), so only
  // their moments; after its update each rank sends its parameters to all the others.
  const bool zero = c.zero == 1 && ranks > 1;
  const std::vector<std::size_t> split = zero ? dist::balanced_split(params) : std::vector<std::size_t>{};
  const std::vector<Tensor> owned = zero ? std::vector<Tensor>(params.begin() + static_cast<std::ptrdiff_t>(split[rank]),
                                                               params.begin() + static_cast<std::ptrdiff_t>(split[rank + 1]))
                                         : params;
  optim::AdamW opt(optim::decay_groups(owned, adamw_options));
  // Without ZeRO, the gradients are summed bucket by bucket, each while the backward of the
  // step's last micro-batch goes on (--overlap_comm, chapter 19); ZeRO's reduce-scatter does
  // not overlap yet: it runs after the backward.
  dist::GradientReducer reducer(params, static_cast<std::int64_t>(c.bucket_mb * 1e6), c.overlap_comm);
  // --cuda_graph (chapter 17): the first step of the run runs as usual (it sets up cuBLAS, the
  // kernels' workspace, AdamW's moments and the caching allocator's blocks); the second is
  // captured whole: forward, backward, clipping and AdamW, on a batch in two tensors made for
  // the graph, with the gradients the captured backward makes, which the parameters keep from
  // then on (no zero_grad between replays: the graph writes them). Every step from the second
  // on copies its batch into those tensors and AdamW's learning rate and step count into
  // device memory (prepare_graph_step: a graph would freeze them as kernel arguments), and
  // replays the graph.
  if (c.cuda_graph) {
    BRRR_CHECK(device.is_cuda(), "cuda_graph: the run is on the CPU (--device ", c.device,
               "); a CUDA graph needs a CUDA device (cuda or emulator)");
    BRRR_CHECK(ranks == 1, "cuda_graph: runs on one rank only (this run has ", ranks, ")");
  }
  cuda::Graph step_graph;
  Tensor graph_x, graph_y, graph_loss, graph_norm;
  Generator data_gen(c.seed + 1);
  TrainingState state{c, model, opt, data_gen, 0};
  const std::string tokenizer_copy = c.out_dir + "/tokenizer";
  if (main_rank) fs::copy_file(data.tokenizer_path(), tokenizer_copy, fs::copy_options::overwrite_existing);

  TrainResult result;
  result.ranks = ranks;
  if (c.resume) {
    const auto found = list_checkpoints(c.out_dir);
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

  // A checkpoint of a ZeRO run holds every parameter's moments: the ranks gather them (each
  // sends its own), and rank 0 writes them through an AdamW over all the parameters.
  auto save = [&]() -> std::string {
    std::string path;
    if (zero) {
      std::vector<Tensor> m, v;
      const std::vector<Tensor> mine = opt.state();
      std::map<const TensorImpl*, std::size_t> index;  // AdamW's order (its groups) of this rank's tensors
      const std::vector<Tensor> in_group_order = opt.params();
      for (std::size_t i = 0; i < in_group_order.size(); ++i) index[in_group_order[i].impl()] = i;
      for (const Tensor& p : params) {
        const auto it = index.find(p.impl());
        const bool have = it != index.end() && !mine.empty();
        m.push_back(have ? mine[2 * it->second].contiguous() : zeros_like(p));
        v.push_back(have ? mine[2 * it->second + 1].contiguous() : zeros_like(p));
      }
      dist::allgather_owned(m, split);
      dist::allgather_owned(v, split);
      if (main_rank) {
        optim::AdamW whole(optim::decay_groups(params, adamw_options));
        if (opt.step_count() > 0) {
          std::map<const TensorImpl*, std::size_t> at;
          for (std::size_t i = 0; i < params.size(); ++i) at[params[i].impl()] = i;
          std::vector<Tensor> state_in_group_order;
          for (const Tensor& p : whole.params()) {
            state_in_group_order.push_back(m[at.at(p.impl())]);
            state_in_group_order.push_back(v[at.at(p.impl())]);
          }
          whole.load_state(state_in_group_order, opt.step_count());
        }
        TrainingState all{c, model, whole, data_gen, state.step};
        path = save_checkpoint(all, tokenizer_copy);
      }
    } else if (main_rank) {
      path = save_checkpoint(state, tokenizer_copy);
    }
    // No rank goes on (or exits, which makes mpirun stop the others) while rank 0 writes.
    dist::barrier();
    // Every rank returns the path rank 0 wrote (the name depends on the step alone).
    return main_rank ? path : c.out_dir + "/" + checkpoint_name(state.step);
  };
  std::printf("model: %lld parameters (%lld layers, %lld heads, %lld wide, context %lld, vocab %lld%s); "
              "data: %llu train / %llu val tokens; %d threads%s\n",
              static_cast<long long>(model.num_parameters()), static_cast<long long>(mc.n_layer),
              static_cast<long long>(mc.n_head), static_cast<long long>(mc.n_embd), static_cast<long long>(mc.block_size),
              static_cast<long long>(mc.vocab_size), mc.composed ? ", composed ops" : "",
              static_cast<unsigned long long>(data.size(Split::Train)), static_cast<unsigned long long>(data.size(Split::Val)),
              get_num_threads(), c.dtype == "bf16" ? "; bf16 mixed precision" : "");

  const optim::CosineSchedule schedule{c.learning_rate, c.min_lr, c.warmup_iters, c.lr_decay_iters};
  std::ofstream log;  // rank 0's; the other ranks' stays closed and ignores what is written to it
  if (main_rank) log.open(c.out_dir + "/log.jsonl", c.resume ? std::ios::app : std::ios::trunc);

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

  // Mixed precision (chapter 18): from here on, evaluation and training steps (forward and
  // backward) run their matmuls on bf16 copies; nothing else changes.
  const Autocast autocast(c.dtype == "bf16" ? kBFloat16 : kFloat32);

  interrupted = false;
  auto previous_handler = std::signal(SIGINT, on_sigint);
  profiler::reset();
  profiler::enable(c.profile);
  const auto run_start = std::chrono::steady_clock::now();
  std::int64_t steps_this_run = 0;
  const std::int64_t tokens_per_step = c.batch_size * c.block_size * c.grad_accum * ranks;
  // Inside the training steps: their time, and how much of it went to collectives and to
  // waiting for the other ranks (chapter 19's measurement).
  double step_seconds = 0, step_communicating = 0, step_waiting = 0;
  const double in_backward_at_start = dist::seconds_communicating_in_backward();

  // A step leaves its loss and gradient norm where they were computed; they are read (one
  // copy for all of them) only when the loop logs, evaluates or saves. On a GPU every read
  // makes the host wait for the device, so the steps in between never wait: the GPU stays
  // busy, and such a step could be captured as a CUDA graph (chapter 17).
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
    std::vector<double> values = ops::cat(scalars).to_vector<double>();
    if (ranks > 1) {
      // Each rank's share of a step's loss, summed over the ranks (in rank order: the sum one
      // process would take over the same micro-steps). The norm is already the same on every
      // rank: all but rank 0 send 0 for it, which adds nothing.
      if (!main_rank) {
        std::size_t at = 0;
        for (const Pending& p : pending) {
          at += p.losses.size();
          if (p.grad_norm.defined()) values[at++] = 0.0;
        }
      }
      values = dist::sum_over_ranks(values);
    }
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
    const bool replay = c.cuda_graph && steps_this_run > 0;
    if (!step_graph.defined()) opt.zero_grad();  // a captured step writes the gradients it made
    if (zero) model.zero_grad();  // the parameters this rank's AdamW does not hold
    fault_drill(step);
    const auto step_start = std::chrono::steady_clock::now();
    const double communicating_at_start = dist::seconds_communicating();
    Pending done{step, lr, {}, Tensor()};
    // The step's batch is ranks x grad_accum micro-batches drawn one after another from one
    // stream, the same on every rank; rank r trains on micro-batches r * grad_accum ... and
    // skips the draws of the others. One rank draws them all, as before.
    const std::int64_t micro_steps = c.grad_accum * ranks;
    data.skip_batches(c.grad_accum * rank, c.batch_size, data_gen);
    if (replay) {  // one micro-step on one rank (validate() and the checks above)
      Tensor x, y;
      data.batch(Split::Train, c.batch_size, c.block_size, data_gen, x, y);
      opt.prepare_graph_step();
      if (step_graph.defined()) {
        graph_x.copy_(x), graph_y.copy_(y);
      } else {
        graph_x = x.to(device), graph_y = y.to(device);
        step_graph = cuda::Graph::capture([&] {
          const Tensor loss = model.loss(model.forward(graph_x), graph_y);
          loss.backward();
          graph_loss = loss.detach();
          if (c.grad_clip > 0) graph_norm = optim::clip_grad_norm(model.parameters(), c.grad_clip);
          opt.step();
        });
      }
      step_graph.replay();
      done.losses.push_back(graph_loss.clone());  // the graph overwrites its own at the next replay
      if (graph_norm.defined()) done.grad_norm = graph_norm.clone();
    } else {
      for (std::int64_t micro = 0; micro < c.grad_accum; ++micro) {
        Tensor x, y;
        data.batch(Split::Train, c.batch_size, c.block_size, data_gen, x, y);
        x = x.to(device), y = y.to(device);
        Tensor loss = model.loss(model.forward(x), y);
        if (micro_steps > 1) loss = loss / static_cast<double>(micro_steps);
        const bool last_micro = micro == c.grad_accum - 1;
        const autograd::BackwardHooksGuard hooks(last_micro && !zero ? reducer.hooks() : autograd::BackwardHooks{});
        loss.backward();
        done.losses.push_back(loss.detach());
      }
    }
    data.skip_batches(c.grad_accum * (ranks - 1 - rank), c.batch_size, data_gen);
    const double waiting_at_start = dist::seconds_waiting();
    // So that what follows times the collectives, not a slower rank. With overlap, buckets may
    // still be in flight: MPI moves them on inside this barrier too (counted as waiting).
    dist::wait_for_all();
    if (zero) {
      // ZeRO stage 1: each rank receives the summed gradients of its own parameters only, clips
      // them with the global norm (summed from every rank's share, in the parameters' order, as
      // clip_grad_norm does), updates them, and sends them to the others.
      std::vector<Tensor> grads;
      for (const Tensor& p : params) grads.push_back(p.grad());
      dist::reduce_scatter_sum(grads, split);
      if (c.grad_clip > 0) done.grad_norm = clip_sharded(params, split, rank, c.grad_clip);
      opt.step();
      NoGradGuard no_grad;
      dist::allgather_owned(params, split);
    } else if (!replay) {  // a replayed step did all of this in its graph
      reducer.finish();  // the buckets not yet sent, and the wait for all of them
      if (c.grad_clip > 0) done.grad_norm = optim::clip_grad_norm(model.parameters(), c.grad_clip);
      opt.step();
    }
    step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    step_communicating += dist::seconds_communicating() - communicating_at_start;
    step_waiting += dist::seconds_waiting() - waiting_at_start;
    pending.push_back(std::move(done));
    result.step_waits += cuda::waits().total() - waits_before.total();
    state.step = step + 1;
    ++steps_this_run;
    const bool last = state.step == c.max_iters;
    const std::int64_t every = c.checkpoint_interval > 0 ? c.checkpoint_interval : c.eval_interval;
    const bool periodic = state.step % every == 0 && !last;  // the last one is saved below
    // Ctrl-C reaches the ranks at different moments; they stop together, at the first step
    // after which any rank has seen it (one more tiny collective a step, under mpirun only).
    // `interrupted` itself is only ever set, by the handler: a signal that lands while the
    // ranks compare notes is counted at the next step.
    const bool stop = ranks > 1 ? dist::sum_over_ranks({interrupted ? 1.0 : 0.0})[0] > 0 : interrupted.load();
    if (step % c.log_interval == 0 || last || periodic || stop) read_pending();
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    const double per_step = elapsed / static_cast<double>(steps_this_run);
    if (step % c.log_interval == 0 || last) {
      if (::isatty(STDOUT_FILENO)) std::printf("\r%60s\r", "");
      std::printf("step %5lld | loss %.4f | lr %.2e | %7.1f ms/step | %7.0f tok/s | ETA %s\n", static_cast<long long>(step),
                  result.losses.back(), lr, last_ms, static_cast<double>(tokens_per_step) / per_step,
                  duration(per_step * static_cast<double>(c.max_iters - state.step)).c_str());
    }
    progress_bar(state.step, c.max_iters, per_step * static_cast<double>(c.max_iters - state.step));
    if (periodic || stop) result.last_checkpoint = save();
    if (stop) {
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
  if (dist::collectives_active() && step_seconds > 0) {  // several ranks, or BRRR_FORCE_COLLECTIVES
    result.communication_share = step_communicating / step_seconds;
    const double per = 1e3 / static_cast<double>(std::max<std::int64_t>(steps_this_run, 1));  // ms a step
    std::printf("data parallel: rank 0 spent %.1f%% of the training steps in collectives (%.2f ms a step of %.2f ms) "
                "and %.1f%% waiting for the other ranks; %.1f MB sent; %zu of %zu buckets sent during the backward\n",
                100.0 * result.communication_share, step_communicating * per, step_seconds * per,
                100.0 * step_waiting / step_seconds, static_cast<double>(dist::bytes_sent()) / 1e6,
                reducer.buckets_sent_during_backward(), zero ? std::size_t{0} : reducer.buckets());
    log << Json{{"event", "data_parallel"}, {"ranks", ranks}, {"zero", c.zero}, {"communication_share", result.communication_share},
                {"overlap_comm", c.overlap_comm && !zero}, {"buckets", zero ? std::size_t{0} : reducer.buckets()},
                {"buckets_sent_during_backward", reducer.buckets_sent_during_backward()},
                {"waiting_share", step_waiting / step_seconds},
                {"communication_in_backward_share",
                 (dist::seconds_communicating_in_backward() - in_backward_at_start) / step_seconds}, {"step_ms", step_seconds * per},
                {"optimizer_state_bytes", result.optimizer_state_bytes}}.dump()
        << "\n";
  }
  if (result.interrupted) return result;
  evaluate(state.step);
  result.last_checkpoint = save();
  std::printf("saved %s\n", result.last_checkpoint.c_str());

  log.close();
  if (!main_rank) return result;
  plot_loss_curves(c.out_dir, c.preset);
  plot_attention(c.out_dir, model, data.tokenizer(), c.block_size);
  std::printf("wrote %s/loss.png and %s/attention.png\n", c.out_dir.c_str(), c.out_dir.c_str());
  if (c.sample_tokens > 0) print_sample(model, data.tokenizer(), c.sample_tokens, c.seed);
  return result;
}
}  // namespace

TrainResult run_training(TrainConfig c) {
  if (dist::init() == 1) return train_this_rank(std::move(c));
  // Several ranks: an error on this one must stop the others, which would otherwise wait for
  // it in the next collective forever. abort_all prints it and has mpirun end every rank.
  try {
    return train_this_rank(std::move(c));
  } catch (const std::exception& e) {
    dist::abort_all(e.what());
  }
}

}  // namespace brrr::train
