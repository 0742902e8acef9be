// bench/bench_decode.cpp: generation on the CPU at batch 1 (chapter 08, "Why decoding is
// memory-bound"): decode tokens/s and the prefill of a long prompt, on the Decoder
// (brrr/models/decode.h) with float32 or bfloat16 weights, beside the bandwidth floor.
//   build/bench/bench_decode [SHAPE] [NEW_TOKENS] [PREFILL] [DTYPE] [--old]
//   SHAPE gpt-12m (6 layers, 384 wide, vocab 4096) or gpt2 (12, 768, 50257); defaults
//   gpt-12m 250 512 float32. --old also times the cached forward of kv_cache.cpp (float32).
// Weights are random (the speed does not depend on them). Both shapes get block_size 1024
// (gpt-12m's own is 256), so the prefill of 512 tokens fits. Decode: a 4-token prompt, then
// NEW_TOKENS greedy tokens (the prompt's prefill excluded from the time); the median of 3 runs.
// Prefill: PREFILL tokens into an empty cache, up to the logits of the last; the median of 3.
// The floor: the weight bytes one step reads over the copy bandwidth that the kernel lab
// measures on this machine (lab/timing.cpp: a parallel memcpy, read + write bytes counted);
// the read line, a read-only stream's bandwidth (bench_util.h) and the share of it that decode's
// weight reads reach; the roof line adds the lab's float32 matmul peak and the ridge point; the peak line, the
// arithmetic peak of an FMA loop (bench_util.h) and the prefill's share of it.
// bench/decode.sh runs this beside transformers (bench/decode_peer.py) and prints the ratios.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "brrr/brrr.h"
#include "brrr/models/decode.h"
#include "brrr/models/generate.h"
#include "lab/kernel_lab.h"

