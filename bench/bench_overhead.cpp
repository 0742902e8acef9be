// bench/bench_overhead.cpp: the fixed cost of one op, measured on an 8x8 add with autograd
// recording (both inputs require grad), beside PyTorch (bench/overhead_peer.py).
// Chapter 03 (autograd): for tiny tensors the time is all bookkeeping (a TensorImpl, a
// Storage, a graph Node and a kernel lookup), not arithmetic.
#include "bench/bench_util.h"
#include "brrr/brrr.h"

using namespace brrr;

int main() {
  set_num_threads(1);
  Generator g(1);
  Tensor a = randn({8, 8}, g).requires_grad_(), b = randn({8, 8}, g).requires_grad_();
  const int calls = 100000;
  std::printf("# op overhead, 8x8 float32 add, %s\n", bench::cpu_model().c_str());
  const double grad_s = bench::median_seconds([&] {
    for (int i = 0; i < calls; ++i) ops::add(a, b);
  }, 7, 1);
  std::printf("brrr add with autograd:    %.3f us per op\n", grad_s / calls * 1e6);
  NoGradGuard no_grad;
  const double plain_s = bench::median_seconds([&] {
    for (int i = 0; i < calls; ++i) ops::add(a, b);
  }, 7, 1);
  std::printf("brrr add without autograd: %.3f us per op\n", plain_s / calls * 1e6);
  return 0;
}
