// brrr/tokenizer/hash.h: the two hash tables the tokenizer lives on.
// Chapter 06 (tokenization). Read first: pretokenize.h. Read next: bpe.h.
//
// Training counts millions of words and encoding looks up a pair of tokens for every merge,
// so the tables are small open-addressing maps (one flat array of slots, linear probing)
// instead of std::unordered_map, which allocates a node per entry and chases a pointer per
// lookup. Both are about 60 lines; nothing here is specific to BPE.
//
//   PairMap:      (left id, right id) -> id         "which token do these two make?"
//   BytesMap<V>:  byte string -> V                  word counts, the token index, the cache
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "brrr/error.h"

namespace brrr::tokenizer {

// A 64-bit hash of a byte string, 8 bytes per step: xor the word in, multiply by an odd
// constant, fold the high bits down (the mixing steps of splitmix64).
inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0xff51afd7ed558ccdull);
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
  }
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}

// ----------------------------------------------------------------------------
// PairMap: two 32-bit ids packed in one 64-bit key.

class PairMap {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;

  // The value stored for (left, right), or kNone.
  uint32_t find(uint32_t left, uint32_t right) const {
    if (slots_.empty()) return kNone;
    uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return slots_[i].value;
      if (slots_[i].key == kEmpty) return kNone;
    }
  }

  void insert(uint32_t left, uint32_t right, uint32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    uint64_t key = pack(left, right);
    size_t i = slot_of(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].key == kEmpty) size_++;
    slots_[i] = {key, value};
  }

  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;  // (kNone, kNone): never a real pair
  struct Slot {
    uint64_t key;
    uint32_t value;
  };
  static uint64_t pack(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }
  size_t slot_of(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t capacity = old.empty() ? 64 : old.size() * 2;
    slots_.assign(capacity, Slot{kEmpty, 0});
    mask_ = capacity - 1;
    shift_ = 64 - __builtin_ctzll(capacity);
    size_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) insert(uint32_t(s.key >> 32), uint32_t(s.key), s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t mask_ = 0;
  int shift_ = 64;
};

// ----------------------------------------------------------------------------
// BytesMap<V>: byte-string keys, copied into one arena string when first inserted.

template <class V>
class BytesMap {
 public:
  // The value for key, or nullptr. `hash` is hash_bytes(key), computed once by the caller.
  V* find(std::string_view key, uint64_t hash) {
    if (slots_.empty()) return nullptr;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.length == kEmpty) return nullptr;
      if (s.hash == hash && key_of(s) == key) return &s.value;
    }
  }
  const V* find(std::string_view key, uint64_t hash) const {
    return const_cast<BytesMap*>(this)->find(key, hash);
  }

  // The value for key, value-initialised (0 for numbers) when key is new.
  V& operator()(std::string_view key, uint64_t hash) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    size_t i = hash & mask_;
    for (;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.length == kEmpty) break;
      if (s.hash == hash && key_of(s) == key) return s.value;
    }
    BRRR_CHECK(keys_.size() + key.size() < kEmpty && key.size() < kEmpty,
               "BytesMap: more than 4 GiB of distinct keys");
    slots_[i] = Slot{hash, uint32_t(keys_.size()), uint32_t(key.size()), V{}};
    keys_.append(key);
    size_++;
    return slots_[i].value;
  }

  // fn(std::string_view key, V& value) for every entry, in slot order.
  template <class Fn>
  void for_each(Fn&& fn) {
    for (Slot& s : slots_)
      if (s.length != kEmpty) fn(key_of(s), s.value);
  }

  size_t size() const { return size_; }
  size_t key_bytes() const { return keys_.size(); }
  void clear() {
    slots_.clear();
    keys_.clear();
    size_ = 0;
    mask_ = 0;
  }

 private:
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
  struct Slot {
    uint64_t hash;
    uint32_t offset;
    uint32_t length;  // kEmpty marks a free slot
    V value;
  };
  std::string_view key_of(const Slot& s) const {
    return std::string_view(keys_.data() + s.offset, s.length);
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t capacity = old.empty() ? 64 : old.size() * 2;
    slots_.assign(capacity, Slot{0, 0, kEmpty, V{}});
    mask_ = capacity - 1;
    for (Slot& s : old) {
      if (s.length == kEmpty) continue;
      size_t i = s.hash & mask_;
      while (slots_[i].length != kEmpty) i = (i + 1) & mask_;
      slots_[i] = std::move(s);
    }
  }

  std::vector<Slot> slots_;
  std::string keys_;
  size_t size_ = 0;
  size_t mask_ = 0;
};

}  // namespace brrr::tokenizer
