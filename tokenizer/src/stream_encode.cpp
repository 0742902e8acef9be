// tokenizer/src/stream_encode.cpp: a text larger than memory, read a block at a time, cut at
// safe places and encoded on all cores. Chapter 06 (tokenization). Read first:
// brrr/tokenizer/stream_encode.h (the rule, and why it is safe). Read next: shards.cpp.
#include "brrr/tokenizer/stream_encode.h"

#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"
#include "brrr/tokenizer/char_tokenizer.h"

namespace brrr::tokenizer {

namespace {
constexpr size_t kLookahead = 4096;  // bytes after a chunk's end its split may look at
}

bool is_safe_cut(std::string_view text, size_t i, const std::vector<std::string>& specials) {
  if (i == 0 || i >= text.size()) return false;
  const unsigned char before = static_cast<unsigned char>(text[i - 1]);
  const bool alnum = (before >= '0' && before <= '9') || (before >= 'A' && before <= 'Z') || (before >= 'a' && before <= 'z');
  const bool rule = text[i] == ' ' ? before > ' ' && before < 0x80 : text[i] == '\n' && alnum;
  if (!rule) return false;
  for (const std::string& s : specials)  // no occurrence of s may start in (i - |s|, i)
    for (size_t k = 1; k < s.size() && k <= i; k++)
      if (text.compare(i - k, s.size(), s) == 0) return false;
  return true;
}

StreamStats encode_stream(const ReadBytes& read, const std::function<EncodeChunk()>& make_encoder,
                          const StreamOptions& o, const WriteIds& write) {
  const int threads = o.threads > 0 ? o.threads : omp_get_max_threads();
  const size_t chunk_bytes = std::max<size_t>(o.chunk_bytes, 1);
  const size_t block_bytes = o.block_bytes ? o.block_bytes : chunk_bytes * 8 * size_t(threads);
  size_t longest_special = 1;
  for (const std::string& s : o.specials) longest_special = std::max(longest_special, s.size());

  std::vector<EncodeChunk> encoders(static_cast<size_t>(threads));
  StreamStats stats;
  std::string buffer;         // the block: bytes not yet encoded
  size_t want = block_bytes;  // bytes to hold before cutting (grows while no safe cut is found)
  bool end = false;
  while (true) {
    // 1. Fill the buffer.
    while (!end && buffer.size() < want) {
      const size_t old = buffer.size(), ask = std::max<size_t>(want - old, 1);
      buffer.resize(old + ask);
      const size_t got = read(buffer.data() + old, ask);
      buffer.resize(old + got);
      stats.bytes += got;
      if (got == 0) end = true;
    }
    stats.largest_block = std::max(stats.largest_block, buffer.size());
    if (buffer.empty()) break;
    // 2. Cut it: a safe cut at least chunk_bytes after the last, leaving room after it to check
    // that no special token spans it and, before the end of the text, a lookahead of 4 KiB for
    // the chunk's split; at the end of the text the rest is the last chunk.
    std::vector<size_t> bounds = {0};
    const size_t room = end ? longest_special : std::max(longest_special, kLookahead);
    const size_t last_cut = buffer.size() >= room ? buffer.size() - room : 0;
    for (size_t from = chunk_bytes; from <= last_cut; from = bounds.back() + chunk_bytes) {
      size_t i = from;
      while (i <= last_cut && !is_safe_cut(buffer, i, o.specials)) i++;
      if (i > last_cut) break;
      bounds.push_back(i);
    }
    if (end && bounds.back() < buffer.size()) bounds.push_back(buffer.size());
    if (bounds.size() == 1) {  // no safe cut yet in all this text: hold more of it
      want = buffer.size() * 2;
      continue;
    }
    want = block_bytes;
    // 3. Encode the chunks on all cores, each into its own list.
    const size_t chunks = bounds.size() - 1;
    std::vector<std::vector<uint32_t>> ids(chunks);
    std::vector<char> clean(chunks, 1);
    std::exception_ptr error;
    const std::string_view text(buffer);
#pragma omp parallel num_threads(threads) if (chunks > 1)
    {
      EncodeChunk* encoder = nullptr;
      try {
        EncodeChunk& mine = encoders[size_t(omp_get_thread_num())];
        if (!mine) mine = make_encoder();
        encoder = &mine;
      } catch (...) {
#pragma omp critical
        error = std::current_exception();
      }
#pragma omp for schedule(dynamic, 1)
      for (size_t c = 0; c < chunks; c++) {
        if (!encoder) continue;
        try {
          const size_t begin = bounds[c], stop = bounds[c + 1];
          const size_t view_end = std::min(text.size(), stop + kLookahead);
          std::vector<uint32_t> out;  // local, then moved: no shared cache line (bpe_encode.cpp)
          out.reserve((stop - begin) / 3);
          clean[c] = (*encoder)(text.substr(begin, view_end - begin), stop - begin, &out);
          ids[c] = std::move(out);
        } catch (...) {
#pragma omp critical
          error = std::current_exception();
        }
      }
    }
    if (error) std::rethrow_exception(error);
    // 4. Hand the ids on in order; keep the bytes after the last cut.
    for (size_t c = 0; c < chunks; c++) {
      BRRR_CHECK(clean[c], "encode_stream: the split pattern does not cut where a chunk ends (byte ",
                 stats.bytes - buffer.size() + bounds[c + 1],
                 " of the input): its pieces cross the safe cuts of the built-in patterns, so the "
                 "text cannot be encoded a chunk at a time (encode it whole, or use the gpt2 or "
                 "cl100k pattern)");
      write(ids[c]);
      stats.tokens += ids[c].size();
    }
    stats.chunks += chunks;
    stats.blocks += 1;
    buffer.erase(0, bounds.back());
    if (end && buffer.empty()) break;
  }
  return stats;
}

StreamStats encode_stream(const Bpe& bpe, bool specials, const ReadBytes& read, StreamOptions options,
                          const WriteIds& write) {
  options.specials = specials ? bpe.special_tokens() : std::vector<std::string>{};
  auto make = [&bpe, specials]() -> EncodeChunk {
    auto encoder = std::make_shared<BpeChunkEncoder>(bpe, specials);
    return [encoder](std::string_view text, size_t end, std::vector<uint32_t>* out) {
      return encoder->encode(text, end, out);
    };
  };
  return encode_stream(read, make, options, write);
}

StreamStats encode_stream(const CharTokenizer& chars, const ReadBytes& read, StreamOptions options,
                          const WriteIds& write) {
  options.specials.clear();
  auto make = [&chars]() -> EncodeChunk {
    return [&chars](std::string_view text, size_t end, std::vector<uint32_t>* out) {
      const std::vector<uint32_t> ids = chars.encode(text.substr(0, end));
      out->insert(out->end(), ids.begin(), ids.end());
      return true;
    };
  };
  return encode_stream(read, make, options, write);
}

ReadBytes read_file_stream(std::FILE* file, const std::string& path) {
  return [file, path](char* dst, size_t n) {
    const size_t got = std::fread(dst, 1, n, file);
    BRRR_CHECK(got == n || !std::ferror(file), path, ": read failed: ", std::strerror(errno));
    return got;
  };
}

ReadBytes read_string_stream(std::string_view text, size_t piece) {
  auto at = std::make_shared<size_t>(0);
  return [text, piece, at](char* dst, size_t n) {
    const size_t got = std::min({n, piece, text.size() - *at});
    std::memcpy(dst, text.data() + *at, got);
    *at += got;
    return got;
  };
}

}  // namespace brrr::tokenizer
