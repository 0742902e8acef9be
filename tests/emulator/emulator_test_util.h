// tests/emulator/emulator_test_util.h: what the emulator's tests share (chapter 10): the
// message of the error a call throws, to match against what the emulator should report.
#pragma once
#include <string>

#include "brrr/error.h"

namespace brrr::test {

// The message of the brrr::Error that f throws ("" if it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const brrr::Error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace brrr::test
