// framework/src/ops_reduce.cpp: sum, mean, var and max over dims, with their backward.
// Chapter 02 (ops and broadcasting). Read before: ops_elementwise.cpp. Read next: ops_matmul.cpp.
//
// Every reduction becomes the kernel shape (outer, R, inner): when the reduced dims are
// adjacent, that is a free reshape; otherwise they are permuted to the end first.
#include <algorithm>
#include <array>
#include <numeric>

#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::saved;
using autograd::TensorList;

namespace {

struct Reduction {
  std::vector<int> dims;   // sorted, unique, non-negative
  Shape keep_shape;        // reduced dims as 1
  Shape out_shape;         // as asked (keepdim or not)
  std::int64_t count = 1;  // elements reduced into each output
};

Reduction plan(const char* op, const Tensor& x, std::vector<int> dims, bool keepdim) {
  Reduction r;
  if (dims.empty()) {
    dims.resize(x.dim());
    std::iota(dims.begin(), dims.end(), 0);
  }
  for (int& d : dims) d = normalize_dim(d, x.dim(), op);
  std::sort(dims.begin(), dims.end());
  BRRR_CHECK(std::adjacent_find(dims.begin(), dims.end()) == dims.end(), op, ": a dim is listed twice");
  if (x.dim() == 0) dims.clear();
  r.dims = dims;
  r.keep_shape = x.shape();
  for (int d : dims) {
    r.count *= x.shape()[d];
    r.keep_shape[d] = 1;
  }
  for (int d = 0; d < x.dim(); ++d) {
    const bool reduced = std::binary_search(dims.begin(), dims.end(), d);
    if (!reduced) r.out_shape.push_back(x.shape()[d]);
    else if (keepdim) r.out_shape.push_back(1);
  }
  return r;
}

// x as a contiguous (outer, R, inner) block with the reduced dims in the middle.
struct Block {
  Tensor data;
  std::int64_t outer, R, inner;
};

Block as_block(const Tensor& x, const Reduction& r) {
  const bool adjacent = r.dims.empty() || r.dims.back() - r.dims.front() + 1 == static_cast<int>(r.dims.size());
  if (adjacent) {
    const Tensor c = x.contiguous();
    std::int64_t outer = 1, R = 1, inner = 1;
    const int first = r.dims.empty() ? x.dim() : r.dims.front();
    const int last = r.dims.empty() ? x.dim() - 1 : r.dims.back();
    for (int d = 0; d < x.dim(); ++d) (d < first ? outer : d <= last ? R : inner) *= x.shape()[d];
    return {c, outer, R, inner};
  }
  std::vector<int> order;
  for (int d = 0; d < x.dim(); ++d)
    if (!std::binary_search(r.dims.begin(), r.dims.end(), d)) order.push_back(d);
  std::int64_t outer = 1;
  for (int d : order) outer *= x.shape()[d];
  order.insert(order.end(), r.dims.begin(), r.dims.end());
  NoGradGuard no_grad;
  return {x.permute(order).contiguous(), outer, r.count, 1};
}

}  // namespace

Tensor sum(const Tensor& x, std::vector<int> dims, bool keepdim) {
  BRRR_PROFILE("sum", x);
  detail::check_defined("sum", x);
  const Reduction r = plan("sum", x, dims, keepdim);
  Tensor out;
  if (x.dtype() == kBFloat16) {  // accumulated in float32 (then rounded once): chapter 18
    NoGradGuard no_grad;
    out = sum(x.to(kFloat32), std::move(dims), keepdim).to(kBFloat16);
  } else {
    const Block b = as_block(x, r);
    out = detail::new_tensor(r.out_shape, x.dtype(), x.device());
    static detail::KernelFamily<kernels::sum_dim_fn> k(kernels::op::sum_dim<float>);
    detail::dispatch_floating(x.dtype(), "sum", [&]<class T>() {
      k.get<T>(x.device())(out.data_ptr<T>(), b.data.data_ptr<T>(), b.outer, b.R, b.inner, detail::stream(x.device()));
    });
  }
  if (autograd::needs_grad({&x}))  // each input element gets the gradient of its output
    autograd::record("sum", {x}, out, [keep = r.keep_shape, in_shape = x.shape()](const Tensor& g) {
      return TensorList{g.reshape(keep).expand(in_shape)};
    });
  return out;
}

