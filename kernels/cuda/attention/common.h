// kernels/cuda/attention/common.h: what the attention variants of every generation share: the
// checks of a call's sizes and head size, and the query and key tile of 64 rows.
// Chapter 15 (flash attention). Read before: kernels/cuda/attention/attention.h.
// Read next: kernels/cuda/attention/cuda_cores.cu.
//
// Included by each file of the folder, so it is compiled twice like them (simt.h): once for the
// GPU, once for the emulator.
#pragma once
#include <cstdint>

#include "kernels/cuda/common.h"
#include "kernels/cuda/simt.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

inline void check_sizes(const char* op, std::int64_t BH, std::int64_t T_len, std::int64_t hs) {
  BRRR_CHECK(BH >= 0 && T_len >= 0 && hs >= 0, op, ": sizes must not be negative, got BH = ", BH, ", T = ", T_len,
             ", hs = ", hs);
  BRRR_CHECK(T_len * hs <= INT32_MAX, op, ": one head of (T, hs) = (", T_len, ", ", hs,
             ") has more than 2^31 elements");
}

// Query and key rows per tile: variant 2's (256 threads as 16 x 16, 4 rows each) and the
// tensor-core variants' (4 warps of 16 query rows).
constexpr int kTile = 64;

// The padded head size a variant-2 kernel is compiled for (0: hs is too large).
inline int padded_head_size(std::int64_t hs) { return hs <= 32 ? 32 : hs <= 64 ? 64 : hs <= 128 ? 128 : 0; }

// Refuses a head size above what a tiled variant's kernels are compiled for (`most`).
inline void check_head_size(const char* op, std::int64_t hs, std::int64_t most) {
  BRRR_CHECK(hs <= most, op, ": head size ", hs, " is more than its tiles hold (", most,
             "); the registry passes this variant over there, and runs another");
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
