// framework/src/dispatch.cpp: the plumbing between an op and its kernel (see dispatch.h): new
// outputs, the checks every op makes, the loop over broadcast operands, and copy_into.
// Chapter 02 (ops and broadcasting). Read next: ops_elementwise.cpp.
#include "dispatch.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "brrr/bfloat16.h"
#include "brrr/error.h"
#include "brrr/storage.h"

namespace brrr {

namespace detail {

Tensor new_tensor(const Shape& shape, DType dtype, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  const std::int64_t n = shape_numel(shape);
  impl->storage = Storage::allocate(static_cast<std::size_t>(n) * dtype_size(dtype), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

bool device_checks() {
  const char* v = std::getenv("BRRR_DEVICE_CHECKS");
  return v && *v && std::string(v) != "0";
}

void check_defined(const char* op, const Tensor& t) { BRRR_CHECK(t.defined(), op, ": tensor is undefined"); }

void check_qkv(const char* op, const Tensor& qkv, std::int64_t n_head) {
  check_defined(op, qkv);
  BRRR_CHECK(qkv.dim() == 3 && n_head > 0 && qkv.size(2) % (3 * n_head) == 0, op,
             ": qkv must be (B, T, 3 C) with C a multiple of n_head = ", n_head, ", got ", shape_str(qkv.shape()));
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  BRRR_CHECK(a.device() == b.device(), op, ": tensors are on different devices: ", a.device().str(), " and ",
             b.device().str());
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  BRRR_CHECK(a.dtype() == b.dtype(), op, ": dtypes differ: ", dtype_name(a.dtype()), " ", shape_str(a.shape()),
             " and ", dtype_name(b.dtype()), " ", shape_str(b.shape()));
}

void check_floating(const char* op, const Tensor& t) {
  BRRR_CHECK(is_floating_point(t.dtype()), op, ": expected a floating-point tensor, got ", dtype_name(t.dtype()),
             " ", shape_str(t.shape()));
}

kernels::Loop make_loop(const char* op, const Shape& shape, std::initializer_list<const Shape*> strides) {
  const int operands = static_cast<int>(strides.size());
  // Keep the dims of size > 1, outermost first.
  std::int64_t size[64], stride[3][64];
  int n = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    size[n] = shape[d];
    int k = 0;
    for (const Shape* s : strides) stride[k++][n] = (*s)[d];
    ++n;
  }
  // Merge dim d into d-1 when, for every operand, stepping d-1 equals stepping d size[d] times.
  int m = 0;
  for (int d = 0; d < n; ++d) {
    bool merge = m > 0;
    for (int k = 0; k < operands && merge; ++k) merge = stride[k][m - 1] == stride[k][d] * size[d];
    if (merge) {
      size[m - 1] *= size[d];
      for (int k = 0; k < operands; ++k) stride[k][m - 1] = stride[k][d];
    } else {
      size[m] = size[d];
      for (int k = 0; k < operands; ++k) stride[k][m] = stride[k][d];
      ++m;
    }
  }
  BRRR_CHECK(m <= kernels::kMaxDims, op, ": shape ", shape_str(shape), " has more than ", kernels::kMaxDims,
             " dims that cannot be merged");
  kernels::Loop loop;
  loop.ndim = m == 0 ? 1 : m;
  if (m == 0) {
    loop.size[0] = shape_numel(shape);  // 1 (a scalar) or 0 (an empty tensor)
    for (int k = 0; k < 3; ++k) loop.stride[k][0] = 1;
    return loop;
  }
  for (int d = 0; d < m; ++d) {
    loop.size[d] = size[d];
    for (int k = 0; k < operands; ++k) loop.stride[k][d] = stride[k][d];
  }
  return loop;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const int nd = static_cast<int>(shape.size()), td = t.dim();
  Shape strides(nd, 0);
  for (int d = 0; d < td; ++d) {
    const int od = nd - td + d;
    strides[od] = t.shape()[d] == 1 ? 0 : t.strides()[d];
  }
  return strides;
}

void copy_into(const Tensor& out, const Tensor& in) {
  check_same_dtype("copy_", out, in);
  check_same_device("copy_", out, in);
  const Shape si = broadcast_strides(in, out.shape());
  const kernels::Loop loop = make_loop("copy_", out.shape(), {&out.strides(), &si});
  if (loop.numel() == 0) return;
  const std::size_t es = dtype_size(out.dtype());
  // One copy kernel per dtype: the bits move unchanged.
  switch (out.dtype()) {
    case DType::Float32: {
      static kernels::Kernel k(kernels::op::copy<float>);
      return k(out.device().type)(out.data_ptr<float>(), in.data_ptr<float>(), loop, stream(out.device()));
    }
    case DType::Float64: {
      static kernels::Kernel k(kernels::op::copy<double>);
      return k(out.device().type)(out.data_ptr<double>(), in.data_ptr<double>(), loop, stream(out.device()));
    }
    case DType::Int32: {
      static kernels::Kernel k(kernels::op::copy<std::int32_t>);
      return k(out.device().type)(out.data_ptr<std::int32_t>(), in.data_ptr<std::int32_t>(), loop,
                                         stream(out.device()));
    }
    case DType::Int64: {
      static kernels::Kernel k(kernels::op::copy<std::int64_t>);
      return k(out.device().type)(out.data_ptr<std::int64_t>(), in.data_ptr<std::int64_t>(), loop,
                                         stream(out.device()));
    }
    case DType::BFloat16: {
      static kernels::Kernel k(kernels::op::copy<bf16>);
      return k(out.device().type)(out.data_ptr<bf16>(), in.data_ptr<bf16>(), loop, stream(out.device()));
    }
    default: fail("copy_: unsupported dtype ", dtype_name(out.dtype()), " (", es, " bytes)");
  }
}

}  // namespace detail

}  // namespace brrr
