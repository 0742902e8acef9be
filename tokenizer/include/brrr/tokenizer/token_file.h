// brrr/tokenizer/token_file.h: a file of token ids, the trainer's input.
// Chapter 06 (tokenization). Read first: bpe.h. Read next: chapter 07, whose data loader
// maps these files into memory (MappedTokenFile).
//
// `brrr tokenizer encode` writes, and the GPT trainer reads, this format (little-endian):
//
//   offset  size  field
//        0     8  magic "BRRRTOK\0"
//        8     4  version, 1
//       12     4  bytes per id: 2 (uint16) or 4 (uint32)
//       16     8  count: how many ids follow
//       24     8  vocab_size of the tokenizer that wrote them (every id is below it)
//       32     .  count ids, each 2 or 4 bytes
//
// The header is 32 bytes, so the ids start aligned for either width. uint16 halves the file
// and the memory traffic of the data loader; it holds vocabularies up to 65536 tokens, which
// covers brrr's 4096 and GPT-2's 50257.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace brrr::tokenizer {

struct TokenFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t id_bytes;
  uint64_t count;
  uint64_t vocab_size;
};
static_assert(sizeof(TokenFileHeader) == 32);

inline constexpr char kTokenFileMagic[8] = {'B', 'R', 'R', 'R', 'T', 'O', 'K', '\0'};

// Writes ids atomically. id_bytes 0 picks 2 when vocab_size <= 65536, else 4. Throws when an
// id is not below vocab_size or does not fit id_bytes.
void write_token_file(const std::string& path, std::span<const uint32_t> ids, uint64_t vocab_size,
                      int id_bytes = 0);

// Reads the whole file into memory. Throws brrr::Error naming the file when the header is
// wrong or the file is shorter or longer than the header says.
std::vector<uint32_t> read_token_file(const std::string& path, TokenFileHeader* header = nullptr);

// The file mapped into memory read-only (mmap): opening is instant, pages load on use, and
// several processes share one copy. ids are read with operator[].
class MappedTokenFile {
 public:
  explicit MappedTokenFile(const std::string& path);
  ~MappedTokenFile();
  MappedTokenFile(const MappedTokenFile&) = delete;
  MappedTokenFile& operator=(const MappedTokenFile&) = delete;

  uint64_t size() const { return header_.count; }
  uint64_t vocab_size() const { return header_.vocab_size; }
  int id_bytes() const { return int(header_.id_bytes); }
  uint32_t operator[](uint64_t i) const {
    return header_.id_bytes == 2 ? static_cast<const uint16_t*>(ids_)[i]
                                 : static_cast<const uint32_t*>(ids_)[i];
  }
  const void* data() const { return ids_; }  // the raw ids, id_bytes() each

 private:
  TokenFileHeader header_{};
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* ids_ = nullptr;
};

}  // namespace brrr::tokenizer
