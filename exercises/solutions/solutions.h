// exercises/solutions/solutions.h: the reference solutions of the exercises, the same
// functions as exercises/student/student.h declares, in namespace brrr::solution.
// The teacher's copy: a class's handout leaves this folder out (docs/teaching.md), and the
// build then has no variant "solution". CI grades these to prove every exercise can pass.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "brrr/autograd.h"
#include "kernels/signatures.h"

namespace brrr::solution {

// ex03.1 (chapter 03)
autograd::TensorList div_backward(const Tensor& grad_output, const Tensor& a, const Tensor& b, bool need_a,
                                  bool need_b);
Tensor div(const Tensor& a, const Tensor& b);

// ex04.1 (chapter 04), registered as matmul variant "solution"
template <class T>
void matmul_tiled(T* out, const T* a, const T* b, const kernels::MatmulShape& shape, kernels::Stream stream);

// ex06.1 (chapter 06)
std::pair<std::uint32_t, std::uint32_t> most_frequent_pair(const std::vector<std::vector<std::uint32_t>>& words,
                                                           const std::vector<std::uint64_t>& counts);
void merge_pair(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id);

// ex09.1 (chapter 09), inside conv2d_forward variant "solution"
template <class T>
void im2col(T* col, const T* x, const kernels::ConvShape& s);

// ex18.1 (chapter 18), inside matmul:bf16 variant "solution"
std::uint16_t float_to_bf16(float x);

}  // namespace brrr::solution
