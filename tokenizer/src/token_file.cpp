// tokenizer/src/token_file.cpp: writing, reading and mapping token id files.
// Chapter 06 (tokenization). Read first: brrr/tokenizer/token_file.h (the formats).
// Read next: stream_encode.cpp, which writes these files as a corpus streams by.
#include "brrr/tokenizer/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "brrr/error.h"
#include "brrr/io.h"
#include "file_util.h"

namespace brrr::tokenizer {

static_assert(std::endian::native == std::endian::little,
              "token files are little-endian and brrr writes them with memcpy");

uint64_t tokenizer_hash(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits: the offset basis, then xor and multiply
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The header's fields make sense and match a file of `file_bytes` bytes.
TokenFileInfo parse_token_file_header(const std::string& path, std::string_view head, uint64_t file_bytes) {
  TokenFileInfo info;
  int32_t llmc[3] = {0, 0, 0};
  if (head.size() >= sizeof(llmc)) std::memcpy(llmc, head.data(), sizeof(llmc));
  if (llmc[0] == kLlmcMagic || llmc[0] == kLlmcLlama3Magic) {
    const bool gpt2 = llmc[0] == kLlmcMagic;
    BRRR_CHECK(file_bytes >= kLlmcHeaderBytes, path, ": ", file_bytes,
               " bytes is too short for llm.c's 1024-byte header (truncated?)");
    BRRR_CHECK(llmc[1] == (gpt2 ? 1 : 7), path, ": llm.c token file version ", llmc[1], ", expected ",
               gpt2 ? 1 : 7);
    BRRR_CHECK(llmc[2] >= 0, path, ": llm.c header says ", llmc[2], " tokens");
    info.format = TokenFileFormat::kLlmc;
    info.version = uint32_t(llmc[1]);
    info.id_bytes = gpt2 ? 2 : 4;
    info.count = uint64_t(llmc[2]);
    info.header_bytes = kLlmcHeaderBytes;
  } else {
    TokenFileHeader h{};
    BRRR_CHECK(head.size() >= sizeof(h), path, ": ", file_bytes,
               " bytes is too short for the 32-byte token file header");
    std::memcpy(&h, head.data(), sizeof(h));
    BRRR_CHECK(std::memcmp(h.magic, kTokenFileMagic, 8) == 0, path,
               ": not a brrr token file (the magic bytes are not BRRRTOK) nor llm.c's (20240520)");
    BRRR_CHECK(h.version == 1 || h.version == 2, path, ": token file version ", h.version,
               ", this brrr reads 1 and 2");
    BRRR_CHECK(h.id_bytes == 2 || h.id_bytes == 4, path, ": ", h.id_bytes, " bytes per id, expected 2 or 4");
    info.version = h.version;
    info.id_bytes = int(h.id_bytes);
    info.count = h.count;
    info.vocab_size = h.vocab_size;
    if (h.version == 2) {
      BRRR_CHECK(head.size() >= 64, path, ": ", file_bytes,
                 " bytes is too short for the 64-byte header of a version 2 token file (truncated?)");
      std::memcpy(&info.tokenizer_hash, head.data() + 32, 8);
      const char* name = head.data() + 40;
      info.tokenizer_name.assign(name, strnlen(name, kTokenizerNameBytes));
      info.header_bytes = 64;
    }
  }
  // (A count too large to multiply out is a truncated file too.)
  const uint64_t id_bytes = uint64_t(info.id_bytes);
  const uint64_t expected = info.count <= file_bytes / id_bytes ? info.header_bytes + info.count * id_bytes
                                                                : ~uint64_t(0);
  BRRR_CHECK(file_bytes == expected, path, ": the header says ", info.count, " ids of ", id_bytes, " bytes (",
             expected, " bytes in all), the file has ", file_bytes, " bytes",
             file_bytes < expected ? " (truncated?)" : "");
  return info;
}

// ----------------------------------------------------------------------------
// Writing

TokenFileWriter::TokenFileWriter(std::string path, const TokenFileSpec& spec)
    : path_(std::move(path)), spec_(spec) {
  const bool llmc = spec_.format == TokenFileFormat::kLlmc;
  if (spec_.id_bytes == 0) spec_.id_bytes = spec_.vocab_size <= 65536 || llmc ? 2 : 4;
  BRRR_CHECK(spec_.id_bytes == 2 || spec_.id_bytes == 4, path_, ": id_bytes ", spec_.id_bytes,
             ", expected 2 or 4");
  BRRR_CHECK(spec_.id_bytes == 4 || spec_.vocab_size <= 65536, path_, ": a vocabulary of ", spec_.vocab_size,
             " tokens does not fit uint16 ids", llmc ? " (llm.c's GPT-2 format holds uint16 ids only)" : "");
  BRRR_CHECK(!llmc || spec_.id_bytes == 2, path_, ": llm.c's GPT-2 format holds uint16 ids only");
  file_ = std::make_unique<AtomicFile>(path_);
  // The header, with a count of 0 until commit() knows it.
  if (llmc) {
    std::vector<int32_t> header(256, 0);
    header[0] = kLlmcMagic;
    header[1] = 1;
    file_->write(header.data(), kLlmcHeaderBytes);
    return;
  }
  const bool named = spec_.tokenizer_hash != 0 || !spec_.tokenizer_name.empty();
  TokenFileHeader h{};
  std::memcpy(h.magic, kTokenFileMagic, 8);
  h.version = named ? 2 : 1;
  h.id_bytes = uint32_t(spec_.id_bytes);
  h.vocab_size = spec_.vocab_size;
  file_->write(&h, sizeof(h));
  if (named) {
    char tail[32] = {};
    std::memcpy(tail, &spec_.tokenizer_hash, 8);
    std::memcpy(tail + 8, spec_.tokenizer_name.data(),
                std::min(spec_.tokenizer_name.size(), kTokenizerNameBytes - 1));
    file_->write(tail, sizeof(tail));
  }
}

TokenFileWriter::~TokenFileWriter() = default;

void TokenFileWriter::write(std::span<const uint32_t> ids) {
  BRRR_CHECK(file_ != nullptr, path_, ": already committed");
  const bool llmc = spec_.format == TokenFileFormat::kLlmc;
  for (size_t i = 0; i < ids.size(); i++)
    BRRR_CHECK(ids[i] < spec_.vocab_size, path_, ": id ", ids[i], " at position ", count_ + i,
               " is not below vocab_size ", spec_.vocab_size);
  BRRR_CHECK(!llmc || count_ + ids.size() < (uint64_t(1) << 31), path_,
             ": llm.c's format holds fewer than 2^31 ids a file (use shards: --shard-tokens)");
  if (spec_.id_bytes == 4) {
    file_->write(ids.data(), ids.size() * 4);
  } else {
    narrow_.assign(ids.begin(), ids.end());
    file_->write(narrow_.data(), narrow_.size() * 2);
  }
  count_ += ids.size();
}

void TokenFileWriter::commit() {
  BRRR_CHECK(file_ != nullptr, path_, ": already committed");
  if (spec_.format == TokenFileFormat::kLlmc) {
    const int32_t count = int32_t(count_);
    file_->write_at(8, &count, 4);
  } else {
    file_->write_at(offsetof(TokenFileHeader, count), &count_, 8);
  }
  file_->commit();
  file_.reset();
}

void write_token_file(const std::string& path, std::span<const uint32_t> ids, uint64_t vocab_size,
                      int id_bytes) {
  if (id_bytes == 0) id_bytes = vocab_size <= 65536 ? 2 : 4;
  BRRR_CHECK(id_bytes == 2 || id_bytes == 4, "write_token_file: id_bytes ", id_bytes,
             ", expected 2 or 4");
  BRRR_CHECK(id_bytes == 4 || vocab_size <= 65536, "write_token_file: a vocabulary of ",
             vocab_size, " tokens does not fit uint16 ids");
  for (size_t i = 0; i < ids.size(); i++)
    BRRR_CHECK(ids[i] < vocab_size, "write_token_file: id ", ids[i], " at position ", i,
               " is not below vocab_size ", vocab_size);
  TokenFileSpec spec;
  spec.vocab_size = vocab_size;
  spec.id_bytes = id_bytes;
  TokenFileWriter writer(path, spec);
  constexpr size_t kBlock = 1 << 16;  // converted and written a block at a time
  for (size_t start = 0; start < ids.size(); start += kBlock)
    writer.write(ids.subspan(start, std::min(kBlock, ids.size() - start)));
  writer.commit();
}

// ----------------------------------------------------------------------------
// Reading

std::vector<uint32_t> read_token_file(const std::string& path, TokenFileHeader* header) {
  std::string bytes = read_file(path);
  TokenFileInfo info = parse_token_file_header(path, bytes, bytes.size());
  std::vector<uint32_t> ids(info.count);
  const char* p = bytes.data() + info.header_bytes;
  for (uint64_t i = 0; i < info.count; i++) {
    if (info.id_bytes == 2) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      ids[i] = v;
    } else {
      std::memcpy(&ids[i], p + 4 * i, 4);
    }
  }
  if (header) {
    *header = TokenFileHeader{};
    std::memcpy(header->magic, kTokenFileMagic, 8);
    header->version = info.version;
    header->id_bytes = uint32_t(info.id_bytes);
    header->count = info.count;
    header->vocab_size = info.vocab_size;
  }
  return ids;
}

MappedTokenFile::MappedTokenFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  BRRR_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || uint64_t(st.st_size) < sizeof(TokenFileHeader)) {
    ::close(fd);
    ::brrr::detail::fail(path, ": too short for the 32-byte token file header");
  }
  map_bytes_ = size_t(st.st_size);
  map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file open
  BRRR_CHECK(map_ != MAP_FAILED, path, ": mmap failed: ", std::strerror(errno));
  try {
    info_ = parse_token_file_header(
        path, std::string_view(static_cast<const char*>(map_), std::min(map_bytes_, kLlmcHeaderBytes)),
        map_bytes_);
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    throw;
  }
  ids_ = static_cast<const char*>(map_) + info_.header_bytes;
}

MappedTokenFile::~MappedTokenFile() {
  if (map_ && map_ != MAP_FAILED) ::munmap(map_, map_bytes_);
}

}  // namespace brrr::tokenizer
