// kernels/cuda/rows/attend_cache.cu: attend_cache on the GPU, the attention of a decoding step:
// for each row (a sequence's new token), its query against its slot of the KV cache in device
// memory, every head: flash-decoding; and append_cache, which writes the row's key and value
// there first. Chapter 20 (decoding on the GPU).
// Read before: linear_rows.cu, kernels/signatures.h (attend_cache, CacheShape),
// kernels/cuda/attention/cuda_cores.cu (flash attention for training: the online softmax).
// Read next: docs/chapters/20-serving.md, "Decoding on the GPU".
//
// Why split the cache. A decoding step has one query per sequence and head: flash attention's
// parallelism over query tiles is gone, and a kernel with a block per (row, head) would put 12
// blocks on the GPU for GPT-2 at batch 1, each reading its whole cache alone, on a chip with 132
// multiprocessors. Flash-decoding (Dao, Haziza, Massa and Sizov, 2023) splits the positions
// instead: each block takes 128 positions of one (row, head) and leaves its part of the softmax
// as three things, its largest score m, the sum l of exp(s_p - m), and the unnormalised output
// o = sum_p exp(s_p - m) v_p; a second kernel merges the parts of each (row, head):
//   M = max_i m_i,   L = sum_i l_i exp(m_i - M),   out = (sum_i o_i exp(m_i - M)) / L,
// the identity behind the online softmax of chapter 15.
//
// The block. 4 warps of 32 positions each. A warp computes its 32 scores one position at a time
// (lanes across the head's numbers, so a key row is one coalesced read, then warp_sum), lane j
// keeping the score of position j; the warp's max and exp(s - max) are then one value per lane,
// and the values are added position by position in order, each lane holding head numbers
// lane, lane + 32, ... (up to 256). The 4 warps merge in shared memory by the formula above,
// in warp order, into one part per block.
//
// The order of additions (batch invariance): every sum above runs in an order fixed by the
// position, the head size and the row's own length (how many parts, 128 positions each), never
// by the number of rows, the other rows' lengths or the cache's capacity. A row gets the same
// bits alone or in a batch; rows that share a slot at lengths t0 + 1 .. t0 + n (a prefill) get
// the bits of the same tokens decoded one at a time. tests/emulator/test_rows.cpp checks both.
#include <climits>
#include <cmath>
#include <cstdint>

#include "kernels/cache_shape.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/rows/rows.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

using i64 = std::int64_t;

constexpr int kWarps = 4;                 // warps per block
constexpr int kSplit = kWarps * 32;       // positions per block, one part each
constexpr int kMaxHeadSize = 256;         // head numbers per lane: kMaxHeadSize / 32
constexpr int kSlices = kMaxHeadSize / 32;

__device__ inline float widen(float x) { return x; }
__device__ inline double widen(double x) { return x; }
__device__ inline float widen(brrr::bf16 x) { return float_of(x); }

// Whether row r's slot and length are in range (a row that is not comes out NaN).
__device__ inline bool row_in_range(const CacheShape& s, const std::int32_t* slots, const std::int32_t* lengths,
                                    i64 r) {
  return slots[r] >= 0 && slots[r] < s.slots && lengths[r] >= 1 && lengths[r] <= s.capacity;
}

