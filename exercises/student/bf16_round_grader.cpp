// exercises/student/bf16_round_grader.cpp: the grader of ex18.1 (chapter 18), rounding float32 to
// bfloat16, bit by bit, then inside matmul:bf16. Read before: the stub beside it, then
// exercises/grading.h. Read next: docs/teaching.md (how to add an exercise).
#include <bit>
#include <cmath>
#include <iomanip>
#include <random>
#include <sstream>

#include "exercises/grading.h"
#include "exercises/student/student.h"
#if BRRR_EXERCISE_SOLUTIONS
#include "exercises/solutions/solutions.h"
#endif

namespace brrr::exercises {

namespace {
std::string hex_bits(std::uint32_t bits, int digits) {
  std::ostringstream m;
  m << "0x" << std::hex << std::uppercase << std::setw(digits) << std::setfill('0') << bits;
  return m.str();
}

bool is_bf16_nan(std::uint16_t bits) { return (bits & 0x7FFFu) > 0x7F80u; }

// Every high half (all 65,536: every exponent, both signs, infinities, NaNs, subnormals)
// with the low halves where rounding decides: exact, just above, just below a half, a tie,
// just above a tie, the most; and two more drawn at random. brrr::bf16 (base/include/brrr/
// bfloat16.h, checked against CUDA's own conversion) is the answer; a NaN may be any NaN.
void check_bf16_bits(Bf16RoundFn rounding) {
  std::mt19937 gen(13);
  for (std::uint32_t high = 0; high <= 0xFFFFu; ++high) {
    const std::uint32_t lows[] = {0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF,
                                  std::uint32_t(gen() & 0xFFFFu), std::uint32_t(gen() & 0xFFFFu)};
    for (const std::uint32_t low : lows) {
      const std::uint32_t bits = high << 16 | low;
      const float x = std::bit_cast<float>(bits);
      const std::uint16_t got = rounding(x), want = bf16::round_bits(x);
      if (std::isnan(x) ? is_bf16_nan(got) : got == want) continue;
      std::ostringstream m;
      m << "float_to_bf16(" << x << " = " << hex_bits(bits, 8) << ") gives " << hex_bits(got, 4) << " ("
        << to_float(bf16::from_bits(got)) << "), ";
      if (std::isnan(x)) {
        m << "not a NaN: a NaN must stay a NaN, even one whose payload is only in the low 16 bits";
      } else {
        m << "the nearest bfloat16 is " << hex_bits(want, 4) << " (" << to_float(bf16::from_bits(want)) << ")";
        if (low == 0x8000) m << ": x is exactly halfway, and a tie goes to the value whose last bit is 0";
        else if (got + 1 == want) m << ": the low half " << hex_bits(low, 4) << " is over halfway, so round up";
        else if (got == want + 1) m << ": the low half " << hex_bits(low, 4) << " is under halfway, so round down";
      }
      fail(m.str());
    }
  }
}

// Under autocast, ops::matmul with `variant` of matmul:bf16 (matmul's bf16 products) against float64 sums of the
// bf16-rounded operands (a batch of 3, ragged sizes, b transposed).
void check_matmul_bf16(const std::string& variant) {
  Generator gen(13);
  const Tensor a = randn({3, 37, 53}, gen), b = randn({29, 53}, gen);
  Tensor got;
  with_kernel_variant("matmul:bf16", variant, [&] {
    Autocast bf16_scope(kBFloat16);
    got = ops::matmul(a, b.transpose(0, 1));
  });
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>(), out = got.to_vector<float>();
  for (std::int64_t i = 0; i < 3 * 37; ++i)
    for (std::int64_t j = 0; j < 29; ++j) {
      double want = 0, scale = 0;
      for (std::int64_t k = 0; k < 53; ++k) {
        const double p = double(round_to_bf16(av[i * 53 + k])) * round_to_bf16(bv[j * 53 + k]);
        want += p, scale += std::abs(p);
      }
      const double g = out[i * 29 + j];
      if (!(std::abs(g - want) <= 1e-5 * std::max(1.0, scale)))
        fail("under Autocast(kBFloat16), matmul (3, 37, 53) @ (53, 29) with matmul:bf16 variant \"", variant,
             "\": out[", i / 37, "][", i % 37, "][", j, "] is ", g, ", float64 sums of the bf16 operands give ", want);
    }
}

Result check_bf16_round(Bf16RoundFn rounding, const std::string& variant) {
  check_bf16_bits(rounding);
  std::string message = "all 65,536 high halves x 8 low halves (ties, NaNs, infinities, subnormals) round as "
                        "CUDA's __float2bfloat16_rn";
  if (!variant.empty()) {
    check_matmul_bf16(variant);
    message += "; matmul:bf16 variant \"" + variant + "\" under autocast agrees with float64 sums";
  }
  return result(Status::Passing, message);
}
}  // namespace

Result grade_bf16_round_variant(const std::string& variant) {
#if BRRR_EXERCISE_SOLUTIONS
  if (variant == "solution") return check_bf16_round(&solution::float_to_bf16, variant);
#endif
  return check_bf16_round(&student::float_to_bf16, variant);
}

Result grade_bf16_round(Bf16RoundFn rounding) {
  return guarded("ex18.1", [&] { return check_bf16_round(rounding, ""); });
}

}  // namespace brrr::exercises
