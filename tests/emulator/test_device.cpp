// tests/emulator/test_device.cpp: Device::cuda() backed by the SIMT emulator: copies between
// host and device, the caching allocator's statistics and reuse, out-of-memory errors.
// Chapter 10 (the GPU and the emulator). Read before: brrr/cuda.h, framework/src/cuda.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "kernels/cuda/runtime.h"

using namespace brrr;

namespace {
const Device kCuda = Device::cuda();
// Sanitizer builds allocate exact sizes (rounded to 256 bytes, as cudaMalloc), not size
// classes, so that an overrun leaves the allocation (framework/src/cuda.cpp).
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kExactSizes = true;
#else
constexpr bool kExactSizes = false;
#endif
}  // namespace

TEST_CASE("device: the emulator backs cuda:0 once chosen") {
  cuda::use_emulator();
  CHECK(cuda::is_available());
  CHECK(cuda::is_emulated());
  CHECK(cuda::device_name() == "SIMT emulator (CPU)");
  cuda::synchronize();
  CHECK_THROWS_WITH_AS(zeros({2}, TensorOptions().device(Device::cuda(1))), doctest::Contains("brrr uses one GPU"),
                       Error);
}

TEST_CASE("device: to() copies both ways and keeps values, dtype and shape") {
  cuda::use_emulator();
  const Tensor a = from_vector(std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -1e-3f}, {2, 3});
  const Tensor d = a.to(kCuda);
  CHECK(d.device() == kCuda);
  CHECK(d.shape() == a.shape());
  CHECK(d.dtype() == kFloat32);
  CHECK(d.raw_data() != a.raw_data());
  const Tensor back = d.to(kCPU);
  CHECK(back.device() == kCPU);
  CHECK(back.to_vector<float>() == a.to_vector<float>());
  CHECK(d.to(kCuda).raw_data() == d.raw_data());  // same device: no copy

  const Tensor ids = from_vector(std::vector<std::int64_t>{5, -7, 1LL << 40}, {3});
  CHECK(ids.to(kCuda).to(kCPU).to_vector<std::int64_t>() == ids.to_vector<std::int64_t>());
  // A CPU view goes over contiguous.
  const Tensor t = a.transpose(0, 1);
  CHECK(t.to(kCuda).to(kCPU).to_vector<float>() == t.contiguous().to_vector<float>());
  // item, at and printing read through the host.
  CHECK(d.at<float>({1, 1}) == 7.0f);
  CHECK(d.sum().item<float>() == doctest::Approx(9.749f));
  const std::string printed = [&] {
    std::ostringstream s;
    s << d;
    return s.str();
  }();
  CHECK(printed.find("device='cuda:0'") != std::string::npos);
}

TEST_CASE("device: a device view made contiguous on the device, then copied back") {
  cuda::use_emulator();
  Generator gen(3);
  const Tensor a = randn({5, 7, 3}, gen);
  const Tensor d = a.to(kCuda);
  const Tensor v = d.transpose(0, 2).narrow(1, 2, 4);
  CHECK(!v.is_contiguous());
  CHECK(v.to(kCPU).to_vector<float>() == a.transpose(0, 2).narrow(1, 2, 4).contiguous().to_vector<float>());
}

TEST_CASE("device: gradients flow back through to()") {
  cuda::use_emulator();
  Tensor x = from_vector(std::vector<double>{1, 2, 3}, {3}, TensorOptions().requires_grad(true));
  Tensor y = x.to(kCuda).to(kCPU);
  (y * y).sum().backward();
  CHECK(x.grad().device() == kCPU);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 4, 6});
}

TEST_CASE("device: ops refuse tensors on two devices") {
  cuda::use_emulator();
  const Tensor a = ones({3});
  CHECK_THROWS_WITH_AS(ops::add(a, a.to(kCuda)), doctest::Contains("different devices"), Error);
}

