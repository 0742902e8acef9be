// kernels/cuda/adamw.cu: the AdamW update on the GPU, one tensor at a time and many tensors
// in one launch; and SGD.
// Chapter 16 (the fused optimizer). Read before: kernels/cpu/optim.cpp (the reference, which
// follows torch.optim.AdamW), kernels/cuda/gelu.cu (grid-stride loops, float4).
// Read next: framework/src/optim.cpp (the optimizer that calls these).
//
// AdamW is elementwise over four arrays: read param, grad, m, v, write param, m, v (28 bytes
// per float parameter), about 15 flops and a sqrt. Memory bound, like GELU. For GPT-2's 124M
// parameters that is 3.5 GB per step, ~1 ms at the H100's datasheet 3.35 TB/s. The other
// cost is launches: a GPT-2 has 148 parameter tensors, and a loop that launches one kernel
// per tensor pays ~148 launch overheads (a few microseconds each) for tensors that are often
// tiny (a 768-float bias is done in well under a microsecond). adamw_multi_step does a
// parameter group in one launch (per 64 tensors), as PyTorch's foreach/fused AdamW does.
//
// The math is the CPU kernel's, operation for operation, with the same float constants made
// on the host in double and rounded once:
//   p  = p * (1 - lr * wd)                    decoupled weight decay
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Where float32 results can still differ from the CPU's: both compilers may fuse a * b + c
// into one FMA (one rounding instead of two) where they see fit, and need not choose the same
// places (nvcc fuses by default; g++ does too with -march=native on an FMA machine). sqrt and
// division are correctly rounded on both (nvcc's defaults, -prec-sqrt=true -prec-div=true),
// so a difference is an ulp or so of one step, never a different formula. Every variant here
// calls the same adamw_update, so variants on one device agree bit for bit.
//
// Measured on an H100 80GB HBM3, 2026-11-23, with `scripts/gpu.sh` (see docs/measurements.md;
// the AdamW figures are from a `brrr kernel-lab` run after the last change to the kernels), as
// a share of the lab's measured copy bandwidth (about 3000 GB/s): adamw_step at n = 2^26,
// variant 2 0.6270 ms, 2997 GB/s, 99.7% (67.2% at 2^20); adamw_multi_step at 2^26, as six
// tensors of ragged sizes, 0.8366 ms, 2246 GB/s, 74.7% (45.6% at 2^20), short of the 80% the
// course asks: see the multi-tensor paragraph.
#include "kernels/cuda/adamw.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

// The step's constants (AdamWConstants and adamw_decay, signatures.h) are made on the host
// exactly as kernels/cpu/optim.cpp makes them, and passed by value; the decay per tensor.

// One parameter's update, in the CPU kernel's order of operations. Each product that meets an
// add is an explicit fma: otherwise the compiler decides where to fuse, and it decided
// differently in the multi-tensor kernel's unrolled loop than in adamw_step's, which then
// disagreed in the last bit of one parameter in a few hundred.
template <class T>
static __device__ __forceinline__ void adamw_update(T& p, T g, T& m, T& v, T decay, const AdamWConstants<T>& k) {
  const T decayed = p * decay;
  m = fma_of(m, k.beta1, g * k.one_minus_beta1);
  v = fma_of(v, k.beta2, g * g * k.one_minus_beta2);
  const T denom = sqrt_of(v) / k.bias_correction2_sqrt + k.eps;
  p = fma_of(-k.step_size, m / denom, decayed);
}

constexpr int kBlockSize = 256;

// =============================================================================================
// Variant 1: one thread per parameter.
//
// Thread i updates parameter i: four coalesced 4-byte loads, three stores. Simple and already
// memory-bound; what it leaves on the table is what variant 1 of GELU leaves (one memory
// instruction per 4 bytes, a block per 256 parameters).
// Measured on the H100 at n = 2^26: 0.6301 ms, 2982 GB/s, 99.2% of copy, as good as variant 2
// (99.7%); probably because seven 4-byte streams a thread already keep enough bytes in flight.

