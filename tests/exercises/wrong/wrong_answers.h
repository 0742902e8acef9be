// tests/exercises/wrong/wrong_answers.h: complete but wrong answers to the course's exercises, one
// planted mistake each, the kind a student makes (docs/teaching.md lists the exercises).
// test_wrong_answers.cpp grades them and checks that each grader says no, and says where.
//
// The CPU answers are functions (ex03.1, ex06.1) or a matmul variant (ex04.1); the CUDA ones
// (wrong_kernels.cu, ex12.1-ex16.2) register as variants of their ops, named "wrong_<mistake>",
// on the CUDA device only while these tests run.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "brrr/tensor.h"

namespace brrr::wrong {

// ex03.1: div whose backward forgets the broadcast reduction (no sum_to): b's gradient keeps
// grad_output's shape.
Tensor div_without_sum_to(const Tensor& a, const Tensor& b);

// ex06.1: ties go to the larger pair (>= where > belongs).
std::pair<std::uint32_t, std::uint32_t> most_frequent_pair_larger_tie(
    const std::vector<std::vector<std::uint32_t>>& words, const std::vector<std::uint64_t>& counts);
// ex06.1: merges overlapping pairs: "a a a" with (a, a) gives "aa aa" (the second a used twice).
void merge_pair_overlapping(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id);

// ex18.1: three roundings of float32 to bfloat16 that each miss one rule: dropping the low half
// (truncation), ties rounded up (away from zero) instead of to even, and the round-up trick
// applied to NaNs too (0x7F800001 becomes infinity).
std::uint16_t bf16_truncated(float x);
std::uint16_t bf16_ties_away(float x);
std::uint16_t bf16_nan_unguarded(float x);

// ex04.1: registers matmul variant "wrong_tile" on the CPU (float32, float64): a tiled matmul
// whose edge tiles stop one column short; ex09.1: conv2d_forward variant "wrong_stride", an
// im2col that uses stride_h along W too. ex12.1-ex16.2: the CUDA variants of wrong_kernels.cu.
// Idempotent; call before grading.
void install_wrong_answers();

}  // namespace brrr::wrong
