// tokenizer/src/token_file.cpp: writing, reading and mapping token id files.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/token_file.h (the format).
// Read next: apps/brrr/cli_tokenizer.cpp, the command line that writes these files.
#include "brrr/tokenizer/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "brrr/error.h"
#include "brrr/io.h"
#include "file_util.h"

namespace brrr::tokenizer {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and brrr writes them with memcpy");

// The header's fields make sense and match a file of `file_bytes` bytes.
static void check_header(const std::string& path, const TokenFileHeader& h, uint64_t file_bytes) {
  BRRR_CHECK(std::memcmp(h.magic, kTokenFileMagic, 8) == 0, path,
             ": not a brrr token file (the magic bytes are not BRRRTOK)");
  BRRR_CHECK(h.version == 1, path, ": token file version ", h.version, ", this brrr reads 1");
  BRRR_CHECK(h.id_bytes == 2 || h.id_bytes == 4, path, ": ", h.id_bytes,
             " bytes per id, expected 2 or 4");
  // (A count too large to multiply out is a truncated file too.)
  uint64_t expected = h.count <= file_bytes / h.id_bytes
                          ? sizeof(TokenFileHeader) + h.count * h.id_bytes
                          : ~uint64_t(0);
  BRRR_CHECK(file_bytes == expected, path, ": the header says ", h.count, " ids of ", h.id_bytes,
             " bytes (", expected, " bytes in all), the file has ", file_bytes, " bytes",
             file_bytes < expected ? " (truncated?)" : "");
}

void write_token_file(const std::string& path, std::span<const uint32_t> ids, uint64_t vocab_size,
                      int id_bytes) {
  if (id_bytes == 0) id_bytes = vocab_size <= 65536 ? 2 : 4;
  BRRR_CHECK(id_bytes == 2 || id_bytes == 4, "write_token_file: id_bytes ", id_bytes,
             ", expected 2 or 4");
  BRRR_CHECK(id_bytes == 4 || vocab_size <= 65536, "write_token_file: a vocabulary of ",
             vocab_size, " tokens does not fit uint16 ids");
  TokenFileHeader h{};
  std::memcpy(h.magic, kTokenFileMagic, 8);
  h.version = 1;
  h.id_bytes = uint32_t(id_bytes);
  h.count = ids.size();
  h.vocab_size = vocab_size;

  AtomicFile file(path);
  file.write(&h, sizeof(h));
  // Convert and write a block at a time.
  std::vector<uint16_t> narrow;
  constexpr size_t kBlock = 1 << 16;
  for (size_t start = 0; start < ids.size(); start += kBlock) {
    std::span<const uint32_t> block = ids.subspan(start, std::min(kBlock, ids.size() - start));
    for (size_t i = 0; i < block.size(); i++)
      BRRR_CHECK(block[i] < vocab_size, "write_token_file: id ", block[i], " at position ",
                 start + i, " is not below vocab_size ", vocab_size);
    if (id_bytes == 4) {
      file.write(block.data(), block.size() * 4);
    } else {
      narrow.assign(block.begin(), block.end());
      file.write(narrow.data(), narrow.size() * 2);
    }
  }
  file.commit();
}

std::vector<uint32_t> read_token_file(const std::string& path, TokenFileHeader* header) {
  std::string bytes = read_file(path);
  TokenFileHeader h{};
  BRRR_CHECK(bytes.size() >= sizeof(h), path, ": ", bytes.size(),
             " bytes is too short for the 32-byte token file header");
  std::memcpy(&h, bytes.data(), sizeof(h));
  check_header(path, h, bytes.size());
  std::vector<uint32_t> ids(h.count);
  const char* p = bytes.data() + sizeof(h);
  for (uint64_t i = 0; i < h.count; i++) {
    if (h.id_bytes == 2) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      ids[i] = v;
    } else {
      std::memcpy(&ids[i], p + 4 * i, 4);
    }
  }
  if (header) *header = h;
  return ids;
}

MappedTokenFile::MappedTokenFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  BRRR_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || uint64_t(st.st_size) < sizeof(TokenFileHeader)) {
    ::close(fd);
    ::brrr::detail::fail(path, ": too short for the 32-byte token file header");
  }
  map_bytes_ = size_t(st.st_size);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file open
  BRRR_CHECK(map_ != MAP_FAILED, path, ": mmap failed: ", std::strerror(errno));
  std::memcpy(&header_, map_, sizeof(header_));
  try {
    check_header(path, header_, map_bytes_);
  } catch (...) {
    ::munmap(map_, map_bytes_);
    throw;
  }
  ids_ = static_cast<const char*>(map_) + sizeof(TokenFileHeader);
}

MappedTokenFile::~MappedTokenFile() {
  if (map_ && map_ != MAP_FAILED) ::munmap(map_, map_bytes_);
}

}  // namespace brrr::tokenizer
