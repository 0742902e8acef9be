// kernels/cuda/simt_hopper.h: Hopper's instructions for the kernels that use them: warpgroup
// MMA (wgmma) with shared-memory matrix descriptors, bulk tensor copies (TMA) through tensor
// maps, mbarriers, the async-proxy fence and setmaxnreg, as brrr spells them. Under nvcc each
// is inline PTX for sm_90a; under g++ each is the emulator's version (simt_hopper.cpp), with
// the sanitizer's rules for their ordering. Chapter 21 (Hopper). Read before:
// kernels/cuda/simt_tensor_cores.h (Ampere's mma.sync, ldmatrix, cp.async: the same idea one
// warp wide). Read next: kernels/cuda/simt_hopper.cpp, then kernels/cuda/examples_hopper.cu.
//
// The picture: a warpgroup is four consecutive warps whose first warp index is a multiple of
// 4 (threads 128 g .. 128 g + 127). One wgmma.mma_async multiplies a 64 x 16 tile of A by a
// 16 x N tile of B (N = 8, 16, ..., 256) into 64 x N float32 accumulators spread over the
// warpgroup's registers: warp w of the group owns rows 16 w .. 16 w + 15, laid out per
// 8-column chunk exactly as mma.m16n8's accumulator (value i of chunk j of lane 4 g + t:
// row 16 w + g + 8 (i / 2), column 8 j + 2 t + i % 2; register 4 j + i). A comes from
// registers (mma.m16n8k16's A fragment, per warp) or from shared memory; B always from shared
// memory, named by a 64-bit matrix descriptor (start address, leading- and stride-dimension
// byte offsets, swizzle mode: the PTX ISA's "Matrix Descriptor Format"). The instruction is
// asynchronous: its operands are read, and its accumulators written, at some point before the
// warpgroup's wgmma.wait_group says its group is done. TMA copies a 2-D box of a tensor
// between global and shared memory, described by a tensor map built on the host; a load
// reports its bytes to an mbarrier (complete_tx), which a consumer waits on by phase parity.
//
// Only for sm_90a: under nvcc the instructions exist where __CUDA_ARCH_FEAT_SM90_ALL is
// defined (a file compiled with -gencode=arch=compute_90a,code=sm_90a, cmake's
// brrr_hopper_sources); compiled for any other target they trap, so a kernel file using them
// still builds for 80 and 90-virtual (CI) and for the ptxas check.
#pragma once
#include <cstdint>

#include "kernels/cuda/simt.h"

// ---------------------------------------------------------------------------------------------
// What both builds share: the descriptor's bits and the tensor map's choices.

