// kernels/cuda/crossentropy.cu: softmax cross-entropy on the GPU: the forward and backward as
// two kernels, and the fused classifier that computes the loss and writes dlogits in one, in
// float32 and on bf16 logits.
// Chapter 13 (reductions: LayerNorm, softmax and cross-entropy); chapter 16 shows how the
// fused kernel's gradient reaches autograd. Read before: kernels/cpu/nn.cpp (the reference),
// kernels/cuda/layernorm.cu (row reductions with warps). Read next: kernels/cuda/matmul/cuda_cores.cu
// (chapter 14).
//
// For one row of logits x (V) and target t:
//   lse = log sum_v exp(x_v) = max + log sum_v exp(x_v - max)   (the max keeps exp finite)
//   loss = lse - x_t,   dloss/dx_v = exp(x_v - lse) - [v == t] = softmax_v - onehot_v
// Rows whose target is ignore_index get loss 0 and gradient 0.
//
// GPT-2's vocabulary (V = 50,257, padded to 50,304) makes logits the largest activation of
// the model: (B T, V) floats, 1.6 GB at B T = 8192. Every pass over them costs ~0.5 ms of
// H100 memory bandwidth (datasheet 3.35 TB/s), so the count of passes is the whole game:
//   unfused, PyTorch style: softmax (read, write probs), loss (read), backward (read probs,
//   write dlogits): about five passes and an (N, V) probability tensor;
//   variant 1 below (forward, then backward from lse): forward reads twice (max, sum), the
//   backward reads once and writes once: four passes, no probability tensor;
//   variant 2 (fused): one read for the loss, one write of dlogits, plus a second read of
//   each row that the design hopes to serve from L2 (see there); it did not at V = 50,304, so
//   variant 3 keeps the row in shared memory and reads it once; variant 5 does the same on bf16
//   logits, half the bytes.
//
// Measured on an H100 80GB HBM3, 2026-11-23, with `scripts/gpu.sh` (see docs/measurements.md),
// as a share of the lab's measured copy bandwidth (about 3000 GB/s), counting the minimal bytes
// (one read of the logits, one write of dlogits where there is one). At (8192, 50304): fused
// variant 3 1.3696 ms, 2407 GB/s, 80.4%; fused variant 2 1.5937 ms, 2069 GB/s, 69.1%; variant
// 1's forward 1.4940 ms, 36.9%, and backward 1.3159 ms, 83.5%. At (65536, 4096): variant 3
// 86.0%, variant 2 84.4%.
#include "kernels/cuda/crossentropy.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// Threads per row: about 8 logits each, a multiple of 32, 32 to 1024.
static int row_threads(std::int64_t V) {
  return static_cast<int>(std::min<std::int64_t>(1024, std::max<std::int64_t>(32, ceil_div(ceil_div(V, 8), 32) * 32)));
}

static void check_rows(const char* op, std::int64_t N) {
  BRRR_CHECK(N <= INT_MAX, op, ": ", N, " rows; one block per row allows at most 2^31 - 1");
}

// =============================================================================================
// Variant 1: forward and backward, one block per row each.
//
// The forward is the textbook three steps: the block finds the row's max (each thread over a
// strided slice, then a block reduction), then the sum of exp(x - max) (a second read of the
// row, likely from L2), then lse = max + log(sum) and the loss. It saves lse (N floats), all
// the backward needs besides the logits, so no (N, V) probability tensor is ever stored. The
// backward recomputes each probability as exp(x - lse) and writes dlogits: one more read of
// the logits and one write. Reads are scalar and coalesced (thread i reads i, i + blockDim,
// ...). Everything is deterministic: each sum has a fixed order.
// Measured on the H100 at (8192, 50304): forward 1.4940 ms, 1103 GB/s, 36.9% of copy,
// counting one read of the logits (the kernel makes two: max, then sum); backward 1.3159 ms,
// 2505 GB/s, 83.5%. Forward plus backward, 2.81 ms, against the fused variant 3's 1.37 ms.

