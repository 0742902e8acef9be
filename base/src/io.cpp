// base/src/io.cpp: atomic file writes and whole-file reads.
// Chapter 08 (training: checkpoints).
#include "brrr/io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>

#include "brrr/error.h"

namespace brrr {

namespace {
std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp.XXXXXX") {
  fd_ = ::mkstemp(tmp_.data());
  BRRR_CHECK(fd_ >= 0, "cannot write '", path_, "': cannot create a temporary file in '", directory_of(path_), "': ",
             std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, std::size_t size) {
  BRRR_CHECK(fd_ >= 0, "cannot write '", path_, "': already committed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    BRRR_CHECK(n > 0, "cannot write '", path_, "': ", std::strerror(errno));
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::write_at(std::size_t offset, const void* data, std::size_t size) {
  BRRR_CHECK(fd_ >= 0, "cannot write '", path_, "': already committed");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::pwrite(fd_, p, size, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    BRRR_CHECK(n > 0, "cannot write '", path_, "': ", std::strerror(errno));
    p += n;
    offset += static_cast<std::size_t>(n);
    size -= static_cast<std::size_t>(n);
  }
}

void AtomicFile::commit() {
  BRRR_CHECK(fd_ >= 0, "cannot write '", path_, "': already committed");
  const int fd = fd_;
  fd_ = -1;
  const int synced = ::fsync(fd) == 0 ? 0 : errno;
  const int closed = ::close(fd) == 0 ? 0 : errno;  // always closed, even when fsync failed
  if (synced || closed) {
    ::unlink(tmp_.c_str());
    detail::fail("cannot write '", path_, "': ", std::strerror(synced ? synced : closed));
  }
  ::chmod(tmp_.c_str(), 0644);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    detail::fail("cannot write '", path_, "': rename failed: ", std::strerror(err));
  }
  const int dfd = ::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  BRRR_CHECK(f != nullptr, "cannot read '", path, "': ", std::strerror(errno));
  std::string data;
  char buffer[1 << 16];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) data.append(buffer, n);
  const bool failed = std::ferror(f);  // e.g. a directory: it opens, but reading fails
  const int err = errno;
  std::fclose(f);
  BRRR_CHECK(!failed, "cannot read '", path, "': ", std::strerror(err));
  return data;
}

}  // namespace brrr
