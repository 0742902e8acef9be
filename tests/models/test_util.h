// tests/models/test_util.h: helpers for tests that call Python (PyTorch) as a peer, or read
// what a Python package installed.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "brrr/models/cnn.h"

namespace brrr::test {

// Runs a shell command, returning its exit status and (in `output`) what it printed.
inline int run(const std::string& command, std::string* output = nullptr) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buffer[4096];
  std::string out;
  while (std::fgets(buffer, sizeof buffer, pipe)) out += buffer;
  const int status = ::pclose(pipe);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline bool python_has(const std::string& module) {
  return run(std::string(BRRR_PYTHON) + " -c 'import " + module + "'") == 0;
}

// The handwritten digits of the CNN chapter, which python3-sklearn installs.
inline bool have_digits() { return std::filesystem::exists(models::kDigitsPath); }

}  // namespace brrr::test