template <class T>
__global__ void cross_entropy_forward_kernel1(T* losses, T* lse, const T* logits, const std::int32_t* targets,
                                              std::int64_t V, std::int64_t ignore_index) {
  __shared__ T scratch[32];
  const std::int64_t n = blockIdx.x;
  const T* row = logits + n * V;
  T m = minus_infinity<T>();
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) m = max(m, row[v]);
  m = block_max(m, scratch);
  T s = 0;
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) s += exp_of(row[v] - m);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    const T l = m == minus_infinity<T>() ? m : m + log_of(s);  // an all -inf row: lse = -inf, as the CPU
    const std::int64_t t = targets[n];
    lse[n] = l;
    losses[n] = t == ignore_index ? T(0) : l - row[t];
  }
}

template <class T>
__global__ void cross_entropy_backward_kernel1(T* dlogits, const T* dlosses, const T* logits, const T* lse,
                                               const std::int32_t* targets, std::int64_t V,
                                               std::int64_t ignore_index) {
  const std::int64_t n = blockIdx.x, t = targets[n];
  T* d = dlogits + n * V;
  if (t == ignore_index) {  // the same in every thread of the block (and there is no barrier)
    for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) d[v] = T(0);
    return;
  }
  const T* row = logits + n * V;
  const T g = dlosses[n], l = lse[n];
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const T p = exp_of(row[v] - l) * g;  // the CPU kernel's order: p * g, then - g at the target
    d[v] = v == t ? p - g : p;
  }
}

template <class T>
void cross_entropy_forward1(T* losses, T* lse, const T* logits, const std::int32_t* targets, std::int64_t N,
                            std::int64_t V, std::int64_t ignore_index, Stream stream) {
  if (N == 0) return;
  check_rows("cross_entropy_forward", N);
  BRRR_LAUNCH((cross_entropy_forward_kernel1<T>), static_cast<int>(N), row_threads(V), 0, stream, losses, lse, logits,
              targets, V, ignore_index);
}

template <class T>
void cross_entropy_backward1(T* dlogits, const T* dlosses, const T* logits, const T* lse, const std::int32_t* targets,
                             std::int64_t N, std::int64_t V, std::int64_t ignore_index, Stream stream) {
  if (N == 0 || V == 0) return;
  check_rows("cross_entropy_backward", N);
  BRRR_LAUNCH((cross_entropy_backward_kernel1<T>), static_cast<int>(N), row_threads(V), 0, stream, dlogits, dlosses,
              logits, lse, targets, V, ignore_index);
}

// =============================================================================================
// Variant 2, fused: the loss and dlogits = dloss * (softmax - onehot) in one kernel, one
// block per row, from an online max and sum.
//
// The max and the sum of exp need not be two passes. Each thread keeps a running max m and a
// running sum s = sum exp(x - m) over the logits it has seen; a new x above m rescales the
// sum to the new max first: s = s * exp(m - x) + 1, m = x (the rule of online softmax, and of
// flash attention). Two such (m, s) pairs merge the same way: M = max(m1, m2),
// s = s1 exp(m1 - M) + s2 exp(m2 - M). So one read of the row gives every thread its pair,
// a block reduction of pairs (shuffles in each warp, then warp 0 over the warps' pairs) gives
// the row's max and sum, and lse = max + log(sum). It costs one exp per logit, as the
// two-pass form does, plus a rare rescale.
//
// Then the gradient: dlogits_v = dloss * (exp(x_v - lse) - [v == t]), which needs the row a
// second time. What this kernel does, honestly: it reads the row again from global memory
// (variant 3 keeps it in shared memory instead).
// The first read brought the row through L2, and the second comes right after the block's
// own first read, so it should mostly hit L2 rather than DRAM, but nothing guarantees it: a
// 50,304-float row is 196 KiB, and with two blocks of 1024 threads resident on each of 132
// SMs some 264 rows (~52 MB) are in flight, about the size of the H100's 50 MB L2. On the
// H100 the hope held for small rows and failed for GPT-2's: 84.4% of copy at V = 4096
// (65536 rows), but 69.1% at V = 50,304 (8192 rows, 1.5937 ms), so the second read partly
// misses L2 there (ncu's lts__t_sector_hit_rate would say by how much; not measured).
// Registers cannot hold the row (196 KiB over 1024 threads is 49 floats each, with 64
// registers per thread at that block size); shared memory could (227 KiB on an H100, one
// block per SM): variant 3 below. Either way no
// probability tensor is stored and the loss and gradient cost one launch: dloss is known at
// forward time (1 / (rows that count) for a mean), so the backward pass has nothing left
// to do but scale by the incoming gradient.
//
// float4: when V % 4 == 0 (GPT-2's padded 50,304 is) and both pointers are 16-byte aligned,
// every row starts on a 16-byte boundary and both passes move float4s. Otherwise scalar.

