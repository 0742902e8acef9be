// bench/bench_gpt_step.cpp: one GPT training step (forward, backward, AdamW) on the CPU or
// the GPU. Chapter 08 (training) and chapter 17 (putting it together). Peer:
// bench/gpt_step_peer.py (PyTorch, the same model, batch and threads or GPU);
// bench/gpt_step.sh (CPU) and bench/gpu_step.sh (GPU) run both.
//   build/bench/bench_gpt_step PRESET BATCH [STEPS] [--composed] [--profile] [--device cpu|cuda|emulator]
//                              [--dtype float32|bf16] [--cuda_graph] [--trace FILE] [--grad_clip X [--clip_apart]]
// --trace FILE profiles three more steps and writes them as a Chrome trace (brrr/profiler.h):
// open it in ui.perfetto.dev or chrome://tracing to see one step op by op.
// --cuda_graph (a CUDA device) replays the whole step (forward, backward, AdamW) as one CUDA
// graph, captured after one plain step, as brrr train --cuda_graph does (chapter 17), and
// prints the graph's nodes (kernels, copies and memsets: what one step launches) a step and a layer.
// --grad_clip X clips the gradients' global norm to X as brrr train does on one GPU
// (AdamW::step_with_clipping: on a CUDA device one pass for the norm, one for the update);
// --clip_apart clips first and then steps (optim::clip_grad_norm, as PyTorch's
// clip_grad_norm_ then step, and brrr train on several ranks). The peer does not clip.
// --dtype bf16 runs the step as brrr train --dtype bf16 does (chapter 18): activations bf16 in
// memory (GPT::set_precision), the residual stream bf16 or, with --residual float32, float32;
// the peer's --dtype bf16 is torch.autocast in bfloat16. --autocast_only: float32 activations,
// only the matmuls' operands rounded (brrr::Autocast), the bf16 step before chapter 18's section 10.
// After the timing it prints the step's activation memory on the device: the tensor bytes
// alive at the end of the forward beyond those alive before it (what backward saved, the
// logits' gradient and the parameters' bf16 copies), and the peak over the whole step beyond
// the same baseline.
// PRESET is cpu-tiny, shakespeare-char, gpt-12m, gpt2 or gpt2-124m (brrr/models/gpt.h); data are random
// tokens drawn on the host and copied to the device each step, as brrr train does.
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "brrr/brrr.h"
#include "brrr/models/gpt.h"
#include "brrr/memory.h"
#include "brrr/profiler.h"

