// tests/skip.h: how a test says that it could not run here. Every test program links
// tests/test_main.cpp, which defines skip() and turns it into ctest's "Skipped".
//
//   if (!tiktoken_available()) return test::skip("python3 cannot import tiktoken");
//
// Never return early with only a MESSAGE: ctest would report the test as Passed though it
// checked nothing. scripts/test.sh fails when a test that CI must run was skipped.
#pragma once
#include <string>

namespace brrr::test {

// The exit status of a run that skipped a test and failed none (automake's convention; every
// suite sets SKIP_RETURN_CODE to it).
inline constexpr int kSkipExit = 77;

// Prints "SKIPPED: <reason>" and marks this run as skipped.
void skip(const std::string& reason);

}  // namespace brrr::test