template <class T>
__global__ void adamw_kernel1(T* param, const T* grad, T* m, T* v, std::int64_t n, T decay, AdamWConstants<T> k) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T p = param[i], mi = m[i], vi = v[i];
  adamw_update(p, grad[i], mi, vi, decay, k);
  param[i] = p;
  m[i] = mi;
  v[i] = vi;
}

template <class T>
void adamw_step1(T* param, const T* grad, T* m, T* v, std::int64_t n, const AdamWParams& hp, Stream stream) {
  BRRR_CHECK(hp.constants == nullptr, "adamw_step: constants in device memory are read by adamw_multi_step only");
  if (n == 0) return;
  BRRR_CHECK(ceil_div(n, kBlockSize) <= INT_MAX, "adamw_step: ", n, " parameters need more than 2^31 - 1 blocks");
  BRRR_LAUNCH((adamw_kernel1<T>), grid_for(n, kBlockSize), kBlockSize, 0, stream, param, grad, m, v, n,
              adamw_decay<T>(hp.lr, hp.weight_decay), adamw_constants<T>(hp, hp.weight_decay));
}

// =============================================================================================
// Variant 2: grid-stride, float4.
//
// Seven 16-byte memory instructions per four parameters instead of 28 of 4 bytes. For big
// tensors it runs close to the copy bandwidth; for the small ones launch overhead dominates,
// which variant 2 cannot fix and the multi-tensor kernel below does.
// Measured on an H100 at n = 2^26: with GELU's grid of one wave (132 x 8 blocks) whose
// threads loop, 93.7% of copy bandwidth, below variant 1's 99.2%: the loop waits for each
// iteration's seven loads before the next, and AdamW's registers allow fewer resident blocks
// than GELU's, so the "wave" is 1.33 waves. So the grid now covers the tensor, one float4 per
// thread (the loop remains for tensors past 2^31 blocks' worth).

static __device__ __forceinline__ void adamw_update4(float4& p, float4 g, float4& m, float4& v, float decay,
                                                     const AdamWConstants<float>& k) {
  adamw_update(p.x, g.x, m.x, v.x, decay, k);
  adamw_update(p.y, g.y, m.y, v.y, decay, k);
  adamw_update(p.z, g.z, m.z, v.z, decay, k);
  adamw_update(p.w, g.w, m.w, v.w, decay, k);
}

__global__ void adamw_kernel2(float* param, const float* grad, float* m, float* v, std::int64_t n, std::int64_t n4,
                              float decay, AdamWConstants<float> k) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float4* p4 = reinterpret_cast<float4*>(param);
  const float4* g4 = reinterpret_cast<const float4*>(grad);
  float4* m4 = reinterpret_cast<float4*>(m);
  float4* v4 = reinterpret_cast<float4*>(v);
  for (std::int64_t i = first; i < n4; i += stride) {
    float4 p = p4[i], mi = m4[i], vi = v4[i];
    adamw_update4(p, __ldg(g4 + i), mi, vi, decay, k);
    p4[i] = p;
    m4[i] = mi;
    v4[i] = vi;
  }
  for (std::int64_t i = 4 * n4 + first; i < n; i += stride) {
    float p = param[i], mi = m[i], vi = v[i];
    adamw_update(p, grad[i], mi, vi, decay, k);
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
  }
}

void adamw_step2(float* param, const float* grad, float* m, float* v, std::int64_t n, const AdamWParams& hp,
                 Stream stream) {
  BRRR_CHECK(hp.constants == nullptr, "adamw_step: constants in device memory are read by adamw_multi_step only");
  if (n == 0) return;
  const bool vector = aligned16(param) && aligned16(grad) && aligned16(m) && aligned16(v);
  const std::int64_t n4 = vector ? n / 4 : 0;
  const int blocks = grid_for(std::max(n4, n - 4 * n4), kBlockSize);
  BRRR_LAUNCH(adamw_kernel2, blocks, kBlockSize, 0, stream, param, grad, m, v, n, n4,
              adamw_decay<float>(hp.lr, hp.weight_decay), adamw_constants<float>(hp, hp.weight_decay));
}