// One block: positions split * 128 .. + 127 of row blockIdx.z, head blockIdx.y. parts is (rows,
// heads, splits, hs + 2): m, l, then o (hs).
template <class T, class C>
__global__ void __launch_bounds__(kWarps * 32)
    attend_cache_split(T* parts, const T* q, const C* k, const C* v, const std::int32_t* slots,
                       const std::int32_t* lengths, CacheShape s, int splits, T scale) {
  __shared__ T warp_m[kWarps], warp_l[kWarps];
  __shared__ T warp_o[kWarps][kMaxHeadSize];
  const i64 row = blockIdx.z;
  const int h = blockIdx.y, split = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (!row_in_range(s, slots, lengths, row)) return;  // the combine writes NaN
  const i64 length = lengths[row], p0 = i64{split} * kSplit;
  if (p0 >= length) return;  // past this row's positions (the grid covers the capacity)
  const int hs = static_cast<int>(s.hs);
  const i64 C_ = s.heads * s.hs;
  const C* keys = k + i64{slots[row]} * s.capacity * C_ + h * s.hs;
  const C* values = v + i64{slots[row]} * s.capacity * C_ + h * s.hs;

  T qv[kSlices];
  for (int i = 0; i < kSlices; ++i) {
    const int c = lane + 32 * i;
    qv[i] = c < hs ? q[row * s.q_stride + h * s.hs + c] : T(0);
  }
  const i64 pw = p0 + warp * 32;  // this warp's first position
  const int count = static_cast<int>(length - pw < 0 ? 0 : length - pw < 32 ? length - pw : 32);
  T mine = minus_infinity<T>();  // lane j: the score of position pw + j
  for (int j = 0; j < count; ++j) {
    const C* key = keys + (pw + j) * C_;
    T dot = T(0);
    for (int i = 0; i < kSlices; ++i) {
      const int c = lane + 32 * i;
      if (c < hs) dot = fma_of(qv[i], widen(key[c]), dot);
    }
    dot = warp_sum(dot) * scale;
    if (lane == j) mine = dot;
  }
  const T m = warp_max(mine);  // -inf for a warp past the row's length
  const T e = lane < count ? exp_of(mine - m) : T(0);
  const T l = warp_sum(e);
  T o[kSlices];
  for (int i = 0; i < kSlices; ++i) o[i] = T(0);
  for (int j = 0; j < count; ++j) {
    const T ej = __shfl_sync(0xffffffffu, e, j);
    const C* value = values + (pw + j) * C_;
    for (int i = 0; i < kSlices; ++i) {
      const int c = lane + 32 * i;
      if (c < hs) o[i] = fma_of(ej, widen(value[c]), o[i]);
    }
  }
  if (lane == 0) warp_m[warp] = m, warp_l[warp] = l;
  for (int i = 0; i < kSlices; ++i) {
    const int c = lane + 32 * i;
    if (c < hs) warp_o[warp][c] = o[i];
  }
  __syncthreads();
  // Warp 0 has positions (p0 < length), so M is finite and exp(-inf - M) = 0 drops empty warps.
  T M = warp_m[0];
  for (int w = 1; w < kWarps; ++w) M = max(M, warp_m[w]);
  T* part = parts + ((row * s.heads + h) * splits + split) * (s.hs + 2);
  if (threadIdx.x == 0) {
    T L = T(0);
    for (int w = 0; w < kWarps; ++w) L = fma_of(warp_l[w], exp_of(warp_m[w] - M), L);
    part[0] = M, part[1] = L;
  }
  for (int c = threadIdx.x; c < hs; c += blockDim.x) {
    T O = T(0);
    for (int w = 0; w < kWarps; ++w) O = fma_of(warp_o[w][c], exp_of(warp_m[w] - M), O);
    part[2 + c] = O;
  }
}

// One block per (head blockIdx.x, row blockIdx.y): the row's parts merged in order.
template <class T>
__global__ void attend_cache_combine(T* out, const T* parts, const std::int32_t* slots, const std::int32_t* lengths,
                                     CacheShape s, int splits) {
  const i64 row = blockIdx.y;
  const int h = blockIdx.x, hs = static_cast<int>(s.hs);
  T* o = out + row * s.heads * s.hs + h * s.hs;
  if (!row_in_range(s, slots, lengths, row)) {
    for (int c = threadIdx.x; c < hs; c += blockDim.x) o[c] = static_cast<T>(NAN);
    return;
  }
  const int n = static_cast<int>(ceil_div(lengths[row], kSplit));
  const T* part = parts + (row * s.heads + h) * splits * (s.hs + 2);
  const i64 stride = s.hs + 2;
  T M = part[0];
  for (int i = 1; i < n; ++i) M = max(M, part[i * stride]);
  T L = T(0);
  for (int i = 0; i < n; ++i) L = fma_of(part[i * stride + 1], exp_of(part[i * stride] - M), L);
  for (int c = threadIdx.x; c < hs; c += blockDim.x) {
    T O = T(0);
    for (int i = 0; i < n; ++i) O = fma_of(part[i * stride + 2 + c], exp_of(part[i * stride] - M), O);
    o[c] = O / L;
  }
}

