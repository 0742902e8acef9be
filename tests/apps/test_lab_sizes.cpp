// tests/apps/test_lab_sizes.cpp: `brrr kernel-lab --size` as a user types it (apps/brrr/
// lab_sizes.h): by position, one number for every size, by name with the others kept, powers
// of two, and one-line errors naming what is wrong. Compiled with lab_sizes.cpp alone: the
// parsing needs nothing of the lab but its sizes' names.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "apps/brrr/lab_sizes.h"
#include "brrr/error.h"

using brrr::Error;
using brrr::cli::parse_lab_size;
using Dims = std::vector<std::int64_t>;

TEST_CASE("kernel-lab sizes on the command line") {
  const std::string ln = "layernorm_forward";
  const std::vector<std::string> names = {"N", "C"};
  CHECK(parse_lab_size(ln, names, "1024x768", {1, 1}) == Dims{1024, 768});
  CHECK(parse_lab_size(ln, names, "1024,768", {1, 1}) == Dims{1024, 768});
  CHECK(parse_lab_size(ln, names, "C=1024", {64, 768}) == Dims{64, 1024});
  CHECK(parse_lab_size(ln, names, "c=2^10,N=3", {64, 768}) == Dims{3, 1024});
  CHECK(parse_lab_size("matmul", {"M", "N", "K"}, "256", {}) == Dims{256, 256, 256});
  CHECK_THROWS_WITH_AS(parse_lab_size(ln, names, "1x2x3", {1, 1}),
                       doctest::Contains("kernel-lab layernorm_forward takes 2 sizes (N, C), not '1x2x3'"), Error);
  CHECK_THROWS_WITH_AS(parse_lab_size(ln, names, "K=5", {1, 1}),
                       doctest::Contains("has no size 'K' (sizes: N, C)"), Error);
  CHECK_THROWS_WITH_AS(parse_lab_size(ln, names, "12x", {1, 1}),
                       doctest::Contains("size '' is not a positive integer"), Error);
  CHECK_THROWS_WITH_AS(parse_lab_size(ln, names, "0x5", {1, 1}), doctest::Contains("size '0'"), Error);
  CHECK_THROWS_WITH_AS(parse_lab_size(ln, names, "N=2^x", {1, 1}), doctest::Contains("size '2^x'"), Error);
}
