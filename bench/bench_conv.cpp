// bench/bench_conv.cpp: conv2d forward + backward on the CPU at a ResNet-like layer and at the
// digits CNN's own layers, and the CNN's whole training step. Chapter 09 (convolutions).
// Peer: bench/conv_peer.py (PyTorch, the same layers, batch and threads); bench/conv.sh runs
// both at 1 and 2 threads.
//   build/bench/bench_conv [--variant im2col|direct] [--threads N]
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/bench_util.h"
#include "brrr/brrr.h"
#include "brrr/models/cnn.h"
#include "brrr/parallel.h"

using namespace brrr;

namespace {
struct Layer {
  const char* name;
  std::int64_t N, C_in, H, W, C_out, k, pad;
};
// The same list as bench/conv_peer.py.
const Layer kLayers[] = {
    {"resnet 3x3 64->64 56x56", 32, 64, 56, 56, 64, 3, 1},
    {"cnn conv1 1->32 8x8", 32, 1, 8, 8, 32, 3, 1},
    {"cnn conv2 32->64 4x4", 32, 32, 4, 4, 64, 3, 1},
};
}  // namespace

int main(int argc, char** argv) {
  std::string variant;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--variant") && i + 1 < argc) variant = argv[++i];
    else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) set_num_threads(std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: bench_conv [--variant im2col|direct] [--threads N]\n");
      return 2;
    }
  }
  if (!variant.empty())
    for (const char* op : {"conv2d_forward", "conv2d_backward_input", "conv2d_backward_weight"})
      kernels::select(op, variant, DeviceType::CPU);
  std::printf("# brrr conv2d (%s), %d thread(s), %s\n",
              kernels::selected("conv2d_forward", DeviceType::CPU, kFloat32).c_str(), get_num_threads(),
              bench::cpu_model().c_str());
  std::printf("%-26s %-10s %-10s %-10s %-10s\n", "layer", "fwd ms", "fwd+bwd ms", "GFLOP/s", "(fwd+bwd)");
  Generator gen(1);
  for (const Layer& l : kLayers) {
    const Tensor x = randn({l.N, l.C_in, l.H, l.W}, gen).requires_grad_(true);
    const Tensor w = randn({l.C_out, l.C_in, l.k, l.k}, gen).requires_grad_(true);
    const Tensor b = randn({l.C_out}, gen).requires_grad_(true);
    const Tensor dout = randn({l.N, l.C_out, l.H, l.W}, gen);  // stride 1, "same" padding
    const bool big = l.H >= 32;
    const double fwd = bench::median_seconds([&] {
      NoGradGuard no_grad;
      ops::conv2d(x, w, b, 1, l.pad);
    }, big ? 5 : 50);
    const double both = bench::median_seconds([&] {
      x.set_grad(Tensor()), w.set_grad(Tensor()), b.set_grad(Tensor());
      ops::conv2d(x, w, b, 1, l.pad).backward(dout);
    }, big ? 5 : 50);
    const double flops = 2.0 * l.N * l.C_out * l.H * l.W * l.C_in * l.k * l.k;  // one pass; backward is two more
    std::printf("%-26s %-10.3f %-10.3f %-10.1f\n", l.name, fwd * 1e3, both * 1e3, 3 * flops / both / 1e9);
  }
  // The CNN of `brrr cnn`, one training step at batch 32 (forward, loss, backward, AdamW).
  models::CNN model(32, 64, 128, gen);
  optim::AdamW opt(model.parameters(), optim::AdamWOptions(2e-3).weight_decay(1e-4));
  const Tensor images = rand({32, 1, 8, 8}, gen);
  const Tensor labels = randint(0, 10, {32}, gen, kInt64);
  const double step = bench::median_seconds([&] {
    const Tensor loss = ops::cross_entropy(model(images), labels);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }, 200, 10);
  std::printf("%-26s %-10s %-10.3f\n", "cnn training step (b=32)", "", step * 1e3);
  return 0;
}
