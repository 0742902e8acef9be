// lab/conformance.cpp: the conformance set's cases and inputs, and `brrr conformance`
// (conformance.h). Chapter 21 (Hopper). Read before: lab/conformance.h,
// kernels/cuda/conformance.cu. Read next: tests/emulator/test_conformance.cpp.
//
// The inputs are fixed (a hash of the case and the word, not a seed that could change), and
// chosen so that what the emulator might get wrong shows in the bits:
//   - layouts: every value distinct where it can be (ldmatrix's 16-bit values are their own
//     indices, TMA's floats their coordinates), so a value in the wrong place is seen;
//   - rounding: mma and wgmma sums of products spread over 2^-8 .. 2^8 and accumulators with
//     full 24-bit mantissas, so the float32 rounding of each sum, and its order, shows in the
//     last bits (the emulator cuts toward zero, as the H100 did; simt_tensor_cores.cpp);
//   - small-integer sums beside them, exact in any order, so a layout error is not mistaken
//     for a rounding one;
//   - edges: cp.async's zero fill, TMA boxes that cross the tensor's edges on every side.
#include "lab/conformance.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "brrr/bfloat16.h"
#include "brrr/error.h"
#include "kernels/cuda/runtime.h"
#include "lab/device.h"

namespace brrr::lab {

namespace {

using kernels::ConformanceCase;
using K = kernels::ConformanceKind;

// name, kind, count, trans, bytes, src_bytes, n, swizzle, a_registers, b_mn_major, x, y, rounding, what.
// wgmma's swizzle is simt::Swizzle's value (0 none, 1 128 B, 2 64 B, 3 32 B); TMA's is
// simt::TensorMapSwizzle's (0 none, 1 32 B, 2 64 B, 3 128 B), as the two encodings are.
const std::vector<ConformanceCase> kCases = {
    {"mma.m16n8k16.bf16 layout", K::kMma, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "small integers: every sum exact"},
    {"mma.m16n8k16.bf16 rounding", K::kMma, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, "sums that round in float32"},
    {"ldmatrix.x1", K::kLdmatrix, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "16-bit values, each its own index"},
    {"ldmatrix.x2", K::kLdmatrix, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "16-bit values, each its own index"},
    {"ldmatrix.x4", K::kLdmatrix, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "16-bit values, each its own index"},
    {"ldmatrix.x1.trans", K::kLdmatrix, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, "16-bit values, each its own index"},
    {"ldmatrix.x2.trans", K::kLdmatrix, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, "16-bit values, each its own index"},
    {"ldmatrix.x4.trans", K::kLdmatrix, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, "16-bit values, each its own index"},
    {"cp.async 4", K::kCpAsync, 0, 0, 4, 4, 0, 0, 0, 0, 0, 0, 0, "a whole copy"},
    {"cp.async 8", K::kCpAsync, 0, 0, 8, 8, 0, 0, 0, 0, 0, 0, 0, "a whole copy"},
    {"cp.async 16", K::kCpAsync, 0, 0, 16, 16, 0, 0, 0, 0, 0, 0, 0, "a whole copy"},
    {"cp.async 16, 6 source bytes", K::kCpAsync, 0, 0, 16, 6, 0, 0, 0, 0, 0, 0, 0, "the zero fill"},
    {"cp.async 8, 0 source bytes", K::kCpAsync, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, "all zero fill"},
    {"wgmma n16 A, B K-major, no swizzle", K::kWgmma, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, "core matrices"},
    {"wgmma n16 A, B K-major, 32 B swizzle", K::kWgmma, 0, 0, 0, 0, 16, 3, 0, 0, 0, 0, 0, "the 32-byte swizzle"},
    {"wgmma n16 A, B K-major, 64 B swizzle", K::kWgmma, 0, 0, 0, 0, 16, 2, 0, 0, 0, 0, 0, "the 64-byte swizzle"},
    {"wgmma n16 A, B K-major, 128 B swizzle", K::kWgmma, 0, 0, 0, 0, 16, 1, 0, 0, 0, 0, 0, "the 128-byte swizzle"},
    {"wgmma n16 B MN-major, no swizzle", K::kWgmma, 0, 0, 0, 0, 16, 0, 0, 1, 0, 0, 0, "B's transposed core matrices"},
    {"wgmma n16 B MN-major, 32 B swizzle", K::kWgmma, 0, 0, 0, 0, 16, 3, 0, 1, 0, 0, 0, "B's MN-major atoms"},
    {"wgmma n16 B MN-major, 64 B swizzle", K::kWgmma, 0, 0, 0, 0, 16, 2, 0, 1, 0, 0, 0, "B's MN-major atoms"},
    {"wgmma n16 B MN-major, 128 B swizzle", K::kWgmma, 0, 0, 0, 0, 16, 1, 0, 1, 0, 0, 0, "B's MN-major atoms"},
    {"wgmma n16 A from registers, no swizzle", K::kWgmma, 0, 0, 0, 0, 16, 0, 1, 0, 0, 0, 0, "A's register fragment"},
    {"wgmma n16 A from registers, 128 B swizzle", K::kWgmma, 0, 0, 0, 0, 16, 1, 1, 0, 0, 0, 0, "A's register fragment"},
    {"wgmma n16 A from registers, B MN-major 64 B", K::kWgmma, 0, 0, 0, 0, 16, 2, 1, 1, 0, 0, 0, "both at once"},
    {"wgmma n8 rounding, 128 B swizzle", K::kWgmma, 0, 0, 0, 0, 8, 1, 0, 0, 0, 0, 1, "sums that round in float32"},
    {"TMA load, no swizzle, past the right and bottom", K::kTmaLoad, 0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 0, "zeros past the edges"},
    {"TMA load, no swizzle, before the left and top", K::kTmaLoad, 0, 0, 0, 0, 0, 0, 0, 0, -4, -3, 0, "negative coordinates"},
    {"TMA load, 32 B swizzle", K::kTmaLoad, 0, 0, 0, 0, 0, 1, 0, 0, 30, 14, 0, "the 32-byte swizzle, edges"},
    {"TMA load, 64 B swizzle", K::kTmaLoad, 0, 0, 0, 0, 0, 2, 0, 0, 24, 15, 0, "the 64-byte swizzle, edges"},
    {"TMA load, 128 B swizzle", K::kTmaLoad, 0, 0, 0, 0, 0, 3, 0, 0, 8, 16, 0, "the 128-byte swizzle, edges"},
    {"TMA store, past the right and bottom", K::kTmaStore, 0, 0, 0, 0, 0, 0, 0, 0, 20, 15, 0, "nothing written past the edges"},
    {"TMA store, before the left and top", K::kTmaStore, 0, 0, 0, 0, 0, 0, 0, 0, -5, -2, 0, "negative coordinates"},
    {"mbarrier phases, and expect_tx", K::kMbarrier, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "parities 0, 1, 0, 1, 0"},
};

// A fixed word for (case, index): splitmix32's finalizer over the two.
std::uint32_t mix(std::uint32_t a, std::uint32_t b) {
  std::uint32_t x = a * 0x9E3779B9u ^ (b + 0x7F4A7C15u);
  x = (x ^ (x >> 16)) * 0x85EBCA6Bu;
  x = (x ^ (x >> 13)) * 0xC2B2AE35u;
  return x ^ (x >> 16);
}
std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
std::uint16_t bf16_bits(float f) { return brrr::bf16(f).bits; }

// A bf16 value: small integers (exact sums), or a full 8-bit mantissa at 2^-8 .. 2^8, signed.
std::uint16_t operand(bool rounding, std::uint32_t h, int small) {
  if (!rounding) return bf16_bits(static_cast<float>(static_cast<int>(h % static_cast<std::uint32_t>(2 * small + 1)) - small));
  const float mantissa = 1.0f + static_cast<float>(h & 0x7F) / 128.0f;
  const int exponent = static_cast<int>(h >> 8 & 15) - 8;
  return bf16_bits(std::ldexp(h >> 12 & 1 ? -mantissa : mantissa, exponent));
}
// An accumulator: a small integer, or a float32 with all 24 bits at 2^-2 .. 2^5.
std::uint32_t accumulator(bool rounding, std::uint32_t h) {
  if (!rounding) return bits_of(static_cast<float>(static_cast<int>(h % 17) - 8));
  const float mantissa = 1.0f + static_cast<float>(h & 0x7FFFFF) / 8388608.0f;
  return bits_of(std::ldexp(h >> 23 & 1 ? -mantissa : mantissa, static_cast<int>(h >> 24 & 7) - 2));
}

// Two 16-bit values to a word, the first in the low half.
void put16(std::vector<std::uint32_t>& words, std::size_t at, const std::vector<std::uint16_t>& values) {
  for (std::size_t i = 0; i < values.size(); ++i)
    words[at + i / 2] |= static_cast<std::uint32_t>(values[i]) << (16 * (i % 2));
}

std::vector<std::uint32_t> tma_tensor() {  // the float (row, column) = 100 row + column + 1
  std::vector<std::uint32_t> t(kernels::kTmaColumns * kernels::kTmaRows);
  for (int r = 0; r < kernels::kTmaRows; ++r)
    for (int c = 0; c < kernels::kTmaColumns; ++c)
      t[static_cast<std::size_t>(r * kernels::kTmaColumns + c)] = bits_of(static_cast<float>(100 * r + c + 1));
  return t;
}

}  // namespace

const std::vector<kernels::ConformanceCase>& conformance_cases() { return kCases; }

std::vector<std::uint32_t> conformance_inputs(const ConformanceCase& c) {
  std::vector<std::uint32_t> in(static_cast<std::size_t>(kernels::conformance_in_words(c)), 0);
  const auto id = static_cast<std::uint32_t>(&c - kCases.data() + 1);
  const auto h = [&](std::uint32_t i) { return mix(id, i); };
  std::vector<std::uint16_t> halves;
  switch (c.kind) {
    case K::kMma:
    case K::kWgmma: {
      const int rows = c.kind == K::kMma ? 16 : 64, n = c.kind == K::kMma ? 8 : c.n;
      for (int i = 0; i < rows * 16; ++i) halves.push_back(operand(c.rounding, h(static_cast<std::uint32_t>(i)), 3));
      for (int i = 0; i < 16 * n; ++i) halves.push_back(operand(c.rounding, h(1000u + static_cast<std::uint32_t>(i)), 2));
      put16(in, 0, halves);
      const std::size_t at = halves.size() / 2;
      for (int i = 0; i < rows * n; ++i)
        in[at + static_cast<std::size_t>(i)] = accumulator(c.rounding, h(5000u + static_cast<std::uint32_t>(i)));
      break;
    }
    case K::kLdmatrix:
      for (int i = 0; i < 256; ++i) halves.push_back(static_cast<std::uint16_t>(i + 1));
      put16(in, 0, halves);
      break;
    case K::kCpAsync:
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = h(static_cast<std::uint32_t>(i));
      break;
    case K::kTmaLoad:
    case K::kTmaStore:
    case K::kMbarrier: {
      const std::vector<std::uint32_t> tensor = tma_tensor();
      const std::size_t at = c.kind == K::kMbarrier ? 4 * 64 : 0;
      std::copy(tensor.begin(), tensor.end(), in.begin() + static_cast<std::ptrdiff_t>(at));
      if (c.kind == K::kMbarrier)
        for (std::size_t i = 0; i < 4 * 64; ++i) in[i] = static_cast<std::uint32_t>(1000 * (i / 64) + i % 64);
      if (c.kind == K::kTmaStore)
        for (std::size_t i = tensor.size(); i < in.size(); ++i)
          in[i] = bits_of(-static_cast<float>(i - tensor.size() + 1));  // the box: -1, -2, ...
      break;
    }
  }
  return in;
}

std::vector<std::uint32_t> run_conformance(const ConformanceCase& c, bool gpu) {
  gpu::Runtime* runtime = gpu ? gpu::cuda_runtime() : &gpu::emulator_runtime();
  BRRR_CHECK(runtime != nullptr, "conformance: no GPU here (the cases run on the emulator alone)");
  const std::vector<std::uint32_t> in = conformance_inputs(c);
  std::vector<std::uint32_t> out(static_cast<std::size_t>(kernels::conformance_out_words(c)), 0xFFFFFFFFu);
  auto* in_dev = static_cast<std::uint32_t*>(runtime->malloc(in.size() * 4));
  auto* out_dev = static_cast<std::uint32_t*>(runtime->malloc(out.size() * 4));
  runtime->copy(in_dev, in.data(), in.size() * 4, gpu::CopyKind::HostToDevice);
  runtime->copy(out_dev, out.data(), out.size() * 4, gpu::CopyKind::HostToDevice);
  try {
    if (gpu) {
#ifdef BRRR_WITH_CUDA
      kernels::cuda::run_conformance_case(c, out_dev, in_dev, runtime->stream());
#endif
    } else {
      kernels::emu::run_conformance_case(c, out_dev, in_dev, runtime->stream());
    }
    runtime->synchronize();
    runtime->copy(out.data(), out_dev, out.size() * 4, gpu::CopyKind::DeviceToHost);
  } catch (...) {
    runtime->free(in_dev);
    runtime->free(out_dev);
    throw;
  }
  runtime->free(in_dev);
  runtime->free(out_dev);
  return out;
}

std::uint64_t conformance_hash(const std::vector<std::uint32_t>& words) {
  std::uint64_t hash = 0xCBF29CE484222325ull;
  for (std::uint32_t w : words)
    for (int b = 0; b < 4; ++b) hash = (hash ^ (w >> (8 * b) & 0xFF)) * 0x100000001B3ull;
  return hash;
}

int run_conformance_set(std::FILE* out, bool gpu, const std::string& only, const std::string& bits_file) {
  std::ofstream bits;
  if (!bits_file.empty()) {
    bits.open(bits_file);
    BRRR_CHECK(bits.good(), "conformance: cannot write ", bits_file);
  }
  std::fprintf(out, "conformance: %s\n", gpu ? "each case on the emulator and on the GPU, compared bit for bit"
                                               : "each case on the emulator (no GPU: nothing to compare with)");
  int differ = 0, ran = 0;
  for (const ConformanceCase& c : kCases) {
    if (!only.empty() && std::string(c.name).find(only) == std::string::npos) continue;
    ++ran;
    const std::vector<std::uint32_t> emulated = run_conformance(c, false);
    std::string verdict;
    if (gpu) {
      std::vector<std::uint32_t> chip;
      try {
        chip = run_conformance(c, true);
      } catch (const Error& e) {
        verdict = std::string("  GPU failed: ") + e.what();
      }
      if (!chip.empty()) {
        std::vector<std::size_t> wrong;
        for (std::size_t i = 0; i < chip.size(); ++i)
          if (chip[i] != emulated[i]) wrong.push_back(i);
        verdict = wrong.empty() ? "  same bits on the GPU" : "  DIFFER on the GPU in " + std::to_string(wrong.size()) +
                                                                 " of " + std::to_string(chip.size()) + " words:";
        for (std::size_t k = 0; k < wrong.size() && k < 4; ++k)
          verdict += format(" word %zu emulator 0x%08x GPU 0x%08x;", wrong[k], emulated[wrong[k]], chip[wrong[k]]);
        differ += wrong.empty() ? 0 : 1;
        if (bits.is_open()) {
          bits << "gpu\t" << c.name;
          for (std::uint32_t w : chip) bits << '\t' << format("%08x", w);
          bits << '\n';
        }
      }
    }
    std::fprintf(out, "%-50s %016llx  (%s)%s\n", c.name, static_cast<unsigned long long>(conformance_hash(emulated)),
                 c.what, verdict.c_str());
    if (bits.is_open()) {
      bits << "emulator\t" << c.name;
      for (std::uint32_t w : emulated) bits << '\t' << format("%08x", w);
      bits << '\n';
    }
  }
  std::fprintf(out, "%d cases%s\n", ran,
               gpu ? format(", %d differ between the emulator and the GPU", differ).c_str() : " on the emulator");
  return differ;
}

}  // namespace brrr::lab