// =============================================================================================
// Multi-tensor AdamW: many tensors, one launch.
//
// The kernel needs, for every tensor, its four pointers, its size and its weight decay. They
// travel in the kernel's parameters: a launch may pass 4 KiB of arguments, which the GPU
// keeps in constant memory where every thread can read them, and which cost no copy of their
// own (the alternative, copying the list to device memory first, adds a host-to-device copy
// that can stall on pageable memory). 64 tensors fit (about 3.5 KiB); a longer list is cut
// into launches of 64, so a GPT-2 parameter group of 98 tensors takes two launches.
//
// Work is cut into chunks of kChunk = 1024 parameters, one float4 for each of a block's 256
// threads, and each block does one chunk of one tensor. first_block[t] is the first block of
// tensor t (a prefix sum over the tensors' chunk counts, made on the host), so a block finds
// its tensor with a binary search over at most 64 entries, then its chunk as blockIdx.x -
// first_block[t]. Inside the chunk each thread updates one float4 when that tensor's four
// pointers share their offset from a 16-byte boundary, the chunks then starting after the head
// (below; else the block loops over the chunk's scalars). Each parameter gets
// exactly adamw_update with the same constants as adamw_step, so the results are
// bit-identical to adamw_step's on the same device.
// Measured on an H100 at n = 2^26: chunks of 4096 with each thread looping over its four
// float4s, 71% of copy bandwidth; the same with all four float4s loaded before the first
// update, 58% (more registers, fewer resident blocks, each block one burst of loads, then
// one of stores); one float4 a thread, as variant 2 does, 74.7%. The lab's case cuts n into
// six tensors of ragged sizes laid end to end, so five of them start off a 16-byte boundary
// and took the scalar loop; variant 2 on one aligned tensor reaches 99.7%. On an H200
// (2026-11-27) the same case read 67.6% of copy. So each tensor whose four pointers share
// their misalignment now peels its first 0 to 3 parameters (the head) up to a 16-byte
// boundary, and the rest takes float4s (not yet timed on a GPU). The GPT's own tensors, each
// allocated apart, are aligned and have no head.

constexpr int kMultiTensors = 64;
constexpr std::int64_t kChunk = 4 * kBlockSize;

template <class T>
struct AdamWChunks {
  T* param[kMultiTensors];
  const T* grad[kMultiTensors];
  T* m[kMultiTensors];
  T* v[kMultiTensors];
  std::int64_t n[kMultiTensors];
  T decay[kMultiTensors];
  bool decay_from_memory[kMultiTensors];  // a graph's step: the decay read with the constants
  int first_block[kMultiTensors + 1];  // first_block[count] = the grid size
  bool vector[kMultiTensors];        // float4 loads after the head
  unsigned char head[kMultiTensors];  // parameters before the first 16-byte boundary (0 to 3)
  int count;
};

