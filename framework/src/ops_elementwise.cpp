// framework/src/ops_elementwise.cpp: unary and broadcasting binary ops, with their backward.
// Chapter 02 (ops and broadcasting). Read before: tensor.cpp. Read next: ops_reduce.cpp.
//
// Each op: check, allocate the output, call the kernel, and record the backward closure
// next to the forward math (as micrograd does). d(a*b) = (g*b, g*a), and so on; a gradient
// for a broadcast input is summed back to the input's shape by sum_to.
#include <cmath>

#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::saved;
using autograd::sum_to;
using autograd::TensorList;

// ---------------------------------------------------------------------------------------------
// unary

namespace {

// out = kernel(x), elementwise over a contiguous copy of x.
Tensor unary(const char* op, detail::KernelFamily<kernels::unary_fn>& kernel, const Tensor& x) {
  detail::check_defined(op, x);
  if (x.dtype() == kBFloat16) {  // computed in float32, rounded once (chapter 18)
    NoGradGuard no_grad;          // the calling op records the backward
    return unary(op, kernel, x.to(kFloat32)).to(kBFloat16);
  }
  const Tensor in = x.contiguous();
  Tensor out = detail::new_like(in);
  detail::dispatch_floating(in.dtype(), op, [&]<class T>() {
    kernel.get<T>(in.device())(out.data_ptr<T>(), in.data_ptr<T>(), in.numel(), detail::stream(in.device()));
  });
  return out;
}

}  // namespace

Tensor neg(const Tensor& x) {
  BRRR_PROFILE("neg", x);
  static detail::KernelFamily<kernels::unary_fn> k(kernels::op::neg<float>);
  Tensor out = unary("neg", k, x);
  if (autograd::needs_grad({&x})) autograd::record("neg", {x}, out, [](const Tensor& g) { return TensorList{neg(g)}; });
  return out;
}

Tensor exp(const Tensor& x) {
  BRRR_PROFILE("exp", x);
  static detail::KernelFamily<kernels::unary_fn> k(kernels::op::exp<float>);
  Tensor out = unary("exp", k, x);
  if (autograd::needs_grad({&x}))  // d exp(x) = exp(x)
    autograd::record("exp", {x}, out, [y = saved(out)](const Tensor& g) { return TensorList{mul(g, y)}; });
  return out;
}

Tensor log(const Tensor& x) {
  BRRR_PROFILE("log", x);
  static detail::KernelFamily<kernels::unary_fn> k(kernels::op::log<float>);
  Tensor out = unary("log", k, x);
  if (autograd::needs_grad({&x}))  // d log(x) = 1 / x
    autograd::record("log", {x}, out, [x = saved(x)](const Tensor& g) { return TensorList{div(g, x)}; });
  return out;
}

Tensor sqrt(const Tensor& x) {
  BRRR_PROFILE("sqrt", x);
  static detail::KernelFamily<kernels::unary_fn> k(kernels::op::sqrt<float>);
  Tensor out = unary("sqrt", k, x);
  if (autograd::needs_grad({&x}))  // d sqrt(x) = 1 / (2 sqrt(x))
    autograd::record("sqrt", {x}, out, [y = saved(out)](const Tensor& g) { return TensorList{div(g, mul(y, 2.0))}; });
  return out;
}

Tensor tanh(const Tensor& x) {
  BRRR_PROFILE("tanh", x);
  static detail::KernelFamily<kernels::unary_fn> k(kernels::op::tanh<float>);
  Tensor out = unary("tanh", k, x);
  if (autograd::needs_grad({&x}))  // d tanh(x) = 1 - tanh(x)^2
    autograd::record("tanh", {x}, out, [y = saved(out)](const Tensor& g) { return TensorList{mul(g, 1.0 - mul(y, y))}; });
  return out;
}