template <class T>
static __device__ __forceinline__ void online_add(T& m, T& s, T x) {
  if (x > m) {
    s = s * exp_of(m - x) + T(1);  // m = -inf at first: s = 0 * 0 + 1
    m = x;
  } else if (x != minus_infinity<T>()) {  // -inf adds nothing (and -inf - -inf would be NaN)
    s += exp_of(x - m);
  }
}

template <class T>
static __device__ __forceinline__ void online_merge(T& m, T& s, T m2, T s2) {
  const T top = m > m2 ? m : m2;
  if (top == minus_infinity<T>()) return;  // both empty
  s = s * exp_of(m - top) + s2 * exp_of(m2 - top);
  m = top;
}

// The row's (max, sum) in every thread. The butterfly's lanes may differ in the last bit
// (the compiler may fuse s1 e1 + s2 e2 into an FMA either way round), so only lane 0's pairs
// go on, and warp 0's lane 0 decides for the whole block: every thread then uses the same lse.
template <class T>
static __device__ void block_online_merge(T& m, T& s) {
  __shared__ T warp_m[32], warp_s[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? warp_m[lane] : minus_infinity<T>();
    s = lane < warps ? warp_s[lane] : T(0);
    for (int offset = 16; offset > 0; offset /= 2)
      online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
    if (lane == 0) {
      warp_m[0] = m;
      warp_s[0] = s;
    }
  }
  __syncthreads();
  m = warp_m[0];
  s = warp_s[0];
}

template <class T>
__global__ void cross_entropy_fused_kernel(T* losses, T* dlogits, const T* logits, const std::int32_t* targets,
                                           std::int64_t V, std::int64_t ignore_index, T dloss, bool vector) {
  const std::int64_t n = blockIdx.x, t = targets[n];
  const T* row = logits + n * V;
  T* d = dlogits + n * V;
  if (t == ignore_index) {  // uniform across the block, so returning before the barriers is safe
    for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) d[v] = T(0);
    if (threadIdx.x == 0) losses[n] = T(0);
    return;
  }
  // Pass 1: each thread's online (max, sum) over its logits; the float4 part, then the tail.
  const std::int64_t V4 = vector ? V / 4 : 0;
  T m = minus_infinity<T>(), s = 0;
  if constexpr (std::is_same_v<T, float>) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    for (std::int64_t i = threadIdx.x; i < V4; i += blockDim.x) {
      const float4 q = row4[i];
      online_add(m, s, q.x);
      online_add(m, s, q.y);
      online_add(m, s, q.z);
      online_add(m, s, q.w);
    }
  }
  for (std::int64_t v = 4 * V4 + threadIdx.x; v < V; v += blockDim.x) online_add(m, s, row[v]);
  block_online_merge(m, s);
  const T l = m + log_of(s);
  if (threadIdx.x == 0) losses[n] = l - row[t];

  // Pass 2: dlogits from the second read of the row (from L2, we hope: see above).
  if constexpr (std::is_same_v<T, float>) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    float4* d4 = reinterpret_cast<float4*>(d);
    for (std::int64_t i = threadIdx.x; i < V4; i += blockDim.x) {
      const float4 q = row4[i];
      const std::int64_t v = 4 * i;
      d4[i] = make_float4((exp_of(q.x - l) - (v == t ? 1.0f : 0.0f)) * dloss,
                          (exp_of(q.y - l) - (v + 1 == t ? 1.0f : 0.0f)) * dloss,
                          (exp_of(q.z - l) - (v + 2 == t ? 1.0f : 0.0f)) * dloss,
                          (exp_of(q.w - l) - (v + 3 == t ? 1.0f : 0.0f)) * dloss);
    }
  }
  for (std::int64_t v = 4 * V4 + threadIdx.x; v < V; v += blockDim.x)
    d[v] = (exp_of(row[v] - l) - (v == t ? T(1) : T(0))) * dloss;
}