// from_memory: a CUDA graph's step (AdamWParams::constants): the constants, decay included,
// are read from device memory, which the host rewrites before each replay. A tensor without
// weight decay keeps its decay of exactly 1 (1 - lr * 0 at any learning rate), so one step can
// hold nanoGPT's two groups, one with the decay and one without.
// grad_scale: the clipped step's coefficient (adamw_clipped_multi_step, below), read once a block
// into shared memory; nullptr for the plain step (each gradient times 1: the same bits).
template <class T>
__global__ void adamw_multi_kernel(AdamWChunks<T> list, AdamWConstants<T> arguments,
                                   const AdamWConstants<T>* from_memory, const T* grad_scale) {
  const AdamWConstants<T> k = from_memory ? *from_memory : arguments;
  __shared__ T block_scale;
  if (threadIdx.x == 0) block_scale = grad_scale ? *grad_scale : T(1);
  __syncthreads();
  const T scale = block_scale;
  // The tensor t with first_block[t] <= blockIdx.x < first_block[t + 1].
  int lo = 0, hi = list.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (list.first_block[mid] <= static_cast<int>(blockIdx.x)) lo = mid;
    else hi = mid - 1;
  }
  const int t = lo;
  T* param = list.param[t];
  const T* grad = list.grad[t];
  T* m = list.m[t];
  T* v = list.v[t];
  const T decay = from_memory && list.decay_from_memory[t] ? k.decay : list.decay[t];
  // The chunks start after the tensor's head (0 to 3 parameters before its first 16-byte
  // boundary), which the first chunk's block does one parameter a thread.
  const auto update_one = [&](std::int64_t i) {  // parameter i, one value at a time
    T p = param[i], mi = m[i], vi = v[i];
    adamw_update(p, grad[i] * scale, mi, vi, decay, k);
    param[i] = p;
    m[i] = mi;
    v[i] = vi;
  };
  const std::int64_t head = list.head[t], chunk = static_cast<std::int64_t>(blockIdx.x) - list.first_block[t];
  if (chunk == 0 && threadIdx.x < head) update_one(threadIdx.x);
  const std::int64_t begin = head + chunk * kChunk;
  const std::int64_t end = begin + kChunk < list.n[t] ? begin + kChunk : list.n[t];
  std::int64_t scalar_begin = begin;
  if constexpr (std::is_same_v<T, float>) {
    if (list.vector[t]) {
      scalar_begin = begin + (end - begin) / 4 * 4;  // begin is 16-byte aligned: head + 1024 chunk
      // One float4 per thread, as in variant 2 (see kChunk).
      const std::int64_t i = begin / 4 + threadIdx.x;  // head < 4: begin / 4 is chunk * 256
      if (4 * static_cast<std::int64_t>(threadIdx.x) < scalar_begin - begin) {
        float4* p4 = reinterpret_cast<float4*>(param + head);
        float4* m4 = reinterpret_cast<float4*>(m + head);
        float4* v4 = reinterpret_cast<float4*>(v + head);
        float4 p = p4[i], mi = m4[i], vi = v4[i];
        const float4 g = __ldg(reinterpret_cast<const float4*>(grad + head) + i);
        adamw_update4(p, make_float4(g.x * scale, g.y * scale, g.z * scale, g.w * scale), mi, vi, decay, k);
        p4[i] = p;
        m4[i] = mi;
        v4[i] = vi;
      }
    }
  }
  for (std::int64_t i = scalar_begin + threadIdx.x; i < end; i += blockDim.x) update_one(i);
}

// The tensors cut into lists of at most 64, each list one launch (its grid: first_block[count]).
template <class T>
static std::vector<AdamWChunks<T>> chunk_lists(const AdamWTensor<T>* tensors, int count, const AdamWParams& hp) {
  const auto* from_memory = static_cast<const AdamWConstants<T>*>(hp.constants);
  std::vector<AdamWChunks<T>> lists;
  AdamWChunks<T> list{};
  std::int64_t blocks = 0;
  const auto launch = [&] {
    if (list.count == 0) return;
    list.first_block[list.count] = static_cast<int>(blocks);
    lists.push_back(list);
    list = AdamWChunks<T>{};
    blocks = 0;
  };
  for (int i = 0; i < count; ++i) {
    const AdamWTensor<T>& tensor = tensors[i];
    BRRR_CHECK(tensor.n >= 0, "adamw_multi_step: tensor ", i, " has ", tensor.n, " parameters");
    BRRR_CHECK(!from_memory || tensor.weight_decay == hp.weight_decay || tensor.weight_decay == 0.0,
               "adamw_multi_step: tensor ", i, " has weight decay ", tensor.weight_decay,
               ", but constants read from memory hold one decay, ", hp.weight_decay, " (or none, 0)");
    if (tensor.n == 0) continue;
    // float4 loads need the four pointers 16-byte aligned. A tensor cut out of a larger buffer
    // may start anywhere, but its four pointers usually share their misalignment (the lab's
    // case: six tensors end to end in four buffers): then the first 0 to 3 parameters (the
    // head) are done one by one, and everything after them is aligned.
    std::int64_t head = 0;
    bool vector = false;
    if constexpr (std::is_same_v<T, float>) {
      const auto offset = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16; };
      const std::uintptr_t off = offset(tensor.param);
      vector = off % sizeof(T) == 0 && offset(tensor.grad) == off && offset(tensor.m) == off && offset(tensor.v) == off;
      if (vector) head = std::min<std::int64_t>(tensor.n, static_cast<std::int64_t>((16 - off) % 16 / sizeof(T)));
    }
    const std::int64_t chunks = std::max<std::int64_t>(1, ceil_div(tensor.n - head, kChunk));
    BRRR_CHECK(chunks <= INT_MAX, "adamw_multi_step: tensor ", i, " of ", tensor.n, " parameters is too large");
    if (list.count == kMultiTensors || blocks + chunks > INT_MAX) launch();
    const int t = list.count++;
    list.param[t] = tensor.param;
    list.grad[t] = tensor.grad;
    list.m[t] = tensor.m;
    list.v[t] = tensor.v;
    list.n[t] = tensor.n;
    list.decay[t] = adamw_decay<T>(hp.lr, tensor.weight_decay);
    list.decay_from_memory[t] = tensor.weight_decay != 0.0;
    list.first_block[t] = static_cast<int>(blocks);
    list.vector[t] = vector;
    list.head[t] = static_cast<unsigned char>(head);
    blocks += chunks;
  }
  launch();
  return lists;
}