using namespace brrr;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_gpt_step PRESET BATCH [STEPS] [--composed] [--profile] [--device cpu|cuda|emulator] "
                         "[--dtype float32|bf16] [--cuda_graph] [--trace FILE] [--grad_clip X [--clip_apart]]\n");
    return 2;
  }
  models::GPTConfig c = models::gpt_preset(argv[1]);
  const std::int64_t B = std::atoll(argv[2]);
  int steps = 10;
  bool profile = false, use_graph = false, composed = false, autocast_only = false, clip_apart = false;
  double grad_clip = 0;
  std::string device_name = "cpu", dtype = "float32", residual = "bf16", trace_path;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--composed")) composed = true;
    else if (!std::strcmp(argv[i], "--profile")) profile = true;
    else if (!std::strcmp(argv[i], "--cuda_graph")) use_graph = true;
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device_name = argv[++i];
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) dtype = argv[++i];
    else if (!std::strcmp(argv[i], "--residual") && i + 1 < argc) residual = argv[++i];
    else if (!std::strcmp(argv[i], "--autocast_only")) autocast_only = true;
    else if (!std::strcmp(argv[i], "--trace") && i + 1 < argc) trace_path = argv[++i];
    else if (!std::strcmp(argv[i], "--grad_clip") && i + 1 < argc) grad_clip = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--clip_apart")) clip_apart = true;
    else steps = std::atoi(argv[i]);
  }
  if (dtype != "float32" && dtype != "bf16") {
    std::fprintf(stderr, "bench_gpt_step: --dtype must be float32 or bf16, got '%s'\n", dtype.c_str());
    return 2;
  }
  if (residual != "float32" && residual != "bf16") {
    std::fprintf(stderr, "bench_gpt_step: --residual must be float32 or bf16, got '%s'\n", residual.c_str());
    return 2;
  }
  const Autocast autocast(dtype == "bf16" ? kBFloat16 : kFloat32);
  const std::optional<Device> chosen = bench::bench_device(device_name, "bench_gpt_step");
  if (!chosen) return 1;
  const Device device = *chosen;
  if (composed) ops::select_composed();  // after the device: its kernels are registered by now
  if (use_graph && !device.is_cuda()) {
    std::fprintf(stderr, "bench_gpt_step: --cuda_graph needs --device cuda or emulator\n");
    return 2;
  }
  Generator gen(1337);
  models::GPT model(c, gen);
  model.to(device);
  const bool bf16_memory = dtype == "bf16" && !autocast_only;
  if (bf16_memory) model.set_precision(kBFloat16, residual == "bf16" ? kBFloat16 : kFloat32);
  optim::AdamW opt(optim::decay_groups(model.parameters(), optim::AdamWOptions(1e-3).betas({0.9, 0.95}).weight_decay(0.1)));
  const std::int64_t T = c.block_size;
  const auto update = [&] {
    if (grad_clip <= 0) opt.step();
    else if (clip_apart) optim::clip_grad_norm(model.parameters(), grad_clip), opt.step();
    else opt.step_with_clipping(grad_clip);
  };
  auto step = [&] {
    Tensor idx = randint(0, c.vocab_size, {B, T}, gen), targets = randint(0, c.vocab_size, {B, T}, gen);
    Tensor loss = model.loss(model.forward(idx), targets);
    opt.zero_grad();
    loss.backward();
    update();
    if (device.is_cuda()) cuda::synchronize();  // the step is done when the GPU is done
  };
  cuda::Graph graph;
  Tensor graph_idx, graph_targets;  // the graph's input: each step's batch is copied into them
  auto graph_step = [&] {
    if (!graph.defined()) {
      step();  // sets up cuBLAS, the workspace and the cached blocks
      graph_idx = randint(0, c.vocab_size, {B, T}, gen).to(device);
      graph_targets = randint(0, c.vocab_size, {B, T}, gen).to(device);
      opt.zero_grad();  // the captured backward makes the gradients, and writes them at every replay
      opt.prepare_graph_step();
      graph = cuda::Graph::capture([&] {
        model.loss(model.forward(graph_idx), graph_targets).backward();
        update();
      });
      // What one step launches, counted by the driver: the kernels, copies and memsets recorded.
      std::printf("graph: %zu nodes a step (kernels, copies and memsets), %.1f a layer\n", graph.nodes(),
                  static_cast<double>(graph.nodes()) / static_cast<double>(c.n_layer));
    } else {
      graph_idx.copy_(randint(0, c.vocab_size, {B, T}, gen));
      graph_targets.copy_(randint(0, c.vocab_size, {B, T}, gen));
      opt.prepare_graph_step();  // this step's learning rate and step count, where the graph reads them
    }
    graph.replay();
    cuda::synchronize();
  };
  const double s = use_graph ? bench::median_seconds(graph_step, steps, 2) : bench::median_seconds(step, steps, 2);
  // Forward + backward FLOPs, as in the PaLM/nanoGPT estimate: 6 per parameter per token
  // (counting every parameter, wpe and LayerNorm too, as that estimate does), plus attention:
  // 2 * 2 * T * C per token per layer forward (scores and weighted sum), times 3 with the
  // backward, halved because the causal mask makes half of the scores zero.
  const double tokens = static_cast<double>(B * T);
  const double flops = 6.0 * c.num_parameters() * tokens + 3.0 * 4.0 * T * c.n_embd * c.n_layer * tokens / 2;
  const std::string where = device.is_cuda() ? cuda::device_name() : "threads=" + std::to_string(get_num_threads());
  std::printf("brrr %s (%s%s) B=%lld T=%lld %s: %.1f ms/step, %.0f tokens/s, %.1f GFLOP/s\n", argv[1],
              composed ? "composed" : "kernels",
              (std::string(!bf16_memory && dtype == "bf16" ? ", bf16 autocast" : "") +
               (bf16_memory ? ", bf16 activations, " + residual + " residual" : "") + (use_graph ? ", CUDA graph" : "") +
               (grad_clip > 0 ? (clip_apart ? ", clipped apart" : ", clipped") : ""))
                  .c_str(), static_cast<long long>(B), static_cast<long long>(T), where.c_str(),
              s * 1e3, tokens / s, flops / s / 1e9);
  if (!use_graph) {  // activation memory: one more step, forward and backward measured apart
    Tensor idx = randint(0, c.vocab_size, {B, T}, gen), targets = randint(0, c.vocab_size, {B, T}, gen);
    opt.zero_grad();
    const std::size_t before = tensor_bytes(device.type);
    reset_peak_tensor_bytes(device.type);
    Tensor loss = model.loss(model.forward(idx), targets);
    const std::size_t held = tensor_bytes(device.type) - before;
    loss.backward();
    update();
    loss = Tensor();
    const std::size_t peak = peak_tensor_bytes(device.type) - before;
    std::printf("activation memory: %.1f MB held after the forward, %.1f MB at the step's peak\n", held / 1e6,
                peak / 1e6);
  }
  if (profile || !trace_path.empty()) {
    profiler::reset();
    profiler::trace(!trace_path.empty());
    profiler::enable();
    for (int i = 0; i < 3; ++i) {
      const profiler::Span span("step " + std::to_string(i));
      use_graph ? graph_step() : step();
    }
    profiler::enable(false);
    std::printf("%s", profiler::report(3).c_str());
    if (!trace_path.empty())
      std::printf("trace: %zu ops and steps written to %s\n", profiler::write_trace(trace_path), trace_path.c_str());
  }
  return 0;
}