Tensor relu(const Tensor& x) {
  BRRR_PROFILE("relu", x);
  static detail::KernelFamily<kernels::unary_fn> k(kernels::op::relu<float>);
  Tensor out = unary("relu", k, x);
  if (autograd::needs_grad({&x}))
    autograd::record("relu", {x}, out, [x = saved(x.contiguous())](const Tensor& g) {
      static detail::KernelFamily<kernels::unary_backward_fn> kb(kernels::op::relu_backward<float>);
      const Tensor gc = g.contiguous();
      Tensor dx = detail::new_like(gc);
      detail::dispatch_floating(gc.dtype(), "relu_backward", [&]<class T>() {
        kb.get<T>(gc.device())(dx.data_ptr<T>(), gc.data_ptr<T>(), x.data_ptr<T>(), gc.numel(), detail::stream(gc.device()));
      });
      return TensorList{dx};
    });
  return out;
}

Tensor sigmoid(const Tensor& x) {
  BRRR_PROFILE("sigmoid", x);
  static detail::KernelFamily<kernels::unary_fn> k(kernels::op::sigmoid<float>);
  Tensor out = unary("sigmoid", k, x);
  if (autograd::needs_grad({&x}))  // d sigmoid(x) = s (1 - s)
    autograd::record("sigmoid", {x}, out, [y = saved(out)](const Tensor& g) { return TensorList{mul(g, mul(y, 1.0 - y))}; });
  return out;
}

Tensor pow(const Tensor& x, double exponent) {
  BRRR_PROFILE("pow", x);
  detail::check_defined("pow", x);
  static detail::KernelFamily<kernels::pow_scalar_fn> k(kernels::op::pow_scalar<float>);
  Tensor out;
  if (x.dtype() == kBFloat16) {  // computed in float32, rounded once (chapter 18)
    NoGradGuard no_grad;
    out = pow(x.to(kFloat32), exponent).to(kBFloat16);
  } else {
    const Tensor in = x.contiguous();
    out = detail::new_like(in);
    detail::dispatch_floating(in.dtype(), "pow", [&]<class T>() {
      k.get<T>(in.device())(out.data_ptr<T>(), in.data_ptr<T>(), static_cast<T>(exponent), in.numel(),
                            detail::stream(in.device()));
    });
  }
  if (autograd::needs_grad({&x}))  // d x^p = p x^(p-1)
    autograd::record("pow", {x}, out, [x = saved(x), exponent](const Tensor& g) {
      return TensorList{mul(g, mul(pow(x, exponent - 1.0), exponent))};
    });
  return out;
}

// ---------------------------------------------------------------------------------------------
// binary, broadcasting

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    BRRR_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace brrr::ops

namespace brrr::detail {

void binary_into(const char* op, const Tensor& out, const Tensor& a, const Tensor& b) {
  // bf16 is computed in float32 and rounded once (chapter 18): on the CPU by kernels on bf16
  // data (one pass); elsewhere through float32 copies.
  const bool bf16_kernels = out.dtype() == kBFloat16 && out.device().type == DeviceType::CPU &&
                            a.dtype() == kBFloat16 && b.dtype() == kBFloat16;
  if (out.dtype() == kBFloat16 && !bf16_kernels) {
    NoGradGuard no_grad;
    const Tensor result = new_tensor(out.shape(), kFloat32, out.device());
    binary_into(op, result, a.to(kFloat32), b.to(kFloat32));
    copy_into(out, result.to(kBFloat16));
    return;
  }
  const Shape sa = broadcast_strides(a, out.shape()), sb = broadcast_strides(b, out.shape());
  const kernels::Loop loop = make_loop(op, out.shape(), {&out.strides(), &sa, &sb});
  if (loop.numel() == 0) return;
  static KernelFamily<kernels::binary_fn> add(kernels::op::add<float>), sub(kernels::op::sub<float>),
      mul(kernels::op::mul<float>), div(kernels::op::div<float>);
  KernelFamily<kernels::binary_fn>& k = op[0] == 'a' ? add : op[0] == 's' ? sub : op[0] == 'm' ? mul : div;
  dispatch_floating_or_bf16(out.dtype(), op, [&]<class T>() {
    k.get<T>(out.device())(out.data_ptr<T>(), a.data_ptr<T>(), b.data_ptr<T>(), loop, stream(out.device()));
  });
}

}  // namespace brrr::detail