template <class T>
void cross_entropy_fused2(T* losses, T* dlogits, const T* logits, const std::int32_t* targets, std::int64_t N,
                          std::int64_t V, std::int64_t ignore_index, T dloss, Stream stream) {
  if (N == 0) return;
  check_rows("cross_entropy_fused", N);
  const bool vector = std::is_same_v<T, float> && V % 4 == 0 && aligned16(logits) && aligned16(dlogits);
  BRRR_LAUNCH((cross_entropy_fused_kernel<T>), static_cast<int>(N), row_threads(V), 0, stream, losses, dlogits,
              logits, targets, V, ignore_index, dloss, vector);
}

// =============================================================================================
// Variant 3: fused, the row kept in shared memory. The default.
//
// Variant 2 reads each row twice and hopes the second read hits L2. On an H100 it did not,
// enough: at V = 50,304 (196 KiB rows, 264 of them in flight, ~52 MB against a 50 MB L2) it
// moved its counted bytes at 69% of copy bandwidth, against 84% at V = 4096, where the rows
// are 16 KiB and the second read comes from L2. So this variant keeps the row where nothing
// can evict it: pass 1 stores each float4 it reads into shared memory as it folds it into
// the thread's online (max, sum), and pass 2 reads the row back from there. DRAM sees one read
// of the logits and one write of dlogits, the minimum. The price is occupancy: a 196 KiB row
// leaves room for one block (one row) per SM, 132 rows in flight; with 1024 threads a block,
// each thread has a dozen float4 loads to issue per row, which keeps enough bytes in flight.
// Each thread reads back only the float4s it wrote itself, so no barrier is needed between
// the passes for the row (block_online_merge has its own). Rows that do not fit (V > 58,000
// floats), V % 4 != 0 and unaligned pointers run variant 2; float32 only.
// Measured on the H100: at (8192, 50304) 1.3696 ms, 2407 GB/s, 80.4% of copy (variant 2:
// 69.1%); at (65536, 4096) 0.8338 ms, 2576 GB/s, 86.0% (84.4%); at (1024, 4096), 32 MiB
// moved, 55.0% (54.0%).
// On an H200 (2026-11-27) the same kernel moved 63.1% of copy at V = 4096 and 65.6% at V =
// 50,304: the H200's 4.8 TB/s needs about 1.4 times the H100's bytes in flight per SM for
// the same latency (Little's law), and each thread had one load in flight at a time: the
// loop folded each float4 before loading the next (its PTX for sm_90 holds one ld.global.v4
// between online_add's branches; nvcc did not unroll it). Pass 1 now issues up to 4 loads a
// thread before folding them (ld.global.v4 in a row in the PTX); a GPU run will say what that
// buys.