namespace brrr::simt {

// The swizzle of a shared-memory tile, as the wgmma descriptor's bits 62-63 encode it. A
// swizzle of S bytes (32, 64, 128) XORs the 16-byte chunk index within an S-byte row (address
// bits 4 ..) with the row's index within a pattern of 8 rows (address bits 7 ..): the pattern
// repeats every 8 S bytes, and a tile starts at a multiple of that (256, 512, 1024 bytes).
enum class Swizzle : unsigned { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

// The bytes of a swizzled row (16 for kNone: the core matrix's row), and of the pattern.
__host__ __device__ constexpr unsigned swizzle_row_bytes(Swizzle s) {
  return s == Swizzle::k128B ? 128 : s == Swizzle::k64B ? 64 : s == Swizzle::k32B ? 32 : 16;
}
__host__ __device__ constexpr unsigned swizzle_pattern_bytes(Swizzle s) { return 8 * swizzle_row_bytes(s); }

// The 64-bit wgmma matrix descriptor of a tile at shared address `address` (bytes, within the
// block's 256 KiB window): bits 0-13 address >> 4, 16-29 leading-dimension byte offset >> 4,
// 32-45 stride-dimension byte offset >> 4, 49-51 base offset (0: the tile starts its swizzle
// pattern), 62-63 the swizzle. Adding k to a descriptor moves its start by 16 k bytes (how a
// kernel steps through K inside a swizzled row).
__host__ __device__ constexpr std::uint64_t wgmma_descriptor_bits(std::uint32_t address, std::uint32_t leading_bytes,
                                              std::uint32_t stride_bytes, Swizzle swizzle) {
  return std::uint64_t{(address & 0x3FFFFu) >> 4} | std::uint64_t{(leading_bytes & 0x3FFFFu) >> 4} << 16 |
         std::uint64_t{(stride_bytes & 0x3FFFFu) >> 4} << 32 | std::uint64_t{static_cast<unsigned>(swizzle)} << 62;
}

// A tensor map's element type and swizzle (CUtensorMapDataType / CUtensorMapSwizzle values).
enum class TensorMapType : unsigned { kBf16 = 9, kFloat32 = 7 };
enum class TensorMapSwizzle : unsigned { kNone = 0, k32B = 1, k64B = 2, k128B = 3 };
__host__ __device__ constexpr unsigned element_bytes(TensorMapType type) { return type == TensorMapType::kBf16 ? 2 : 4; }
__host__ __device__ constexpr unsigned tensor_map_swizzle_bytes(TensorMapSwizzle s) {
  return s == TensorMapSwizzle::k128B ? 128 : s == TensorMapSwizzle::k64B ? 64 : s == TensorMapSwizzle::k32B ? 32 : 0;
}

}  // namespace brrr::simt

#if defined(__CUDACC__)
// =============================================================================================
// nvcc: the instructions themselves.
#include <cuda.h>  // CUtensorMap and its enums (types only: nothing links libcuda)
#include <cudaTypedefs.h>

#include "kernels/cuda/simt_hopper_ptx.h"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BRRR_HOPPER_PTX 1
#else
#define BRRR_HOPPER_PTX 0
#endif
// __grid_constant__: a kernel parameter the kernel only reads, whose address may be taken (a
// tensor map is used by address). CUDA knows it; the emulator defines it away.

namespace brrr::simt {
using TensorMap = CUtensorMap;

// cuTensorMapEncodeTiled for a 2-D tensor of dims[0] (innermost, contiguous) x dims[1]
// elements, rows row_stride_bytes apart, copied in boxes of box[0] x box[1], bytes outside the
// tensor read as zero. The driver's entry point is found through the runtime, so nothing links
// libcuda.
inline void make_tensor_map_2d(TensorMap* map, TensorMapType type, const void* global, std::uint64_t dim0,
                               std::uint64_t dim1, std::uint64_t row_stride_bytes, std::uint32_t box0,
                               std::uint32_t box1, TensorMapSwizzle swizzle) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t status =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found);
    BRRR_CHECK(status == cudaSuccess && found == cudaDriverEntryPointSuccess && function,
               "make_tensor_map_2d: the driver has no cuTensorMapEncodeTiled (CUDA 12 or later needed)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  const cuuint64_t dims[2] = {dim0, dim1}, strides[1] = {row_stride_bytes};
  const cuuint32_t box[2] = {box0, box1}, element_strides[2] = {1, 1};
  const CUresult result = encode(map, static_cast<CUtensorMapDataType>(type), 2, const_cast<void*>(global), dims,
                                 strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 static_cast<CUtensorMapSwizzle>(swizzle), CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  BRRR_CHECK(result == CUDA_SUCCESS, "make_tensor_map_2d: cuTensorMapEncodeTiled failed (CUresult ", int(result),
             ") for a ", dim0, " x ", dim1, " tensor in boxes of ", box0, " x ", box1);
}
}  // namespace brrr::simt

#if BRRR_HOPPER_PTX
#define BRRR_HOPPER_ASM(...) asm volatile(__VA_ARGS__)
#else
#define BRRR_HOPPER_ASM(...) __trap()  // not sm_90a: the instruction does not exist
#endif

__device__ __forceinline__ std::uint32_t hopper_shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// The descriptor of a tile at `tile` (shared memory); see wgmma_descriptor_bits.
__device__ __forceinline__ std::uint64_t wgmma_descriptor(const void* tile, unsigned leading_bytes,
                                                          unsigned stride_bytes, brrr::simt::Swizzle swizzle) {
  return brrr::simt::wgmma_descriptor_bits(hopper_shared_address(tile), leading_bytes, stride_bytes, swizzle);
}

// --- wgmma --------------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { BRRR_HOPPER_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() {
  BRRR_HOPPER_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  BRRR_HOPPER_ASM("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}

// d (64 x N, this thread's N / 2 values) = A B (+ d when scale_d is nonzero): A 64 x 16 and
// B 16 x N, bf16, both from shared memory through descriptors. TransA / TransB: the tile is
// MN-major (the PTX ISA's imm-trans = 1) instead of K-major.
#define BRRR_WGMMA_SS(n, ta, tb)                                                                           \
  BRRR_HOPPER_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\nwgmma.mma_async.sync.aligned.m64n" #n            \
                  "k16.f32.bf16.bf16 {" BRRR_WGMMA_R3_##n "}, %0, %1, p, 1, 1, " #ta ", " #tb ";\n}\n"       \
                  : "+l"(desc_a), "+l"(desc_b), "+r"(scale), BRRR_WGMMA_D_##n::"memory")
#define BRRR_WGMMA_RS(n, tb)                                                                                 \
  BRRR_HOPPER_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\nwgmma.mma_async.sync.aligned.m64n" #n            \
                  "k16.f32.bf16.bf16 {" BRRR_WGMMA_R6_##n "}, {%0, %1, %2, %3}, %4, p, 1, 1, " #tb ";\n}\n"  \
                  : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+l"(desc_b), "+r"(scale),                       \
                    BRRR_WGMMA_D_##n::"memory")
