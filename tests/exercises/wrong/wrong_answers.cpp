// tests/exercises/wrong/wrong_answers.cpp: the CPU wrong answers (ex03.1, ex04.1, ex06.1, ex09.1,
// ex18.1) of wrong_answers.h, and the provider that registers every wrong kernel. Chapters 03,
// 04, 06, 09 and 18.
#include "tests/exercises/wrong/wrong_answers.h"

#include <algorithm>
#include <bit>
#include <map>

#include "brrr/autograd.h"
#include "brrr/ops.h"
#include "kernels/registry.h"
#include "kernels/signatures.h"
#include "exercises/student/student.h"  // conv2d_from_im2col, the given half of ex09.1

namespace brrr::kernels::emu {
void register_wrong_cuda_kernels();  // wrong_kernels.cu, compiled for the emulator
}
#ifdef BRRR_WITH_CUDA
namespace brrr::kernels::cuda {
void register_wrong_cuda_kernels();  // the same, compiled by nvcc
}
#endif

namespace brrr::wrong {

// ---------------------------------------------------------------------------------------------
// ex03.1: right math, no sum_to: where b was broadcast, its gradient has the output's shape.

Tensor div_without_sum_to(const Tensor& a, const Tensor& b) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = ops::div(a, b);
  }
  if (autograd::needs_grad({&a, &b}))
    autograd::record("wrong::div", {a, b}, out,
                     [a_ = autograd::saved(a), b_ = autograd::saved(b), need_a = a.requires_grad(),
                      need_b = b.requires_grad()](const Tensor& g) {
                       Tensor grad_a, grad_b;
                       if (need_a) grad_a = ops::div(g, b_);
                       if (need_b) grad_b = ops::neg(ops::div(ops::mul(g, a_), ops::mul(b_, b_)));
                       return autograd::TensorList{grad_a, grad_b};
                     });
  return out;
}

// ---------------------------------------------------------------------------------------------
// ex04.1: a tiled matmul; the edge tile's width is computed one short, so the last column of
// out is never written (N - j0 - 1 where N - j0 belongs).

template <class T>
void matmul_wrong_tile(T* out, const T* a, const T* b, const kernels::MatmulShape& s, kernels::Stream) {
  constexpr std::int64_t kTile = 32;
  for (std::int64_t batch = 0; batch < s.batch; ++batch) {
    const T* A = a + batch * s.stride_a;
    const T* B = b + batch * s.stride_b;
    T* C = out + batch * s.stride_out;
    for (std::int64_t i0 = 0; i0 < s.M; i0 += kTile)
      for (std::int64_t j0 = 0; j0 < s.N; j0 += kTile) {
        const std::int64_t rows = std::min(kTile, s.M - i0);
        const std::int64_t cols = j0 + kTile < s.N ? kTile : s.N - j0 - 1;  // the slip
        for (std::int64_t i = i0; i < i0 + rows; ++i)
          for (std::int64_t j = j0; j < j0 + cols; ++j) {
            T sum = 0;
            for (std::int64_t k = 0; k < s.K; ++k)
              sum += (s.trans_a ? A[k * s.M + i] : A[i * s.K + k]) * (s.trans_b ? B[j * s.K + k] : B[k * s.N + j]);
            C[i * s.N + j] = s.accumulate ? C[i * s.N + j] + sum : sum;
          }
      }
  }
}

// ---------------------------------------------------------------------------------------------
// ex09.1: an im2col that steps along W by stride_h (the options of H used for both axes): right
// whenever the two strides agree, as in every square case of the kernel lab.

template <class T>
void im2col_one_stride(T* col, const T* x, const kernels::ConvShape& s) {
  const std::int64_t P = s.H_out * s.W_out;
  for (std::int64_t r = 0; r < s.C_in * s.kH * s.kW; ++r) {
    const std::int64_t ci = r / (s.kH * s.kW), kh = r / s.kW % s.kH, kw = r % s.kW;
    for (std::int64_t oh = 0; oh < s.H_out; ++oh)
      for (std::int64_t ow = 0; ow < s.W_out; ++ow) {
        const std::int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dil_h;
        const std::int64_t iw = ow * s.stride_h - s.pad_w + kw * s.dil_w;  // the slip: stride_h
        col[r * P + oh * s.W_out + ow] = ih >= 0 && ih < s.H && iw >= 0 && iw < s.W ? x[(ci * s.H + ih) * s.W + iw] : T(0);
      }
  }
}

// ---------------------------------------------------------------------------------------------
// ex06.1

std::pair<std::uint32_t, std::uint32_t> most_frequent_pair_larger_tie(
    const std::vector<std::vector<std::uint32_t>>& words, const std::vector<std::uint64_t>& counts) {
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint64_t> pair_counts;
  for (std::size_t w = 0; w < words.size(); w++)
    for (std::size_t i = 0; i + 1 < words[w].size(); i++) pair_counts[{words[w][i], words[w][i + 1]}] += counts[w];
  std::pair<std::uint32_t, std::uint32_t> best{0xFFFFFFFFu, 0xFFFFFFFFu};
  std::uint64_t best_count = 0;
  for (const auto& [pair, count] : pair_counts)
    if (count >= best_count) best = pair, best_count = count;  // the slip: a tie replaces the best
  return best;
}

void merge_pair_overlapping(std::vector<std::uint32_t>& word, std::uint32_t a, std::uint32_t b, std::uint32_t id) {
  std::vector<std::uint32_t> out;
  for (std::size_t i = 0; i < word.size(); i++) {
    if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) out.push_back(id);  // the slip: no i++
    else if (i == 0 || !(word[i - 1] == a && word[i] == b)) out.push_back(word[i]);
  }
  word = std::move(out);
}

// ---------------------------------------------------------------------------------------------
// Registration

namespace {
void provide(DeviceType device, bool emulated) {
  if (device == DeviceType::CPU) {
    kernels::add(kernels::op::matmul<float>, DeviceType::CPU, "wrong_tile", &matmul_wrong_tile<float>, -30);
    kernels::add(kernels::op::matmul<double>, DeviceType::CPU, "wrong_tile", &matmul_wrong_tile<double>, -30);
    kernels::add(kernels::op::conv2d_forward<float>, DeviceType::CPU, "wrong_stride",
                 &student::conv2d_from_im2col<float, &im2col_one_stride<float>>, -30);
    kernels::add(kernels::op::conv2d_forward<double>, DeviceType::CPU, "wrong_stride",
                 &student::conv2d_from_im2col<double, &im2col_one_stride<double>>, -30);
  } else if (emulated) {
    kernels::emu::register_wrong_cuda_kernels();
  } else {
#ifdef BRRR_WITH_CUDA
    kernels::cuda::register_wrong_cuda_kernels();
#endif
  }
}
}  // namespace

void install_wrong_answers() { kernels::add_provider(&provide); }

// ex18.1
std::uint16_t bf16_truncated(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<std::uint16_t>(u >> 16);
}

std::uint16_t bf16_ties_away(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FC0;
  return static_cast<std::uint16_t>((u + 0x8000u) >> 16);
}

std::uint16_t bf16_nan_unguarded(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace brrr::wrong