namespace brrr::ops {

namespace {

Tensor binary(const char* op, const Tensor& a, const Tensor& b) {
  BRRR_PROFILE(op, a, b);
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  detail::check_same_device(op, a, b);
  detail::check_same_dtype(op, a, b);
  Tensor out = detail::new_tensor(broadcast_shapes(a.shape(), b.shape(), op), a.dtype(), a.device());
  detail::binary_into(op, out, a, b);
  return out;
}

Tensor scalar_like(double v, const Tensor& like) {
  return scalar_tensor(v, TensorOptions().dtype(like.dtype()).device(like.device()));
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary("add", a, b);
  if (autograd::needs_grad({&a, &b}))
    autograd::record("add", {a, b}, out, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
      return TensorList{sum_to(g, sa), sum_to(g, sb)};
    });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary("sub", a, b);
  if (autograd::needs_grad({&a, &b}))
    autograd::record("sub", {a, b}, out, [sa = a.shape(), sb = b.shape(), need_b = b.requires_grad()](const Tensor& g) {
      return TensorList{sum_to(g, sa), need_b ? sum_to(neg(g), sb) : Tensor()};
    });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary("mul", a, b);
  if (autograd::needs_grad({&a, &b}))
    autograd::record("mul", {a, b}, out,
                     [a_ = saved(a), b_ = saved(b), need_a = a.requires_grad(), need_b = b.requires_grad()](const Tensor& g) {
                       return TensorList{need_a ? sum_to(mul(g, b_), a_.shape()) : Tensor(),
                                         need_b ? sum_to(mul(g, a_), b_.shape()) : Tensor()};
                     });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary("div", a, b);
  if (autograd::needs_grad({&a, &b}))  // d(a/b) = (g / b, -g a / b^2)
    autograd::record("div", {a, b}, out,
                     [a_ = saved(a), b_ = saved(b), need_a = a.requires_grad(), need_b = b.requires_grad()](const Tensor& g) {
                       return TensorList{need_a ? sum_to(div(g, b_), a_.shape()) : Tensor(),
                                         need_b ? sum_to(neg(div(mul(g, a_), mul(b_, b_))), b_.shape()) : Tensor()};
                     });
  return out;
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  BRRR_PROFILE("masked_fill", x, mask);
  detail::check_defined("masked_fill", x);
  detail::check_defined("masked_fill", mask);
  detail::check_same_device("masked_fill", x, mask);
  BRRR_CHECK(broadcast_shapes(x.shape(), mask.shape(), "masked_fill") == x.shape(), "masked_fill: mask of shape ",
             shape_str(mask.shape()), " does not broadcast to ", shape_str(x.shape()));
  const Tensor m = mask.to(x.dtype());
  Tensor out = detail::new_like(x);
  const Shape sx = detail::broadcast_strides(x, x.shape()), sm = detail::broadcast_strides(m, x.shape());
  const kernels::Loop loop = detail::make_loop("masked_fill", x.shape(), {&out.strides(), &sx, &sm});
  static detail::KernelFamily<kernels::masked_fill_fn> k(kernels::op::masked_fill<float>);
  detail::dispatch_floating(x.dtype(), "masked_fill", [&]<class T>() {
    k.get<T>(x.device())(out.data_ptr<T>(), x.data_ptr<T>(), m.data_ptr<T>(), static_cast<T>(value), loop,
                         detail::stream(x.device()));
  });
  if (autograd::needs_grad({&x}))  // the filled positions get no gradient
    autograd::record("masked_fill", {x}, out, [m = saved(m)](const Tensor& g) { return TensorList{masked_fill(g, m, 0.0)}; });
  return out;
}

}  // namespace brrr::ops

namespace brrr {
Tensor operator-(const Tensor& x) { return ops::neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
Tensor operator+(const Tensor& a, double b) { return ops::add(a, b); }
Tensor operator-(const Tensor& a, double b) { return ops::sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return ops::mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return ops::div(a, b); }
Tensor operator+(double a, const Tensor& b) { return ops::add(b, a); }
Tensor operator-(double a, const Tensor& b) { return ops::add(ops::neg(b), a); }
Tensor operator*(double a, const Tensor& b) { return ops::mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return ops::div(scalar_tensor(a, TensorOptions().dtype(b.dtype()).device(b.device())), b); }
}  // namespace brrr
