// bench/bench_decode_gpu.cpp: generation on the GPU (chapter 20, "Decoding on the GPU"): the
// DeviceDecoder's decoding tokens/s at batch B, beside the bandwidth floor of its steps.
//   build/bench/bench_decode_gpu [SHAPE] [NEW_TOKENS] [BATCH] [DTYPE] [--emulator]
//   SHAPE gpt-12m (6 layers, 384 wide, vocab 4096) or gpt2 (12, 768, 50257); defaults gpt2 200 1
//   bf16. --emulator runs the kernels on the SIMT emulator (a check that it runs; its times say
//   nothing of a GPU's).
// Weights are random (the speed does not depend on them), block_size 1024. Each of the BATCH
// sequences gets a 4-token prompt, then NEW_TOKENS greedy steps of all of them at once (the
// argmax on the device, DeviceDecoder::greedy: BATCH ids come back a step, as in brrr sample
// --temperature 0); tokens/s counts
// every sequence's tokens, the prompts' prefill excluded; the median of 3 runs. The decoding
// steps are CUDA graphs from the second on (decode_device.h).
// The floor: a step reads every weight once and each sequence's cache (keys and values, every
// layer, up to its length), so its least time is those bytes over the copy bandwidth the kernel
// lab measures on the device; tokens/s at the floor is BATCH over that time, at the run's mean
// length. bench/decode_gpu_peer.py is transformers' generate on the same GPU; scripts/gpu.sh's
// step `decode` runs both.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "brrr/brrr.h"
#include "brrr/cuda.h"
#include "brrr/models/decode.h"
#include "brrr/models/decode_device.h"
#include "lab/kernel_lab.h"

using namespace brrr;

int main(int argc, char** argv) {
  std::vector<std::string> args;
  bool emulator = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--emulator") == 0) emulator = true;
    else args.push_back(argv[i]);
  }
  const std::string shape = args.size() > 0 ? args[0] : "gpt2";
  const std::int64_t new_tokens = args.size() > 1 ? std::atoll(args[1].c_str()) : 200;
  const std::int64_t batch = args.size() > 2 ? std::atoll(args[2].c_str()) : 1;
  const std::string dtype_name = args.size() > 3 ? args[3] : "bf16";
  if ((shape != "gpt-12m" && shape != "gpt2") || (dtype_name != "float32" && dtype_name != "bf16") ||
      new_tokens < 1 || new_tokens + 4 > 1024 || batch < 1 || batch > 256) {
    std::fprintf(stderr, "usage: bench_decode_gpu [gpt-12m|gpt2] [NEW_TOKENS <= 1020] [BATCH <= 256] [float32|bf16] "
                         "[--emulator]\n");
    return 2;
  }
  if (emulator) cuda::use_emulator();
  if (!cuda::is_available()) {
    std::fprintf(stderr, "bench_decode_gpu: no CUDA GPU here (--emulator runs the kernels on the CPU)\n");
    return 77;
  }
  models::GPTConfig c = models::gpt_preset(shape);
  c.block_size = 1024;
  Generator g(1);
  models::GPT model(c, g);
  model.eval();
  model.to(Device::cuda());
  const DType dtype = dtype_name == "bf16" ? kBFloat16 : kFloat32;
  models::DeviceDecoder decoder(model, batch, dtype);
  decoder.reserve_rows(4 * batch);
  std::printf("# bench_decode_gpu %s %lld %lld %s: %lld parameters, %s\n", shape.c_str(),
              static_cast<long long>(new_tokens), static_cast<long long>(batch), dtype_name.c_str(),
              static_cast<long long>(model.num_parameters()), cuda::device_name().c_str());

  const std::vector<std::uint32_t> prompt = {1, 2, 3, 4};
  const std::int64_t V = c.vocab_size;
  double runs[3];
  std::vector<std::uint32_t> next(static_cast<std::size_t>(batch));
  std::vector<std::int64_t> ones(static_cast<std::size_t>(batch), 1), every(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) every[b] = b;
  for (double& r : runs) {
    std::vector<models::DeviceDecodeState> states(static_cast<std::size_t>(batch));
    std::vector<models::DeviceDecodeState*> pointers;
    for (auto& s : states) {
      s = decoder.acquire();
      pointers.push_back(&s);
      const float* logits = decoder.prefill(s, prompt.data(), 4);
      next[pointers.size() - 1] = static_cast<std::uint32_t>(std::max_element(logits, logits + V) - logits);
    }
    const auto start = std::chrono::steady_clock::now();
    for (std::int64_t i = 0; i < new_tokens; ++i) {
      decoder.enqueue(pointers.data(), ones.data(), batch, next.data(), every.data(), batch);
      const std::uint32_t* tokens = decoder.greedy();
      std::copy(tokens, tokens + batch, next.begin());
    }
    r = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (auto& s : states) decoder.release(s);
  }
  const double decode_s = bench::median3(runs[0], runs[1], runs[2]);
  const double tokens_per_s = static_cast<double>(new_tokens * batch) / decode_s;

  // The floor at the mean length of the run (4 + new_tokens / 2 positions a sequence).
  const double weights = static_cast<double>(models::weight_bytes_per_token(c, dtype));
  const double cache = 2.0 * static_cast<double>(c.n_layer * c.n_embd) * 4.0 *
                       (4.0 + static_cast<double>(new_tokens) / 2.0) * static_cast<double>(batch);
  const lab::Peaks peaks = lab::measure_peaks(emulator ? lab::LabDevice::Emulator : lab::LabDevice::CUDA, true, false);
  std::printf("decode  %s %-7s batch %3lld %10.1f tokens/s  (%lld steps, %.3f s, %zu CUDA graphs)\n", shape.c_str(),
              dtype_name.c_str(), static_cast<long long>(batch), tokens_per_s, static_cast<long long>(new_tokens),
              decode_s, decoder.cuda_graphs());
  if (peaks.bandwidth_gbs <= 0) {  // the emulator's copies say nothing of a GPU's bandwidth
    std::printf("floor   %s (%s)\n", shape.c_str(), peaks.bandwidth_how.c_str());
    return 0;
  }
  const double floor_s = (weights + cache) / (peaks.bandwidth_gbs * 1e9);
  std::printf("floor   %s %-7s batch %3lld %.1f MB of weights + %.1f MB of cache a step / %.1f GB/s (%s) = %.3f ms: "
              "%.1f tokens/s; decode reaches %.0f%% of it\n",
              shape.c_str(), dtype_name.c_str(), static_cast<long long>(batch), weights / 1e6, cache / 1e6,
              peaks.bandwidth_gbs, peaks.bandwidth_how.c_str(), floor_s * 1e3, static_cast<double>(batch) / floor_s,
              100.0 * tokens_per_s * floor_s / static_cast<double>(batch));
  return 0;
}
