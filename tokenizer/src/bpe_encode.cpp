// tokenizer/src/bpe_encode.cpp: fast encoding: heap-ordered merges, a cache, all cores.
// Chapter 06 (tokenization). Read first: bpe_naive.cpp's encode_piece (the same rule in
// O(n^2)). Read next: bpe_files.cpp.
//
// A piece of n bytes starts as n parts. The naive encoder scans all n-1 adjacent pairs for
// the lowest rank, merges it, and scans again: O(n^2). Here:
//   - the parts form a linked list (prev/next indices), so a merge unlinks a part in O(1);
//   - a min-heap holds (rank, position) for the adjacent pairs that make a token, so the
//     lowest rank, leftmost on ties, is at the top: O(log n) per merge;
//   - a merge changes the two pairs around the new part: their new ranks are pushed, and
//     entries that no longer describe the list are skipped when they surface (lazy
//     deletion, as in training).
// Ranks come from the pair table (PairMap) of two token ids, not from hashing the bytes
// of a concatenation as the naive encoder and tiktoken do.
//
// Real text repeats its words, so each thread keeps a cache of pieces it has encoded
// (a BytesMap from piece to its ids); most pieces of a large file are cache hits.
#include <omp.h>

#include <algorithm>
#include <exception>

#include "brrr/error.h"
#include "brrr/tokenizer/bpe.h"

namespace brrr::tokenizer {

namespace {

// Scratch space for merging one piece, reused from piece to piece.
struct MergeScratch {
  std::vector<uint32_t> id;             // id[i]: the token of the part starting at byte i
  std::vector<uint32_t> next, prev;     // the linked list of parts, by start byte
  std::vector<uint64_t> heap;           // (rank << 32) | position, a min-heap
};

constexpr uint32_t kDead = kNoToken;   // id of a byte position that is no longer a part

// Rules 2 and 3 of bpe.h for one piece, with the heap and the linked list.
void merge_piece(const Bpe& bpe, std::string_view piece, MergeScratch& s,
                 std::vector<uint32_t>* out) {
  uint32_t n = uint32_t(piece.size());
  if (n == 1) {
    out->push_back(bpe.byte_token(static_cast<unsigned char>(piece[0])));
    return;
  }
  if (uint32_t whole = bpe.find_token(piece); whole != kNoToken) {  // rule 2
    out->push_back(whole);
    return;
  }
  s.id.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  for (uint32_t i = 0; i < n; i++) {
    s.id[i] = bpe.byte_token(static_cast<unsigned char>(piece[i]));
    s.next[i] = i + 1;     // n means "no next part"
    s.prev[i] = i - 1;     // 0 - 1 wraps to kDead: "no previous part"
  }
  auto by_rank = std::greater<uint64_t>();  // makes std::push_heap a min-heap
  auto push = [&](uint32_t rank, uint32_t pos) {
    s.heap.push_back((uint64_t(rank) << 32) | pos);
    std::push_heap(s.heap.begin(), s.heap.end(), by_rank);
  };
  s.heap.clear();
  for (uint32_t i = 0; i + 1 < n; i++)
    if (uint32_t rank = bpe.merged(s.id[i], s.id[i + 1]); rank != kNoToken)
      s.heap.push_back((uint64_t(rank) << 32) | i);
  std::make_heap(s.heap.begin(), s.heap.end(), by_rank);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), by_rank);
    uint64_t top = s.heap.back();
    s.heap.pop_back();
    uint32_t rank = uint32_t(top >> 32), i = uint32_t(top);
    uint32_t j = s.next[i];
    // Stale if part i is gone, has no right neighbour, or the pair no longer makes `rank`.
    if (s.id[i] == kDead || j >= n || bpe.merged(s.id[i], s.id[j]) != rank) continue;
    // Merge part j into part i.
    s.id[i] = rank;
    s.id[j] = kDead;
    uint32_t k = s.next[j];
    s.next[i] = k;
    if (k < n) s.prev[k] = i;
    // The two pairs around the new part.
    uint32_t p = s.prev[i];
    if (p != kDead)
      if (uint32_t r = bpe.merged(s.id[p], rank); r != kNoToken) push(r, p);
    if (k < n)
      if (uint32_t r = bpe.merged(rank, s.id[k]); r != kNoToken) push(r, i);
  }
  for (uint32_t i = 0; i < n; i = s.next[i]) out->push_back(s.id[i]);
}

// One thread's encoder: its splitter, its cache and its scratch space.
class Encoder {
 public:
  explicit Encoder(const Bpe& bpe) : bpe_(bpe), splitter_(bpe.split_pattern()) {}

  Splitter& splitter() { return splitter_; }

