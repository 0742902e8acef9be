// tests/fuzz/fuzz_safetensors.cpp: libFuzzer target for the safetensors reader (chapter 08).
// Any input must either parse or throw brrr::Error: a crash, a hang, an out-of-bounds read
// (AddressSanitizer) or undefined behaviour (UBSan) is a bug. When the header parses, every
// tensor is also materialised over the bytes, as File::tensor would.
//
//   cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DBRRR_FUZZ=ON -DBRRR_CUDA=OFF
//   cmake --build build-fuzz --target fuzz_safetensors
//   build-fuzz/tests/fuzz/fuzz_safetensors -max_total_time=600 tests/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "brrr/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const brrr::safetensors::Header h = brrr::safetensors::parse(bytes, "fuzz");
    volatile std::uint64_t sum = 0;
    for (const auto& t : h.tensors)  // touch first and last byte of each tensor: must be in bounds
      if (t.end > t.begin) sum += static_cast<unsigned char>(bytes[h.data_start + t.begin]) +
                                  static_cast<unsigned char>(bytes[h.data_start + t.end - 1]);
  } catch (const brrr::Error&) {
  }
  return 0;
}
