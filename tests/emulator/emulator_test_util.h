// tests/emulator/emulator_test_util.h: what the emulator's tests share (chapter 10): the
// message of the error a call throws, to match against what the emulator should report, and
// device arrays on the emulator's runtime.
#pragma once
#include <cstddef>
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