  void encode_piece(std::string_view piece, std::vector<uint32_t>* out) {
    if (piece.size() == 1) {
      out->push_back(bpe_.byte_token(static_cast<unsigned char>(piece[0])));
      return;
    }
    uint64_t h = hash_bytes(piece);
    if (const Cached* hit = cache_.find(piece, h)) {
      out->insert(out->end(), cache_ids_.begin() + hit->offset,
                  cache_ids_.begin() + hit->offset + hit->length);
      return;
    }
    size_t before = out->size();
    merge_piece(bpe_, piece, scratch_, out);
    if (piece.size() > kMaxCachedBytes) return;  // long pieces rarely repeat
    if (cache_.size() >= kCacheEntries) {  // full: start over rather than grow forever
      cache_.clear();
      cache_ids_.clear();
    }
    cache_(piece, h) = Cached{uint32_t(cache_ids_.size()), uint32_t(out->size() - before)};
    cache_ids_.insert(cache_ids_.end(), out->begin() + before, out->end());
  }

 private:
  static constexpr size_t kCacheEntries = size_t(1) << 18;
  static constexpr size_t kMaxCachedBytes = 256;
  struct Cached {
    uint32_t offset, length;  // into cache_ids_
  };
  const Bpe& bpe_;
  Splitter splitter_;
  BytesMap<Cached> cache_;
  std::vector<uint32_t> cache_ids_;
  MergeScratch scratch_;
};

}  // namespace

// ----------------------------------------------------------------------------
// A stream of chunks (stream_encode.cpp calls this once per chunk, on each thread)

struct BpeChunkEncoder::Impl {
  Impl(const Bpe& b, bool s) : bpe(b), specials(s), encoder(b) {}
  const Bpe& bpe;
  bool specials;
  Encoder encoder;
};

BpeChunkEncoder::BpeChunkEncoder(const Bpe& bpe, bool specials)
    : impl_(std::make_unique<Impl>(bpe, specials)) {}

BpeChunkEncoder::~BpeChunkEncoder() = default;

bool BpeChunkEncoder::encode(std::string_view text, size_t end, std::vector<uint32_t>* out) {
  std::vector<Segment> segments;
  if (impl_->specials) segments = find_special_tokens(text, impl_->bpe.special_tokens());
  else if (!text.empty()) segments.push_back({0, text.size(), -1});
  const std::vector<uint32_t>& special_ids = impl_->bpe.special_ids();
  return for_each_piece(
      impl_->encoder.splitter(), text, segments, 0, end,
      [&](std::string_view piece) { impl_->encoder.encode_piece(piece, out); },
      [&](int special) { out->push_back(special_ids[special]); });
}

void Bpe::encode_piece(std::string_view piece, std::vector<uint32_t>* out) const {
  MergeScratch scratch;
  merge_piece(*this, piece, scratch, out);
}

std::vector<uint32_t> Bpe::encode(std::string_view text) const {
  return encode_range(text, true, 1);
}

std::vector<uint32_t> Bpe::encode_ordinary(std::string_view text) const {
  return encode_range(text, false, 1);
}

std::vector<uint32_t> Bpe::encode_parallel(std::string_view text, int threads,
                                           bool specials) const {
  return encode_range(text, specials, threads > 0 ? threads : omp_get_max_threads());
}

// Cuts the text into chunks at piece boundaries (find_chunks), encodes the chunks on
// `threads` threads, each into its own list, and joins the lists in order.
std::vector<uint32_t> Bpe::encode_range(std::string_view text, bool specials,
                                        int threads) const {
  std::vector<Segment> segments;
  if (specials) segments = find_special_tokens(text, special_texts_);
  else if (!text.empty()) segments.push_back({0, text.size(), -1});

  std::vector<size_t> bounds = threads <= 1
                                   ? std::vector<size_t>{0, text.size()}
                                   : find_chunks(text, segments, size_t(threads) * 8, 1 << 18);
  size_t chunks = bounds.size() - 1;
  std::vector<std::vector<uint32_t>> ids(chunks);
  std::vector<char> clean(chunks, 1);
  std::exception_ptr error;
#pragma omp parallel num_threads(std::max(threads, 1)) if (chunks > 1)
  {
    try {
      Encoder encoder(*this);
#pragma omp for schedule(dynamic, 1)
      for (size_t c = 0; c < chunks; c++) {
        // A local list, moved into ids[c] when done: pushing onto ids[c] directly would
        // write its end pointer, on a cache line shared with the neighbouring chunk's.
        std::vector<uint32_t> out;
        out.reserve((bounds[c + 1] - bounds[c]) / 3);
        bool ok = for_each_piece(
            encoder.splitter(), text, segments, bounds[c], bounds[c + 1],
            [&](std::string_view piece) { encoder.encode_piece(piece, &out); },
            [&](int special) { out.push_back(special_ids_[special]); });
        ids[c] = std::move(out);
        clean[c] = ok;
      }
    } catch (...) {
#pragma omp critical
      error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  if (std::find(clean.begin(), clean.end(), 0) != clean.end())
    return encode_range(text, specials, 1);  // a custom pattern did not cut at the chunks

  if (chunks == 1) return std::move(ids[0]);
  size_t total = 0;
  for (auto& v : ids) total += v.size();
  std::vector<uint32_t> all;
  all.reserve(total);
  for (auto& v : ids) all.insert(all.end(), v.begin(), v.end());
  return all;
}

}  // namespace brrr::tokenizer
