// framework/src/ops_matmul.cpp: matmul (batched, broadcasting) and linear, with backward.
// Chapter 04 (matmul and the CPU backend). Read before: ops_reduce.cpp, kernels/cpu/matmul.cpp.
// Read next: ops_nn.cpp.
//
// For C = A @ B with upstream gradient G:  dA = G @ B^T,  dB = A^T @ G.
// A transposed operand is never copied: the kernel takes trans_a / trans_b flags, and a
// view whose last two dims are swapped (strides (1, rows)) is passed as "transposed".
// Under brrr::Autocast(kBFloat16) (chapter 18) a float32 GEMM runs a kernel of matmul's
// bf16-products slot instead ("matmul:bf16"): operands rounded to bfloat16, products added in
// float32; the backward closures
// remember the scope, so the backward GEMMs do the same.
#include "brrr/autocast.h"
#include "brrr/cuda.h"
#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::sum_to;
using autograd::TensorList;

namespace {

// One operand of a batched matmul, as the kernel sees it.
struct Operand {
  Tensor data;             // holds the memory alive
  bool transposed = false;  // stored as (.., cols, rows)
  std::int64_t batch_stride = 0;
};

// t (.., rows, cols) as an operand over `batch` matrices: batch dims equal to the broadcast
// batch are walked with a stride, a single matrix is shared (stride 0), anything else is
// expanded and copied.
Operand as_operand(const Tensor& t, const Shape& batch) {
  const int nd = t.dim();
  const std::int64_t rows = t.shape()[nd - 2], cols = t.shape()[nd - 1];
  std::int64_t t_batch = 1;
  for (int d = 0; d < nd - 2; ++d) t_batch *= t.shape()[d];
  Shape full = batch;
  full.push_back(rows);
  full.push_back(cols);
  auto batch_dense = [&](std::int64_t matrix) {  // batch dims contiguous, matrix-sized steps
    std::int64_t expected = matrix;
    for (int d = nd - 3; d >= 0; --d) {
      if (t.shape()[d] != 1 && t.strides()[d] != expected) return false;
      expected *= t.shape()[d];
    }
    return true;
  };
  const bool same_batch = Shape(t.shape().begin(), t.shape().end() - 2) == batch;
  const std::int64_t rs = t.strides()[nd - 2], cs = t.strides()[nd - 1];
  if (same_batch || t_batch == 1) {
    const std::int64_t stride = t_batch == 1 ? 0 : rows * cols;
    if ((cs == 1 || cols == 1) && (rs == cols || rows == 1) && batch_dense(rows * cols)) return {t, false, stride};
    if ((rs == 1 || rows == 1) && (cs == rows || cols == 1) && batch_dense(rows * cols)) return {t, true, stride};
  }
  NoGradGuard no_grad;
  const Tensor c = (same_batch || t_batch == 1 ? t : t.expand(full)).contiguous();
  return {c, false, t_batch == 1 ? 0 : rows * cols};
}

void gemm(const Tensor& out, const Operand& a, const Operand& b, std::int64_t batch, std::int64_t M, std::int64_t N,
          std::int64_t K, bool accumulate) {
  kernels::MatmulShape s;
  s.batch = batch;
  s.M = M;
  s.N = N;
  s.K = K;
  s.trans_a = a.transposed;
  s.trans_b = b.transposed;
  s.stride_a = a.batch_stride;
  s.stride_b = b.batch_stride;
  s.stride_out = M * N;
  s.accumulate = accumulate;
  s.allow_tf32 = out.device().is_cuda() && cuda::allow_tf32();
  if (out.dtype() == kFloat32 && autocast_dtype() == kBFloat16) {  // matmul's bf16 products, "matmul:bf16"
    static kernels::Kernel<kernels::matmul_fn<float>> bf16(kernels::op::matmul<float>.autocast());
    bf16(out.device().type)(out.data_ptr<float>(), a.data.data_ptr<float>(), b.data.data_ptr<float>(), s,
                            detail::stream(out.device()));
    return;
  }
  static detail::KernelFamily<kernels::matmul_fn> k(kernels::op::matmul<float>);
  detail::dispatch_floating(out.dtype(), "matmul", [&]<class T>() {
    k.get<T>(out.device())(out.data_ptr<T>(), a.data.data_ptr<T>(), b.data.data_ptr<T>(), s, detail::stream(out.device()));
  });
}

// One (M, N) = (M, K) @ (K, N) product of operands as they are stored: the shape the kernels on
// bf16 data take (batch 1).
kernels::MatmulShape one_product(const Operand& a, const Operand& b, std::int64_t M, std::int64_t N, std::int64_t K) {
  kernels::MatmulShape s;
  s.M = M;
  s.N = N;
  s.K = K;
  s.trans_a = a.transposed;
  s.trans_b = b.transposed;
  s.stride_out = M * N;
  return s;
}

// matmul on bf16 data (op::matmul_on_bf16): a and b bfloat16 as they are in memory, out float32.
void gemm_on_bf16(const Tensor& out, const Operand& a, const Operand& b, std::int64_t M, std::int64_t N, std::int64_t K,
                  bool accumulate) {
  kernels::MatmulShape s = one_product(a, b, M, N, K);
  s.accumulate = accumulate;
  static kernels::Kernel<kernels::matmul_on_bf16_fn> k(kernels::op::matmul_on_bf16);
  k(out.device().type)(out.data_ptr<float>(), a.data.data_ptr<bf16>(), b.data.data_ptr<bf16>(), s,
                       detail::stream(out.device()));
}

// What linear and linear_gelu take: x (.., in), weight (out, in), bias (out) or undefined, one
// dtype and device.
void check_linear(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::check_defined(op, x);
  detail::check_defined(op, weight);
  BRRR_CHECK(weight.dim() == 2, op, ": weight must be (out_features, in_features), got ", shape_str(weight.shape()));
  BRRR_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), op, ": input ", shape_str(x.shape()),
             " does not match weight ", shape_str(weight.shape()), " (expected last dim ", weight.size(1), ")");
  detail::check_same_dtype(op, x, weight);
  detail::check_same_device(op, x, weight);
  if (bias.defined()) {
    BRRR_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0), op, ": bias ", shape_str(bias.shape()),
               " does not match weight ", shape_str(weight.shape()), " (expected (", weight.size(0), ",))");
    detail::check_same_dtype(op, x, bias);
  }
}

