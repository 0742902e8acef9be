// framework/src/ops_conv.cpp: conv2d, conv1d, max_pool2d and avg_pool2d, with their backward.
// Chapter 09 (convolutions). Read before: ops_matmul.cpp, kernels/cpu/conv.cpp.
// Read next: nn.cpp (Conv2d, MaxPool2d and the other modules), models/cnn.
//
// Each op checks its shapes, fills a ConvShape or PoolShape (kernels/signatures.h) and calls
// the registry's kernel. The backward of a convolution is two kernels: dx from dout and the
// weight, dweight and dbias from dout and x (the chapter derives both as convolutions).
#include <limits>

#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::saved;
using autograd::TensorList;

namespace {

// Size of one output dim: (in + 2 pad - dil (k - 1) - 1) / stride + 1; at least 1, or an
// error that names the op and the sizes.
std::int64_t out_size(const char* op, const char* dim, std::int64_t in, std::int64_t k, std::int64_t stride,
                      std::int64_t pad, std::int64_t dil) {
  const std::int64_t span = dil * (k - 1) + 1, padded = in + 2 * pad;
  BRRR_CHECK(padded >= span, op, ": input ", dim, " ", in, " padded by ", pad, " on each side is ", padded,
             ", smaller than the kernel's span ", span, " (kernel ", k, ", dilation ", dil, ")");
  return (padded - span) / stride + 1;
}

void check_pair(const char* op, const char* what, Size2 v, std::int64_t least) {
  BRRR_CHECK(v.h >= least && v.w >= least, op, ": ", what, " must be at least ", least, ", got (", v.h, ", ", v.w,
             ")");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// conv2d

Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, Size2 stride, Size2 padding, Size2 dilation,
              std::int64_t groups) {
  BRRR_PROFILE("conv2d", x, weight);
  detail::check_defined("conv2d", x);
  detail::check_defined("conv2d", weight);
  BRRR_CHECK(x.dim() == 4, "conv2d: input must be (N, C_in, H, W), got ", shape_str(x.shape()));
  BRRR_CHECK(weight.dim() == 4, "conv2d: weight must be (C_out, C_in / groups, kH, kW), got ",
             shape_str(weight.shape()));
  detail::check_same_dtype("conv2d", x, weight);
  detail::check_same_device("conv2d", x, weight);
  detail::check_floating("conv2d", x);
  BRRR_CHECK(groups >= 1, "conv2d: groups must be at least 1, got ", groups);
  check_pair("conv2d", "stride", stride, 1);
  check_pair("conv2d", "dilation", dilation, 1);
  check_pair("conv2d", "padding", padding, 0);
  kernels::ConvShape s;
  s.N = x.size(0), s.C_in = x.size(1), s.H = x.size(2), s.W = x.size(3);
  s.C_out = weight.size(0), s.kH = weight.size(2), s.kW = weight.size(3), s.groups = groups;
  BRRR_CHECK(s.C_in == weight.size(1) * groups, "conv2d: input has ", s.C_in, " channels, weight expects ",
             weight.size(1) * groups,
             groups == 1 ? std::string() : " (" + std::to_string(weight.size(1)) + " per group x " +
                                               std::to_string(groups) + " groups)",
             ": input ", shape_str(x.shape()), ", weight ", shape_str(weight.shape()));
  BRRR_CHECK(s.C_out % groups == 0, "conv2d: ", s.C_out, " output channels (weight ", shape_str(weight.shape()),
             ") do not divide into ", groups, " groups");
  BRRR_CHECK(s.kH >= 1 && s.kW >= 1, "conv2d: weight ", shape_str(weight.shape()), " has an empty kernel");
  if (bias.defined()) {
    BRRR_CHECK(bias.dim() == 1 && bias.size(0) == s.C_out, "conv2d: bias ", shape_str(bias.shape()),
               " does not match weight ", shape_str(weight.shape()), " (expected (", s.C_out, ",))");
    detail::check_same_dtype("conv2d", x, bias);
    detail::check_same_device("conv2d", x, bias);
  }
  s.stride_h = stride.h, s.stride_w = stride.w, s.pad_h = padding.h, s.pad_w = padding.w;
  s.dil_h = dilation.h, s.dil_w = dilation.w;
  s.H_out = out_size("conv2d", "height", s.H, s.kH, s.stride_h, s.pad_h, s.dil_h);
  s.W_out = out_size("conv2d", "width", s.W, s.kW, s.stride_w, s.pad_w, s.dil_w);

  const Tensor xc = x.contiguous(), w = weight.contiguous(), b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor out = detail::new_tensor({s.N, s.C_out, s.H_out, s.W_out}, x.dtype(), x.device());
  static detail::KernelFamily<kernels::conv2d_forward_fn> k(kernels::op::conv2d_forward<float>);
  detail::dispatch_floating(x.dtype(), "conv2d", [&]<class T>() {
    k.get<T>(xc.device())(out.data_ptr<T>(), xc.data_ptr<T>(), w.data_ptr<T>(), b.defined() ? b.data_ptr<T>() : nullptr,
                          s, detail::stream(xc.device()));
  });
  if (autograd::needs_grad({&x, &weight, &bias}))
    autograd::record("conv2d", {x, weight, bias}, out,
                     [xs = saved(xc), ws = saved(w), s, need_x = x.requires_grad(), need_w = weight.requires_grad(),
                      need_b = bias.defined() && bias.requires_grad()](const Tensor& g_in) {
                       static detail::KernelFamily<kernels::conv2d_backward_input_fn> kx(kernels::op::conv2d_backward_input<float>);
                       static detail::KernelFamily<kernels::conv2d_backward_weight_fn> kw(kernels::op::conv2d_backward_weight<float>);
                       const Tensor g = g_in.contiguous();
                       TensorList grads(3);
                       if (need_x) grads[0] = detail::new_tensor(xs.shape(), g.dtype(), g.device());
                       if (need_w || need_b) grads[1] = detail::new_tensor(ws.shape(), g.dtype(), g.device());
                       if (need_b) grads[2] = detail::new_tensor({s.C_out}, g.dtype(), g.device());
                       detail::dispatch_floating(g.dtype(), "conv2d", [&]<class T>() {
                         if (need_x)
                           kx.get<T>(g.device())(grads[0].data_ptr<T>(), g.data_ptr<T>(), ws.data_ptr<T>(), s,
                                                 detail::stream(g.device()));
                         if (need_w || need_b)
                           kw.get<T>(g.device())(grads[1].data_ptr<T>(), need_b ? grads[2].data_ptr<T>() : nullptr,
                                                 g.data_ptr<T>(), xs.data_ptr<T>(), s, detail::stream(g.device()));
                       });
                       if (!need_w) grads[1] = Tensor();  // computed only beside dbias
                       return grads;
                     });
  return out;
}

Tensor conv1d(const Tensor& x, const Tensor& weight, const Tensor& bias, std::int64_t stride, std::int64_t padding,
              std::int64_t dilation, std::int64_t groups) {
  detail::check_defined("conv1d", x);
  detail::check_defined("conv1d", weight);
  BRRR_CHECK(x.dim() == 3, "conv1d: input must be (N, C_in, L), got ", shape_str(x.shape()));
  BRRR_CHECK(weight.dim() == 3, "conv1d: weight must be (C_out, C_in / groups, k), got ", shape_str(weight.shape()));
  BRRR_CHECK(x.size(1) == weight.size(1) * groups || groups < 1, "conv1d: input has ", x.size(1),
             " channels, weight expects ", weight.size(1) * groups, ": input ", shape_str(x.shape()), ", weight ",
             shape_str(weight.shape()));
  // (N, C, L) as (N, C, 1, L): one row, the kernel one row tall, nothing padded above or below.
  return conv2d(x.unsqueeze(2), weight.unsqueeze(2), bias, {1, stride}, {0, padding}, {1, dilation}, groups)
      .squeeze(2);
}

// ---------------------------------------------------------------------------------------------
// pooling

namespace {

kernels::PoolShape pool_shape(const char* op, const Tensor& x, Size2 kernel, Size2 stride, Size2 padding) {
  detail::check_defined(op, x);
  detail::check_floating(op, x);
  BRRR_CHECK(x.dim() == 4, op, ": input must be (N, C, H, W), got ", shape_str(x.shape()));
  check_pair(op, "kernel_size", kernel, 1);
  check_pair(op, "stride", stride, 1);
  check_pair(op, "padding", padding, 0);
  // As PyTorch: every window must hold at least one real input.
  BRRR_CHECK(2 * padding.h <= kernel.h && 2 * padding.w <= kernel.w, op, ": padding (", padding.h, ", ", padding.w,
             ") must be at most half the kernel (", kernel.h, ", ", kernel.w, ")");
  kernels::PoolShape s;
  s.planes = x.size(0) * x.size(1), s.H = x.size(2), s.W = x.size(3);
  s.kH = kernel.h, s.kW = kernel.w, s.stride_h = stride.h, s.stride_w = stride.w;
  s.pad_h = padding.h, s.pad_w = padding.w;
  s.H_out = out_size(op, "height", s.H, s.kH, s.stride_h, s.pad_h, 1);
  s.W_out = out_size(op, "width", s.W, s.kW, s.stride_w, s.pad_w, 1);
  return s;
}

}  // namespace

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding) {
  BRRR_PROFILE("max_pool2d", x);
  const kernels::PoolShape s = pool_shape("max_pool2d", x, kernel_size, stride, padding);
  const Tensor xc = x.contiguous();
  const Shape out_shape{x.size(0), x.size(1), s.H_out, s.W_out};
  Tensor out = detail::new_tensor(out_shape, x.dtype(), x.device());
  Tensor index = detail::new_tensor(out_shape, kInt64, x.device());
  static detail::KernelFamily<kernels::max_pool2d_forward_fn> k(kernels::op::max_pool2d_forward<float>);
  detail::dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    k.get<T>(xc.device())(out.data_ptr<T>(), index.data_ptr<std::int64_t>(), xc.data_ptr<T>(), s,
                          detail::stream(xc.device()));
  });
  if (autograd::needs_grad({&x}))
    autograd::record("max_pool2d", {x}, out, [index, s, in_shape = x.shape()](const Tensor& g_in) {
      static detail::KernelFamily<kernels::max_pool2d_backward_fn> kb(kernels::op::max_pool2d_backward<float>);
      const Tensor g = g_in.contiguous();
      Tensor dx = detail::new_tensor(in_shape, g.dtype(), g.device());
      detail::dispatch_floating(g.dtype(), "max_pool2d", [&]<class T>() {
        kb.get<T>(g.device())(dx.data_ptr<T>(), g.data_ptr<T>(), index.data_ptr<std::int64_t>(), s,
                              detail::stream(g.device()));
      });
      return TensorList{dx};
    });
  return {out, index};
}