TEST_CASE("device: the caching allocator reuses freed blocks and counts them") {
  cuda::use_emulator();
  cuda::empty_cache();
  const cuda::MemoryStats before = cuda::memory_stats();
  {
    const Tensor t = empty({1000, 1000}, TensorOptions().device(kCuda));  // 4,000,000 bytes
    const cuda::MemoryStats during = cuda::memory_stats();
    // 4e6 bytes fall in the class 4 MiB (4,194,304): four classes per power of two above 1 MiB.
    CHECK(during.allocated - before.allocated == (kExactSizes ? 4000000 : 4194304));
    CHECK(during.reserved >= during.allocated);
    CHECK(during.peak_allocated >= during.allocated);
    CHECK(during.device_allocations == before.device_allocations + 1);
  }
  const cuda::MemoryStats freed = cuda::memory_stats();
  CHECK(freed.allocated == before.allocated);
  CHECK(freed.reserved == before.reserved + (kExactSizes ? 4000000 : 4194304));  // kept for reuse
  {
    const Tensor t = empty({999, 1001}, TensorOptions().device(kCuda));  // same class: a cache hit
    const cuda::MemoryStats again = cuda::memory_stats();
    CHECK(again.cache_hits == freed.cache_hits + 1);
    CHECK(again.device_allocations == freed.device_allocations);
  }
  {
    const Tensor small = empty({3}, TensorOptions().device(kCuda));  // 12 bytes: the 512-byte class
    CHECK(cuda::memory_stats().allocated - before.allocated == (kExactSizes ? 256 : 512));
  }
  cuda::empty_cache();
  const cuda::MemoryStats emptied = cuda::memory_stats();
  CHECK(emptied.reserved == emptied.allocated);
  cuda::reset_peak_memory_stats();
  CHECK(cuda::memory_stats().peak_allocated == emptied.allocated);
}

TEST_CASE("device: out of memory is an error with the bytes asked for and the bytes free") {
  cuda::use_emulator();
  cuda::empty_cache();
  const std::size_t in_use = cuda::memory_stats().reserved;
  gpu::set_emulator_memory_limit(in_use + (8u << 20));
  std::string message;
  try {
    const Tensor big = empty({64 << 20}, TensorOptions().dtype(kFloat32).device(kCuda));  // 256 MiB
  } catch (const Error& e) {
    message = e.what();
  }
  // A block that fits still works after the failure.
  const Tensor fits = zeros({1000}, TensorOptions().device(kCuda));
  gpu::set_emulator_memory_limit(0);
  CHECK(message.find("CUDA out of memory: tried to allocate 268435456 bytes (256.00 MiB)") != std::string::npos);
  CHECK(message.find("which has ") != std::string::npos);
  CHECK(message.find("free of ") != std::string::npos);
  CHECK(fits.sum().item<float>() == 0.0f);
}

TEST_CASE("device: a freed block is handed back when the device runs short") {
  cuda::use_emulator();
  cuda::empty_cache();
  { const Tensor t = empty({4 << 20}, TensorOptions().device(kCuda)); }  // 16 MiB now cached
  const std::size_t reserved = cuda::memory_stats().reserved;
  gpu::set_emulator_memory_limit(reserved + (4u << 20));
  // 20 MiB fits only if the cached 16 MiB goes back first.
  std::string message;
  try {
    const Tensor t = empty({5 << 20}, TensorOptions().device(kCuda));
  } catch (const Error& e) {
    message = e.what();
  }
  gpu::set_emulator_memory_limit(0);
  CHECK(message.empty());
}

TEST_CASE("device: gradcheck perturbs inputs that live on the device") {
  cuda::use_emulator();
  Generator gen(5);
  Tensor a = randn({3, 4}, gen, kFloat64).to(kCuda).requires_grad_();
  Tensor b = randn({4}, gen, kFloat64).to(kCuda).requires_grad_();
  const GradcheckResult r =
      gradcheck([](const std::vector<Tensor>& x) { return ops::softmax(ops::mul(x[0], x[1]).exp(), -1); }, {a, b});
  CHECK_MESSAGE(r.ok, r.message);
  CHECK(a.device() == kCuda);
}
