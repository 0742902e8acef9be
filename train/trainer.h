// train/trainer.h: `brrr train`, the training loop of chapter 08.
// Read before: data.h, brrr/models/gpt.h, brrr/optim.h. Read next: trainer.cpp.
//
// A run is a TrainConfig: a named preset, then a JSON file, then command-line flags, each
// overriding the last. The loop: for every step, set the learning rate (warmup + cosine),
// accumulate gradients over grad_accum micro-batches, clip them to grad_clip, take an AdamW
// step; every eval_interval steps, average the train and validation loss over eval_iters
// batches, and save a checkpoint every checkpoint_interval steps (by default, every eval). A checkpoint holds everything the next step depends on
// (weights, AdamW moments and step, every random generator, the data stream), so --resume
// continues bit for bit as if the run had never stopped.
#pragma once
#include <cstdio>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "brrr/dtype.h"

namespace brrr::train {

struct TrainConfig {
  std::string preset = "cpu-tiny";
  // model (defaults come from the preset)
  std::int64_t n_layer = 4, n_head = 4, n_embd = 128, block_size = 64;
  double dropout = 0.0;
  bool bias = true, composed = false;
  // data
  std::string data;  // a text file (default: ../shared/data/tinyshakespeare.txt when it exists) or shards (data.h)
  std::string tokenizer = "char";
  int bpe_vocab_size = 4096;
  double val_fraction = 0.1;
  // Start from this model (a Hugging Face GPT-2 folder or a brrr checkpoint): its weights, its
  // shape and its tokenizer (tokenizer and bpe_vocab_size are then unused). n_layer, n_head,
  // n_embd and block_size must be the model's: apply_init_from() sets them.
  std::string init_from;
  // optimisation (nanoGPT's names)
  std::int64_t batch_size = 12, grad_accum = 1, max_iters = 2000, warmup_iters = 100, lr_decay_iters = 2000;
  double learning_rate = 1e-3, min_lr = 1e-4, weight_decay = 0.1, beta1 = 0.9, beta2 = 0.99, grad_clip = 1.0;
  // bookkeeping
  // checkpoint_interval 0 means: save whenever the model is evaluated (every eval_interval).
  std::int64_t eval_interval = 250, eval_iters = 20, log_interval = 10, checkpoint_interval = 0, keep_checkpoints = 3;
  std::int64_t sample_tokens = 300;
  std::string out_dir = "out";
  std::string device = "cpu";  // cpu, cuda, emulator or auto (the GPU if there is one)
  // float32, or bf16: mixed precision (chapter 18) with bf16 in memory: activations, their
  // gradients and what backward saves are bf16 tensors, every sum inside a kernel float32;
  // weights, their gradients, AdamW's state and checkpoints stay float32.
  std::string dtype = "float32";
  // Under dtype bf16, the residual stream's dtype: bf16 (as llm.c keeps it) or float32 (as
  // PyTorch's autocast leaves it). Chapter 18, section 10 measures both.
  std::string residual = "bf16";
  std::uint64_t seed = 1337;
  bool resume = false;
  bool profile = false;  // print where the time went, op by op, at the end
  // Also write the ops of the run as a timeline, a Chrome trace (Perfetto, chrome://tracing):
  // one slice per op with its shapes, forward, backward and optimizer apart, one per step above
  // them. Turns the profiler on. Under mpirun, rank r > 0 writes FILE.rank<r>.
  std::string profile_trace;
  // On a CUDA device: capture the step (forward, backward, clipping, AdamW) once as a CUDA
  // graph and replay it every step after (chapter 17). On by default; a run it cannot be (dropout,
  // grad_accum, several ranks, the profiler) takes plain steps and says why. Nothing on the CPU.
  bool cuda_graph = true;
  // On a CUDA device: float32 matmuls on the tensor cores in TF32 (10-bit mantissas, about 1e-3
  // relative error), as PyTorch's allow_tf32 and llm.c's default; off by default: full float32.
  // bf16 GEMMs are the same either way.
  bool tf32 = false;
  int threads = 0;  // 0: all cores
  // data parallel (chapter 19; used only under mpirun with several ranks)
  int zero = 0;            // 1: ZeRO stage 1, each rank keeps AdamW's moments of its share of the parameters
  double bucket_mb = 25;   // gradients are summed across ranks in buckets of this size (PyTorch DDP's default)
  bool overlap_comm = true;  // a bucket is summed as soon as its gradients are final, while the backward goes on

  static TrainConfig from_preset(const std::string& name);  // throws on an unknown name
  static std::vector<std::string> preset_names();
  void apply_json(const std::string& json);  // unknown keys are errors
  // With init_from set: n_layer, n_head, n_embd and block_size become the model's. A key in
  // `given` (the settings the user wrote: flags, --config keys) whose value differs is an error
  // naming the key, the value and the model's.
  void apply_init_from(const std::vector<std::string>& given);
  // Every key with its JSON type ("integer", "number", "bool", "string"), for the CLI.
  // Every key: its JSON type ("integer", "number", "bool", "string"), its group of the help
  // ("Model", "Data", ...) and one line of what it does, with its unit. For the CLI's help.
  struct Key {
    std::string name, type, group, help;
  };
  static std::vector<Key> keys();
  std::string to_json() const;
  void validate() const;
};

struct TrainResult {
  std::int64_t steps_done = 0;
  double last_train_loss = 0, last_val_loss = 0;
  std::vector<double> losses;  // every step's training loss
  std::string last_checkpoint;
  bool interrupted = false;
  // What the training steps themselves (not their logging, evaluation or checkpoints) made the
  // host wait for on a CUDA device: 0 is the goal (chapter 17), and a test holds it there.
  std::uint64_t step_waits = 0;
  // Inside the training steps from this run's third on (after the plain first step and the
  // capture): blocks the caching allocator handed out (a graph's replays: the loss's and the
  // gradient norm's copies the host reads later, 2 a step; a plain step: every activation), and
  // the device allocations under them (cudaMalloc: 0 is the goal, it makes the host wait).
  std::uint64_t later_step_blocks = 0, later_step_device_allocations = 0;
  // Data parallel (chapter 19): the ranks, the share of the training steps' time this rank
  // spent in collectives, and the bytes of AdamW's moments this rank holds.
  int ranks = 1;
  double communication_share = 0;
  std::int64_t optimizer_state_bytes = 0;
};

// --device: cpu, cuda (a GPU, or an error saying there is none), emulator (the CUDA kernels on
// the CPU's SIMT emulator), auto (the GPU if there is one, else the CPU); prints which to
// `report` (brrr sample's stdout is the text, so it says it on stderr).
Device resolve_device(const std::string& name, std::FILE* report = stdout);

// Why a run's steps cannot be one CUDA graph (chapter 17: dropout, grad_accum, several ranks,
// the profiler), or "" when they can; the run then takes plain steps and prints it.
std::string graph_refusal(const TrainConfig& c, int ranks);

// Runs the whole loop; throws brrr::Error on bad input, and stops (with a message naming
// the step and the last good checkpoint) on a NaN or infinite loss. Under mpirun with N ranks
// (chapter 19) every rank calls it: each draws its share of every batch, the gradients are
// summed across the ranks before clipping, and rank 0 alone writes the log, the plots and the
// checkpoints. An error on one rank stops them all (dist::abort_all).
TrainResult run_training(TrainConfig config);

}  // namespace brrr::train
