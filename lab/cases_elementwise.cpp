// lab/cases_elementwise.cpp: the kernel lab's cases for the elementwise ops of chapter 02
// (fill, copy, cast, the unary and binary ops, masked_fill), the GELU kernels of chapter 12
// (gelu, bias_gelu, forward and backward; the exact gelu_erf), and gelu, the op whose variants the registry picks. Read before: cases.h. Read next:
// cases_random.cpp.
//
// Every reference here is one line of math per element, in double. The backward cases also
// give grad mode a loss, sum(dout * f(x)), whose finite differences their outputs must match.
#include <algorithm>

#include "brrr/bfloat16.h"
#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/tensor.h"
#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

// --- the calls: a problem's arrays into each op's signature ----------------------------------

template <class T>
void call_fill(kernels::fill_fn<T> f, const Args& a) {
  f(a.f<T>("out"), static_cast<T>(0.75), a.dims[0], a.stream);
}
template <class T>
void call_copy(kernels::copy_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("in"), flat_loop(a.dims[0]), a.stream);
}
void call_cast(kernels::cast_fn f, const Args& a) {  // int32 in, the dtype under test out
  f(a.get("out"), a.dtype, a.get("in"), kInt32, a.dims[0], a.stream);
}
template <class T>
void call_unary(kernels::unary_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), a.dims[0], a.stream);
}
template <class T>
void call_pow2(kernels::pow_scalar_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), static_cast<T>(2), a.dims[0], a.stream);
}
template <class T>
void call_pow15(kernels::pow_scalar_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), static_cast<T>(1.5), a.dims[0], a.stream);
}
template <class T>
void call_unary_backward(kernels::unary_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dout"), a.f<T>("x"), a.dims[0], a.stream);
}
template <class T>
void call_binary(kernels::binary_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), flat_loop(a.dims[0]), a.stream);
}
// (rows, C) op (C): b broadcast over the rows, stride 0, as a bias add is.
template <class T>
void call_binary_rows(kernels::binary_fn<T> f, const Args& a) {
  kernels::Loop loop;
  loop.ndim = 2;
  loop.size[0] = a.dims[0], loop.size[1] = a.dims[1];
  loop.stride[0][0] = loop.stride[1][0] = a.dims[1];
  loop.stride[0][1] = loop.stride[1][1] = loop.stride[2][1] = 1;
  loop.stride[2][0] = 0;
  f(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), loop, a.stream);
}
template <class T>
void call_masked_fill(kernels::masked_fill_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), a.f<T>("mask"), static_cast<T>(-3.5), flat_loop(a.dims[0]), a.stream);
}
template <class T>
void call_bias_gelu_forward(kernels::bias_gelu_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), a.f<T>("bias"), a.dims[0], a.dims[1], a.stream);
}
template <class T>
void call_bias_gelu_backward(kernels::bias_gelu_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dx"), a.f<T>("dbias"), a.f<T>("dout"), a.f<T>("x"), a.f<T>("bias"), a.dims[0], a.dims[1], a.stream);
}

// --- inputs and references -------------------------------------------------------------------

// out (n) from x (n): x drawn from N(0, 2), or from [0.1, 4] for the ops defined on x > 0.
void make_unary(Problem& p, Random& r) {
  p.input("x", r.normal(p.dims[0], 0.0f, 2.0f));
  p.output("out", p.dims[0]);
}
void make_positive(Problem& p, Random& r) {
  p.input("x", r.uniform(p.dims[0], 0.1f, 4.0f));
  p.output("out", p.dims[0]);
}
template <double (*F)(double)>
void unary_reference(Problem& p) {
  const std::vector<double>& x = p.in("x");
  std::vector<double>& out = p.out("out");
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = F(x[i]);
}
double neg(double x) { return -x; }
double exp_(double x) { return std::exp(x); }
double log_(double x) { return std::log(x); }
double sqrt_(double x) { return std::sqrt(x); }
double tanh_(double x) { return std::tanh(x); }
double relu(double x) { return x > 0 ? x : 0.0; }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double square(double x) { return x * x; }
double pow15(double x) { return std::pow(x, 1.5); }