#define BRRR_WGMMA_CASE_SS(n)                            \
  if constexpr (N == n) {                                \
    if constexpr (!TransA && !TransB) BRRR_WGMMA_SS(n, 0, 0); \
    else if constexpr (!TransA) BRRR_WGMMA_SS(n, 0, 1);  \
    else if constexpr (!TransB) BRRR_WGMMA_SS(n, 1, 0);  \
    else BRRR_WGMMA_SS(n, 1, 1);                         \
  }
#define BRRR_WGMMA_CASE_RS(n)                    \
  if constexpr (N == n) {                        \
    if constexpr (!TransB) BRRR_WGMMA_RS(n, 0);  \
    else BRRR_WGMMA_RS(n, 1);                    \
  }
#define BRRR_WGMMA_ALL_N(CASE)                                                                            \
  CASE(8) CASE(16) CASE(24) CASE(32) CASE(40) CASE(48) CASE(56) CASE(64) CASE(72) CASE(80) CASE(88)       \
  CASE(96) CASE(104) CASE(112) CASE(120) CASE(128) CASE(136) CASE(144) CASE(152) CASE(160) CASE(168)      \
  CASE(176) CASE(184) CASE(192) CASE(200) CASE(208) CASE(216) CASE(224) CASE(232) CASE(240) CASE(248)     \
  CASE(256)

template <int N, bool TransA = false, bool TransB = false>
__device__ __forceinline__ void wgmma_m64nNk16_bf16(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                                    int scale_d) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
  unsigned scale = static_cast<unsigned>(scale_d);
  BRRR_WGMMA_ALL_N(BRRR_WGMMA_CASE_SS)
  (void)scale, (void)desc_a, (void)desc_b;  // used by the asm only on sm_90a
}
// The same with A from registers: mma.m16n8k16's A fragment, warp w of the group holding
// rows 16 w .. 16 w + 15.
template <int N, bool TransB = false>
__device__ __forceinline__ void wgmma_m64nNk16_bf16(float (&d)[N / 2], const unsigned (&a)[4], std::uint64_t desc_b,
                                                    int scale_d) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
  unsigned scale = static_cast<unsigned>(scale_d), a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
  BRRR_WGMMA_ALL_N(BRRR_WGMMA_CASE_RS)
  (void)scale, (void)a0, (void)a1, (void)a2, (void)a3, (void)desc_b;  // used by the asm only on sm_90a
}