__global__ void cross_entropy_fused_kernel3(float* losses, float* dlogits, const float* logits,
                                            const std::int32_t* targets, std::int64_t V, std::int64_t ignore_index,
                                            float dloss) {
  BRRR_DYNAMIC_SHARED(float4, cached);  // (V / 4): this block's row
  const std::int64_t n = blockIdx.x, t = targets[n], V4 = V / 4;
  const float4* row4 = reinterpret_cast<const float4*>(logits + n * V);
  float4* d4 = reinterpret_cast<float4*>(dlogits + n * V);
  if (t == ignore_index) {  // uniform across the block, so returning before the barriers is safe
    for (std::int64_t i = threadIdx.x; i < V4; i += blockDim.x) d4[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (threadIdx.x == 0) losses[n] = 0.0f;
    return;
  }
  float m = minus_infinity<float>(), s = 0.0f;
  const auto fold = [&](std::int64_t at, float4 q) {  // q by value: one 16-byte load
    cached[at] = q;
    online_add(m, s, q.x);
    online_add(m, s, q.y);
    online_add(m, s, q.z);
    online_add(m, s, q.w);
  };
  // A thread's float4s are requested 4 (or, for the last 2 or 3, 2) at a time before the
  // first of them is folded in, so that many loads of each thread are in flight at once;
  // folded one by one they would wait for each other (online_add needs its value). The same
  // elements in the same order as a plain loop, so the same bits.
  {
    const std::int64_t stride = blockDim.x;
    std::int64_t i = threadIdx.x;
    for (; i + 3 * stride < V4; i += 4 * stride) {
      const float4 q0 = row4[i], q1 = row4[i + stride], q2 = row4[i + 2 * stride], q3 = row4[i + 3 * stride];
      fold(i, q0), fold(i + stride, q1), fold(i + 2 * stride, q2), fold(i + 3 * stride, q3);
    }
    if (i + stride < V4) {  // 2 or 3 left (at V = 4096 and 512 threads, every thread's 2)
      const float4 q0 = row4[i], q1 = row4[i + stride];
      fold(i, q0), fold(i + stride, q1);
      i += 2 * stride;
    }
    if (i < V4) fold(i, row4[i]);
  }
  block_online_merge(m, s);
  const float l = m + log_of(s);
  if (threadIdx.x == 0) losses[n] = l - logits[n * V + t];
  for (std::int64_t i = threadIdx.x; i < V4; i += blockDim.x) {
    const float4 q = cached[i];
    const std::int64_t v = 4 * i;
    d4[i] = make_float4((exp_of(q.x - l) - (v == t ? 1.0f : 0.0f)) * dloss,
                        (exp_of(q.y - l) - (v + 1 == t ? 1.0f : 0.0f)) * dloss,
                        (exp_of(q.z - l) - (v + 2 == t ? 1.0f : 0.0f)) * dloss,
                        (exp_of(q.w - l) - (v + 3 == t ? 1.0f : 0.0f)) * dloss);
  }
}

void cross_entropy_fused3(float* losses, float* dlogits, const float* logits, const std::int32_t* targets,
                          std::int64_t N, std::int64_t V, std::int64_t ignore_index, float dloss, Stream stream) {
  const std::size_t row_bytes = static_cast<std::size_t>(V) * sizeof(float);
  if (V % 4 != 0 || row_bytes > simt::kMaxDynamicSharedBytes || !aligned16(logits) || !aligned16(dlogits)) {
    cross_entropy_fused2<float>(losses, dlogits, logits, targets, N, V, ignore_index, dloss, stream);
    return;
  }
  if (N == 0) return;
  check_rows("cross_entropy_fused", N);
  BRRR_LAUNCH(cross_entropy_fused_kernel3, static_cast<int>(N), row_threads(V), row_bytes, stream, losses,
              dlogits, logits, targets, V, ignore_index, dloss);
}

// =============================================================================================
// Variant 4 (chapter 18): bfloat16 in memory, float32 inside, forward and backward.
//
// Variant 1's shape (a block a row, block_max then block_sum over the row) on bf16 logits:
// widening loads, float32 max, exp and sums, and one rounding per output. Half the bytes of
// float32, on an op whose cost is its passes over (N, V). The backward does not read the saved
// lse: rounded to bf16 an lse near 5 is off by up to 0.01, which is a 1% error in every
// probability of the row, so it recomputes lse from the row in float32 (two more reads of the
// row, which the fused variants avoid: variant 5 is the fused one on bf16). Untimed on a
// GPU (written after the H100 run; docs/measurements.md, "Every CUDA variant").

__device__ inline float row_lse_bf16(const brrr::bf16* row, std::int64_t V, float* scratch) {
  float m = minus_infinity<float>();
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) m = max(m, float_of(row[v]));
  m = block_max(m, scratch);
  float s = 0;
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) s += exp_of(float_of(row[v]) - m);
  s = block_sum(s, scratch);
  return m == minus_infinity<float>() ? m : m + log_of(s);  // an all -inf row: lse = -inf, as the CPU
}

__global__ void cross_entropy_forward_bf16_kernel(brrr::bf16* losses, brrr::bf16* lse, const brrr::bf16* logits,
                                                  const std::int32_t* targets, std::int64_t V,
                                                  std::int64_t ignore_index) {
  __shared__ float scratch[32];
  const std::int64_t n = blockIdx.x;
  const brrr::bf16* row = logits + n * V;
  const float l = row_lse_bf16(row, V, scratch);
  if (threadIdx.x == 0) {
    const std::int64_t t = targets[n];
    lse[n] = bf16_of(l);
    losses[n] = bf16_of(t == ignore_index ? 0.0f : l - float_of(row[t]));
  }
}

