// tests/emulator/test_matmul_cuda.cpp: every CUDA matmul variant of kernels/cuda/matmul/,
// run on the SIMT emulator, against the CPU reference kernels::cpu::matmul_naive: ragged
// sizes, both transposes, batches with a broadcast operand, accumulate, misaligned pointers;
// then end to end through ops::matmul on Device::cuda() with each variant selected.
// Chapter 14 (matmul from naive to tensor cores). Read before: kernels/cuda/matmul/.
//
// The tensor-core variants run here too: 7 through the emulator's WMMA, 9 and 10 through its
// mma.sync, on inputs rounded as they round them where they round. The sizes
// below give variant 8 (warptiling, 16-deep k-tiles in two stages) and 10 (three stages) one
// k-tile, an odd and an even number of them, and a ragged last one; M, N and K are mostly not
// multiples of 16.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "brrr/bfloat16.h"
#include "brrr/brrr.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cuda/matmul/matmul.h"
#include "kernels/cuda/simt.h"

namespace emu = brrr::kernels::emu;
using brrr::kernels::MatmulShape;

namespace {

template <class T>
using MatmulFn = void (*)(T* out, const T* a, const T* b, const MatmulShape& shape, brrr::kernels::Stream);

template <class T>
struct Variant {
  const char* name;
  MatmulFn<T> fn;
};

// How the batch is laid out.
enum class Batch { kOne, kStrided, kBroadcastA, kBroadcastB };
const char* batch_name(Batch b) {
  switch (b) {
    case Batch::kOne: return "one matrix";
    case Batch::kStrided: return "batch 3";
    case Batch::kBroadcastA: return "batch 3, a broadcast";
    case Batch::kBroadcastB: return "batch 3, b broadcast";
  }
  return "?";
}

struct Problem {
  std::int64_t M, N, K;
  bool trans_a, trans_b, accumulate;
  Batch batch;
  bool misaligned;  // every pointer one element past a 16-byte boundary, and odd batch strides
};

// Runs `fn` and the CPU reference on one random problem, each on its own copy of out, and
// checks that they agree inside the output matrices and that neither touched anything else.
// Returns the number of wrong elements.
// `round_input`, when given, rounds every value of a and b first (to bf16 or tf32: what a
// tensor-core variant rounds them to itself), so that the reference sees the kernel's inputs.
template <class T>
int wrong_elements(MatmulFn<T> fn, const Problem& p, std::mt19937& rng, double tolerance,
                   T (*round_input)(T) = nullptr) {
  const std::int64_t batch = p.batch == Batch::kOne ? 1 : 3;
  const std::int64_t offset = p.misaligned ? 1 : 0;
  // Batch strides with a gap between matrices (a multiple of 4 elements unless misaligned),
  // so that a write past the end of a matrix shows.
  const std::int64_t gap = p.misaligned ? 1 : 4;
  MatmulShape s;
  s.batch = batch;
  s.M = p.M;
  s.N = p.N;
  s.K = p.K;
  s.trans_a = p.trans_a;
  s.trans_b = p.trans_b;
  s.accumulate = p.accumulate;
  s.stride_a = batch == 1 || p.batch == Batch::kBroadcastA ? 0 : p.M * p.K + gap;
  s.stride_b = batch == 1 || p.batch == Batch::kBroadcastB ? 0 : p.K * p.N + gap;
  s.stride_out = p.M * p.N + gap;

  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  auto random_buffer = [&](std::int64_t n, bool rounded = false) {
    std::vector<T> v(static_cast<std::size_t>(n));
    for (T& x : v) x = static_cast<T>(uniform(rng));
    if (rounded && round_input)
      for (T& x : v) x = round_input(x);
    return v;
  };
  // a and b end where their last matrix ends (a read past it shows in the sanitizer build); out
  // has one more element, which must stay as it was.
  const std::vector<T> a = random_buffer(offset + (batch - 1) * s.stride_a + p.M * p.K, true);
  const std::vector<T> b = random_buffer(offset + (batch - 1) * s.stride_b + p.K * p.N, true);
  const std::vector<T> out_before = random_buffer(offset + (batch - 1) * s.stride_out + p.M * p.N + 1);
  std::vector<T> got = out_before, want = out_before;
  fn(got.data() + offset, a.data() + offset, b.data() + offset, s, nullptr);
  brrr::kernels::cpu::matmul_naive<T>(want.data() + offset, a.data() + offset, b.data() + offset, s, nullptr);

  int wrong = 0;
  for (std::int64_t e = 0; e < static_cast<std::int64_t>(got.size()); ++e) {
    const std::int64_t rel = e - offset;
    const bool inside = rel >= 0 && rel % s.stride_out < p.M * p.N && rel / s.stride_out < batch;
    const double g = static_cast<double>(got[e]), w = static_cast<double>(want[e]);
    const bool ok = inside ? std::abs(g - w) <= tolerance * (1.0 + std::abs(w)) : got[e] == out_before[e];
    if (!ok && wrong++ < 3) {
      std::ostringstream text;
      text << "element " << e << (inside ? " (inside)" : " (outside the output)") << ": got " << g << ", want " << w;
      MESSAGE(text.str());
    }
  }
  return wrong;
}

std::string describe(const Problem& p) {
  std::ostringstream text;
  text << "(" << p.M << ", " << p.K << ") @ (" << p.K << ", " << p.N << ")" << (p.trans_a ? ", a transposed" : "")
       << (p.trans_b ? ", b transposed" : "") << ", " << batch_name(p.batch) << (p.accumulate ? ", accumulate" : "")
       << (p.misaligned ? ", misaligned" : "");
  return text.str();
}

// The problems every variant runs: for a small size every combination of transposes,
// accumulate, batch layout and alignment; for the others every transpose and accumulate (the
// two largest: every transpose), with the batch layout and alignment taking turns (the
// emulator runs one fiber per thread).
std::vector<Problem> problems() {
  struct Size {
    std::int64_t M, N, K;
  };
  const Size small[] = {{17, 33, 5}};
  const Size large[] = {{1, 1, 1}, {64, 64, 64}, {65, 130, 67}, {3, 7, 130}, {130, 5, 9}, {32, 36, 8}};
  const Batch batches[] = {Batch::kOne, Batch::kStrided, Batch::kBroadcastA, Batch::kBroadcastB};
  std::vector<Problem> list;
  for (const Size& z : small)
    for (int t = 0; t < 4; ++t)
      for (bool accumulate : {false, true})
        for (Batch batch : batches)
          for (bool misaligned : {false, true})
            list.push_back({z.M, z.N, z.K, (t & 1) != 0, (t & 2) != 0, accumulate, batch, misaligned});
  int turn = 0;
  for (const Size& z : large) {
    const bool big = z.M * z.N * z.K > 200000;  // each transpose once, accumulate every other time
    for (int t = 0; t < 4; ++t)
      for (bool accumulate : {false, true}) {
        if (big && accumulate != (t % 2 == 1)) continue;
        list.push_back({z.M, z.N, z.K, (t & 1) != 0, (t & 2) != 0, accumulate, batches[turn % 4], turn % 3 == 2});
        ++turn;
      }
    ++turn;  // so that the next size pairs the transposes with other layouts
  }
  // Empty problems: nothing to do (M or N is 0), or an empty sum (K = 0: out = 0, or unchanged).
  list.push_back({0, 5, 3, false, false, false, Batch::kStrided, false});
  list.push_back({4, 0, 3, true, false, false, Batch::kOne, false});
  list.push_back({6, 5, 0, false, true, false, Batch::kStrided, false});
  list.push_back({6, 5, 0, true, true, true, Batch::kBroadcastB, true});
  return list;
}

// The CPU reference on one thread for a while: between hundreds of small reference calls,
// OpenMP's idle workers would spin on the cores the emulator needs.
struct OneCpuThread {
  int saved = brrr::get_num_threads();
  OneCpuThread() { brrr::set_num_threads(1); }
  ~OneCpuThread() { brrr::set_num_threads(saved); }
};

// One test case per variant (each runs ~110 problems, a few hundred thousand emulated threads).
// `every`: only every n-th problem (for a second mode of a variant already checked on all).
void check_float_variant(const char* name, MatmulFn<float> fn, float (*round_input)(float) = nullptr, int every = 1) {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  const OneCpuThread one_thread;
  std::mt19937 rng(13);
  const std::vector<Problem> list = problems();
  for (std::size_t i = 0; i < list.size(); i += static_cast<std::size_t>(every)) {
    const Problem& p = list[i];
    INFO("variant " << name);
    INFO(describe(p));
    CHECK(wrong_elements<float>(fn, p, rng, 1e-5, round_input) == 0);
  }
}

float bf16_rounded(float x) { return brrr::round_to_bf16(x); }
float tf32_rounded(float x) { return std::bit_cast<float>(float_to_tf32(x)); }  // cvt.rna, simt.h

}  // namespace