using namespace brrr;

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  bool old = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--old") == 0) old = true;
    else args.push_back(argv[i]);
  }
  const std::string shape = args.size() > 0 ? args[0] : "gpt-12m";
  const std::int64_t new_tokens = args.size() > 1 ? std::atoll(args[1].c_str()) : 250;
  const std::int64_t prefill = args.size() > 2 ? std::atoll(args[2].c_str()) : 512;
  const std::string dtype_name = args.size() > 3 ? args[3] : "float32";
  if ((shape != "gpt-12m" && shape != "gpt2") || (dtype_name != "float32" && dtype_name != "bf16") ||
      new_tokens < 1 || prefill < 1 || prefill > 1024 || new_tokens + 4 > 1024) {
    std::fprintf(stderr, "usage: bench_decode [gpt-12m|gpt2] [NEW_TOKENS] [PREFILL <= 1024] [float32|bf16] [--old]\n");
    return 2;
  }
  models::GPTConfig c = models::gpt_preset(shape);
  c.block_size = 1024;
  Generator g(1);
  models::GPT model(c, g);
  model.eval();
  const DType dtype = dtype_name == "bf16" ? kBFloat16 : kFloat32;
  models::Decoder decoder(model, dtype);
  const double bytes = static_cast<double>(decoder.weight_bytes_per_token());
  std::printf("# bench_decode %s %lld %lld %s: %lld parameters, %d threads, %s\n", shape.c_str(),
              static_cast<long long>(new_tokens), static_cast<long long>(prefill), dtype_name.c_str(),
              static_cast<long long>(model.num_parameters()), get_num_threads(), bench::cpu_model().c_str());

  const std::vector<std::uint32_t> prompt = {1, 2, 3, 4};
  models::GenerateOptions o;
  o.max_new_tokens = new_tokens;
  o.temperature = 0;
  o.weights = dtype;
  double runs[3];
  for (double& r : runs) {
    models::DecodeState state;
    const float* logits = decoder.prefill(state, prompt);
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < new_tokens; ++i) {
      const std::uint32_t next = static_cast<std::uint32_t>(std::max_element(logits, logits + c.vocab_size) - logits);
      logits = decoder.step(state, next);
    }
    r = seconds_since(start);
  }
  const double decode_s = bench::median3(runs[0], runs[1], runs[2]);
  const double tokens_per_s = static_cast<double>(new_tokens) / decode_s;

  std::vector<std::uint32_t> long_prompt(static_cast<std::size_t>(prefill));
  for (std::size_t i = 0; i < long_prompt.size(); ++i) long_prompt[i] = static_cast<std::uint32_t>((i * 7919) % c.vocab_size);
  for (double& r : runs) {
    models::DecodeState state;
    const auto start = std::chrono::steady_clock::now();
    decoder.prefill(state, long_prompt);
    r = seconds_since(start);
  }
  const double prefill_s = bench::median3(runs[0], runs[1], runs[2]);

  const lab::Peaks peaks = lab::measure_peaks(lab::LabDevice::CPU, true, true);
  const double floor_s = bytes / (peaks.bandwidth_gbs * 1e9);
  std::printf("decode  %s %-7s %8.1f tokens/s  (%lld tokens, %.3f s)\n", shape.c_str(), dtype_name.c_str(), tokens_per_s,
              static_cast<long long>(new_tokens), decode_s);
  std::printf("prefill %s %-7s %8.3f s for %lld tokens  (%.0f tokens/s)\n", shape.c_str(), dtype_name.c_str(),
              prefill_s, static_cast<long long>(prefill), static_cast<double>(prefill) / prefill_s);
  std::printf("floor   %s %-7s %.1f MB of weights per token / %.1f GB/s (%s) = %.2f ms: %.1f tokens/s; "
              "decode reaches %.0f%% of it\n",
              shape.c_str(), dtype_name.c_str(), bytes / 1e6, peaks.bandwidth_gbs, peaks.bandwidth_how.c_str(),
              floor_s * 1e3, 1.0 / floor_s, 100.0 * tokens_per_s * floor_s);
  // The copy figure counts a byte read and a byte written, so a copy moves each at about half of
  // it; decoding mostly reads. The read line says how fast the weights could stream.
  const double read_gbs = bench::read_stream_gbs(get_num_threads());
  std::printf("read    %.1f GB/s (a read-only stream of 256 MiB, %d threads): decode reads its weights at %.1f GB/s, "
              "%.0f%% of it\n",
              read_gbs, get_num_threads(), bytes * tokens_per_s / 1e9, 100.0 * bytes * tokens_per_s / 1e9 / read_gbs);
  // The roofline (chapter 11): a GEMV does 2 FLOPs per weight read, 0.5 FLOP per byte in
  // float32, 1 in bf16; the ridge point is where the arithmetic would become the limit.
  std::printf("roof    %.0f GFLOP/s (%s) / %.1f GB/s: ridge at %.1f FLOP/byte; decode's GEMV has %.1f, a prefill of "
              "%lld rows %.0f\n",
              peaks.tflops * 1e3, peaks.flops_how.c_str(), peaks.bandwidth_gbs, peaks.tflops * 1e3 / peaks.bandwidth_gbs,
              dtype == kFloat32 ? 0.5 : 1.0, static_cast<long long>(prefill),
              (dtype == kFloat32 ? 0.5 : 1.0) * static_cast<double>(prefill));
  // The compute peak (bench_util.h's FMA loop) and what the prefill did, as the Decoder does it:
  // q, k and v of every row in every layer; the rest of the last layer (attention, projection,
  // MLP) and the head only for the last row, whose logits are wanted. 2 FLOPs per multiply-add;
  // attention counts q.k and the weighted sum of values, row t over t + 1 positions.
  const double C = static_cast<double>(c.n_embd), T = static_cast<double>(prefill), L = static_cast<double>(c.n_layer);
  const double prefill_flops = 2.0 * 3 * C * C * T * L + 2.0 * 9 * C * C * (T * (L - 1) + 1) +
                               4.0 * C * T * (T + 1) / 2 * (L - 1) + 4.0 * C * T + 2.0 * C * static_cast<double>(c.vocab_size);
  const double peak = bench::fma_peak_gflops(get_num_threads());
  std::printf("peak    %.0f GFLOP/s (an FMA loop, %d-wide, %d threads): the prefill's %.1f GFLOP ran at %.0f GFLOP/s, %.0f%% of it\n",
              peak, bench::kPeakLanes, get_num_threads(), prefill_flops / 1e9, prefill_flops / prefill_s / 1e9,
              100.0 * prefill_flops / prefill_s / 1e9 / peak);
  if (old) {  // the cached forward of kv_cache.cpp: tensors and ops, float32
    o.tensor_cache = true;
    o.weights = kFloat32;
    const auto start = std::chrono::steady_clock::now();
    models::generate(model, prompt, o);
    const double s = seconds_since(start);
    std::printf("old     %s float32 %8.1f tokens/s  (GPT::forward_cached, prompt's prefill included)\n", shape.c_str(),
                static_cast<double>(new_tokens) / s);
  }
  return 0;
}
