// exercises/student/student.h: the functions the course's graded exercises ask you to write.
// The course meets them from chapter 03 on (each chapter ends with its exercise).
// Read first: docs/teaching.md (the list of exercises and how they are graded). Each exercise
// has its own file in exercises/student/ whose opening comment gives the requirements and a
// plan; `build/brrr exercises` shows where you stand, and `ctest -L ex01` (or
// `brrr exercises check ex01`) grades one.
//
// Until you write it, an exercise's function calls not_written(), which throws
//   exercise ex01 (div_backward): not written yet: fill in exercises/student/div_backward.cpp ...
// so nothing that uses it runs on silently with a missing piece. The reference solutions
// (exercises/solutions, the teacher's copy) define the same functions in namespace
// brrr::solution.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "brrr/autograd.h"
#include "kernels/registry.h"
#include "kernels/signatures.h"

namespace brrr::student {

// The words every stub's error contains; the grader reads them as "not started" (and the
// kernel lab passes over such a variant: kernels/registry.h).
inline constexpr const char* kNotWritten = kernels::kNotWrittenYet;

// Throws brrr::Error("exercise ID (NAME): not written yet: ..."), naming the file to fill in.
[[noreturn]] void not_written(const char* id, const char* name);

// --- ex01, chapter 03: the backward of div (div_backward.cpp) ------------------------------
// out = a / b with broadcasting; returns {grad of a, grad of b}, each of its input's shape
// (an undefined Tensor where need_a / need_b is false).
autograd::TensorList div_backward(const Tensor& grad_output, const Tensor& a, const Tensor& b, bool need_a,
                                  bool need_b);
// ops::div with div_backward as its backward: what the grader checks by finite differences.
Tensor div(const Tensor& a, const Tensor& b);

// --- ex02, chapter 04: a cache-tiled CPU matmul (matmul_tiled.cpp) -------------------------
// The matmul_fn signature of kernels/signatures.h; registered as matmul variant "student".
template <class T>
void matmul_tiled(T* out, const T* a, const T* b, const kernels::MatmulShape& shape, kernels::Stream stream);

// --- ex03, chapter 06: one BPE merge step (bpe_merge.cpp) ----------------------------------
// Token ids are uint32; kNoPair is brrr::tokenizer::kNoToken (0xFFFFFFFF).
inline constexpr std::uint32_t kNoPair = 0xFFFFFFFFu;
// The most frequent adjacent pair over all words, each pair counted counts[w] times per
// occurrence in words[w]; ties go to the smaller (left, right). {kNoPair, kNoPair} when no
// word has two tokens.
std::pair<std::uint32_t, std::uint32_t> most_frequent_pair(const std::vector<std::vector<std::uint32_t>>& words,
                                                           const std::vector<std::uint64_t>& counts);
// Every (a, b) in word replaced by id, left to right: "a a a" with (a, a) gives "aa a".
void merge_pair(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id);

}  // namespace brrr::student
