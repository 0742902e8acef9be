// lab/cases_random.cpp: the kernel lab's cases for the random ops of chapter 01 (tensors and
// storage): uniform, normal and dropout_mask, all drawn from Philox 4x32-10. Read before:
// cases.h and brrr/generator.h. Read next: cases_reduction.cpp.
//
// Counter-based random numbers have an exact answer: element i comes from the block
// philox(seed, counter + i / k). The references take the four words from brrr/generator.h's
// philox4x32 (the generator itself, whose known-answer test is in tests/core) and turn them
// into numbers from the formulas of chapter 01, written again here.
#include <cmath>

#include "brrr/generator.h"
#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

constexpr std::uint64_t kSeed = 20240611, kCounter = 5;  // a counter past 0: the offset must be added
constexpr double kDropout = 0.3;

template <class T>
void call_random(kernels::random_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.dims[0], kSeed, kCounter, a.stream);
}
template <class T>
void call_dropout_mask(kernels::dropout_mask_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.dims[0], static_cast<T>(kDropout), kSeed, kCounter, a.stream);
}

std::uint32_t word(std::uint64_t block, int k) { return philox4x32(kSeed, kCounter + block).w[k]; }

// float32: the top 24 bits of one word over 2^24. float64: 53 bits of two words over 2^53.
void uniform_reference(Problem& p) {
  std::vector<double>& out = p.out("out");
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (p.dtype == kFloat32) {
      out[i] = static_cast<double>(word(i / 4, static_cast<int>(i % 4)) >> 8) / 16777216.0;
    } else {
      const std::uint64_t hi = word(i / 2, static_cast<int>(2 * (i % 2)));
      const std::uint64_t lo = word(i / 2, static_cast<int>(2 * (i % 2) + 1));
      out[i] = static_cast<double>((hi << 21) ^ (lo >> 11)) / 9007199254740992.0;
    }
  }
}

// Box-Muller on the block's two pairs of words: u1 in (0, 1], u2 in [0, 1),
// z = sqrt(-2 log u1) (cos 2 pi u2, sin 2 pi u2).
void normal_reference(Problem& p) {
  std::vector<double>& out = p.out("out");
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int pair = static_cast<int>(i % 4) / 2;
    const double u1 = (word(i / 4, 2 * pair) + 1.0) / 4294967296.0;
    const double u2 = word(i / 4, 2 * pair + 1) / 4294967296.0;
    const double r = std::sqrt(-2.0 * std::log(u1));
    out[i] = i % 2 == 0 ? r * std::cos(2 * M_PI * u2) : r * std::sin(2 * M_PI * u2);
    if (p.dtype == kFloat32) out[i] = static_cast<float>(out[i]);
  }
}

// Inverted dropout: 0 where the element's uniform (24 bits, as above) is below p, else
// 1 / (1 - p), with p and the scale in the dtype under test.
void dropout_mask_reference(Problem& p) {
  std::vector<double>& out = p.out("out");
  const bool f32 = p.dtype == kFloat32;
  const double prob = f32 ? static_cast<float>(kDropout) : kDropout;
  const double scale = f32 ? 1.0f / (1.0f - static_cast<float>(kDropout)) : 1.0 / (1.0 - kDropout);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double u = static_cast<double>(word(i / 4, static_cast<int>(i % 4)) >> 8) / 16777216.0;
    out[i] = u < prob ? 0.0 : scale;
  }
}

Case random_case(Case c) {
  c.chapter = "01";
  c.dim_names = {"n"};
  c.gpu_size = {1 << 26}, c.emulator_size = {1 << 16}, c.cpu_size = {1 << 24};
  c.shapes = {{1}, {3}, {1003}, {4099}};  // a block's four words cut short at the end
  c.bytes = [](const Dims& d) { return 4.0 * d[0]; };  // written once, nothing read
  c.make = [](Problem& p, Random&) { p.output("out", p.dims[0]); };
  return c;
}

}  // namespace

std::vector<Case> random_cases() {
  return {
      random_case({.name = "uniform", .what = "out (n) uniform in [0, 1) from philox(seed, counter + i / 4)",
                   .tolerance = 0, .tolerance64 = 0, .reference = &uniform_reference,
                   .call = call(op::uniform<float>, &call_random<float>, op::uniform<double>, &call_random<double>)}),
      random_case({.name = "normal", .what = "out (n) from N(0, 1), Box-Muller on philox words",
                   .tolerance = 1e-6,  // a GPU's log and cos in double may differ in the last bit
                   .tolerance64 = 1e-12, .reference = &normal_reference,
                   .call = call(op::normal<float>, &call_random<float>, op::normal<double>, &call_random<double>)}),
      random_case({.name = "dropout_mask", .what = "mask (n) = 0 with probability 0.3, else 1 / 0.7",
                   .tolerance = 0, .tolerance64 = 0, .reference = &dropout_mask_reference,
                   .call = call(op::dropout_mask<float>, &call_dropout_mask<float>, op::dropout_mask<double>,
                                &call_dropout_mask<double>)}),
  };
}

}  // namespace brrr::lab
