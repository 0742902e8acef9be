// brrr/aligned_vector.h: a std::vector whose data starts on a cache line (chapter 08, "Why
// decoding is memory-bound"). Read next: kernels/cpu/rows/rows.h, whose kernels are given these.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace brrr {

// A std::vector whose data starts on a 64-byte boundary (a cache line), as a Tensor's CPU
// storage does (framework/src/storage.cpp). The Decoder's and the server's buffers are these,
// so that in a row whose size is a multiple of 32 bytes no vector load straddles two cache
// lines (kernels/cpu/rows/rows.cpp measures what that costs).
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
};
template <class T>
using aligned_vector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace brrr