TEST_CASE("matmul_cuda: 1 naive matches the CPU reference") { check_float_variant("naive", &emu::matmul_naive<float>); }
TEST_CASE("matmul_cuda: 2 coalesced matches the CPU reference") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_float_variant("coalesced", &emu::matmul_coalesced<float>);
}
TEST_CASE("matmul_cuda: 3 smem matches the CPU reference") { check_float_variant("smem", &emu::matmul_smem<float>); }
TEST_CASE("matmul_cuda: 4 blocking1d matches the CPU reference") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_float_variant("blocking1d", &emu::matmul_blocking1d);
}
TEST_CASE("matmul_cuda: 5 blocking2d matches the CPU reference") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_float_variant("blocking2d", &emu::matmul_blocking2d);
}
TEST_CASE("matmul_cuda: 6 vectorized matches the CPU reference") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_float_variant("vectorized", &emu::matmul_vectorized);
}
TEST_CASE("matmul_cuda: 8 warptiling matches the CPU reference") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  check_float_variant("warptiling", &emu::matmul_warptiling);
}

// Variant 7 (WMMA) splits each input into two tf32 numbers (3xTF32): float32's tolerance on any
// input. With TF32 allowed it multiplies the rounded inputs once: on inputs already tf32, the
// same tolerance (every third problem: the kernel is the same but for the split).
TEST_CASE("matmul_cuda: 7 tensorcore (WMMA, 3xTF32) matches the CPU reference") {
  check_float_variant("tensorcore", &emu::matmul_tensorcore);
}
TEST_CASE("matmul_cuda: 7 tensorcore with TF32 allowed matches the CPU reference on inputs rounded to tf32") {
  const MatmulFn<float> one_product = [](float* out, const float* a, const float* b, const MatmulShape& shape,
                                         brrr::kernels::Stream stream) {
    MatmulShape tf32 = shape;
    tf32.allow_tf32 = true;
    emu::matmul_tensorcore(out, a, b, tf32, stream);
  };
  check_float_variant("tensorcore (allow_tf32)", one_product, tf32_rounded, 3);
}

