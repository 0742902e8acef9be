// exercises/student/bf16_round.cpp: exercise ex18.1, rounding a float32 to bfloat16, the one
// conversion mixed precision is built on (chapter 18, mixed precision).
// Read before: docs/chapters/18-mixed-precision.md ("bfloat16", "rounding to nearest even").
//
// What to write: the bits of the bfloat16 nearest to x. With it, the matmul under autocast
// (matmul's bf16 products, matmul:bf16) is registered as variant "student" (exercises/student/register.cpp): your
// rounding makes the bf16 operands, the float32 GEMM multiplies them. So once it works it
// trains the GPT in mixed precision:
//
//   build/brrr exercises check ex18.1
//   BRRR_KERNELS=matmul:bf16=student build/brrr train --preset cpu-tiny --dtype bf16
//
// Requirements
//   - bfloat16 is the top 16 bits of a float32 (sign, 8 exponent bits, 7 mantissa bits). Return
//     the 16 bits of the bfloat16 value nearest to x; when x lies exactly halfway between two,
//     the one whose last bit is 0 (round half to even, as the GPU's __float2bfloat16_rn).
//   - Rounding up may carry into the exponent (that is right: 1.9999999 rounds to 2), and the
//     largest floats round up to infinity.
//   - Infinities and zeros keep their sign. A NaN must stay a NaN (any NaN bits will do): look
//     at what your rounding does to 0x7F800001, a NaN whose payload is only in the low bits.
//   - Subnormal floats round like any other (the same bit arithmetic works).
//
// A plan
//   1. std::bit_cast<std::uint32_t>(x) gives the bits. The low 16 are what rounds away; the
//      highest of them is the "half" bit.
//   2. Decide up or down from the low 16 bits and the last kept bit; an integer addition
//      before the shift can do it all at once (why does the carry do the right thing?).
//   3. Treat NaN first.
//   4. `brrr exercises check ex18.1` names the first input you get wrong, with both answers.
#include "exercises/student/student.h"

namespace brrr::student {

std::uint16_t float_to_bf16(float x) {
  // TODO(ex18.1): the bits of the bfloat16 nearest to x, ties to even, NaN kept a NaN.
  (void)x;
  not_written("ex18.1", "bf16_round");
}

}  // namespace brrr::student
