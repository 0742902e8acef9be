// bench/bench_load_checkpoint.cpp: peak memory while loading a 100M-parameter checkpoint.
// Chapter 08 (training: checkpoints). The loader copies each tensor straight from the mapped
// file into its parameter and drops the file pages behind it, so the weights are never held
// twice: peak resident memory above the baseline should stay near the file size.
//   build/bench/bench_load_checkpoint save FILE     # a GPT-2-shaped model with 9 layers (~103M)
//   build/bench/bench_load_checkpoint load FILE     # prints baseline, peak, and the ratio
//   build/bench/bench_load_checkpoint load-hf DIR   # the same for a Hugging Face GPT-2 folder (chapter 08,
//                                                   # "Pretrained models"; its Conv1D weights are transposed on the way in)
// Run `load` under /usr/bin/time -v to see the kernel's own count (Maximum resident set size).
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "brrr/brrr.h"
#include "brrr/models/checkpoint.h"
#include "brrr/models/hf.h"

using namespace brrr;

static long status_kb(const char* key) {  // VmRSS or VmHWM from /proc/self/status
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(std::strlen(key) + 1));
  return -1;
}

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "save") && std::strcmp(argv[1], "load") && std::strcmp(argv[1], "load-hf"))) {
    std::fprintf(stderr, "usage: bench_load_checkpoint save|load FILE, or load-hf DIR\n");
    return 2;
  }
  const std::string path = argv[2];
  if (!std::strcmp(argv[1], "save")) {
    models::GPTConfig c = models::gpt_preset("gpt2");
    c.n_layer = 9;
    Generator g(1);
    models::GPT model(c, g);
    models::save_model(path, model);
    std::printf("saved %s: %lld parameters\n", path.c_str(), static_cast<long long>(model.num_parameters()));
    return 0;
  }
  const bool hf = !std::strcmp(argv[1], "load-hf");
  struct stat st {};
  stat(hf ? (path + "/model.safetensors").c_str() : path.c_str(), &st);
  const long baseline = status_kb("VmRSS:");
  auto model = hf ? models::load_hf_model(path) : models::load_model(path);
  const long peak = status_kb("VmHWM:");
  const double file_mb = st.st_size / 1048576.0;
  std::printf("loaded %lld parameters from %s (%.1f MiB)\n", static_cast<long long>(model->num_parameters()), path.c_str(), file_mb);
  std::printf("baseline RSS %.1f MiB, peak RSS %.1f MiB, peak above baseline %.1f MiB = %.3f x the file size\n",
              baseline / 1024.0, peak / 1024.0, (peak - baseline) / 1024.0, (peak - baseline) / 1024.0 / file_mb);
  return 0;
}