// --- mbarrier ----------------------------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(std::uint64_t* bar, unsigned arrivals) {
  BRRR_HOPPER_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(hopper_shared_address(bar)), "r"(arrivals)
                  : "memory");
}
__device__ __forceinline__ std::uint64_t mbarrier_arrive(std::uint64_t* bar) {
  std::uint64_t state = 0;
  BRRR_HOPPER_ASM("mbarrier.arrive.shared::cta.b64 %0, [%1];\n"
                  : "=l"(state)
                  : "r"(hopper_shared_address(bar))
                  : "memory");
  return state;
}
__device__ __forceinline__ std::uint64_t mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes) {
  std::uint64_t state = 0;
  BRRR_HOPPER_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;\n"
                  : "=l"(state)
                  : "r"(hopper_shared_address(bar)), "r"(bytes)
                  : "memory");
  return state;
}
__device__ __forceinline__ void mbarrier_expect_tx(std::uint64_t* bar, unsigned bytes) {
  BRRR_HOPPER_ASM("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(hopper_shared_address(bar)),
                  "r"(bytes)
                  : "memory");
}
// True once the phase of parity `parity` has completed (the hardware may also give up after a
// while and return false: loop, or call mbarrier_wait_parity).
__device__ __forceinline__ bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  BRRR_HOPPER_ASM("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                  : "=r"(done)
                  : "r"(hopper_shared_address(bar)), "r"(parity)
                  : "memory");
  return done != 0;
}
__device__ __forceinline__ void mbarrier_wait_parity(std::uint64_t* bar, unsigned parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}

// --- the async proxy ---------------------------------------------------------------------------
// Orders this thread's ordinary (generic proxy) shared-memory accesses with the async proxy's
// (wgmma operands, TMA): write, fence, then a barrier, then the wgmma or TMA store.
__device__ __forceinline__ void fence_proxy_async_shared_cta() {
  BRRR_HOPPER_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// --- TMA: cp.async.bulk.tensor -----------------------------------------------------------------
// Loads the box at (x, y) (x the innermost coordinate; negative or past the end reads zeros)
// into `shared` (128-byte aligned), reporting its bytes to `bar` (complete_tx).
__device__ __forceinline__ void cp_async_bulk_tensor_2d_global_to_shared(void* shared, const brrr::simt::TensorMap* map,
                                                                         int x, int y, std::uint64_t* bar) {
  BRRR_HOPPER_ASM(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          hopper_shared_address(shared)),
      "l"(map), "r"(x), "r"(y), "r"(hopper_shared_address(bar))
      : "memory");
}
// Stores the box at `shared` to (x, y) of the tensor (elements past its edges are not
// written), as part of this thread's current bulk group.
__device__ __forceinline__ void cp_async_bulk_tensor_2d_shared_to_global(const brrr::simt::TensorMap* map, int x, int y,
                                                                         const void* shared) {
  BRRR_HOPPER_ASM("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map),
                  "r"(x), "r"(y), "r"(hopper_shared_address(shared))
                  : "memory");
}
__device__ __forceinline__ void cp_async_bulk_commit_group() {
  BRRR_HOPPER_ASM("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Until at most N of this thread's bulk groups still read their shared memory (which may then
// be written again), or (wait_group) have completed altogether.
template <int N>
__device__ __forceinline__ void cp_async_bulk_wait_group_read() {
  BRRR_HOPPER_ASM("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_bulk_wait_group() {
  BRRR_HOPPER_ASM("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}

// --- setmaxnreg --------------------------------------------------------------------------------
// The warpgroup's registers per thread move to Registers (24 to 256, a multiple of 8).
template <int Registers>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0, "setmaxnreg: 24 to 256, a multiple of 8");
  BRRR_HOPPER_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Registers));
}
template <int Registers>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0, "setmaxnreg: 24 to 256, a multiple of 8");
  BRRR_HOPPER_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Registers));
}

#else
// =============================================================================================
// g++: the emulator's versions (simt_hopper.cpp). Each takes its call site (for errors) and
// its instruction address (for the race detector's messages), which CUDA code never passes.

#define __grid_constant__