// dx (n) from dout (n) and x (n).
void make_unary_backward(Problem& p, Random& r) {
  p.input("dout", r.normal(p.dims[0]));
  p.input("x", r.normal(p.dims[0], 0.0f, 2.0f));
  p.output("dx", p.dims[0]);
}
template <double (*F)(double)>
double unary_loss(const Problem& p) {  // sum(dout * f(x))
  const std::vector<double>&x = p.in("x"), &dout = p.in("dout");
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += dout[i] * F(x[i]);
  return s;
}
template <double (*Fprime)(double)>
void unary_backward_reference(Problem& p) {  // dx = dout * f'(x)
  const std::vector<double>&x = p.in("x"), &dout = p.in("dout");
  std::vector<double>& dx = p.out("dx");
  for (std::size_t i = 0; i < x.size(); ++i) dx[i] = dout[i] * Fprime(x[i]);
}
double relu_grad(double x) { return x > 0 ? 1.0 : 0.0; }

// out (n) = a (n) op b (n); b kept away from 0 for div.
void make_binary(Problem& p, Random& r) {
  const std::int64_t n = p.dims[0];
  p.input("a", r.normal(n));
  std::vector<float> b = r.uniform(n, 0.5f, 2.0f), sign = r.uniform(n, 0.0f, 1.0f);
  for (std::int64_t i = 0; i < n; ++i) b[i] = sign[i] < 0.5f ? -b[i] : b[i];
  p.input("b", b);
  p.output("out", n);
}
void make_binary_rows(Problem& p, Random& r) {
  p.input("a", r.normal(p.dims[0] * p.dims[1]));
  p.input("b", r.normal(p.dims[1]));
  p.output("out", p.dims[0] * p.dims[1]);
}
template <double (*F)(double, double)>
void binary_reference(Problem& p) {
  const std::vector<double>&a = p.in("a"), &b = p.in("b");
  std::vector<double>& out = p.out("out");
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = F(a[i], b[i % b.size()]);  // b: (n), or (C) per row
}
double add(double a, double b) { return a + b; }
double sub(double a, double b) { return a - b; }
double mul(double a, double b) { return a * b; }
double div(double a, double b) { return a / b; }

// out (N, C) = gelu(x (N, C) + bias (C)); the backward's dx and dbias = sum over rows of dx.
void make_bias_gelu(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  p.input("x", r.normal(N * C, 0.0f, 2.0f));
  p.input("bias", r.normal(C, 0.0f, 0.5f));
  p.output("out", N * C);
}
void bias_gelu_reference(Problem& p) {
  const std::vector<double>&x = p.in("x"), &bias = p.in("bias");
  std::vector<double>& out = p.out("out");
  const std::size_t C = bias.size();
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = gelu(x[i] + bias[i % C]);
}
void make_bias_gelu_backward(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  p.input("dout", r.normal(N * C));
  p.input("x", r.normal(N * C, 0.0f, 2.0f));
  p.input("bias", r.normal(C, 0.0f, 0.5f));
  p.output("dx", N * C);
  p.output("dbias", C);
}
void bias_gelu_backward_reference(Problem& p) {
  const std::vector<double>&x = p.in("x"), &bias = p.in("bias"), &dout = p.in("dout");
  std::vector<double>&dx = p.out("dx"), &dbias = p.out("dbias");
  const std::size_t C = bias.size();
  std::fill(dbias.begin(), dbias.end(), 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    dx[i] = dout[i] * gelu_grad(x[i] + bias[i % C]);
    dbias[i % C] += dx[i];
  }
}
double bias_gelu_loss(const Problem& p) {
  const std::vector<double>&x = p.in("x"), &bias = p.in("bias"), &dout = p.in("dout");
  double s = 0;
  for (std::size_t i = 0; i < x.size(); ++i) s += dout[i] * gelu(x[i] + bias[i % bias.size()]);
  return s;
}

// gelu, the op whose variants the registry picks (framework/src/op_variants.cpp): its kernels
// or gelu_composed (chapter 07). grad mode: brrr::gradcheck on the variant, in float64.
void call_gelu(ops::variants::gelu_fn f, const Args& a) { a.store("out", f(a.tensor("x", {a.dims[0]}, a.dtype))); }
GradcheckResult gelu_gradcheck(const std::string& variant, Device device) {
  ops::register_op_variants();
  const auto fn = kernels::lookup_variant(ops::variants::gelu<double>, device.type, variant);
  BRRR_CHECK(fn != nullptr, "kernel-lab gelu: no variant '", variant, "'");
  Generator gen(23);
  const TensorOptions options = TensorOptions().dtype(kFloat64).device(device).requires_grad(true);
  return gradcheck([fn](const std::vector<Tensor>& x) { return fn(x[0]); }, {randn({4, 5}, gen, options)});
}

