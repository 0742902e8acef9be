// brrr/tokenizer/stream_encode.h: encoding a text larger than memory, on all cores.
// Chapter 06 (tokenization), "A corpus larger than memory". Read first: pretokenize.h
// (find_chunks, Splitter) and bpe.h. Read next: shards.h, where the ids go.
//
// The text is read a block at a time and cut into chunks; the chunks of a block are encoded
// on all cores, each into its own list, and the lists are handed on in order. What is held is
// one block and its ids, whatever the size of the text. The ids are those of encoding the whole
// text at once, because a chunk is only ever cut at a *safe cut*: a byte i where
//
//   text[i] is a space ' ' and text[i-1] an ASCII byte that is not whitespace or a control
//   (0x21..0x7F), or text[i] is a newline '\n' and text[i-1] an ASCII letter or digit;
//   and no occurrence of a special token spans i.
//
// Why that is safe for GPT-2's and GPT-4's patterns (kGpt2Pattern, kCl100kPattern): the piece
// that holds text[i-1] is a letter, number or punctuation run (or a contraction), and each of
// those stops at a space exactly as it stops at the end of the text: none of them can take a
// space after a non-space character (GPT-2's ` ?\p{L}++` takes a space only *before* its
// letters; cl100k's punctuation run goes on only over \r and \n). Letter and number runs (and
// contractions, which end in a letter) stop at a newline too; a punctuation run does not stop
// there in cl100k (`x.\n` is the pieces `x` and `.\n`), hence the narrower rule for '\n'. So the whole text's split
// ends a piece at i, and the split of the chunk text[..i) ends its last piece there too; no
// earlier piece looked as far as i (the one lookahead, `\s+(?!\S)`, and `\s++$` only look past
// whitespace, and text[i-1] is not whitespace). The next chunk starts a piece at i, and neither
// pattern looks behind. Special tokens are cut out before the regex runs, and a cut inside none
// of them leaves every occurrence whole on one side.
//
// A cut that looks as natural is not safe: after a newline that a non-space follows. The chunk
// " \n" ends in whitespace, where `\s++$` takes " \n" as one piece; in the whole text " \nX"
// the same bytes are the pieces " " and "\n". tests/tokenizer/test_stream.cpp checks that
// counterexample, and the rule above on texts made of whitespace runs, newlines, Unicode and
// special tokens, with chunks forced down to a byte.
//
// A custom pattern may cut elsewhere: each chunk's split also sees the 4 KiB after its end
// (or the rest of the text), and a chunk whose last piece crosses its end is an error naming
// the byte, not a silent change of ids. (A pattern that looks further ahead than that, or
// behind, is beyond this check: stream only with patterns that cut at safe cuts.)
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brrr::tokenizer {

class Bpe;
class CharTokenizer;

struct StreamOptions {
  int threads = 0;                       // 0: all cores
  size_t chunk_bytes = size_t(1) << 20;  // a chunk is this long, up to the next safe cut
  size_t block_bytes = 0;                // read this much at a time (0: 8 chunks per thread)
  std::vector<std::string> specials;     // the special tokens the text may hold
};

struct StreamStats {
  uint64_t bytes = 0;     // read
  uint64_t tokens = 0;    // written
  uint64_t chunks = 0;
  uint64_t blocks = 0;
  size_t largest_block = 0;  // bytes held at once: what memory grows with
};

// Reads up to n bytes into dst and returns how many; 0 at the end of the text.
using ReadBytes = std::function<size_t(char* dst, size_t n)>;
// Encodes text[0, end), text[end, ...) being what follows it (see BpeChunkEncoder::encode).
using EncodeChunk = std::function<bool(std::string_view text, size_t end, std::vector<uint32_t>* out)>;
// Receives the ids in the order of the text.
using WriteIds = std::function<void(std::span<const uint32_t> ids)>;

// Whether i is a safe cut of text (above). text must hold the bytes up to i plus the longest
// special token's length.
bool is_safe_cut(std::string_view text, size_t i, const std::vector<std::string>& specials);

// The loop: read, cut, encode on `threads` threads (make_encoder is called once on each, so
// each keeps its caches), write in order. Throws brrr::Error when a chunk does not end cleanly.
StreamStats encode_stream(const ReadBytes& read, const std::function<EncodeChunk()>& make_encoder,
                          const StreamOptions& options, const WriteIds& write);

// The same for a BPE (specials: recognise its special tokens in the text, as encode() does;
// false: as encode_ordinary()) and for a character tokenizer.
StreamStats encode_stream(const Bpe& bpe, bool specials, const ReadBytes& read, StreamOptions options,
                          const WriteIds& write);
StreamStats encode_stream(const CharTokenizer& chars, const ReadBytes& read, StreamOptions options,
                          const WriteIds& write);

// Readers: a file (read with fread; the caller closes it), and a string in pieces of at most
// `piece` bytes (for tests).
ReadBytes read_file_stream(std::FILE* file, const std::string& path);
ReadBytes read_string_stream(std::string_view text, size_t piece = size_t(1) << 20);

}  // namespace brrr::tokenizer
