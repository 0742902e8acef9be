// bench/bench_attention.cpp: causal attention forward + backward, composed (matmul, mask,
// softmax, matmul) against flash attention, on the GPU (or the CPU or emulator, for a try).
// Chapter 15 (flash attention). Peer: bench/attention_peer.py (PyTorch's
// scaled_dot_product_attention); bench/attention.sh runs both.
//   build/bench/bench_attention T [BH] [HS] [STEPS] [--device cpu|cuda|emulator]
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "brrr/brrr.h"

using namespace brrr;

int main(int argc, char** argv) {
  std::int64_t dims[3] = {0, 384, 64};  // T, BH, hs
  int steps = 20, given = 0;
  std::string device_name = "cuda";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device_name = argv[++i];
    else if (given < 3) dims[given++] = std::atoll(argv[i]);
    else steps = std::atoi(argv[i]);
  }
  if (dims[0] <= 0) {
    std::fprintf(stderr, "usage: bench_attention T [BH] [HS] [STEPS] [--device cpu|cuda|emulator]\n");
    return 2;
  }
  const std::optional<Device> chosen = bench::bench_device(device_name, "bench_attention");
  if (!chosen) return 1;
  const Device device = *chosen;
  const std::int64_t T = dims[0], BH = dims[1], hs = dims[2], H = 6, B = (BH + H - 1) / H;
  Generator gen(0);
  auto make = [&] { return randn({B, H, T, hs}, gen).to(device).requires_grad_(); };
  Tensor q = make(), k = make(), v = make();
  const Tensor dout = randn({B, H, T, hs}, gen).to(device);
  auto run = [&](bool flash) {
    return bench::median_seconds(
        [&] {
          q.set_grad(Tensor()), k.set_grad(Tensor()), v.set_grad(Tensor());
          Tensor y = flash ? ops::flash_attention(q, k, v) : ops::causal_attention_composed(q, k, v);
          y.backward(dout);
          if (device.is_cuda()) cuda::synchronize();
        },
        steps, 2);
  };
  const double composed = run(false), flash = run(true);
  const std::string where = device.is_cuda() ? cuda::device_name() : "cpu";
  std::printf("brrr attention float32 B*H=%lld T=%lld hs=%lld %s: composed %.3f ms, flash %.3f ms forward+backward "
              "(flash %.2fx faster)\n",
              static_cast<long long>(B * H), static_cast<long long>(T), static_cast<long long>(hs), where.c_str(),
              composed * 1e3, flash * 1e3, composed / flash);
  return 0;
}
