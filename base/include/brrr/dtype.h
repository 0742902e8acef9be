// brrr/dtype.h: element types, devices and shapes.
// Chapter 01 (tensors and storage). Read next: storage.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace brrr {

struct bf16;  // brrr/bfloat16.h

// float32 everywhere, float64 on the CPU (for gradient checks), int32/int64 for indices.
// bfloat16 (brrr::bf16, brrr/bfloat16.h) for mixed precision (chapter 18): stored in 2 bytes,
// computed in float32.
enum class DType : std::uint8_t { Float32, Float64, Int32, Int64, BFloat16 };

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBFloat16 = DType::BFloat16;

std::size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "float32", "int64", ...
bool is_floating_point(DType dtype);

// The C++ type behind a dtype, for templates: dtype_of<float>() == kFloat32.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<std::int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<bf16>() { return DType::BFloat16; }

enum class DeviceType : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
  std::string str() const;  // "cpu", "cuda:0"
  // Parses "cpu", "cuda" or "cuda:N"; throws brrr::Error on anything else.
  static Device parse(const std::string& name);
};

inline const Device kCPU = Device::cpu();

// A shape or a list of strides: sizes in elements, outermost first.
using Shape = std::vector<std::int64_t>;
std::string shape_str(const Shape& shape);  // "(4, 3)"
std::int64_t shape_numel(const Shape& shape);  // throws if the product overflows

}  // namespace brrr
