// exercises/student/student.h: the functions the course's graded exercises ask you to write.
// The course meets them from chapter 03 on (each chapter ends with its exercise).
// Read first: docs/teaching.md (the list of exercises and how they are graded). Each exercise
// has its own file in exercises/student/ whose opening comment gives the requirements and a
// plan; `build/brrr exercises` shows where you stand, and `ctest -L ex03.1` (or
// `brrr exercises check ex03.1`) grades one.
//
// Until you write it, an exercise's function calls not_written(), which throws
//   exercise ex03.1 (div_backward): not written yet: fill in exercises/student/div_backward.cpp ...
// so nothing that uses it runs on silently with a missing piece. The reference solutions
// (exercises/solutions, the teacher's copy) define the same functions in namespace
// brrr::solution.
#pragma once
#include <bit>
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

// --- ex03.1, chapter 03: the backward of div (div_backward.cpp) ------------------------------
// out = a / b with broadcasting; returns {grad of a, grad of b}, each of its input's shape
// (an undefined Tensor where need_a / need_b is false).
autograd::TensorList div_backward(const Tensor& grad_output, const Tensor& a, const Tensor& b, bool need_a,
                                  bool need_b);
// ops::div with div_backward as its backward: what the grader checks by finite differences.
Tensor div(const Tensor& a, const Tensor& b);

// --- ex04.1, chapter 04: a cache-tiled CPU matmul (matmul_tiled.cpp) -------------------------
// The matmul_fn signature of kernels/signatures.h; registered as matmul variant "student".
template <class T>
void matmul_tiled(T* out, const T* a, const T* b, const kernels::MatmulShape& shape, kernels::Stream stream);

// --- ex06.1, chapter 06: one BPE merge step (bpe_merge.cpp) ----------------------------------
// Token ids are uint32; kNoPair is brrr::tokenizer::kNoToken (0xFFFFFFFF).
inline constexpr std::uint32_t kNoPair = 0xFFFFFFFFu;
// The most frequent adjacent pair over all words, each pair counted counts[w] times per
// occurrence in words[w]; ties go to the smaller (left, right). {kNoPair, kNoPair} when no
// word has two tokens.
std::pair<std::uint32_t, std::uint32_t> most_frequent_pair(const std::vector<std::vector<std::uint32_t>>& words,
                                                           const std::vector<std::uint64_t>& counts);
// Every (a, b) in word replaced by id, left to right: "a a a" with (a, a) gives "aa a".
void merge_pair(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id);


// --- ex09.1, chapter 09: im2col (im2col.cpp) ---------------------------------------------------
// col (C_in kH kW, H_out W_out) from one image x (C_in, H, W): row (ci, kh, kw), column
// (oh, ow) holds x[ci, oh stride_h - pad_h + kh dil_h, ow stride_w - pad_w + kw dil_w], or 0
// outside the image. Only s's sizes and options are read (s.N and s.C_out are not).
template <class T>
void im2col(T* col, const T* x, const kernels::ConvShape& s);

// A conv2d_forward kernel built on an im2col (given, not an exercise): per image, col, then
// one GEMM per group with the registry's matmul, out (C_out, H_out W_out) = weight @ col, then
// the bias. The student's im2col makes conv2d_forward variant "student" (register.cpp).
template <class T>
using Im2colFn = void (*)(T* col, const T* x, const kernels::ConvShape& s);
template <class T, Im2colFn<T> im2col_of>
void conv2d_from_im2col(T* out, const T* x, const T* weight, const T* bias, const kernels::ConvShape& s,
                        kernels::Stream stream) {
  const std::int64_t P = s.H_out * s.W_out, G = s.groups, cout_g = s.C_out / G, kg = s.C_in / G * s.kH * s.kW;
  std::vector<T> col(static_cast<std::size_t>(s.C_in * s.kH * s.kW * P));
  static kernels::Kernel<kernels::matmul_fn<T>> gemm(kernels::op::matmul<T>);
  const kernels::MatmulShape m = kernels::MatmulShape::grouped(G, cout_g, P, kg, false, false, false);
  for (std::int64_t n = 0; n < s.N; ++n) {
    im2col_of(col.data(), x + n * s.C_in * s.H * s.W, s);
    T* o = out + n * s.C_out * P;
    gemm(DeviceType::CPU)(o, weight, col.data(), m, stream);
    if (bias)
      for (std::int64_t c = 0; c < s.C_out; ++c)
        for (std::int64_t p = 0; p < P; ++p) o[c * P + p] += bias[c];
  }
}

// --- ex18.1, chapter 18: rounding float32 to bfloat16 (bf16_round.cpp) -------------------------
// The 16 bits of the bfloat16 nearest to x, ties to even; a NaN stays a NaN.
std::uint16_t float_to_bf16(float x);

// A matmul:bf16 kernel (matmul's bf16 products) built on a rounding function (given, not an exercise): a and b are
// rounded to bfloat16 (and widened back, exactly) into copies, then multiplied by the
// registry's float32 matmul: products of bf16 values are exact in float32, sums are float32,
// which is matmul:bf16's contract (kernels/signatures.h). The student's rounding makes
// matmul:bf16 variant "student" (register.cpp).
using Bf16RoundFn = std::uint16_t (*)(float x);
template <Bf16RoundFn rounding>
void matmul_bf16_rounding(float* out, const float* a, const float* b, const kernels::MatmulShape& s,
                          kernels::Stream stream) {
  // The floats each operand spans: one matrix, or one per batch entry when its stride is not 0.
  const auto span = [&](std::int64_t stride, std::int64_t matrix) {
    return static_cast<std::size_t>(stride == 0 ? matrix : (s.batch - 1) * stride + matrix);
  };
  const auto rounded = [](const float* x, std::size_t n) {
    std::vector<float> r(n);
    for (std::size_t i = 0; i < n; ++i) r[i] = std::bit_cast<float>(std::uint32_t{rounding(x[i])} << 16);
    return r;
  };
  if (s.batch == 0 || s.M == 0 || s.N == 0) return;
  const std::vector<float> ra = rounded(a, span(s.stride_a, s.M * s.K)), rb = rounded(b, span(s.stride_b, s.K * s.N));
  static kernels::Kernel<kernels::matmul_fn<float>> gemm(kernels::op::matmul<float>);
  gemm(DeviceType::CPU)(out, ra.data(), rb.data(), s, stream);
}

}  // namespace brrr::student