// The other tensor-core variants round their inputs (bf16: 8 significant bits, tf32: 11); on
// inputs already rounded so, only their float32 sums differ from the reference.
TEST_CASE("matmul_cuda: 9 bf16_mma matches the CPU reference on inputs rounded to bf16") {
  check_float_variant("bf16_mma", &emu::matmul_bf16_mma, bf16_rounded);
}
TEST_CASE("matmul_cuda: 10 tf32_pipelined matches the CPU reference on inputs rounded to tf32") {
  check_float_variant("tf32_pipelined", &emu::matmul_tf32_pipelined, tf32_rounded);
}

TEST_CASE("matmul_cuda: the float64 variants match the CPU reference on the emulator") {
  const brrr::simt::HostMemoryKernels host_memory;  // kernels on std::vectors (simt.h)
  const Variant<double> variants[] = {{"naive", &emu::matmul_naive<double>},
                                      {"coalesced", &emu::matmul_coalesced<double>},
                                      {"smem", &emu::matmul_smem<double>}};
  const Problem list[] = {{17, 33, 5, false, false, false, Batch::kStrided, false},
                          {65, 40, 67, true, false, true, Batch::kBroadcastA, true},
                          {33, 31, 40, false, true, false, Batch::kBroadcastB, false},
                          {20, 9, 35, true, true, true, Batch::kOne, true}};
  const OneCpuThread one_thread;
  std::mt19937 rng(14);
  for (const Variant<double>& variant : variants)
    for (const Problem& p : list) {
      INFO("variant " << variant.name);
      INFO(describe(p));
      CHECK(wrong_elements<double>(variant.fn, p, rng, 1e-12) == 0);
    }
}