Tensor mean(const Tensor& x, std::vector<int> dims, bool keepdim) {
  detail::check_defined("mean", x);
  if (x.dtype() == kBFloat16) return mean(x.to(kFloat32), std::move(dims), keepdim).to(kBFloat16);  // one rounding
  const Reduction r = plan("mean", x, dims, keepdim);
  BRRR_CHECK(r.count > 0, "mean: cannot average over zero elements (shape ", shape_str(x.shape()), ")");
  return div(sum(x, std::move(dims), keepdim), static_cast<double>(r.count));
}

Tensor var(const Tensor& x, std::vector<int> dims, int correction, bool keepdim) {
  detail::check_defined("var", x);
  if (x.dtype() == kBFloat16) return var(x.to(kFloat32), std::move(dims), correction, keepdim).to(kBFloat16);
  const Reduction r = plan("var", x, dims, keepdim);
  BRRR_CHECK(r.count - correction > 0, "var: ", r.count, " elements are too few for correction ", correction);
  const Tensor centered = sub(x, mean(x, dims, true));
  return div(sum(mul(centered, centered), std::move(dims), keepdim), static_cast<double>(r.count - correction));
}

std::pair<Tensor, Tensor> max(const Tensor& x, int dim, bool keepdim) {
  BRRR_PROFILE("max", x);
  detail::check_defined("max", x);
  BRRR_CHECK(x.numel() > 0, "max: cannot take the max of an empty tensor (shape ", shape_str(x.shape()), ")");
  const Reduction r = plan("max", x, {dim}, keepdim);
  const Block b = as_block(x, r);
  Tensor values = detail::new_tensor(r.out_shape, x.dtype(), x.device());
  Tensor indices = detail::new_tensor(r.out_shape, kInt64, x.device());
  static detail::KernelFamily<kernels::max_dim_fn> k(kernels::op::max_dim<float>);
  detail::dispatch_floating(x.dtype(), "max", [&]<class T>() {
    k.get<T>(x.device())(values.data_ptr<T>(), indices.data_ptr<std::int64_t>(), b.data.data_ptr<T>(), b.outer, b.R,
                         b.inner, detail::stream(x.device()));
  });
  if (autograd::needs_grad({&x}))  // the gradient goes to the (first) maximum only
    autograd::record("max", {x}, values, [idx = indices, b_shape = std::array<std::int64_t, 3>{b.outer, b.R, b.inner},
                                          in_shape = x.shape()](const Tensor& g) {
      static detail::KernelFamily<kernels::max_dim_backward_fn> kb(kernels::op::max_dim_backward<float>);
      const Tensor gc = g.contiguous();
      Tensor dx = detail::new_tensor(in_shape, g.dtype(), g.device());
      detail::dispatch_floating(g.dtype(), "max", [&]<class T>() {
        kb.get<T>(g.device())(dx.data_ptr<T>(), gc.data_ptr<T>(), idx.data_ptr<std::int64_t>(), b_shape[0], b_shape[1],
                              b_shape[2], detail::stream(g.device()));
      });
      return TensorList{dx};
    });
  return {values, indices};
}

Tensor max(const Tensor& x) {
  BRRR_PROFILE("max", x);
  detail::check_defined("max", x);
  return max(x.reshape({-1}), 0, false).first;
}

Tensor argmax(const Tensor& x, int dim, bool keepdim) {
  NoGradGuard no_grad;
  return max(x, dim, keepdim).second;
}

}  // namespace brrr::ops
