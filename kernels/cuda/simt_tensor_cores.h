// kernels/cuda/simt_tensor_cores.h: Ampere's tensor-core instructions for the kernels that use
// them (kernels/cuda/matmul/mma_sync.cu, kernels/cuda/attention/mma_sync.cu): mma.sync, ldmatrix and cp.async
// as brrr spells them, and WMMA (nvcuda::wmma). Under nvcc each is one line of inline PTX (a
// kernel using WMMA includes CUDA's <mma.h> itself); under g++ each is the emulator's
// warp-collective version, implemented in simt_tensor_cores.cpp. Chapter 14 (tensor cores).
// Read before: kernels/cuda/simt.h (chapter 10: the SIMT model both halves build on).
// Read next: kernels/cuda/simt_tensor_cores.cpp (the emulator's fragment tables), then
// kernels/cuda/matmul/mma_sync.cu's variant 7 (WMMA) and 9 (mma.sync).
#pragma once
#include "kernels/cuda/simt.h"

#if defined(__CUDACC__)
// =============================================================================================
// nvcc: the instructions themselves.

// --- mma.sync, ldmatrix, cp.async (sm_80 and later) ---------------------------------------
// brrr's spellings of three PTX instructions, one inline-asm line each; the emulator's half of
// this file implements the same functions lane by lane.

// d = a b + c on one warp's 16 x 8 tile: a (16 x 16, bf16 or f16, row major), b (16 x 8, col
// major), c and d float32. Fragments as the PTX ISA lays them out ("Matrix fragments for
// mma.m16n8k16"); d may be c.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                  const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                 const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
// m16n8k8 on tf32 operands (float32 bits of which the tensor core reads the top 19).
__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2],
                                                 const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
// x rounded to tf32 (nearest, ties away from zero), as float32 bits: cvt.rna.tf32.f32.
__device__ __forceinline__ unsigned float_to_tf32(float x) {
  unsigned bits;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(bits) : "f"(x));
  return bits;
}

// ldmatrix: the warp loads 1, 2 or 4 matrices of 8 x 8 16-bit values from shared memory; lane
// 8 j + i gives the address of row i of matrix j (16 bytes, 16-byte aligned). Register j of
// lane l receives row l / 4, values 2 (l % 4) and 2 (l % 4) + 1 of matrix j: an mma fragment.
// The _trans forms hand out the transposed matrices (column l / 4 instead of row).
__device__ __forceinline__ unsigned shared_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void ldmatrix_x1(unsigned (&r)[1], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x1_trans(unsigned (&r)[1], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x2_trans(unsigned (&r)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// cp.async: copy `Bytes` (4, 8 or 16) from global to shared memory without passing through
// registers, in the background. Only the first src_bytes are read; the rest of the destination
// is filled with zeros (how a tile past the edge of a matrix is loaded). Copies issued since
// the last commit form a group; cp_async_wait_group<N>() waits until at most N groups are
// still in flight. Other threads see the bytes only after the wait and a __syncthreads.
template <int Bytes>
__device__ __forceinline__ void cp_async(void* shared_destination, const void* global_source, int src_bytes = Bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared_destination)),
                 "l"(global_source), "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared_address(shared_destination)),
                 "l"(global_source), "n"(Bytes), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#else
// =============================================================================================
// g++: the emulator's versions. simt.h's emulator half has already included what they use.

// --- mma.sync, ldmatrix, cp.async ------------------------------------------------------------
// The GPU's warp-collective instructions, lane by lane (simt_tensor_cores.cpp). Every lane hands
// its registers to the warp (a mailbox, as a shuffle), and once all 32 have, each lane takes its
// part of the result, assembled from the PTX ISA's fragment layouts. The nvcc half above says
// what each does.

namespace brrr::simt::detail {
constexpr int kExchangeWords = 12;
// Posts `count` words of this lane and waits for the whole warp (all 32 lanes, at the same call);
// returns the warp's table: lane l's words at table[l * kExchangeWords + i].
const std::uint32_t* warp_exchange(const char* name, const std::uint32_t* words, int count,
                                   const std::source_location& at);
enum class MmaShape { kM16N8K16Bf16, kM16N8K16F16, kM16N8K8Tf32 };
void mma(MmaShape shape, float* d, const unsigned* a, const unsigned* b, const float* c,
         const std::source_location& at);
// The register of `lane` for matrix `matrix` of an ldmatrix whose rows are in `table`.
unsigned ldmatrix_fragment(const std::uint32_t* table, int matrix, int lane, bool transposed);
void check_ldmatrix_row(const char* name, const void* row, const std::source_location& at);
std::uint32_t float_to_tf32(float x);
// `pc`: the kernel's instruction (a return address), for the race detector's messages.
void cp_async(void* destination, const void* source, int bytes, int src_bytes, const void* pc);
void cp_async_commit_group();
void cp_async_wait_group(int pending, const void* pc);

inline int lane_id() {
  return static_cast<int>((threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y) % 32);
}

template <int Count, bool Transposed>
void ldmatrix(const char* name, unsigned (&r)[Count], const void* row, const std::source_location& at) {
  static_assert(Count == 1 || Count == 2 || Count == 4, "ldmatrix loads 1, 2 or 4 matrices");
  // This lane's row, if it gives one (lanes 0 .. 8 Count - 1): a 16-byte load the race detector
  // sees as this lane's. The warp then deals the values out.
  std::uint32_t words[4] = {0, 0, 0, 0};
  const int lane = lane_id();
  if (lane < 8 * Count) {
    check_ldmatrix_row(name, row, at);
    const int4 values = *static_cast<const int4*>(row);
    std::memcpy(words, &values, sizeof values);
  }
  const std::uint32_t* table = warp_exchange(name, words, 4, at);
  for (int j = 0; j < Count; ++j) r[j] = ldmatrix_fragment(table, j, lane, Transposed);
  compiler_barrier();
}
}  // namespace brrr::simt::detail

inline void mma_m16n8k16_bf16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4],
                              const std::source_location& at = std::source_location::current()) {
  brrr::simt::detail::mma(brrr::simt::detail::MmaShape::kM16N8K16Bf16, d, a, b, c, at);
}
inline void mma_m16n8k16_f16(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4],
                             const std::source_location& at = std::source_location::current()) {
  brrr::simt::detail::mma(brrr::simt::detail::MmaShape::kM16N8K16F16, d, a, b, c, at);
}
inline void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], const float (&c)[4],
                             const std::source_location& at = std::source_location::current()) {
  brrr::simt::detail::mma(brrr::simt::detail::MmaShape::kM16N8K8Tf32, d, a, b, c, at);
}
inline unsigned float_to_tf32(float x) { return brrr::simt::detail::float_to_tf32(x); }