__global__ void cross_entropy_backward_bf16_kernel(brrr::bf16* dlogits, const brrr::bf16* dlosses,
                                                   const brrr::bf16* logits, const std::int32_t* targets,
                                                   std::int64_t V, std::int64_t ignore_index) {
  __shared__ float scratch[32];
  const std::int64_t n = blockIdx.x, t = targets[n];
  const brrr::bf16* row = logits + n * V;
  brrr::bf16* d = dlogits + n * V;
  const float l = row_lse_bf16(row, V, scratch);  // every thread of the block calls it (barriers)
  if (t == ignore_index) {  // the same in every thread of the block
    for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) d[v] = bf16_of(0.0f);
    return;
  }
  const float g = float_of(dlosses[n]);
  for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) {
    const float p = exp_of(float_of(row[v]) - l) * g;  // the CPU kernel's order, as variant 1
    d[v] = bf16_of(v == t ? p - g : p);
  }
}

void cross_entropy_forward_bf16(brrr::bf16* losses, brrr::bf16* lse, const brrr::bf16* logits,
                                const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                std::int64_t ignore_index, Stream stream) {
  if (N == 0) return;
  check_rows("cross_entropy_forward", N);
  BRRR_LAUNCH(cross_entropy_forward_bf16_kernel, static_cast<int>(N), row_threads(V), 0, stream, losses, lse, logits,
              targets, V, ignore_index);
}

void cross_entropy_backward_bf16(brrr::bf16* dlogits, const brrr::bf16* dlosses, const brrr::bf16* logits,
                                 const brrr::bf16* lse, const std::int32_t* targets, std::int64_t N, std::int64_t V,
                                 std::int64_t ignore_index, Stream stream) {
  (void)lse;  // recomputed from the logits (above)
  if (N == 0 || V == 0) return;
  check_rows("cross_entropy_backward", N);
  BRRR_LAUNCH(cross_entropy_backward_bf16_kernel, static_cast<int>(N), row_threads(V), 0, stream, dlogits, dlosses,
              logits, targets, V, ignore_index);
}

// =============================================================================================
// Variant 5 (chapter 18): fused on bf16 data, the row kept in shared memory: the classifier
// of a step whose activations are bf16 in memory.
//
// Variant 3's plan on bfloat16 logits: pass 1 copies the row into shared memory as it folds
// each value into the thread's online (max, sum), in float32; the block merges them; pass 2
// reads the row back from shared memory and writes dlogits = (exp(x - lse) - onehot) dloss,
// rounded to bf16 once. Memory sees one read of the logits and one write of dlogits, 2 bytes
// a value each: half of variant 3's bytes, and a third of variant 4's forward and backward
// together (which read the row four times). At GPT-2's padded 50,304 a row is 98 KiB, so two
// blocks fit an H100's SM where variant 3's 196 KiB rows fit one. The losses stay float32: a
// loss near 10 rounded to bf16 is off by up to 0.03.
//   - 16-byte loads and stores (int4, 8 values) when V is a multiple of 8 and both pointers
//     are 16-byte aligned (GPT-2's 50,304 is 8 x 6,288); one value at a time otherwise. Word w
//     of an int4 holds values 2w (its low half) and 2w + 1 (its high half).
//   - In place: dlogits may be logits (llm.c's classifier does this, so a step keeps one
//     (N, V) buffer). Each thread writes only the values it read itself, after the barrier
//     inside block_online_merge, when every thread's reads of the row are done; and the
//     target's logit is read before that barrier.
//   - A row larger than shared memory holds (V > 116,000 values) is read a second time from
//     global memory in pass 2, its own values by each thread (so in place still holds).
// Untimed on a GPU (written after the H200 run; docs/measurements.md, "Every CUDA variant").

// The two bf16 values of a 32-bit word as float32 (exact), and two float32 rounded into one.
__device__ inline float low_bf16(int word) { return __uint_as_float(static_cast<unsigned>(word) << 16); }
__device__ inline float high_bf16(int word) { return __uint_as_float(static_cast<unsigned>(word) & 0xffff0000u); }
__device__ inline int pack_bf16_pair(float lo, float hi) {
  return static_cast<int>(static_cast<unsigned>(bf16_of(lo).bits) | (static_cast<unsigned>(bf16_of(hi).bits) << 16));
}

