// bench/bench_elementwise.cpp: add, GELU (tanh and exact) and the dropout mask beside memcpy of
// the same bytes.
// Chapter 04 (matmul and the CPU backend): an elementwise op is bound by memory, so its
// ceiling is how fast the machine moves bytes. We count bytes read + written: add moves
// 12 bytes per float32 element, GELU 8 (its backward 12), the dropout mask 4 (written; its random numbers are
// computed, Philox 4x32-10, 16 counters at a time), and a memcpy of N bytes moves 2N.
//   build/bench/bench_elementwise [elements]   (default 16M)
#include <cstdlib>
#include <cstring>

#include "bench/bench_util.h"
#include "brrr/brrr.h"
#include "kernels/signatures.h"
#include "kernels/registry.h"

using namespace brrr;

int main(int argc, char** argv) {
  const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : (16 << 20);
  std::printf("# elementwise bandwidth, %lld float32 elements, %s\n", static_cast<long long>(n), bench::cpu_model().c_str());
  std::printf("%-8s %-22s %-10s %-10s %-12s\n", "threads", "what", "ms", "GB/s", "of memcpy");
  Generator g(1);
  NoGradGuard no_grad;
  Tensor a = randn({n}, g), b = randn({n}, g), out = empty({n});
  auto add = kernels::lookup(kernels::op::add<float>, DeviceType::CPU);
  auto gelu = kernels::lookup(kernels::op::gelu_forward<float>, DeviceType::CPU);
  auto gelu_bwd = kernels::lookup(kernels::op::gelu_backward<float>, DeviceType::CPU);
  auto gelu_erf = kernels::lookup(kernels::op::gelu_erf_forward<float>, DeviceType::CPU);
  auto gelu_erf_bwd = kernels::lookup(kernels::op::gelu_erf_backward<float>, DeviceType::CPU);
  auto dropout_mask = kernels::lookup(kernels::op::dropout_mask<float>, DeviceType::CPU);
  kernels::Loop loop;
  loop.ndim = 1;
  loop.size[0] = n;
  loop.stride[0][0] = loop.stride[1][0] = loop.stride[2][0] = 1;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    // memcpy split over the same threads, in the same 32 KiB blocks the kernels use.
    auto copy = [&](std::int64_t bytes) {
      const char* src = static_cast<const char*>(a.raw_data());
      char* dst = static_cast<char*>(out.raw_data());
      const std::int64_t block = 1 << 15, blocks = (bytes + block - 1) / block;
#pragma omp parallel for schedule(static)
      for (std::int64_t i = 0; i < blocks; ++i)
        std::memcpy(dst + i * block, src + i * block, std::min(block, bytes - i * block));
    };
    const double copy_s = bench::median_seconds([&] { copy(n * 4); }, 20);
    const double copy_gbs = 2.0 * n * 4 / copy_s / 1e9;
    auto row = [&](const char* what, double s, double bytes) {
      const double gbs = bytes / s / 1e9;
      std::printf("%-8d %-22s %-10.3f %-10.1f %-12.0f%%\n", threads, what, s * 1e3, gbs, 100.0 * gbs / copy_gbs);
    };
    row("memcpy", copy_s, 2.0 * n * 4);
    row("add (kernel)", bench::median_seconds([&] { add(out.data_ptr<float>(), a.data_ptr<float>(), b.data_ptr<float>(), loop, nullptr); }, 20), 12.0 * n);
    row("gelu_forward (kernel)", bench::median_seconds([&] { gelu(out.data_ptr<float>(), a.data_ptr<float>(), n, nullptr); }, 20), 8.0 * n);
    row("gelu_backward (kernel)", bench::median_seconds([&] { gelu_bwd(out.data_ptr<float>(), b.data_ptr<float>(), a.data_ptr<float>(), n, nullptr); }, 20), 12.0 * n);
    row("gelu_erf_forward", bench::median_seconds([&] { gelu_erf(out.data_ptr<float>(), a.data_ptr<float>(), n, nullptr); }, 20), 8.0 * n);
    row("gelu_erf_backward", bench::median_seconds([&] { gelu_erf_bwd(out.data_ptr<float>(), b.data_ptr<float>(), a.data_ptr<float>(), n, nullptr); }, 20), 12.0 * n);
    row("dropout_mask (kernel)", bench::median_seconds([&] { dropout_mask(out.data_ptr<float>(), n, 0.2f, 1, 0, nullptr); }, 20), 4.0 * n);
    row("ops::add (allocates)", bench::median_seconds([&] { ops::add(a, b); }, 20), 12.0 * n);
    row("ops::gelu (allocates)", bench::median_seconds([&] { ops::gelu(a); }, 20), 8.0 * n);
  }
  return 0;
}
