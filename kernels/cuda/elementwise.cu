// kernels/cuda/elementwise.cu: fill, copy, cast, random numbers, unary and binary ops on the
// GPU: the simple, correct versions that every op needs before any is made fast.
// Chapter 10 (the GPU and the emulator). Read before: kernels/cpu/elementwise.cpp (the same
// ops on the CPU, the reference these are checked against), kernels/cuda/examples.cu.
// Read next: kernels/cuda/reduce.cu.
//
// Every op here is memory-bound: a kernel reads each input once and writes each output once,
// so all that matters is that a warp's 32 threads touch 32 neighbouring elements (coalesced)
// and that there are enough threads in flight to hide the memory latency. One shape serves
// them all, a grid-stride loop: thread t handles elements t, t + T, t + 2T, ... (T threads in
// the grid), so a capped grid covers any n and the launch never depends on the data.
//
// Contiguous kernels move 16 bytes per thread and step (a Pack: four floats or two doubles,
// one vector instruction) when every pointer is 16-byte aligned, and finish the n % 4 tail one
// element at a time. Strided kernels (copy of a view, broadcasting binary ops) walk a Loop
// (kernels/signatures.h): the flat index of an output element is split into coordinates, and
// each operand's offset is the sum of coordinate * stride (stride 0 broadcasts).
//
// Compiled twice (see simt.h): by nvcc into brrr::kernels::cuda, by g++ into
// brrr::kernels::emu. Every op is variant "simple" (priority 10).
#include "kernels/cuda/elementwise.h"

#include <climits>
#include <cstdint>
#include <type_traits>

#include "brrr/generator.h"
#include "kernels/cuda/common.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/simt.h"
#include "kernels/registry.h"