// out (M, N) bf16 = act(a @ b + bias) through op::matmul_epilogue_on_bf16 (chapter 18, section
// 11): the GEMM, the bias, GELU (pre kept) and the rounding as one op, cuBLASLt's epilogue on a GPU.
void gemm_epilogue_on_bf16(const Tensor& out, const Tensor& pre, const Operand& a, const Operand& b,
                           const Tensor& bias, bool gelu, std::int64_t M, std::int64_t N, std::int64_t K) {
  const kernels::MatmulShape s = one_product(a, b, M, N, K);
  static kernels::Kernel<kernels::matmul_epilogue_on_bf16_fn> k(kernels::op::matmul_epilogue_on_bf16);
  k(out.device().type)(out.data_ptr<bf16>(), pre.defined() ? pre.data_ptr<bf16>() : nullptr, a.data.data_ptr<bf16>(),
                       b.data.data_ptr<bf16>(), bias.defined() ? bias.data_ptr<bf16>() : nullptr, gelu, s,
                       detail::stream(out.device()));
}

}  // namespace

// linear on bf16 tensors: the step whose activations are bf16 in memory (chapter 18, sections
// 10 and 11). x (N, in), weight (out, in) and bias are bf16 (the weight and bias the bf16 copies
// of float32 masters); one op (matmul_epilogue) sums x W^T in float32, adds the bias and rounds
// y to bf16 once; with gelu, y = gelu(x W^T + b) from the float32 sum and the pre-activation is
// kept in bf16 for the backward (the MLP's c_fc, linear_gelu). Backward saves x, the weight
// (and pre), all bf16. dx is bf16 like x (the same op, no epilogue); dW and db stay float32 (the
// sums the GEMM and the reduction made), because the copy's gradient goes on to its float32
// master (Tensor::to's backward passes a float32 gradient through unchanged), as PyTorch's
// autocast gives float32 weights float32 gradients.
Tensor linear_on_bf16(const Tensor& x, const Tensor& weight, const Tensor& bias, bool gelu) {
  check_linear(gelu ? "linear_gelu" : "linear", x, weight, bias);
  const std::int64_t in = weight.size(1), outf = weight.size(0), N = x.numel() / std::max<std::int64_t>(in, 1);
  const Tensor x2 = x.contiguous(), w = weight.contiguous(), b = bias.defined() ? bias.contiguous() : Tensor();
  Shape out_shape = x.shape();
  out_shape.back() = outf;
  const Tensor out = detail::new_tensor({N, outf}, kBFloat16, x.device());
  const bool grad = autograd::needs_grad({&x, &weight, &bias});
  const Tensor pre = gelu && grad ? detail::new_tensor({N, outf}, kBFloat16, x.device()) : Tensor();
  gemm_epilogue_on_bf16(out, pre, {x2, false, 0}, {w, true, 0}, b, gelu, N, outf, in);
  Tensor y = out.view(out_shape);
  if (grad)
    autograd::record(gelu ? "linear_gelu" : "linear", {x, weight, bias}, y,
                     [x2 = autograd::saved(x2), w = autograd::saved(w), pre = autograd::saved(pre), N, in, outf,
                      need_x = x.requires_grad(), need_w = weight.requires_grad(),
                      need_b = bias.requires_grad()](const Tensor& g_in) {
                       Tensor g = g_in.to(kBFloat16).contiguous();
                       if (pre.defined()) {  // through GELU first: dpre = g gelu'(pre), rounded once
                         static detail::KernelFamily<kernels::unary_backward_fn> dgelu(
                             kernels::op::gelu_backward<float>);
                         Tensor dpre = detail::new_like(g);
                         dgelu.get<bf16>(g.device())(dpre.data_ptr<bf16>(), g.data_ptr<bf16>(), pre.data_ptr<bf16>(),
                                                     g.numel(), detail::stream(g.device()));
                         g = dpre;
                       }
                       TensorList grads(3);
                       if (need_x) {  // dx (N, in) = g (N, out) @ W (out, in), rounded once
                         Tensor dx = detail::new_tensor({N, in}, kBFloat16, g.device());
                         gemm_epilogue_on_bf16(dx, Tensor(), {g, false, 0}, {w, false, 0}, Tensor(), false, N, in,
                                               outf);
                         grads[0] = dx.view(x2.shape());
                       }
                       if (need_w) {  // dW (out, in) = g^T (out, N) @ x (N, in), float32
                         grads[1] = detail::new_tensor(w.shape(), kFloat32, g.device());
                         gemm_on_bf16(grads[1], {g, true, 0}, {x2, false, 0}, outf, in, N, false);
                       }
                       if (need_b) {  // db (out) float32: g's column sums, read as bf16 (no widened copy)
                         grads[2] = detail::new_tensor({outf}, kFloat32, g.device());
                         static kernels::Kernel<kernels::sum_dim_on_bf16_fn> column_sums(kernels::op::sum_dim_on_bf16);
                         column_sums(g.device().type)(grads[2].data_ptr<float>(), g.data_ptr<bf16>(), 1, N, outf,
                                                      detail::stream(g.device()));
                       }
                       return grads;
                     });
  return y;
}

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  BRRR_PROFILE("matmul", a_in, b_in);
  detail::check_defined("matmul", a_in);
  detail::check_defined("matmul", b_in);
  detail::check_same_device("matmul", a_in, b_in);
  detail::check_same_dtype("matmul", a_in, b_in);
  BRRR_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, "matmul: operands must have at least 1 dim, got ",
             shape_str(a_in.shape()), " @ ", shape_str(b_in.shape()));
  if (a_in.dtype() == kBFloat16) {  // bf16 tensors (chapter 18): exact products, float32 sums, one rounding
    const Autocast autocast(kBFloat16);
    return matmul(a_in.to(kFloat32), b_in.to(kFloat32)).to(kBFloat16);
  }
  // 1-D operands as in NumPy: a vector on the left is a row, on the right a column, and the
  // added dim is dropped from the result.
  if (a_in.dim() == 1 || b_in.dim() == 1) {
    const Tensor a = a_in.dim() == 1 ? a_in.unsqueeze(0) : a_in;
    const Tensor b = b_in.dim() == 1 ? b_in.unsqueeze(-1) : b_in;
    Tensor out = matmul(a, b);
    if (b_in.dim() == 1) out = out.squeeze(-1);
    if (a_in.dim() == 1) out = out.squeeze(b_in.dim() == 1 ? -1 : -2);
    return out;
  }
  const std::int64_t M = a_in.size(-2), K = a_in.size(-1), K2 = b_in.size(-2), N = b_in.size(-1);
  BRRR_CHECK(K == K2, "matmul: inner dimensions differ: ", shape_str(a_in.shape()), " @ ", shape_str(b_in.shape()));
  const Shape batch = broadcast_shapes(Shape(a_in.shape().begin(), a_in.shape().end() - 2),
                                       Shape(b_in.shape().begin(), b_in.shape().end() - 2), "matmul");
  std::int64_t batch_count = 1;
  for (std::int64_t s : batch) batch_count *= s;
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = detail::new_tensor(out_shape, a_in.dtype(), a_in.device());
  const Operand a_op = as_operand(a_in, batch), b_op = as_operand(b_in, batch);
  gemm(out, a_op, b_op, batch_count, M, N, K, false);
  // The backward reads the operands again. Where as_operand had to copy one (a view whose
  // batch dims are not dense, as attention's heads are), the copy holds the same values as
  // the view, and saving it spares the backward a second copy.
  auto for_backward = [](const Tensor& t, const Operand& op) {
    return op.data.impl() != t.impl() && op.data.shape() == t.shape() ? op.data : t;
  };
  if (autograd::needs_grad({&a_in, &b_in}))
    autograd::record("matmul", {a_in, b_in}, out,
                     [a = autograd::saved(for_backward(a_in, a_op)), b = autograd::saved(for_backward(b_in, b_op)),
                      need_a = a_in.requires_grad(),
                      need_b = b_in.requires_grad(), precision = autocast_dtype()](const Tensor& g) {
                       const Autocast autocast(precision);  // as in the forward
                       return TensorList{need_a ? sum_to(matmul(g, b.transpose(-1, -2)), a.shape()) : Tensor(),
                                         need_b ? sum_to(matmul(a.transpose(-1, -2), g), b.shape()) : Tensor()};
                     });
  return out;
}