namespace brrr::simt {

// The emulator's tensor map: what cuTensorMapEncodeTiled would have checked and stored, in
// the 128 bytes a CUtensorMap takes.
struct alignas(64) TensorMap {
  std::uint32_t magic;  // kTensorMapMagic once made by make_tensor_map_2d
  TensorMapType type;
  TensorMapSwizzle swizzle;
  std::uint32_t box[2];
  const void* global;
  std::uint64_t dims[2];
  std::uint64_t row_stride_bytes;
  unsigned char unused[128 - 56];
};
static_assert(sizeof(TensorMap) == 128, "a tensor map takes 128 bytes, as CUtensorMap does");
constexpr std::uint32_t kTensorMapMagic = 0x7E450A90u;

// cuTensorMapEncodeTiled's checks, then the map (the nvcc half says what each argument is).
void make_tensor_map_2d(TensorMap* map, TensorMapType type, const void* global, std::uint64_t dim0,
                        std::uint64_t dim1, std::uint64_t row_stride_bytes, std::uint32_t box0, std::uint32_t box1,
                        TensorMapSwizzle swizzle);

namespace detail {
using Where = std::source_location;
std::uint64_t wgmma_descriptor(const void* tile, unsigned leading_bytes, unsigned stride_bytes, Swizzle swizzle,
                               const Where& at);
void wgmma_fence(const Where& at);
void wgmma_commit_group(const Where& at);
void wgmma_wait_group(int pending, const Where& at);
// a: A's registers (nullptr: A from shared memory through desc_a).
void wgmma(int n, bool trans_a, bool trans_b, float* d, const unsigned* a, std::uint64_t desc_a, std::uint64_t desc_b,
           int scale_d, const void* pc, const Where& at);
void mbarrier_init(std::uint64_t* bar, unsigned arrivals, const void* pc, const Where& at);
std::uint64_t mbarrier_arrive(std::uint64_t* bar, unsigned expect_bytes, bool arrive, const void* pc, const Where& at);
bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity, const void* pc, const Where& at);
void fence_proxy_async(const Where& at);
void bulk_tensor_load(void* shared, const TensorMap* map, int x, int y, std::uint64_t* bar, const void* pc,
                      const Where& at);
void bulk_tensor_store(const TensorMap* map, int x, int y, const void* shared, const void* pc, const Where& at);
void bulk_commit_group();
void bulk_wait_group(int pending, const void* pc);
void setmaxnreg(int registers, bool increase, const Where& at);
}  // namespace detail
}  // namespace brrr::simt

#define BRRR_HERE const std::source_location& at = std::source_location::current()

inline std::uint64_t wgmma_descriptor(const void* tile, unsigned leading_bytes, unsigned stride_bytes,
                                      brrr::simt::Swizzle swizzle, BRRR_HERE) {
  return brrr::simt::detail::wgmma_descriptor(tile, leading_bytes, stride_bytes, swizzle, at);
}
inline void wgmma_fence(BRRR_HERE) { brrr::simt::detail::wgmma_fence(at); }
inline void wgmma_commit_group(BRRR_HERE) { brrr::simt::detail::wgmma_commit_group(at); }
template <int N>
void wgmma_wait_group(BRRR_HERE) {
  static_assert(N >= 0 && N <= 7, "wgmma.wait_group N: 0 to 7");
  brrr::simt::detail::wgmma_wait_group(N, at);
  brrr::simt::detail::compiler_barrier();
}
template <int N, bool TransA = false, bool TransB = false>
__attribute__((noinline)) void wgmma_m64nNk16_bf16(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b,
                                                   int scale_d, BRRR_HERE) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
  brrr::simt::detail::wgmma(N, TransA, TransB, d, nullptr, desc_a, desc_b, scale_d, __builtin_return_address(0), at);
  brrr::simt::detail::compiler_barrier();
}
template <int N, bool TransB = false>
__attribute__((noinline)) void wgmma_m64nNk16_bf16(float (&d)[N / 2], const unsigned (&a)[4], std::uint64_t desc_b,
                                                   int scale_d, BRRR_HERE) {
  static_assert(N >= 8 && N <= 256 && N % 8 == 0, "wgmma m64nNk16: N is a multiple of 8 from 8 to 256");
  brrr::simt::detail::wgmma(N, false, TransB, d, a, 0, desc_b, scale_d, __builtin_return_address(0), at);
  brrr::simt::detail::compiler_barrier();
}

