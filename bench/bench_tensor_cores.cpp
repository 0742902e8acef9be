// bench/bench_tensor_cores.cpp: the tensor-core kernels with bf16 in memory, timed on the GPU
// (or the emulator, for a try): matmul's variants 12 (bf16_pipelined), 13 (bf16_wide) and 14 (wgmma,
// Hopper only: on another GPU it says so and goes on) at N^3, and attention's variants 4 and 5
// (wgmma, Hopper only, likewise), causal, at (BH, T, hs): the forward, and forward + backward.
// Their bars are against cuBLAS's bf16 GEMM and PyTorch's bf16 SDPA, which bench/tensor_cores_peer.py times;
// bench/tensor_cores.sh runs both. Chapters 14 and 15.
// They are plain launchers until bf16 tensors reach the registry (then kernel-lab takes over):
// this program calls them on raw device buffers, and times them with the runtime's events.
//   build/bench/bench_tensor_cores [--device cuda|emulator] [--gemm N] [--attention T BH HS] [--steps S]
// (--gemm and --attention may repeat; without either: --gemm 4096 --attention 1024 96 64
// --attention 4096 96 64, the bars' sizes.)
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "brrr/bfloat16.h"
#include "brrr/brrr.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/runtime.h"

using namespace brrr;

namespace {

// n bf16 values of device memory, filled with normal values (scale `scale`), freed at the end.
struct DeviceValues {
  gpu::Runtime& runtime;
  void* data;
  DeviceValues(gpu::Runtime& r, std::size_t n, std::size_t element_bytes, float scale = 0.0f)
      : runtime(r), data(r.malloc(n * element_bytes)) {
    if (scale == 0.0f) return;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<bf16> host(n);
    for (bf16& x : host) x = bf16(normal(rng));
    runtime.copy(data, host.data(), n * sizeof(bf16), gpu::CopyKind::HostToDevice);
  }
  ~DeviceValues() { runtime.free(data); }
  DeviceValues(const DeviceValues&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

using GemmFn = void (*)(float*, const bf16*, const bf16*, const kernels::MatmulShape&, kernels::Stream);
using AttentionFn = kernels::attention_forward_on_bf16_fn;
using BackwardFn = kernels::attention_backward_on_bf16_fn;

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cuda";
  std::vector<std::int64_t> gemms;
  std::vector<std::array<std::int64_t, 3>> attentions;
  int steps = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device_name = argv[++i];
    else if (!std::strcmp(argv[i], "--gemm") && i + 1 < argc) gemms.push_back(std::atoll(argv[++i]));
    else if (!std::strcmp(argv[i], "--attention") && i + 3 < argc) {
      attentions.push_back({std::atoll(argv[i + 1]), std::atoll(argv[i + 2]), std::atoll(argv[i + 3])});
      i += 3;
    } else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: bench_tensor_cores [--device cuda|emulator] [--gemm N] [--attention T BH HS] [--steps S]\n");
      return 2;
    }
  }
  if (gemms.empty() && attentions.empty()) gemms = {4096}, attentions = {{1024, 96, 64}, {4096, 96, 64}};
  if (!bench::bench_device(device_name, "bench_tensor_cores")) return 1;
  const bool emulated = device_name == "emulator";
  gpu::Runtime* runtime = emulated ? &gpu::emulator_runtime() : gpu::cuda_runtime();
  GemmFn gemm = &kernels::emu::matmul_bf16_pipelined, gemm_wide = &kernels::emu::matmul_bf16_wide,
         gemm_wgmma = &kernels::emu::matmul_wgmma;
  AttentionFn attention = &kernels::emu::attention_forward_bf16_pipelined;
  BackwardFn backward = &kernels::emu::attention_backward_bf16_pipelined;
  AttentionFn attention_wgmma = &kernels::emu::attention_forward_wgmma;
  BackwardFn backward_wgmma = &kernels::emu::attention_backward_wgmma;
#if BRRR_WITH_CUDA
  if (!emulated) {
    gemm = &kernels::cuda::matmul_bf16_pipelined;
    gemm_wide = &kernels::cuda::matmul_bf16_wide;
    gemm_wgmma = &kernels::cuda::matmul_wgmma;
    attention = &kernels::cuda::attention_forward_bf16_pipelined;
    backward = &kernels::cuda::attention_backward_bf16_pipelined;
    attention_wgmma = &kernels::cuda::attention_forward_wgmma;
    backward_wgmma = &kernels::cuda::attention_backward_wgmma;
  }
#endif
  if (!runtime || (!emulated && gemm == &kernels::emu::matmul_bf16_pipelined)) {
    std::fprintf(stderr, "bench_tensor_cores: brrr was built without CUDA (use --device emulator)\n");
    return 1;
  }
  std::printf("device: %s\n", runtime->name().c_str());
  // The median of `steps` timed runs (events on the runtime's stream), after two warm-ups.
  auto median_ms = [&](const std::function<void()>& work) {
    const auto events = [&](const std::function<void()>& w) { return runtime->time_ms(w) * 1e-3; };
    return time_median(work, 2, steps, events).median * 1e3;
  };
  // One GEMM of every size, in float32 out: variants 12 and 13 here, variant 14 last of all (below).
  const auto time_gemm = [&](GemmFn fn, const char* name, std::int64_t n) {
    const std::size_t count = static_cast<std::size_t>(n * n);
    DeviceValues a(*runtime, count, sizeof(bf16), 1.0f), b(*runtime, count, sizeof(bf16), 1.0f),
        out(*runtime, count, sizeof(float));
    kernels::MatmulShape s;
    s.M = s.N = s.K = n;
    const double ms = median_ms([&] { fn(out.as<float>(), a.as<bf16>(), b.as<bf16>(), s, runtime->stream()); });
    std::printf("matmul %s bf16 in, float32 out, %lld^3: %.4f ms, %.2f TFLOP/s\n", name, static_cast<long long>(n), ms,
                2.0 * n * n * n / (ms * 1e-3) / 1e12);
  };
  for (std::int64_t n : gemms) {
    time_gemm(gemm, "bf16_pipelined (variant 12)", n);
    time_gemm(gemm_wide, "bf16_wide (variant 13)", n);
  }
  // Attention forward, then backward from the forward's out and lse (dq, dk, dv in float32), at (BH, T, hs).
  const auto time_attention = [&](AttentionFn forward, BackwardFn backward, const char* name, std::int64_t T,
                                  std::int64_t BH, std::int64_t hs) {
    const std::size_t count = static_cast<std::size_t>(BH * T * hs);
    DeviceValues q(*runtime, count, sizeof(bf16), 1.0f), k(*runtime, count, sizeof(bf16), 1.0f),
        v(*runtime, count, sizeof(bf16), 1.0f), out(*runtime, count, sizeof(bf16)),
        lse(*runtime, static_cast<std::size_t>(BH * T), sizeof(float));
    const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
    const double ms = median_ms([&] {
      forward(out.as<bf16>(), lse.as<float>(), q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), {BH, T, hs, scale},
              runtime->stream());
    });
    // Causal: about half of the 4 T^2 hs FLOPs per head (q k^T and p v).
    const double flops = 2.0 * BH * static_cast<double>(T) * T * hs;
    std::printf("attention forward %s bf16, causal, BH=%lld T=%lld hs=%lld: %.4f ms, %.2f TFLOP/s\n", name,
                static_cast<long long>(BH), static_cast<long long>(T), static_cast<long long>(hs), ms,
                flops / (ms * 1e-3) / 1e12);
    DeviceValues dout(*runtime, count, sizeof(bf16), 1.0f), dq(*runtime, count, sizeof(float)),
        dk(*runtime, count, sizeof(float)), dv(*runtime, count, sizeof(float));
    const double backward_ms = median_ms([&] {
      backward(dq.as<float>(), dk.as<float>(), dv.as<float>(), dout.as<bf16>(), q.as<bf16>(), k.as<bf16>(),
               v.as<bf16>(), out.as<bf16>(), lse.as<float>(), {BH, T, hs, scale}, runtime->stream());
    });
    std::printf("attention backward %s bf16 in, float32 gradients: %.4f ms; forward + backward %.4f ms\n", name,
                backward_ms, ms + backward_ms);
  };
  for (const auto& [T, BH, hs] : attentions)
    time_attention(attention, backward, "bf16_pipelined (variant 4)", T, BH, hs);
  // Variant 14 last: it has never run on a GPU, so if it fails or hangs (gpu.sh's time limit)
  // the figures above are already printed. On a GPU other than sm_90 it refuses, and says so.
  for (std::int64_t n : gemms) {
    try {
      time_gemm(gemm_wgmma, "wgmma (variant 14)", n);
    } catch (const brrr::Error& e) {
      std::printf("matmul wgmma (variant 14): skipped: %s\n", e.what());
    }
  }
  // Attention's variant 5 (wgmma, Hopper only) after it, for the same reasons.
  for (const auto& [T, BH, hs] : attentions) {
    try {
      time_attention(attention_wgmma, backward_wgmma, "wgmma (variant 5)", T, BH, hs);
    } catch (const brrr::Error& e) {
      std::printf("attention wgmma (variant 5): skipped: %s\n", e.what());
    }
  }
  return 0;
}
