// base/include/brrr/bfloat16.h: bfloat16 on the CPU, bit for bit as CUDA's __nv_bfloat16.
// Chapter 15 (flash attention on tensor cores) uses it in the emulator; mixed precision (the
// BFloat16 dtype) builds on it. Standalone: only the standard library, so any file may use it.
// Read next: kernels/cuda/simt.h (where the emulator spells __nv_bfloat16 with it).
//
// bfloat16 is the upper half of a float32: 1 sign bit, the same 8 exponent bits, 7 mantissa
// bits. So the range is float32's (no overflow to worry about in a cast) and the precision is
// 2^-8 relative, about 2.4 significant digits. To widen, put the 16 bits on top of 16 zero
// bits: exact. To narrow, round the low 16 bits away to the nearest value, ties to the even
// one (the last kept bit 0), as the GPU's cvt.rn.bf16.f32 and __float2bfloat16_rn do:
//
//   bits of x:      s eeeeeeee mmmmmmm | r ttttttttttttttt     (kept | rounded away)
//   round up when   r = 1 and (t != 0 or the last kept m bit is 1)
//
// which is "add 0x7FFF plus the last kept bit, then drop the low 16 bits"; a carry out of the
// mantissa moves into the exponent, which is what rounding up should do (and the largest
// finite floats round up to infinity). A NaN would lose its payload, and a NaN whose payload
// sits only in the low bits would become infinity, so NaN is handled first: it becomes the
// canonical NaN 0x7FFF, as CUDA does. Infinities and zeros (with their sign) pass through.
//
// nvcc reads this header as C++17 (the CUDA files store bf16 tensors' elements as brrr::bf16,
// kernels/cuda/elementwise.cu), where std::bit_cast is missing: bit_cast below is the
// compilers' builtin there, constexpr as well.
#pragma once
#include <bit>
#include <cstdint>

namespace brrr {

namespace bf16_detail {
template <class To, class From>
constexpr To bit_cast(const From& from) {
#if defined(__cpp_lib_bit_cast)
  return std::bit_cast<To>(from);
#else
  return __builtin_bit_cast(To, from);
#endif
}
}  // namespace bf16_detail

struct bf16 {
  std::uint16_t bits = 0;

  constexpr bf16() = default;
  // Rounds to nearest, ties to even (the only rounding brrr uses, as __float2bfloat16_rn).
  explicit constexpr bf16(float x) : bits(round_bits(x)) {}
  // Exact.
  explicit constexpr operator float() const { return bf16_detail::bit_cast<float>(std::uint32_t{bits} << 16); }

  static constexpr bf16 from_bits(std::uint16_t bits) {
    bf16 value;
    value.bits = bits;
    return value;
  }
  static constexpr std::uint16_t round_bits(float x) {
    const std::uint32_t u = bf16_detail::bit_cast<std::uint32_t>(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;  // NaN: the canonical one
    const std::uint32_t last_kept = (u >> 16) & 1u;
    return static_cast<std::uint16_t>((u + 0x7FFFu + last_kept) >> 16);
  }
};

// Two bfloat16 in one 32-bit word, `x` in the low half: the operand format of mma.sync and of
// CUDA's __nv_bfloat162 (a pair loaded or stored as one 4-byte access).
struct alignas(4) bf162 {
  bf16 x, y;
};

inline constexpr float to_float(bf16 value) { return static_cast<float>(value); }
inline constexpr bf16 to_bf16(float x) { return bf16(x); }
// `value` rounded to bfloat16 and widened again: what a float keeps after a trip through bf16.
inline constexpr float round_to_bf16(float x) { return to_float(bf16(x)); }

// Packing, as mma.sync's registers hold operands: lo in bits 0..15, hi in bits 16..31.
inline constexpr std::uint32_t pack_bf16(float lo, float hi) {
  return std::uint32_t{bf16::round_bits(lo)} | (std::uint32_t{bf16::round_bits(hi)} << 16);
}
inline constexpr float low_bf16(std::uint32_t word) { return bf16_detail::bit_cast<float>(word << 16); }
inline constexpr float high_bf16(std::uint32_t word) { return bf16_detail::bit_cast<float>(word & 0xFFFF0000u); }

}  // namespace brrr
