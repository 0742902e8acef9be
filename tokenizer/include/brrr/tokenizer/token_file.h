// brrr/tokenizer/token_file.h: a file of token ids, the trainer's input.
// Chapter 06 (tokenization). Read first: bpe.h. Read next: stream_encode.h (how a corpus larger
// than memory becomes shards of these files), then chapter 07, whose data loader maps these
// files into memory (MappedTokenFile).
//
// `brrr tokenizer encode` writes, and the GPT trainer reads, this format (little-endian):
//
//   offset  size  field
//        0     8  magic "BRRRTOK\0"
//        8     4  version: 1, or 2 when the file names its tokenizer
//       12     4  bytes per id: 2 (uint16) or 4 (uint32)
//       16     8  count: how many ids follow
//       24     8  vocab_size of the tokenizer that wrote them (every id is below it)
//   version 2 only:
//       32     8  tokenizer hash: FNV-1a (64 bits) of the tokenizer file's bytes (tokenizer_hash)
//       40    24  tokenizer name, NUL-padded (the file it came from: for messages only)
//   32 or 64   .  count ids, each 2 or 4 bytes
//
// The header is 32 or 64 bytes, so the ids start aligned for either width. uint16 halves the
// file and the memory traffic of the data loader; it holds vocabularies up to 65536 tokens,
// which covers brrr's 4096 and GPT-2's 50257. The hash lets a reader of many shards refuse
// a mix of tokenizers, and a shard whose tokenizer is not the one beside it.
//
// llm.c's format is read and, on request, written too (dev/data/data_common.py's
// write_datafile): a header of 256 int32 (1024 bytes): [0] the magic 20240520, [1] the
// version 1, [2] the count of ids (below 2^31), the rest 0; then the ids as uint16. It names
// no tokenizer and no vocabulary size. (llm.c's Llama 3 variant, magic 20240801 and version 7
// with uint32 ids, is read as well.)
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brrr {
class AtomicFile;
}

namespace brrr::tokenizer {

// The first 32 bytes of a brrr token file (of either version).
struct TokenFileHeader {
  char magic[8];
  uint32_t version;
  uint32_t id_bytes;
  uint64_t count;
  uint64_t vocab_size;
};
static_assert(sizeof(TokenFileHeader) == 32);

inline constexpr char kTokenFileMagic[8] = {'B', 'R', 'R', 'R', 'T', 'O', 'K', '\0'};
inline constexpr int32_t kLlmcMagic = 20240520;       // llm.c, GPT-2: uint16 ids
inline constexpr int32_t kLlmcLlama3Magic = 20240801;  // llm.c, Llama 3: uint32 ids
inline constexpr size_t kLlmcHeaderBytes = 256 * 4;
inline constexpr size_t kTokenizerNameBytes = 24;

enum class TokenFileFormat { kBrrr, kLlmc };

// FNV-1a, 64 bits, of a tokenizer file's bytes: the tokenizer a version-2 file names.
uint64_t tokenizer_hash(std::string_view tokenizer_file_bytes);

// What a token file's header says, whichever format it is in.
struct TokenFileInfo {
  TokenFileFormat format = TokenFileFormat::kBrrr;
  uint32_t version = 1;
  int id_bytes = 2;
  uint64_t count = 0;
  uint64_t vocab_size = 0;      // 0: not recorded (llm.c)
  uint64_t tokenizer_hash = 0;  // 0: not recorded (version 1, llm.c)
  std::string tokenizer_name;
  size_t header_bytes = 32;     // where the ids start
};

// Reads and checks the header of a token file of `file_bytes` bytes whose first bytes are
// `head` (at least 1024 of them, or the whole file if shorter). Throws brrr::Error naming
// `path` when the magic, version or id width is wrong or the size does not match the count.
TokenFileInfo parse_token_file_header(const std::string& path, std::string_view head, uint64_t file_bytes);

// How a writer fills the header.
struct TokenFileSpec {
  uint64_t vocab_size = 0;
  int id_bytes = 0;               // 0: 2 when vocab_size <= 65536, else 4
  uint64_t tokenizer_hash = 0;    // with a name: version 2; neither: version 1
  std::string tokenizer_name;
  TokenFileFormat format = TokenFileFormat::kBrrr;
};

// Writes a token file as the ids arrive, atomically (a temporary file beside it, renamed by
// commit(); destroyed without commit(), it leaves nothing behind). The header's count is
// written last. Throws, naming the file, on an id not below vocab_size or too wide for the
// file (llm.c: uint16 ids, fewer than 2^31 of them).
class TokenFileWriter {
 public:
  TokenFileWriter(std::string path, const TokenFileSpec& spec);
  ~TokenFileWriter();
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  void write(std::span<const uint32_t> ids);
  uint64_t count() const { return count_; }
  const std::string& path() const { return path_; }
  void commit();

 private:
  std::string path_;
  TokenFileSpec spec_;
  std::unique_ptr<AtomicFile> file_;
  uint64_t count_ = 0;
  std::vector<uint16_t> narrow_;
};

// Writes ids atomically (version 1, no tokenizer named). id_bytes 0 picks 2 when
// vocab_size <= 65536, else 4. Throws when an id is not below vocab_size or does not fit id_bytes.
void write_token_file(const std::string& path, std::span<const uint32_t> ids, uint64_t vocab_size,
                      int id_bytes = 0);

// Reads the whole file into memory (any of the formats above). Throws brrr::Error naming the
// file when the header is wrong or the file is shorter or longer than the header says.
std::vector<uint32_t> read_token_file(const std::string& path, TokenFileHeader* header = nullptr);

// The file mapped into memory read-only (mmap): opening is instant, pages load on use, and
// several processes share one copy. ids are read with operator[].
class MappedTokenFile {
 public:
  explicit MappedTokenFile(const std::string& path);
  ~MappedTokenFile();
  MappedTokenFile(const MappedTokenFile&) = delete;
  MappedTokenFile& operator=(const MappedTokenFile&) = delete;

  uint64_t size() const { return info_.count; }
  uint64_t vocab_size() const { return info_.vocab_size; }  // 0 for llm.c's files
  int id_bytes() const { return info_.id_bytes; }
  const TokenFileInfo& info() const { return info_; }
  const std::string& path() const { return path_; }
  uint32_t operator[](uint64_t i) const {
    return info_.id_bytes == 2 ? static_cast<const uint16_t*>(ids_)[i]
                               : static_cast<const uint32_t*>(ids_)[i];
  }
  const void* data() const { return ids_; }  // the raw ids, id_bytes() each

 private:
  std::string path_;
  TokenFileInfo info_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const void* ids_ = nullptr;
};

}  // namespace brrr::tokenizer