#define BRRR_SIMT_LDMATRIX(name, count, transposed)                                                \
  inline void name(unsigned (&r)[count], const void* row,                                          \
                   const std::source_location& at = std::source_location::current()) {             \
    brrr::simt::detail::ldmatrix<count, transposed>(#name, r, row, at);                            \
  }
BRRR_SIMT_LDMATRIX(ldmatrix_x1, 1, false)
BRRR_SIMT_LDMATRIX(ldmatrix_x2, 2, false)
BRRR_SIMT_LDMATRIX(ldmatrix_x4, 4, false)
BRRR_SIMT_LDMATRIX(ldmatrix_x1_trans, 1, true)
BRRR_SIMT_LDMATRIX(ldmatrix_x2_trans, 2, true)
BRRR_SIMT_LDMATRIX(ldmatrix_x4_trans, 4, true)
#undef BRRR_SIMT_LDMATRIX

// cp.async: the copy is queued by the issuing thread and done at its cp_async_wait_group. Until
// then the destination holds 0xFF bytes (NaN) and the race detector reports any access to it,
// so a missing wait shows as an error, not as a lucky early copy.
template <int Bytes>
__attribute__((noinline)) void cp_async(void* shared_destination, const void* global_source, int src_bytes = Bytes) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  brrr::simt::detail::cp_async(shared_destination, global_source, Bytes, src_bytes, __builtin_return_address(0));
}
inline void cp_async_commit_group() { brrr::simt::detail::cp_async_commit_group(); }
template <int N>
__attribute__((noinline)) void cp_async_wait_group() {
  static_assert(N >= 0, "cp.async.wait_group N: N >= 0");
  brrr::simt::detail::cp_async_wait_group(N, __builtin_return_address(0));
  brrr::simt::detail::compiler_barrier();
}

// --- WMMA (nvcuda::wmma) ------------------------------------------------------------------------
// CUDA's portable tensor-core API (<mma.h>), for matmul's variant 7 (matmul/mma_sync.cu); the emulator has the one
// shape that variant uses, m16n16k8 on tf32 with float32 accumulators. Unlike mma.sync, WMMA does
// not say which lane holds which element of a fragment: a kernel may read and write a
// fragment's x[] only element by element, the same thing on each (as split_tf32 does). The
// emulator therefore picks its own layout, not the GPU's (element e of lane l is element
// l + 32 e of the tile in row-major order): a kernel that assumed a layout computes wrong
// numbers here too. load_matrix_sync, store_matrix_sync and mma_sync are warp-collective: all
// 32 lanes must call them with the same pointer and stride (checked), and the GPU's rules on
// those, undefined behaviour there, are errors here: a 32-byte aligned pointer, a stride that
// is a multiple of 16 bytes. Each lane loads and stores its own elements, so the race detector
// sees them as that lane's accesses; mma_sync exchanges the a and b fragments across the warp
// and adds the products as the tensor cores do (simt_tensor_cores.cpp: truncating, not rounding).
namespace brrr::simt::detail {
// The warp's collective checks: same pointer, stride and layout in every lane; alignment.
void wmma_collective(const char* name, const void* pointer, unsigned stride, int layout, int element_bytes,
                     const std::source_location& at);
// d (this lane's 8 accumulators) = c + a b for one 16 x 16 x 8 tile: a_own and b_own are this
// lane's 4 tf32 values of each operand in the emulator's layout.
void wmma_mma_m16n16k8_tf32(float* d, const float* a_own, const float* b_own, const float* c,
                            const std::source_location& at);
}  // namespace brrr::simt::detail