// y = x @ W^T + b for x (.., in), W (out, in), b (out). The output starts as copies of b and
// the GEMM accumulates into it, saving a pass over y.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  BRRR_PROFILE("linear", x, weight);
  detail::check_defined("linear", x);
  if (x.dtype() == kBFloat16) return linear_on_bf16(x, weight, bias, false);
  check_linear("linear", x, weight, bias);
  const std::int64_t in = weight.size(1), outf = weight.size(0), N = x.numel() / std::max<std::int64_t>(in, 1);
  const Tensor x2 = x.contiguous();
  const Tensor w = weight.contiguous();
  Shape out_shape = x.shape();
  out_shape.back() = outf;
  Tensor out = detail::new_tensor(out_shape, x.dtype(), x.device());
  if (bias.defined()) detail::copy_into(out.view({N, outf}), bias.contiguous());
  gemm(out, {x2, false, 0}, {w, true, 0}, 1, N, outf, in, bias.defined());
  if (autograd::needs_grad({&x, &weight, &bias}))
    autograd::record("linear", {x, weight, bias}, out,
                     [x2 = autograd::saved(x2), w = autograd::saved(w), N, in, outf, need_x = x.requires_grad(),
                      need_w = weight.requires_grad(), need_b = bias.requires_grad(),
                      precision = autocast_dtype()](const Tensor& g_in) {
                       const Autocast autocast(precision);  // as in the forward
                       const Tensor g = g_in.contiguous();
                       TensorList grads(3);
                       if (need_x) {  // dx (N, in) = g (N, out) @ W (out, in)
                         grads[0] = detail::new_tensor(x2.shape(), g.dtype(), g.device());
                         gemm(grads[0], {g, false, 0}, {w, false, 0}, 1, N, in, outf, false);
                       }
                       if (need_w) {  // dW (out, in) = g^T (out, N) @ x (N, in)
                         grads[1] = detail::new_tensor(w.shape(), g.dtype(), g.device());
                         gemm(grads[1], {g, true, 0}, {x2, false, 0}, 1, outf, in, N, false);
                       }
                       if (need_b) grads[2] = sum(g.view({N, outf}), {0});  // db = sum of g over rows
                       return grads;
                     });
  return out;
}

}  // namespace brrr::ops