// The sizes every flat elementwise case shares: 2^26 floats on a GPU (256 MiB, far past any
// cache), 2^16 on the emulator, 2^24 on the CPU; checked at one element, a ragged 1003 and
// 4099 (no multiple of 4: every float4 path needs its scalar tail).
Case flat(Case c) {
  c.chapter = c.chapter.empty() ? "02" : c.chapter;
  c.dim_names = {"n"};
  c.gpu_size = {1 << 26}, c.emulator_size = {1 << 16}, c.cpu_size = {1 << 24};
  c.shapes = {{1}, {1003}, {4099}};
  c.grad_shape = {37};
  return c;
}

// (N, C) cases: GPT-2 small's MLP, 8 * 1024 rows of 4 * 768, on a GPU.
Case rows(Case c) {
  c.dim_names = {"N", "C"};
  c.gpu_size = {8192, 3072}, c.emulator_size = {64, 384}, c.cpu_size = {2048, 3072};
  c.shapes = {{1, 1}, {7, 100}, {5, 129}};
  c.grad_shape = {3, 7};
  return c;
}

double bytes_unary(const Dims& d) { return 8.0 * d[0]; }    // read x, write out
double bytes_binary(const Dims& d) { return 12.0 * d[0]; }  // read a and b, write out

}  // namespace

