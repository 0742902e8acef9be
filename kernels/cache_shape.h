// kernels/cache_shape.h: what attend_cache (kernels/signatures.h) accepts, checked alike on every
// device before a kernel runs. Chapter 20 (decoding on the GPU). Read before: kernels/signatures.h
// (CacheShape). Read next: kernels/cpu/rows/cache.cpp, kernels/cuda/rows/attend_cache.cu.
//
// The sizes are the host's and are checked here; the slots and lengths are in the device's
// memory, where the host cannot read them without a wait, so the kernels check those one row at
// a time and write NaN for a row that is out of range (loud, never a neighbour's numbers).
#pragma once
#include <cstdint>

#include "brrr/error.h"
#include "kernels/signatures.h"

namespace brrr::kernels {

// The four arrays are attend_cache's out, q, k, v, or append_cache's k, new_k, v, new_v.
inline void check_cache_shape(const char* op, const CacheShape& s, const void* out, const void* q, const void* k,
                              const void* v, const void* slots, const void* lengths) {
  BRRR_CHECK(s.rows >= 0, op, ": rows must not be negative, got ", s.rows);
  BRRR_CHECK(s.heads >= 1 && s.hs >= 1, op, ": heads and head size must be positive, got heads = ", s.heads,
             ", hs = ", s.hs);
  BRRR_CHECK(s.slots >= 1 && s.capacity >= 1, op, ": the cache needs at least one slot of one position, got slots = ",
             s.slots, ", capacity = ", s.capacity);
  BRRR_CHECK(s.q_stride >= s.heads * s.hs, op, ": q_stride ", s.q_stride, " is less than a row's heads * hs = ",
             s.heads * s.hs);
  BRRR_CHECK(s.slots <= INT32_MAX && s.capacity <= INT32_MAX && s.heads * s.hs <= INT32_MAX, op,
             ": slots ", s.slots, ", capacity ", s.capacity, " and heads * hs ", s.heads * s.hs,
             " must each fit in int32");
  if (s.rows == 0) return;
  BRRR_CHECK(out && q && k && v && slots && lengths, op, ": a null pointer: the cache, the rows, slots and lengths must all be given");
}

}  // namespace brrr::kernels