namespace nvcuda::wmma {
struct matrix_a;
struct matrix_b;
struct accumulator;
struct row_major;
struct col_major;
namespace precision {
struct tf32;
}
enum layout_t { mem_row_major, mem_col_major };

inline float __float_to_tf32(float x) { return std::bit_cast<float>(brrr::simt::detail::float_to_tf32(x)); }

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 8,
                "the emulator runs WMMA's m16n16k8 (tf32) shape only, the one variant 7 uses; add others in simt.h");
  static_assert(std::is_same_v<Use, accumulator> ? std::is_same_v<T, float> : std::is_same_v<T, precision::tf32>,
                "m16n16k8 takes precision::tf32 operands and float accumulators");
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int columns = std::is_same_v<Use, matrix_a> ? K : N;
  static constexpr int num_elements = rows * columns / 32;
  float x[num_elements];
};

template <class Use, int M, int N, int K, class T, class Layout>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, float value) {
  for (float& element : f.x) element = value;
}

namespace detail {
// Where element e of this lane lies in memory of leading dimension ldm, row- or column-major:
// element e is (row, column) = divmod(lane + 32 e, columns) in the emulator's layout.
template <class Fragment>
inline unsigned offset_of(int e, unsigned ldm, bool row_major_memory) {
  const unsigned at = static_cast<unsigned>(brrr::simt::detail::lane_id() + 32 * e);
  const unsigned r = at / Fragment::columns, c = at % Fragment::columns;
  return row_major_memory ? r * ldm + c : c * ldm + r;
}
}  // namespace detail

// a or b from memory laid out as the fragment's Layout says; ldm in elements.
template <class Use, int M, int N, int K, class T, class Layout>
inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const float* p, unsigned ldm,
                             const std::source_location& at = std::source_location::current()) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator's load names its layout (mem_row_major, ...)");
  constexpr bool row = std::is_same_v<Layout, row_major>;
  brrr::simt::detail::wmma_collective("wmma::load_matrix_sync", p, ldm, row, sizeof(float), at);
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int e = 0; e < F::num_elements; ++e) f.x[e] = p[detail::offset_of<F>(e, ldm, row)];
  brrr::simt::detail::compiler_barrier();
}

template <int M, int N, int K>
inline void load_matrix_sync(fragment<accumulator, M, N, K, float>& f, const float* p, unsigned ldm, layout_t layout,
                             const std::source_location& at = std::source_location::current()) {
  const bool row = layout == mem_row_major;
  brrr::simt::detail::wmma_collective("wmma::load_matrix_sync", p, ldm, row, sizeof(float), at);
  using F = fragment<accumulator, M, N, K, float>;
  for (int e = 0; e < F::num_elements; ++e) f.x[e] = p[detail::offset_of<F>(e, ldm, row)];
  brrr::simt::detail::compiler_barrier();
}

template <int M, int N, int K>
inline void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, float>& f, unsigned ldm, layout_t layout,
                              const std::source_location& at = std::source_location::current()) {
  const bool row = layout == mem_row_major;
  brrr::simt::detail::wmma_collective("wmma::store_matrix_sync", p, ldm, row, sizeof(float), at);
  using F = fragment<accumulator, M, N, K, float>;
  for (int e = 0; e < F::num_elements; ++e) p[detail::offset_of<F>(e, ldm, row)] = f.x[e];
  brrr::simt::detail::compiler_barrier();
}

// d = a b + c; d may be c.
template <class LayoutA, class LayoutB>
inline void mma_sync(fragment<accumulator, 16, 16, 8, float>& d,
                     const fragment<matrix_a, 16, 16, 8, precision::tf32, LayoutA>& a,
                     const fragment<matrix_b, 16, 16, 8, precision::tf32, LayoutB>& b,
                     const fragment<accumulator, 16, 16, 8, float>& c,
                     const std::source_location& at = std::source_location::current()) {
  brrr::simt::detail::wmma_mma_m16n16k8_tf32(d.x, a.x, b.x, c.x, at);
}
}  // namespace nvcuda::wmma

#endif  // __CUDACC__