// VECTOR: 8 values a load (V % 8 == 0, aligned); CACHED: the row in shared memory.
template <bool VECTOR, bool CACHED>
__global__ void cross_entropy_fused_bf16_kernel(float* losses, brrr::bf16* dlogits, const brrr::bf16* logits,
                                                const std::int32_t* targets, std::int64_t V,
                                                std::int64_t ignore_index, float dloss) {
  BRRR_DYNAMIC_SHARED(int4, cached);  // (V / 8) when CACHED and VECTOR; (V / 2) words of pairs when CACHED only
  const std::int64_t n = blockIdx.x, t = targets[n];
  const brrr::bf16* row = logits + n * V;
  brrr::bf16* d = dlogits + n * V;
  if (t == ignore_index) {  // uniform across the block, so returning before the barriers is safe
    for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) d[v] = bf16_of(0.0f);
    if (threadIdx.x == 0) losses[n] = 0.0f;
    return;
  }
  float m = minus_infinity<float>(), s = 0.0f;
  const float target_logit = threadIdx.x == 0 ? float_of(row[t]) : 0.0f;  // before anything is written
  if constexpr (VECTOR) {
    const int4* row8 = reinterpret_cast<const int4*>(row);
    int4* d8 = reinterpret_cast<int4*>(d);
    const std::int64_t V8 = V / 8;
    const auto fold = [&](std::int64_t at, int4 q) {  // q by value: one 16-byte load
      if constexpr (CACHED) cached[at] = q;
      const int words[4] = {q.x, q.y, q.z, q.w};
      for (int w = 0; w < 4; ++w) {
        online_add(m, s, low_bf16(words[w]));
        online_add(m, s, high_bf16(words[w]));
      }
    };
    // Two loads of a thread in flight before either is folded (variant 3 says why).
    const std::int64_t stride = blockDim.x;
    std::int64_t i = threadIdx.x;
    for (; i + stride < V8; i += 2 * stride) {
      const int4 q0 = row8[i], q1 = row8[i + stride];
      fold(i, q0), fold(i + stride, q1);
    }
    if (i < V8) fold(i, row8[i]);
    block_online_merge(m, s);
    const float l = m + log_of(s);
    if (threadIdx.x == 0) losses[n] = l - target_logit;
    const auto grad = [&](float x, std::int64_t v) { return (exp_of(x - l) - (v == t ? 1.0f : 0.0f)) * dloss; };
    for (std::int64_t j = threadIdx.x; j < V8; j += blockDim.x) {
      const int4 q = CACHED ? cached[j] : row8[j];
      const std::int64_t v = 8 * j;
      int4 out;
      out.x = pack_bf16_pair(grad(low_bf16(q.x), v), grad(high_bf16(q.x), v + 1));
      out.y = pack_bf16_pair(grad(low_bf16(q.y), v + 2), grad(high_bf16(q.y), v + 3));
      out.z = pack_bf16_pair(grad(low_bf16(q.z), v + 4), grad(high_bf16(q.z), v + 5));
      out.w = pack_bf16_pair(grad(low_bf16(q.w), v + 6), grad(high_bf16(q.w), v + 7));
      d8[j] = out;
    }
  } else {
    brrr::bf16* kept = reinterpret_cast<brrr::bf16*>(cached);
    for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) {
      const brrr::bf16 x = row[v];
      if constexpr (CACHED) kept[v] = x;
      online_add(m, s, float_of(x));
    }
    block_online_merge(m, s);
    const float l = m + log_of(s);
    if (threadIdx.x == 0) losses[n] = l - target_logit;
    for (std::int64_t v = threadIdx.x; v < V; v += blockDim.x) {
      const float x = float_of(CACHED ? kept[v] : row[v]);
      d[v] = bf16_of((exp_of(x - l) - (v == t ? 1.0f : 0.0f)) * dloss);
    }
  }
}

