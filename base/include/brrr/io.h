// brrr/io.h: writing files so that a crash never leaves a torn one.
// Chapter 08 (training: checkpoints). Used by plots, checkpoints and token files.
//
// write_file_atomic writes to a temporary file in the same directory, fsyncs it, renames it
// over the target (an atomic step on POSIX file systems), then fsyncs the directory. A reader
// sees the old file or the new one, never half of one.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace brrr {

// Streams a file into place atomically: write() pieces, then commit(). Destroying it without
// commit() removes the temporary file and leaves any old file untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, std::size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  // Overwrites bytes already written, at `offset` from the start: a header whose counts are known
  // only at the end (a token file written as it streams, token_file.h).
  void write_at(std::size_t offset, const void* data, std::size_t size);
  void commit();  // fsync, rename over the target, fsync the directory

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

void write_file_atomic(const std::string& path, std::string_view bytes);
std::string read_file(const std::string& path);  // throws brrr::Error naming the file
}  // namespace brrr