std::vector<Case> elementwise_cases() {
  return {
      flat({.name = "fill", .what = "out (n) = 0.75", .tolerance = 0, .tolerance64 = 0,
            .bytes = [](const Dims& d) { return 4.0 * d[0]; },
            .make = [](Problem& p, Random&) { p.output("out", p.dims[0]); },
            .reference = [](Problem& p) { std::fill(p.out("out").begin(), p.out("out").end(), 0.75); },
            .call = call(op::fill<float>, &call_fill<float>, op::fill<double>, &call_fill<double>)}),
      flat({.name = "copy", .what = "out (n) = in (n), contiguous", .tolerance = 0, .tolerance64 = 0,
            .bytes = &bytes_unary,
            .make = [](Problem& p, Random& r) {
              p.input("in", r.normal(p.dims[0]));
              p.output("out", p.dims[0]);
            },
            .reference = [](Problem& p) { p.out("out") = p.in("in"); },
            .call = call(op::copy<float>, &call_copy<float>, op::copy<double>, &call_copy<double>)}),
      flat({.name = "cast", .what = "out (n) = in (n, int32) converted to the dtype under test", .tolerance = 0,
            .tolerance64 = 0, .bytes = &bytes_unary,
            .make = [](Problem& p, Random& r) {
              std::vector<std::int32_t> in = r.integers(p.dims[0], 2000000);
              for (std::size_t i = 0; i < in.size(); i += 2) in[i] -= 1000000;  // negative ones too
              p.indices("in", in);
              p.output("out", p.dims[0]);
            },
            .reference = [](Problem& p) { p.out("out") = p.in("in"); },
            .call = call(op::cast<float>, &call_cast, op::cast<double>, &call_cast)}),
      flat({.name = "neg", .what = "out (n) = -x (n)", .tolerance = 0, .tolerance64 = 0, .bytes = &bytes_unary,
            .make = &make_unary, .reference = &unary_reference<neg>,
            .call = call(op::neg<float>, &call_unary<float>, op::neg<double>, &call_unary<double>)}),
      flat({.name = "exp", .what = "out (n) = exp(x (n))", .bytes = &bytes_unary, .make = &make_unary,
            .reference = &unary_reference<exp_>,
            .call = call(op::exp<float>, &call_unary<float>, op::exp<double>, &call_unary<double>)}),
      flat({.name = "log", .what = "out (n) = log(x (n)), x > 0", .bytes = &bytes_unary, .make = &make_positive,
            .reference = &unary_reference<log_>,
            .call = call(op::log<float>, &call_unary<float>, op::log<double>, &call_unary<double>)}),
      flat({.name = "sqrt", .what = "out (n) = sqrt(x (n)), x > 0", .bytes = &bytes_unary, .make = &make_positive,
            .reference = &unary_reference<sqrt_>,
            .call = call(op::sqrt<float>, &call_unary<float>, op::sqrt<double>, &call_unary<double>)}),
      flat({.name = "tanh", .what = "out (n) = tanh(x (n))", .bytes = &bytes_unary, .make = &make_unary,
            .reference = &unary_reference<tanh_>,
            .call = call(op::tanh<float>, &call_unary<float>, op::tanh<double>, &call_unary<double>)}),
      flat({.name = "relu", .what = "out (n) = max(x (n), 0)", .tolerance = 0, .tolerance64 = 0,
            .bytes = &bytes_unary, .make = &make_unary, .reference = &unary_reference<relu>,
            .call = call(op::relu<float>, &call_unary<float>, op::relu<double>, &call_unary<double>)}),
      flat({.name = "sigmoid", .what = "out (n) = 1 / (1 + exp(-x (n)))", .bytes = &bytes_unary,
            .make = &make_unary, .reference = &unary_reference<sigmoid>,
            .call = call(op::sigmoid<float>, &call_unary<float>, op::sigmoid<double>, &call_unary<double>)}),
      flat({.name = "pow_scalar", .what = "out (n) = x (n)^2 (the exponent 2 has its own path)",
            .bytes = &bytes_unary, .make = &make_unary, .reference = &unary_reference<square>,
            .call = call(op::pow_scalar<float>, &call_pow2<float>, op::pow_scalar<double>, &call_pow2<double>)}),
      flat({.name = "pow_scalar/1.5", .op = "pow_scalar", .what = "out (n) = x (n)^1.5, x > 0",
            .bytes = &bytes_unary, .make = &make_positive, .reference = &unary_reference<pow15>,
            .call = call(op::pow_scalar<float>, &call_pow15<float>, op::pow_scalar<double>, &call_pow15<double>)}),
      flat({.name = "relu_backward", .what = "dx (n) = dout (n) where x (n) > 0, else 0", .tolerance = 0,
            .tolerance64 = 0, .bytes = &bytes_binary, .make = &make_unary_backward,
            .reference = &unary_backward_reference<relu_grad>,
            .call = call(op::relu_backward<float>, &call_unary_backward<float>, op::relu_backward<double>,
                         &call_unary_backward<double>),
            .grads = {{.output = "dx", .input = "x"}}, .loss = &unary_loss<relu>}),
      flat({.name = "add", .what = "out (n) = a (n) + b (n), contiguous, no broadcasting", .tolerance = 1e-6,
            .bytes = &bytes_binary, .make = &make_binary, .reference = &binary_reference<add>,
            .call = call(op::add<float>, &call_binary<float>, op::add<double>, &call_binary<double>)}),
      rows({.name = "add/rows", .op = "add", .what = "out (N, C) = a (N, C) + b (C), b broadcast (stride 0)",
            .chapter = "02", .tolerance = 1e-6,
            .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 4.0 * d[1]; }, .make = &make_binary_rows,
            .reference = &binary_reference<add>,
            .call = call(op::add<float>, &call_binary_rows<float>, op::add<double>, &call_binary_rows<double>)}),
      flat({.name = "sub", .what = "out (n) = a (n) - b (n)", .tolerance = 1e-6, .bytes = &bytes_binary,
            .make = &make_binary, .reference = &binary_reference<sub>,
            .call = call(op::sub<float>, &call_binary<float>, op::sub<double>, &call_binary<double>)}),
      flat({.name = "mul", .what = "out (n) = a (n) * b (n)", .tolerance = 1e-6, .bytes = &bytes_binary,
            .make = &make_binary, .reference = &binary_reference<mul>,
            .call = call(op::mul<float>, &call_binary<float>, op::mul<double>, &call_binary<double>)}),
      flat({.name = "div", .what = "out (n) = a (n) / b (n), |b| >= 0.5", .tolerance = 1e-6, .bytes = &bytes_binary,
            .make = &make_binary, .reference = &binary_reference<div>,
            .call = call(op::div<float>, &call_binary<float>, op::div<double>, &call_binary<double>)}),
      flat({.name = "masked_fill", .what = "out (n) = -3.5 where mask (n) != 0, else x (n)", .tolerance = 0,
            .tolerance64 = 0, .bytes = &bytes_binary,
            .make = [](Problem& p, Random& r) {
              p.input("x", r.normal(p.dims[0]));
              std::vector<float> mask = r.uniform(p.dims[0], 0.0f, 1.0f);
              for (float& m : mask) m = m < 0.3f ? 1.0f : 0.0f;
              p.input("mask", mask);
              p.output("out", p.dims[0]);
            },
            .reference = [](Problem& p) {
              const std::vector<double>&x = p.in("x"), &mask = p.in("mask");
              std::vector<double>& out = p.out("out");
              for (std::size_t i = 0; i < x.size(); ++i) out[i] = mask[i] != 0 ? -3.5 : x[i];
            },
            .call = call(op::masked_fill<float>, &call_masked_fill<float>, op::masked_fill<double>,
                         &call_masked_fill<double>)}),
      // --- chapter 12: GELU ----------------------------------------------------------------------
      flat({.name = "gelu_forward", .what = "out (n) = gelu(x (n)), the tanh approximation", .chapter = "12",
            .tolerance = 1e-4,  // tanhf is ~1e-7; the tanh.approx.f32 instruction (~5e-4) is not
            .bytes = &bytes_unary, .make = &make_unary, .reference = &unary_reference<gelu>,
            .call = call(op::gelu_forward<float>, &call_unary<float>, op::gelu_forward<double>,
                         &call_unary<double>, op::gelu_forward<bf16>, &call_unary<bf16>)}),
      flat({.name = "gelu_backward", .what = "dx (n) = dout (n) * gelu'(x (n))", .chapter = "12", .tolerance = 1e-4,
            .bytes = &bytes_binary, .make = &make_unary_backward, .reference = &unary_backward_reference<gelu_grad>,
            .call = call(op::gelu_backward<float>, &call_unary_backward<float>, op::gelu_backward<double>,
                         &call_unary_backward<double>, op::gelu_backward<bf16>, &call_unary_backward<bf16>),
            .grads = {{.output = "dx", .input = "x"}}, .loss = &unary_loss<gelu>}),
      flat({.name = "gelu_erf_forward", .what = "out (n) = x Phi(x), the exact GELU (Hugging Face's \"gelu\")",
            .chapter = "12", .tolerance = 1e-5,  // erfc by a fit of relative error 1.2e-7, and float rounding
            .bytes = &bytes_unary, .make = &make_unary, .reference = &unary_reference<gelu_erf>,
            .call = call(op::gelu_erf_forward<float>, &call_unary<float>, op::gelu_erf_forward<double>,
                         &call_unary<double>, op::gelu_erf_forward<bf16>, &call_unary<bf16>)}),
      flat({.name = "gelu_erf_backward", .what = "dx (n) = dout (n) * (Phi(x) + x phi(x)), the exact GELU's",
            .chapter = "12", .tolerance = 1e-5, .bytes = &bytes_binary, .make = &make_unary_backward,
            .reference = &unary_backward_reference<gelu_erf_grad>,
            .call = call(op::gelu_erf_backward<float>, &call_unary_backward<float>, op::gelu_erf_backward<double>,
                         &call_unary_backward<double>, op::gelu_erf_backward<bf16>, &call_unary_backward<bf16>),
            .grads = {{.output = "dx", .input = "x"}}, .loss = &unary_loss<gelu_erf>}),
      flat({.name = "gelu", .what = "out (n) = gelu(x (n)): kernels or composed (chapter 07), as the registry picks",
            .chapter = "07", .tolerance = 1e-4,
            .bytes = &bytes_unary, .make = &make_unary, .reference = &unary_reference<gelu>,
            .call = call(ops::variants::gelu<float>, &call_gelu, ops::variants::gelu<double>, &call_gelu),
            .gradcheck = &gelu_gradcheck}),
      rows({.name = "bias_gelu_forward", .what = "out (N, C) = gelu(x (N, C) + bias (C)), fused", .chapter = "12",
            .tolerance = 1e-4,
            .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 4.0 * d[1]; },  // x, out; bias once
            .make = &make_bias_gelu, .reference = &bias_gelu_reference,
            .call = call(op::bias_gelu_forward<float>, &call_bias_gelu_forward<float>, op::bias_gelu_forward<double>,
                         &call_bias_gelu_forward<double>, op::bias_gelu_forward<bf16>, &call_bias_gelu_forward<bf16>)}),
      rows({.name = "bias_gelu_backward",
            .what = "dx (N, C) = dout * gelu'(x + bias), dbias (C) = the column sums of dx, fused",
            .chapter = "12",
            .tolerance = 1e-4,
            // read dout and x, write dx; read bias, write dbias
            .bytes = [](const Dims& d) { return 12.0 * d[0] * d[1] + 8.0 * d[1]; },
            .make = &make_bias_gelu_backward, .reference = &bias_gelu_backward_reference,
            .call = call(op::bias_gelu_backward<float>, &call_bias_gelu_backward<float>,
                         op::bias_gelu_backward<double>, &call_bias_gelu_backward<double>,
                         op::bias_gelu_backward<bf16>, &call_bias_gelu_backward<bf16>),
            .grads = {{.output = "dx", .input = "x"}, {.output = "dbias", .input = "bias"}},
            .loss = &bias_gelu_loss}),
  };
}

}  // namespace brrr::lab
