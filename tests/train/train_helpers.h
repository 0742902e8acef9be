// tests/train/train_helpers.h: what the training tests (chapters 08 and 17) share: an empty
// folder of their own under the build tree, a slice of tinyshakespeare to train on, and a
// checkpoint's tensors.
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "brrr/safetensors.h"

namespace train_test {

// BRRR_BINARY_DIR/<suite>/<name>, emptied if it was there.
inline std::string scratch(const std::string& suite, const std::string& name) {
  const std::string dir = std::string(BRRR_BINARY_DIR) + "/" + suite + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// The first `bytes` of tinyshakespeare as BRRR_BINARY_DIR/<suite>/small.txt (written once).
inline std::string small_text(const std::string& suite, std::size_t bytes) {
  const std::string path = std::string(BRRR_BINARY_DIR) + "/" + suite + "/small.txt";
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    brrr::write_file_atomic(
        path, brrr::read_file(std::string(BRRR_SHARED_DIR) + "/data/tinyshakespeare.txt").substr(0, bytes));
  }
  return path;
}

// Every tensor of a checkpoint (weights, AdamW's moments, generators) as floats, in file order.
inline std::vector<std::vector<float>> tensors_of(const std::string& checkpoint) {
  brrr::safetensors::File f(checkpoint);
  std::vector<std::vector<float>> out;
  for (const auto& t : f.tensors()) out.push_back(f.tensor(t.name).to_vector<float>());
  return out;
}

}  // namespace train_test