// ---------------------------------------------------------------------------------------------
// End to end: tensors on Device::cuda() (the emulator), ops::matmul, the registry

namespace {

brrr::Tensor random_tensor(brrr::Shape shape, std::mt19937& rng, brrr::DType dtype = brrr::kFloat32) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (double& v : values) v = uniform(rng);
  return brrr::from_vector(values, shape, brrr::TensorOptions(dtype));
}

// The largest |x - y| / (1 + |y|) over two tensors of one shape.
double max_relative_error(const brrr::Tensor& x, const brrr::Tensor& y) {
  REQUIRE(x.shape() == y.shape());
  // (Copied to the CPU first: the conversion to double runs there.)
  const std::vector<double> xs = x.to(brrr::kCPU).to(brrr::kFloat64).to_vector<double>();
  const std::vector<double> ys = y.to(brrr::kCPU).to(brrr::kFloat64).to_vector<double>();
  double worst = 0.0;
  for (std::size_t i = 0; i < xs.size(); ++i)
    worst = std::max(worst, std::abs(xs[i] - ys[i]) / (1.0 + std::abs(ys[i])));
  return worst;
}

}  // namespace

TEST_CASE("matmul_cuda: ops::matmul on Device::cuda() with each variant selected matches the CPU") {
  brrr::cuda::use_emulator();
  const brrr::Device gpu = brrr::Device::cuda();
  std::mt19937 rng(15);
  const brrr::Tensor a = random_tensor({3, 17, 29}, rng);  // a batch of 3
  const brrr::Tensor b = random_tensor({29, 40}, rng);     // one matrix, broadcast over the batch
  const brrr::Tensor bt = random_tensor({40, 29}, rng);    // used as bt.t(), a transposed view
  const brrr::Tensor c = random_tensor({3, 29, 6}, rng);   // batch against batch
  const brrr::Tensor at = random_tensor({29, 17}, rng);    // used as at.t()
  const brrr::Tensor a_gpu = a.to(gpu), b_gpu = b.to(gpu), bt_gpu = bt.to(gpu), c_gpu = c.to(gpu),
                     at_gpu = at.to(gpu);
  const brrr::Tensor want_ab = brrr::ops::matmul(a, b), want_abt = brrr::ops::matmul(a, bt.t()),
                     want_ac = brrr::ops::matmul(a, c), want_atb = brrr::ops::matmul(at.t(), bt.t());

  brrr::kernels::reset_selection();
  CHECK(brrr::kernels::selected("matmul", brrr::DeviceType::CUDA, brrr::kFloat32) == "warptiling");
  for (const char* variant : {"naive", "coalesced", "smem", "blocking1d", "blocking2d", "vectorized", "warptiling"}) {
    INFO("variant " << variant);
    brrr::kernels::select("matmul", variant, brrr::DeviceType::CUDA);
    const brrr::Tensor ab = brrr::ops::matmul(a_gpu, b_gpu);
    CHECK(ab.device() == gpu);
    CHECK(max_relative_error(ab, want_ab) < 1e-5);
    CHECK(max_relative_error(brrr::ops::matmul(a_gpu, bt_gpu.t()), want_abt) < 1e-5);
    CHECK(max_relative_error(brrr::ops::matmul(a_gpu, c_gpu), want_ac) < 1e-5);
    CHECK(max_relative_error(brrr::ops::matmul(at_gpu.t(), bt_gpu.t()), want_atb) < 1e-5);
  }
  brrr::kernels::reset_selection();

  // float64 on the device (its default, smem, and the others).
  const brrr::Tensor a64 = a.to(brrr::kFloat64), b64 = bt.to(brrr::kFloat64);
  const brrr::Tensor want64 = brrr::ops::matmul(a64, b64.t());
  for (const char* variant : {"naive", "coalesced", "smem"}) {
    INFO("variant " << variant);
    brrr::kernels::select("matmul", variant, brrr::DeviceType::CUDA);
    CHECK(max_relative_error(brrr::ops::matmul(a64.to(gpu), b64.to(gpu).t()), want64) < 1e-12);
  }
  brrr::kernels::reset_selection();
}
