// bench/bench_matmul.cpp: float32 matmul GFLOP/s at square sizes, 1 and 2 threads.
// Chapter 04 (matmul and the CPU backend). Peer: bench/matmul_peer.py (NumPy on OpenBLAS);
// bench/matmul.sh runs both in one go.
//   build/bench/bench_matmul [--variant blocked|eigen|naive] [--sizes 128,256,...] [--threads 1,2]
//                            [--dtype float32|bf16]
// Without --variant it times the default (highest priority) variant and names it. --dtype bf16
// times the same float32 matmul under brrr::Autocast(kBFloat16) (chapter 18): matmul:bf16,
// matmul's bf16-products slot, whose --variant is then avx512bf16 or plain.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "bench/bench_util.h"
#include "brrr/brrr.h"

using namespace brrr;

static std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

int main(int argc, char** argv) {
  std::vector<int> sizes = {128, 256, 512, 1024, 2048}, threads = {1, 2};
  std::string variant;  // empty: the registry's default
  std::string dtype = "float32";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--sizes")) sizes = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--variant")) variant = argv[i + 1];
    else if (!std::strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: bench_matmul [--variant NAME] [--sizes a,b,..] [--threads a,b] [--dtype float32|bf16]\n");
      return 2;
    }
  }
  if (dtype != "float32" && dtype != "bf16") {
    std::fprintf(stderr, "bench_matmul: --dtype must be float32 or bf16, got '%s'\n", dtype.c_str());
    return 2;
  }
  const bool bf16 = dtype == "bf16";
  const char* op = bf16 ? "matmul:bf16" : "matmul";
  if (!variant.empty()) kernels::select(op, variant);
  variant = kernels::selected(op, DeviceType::CPU, kFloat32);
  std::printf("# brrr %s (variant %s), %s, C = A @ B, %s\n", op, variant.c_str(),
              bf16 ? "bf16 operands, float32 sums" : "float32", bench::cpu_model().c_str());
  std::printf("%-8s %-8s %-12s %-10s\n", "size", "threads", "ms", "GFLOP/s");
  NoGradGuard no_grad;
  const Autocast autocast(bf16 ? kBFloat16 : kFloat32);
  for (int t : threads) {
    set_num_threads(t);
    for (int n : sizes) {
      Generator g(1);
      Tensor a = randn({n, n}, g), b = randn({n, n}, g);
      const double flops = 2.0 * n * n * n;
      const int repeats = n <= 256 ? 50 : n <= 1024 ? 10 : 5;
      const double s = bench::median_seconds([&] { ops::matmul(a, b); }, repeats, 2);
      std::printf("%-8d %-8d %-12.3f %-10.1f\n", n, t, s * 1e3, flops / s / 1e9);
    }
  }
  return 0;
}