// The mbarrier and bulk-copy functions are not inlined, so that their return address is the
// kernel's instruction (the race detector names its source line).
__attribute__((noinline)) inline void mbarrier_init(std::uint64_t* bar, unsigned arrivals, BRRR_HERE) {
  brrr::simt::detail::mbarrier_init(bar, arrivals, __builtin_return_address(0), at);
}
__attribute__((noinline)) inline std::uint64_t mbarrier_arrive(std::uint64_t* bar, BRRR_HERE) {
  return brrr::simt::detail::mbarrier_arrive(bar, 0, true, __builtin_return_address(0), at);
}
__attribute__((noinline)) inline std::uint64_t mbarrier_arrive_expect_tx(std::uint64_t* bar, unsigned bytes,
                                                                         BRRR_HERE) {
  return brrr::simt::detail::mbarrier_arrive(bar, bytes, true, __builtin_return_address(0), at);
}
__attribute__((noinline)) inline void mbarrier_expect_tx(std::uint64_t* bar, unsigned bytes, BRRR_HERE) {
  brrr::simt::detail::mbarrier_arrive(bar, bytes, false, __builtin_return_address(0), at);
}
// The emulator's try_wait waits (the fiber sleeps) until the phase completes, then returns
// true; a phase that can never complete is a deadlock, reported with the mbarrier's state.
__attribute__((noinline)) inline bool mbarrier_try_wait_parity(std::uint64_t* bar, unsigned parity, BRRR_HERE) {
  const bool done = brrr::simt::detail::mbarrier_try_wait_parity(bar, parity, __builtin_return_address(0), at);
  brrr::simt::detail::compiler_barrier();
  return done;
}
inline void mbarrier_wait_parity(std::uint64_t* bar, unsigned parity, BRRR_HERE) {
  while (!mbarrier_try_wait_parity(bar, parity, at)) {
  }
}
inline void fence_proxy_async_shared_cta(BRRR_HERE) { brrr::simt::detail::fence_proxy_async(at); }
__attribute__((noinline)) inline void cp_async_bulk_tensor_2d_global_to_shared(void* shared,
                                                                               const brrr::simt::TensorMap* map, int x,
                                                                               int y, std::uint64_t* bar, BRRR_HERE) {
  brrr::simt::detail::bulk_tensor_load(shared, map, x, y, bar, __builtin_return_address(0), at);
}
__attribute__((noinline)) inline void cp_async_bulk_tensor_2d_shared_to_global(const brrr::simt::TensorMap* map, int x,
                                                                               int y, const void* shared, BRRR_HERE) {
  brrr::simt::detail::bulk_tensor_store(map, x, y, shared, __builtin_return_address(0), at);
}
inline void cp_async_bulk_commit_group() { brrr::simt::detail::bulk_commit_group(); }
// The emulator's stores have written global memory when issued; wait_group and
// wait_group.read both release their reads of shared memory.
template <int N>
__attribute__((noinline)) void cp_async_bulk_wait_group_read() {
  brrr::simt::detail::bulk_wait_group(N, __builtin_return_address(0));
  brrr::simt::detail::compiler_barrier();
}
template <int N>
__attribute__((noinline)) void cp_async_bulk_wait_group() {
  brrr::simt::detail::bulk_wait_group(N, __builtin_return_address(0));
  brrr::simt::detail::compiler_barrier();
}
template <int Registers>
void setmaxnreg_inc(BRRR_HERE) {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0, "setmaxnreg: 24 to 256, a multiple of 8");
  brrr::simt::detail::setmaxnreg(Registers, true, at);
}
template <int Registers>
void setmaxnreg_dec(BRRR_HERE) {
  static_assert(Registers >= 24 && Registers <= 256 && Registers % 8 == 0, "setmaxnreg: 24 to 256, a multiple of 8");
  brrr::simt::detail::setmaxnreg(Registers, false, at);
}
#undef BRRR_HERE

#endif  // __CUDACC__