template <class T>
void adamw_multi_step(const AdamWTensor<T>* tensors, int count, const AdamWParams& hp, Stream stream) {
  static_assert(sizeof(AdamWChunks<T>) + sizeof(AdamWConstants<T>) + 2 * sizeof(void*) <= 4096,
                "kernel arguments are limited to 4 KiB");
  const AdamWConstants<T> k = adamw_constants<T>(hp, hp.weight_decay);
  const auto* from_memory = static_cast<const AdamWConstants<T>*>(hp.constants);
  for (const AdamWChunks<T>& list : chunk_lists(tensors, count, hp))
    BRRR_LAUNCH((adamw_multi_kernel<T>), list.first_block[list.count], kBlockSize, 0, stream, list, k, from_memory,
                static_cast<const T*>(nullptr));
}

// =============================================================================================
// Multi-tensor AdamW with the gradients clipped by their global norm.
//
// clip_grad_norm_ then step, as PyTorch and the trainer did it, is a pass over every gradient
// for each tensor's sum of squares, a pass that multiplies every gradient by the coefficient
// (a read and a write), then the step. The coefficient min(1, max_norm / (norm + 1e-6)) depends
// on every gradient, and the update is not linear in g (v takes g^2), so no parameter can be
// updated before the last gradient has been read: at least two reads of each gradient. Here
// there are exactly two, and the clipped gradients are never written:
//   1. adamw_norm_kernel: kNormBlocks blocks a list (its 64 tensors' chunks, the update's
//      chunks, dealt out as chunk b, b + kNormBlocks, ...), each thread a sum of squares in T,
//      each block its threads' sums added in a fixed order, one partial sum a block.
//   2. adamw_clip_kernel: one block adds the partial sums in a fixed order, writes the norm
//      and the coefficient (device memory: nothing is read back to the host).
//   3. the update of adamw_multi_step above, every gradient times the coefficient.
// Three launches (two for the update of 64 tensors or fewer, plus one a further 64); the
// order of every sum depends only on the tensors' sizes, never on timing or the device: the
// same bits every run (DESIGN.md, "Reproducibility"). Untimed on a GPU.

constexpr int kNormBlocks = 512;