void cross_entropy_fused_bf16(float* losses, brrr::bf16* dlogits, const brrr::bf16* logits,
                              const std::int32_t* targets, std::int64_t N, std::int64_t V, std::int64_t ignore_index,
                              float dloss, Stream stream) {
  if (N == 0) return;
  check_rows("cross_entropy_fused", N);
  const bool vector = V % 8 == 0 && aligned16(logits) && aligned16(dlogits);
  // Shared memory in whole 16-byte pieces (the scalar path's row rounded up to them).
  const std::size_t row_bytes = static_cast<std::size_t>(ceil_div(V, 8)) * 16;
  const bool cached = row_bytes <= simt::kMaxDynamicSharedBytes;
  const int threads = row_threads(V);
  const int blocks = static_cast<int>(N);
  const std::size_t shared = cached ? row_bytes : 0;
  if (vector && cached)
    BRRR_LAUNCH((cross_entropy_fused_bf16_kernel<true, true>), blocks, threads, shared, stream, losses, dlogits,
                logits, targets, V, ignore_index, dloss);
  else if (vector)
    BRRR_LAUNCH((cross_entropy_fused_bf16_kernel<true, false>), blocks, threads, shared, stream, losses, dlogits,
                logits, targets, V, ignore_index, dloss);
  else if (cached)
    BRRR_LAUNCH((cross_entropy_fused_bf16_kernel<false, true>), blocks, threads, shared, stream, losses, dlogits,
                logits, targets, V, ignore_index, dloss);
  else
    BRRR_LAUNCH((cross_entropy_fused_bf16_kernel<false, false>), blocks, threads, shared, stream, losses, dlogits,
                logits, targets, V, ignore_index, dloss);
}

// ---------------------------------------------------------------------------------------------

#define BRRR_INSTANTIATE(T)                                                                                         \
  template void cross_entropy_forward1<T>(T*, T*, const T*, const std::int32_t*, std::int64_t, std::int64_t,       \
                                          std::int64_t, Stream);                                                  \
  template void cross_entropy_backward1<T>(T*, const T*, const T*, const T*, const std::int32_t*, std::int64_t,    \
                                           std::int64_t, std::int64_t, Stream);                                   \
  template void cross_entropy_fused2<T>(T*, T*, const T*, const std::int32_t*, std::int64_t, std::int64_t,         \
                                        std::int64_t, T, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

void register_crossentropy_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  const VariantMeta block = about("variant 1: one block per row, block reductions for the max and the sum");
  add(op::cross_entropy_forward<float>, kCuda, "block", &cross_entropy_forward1<float>, 0, block);
  add(op::cross_entropy_forward<double>, kCuda, "block", &cross_entropy_forward1<double>, 0, block);
  const VariantMeta block_backward = about("variant 1: one block per row, softmax rebuilt from the saved lse");
  add(op::cross_entropy_backward<float>, kCuda, "block", &cross_entropy_backward1<float>, 0, block_backward);
  add(op::cross_entropy_backward<double>, kCuda, "block", &cross_entropy_backward1<double>, 0, block_backward);
  const VariantMeta online = about("variant 2: online max and sum in one read, then a second read writes dlogits");
  add(op::cross_entropy_fused<float>, kCuda, "online", &cross_entropy_fused2<float>, 0, online);
  add(op::cross_entropy_fused<float>, kCuda, "smem", &cross_entropy_fused3, 10,
      about("variant 3: the row kept in shared memory, read from memory once"));
  add(op::cross_entropy_fused<double>, kCuda, "online", &cross_entropy_fused2<double>, 0, online);
  // bf16 tensors (chapter 18): variant 4, their only one.
  add(op::cross_entropy_forward<brrr::bf16>, kCuda, "bf16", &cross_entropy_forward_bf16, 10,
      about("variant 4: variant 1 on bf16 logits, float32 max, exp and sums"));
  add(op::cross_entropy_backward<brrr::bf16>, kCuda, "bf16", &cross_entropy_backward_bf16, 10,
      about("variant 4: variant 1 on bf16 logits, lse recomputed in float32"));
  add(op::cross_entropy_fused_on_bf16, kCuda, "bf16_smem", &cross_entropy_fused_bf16, 10,
      about("variant 5: variant 3 on bf16 logits: the row in shared memory, read once, float32 sums"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