Tensor max_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding) {
  return max_pool2d_with_indices(x, kernel_size, stride, padding).first;
}
Tensor max_pool2d(const Tensor& x, Size2 kernel_size) { return max_pool2d(x, kernel_size, kernel_size, 0); }

Tensor avg_pool2d(const Tensor& x, Size2 kernel_size, Size2 stride, Size2 padding) {
  BRRR_PROFILE("avg_pool2d", x);
  const kernels::PoolShape s = pool_shape("avg_pool2d", x, kernel_size, stride, padding);
  const Tensor xc = x.contiguous();
  Tensor out = detail::new_tensor({x.size(0), x.size(1), s.H_out, s.W_out}, x.dtype(), x.device());
  static detail::KernelFamily<kernels::avg_pool2d_forward_fn> k(kernels::op::avg_pool2d_forward<float>);
  detail::dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>() {
    k.get<T>(xc.device())(out.data_ptr<T>(), xc.data_ptr<T>(), s, detail::stream(xc.device()));
  });
  if (autograd::needs_grad({&x}))
    autograd::record("avg_pool2d", {x}, out, [s, in_shape = x.shape()](const Tensor& g_in) {
      static detail::KernelFamily<kernels::avg_pool2d_backward_fn> kb(kernels::op::avg_pool2d_backward<float>);
      const Tensor g = g_in.contiguous();
      Tensor dx = detail::new_tensor(in_shape, g.dtype(), g.device());
      detail::dispatch_floating(g.dtype(), "avg_pool2d", [&]<class T>() {
        kb.get<T>(g.device())(dx.data_ptr<T>(), g.data_ptr<T>(), s, detail::stream(g.device()));
      });
      return TensorList{dx};
    });
  return out;
}
Tensor avg_pool2d(const Tensor& x, Size2 kernel_size) { return avg_pool2d(x, kernel_size, kernel_size, 0); }

}  // namespace brrr::ops