namespace brrr::kernels::BRRR_SIMT_NAMESPACE {

namespace {

constexpr int kBlock = 256;
// 4096 blocks of 256 threads is a few times what an H100 keeps resident (132 SMs x 2048
// threads); the grid-stride loop does the rest, and a smaller grid costs nothing.
constexpr int kMaxBlocks = 4096;

// 16 bytes of T: the unit of a vector load or store (ld.global.v4 under nvcc).
template <class T>
struct alignas(16) Pack {
  static constexpr int size = 16 / sizeof(T);
  T v[size];
};

__device__ inline std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

// ---------------------------------------------------------------------------------------------
// The ops as functors: the kernels below are templates over them, so each op is one line.

struct Neg {
  template <class T> __device__ T operator()(T v) const { return -v; }
};
struct Exp {
  template <class T> __device__ T operator()(T v) const { return exp_of(v); }
};
struct Log {
  template <class T> __device__ T operator()(T v) const { return log_of(v); }
};
struct Sqrt {
  template <class T> __device__ T operator()(T v) const { return sqrt_of(v); }
};
struct Tanh {
  template <class T> __device__ T operator()(T v) const { return tanh_of(v); }
};
struct Relu {
  template <class T> __device__ T operator()(T v) const { return v > T(0) ? v : T(0); }
};
struct Sigmoid {
  template <class T> __device__ T operator()(T v) const { return T(1) / (T(1) + exp_of(-v)); }
};
struct Square {  // pow_scalar with exponent 2, as the CPU does it: exact, and no pow call
  template <class T> __device__ T operator()(T v) const { return v * v; }
};
template <class T>
struct PowScalar {
  T exponent;
  __device__ T operator()(T v) const { return pow_of(v, exponent); }
};
struct Identity {
  template <class T> __device__ T operator()(T v) const { return v; }
};
struct Add {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct Sub {
  template <class T> __device__ T operator()(T a, T b) const { return a - b; }
};
struct Mul {
  template <class T> __device__ T operator()(T a, T b) const { return a * b; }
};
struct Div {
  template <class T> __device__ T operator()(T a, T b) const { return a / b; }
};
struct ReluBackward {  // (dout, x) -> dx
  template <class T> __device__ T operator()(T g, T x) const { return x > T(0) ? g : T(0); }
};
template <class T>
struct MaskedFill {  // (x, mask) -> out
  T value;
  __device__ T operator()(T x, T m) const { return m != T(0) ? value : x; }
};

// ---------------------------------------------------------------------------------------------
// Kernel 1: contiguous, out[i] = f(x[i]) (n), or out[i] = f(a[i], b[i]) with two inputs.
//
// The first `packs` Packs go 16 bytes at a time, the rest one by one. The host passes
// packs = 0 when a pointer is not 16-byte aligned (a view's data), so every load stays legal.
// out may be the same array as an input (in-place add_): each element is read, then written,
// by one thread.

template <class T, class F>
__global__ void map_kernel(T* out, const T* x, std::int64_t n, std::int64_t packs, F f) {
  const std::int64_t stride = grid_stride();
  for (std::int64_t i = first_index(); i < packs; i += stride) {
    Pack<T> p = reinterpret_cast<const Pack<T>*>(x)[i];
    for (int k = 0; k < Pack<T>::size; ++k) p.v[k] = f(p.v[k]);
    reinterpret_cast<Pack<T>*>(out)[i] = p;
  }
  for (std::int64_t i = packs * Pack<T>::size + first_index(); i < n; i += stride) out[i] = f(x[i]);
}

template <class T, class F>
__global__ void zip_kernel(T* out, const T* a, const T* b, std::int64_t n, std::int64_t packs, F f) {
  const std::int64_t stride = grid_stride();
  for (std::int64_t i = first_index(); i < packs; i += stride) {
    const Pack<T> pa = reinterpret_cast<const Pack<T>*>(a)[i];
    const Pack<T> pb = reinterpret_cast<const Pack<T>*>(b)[i];
    Pack<T> po;
    for (int k = 0; k < Pack<T>::size; ++k) po.v[k] = f(pa.v[k], pb.v[k]);
    reinterpret_cast<Pack<T>*>(out)[i] = po;
  }
  for (std::int64_t i = packs * Pack<T>::size + first_index(); i < n; i += stride) out[i] = f(a[i], b[i]);
}

// fill: the same loops with nothing to read.
template <class T>
__global__ void fill_kernel(T* out, T value, std::int64_t n, std::int64_t packs) {
  const std::int64_t stride = grid_stride();
  Pack<T> p;
  for (int k = 0; k < Pack<T>::size; ++k) p.v[k] = value;
  for (std::int64_t i = first_index(); i < packs; i += stride) reinterpret_cast<Pack<T>*>(out)[i] = p;
  for (std::int64_t i = packs * Pack<T>::size + first_index(); i < n; i += stride) out[i] = value;
}

// How many Packs the vector loop may take: all of n's when every pointer is aligned, else 0.
template <class T>
std::int64_t packs_for(std::int64_t n, bool aligned) {
  return aligned ? n / Pack<T>::size : 0;
}

template <class T, class F>
void launch_map(T* out, const T* x, std::int64_t n, F f, Stream stream) {
  if (n == 0) return;
  const std::int64_t packs = packs_for<T>(n, aligned16(out) && aligned16(x));
  const int blocks = grid_for(std::max(packs, n - packs * Pack<T>::size), kBlock, kMaxBlocks);
  BRRR_LAUNCH((map_kernel<T, F>), blocks, kBlock, 0, stream, out, x, n, packs, f);
}

template <class T, class F>
void launch_zip(T* out, const T* a, const T* b, std::int64_t n, F f, Stream stream) {
  if (n == 0) return;
  const std::int64_t packs = packs_for<T>(n, aligned16(out) && aligned16(a) && aligned16(b));
  const int blocks = grid_for(std::max(packs, n - packs * Pack<T>::size), kBlock, kMaxBlocks);
  BRRR_LAUNCH((zip_kernel<T, F>), blocks, kBlock, 0, stream, out, a, b, n, packs, f);
}

// ---------------------------------------------------------------------------------------------
// Kernel 2: strided, over a Loop (copy of a view, broadcasting binary ops).
//
// Element i of the output (row-major over loop.size) has coordinates found by dividing by
// the sizes from the last dim to the first; operand k's offset is sum(coord[d] * stride[k][d]).
// The Loop is a kernel argument (passed by value, 264 bytes of the 4 KiB a launch may pass),
// and the loop over dims runs to the constant kMaxDims so that nvcc unrolls it and reads
// loop.size[d] from the constant bank, not from a copy in local memory.
//
// Integer division is the cost here (a 64-bit divide is ~100 instructions on a GPU, a 32-bit
// one ~20), so the index type is a template: 32-bit when the loop has fewer than 2^31
// elements, which is nearly always. Candid note: a transposing copy reads with a large stride
// and so is not coalesced on the input side; a tiled transpose through shared memory would
// be the next variant.

template <class Index>
__device__ inline void loop_offsets(const Loop& loop, Index i, int operands, std::int64_t* offsets) {
  for (int k = 0; k < 3; ++k) offsets[k] = 0;
  for (int d = kMaxDims - 1; d > 0; --d) {
    if (d >= loop.ndim) continue;
    const Index size = static_cast<Index>(loop.size[d]);
    const Index coord = i % size;
    i /= size;
    for (int k = 0; k < 3; ++k)
      if (k < operands) offsets[k] += static_cast<std::int64_t>(coord) * loop.stride[k][d];
  }
  for (int k = 0; k < 3; ++k)
    if (k < operands) offsets[k] += static_cast<std::int64_t>(i) * loop.stride[k][0];
}

template <class T, class Index>
__global__ void copy_strided_kernel(T* out, const T* in, Loop loop, Index n) {
  const Index stride = static_cast<Index>(grid_stride());
  for (Index i = static_cast<Index>(first_index()); i < n; i += stride) {
    std::int64_t off[3];
    loop_offsets(loop, i, 2, off);
    out[off[0]] = in[off[1]];
  }
}

template <class T, class F, class Index>
__global__ void binary_strided_kernel(T* out, const T* a, const T* b, Loop loop, Index n, F f) {
  const Index stride = static_cast<Index>(grid_stride());
  for (Index i = static_cast<Index>(first_index()); i < n; i += stride) {
    std::int64_t off[3];
    loop_offsets(loop, i, 3, off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

std::int64_t loop_numel(const char* op, const Loop& loop) {
  BRRR_CHECK(loop.ndim >= 0 && loop.ndim <= kMaxDims, op, ": a Loop of ", loop.ndim, " dims (expected 0 to ",
             kMaxDims, ")");
  return loop.numel();
}

// Whether every operand of the Loop steps by 1 through one flat dim: a plain array.
bool loop_is_flat(const Loop& loop, int operands) {
  if (loop.ndim == 0) return true;
  if (loop.ndim != 1) return false;
  for (int k = 0; k < operands; ++k)
    if (loop.stride[k][0] != 1) return false;
  return true;
}

template <class T>
void copy_loop(T* out, const T* in, const Loop& loop, Stream stream) {
  const std::int64_t n = loop_numel("copy", loop);
  if (n == 0) return;
  if (loop_is_flat(loop, 2)) return launch_map(out, in, n, Identity{}, stream);
  const int blocks = grid_for(n, kBlock, kMaxBlocks);
  if (n <= INT_MAX)
    BRRR_LAUNCH((copy_strided_kernel<T, std::uint32_t>), blocks, kBlock, 0, stream, out, in, loop,
                static_cast<std::uint32_t>(n));
  else
    BRRR_LAUNCH((copy_strided_kernel<T, std::uint64_t>), blocks, kBlock, 0, stream, out, in, loop,
                static_cast<std::uint64_t>(n));
}

template <class T, class F>
void binary_loop(const char* op, T* out, const T* a, const T* b, const Loop& loop, F f, Stream stream) {
  const std::int64_t n = loop_numel(op, loop);
  if (n == 0) return;
  if (loop_is_flat(loop, 3)) return launch_zip(out, a, b, n, f, stream);
  const int blocks = grid_for(n, kBlock, kMaxBlocks);
  if (n <= INT_MAX)
    BRRR_LAUNCH((binary_strided_kernel<T, F, std::uint32_t>), blocks, kBlock, 0, stream, out, a, b, loop,
                static_cast<std::uint32_t>(n), f);
  else
    BRRR_LAUNCH((binary_strided_kernel<T, F, std::uint64_t>), blocks, kBlock, 0, stream, out, a, b, loop,
                static_cast<std::uint64_t>(n), f);
}

// ---------------------------------------------------------------------------------------------
// cast: out[i] = static_cast<Out>(in[i]), the CPU's conversion (floats to ints truncate
// toward zero). Candid note: out-of-range and NaN floats have no defined int value in C++;
// the GPU saturates (NaN gives 0) where x86 gives INT_MIN, so they may differ from the CPU.

// bfloat16 goes through float32 both ways, as on the CPU: a double or an integer is first
// made a float, then rounded to nearest even (bf16_of, common.h); a bf16 widens exactly.
template <class Out, class In>
__device__ inline Out convert(In x) {
  if constexpr (std::is_same_v<Out, brrr::bf16>) return bf16_of(static_cast<float>(x));
  else return static_cast<Out>(x);
}
template <class Out>
__device__ inline Out convert(brrr::bf16 x) {
  if constexpr (std::is_same_v<Out, brrr::bf16>) return x;
  else return static_cast<Out>(float_of(x));
}

template <class Out, class In>
__global__ void cast_kernel(Out* out, const In* in, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = convert<Out>(in[i]);
}

template <class Out, class In>
void cast_typed(Out* out, const In* in, std::int64_t n, Stream stream) {
  BRRR_LAUNCH((cast_kernel<Out, In>), grid_for(n, kBlock, kMaxBlocks), kBlock, 0, stream, out, in, n);
}

template <class Out>
void cast_to(Out* out, const void* in, DType in_dtype, std::int64_t n, Stream stream) {
  switch (in_dtype) {
    case DType::Float32: return cast_typed(out, static_cast<const float*>(in), n, stream);
    case DType::Float64: return cast_typed(out, static_cast<const double*>(in), n, stream);
    case DType::Int32: return cast_typed(out, static_cast<const std::int32_t*>(in), n, stream);
    case DType::Int64: return cast_typed(out, static_cast<const std::int64_t*>(in), n, stream);
    case DType::BFloat16: return cast_typed(out, static_cast<const brrr::bf16*>(in), n, stream);
    default: ::brrr::detail::fail("cast: unsupported source dtype ", dtype_name(in_dtype), " on cuda");
  }
}

// ---------------------------------------------------------------------------------------------
// Random numbers: Philox 4x32-10, the very function the CPU uses (brrr/generator.h), so the
// same (seed, counter) gives the same bits here as on the CPU. Element i comes from block
// counter + i / per_block: one thread computes one Philox block and writes its elements, so
// the numbers do not depend on the launch configuration.

using ::brrr::philox4x32;
using ::brrr::PhiloxWords;
__device__ inline float uniform_float(std::uint32_t bits) { return ::brrr::uniform_from_bits(bits); }
__device__ inline double uniform_double(std::uint32_t hi, std::uint32_t lo) {
  return ::brrr::uniform_double_from_bits(hi, lo);
}

// uniform: float takes one word per element (4 per block), double two (2 per block).
template <class T>
__global__ void uniform_kernel(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter,
                               std::int64_t blocks) {
  constexpr int per_block = sizeof(T) == 4 ? 4 : 2;
  for (std::int64_t block = first_index(); block < blocks; block += grid_stride()) {
    const PhiloxWords r = philox4x32(seed, counter + static_cast<std::uint64_t>(block));
    for (int k = 0; k < per_block; ++k) {
      const std::int64_t i = block * per_block + k;
      if (i >= n) break;
      if constexpr (per_block == 4) out[i] = uniform_float(r.w[k]);
      else out[i] = uniform_double(r.w[2 * k], r.w[2 * k + 1]);
    }
  }
}

// normal: Box-Muller in double, as the CPU does, two normals from two words.
template <class T>
__global__ void normal_kernel(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, std::int64_t blocks) {
  const double two_pi = 2.0 * 3.14159265358979323846;  // 2.0 * M_PI, bit for bit
  for (std::int64_t block = first_index(); block < blocks; block += grid_stride()) {
    const PhiloxWords r = philox4x32(seed, counter + static_cast<std::uint64_t>(block));
    double z[4];
    for (int pair = 0; pair < 2; ++pair) {
      const double u1 = (static_cast<double>(r.w[2 * pair]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
      const double u2 = static_cast<double>(r.w[2 * pair + 1]) * (1.0 / 4294967296.0);      // [0, 1)
      const double radius = ::sqrt(-2.0 * ::log(u1));
      z[2 * pair] = radius * ::cos(two_pi * u2);
      z[2 * pair + 1] = radius * ::sin(two_pi * u2);
    }
    for (int k = 0; k < 4 && block * 4 + k < n; ++k) out[block * 4 + k] = static_cast<T>(z[k]);
  }
}

// dropout_mask: 0 with probability p, else 1 / (1 - p).
template <class T>
__global__ void dropout_mask_kernel(T* mask, std::int64_t n, T p, T scale, std::uint64_t seed, std::uint64_t counter,
                                    std::int64_t blocks) {
  for (std::int64_t block = first_index(); block < blocks; block += grid_stride()) {
    const PhiloxWords r = philox4x32(seed, counter + static_cast<std::uint64_t>(block));
    for (int k = 0; k < 4 && block * 4 + k < n; ++k) mask[block * 4 + k] = uniform_float(r.w[k]) < p ? T(0) : scale;
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The host functions: the registered signatures of kernels/signatures.h.

template <class T>
void fill_simple(T* out, T value, std::int64_t n, Stream stream) {
  if (n == 0) return;
  const std::int64_t packs = packs_for<T>(n, aligned16(out));
  const int blocks = grid_for(std::max(packs, n - packs * Pack<T>::size), kBlock, kMaxBlocks);
  BRRR_LAUNCH(fill_kernel<T>, blocks, kBlock, 0, stream, out, value, n, packs);
}

template <class T>
void copy_simple(T* out, const T* in, const Loop& loop, Stream stream) {
  copy_loop(out, in, loop, stream);
}

void cast_simple(void* out, DType out_dtype, const void* in, DType in_dtype, std::int64_t n, Stream stream) {
  if (n == 0) return;
  switch (out_dtype) {
    case DType::Float32: return cast_to(static_cast<float*>(out), in, in_dtype, n, stream);
    case DType::Float64: return cast_to(static_cast<double*>(out), in, in_dtype, n, stream);
    case DType::Int32: return cast_to(static_cast<std::int32_t*>(out), in, in_dtype, n, stream);
    case DType::Int64: return cast_to(static_cast<std::int64_t*>(out), in, in_dtype, n, stream);
    case DType::BFloat16: return cast_to(static_cast<brrr::bf16*>(out), in, in_dtype, n, stream);
    default: ::brrr::detail::fail("cast: unsupported target dtype ", dtype_name(out_dtype), " on cuda");
  }
}

template <class T>
void uniform_simple(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, Stream stream) {
  if (n == 0) return;
  const std::int64_t blocks = ceil_div(n, sizeof(T) == 4 ? 4 : 2);
  BRRR_LAUNCH(uniform_kernel<T>, grid_for(blocks, kBlock, kMaxBlocks), kBlock, 0, stream, out, n, seed, counter,
              blocks);
}

template <class T>
void normal_simple(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, Stream stream) {
  if (n == 0) return;
  const std::int64_t blocks = ceil_div(n, 4);
  BRRR_LAUNCH(normal_kernel<T>, grid_for(blocks, kBlock, kMaxBlocks), kBlock, 0, stream, out, n, seed, counter,
              blocks);
}

template <class T>
void dropout_mask_simple(T* mask, std::int64_t n, T p, std::uint64_t seed, std::uint64_t counter, Stream stream) {
  if (n == 0) return;
  const T scale = T(1) / (T(1) - p);
  const std::int64_t blocks = ceil_div(n, 4);
  BRRR_LAUNCH(dropout_mask_kernel<T>, grid_for(blocks, kBlock, kMaxBlocks), kBlock, 0, stream, mask, n, p, scale,
              seed, counter, blocks);
}

template <class T> void neg_simple(T* out, const T* x, std::int64_t n, Stream s) { launch_map(out, x, n, Neg{}, s); }
template <class T> void exp_simple(T* out, const T* x, std::int64_t n, Stream s) { launch_map(out, x, n, Exp{}, s); }
template <class T> void log_simple(T* out, const T* x, std::int64_t n, Stream s) { launch_map(out, x, n, Log{}, s); }
template <class T> void sqrt_simple(T* out, const T* x, std::int64_t n, Stream s) { launch_map(out, x, n, Sqrt{}, s); }
template <class T> void tanh_simple(T* out, const T* x, std::int64_t n, Stream s) { launch_map(out, x, n, Tanh{}, s); }
template <class T> void relu_simple(T* out, const T* x, std::int64_t n, Stream s) { launch_map(out, x, n, Relu{}, s); }
template <class T> void sigmoid_simple(T* out, const T* x, std::int64_t n, Stream s) { launch_map(out, x, n, Sigmoid{}, s); }

template <class T>
void pow_scalar_simple(T* out, const T* x, T exponent, std::int64_t n, Stream s) {
  if (exponent == T(2)) return launch_map(out, x, n, Square{}, s);
  launch_map(out, x, n, PowScalar<T>{exponent}, s);
}

template <class T>
void relu_backward_simple(T* dx, const T* dout, const T* x, std::int64_t n, Stream s) {
  launch_zip(dx, dout, x, n, ReluBackward{}, s);
}

template <class T> void add_simple(T* out, const T* a, const T* b, const Loop& l, Stream s) { binary_loop("add", out, a, b, l, Add{}, s); }
template <class T> void sub_simple(T* out, const T* a, const T* b, const Loop& l, Stream s) { binary_loop("sub", out, a, b, l, Sub{}, s); }
template <class T> void mul_simple(T* out, const T* a, const T* b, const Loop& l, Stream s) { binary_loop("mul", out, a, b, l, Mul{}, s); }
template <class T> void div_simple(T* out, const T* a, const T* b, const Loop& l, Stream s) { binary_loop("div", out, a, b, l, Div{}, s); }

template <class T>
void masked_fill_simple(T* out, const T* x, const T* mask, T value, const Loop& l, Stream s) {
  binary_loop("masked_fill", out, x, mask, l, MaskedFill<T>{value}, s);
}

// ---------------------------------------------------------------------------------------------
// instantiations and registration

#define BRRR_INSTANTIATE(T)                                                                              \
  template void fill_simple<T>(T*, T, std::int64_t, Stream);                                             \
  template void copy_simple<T>(T*, const T*, const Loop&, Stream);                                       \
  template void uniform_simple<T>(T*, std::int64_t, std::uint64_t, std::uint64_t, Stream);              \
  template void normal_simple<T>(T*, std::int64_t, std::uint64_t, std::uint64_t, Stream);               \
  template void dropout_mask_simple<T>(T*, std::int64_t, T, std::uint64_t, std::uint64_t, Stream);      \
  template void neg_simple<T>(T*, const T*, std::int64_t, Stream);                                       \
  template void exp_simple<T>(T*, const T*, std::int64_t, Stream);                                       \
  template void log_simple<T>(T*, const T*, std::int64_t, Stream);                                       \
  template void sqrt_simple<T>(T*, const T*, std::int64_t, Stream);                                      \
  template void tanh_simple<T>(T*, const T*, std::int64_t, Stream);                                      \
  template void relu_simple<T>(T*, const T*, std::int64_t, Stream);                                      \
  template void sigmoid_simple<T>(T*, const T*, std::int64_t, Stream);                                   \
  template void pow_scalar_simple<T>(T*, const T*, T, std::int64_t, Stream);                             \
  template void relu_backward_simple<T>(T*, const T*, const T*, std::int64_t, Stream);                   \
  template void add_simple<T>(T*, const T*, const T*, const Loop&, Stream);                              \
  template void sub_simple<T>(T*, const T*, const T*, const Loop&, Stream);                              \
  template void mul_simple<T>(T*, const T*, const T*, const Loop&, Stream);                              \
  template void div_simple<T>(T*, const T*, const T*, const Loop&, Stream);                              \
  template void masked_fill_simple<T>(T*, const T*, const T*, T, const Loop&, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE
template void fill_simple<std::int32_t>(std::int32_t*, std::int32_t, std::int64_t, Stream);
template void fill_simple<std::int64_t>(std::int64_t*, std::int64_t, std::int64_t, Stream);
template void copy_simple<std::int32_t>(std::int32_t*, const std::int32_t*, const Loop&, Stream);
template void copy_simple<std::int64_t>(std::int64_t*, const std::int64_t*, const Loop&, Stream);
template void fill_simple<brrr::bf16>(brrr::bf16*, brrr::bf16, std::int64_t, Stream);
template void copy_simple<brrr::bf16>(brrr::bf16*, const brrr::bf16*, const Loop&, Stream);

namespace {
constexpr int kSimple = 10;

// What "simple" is, op by op: a grid-stride loop, Pack (16-byte) loads where every pointer is
// aligned; the Loop's dims decoded per element where operands are strided or broadcast.
const char* const kPacked = "grid-stride loop, 16-byte packs when the pointers are aligned";
const char* const kStrided = "one thread per element, the Loop's dims decoded (a flat fast path)";
const char* const kPhilox = "grid-stride over Philox blocks: the CPU's numbers exactly";

template <class T>
void register_common() {
  const DeviceType cuda = DeviceType::CUDA;
  add(op::fill<T>, cuda, "simple", &fill_simple<T>, kSimple, about(kPacked));
  add(op::copy<T>, cuda, "simple", &copy_simple<T>, kSimple, about(kStrided));
}

template <class T>
void register_floating() {
  const DeviceType cuda = DeviceType::CUDA;
  register_common<T>();
  add(op::uniform<T>, cuda, "simple", &uniform_simple<T>, kSimple, about(kPhilox));
  add(op::normal<T>, cuda, "simple", &normal_simple<T>, kSimple, about(kPhilox));
  add(op::dropout_mask<T>, cuda, "simple", &dropout_mask_simple<T>, kSimple, about(kPhilox));
  add(op::neg<T>, cuda, "simple", &neg_simple<T>, kSimple, about(kPacked));
  add(op::exp<T>, cuda, "simple", &exp_simple<T>, kSimple, about(kPacked));
  add(op::log<T>, cuda, "simple", &log_simple<T>, kSimple, about(kPacked));
  add(op::sqrt<T>, cuda, "simple", &sqrt_simple<T>, kSimple, about(kPacked));
  add(op::tanh<T>, cuda, "simple", &tanh_simple<T>, kSimple, about(kPacked));
  add(op::relu<T>, cuda, "simple", &relu_simple<T>, kSimple, about(kPacked));
  add(op::sigmoid<T>, cuda, "simple", &sigmoid_simple<T>, kSimple, about(kPacked));
  add(op::pow_scalar<T>, cuda, "simple", &pow_scalar_simple<T>, kSimple, about(kPacked));
  add(op::relu_backward<T>, cuda, "simple", &relu_backward_simple<T>, kSimple, about(kPacked));
  add(op::add<T>, cuda, "simple", &add_simple<T>, kSimple, about(kStrided));
  add(op::sub<T>, cuda, "simple", &sub_simple<T>, kSimple, about(kStrided));
  add(op::mul<T>, cuda, "simple", &mul_simple<T>, kSimple, about(kStrided));
  add(op::div<T>, cuda, "simple", &div_simple<T>, kSimple, about(kStrided));
  add(op::masked_fill<T>, cuda, "simple", &masked_fill_simple<T>, kSimple, about(kStrided));
}

template <class T>
void register_cast() {
  add(op::cast<T>, DeviceType::CUDA, "simple", &cast_simple, kSimple, about("one thread per element, any dtype in"));
}
}  // namespace

void register_elementwise_kernels() {
  register_floating<float>();
  register_floating<double>();
  register_common<std::int32_t>();
  register_common<std::int64_t>();
  // bfloat16 (chapter 18): storage and conversion, as on the CPU; ops on bf16 tensors compute
  // in float32 (framework/src) or in the bf16 variants of gelu.cu, layernorm.cu, crossentropy.cu.
  register_common<brrr::bf16>();
  register_cast<float>();
  register_cast<double>();
  register_cast<std::int32_t>();
  register_cast<std::int64_t>();
  register_cast<brrr::bf16>();
}

}  // namespace brrr::kernels::BRRR_SIMT_NAMESPACE
