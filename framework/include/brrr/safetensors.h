// brrr/safetensors.h: reading and writing safetensors files (checkpoints).
// Chapter 08 (training: checkpoints). Read before: brrr/io.h. Read next: brrr/models/checkpoint.h.
//
// The format (Hugging Face's): 8 bytes little-endian N, then N bytes of JSON header, then the
// raw little-endian data. The header maps each tensor name to {"dtype": "F32", "shape": [..],
// "data_offsets": [begin, end]} (offsets into the data), and "__metadata__" to a map of
// strings. PyTorch reads these files with safetensors.torch.load_file.
//
// Reading maps the file (mmap), so nothing is read until used, and validates the header
// completely before anything else happens: every malformed file is a brrr::Error naming the
// file and the problem. Writing streams into a temporary file and renames it into place.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "brrr/tensor.h"

namespace brrr::safetensors {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

struct Header {
  std::vector<TensorInfo> tensors;  // sorted by begin offset
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;     // 8 + header length
};

// Validates the bytes of a whole file and returns its header; `label` names the file in
// errors. (File uses it; so does the fuzzer.)
Header parse(std::string_view bytes, const std::string& label);

class File {
 public:
  explicit File(const std::string& path);  // opens, maps and validates
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws naming file and tensor

  // A tensor over the mapped bytes (no copy; writes go to private copy-on-write pages).
  Tensor tensor(const std::string& name) const;
  // Copies a tensor straight into dst (same shape; dtype converted if it differs), then lets
  // the kernel drop the file pages it read, so loading a model never holds the weights twice.
  // transposed: the file holds dst's transpose, a 2-D (in, out) matrix such as a Hugging Face
  // Conv1D weight, and dst (out, in) receives it turned back.
  void copy_into(const std::string& name, const Tensor& dst, bool transposed = false) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<Mapping> mapping_;
  Header header_;
  mutable bool views_handed_out_ = false;
};

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
void save(const std::string& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});

}  // namespace brrr::safetensors
