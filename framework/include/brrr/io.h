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
void write_file_atomic(const std::string& path, std::string_view bytes);
std::string read_file(const std::string& path);  // throws brrr::Error naming the file
}  // namespace brrr