template <class T, class C>
void attend_cache_split_k(T* out, const T* q, const C* k, const C* v, const std::int32_t* slots,
                          const std::int32_t* lengths, const CacheShape& s, Stream stream) {
  check_cache_shape("attend_cache", s, out, q, k, v, slots, lengths);
  if (s.rows == 0) return;
  BRRR_CHECK(s.hs <= kMaxHeadSize, "attend_cache: head size ", s.hs, " is more than the GPU kernel holds (",
             kMaxHeadSize, ")");
  const i64 splits = ceil_div(s.capacity, kSplit);
  BRRR_CHECK(s.rows <= 65535 && s.heads <= 65535 && splits <= INT_MAX, "attend_cache: rows = ", s.rows,
             ", heads = ", s.heads, " or capacity = ", s.capacity, " is more than one launch's grid holds");
  T* parts = static_cast<T*>(
      workspace(static_cast<std::size_t>(s.rows * s.heads * splits * (s.hs + 2)) * sizeof(T), stream));
  const T scale = T(1) / std::sqrt(static_cast<T>(s.hs));
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(s.heads), static_cast<unsigned>(s.rows));
  BRRR_LAUNCH((attend_cache_split<T, C>), grid, kWarps * 32, 0, stream, parts, q, k, v, slots, lengths, s,
              static_cast<int>(splits), scale);
  const dim3 heads_rows(static_cast<unsigned>(s.heads), static_cast<unsigned>(s.rows));
  BRRR_LAUNCH((attend_cache_combine<T>), heads_rows, 64, 0, stream, out, parts, slots, lengths, s,
              static_cast<int>(splits));
}

void attend_cache_split_k_bf16(float* out, const float* q, const brrr::bf16* k, const brrr::bf16* v,
                               const std::int32_t* slots, const std::int32_t* lengths, const CacheShape& s,
                               Stream stream) {
  attend_cache_split_k<float, brrr::bf16>(out, q, k, v, slots, lengths, s, stream);
}

// append_cache: one block per row, its threads across the row's heads * hs numbers (a coalesced
// read of the new key and value, a coalesced write of the cache's row). Where the row goes is on
// the device (slots and lengths), so a captured decoding step writes each step's position.
template <class T>
__global__ void append_cache_rows(T* k, T* v, const T* new_k, const T* new_v, const std::int32_t* slots,
                                  const std::int32_t* lengths, CacheShape s) {
  const i64 row = blockIdx.x;
  if (!row_in_range(s, slots, lengths, row)) return;  // attend_cache gives the row NaN
  const i64 C_ = s.heads * s.hs, at = (i64{slots[row]} * s.capacity + lengths[row] - 1) * C_;
  for (i64 c = threadIdx.x; c < C_; c += blockDim.x) {
    k[at + c] = new_k[row * s.q_stride + c];
    v[at + c] = new_v[row * s.q_stride + c];
  }
}

template <class T>
void append_cache(T* k, T* v, const T* new_k, const T* new_v, const std::int32_t* slots, const std::int32_t* lengths,
                  const CacheShape& s, Stream stream) {
  check_cache_shape("append_cache", s, k, new_k, v, new_v, slots, lengths);
  if (s.rows == 0) return;
  BRRR_CHECK(s.rows <= INT_MAX, "append_cache: rows = ", s.rows, " is more than one launch's grid holds");
  BRRR_LAUNCH((append_cache_rows<T>), static_cast<unsigned>(s.rows), 128, 0, stream, k, v, new_k, new_v, slots,
              lengths, s);
}

}  // namespace

void register_attend_cache_kernels() {
  const DeviceType cuda = DeviceType::CUDA;
  const VariantMeta split = about(
      "flash-decoding: blocks of 128 positions, a warp per 32, each block's (max, sum, output) merged in order "
      "by a second kernel; head size up to 256 (rows/attend_cache.cu)");
  add(op::attend_cache<float>, cuda, "split", &attend_cache_split_k<float, float>, 10, split);
  add(op::attend_cache<double>, cuda, "split", &attend_cache_split_k<double, double>, 10, split);
  add(op::attend_cache_on_bf16, cuda, "split", &attend_cache_split_k_bf16, 10, split);
  const VariantMeta rows = about("a block per row, its threads across the row's numbers (rows/attend_cache.cu)");
  add(op::append_cache<float>, cuda, "rows", &append_cache<float>, 10, rows);
  add(op::append_cache<double>, cuda, "rows", &append_cache<double>, 10, rows);
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
