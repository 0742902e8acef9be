// apps/brrr/lab_sizes.h: the sizes of `brrr kernel-lab OP --size TEXT`, read from what a user
// types into the numbers the kernel lab takes (lab::Options::size). Chapter 11 (the roofline
// and the kernel lab). Read before: lab/kernel_lab.h (each case names its sizes,
// Case::dim_names). Read next: cli_kernel_lab.cpp, which calls it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brrr::cli {

// The sizes `text` gives an op whose sizes are named `dim_names` (layernorm_forward: N, C):
//   "1024x768" or "1024,768"  every size, in the order of dim_names;
//   "4096"                    one number for every size;
//   "C=1024" or "c=2^10,N=3"  sizes by name (any case), the others from `defaults`.
// Each size is a positive integer or a power written 2^k. Throws brrr::Error naming `op` and
// what is wrong: "kernel-lab layernorm_forward takes 2 sizes (N, C), not '1x2x3'".
std::vector<std::int64_t> parse_lab_size(const std::string& op, const std::vector<std::string>& dim_names,
                                         const std::string& text, const std::vector<std::int64_t>& defaults);

}  // namespace brrr::cli
