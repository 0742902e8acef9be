// tests/distributed/distributed_test_util.h: what the data-parallel tests share (chapter 19):
// scratch folders, a small training run's flags, running `mpirun ... brrr train` under a time
// limit, and reading what a run wrote. Used by test_distributed.cpp (label mpi) and
// test_distributed_gpu.cpp (label cuda).
#pragma once
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "brrr/brrr.h"
#include "brrr/io.h"
#include "brrr/safetensors.h"
#include "train/distributed.h"
#include "train/gradient_reducer.h"

namespace brrr::test {
namespace fs = std::filesystem;


inline std::string scratch(const std::string& name) {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/test-distributed/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

inline std::string small_text() {
  const std::string path = std::string(BRRR_BINARY_DIR) + "/test-distributed/small.txt";
  if (!fs::exists(path)) {
    fs::create_directories(fs::path(path).parent_path());
    write_file_atomic(path, read_file(std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt").substr(0, 40000));
  }
  return path;
}

// Why these tests cannot run here, or "" when they can.
inline std::string cannot_run() {
  if (!train::dist::built_with_mpi()) return "brrr was built without MPI (install libopenmpi-dev: scripts/setup.sh)";
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0) return "no mpirun on the PATH (Debian: openmpi-bin)";
  return "";
}

// mpirun's flags for tests: two ranks on however many cores there are, as root too (CI's
// containers), and no binding (ctest runs other tests beside these). -x passes the fault
// drill's variable on to the ranks.
inline std::string mpirun(bool fault_drill = false) {
  std::string m = "mpirun --oversubscribe --bind-to none";
  if (fault_drill) m += " -x BRRR_FAULT";
  if (::getuid() == 0) m += " --allow-run-as-root";
  return m;
}

// A small run: a 1-layer model on 40 KB of Shakespeare, one thread per rank. `changes` are
// "--key value" pairs that replace or add to these settings (brrr train takes a flag once).
inline std::string train_args(const std::string& out, const std::string& changes = "") {
  std::vector<std::pair<std::string, std::string>> settings = {
      {"--preset", "cpu-tiny"}, {"--data", small_text()}, {"--out_dir", out}, {"--n_layer", "1"}, {"--n_head", "2"},
      {"--n_embd", "32"}, {"--block_size", "16"}, {"--batch_size", "4"}, {"--max_iters", "6"}, {"--warmup_iters", "2"},
      {"--lr_decay_iters", "6"}, {"--eval_interval", "3"}, {"--eval_iters", "2"}, {"--log_interval", "100"},
      {"--sample_tokens", "0"}, {"--threads", "1"}, {"--dropout", "0"}};
  std::istringstream in(changes);
  std::string key, value;
  while (in >> key >> value) {
    bool replaced = false;
    for (auto& [k, v] : settings)
      if (k == key) v = value, replaced = true;
    if (!replaced) settings.emplace_back(key, value);
  }
  std::string args = "train";
  for (const auto& [k, v] : settings) args += " " + k + " " + v;
  return args;
}

struct Run {
  int status = -1;  // the exit status, or 124 when `timeout` stopped it
  double seconds = 0;
  std::string output;
};

// Runs a shell command (with its stdout and stderr in a file) under a time limit.
inline Run run(const std::string& command, const std::string& out, int limit_seconds = 120) {
  const std::string log = out + "/console.txt";
  const auto start = std::chrono::steady_clock::now();
  const int raw = std::system(("timeout " + std::to_string(limit_seconds) + " " + command + " > " + log + " 2>&1").c_str());
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.output = fs::exists(log) ? read_file(log) : "";
  return r;
}

inline std::string cli() { return std::string(BRRR_CLI); }

// The log's whole lines: a line without its newline is still being written (the run goes on).
inline bool next_line(std::ifstream& log, std::string& line) {
  return std::getline(log, line) && !log.eof();
}

inline std::vector<double> losses(const std::string& out) {
  std::ifstream log(out + "/log.jsonl");
  std::vector<double> found;
  std::string line;
  while (next_line(log, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "step") found.push_back(j["loss"].get<double>());
  }
  return found;
}

inline nlohmann::json data_parallel_event(const std::string& out) {
  std::ifstream log(out + "/log.jsonl");
  std::string line;
  nlohmann::json found;
  while (next_line(log, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["event"] == "data_parallel") found = j;
  }
  return found;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

inline double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

inline std::string ckpt(const std::string& out, int step) {
  char name[64];
  std::snprintf(name, sizeof name, "/ckpt-%08d.safetensors", step);
  return out + name;
}


// Every tensor of two checkpoints (parameters and AdamW's moments) bit for bit the same.
inline void check_same_checkpoints(const std::string& a, const std::string& b) {
  safetensors::File x(a), y(b);
  REQUIRE(x.tensors().size() == y.tensors().size());
  for (const auto& info : x.tensors()) {
    CAPTURE(info.name);
    CHECK(same_bits(x.tensor(info.name), y.tensor(info.name)));
  }
}

// One training run of `args` as one plain process, and again as one MPI rank with
// BRRR_FORCE_COLLECTIVES=1, which sends its gradients through the collectives all the same; both
// must exit 0. Their output folders (scratch(name + "-plain"), scratch(name + "-forced")).
struct PlainAndForced {
  std::string plain, forced;
};
inline PlainAndForced run_plain_and_forced(const std::string& name, const std::string& args) {
  const PlainAndForced out{scratch(name + "-plain"), scratch(name + "-forced")};
  const Run a = run(cli() + " " + train_args(out.plain, args), out.plain, 300);
  REQUIRE_MESSAGE(a.status == 0, a.output);
  const Run b = run("env BRRR_FORCE_COLLECTIVES=1 " + mpirun() + " -x BRRR_FORCE_COLLECTIVES -np 1 " + cli() + " " +
                        train_args(out.forced, args),
                    out.forced, 300);
  REQUIRE_MESSAGE(b.status == 0, b.output);
  return out;
}

}  // namespace brrr::test
