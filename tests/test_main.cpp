// tests/test_main.cpp: doctest's main for every brrr test program, and test::skip (skip.h).
//
// A test that cannot run here (no tiktoken, no GPU, no AVX-512) calls test::skip(reason): it
// prints "SKIPPED: reason", and when the run has no failure the program exits with kSkipExit
// (77), which every suite's ctest entry reports as Skipped (SKIP_RETURN_CODE, tests/CMakeLists.txt),
// never as Passed. A failure in the same run wins: the exit status is doctest's.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "tests/skip.h"

namespace brrr::test {
namespace {
int skipped = 0;
}

void skip(const std::string& reason) {
  std::printf("SKIPPED: %s\n", reason.c_str());
  std::fflush(stdout);
  ++skipped;
}

}  // namespace brrr::test

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit() || status != 0) return status;
  return brrr::test::skipped > 0 ? brrr::test::kSkipExit : 0;
}