template <class T>
__global__ void adamw_norm_kernel(AdamWChunks<T> list, T* partial) {
  const int chunks = list.first_block[list.count];
  T squares = 0;
  for (int block = blockIdx.x; block < chunks; block += gridDim.x) {
    int lo = 0, hi = list.count - 1;  // the tensor of this chunk, as the update finds it
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (list.first_block[mid] <= block) lo = mid;
      else hi = mid - 1;
    }
    const T* grad = list.grad[lo];
    const std::int64_t head = list.head[lo], chunk = block - list.first_block[lo];
    if (chunk == 0 && threadIdx.x < head) squares += grad[threadIdx.x] * grad[threadIdx.x];
    const std::int64_t begin = head + chunk * kChunk;
    const std::int64_t end = begin + kChunk < list.n[lo] ? begin + kChunk : list.n[lo];
    std::int64_t scalar_begin = begin;
    if constexpr (std::is_same_v<T, float>) {
      if (list.vector[lo]) {
        scalar_begin = begin + (end - begin) / 4 * 4;
        if (4 * static_cast<std::int64_t>(threadIdx.x) < scalar_begin - begin) {
          const float4 g = __ldg(reinterpret_cast<const float4*>(grad + head) + begin / 4 + threadIdx.x);
          squares += (g.x * g.x + g.y * g.y) + (g.z * g.z + g.w * g.w);
        }
      }
    }
    for (std::int64_t i = scalar_begin + threadIdx.x; i < end; i += blockDim.x) squares += grad[i] * grad[i];
  }
  __shared__ T warps[kBlockSize / 32];
  squares = warp_sum(squares);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    T total = 0;
    for (int w = 0; w < kBlockSize / 32; ++w) total += warps[w];
    partial[blockIdx.x] = total;
  }
}

// norm = sqrt(sum of the partials), scale = min(1, max_norm / (norm + 1e-6)): one block.
template <class T>
__global__ void adamw_clip_kernel(T* norm, T* scale, const T* partial, int count, T max_norm) {
  __shared__ T warps[kBlockSize / 32];
  T sum = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partial[i];
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    T total = 0;
    for (int w = 0; w < kBlockSize / 32; ++w) total += warps[w];
    const T n = sqrt_of(total), coefficient = max_norm / (n + T(1e-6));
    *norm = n;
    *scale = coefficient < T(1) ? coefficient : T(1);
  }
}

template <class T>
void adamw_clipped_multi_step(T* norm, const AdamWTensor<T>* tensors, int count, const AdamWParams& hp,
                              double max_norm, Stream stream) {
  BRRR_CHECK(max_norm > 0.0 && std::isfinite(max_norm), "adamw_clipped_multi_step: max_norm must be positive, got ",
             max_norm);
  const std::vector<AdamWChunks<T>> lists = chunk_lists(tensors, count, hp);
  const int partials = std::max<int>(1, static_cast<int>(lists.size()) * kNormBlocks);
  T* scratch = static_cast<T*>(workspace((static_cast<std::size_t>(partials) + 1) * sizeof(T), stream));
  T* scale = scratch + partials;
  if (lists.empty())  // no parameter at all: one block of an empty list writes the one partial, 0
    BRRR_LAUNCH((adamw_norm_kernel<T>), 1, kBlockSize, 0, stream, AdamWChunks<T>{}, scratch);
  for (std::size_t l = 0; l < lists.size(); ++l)
    BRRR_LAUNCH((adamw_norm_kernel<T>), kNormBlocks, kBlockSize, 0, stream, lists[l], scratch + l * kNormBlocks);
  BRRR_LAUNCH((adamw_clip_kernel<T>), 1, kBlockSize, 0, stream, norm, scale, static_cast<const T*>(scratch), partials,
              static_cast<T>(max_norm));
  const AdamWConstants<T> k = adamw_constants<T>(hp, hp.weight_decay);
  const auto* from_memory = static_cast<const AdamWConstants<T>*>(hp.constants);
  for (const AdamWChunks<T>& list : lists)
    BRRR_LAUNCH((adamw_multi_kernel<T>), list.first_block[list.count], kBlockSize, 0, stream, list, k, from_memory,
                static_cast<const T*>(scale));
}

// =============================================================================================
// SGD with momentum, as torch.optim.SGD and the CPU kernel:
//   d = g + wd * p;  buf = d (first step) or momentum * buf + (1 - dampening) * d
//   d = d + momentum * buf (nesterov) or buf;  p -= lr * d
// One thread per parameter; the float4 treatment of AdamW would apply unchanged.

