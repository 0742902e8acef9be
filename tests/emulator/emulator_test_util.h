// tests/emulator/emulator_test_util.h: what the emulator's tests share (chapter 10): the
// message of the error a call throws, to match against what the emulator should report, device
// arrays on the emulator's runtime, and the attention tests' shape and error measure.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "brrr/error.h"
#include "kernels/cuda/runtime.h"

namespace brrr::test {

// The message of the brrr::Error that f throws ("" if it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const brrr::Error& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The attention tests' problems: BH heads (batch x heads) of T positions, head size hs.
struct AttentionShape {
  std::int64_t BH, T, hs;
};

// The largest |got - want| / (1 + |want|) over the elements, got read as float (bf16 values
// widened); a NaN makes it infinite.
template <class F>
double max_error(const std::vector<F>& got, const std::vector<double>& want) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(static_cast<double>(static_cast<float>(got[i])) - want[i]) / (1.0 + std::abs(want[i]));
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  return worst;
}

// n values of the emulator's device memory, freed at the end of the scope.
template <class T>
struct DeviceArray {
  T* data;
  std::size_t n;
  explicit DeviceArray(std::size_t count)
      : data(static_cast<T*>(gpu::emulator_runtime().malloc(count * sizeof(T)))), n(count) {}
  DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) {
    gpu::emulator_runtime().copy(data, values.data(), n * sizeof(T), gpu::CopyKind::HostToDevice);
  }
  ~DeviceArray() { gpu::emulator_runtime().free(data); }
  DeviceArray(const DeviceArray&) = delete;
  std::vector<T> host() const {
    std::vector<T> values(n);
    gpu::emulator_runtime().copy(values.data(), data, n * sizeof(T), gpu::CopyKind::DeviceToHost);
    return values;
  }
};

}  // namespace brrr::test
