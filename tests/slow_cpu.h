// tests/slow_cpu.h: test sizes for a CPU far slower than CI's, asked for with BRRR_SLOW_CPU=1.
//
// brrr on arm64 is checked on an x86-64 machine under qemu-user (scripts/check_arm64.sh), which
// emulates every instruction in software: tests sized for a native CPU ran past ctest's 600 s
// there. With BRRR_SLOW_CPU=1 the heaviest cases run the same assertions at smaller sizes; no
// check is left out. Unset, or 0, keeps CI's sizes.
//
//   const std::int64_t n = test::sized(1000, 200);  // 1000 natively, 200 with BRRR_SLOW_CPU=1
#pragma once
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace brrr::test {

// Whether BRRR_SLOW_CPU=1. Any value other than unset, "", "0" or "1" is an error: a typo must
// not quietly run the full sizes the run asked to avoid.
inline bool slow_cpu() {
  const char* value = std::getenv("BRRR_SLOW_CPU");
  const std::string v = value ? value : "";
  if (v.empty() || v == "0") return false;
  if (v == "1") return true;
  throw std::invalid_argument("BRRR_SLOW_CPU must be 0 or 1, not '" + v + "'");
}

// `native` on CI's CPU, `slow` where BRRR_SLOW_CPU=1.
template <class T>
T sized(T native, T slow) {
  return slow_cpu() ? slow : native;
}

}  // namespace brrr::test