template <class T>
__global__ void sgd_kernel1(T* param, const T* grad, T* buf, std::int64_t n, T lr, T weight_decay, T momentum,
                            T one_minus_dampening, bool nesterov, bool first_step) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  T d = grad[i] + weight_decay * param[i];
  if (momentum != T(0)) {
    const T b = first_step ? d : momentum * buf[i] + one_minus_dampening * d;
    buf[i] = b;
    d = nesterov ? d + momentum * b : b;
  }
  param[i] -= lr * d;
}

template <class T>
void sgd_step1(T* param, const T* grad, T* momentum_buffer, std::int64_t n, const SGDParams& hp, Stream stream) {
  if (n == 0) return;
  BRRR_CHECK(ceil_div(n, kBlockSize) <= INT_MAX, "sgd_step: ", n, " parameters need more than 2^31 - 1 blocks");
  BRRR_LAUNCH((sgd_kernel1<T>), grid_for(n, kBlockSize), kBlockSize, 0, stream, param, grad, momentum_buffer, n,
              static_cast<T>(hp.lr), static_cast<T>(hp.weight_decay), static_cast<T>(hp.momentum),
              static_cast<T>(1.0 - hp.dampening), hp.nesterov, hp.first_step);
}

// ---------------------------------------------------------------------------------------------

template void adamw_step1<float>(float*, const float*, float*, float*, std::int64_t, const AdamWParams&, Stream);
template void adamw_step1<double>(double*, const double*, double*, double*, std::int64_t, const AdamWParams&, Stream);
template void adamw_multi_step<float>(const AdamWTensor<float>*, int, const AdamWParams&, Stream);
template void adamw_multi_step<double>(const AdamWTensor<double>*, int, const AdamWParams&, Stream);
template void adamw_clipped_multi_step<float>(float*, const AdamWTensor<float>*, int, const AdamWParams&, double,
                                              Stream);
template void adamw_clipped_multi_step<double>(double*, const AdamWTensor<double>*, int, const AdamWParams&, double,
                                               Stream);
template void sgd_step1<float>(float*, const float*, float*, std::int64_t, const SGDParams&, Stream);
template void sgd_step1<double>(double*, const double*, double*, std::int64_t, const SGDParams&, Stream);

void register_adamw_kernels() {
  constexpr DeviceType kCuda = DeviceType::CUDA;
  add(op::adamw_step<float>, kCuda, "naive", &adamw_step1<float>, 0, about("variant 1: one thread per parameter"));
  add(op::adamw_step<float>, kCuda, "float4", &adamw_step2, 10,
      about("variant 2: a grid-stride loop over float4s (scalars when a pointer is misaligned)"));
  add(op::adamw_step<double>, kCuda, "naive", &adamw_step1<double>, 0, about("variant 1: one thread per parameter"));
  add(op::adamw_multi_step<float>, kCuda, "multi-tensor", &adamw_multi_step<float>, 0,
      about("every tensor in one launch: chunks of 1024 parameters, one float4 per thread"));
  add(op::adamw_multi_step<double>, kCuda, "multi-tensor", &adamw_multi_step<double>, 0,
      about("every tensor in one launch: chunks of 1024 parameters"));
  add(op::adamw_clipped_multi_step<float>, kCuda, "multi-tensor", &adamw_clipped_multi_step<float>, 0,
      about("the global norm in two launches (block partials, then one block), then the multi-tensor update"));
  add(op::adamw_clipped_multi_step<double>, kCuda, "multi-tensor", &adamw_clipped_multi_step<double>, 0,
      about("the global norm in two launches (block partials, then one block), then the multi-tensor update"));
  add(op::sgd_step<float>, kCuda, "naive", &sgd_step1<float>, 0, about("one thread per parameter"));
  add(op::sgd_step<double>, kCuda, "naive", &sgd_step1<double>, 0, about("one thread per parameter"));
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
