// base/src/dtype.cpp: names and sizes of dtypes, devices and shapes.
// Chapter 01 (tensors and storage).
#include "brrr/dtype.h"

#include <limits>
#include <string>

#include "brrr/error.h"

namespace brrr {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::BFloat16: return 2;
  }
  detail::fail("dtype_size: unknown dtype ", static_cast<int>(dtype));
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
  }
  return "unknown";
}

bool is_floating_point(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 || dtype == DType::BFloat16;
}

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& name) {
  if (name == "cpu") return cpu();
  if (name == "cuda") return cuda(0);
  if (name.rfind("cuda:", 0) == 0 && name.size() > 5 &&
      name.find_first_not_of("0123456789", 5) == std::string::npos)
    return cuda(std::stoi(name.substr(5)));
  detail::fail("unknown device '", name, "' (expected cpu, cuda or cuda:N)");
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t size : shape) {
    BRRR_CHECK(size >= 0, "negative size in shape ", shape_str(shape));
    BRRR_CHECK(size == 0 || n <= std::numeric_limits<std::int64_t>::max() / size,
               "shape ", shape_str(shape), " has more elements than fit in int64");
    n *= size;
  }
  return n;
}

}  // namespace brrr
