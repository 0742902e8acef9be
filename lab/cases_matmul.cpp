// lab/cases_matmul.cpp: the kernel lab's cases for matmul (chapter 04 on the CPU, chapter 14
// on the GPU) in its three layouts, linear_gelu, the MLP's first half, an op whose
// variants are built from ops (framework/src/op_variants.cpp), and chapter 14's transpose.
// Read before: cases.h. Read next: cases_decode.cpp.
#include "brrr/bfloat16.h"
#include "brrr/generator.h"
#include "brrr/ops.h"
#include "brrr/tensor.h"
#include "kernels/transpose.h"
#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

// --- matmul: the textbook loop, in double ----------------------------------------------------

// out[b] (M, N) (+)= A (M, K) @ B (K, N), where A = a[b] or a[b]^T (a stored (K, M)), B = b[b]
// or b[b]^T (b stored (N, K)); b is shared by the batch when shared_b. Each row of out is
// out[i, :] = sum_k A[i, k] B[k, :], the loops ordered i, k, j so that the inner loop runs along
// a row of B and of out (contiguous, vectorized), and the rows spread over the cores. With B
// transposed, B's columns are its stored rows: out[i, j] is a dot product of two contiguous
// vectors instead. A's row i is gathered first where A is transposed.
void matmul_loop(const std::vector<double>& a, const std::vector<double>& b, std::vector<double>& out,
                 std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, bool trans_a, bool trans_b,
                 bool shared_b, bool accumulate) {
  parallel_rows(batch * M, [&](std::int64_t row) {
    const std::int64_t z = row / M, i = row % M;
    const double* A = a.data() + z * M * K;
    const double* B = b.data() + (shared_b ? 0 : z * K * N);
    std::vector<double> a_row(static_cast<std::size_t>(K)), sum(static_cast<std::size_t>(N), 0.0);
    for (std::int64_t k = 0; k < K; ++k) a_row[k] = trans_a ? A[k * M + i] : A[i * K + k];
    if (trans_b) {
      for (std::int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += a_row[k] * B[j * K + k];
        sum[j] = s;
      }
    } else {
      for (std::int64_t k = 0; k < K; ++k) {
        const double aik = a_row[k];
        const double* Bk = B + k * N;
        for (std::int64_t j = 0; j < N; ++j) sum[j] += aik * Bk[j];
      }
    }
    double* o = out.data() + (z * M + i) * N;
    for (std::int64_t j = 0; j < N; ++j) o[j] = accumulate ? o[j] + sum[j] : sum[j];
  });
}
void matmul_loop(Problem& p, std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, bool trans_a,
                 bool trans_b, bool shared_b, bool accumulate) {
  matmul_loop(p.in("a"), p.in("b"), p.out("out"), batch, M, N, K, trans_a, trans_b, shared_b, accumulate);
}

template <class T>
void call_matmul(kernels::matmul_fn<T> f, const Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  f(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), s, a.stream);
}
// out += a^T @ b^T: a stored (K, M), b stored (N, K), as the weight gradients are.
template <class T>
void call_matmul_transposed(kernels::matmul_fn<T> f, const Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  s.trans_a = s.trans_b = true;
  s.accumulate = true;
  f(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), s, a.stream);
}
// batch (M, K) @ one (K, N): b's batch stride 0, as a linear layer over (B, T, C) inputs.
template <class T>
void call_matmul_batched(kernels::matmul_fn<T> f, const Args& a) {
  kernels::MatmulShape s;
  s.batch = a.dims[0], s.M = a.dims[1], s.N = a.dims[2], s.K = a.dims[3];
  s.stride_a = s.M * s.K, s.stride_b = 0, s.stride_out = s.M * s.N;
  f(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), s, a.stream);
}

template <class T>
void call_transpose(kernels::transpose_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("in"), a.dims[0], a.dims[1], a.stream);
}

Case matmul_case(Case c) {
  c.chapter = "14";
  c.dim_names = {"M", "N", "K"};
  c.gpu_size = {4096, 4096, 4096}, c.emulator_size = {128, 128, 128}, c.cpu_size = {1024, 1024, 1024};
  // one element; sizes that are no multiple of any tile (ragged edges in every direction)
  c.shapes = {{1, 1, 1}, {67, 45, 33}, {17, 130, 65}};
  c.tolerance = 1e-4;  // sums of K products: float32 rounding grows like sqrt(K)
  // Variant 10 takes its operands as tf32: judged against the tf32 baseline (Case::baseline).
  if (c.op_name() == "matmul") c.tf32_variants = {"tf32_pipelined"};
  c.report_flops = true;
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[2] * d[1] + d[0] * d[1]); };
  c.flops = [](const Dims& d) { return 2.0 * d[0] * d[1] * d[2]; };
  return c;
}

// batch (M, K) @ one (K, N), b broadcast: four sizes where the other layouts have three.
Case matmul_batched_case() {
  Case c = matmul_case(
      {.name = "matmul/batched", .op = "matmul",
       .what = "out (batch, M, N) = a (batch, M, K) @ b (K, N), b broadcast over the batch (stride 0)",
       .make = [](Problem& p, Random& r) {
         const std::int64_t B = p.dims[0], M = p.dims[1], N = p.dims[2], K = p.dims[3];
         p.input("a", r.normal(B * M * K));
         p.input("b", r.normal(K * N));
         p.output("out", B * M * N);
       },
       .reference = [](Problem& p) {
         matmul_loop(p, p.dims[0], p.dims[1], p.dims[2], p.dims[3], false, false, true, false);
       },
       .call = call(op::matmul<float>, &call_matmul_batched<float>, op::matmul<double>,
                    &call_matmul_batched<double>)});
  c.dim_names = {"batch", "M", "N", "K"};
  c.gpu_size = {8, 1024, 2304, 768}, c.emulator_size = {2, 64, 96, 64}, c.cpu_size = {8, 256, 2304, 768};
  c.shapes = {{1, 1, 1, 1}, {3, 17, 45, 33}};
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[1] * d[3] + d[3] * d[2] + d[0] * d[1] * d[2]); };
  c.flops = [](const Dims& d) { return 2.0 * d[0] * d[1] * d[2] * d[3]; };
  return c;
}

// --- matmul:bf16: the product of the operands rounded to bfloat16 (chapter 18) ----------------

// out (M, N) = bf16(a) (M, K) @ bf16(b) (K, N): each operand rounded to the nearest bf16 (ties
// to even, brrr/bfloat16.h), once, then matmul's loop in double. What is left to the kernel's
// error is its float32 sum; a kernel that skipped the rounding would be off by about 2^-9.
std::vector<double> rounded_to_bf16(std::vector<double> v) {
  for (double& x : v) x = round_to_bf16(static_cast<float>(x));
  return v;
}
void matmul_bf16_reference(Problem& p) {
  matmul_loop(rounded_to_bf16(p.in("a")), rounded_to_bf16(p.in("b")), p.out("out"), 1, p.dims[0], p.dims[1],
              p.dims[2], false, false, false, false);
}

void call_matmul_bf16(kernels::matmul_fn<float> f, const Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  f(a.f<float>("out"), a.f<float>("a"), a.f<float>("b"), s, a.stream);
}

// --- matmul/bf16: matmul on bf16 data, float32 out (chapter 18; the CUDA matmul's variant 12) ---------

void call_matmul_bf16_memory(kernels::matmul_on_bf16_fn f, const Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  f(a.f<float>("out"), a.f<bf16>("a"), a.f<bf16>("b"), s, a.stream);
}

// Run with --dtype bfloat16 (its data is bf16 only): a and b are uploaded as bf16, out stays
// float32 (Array::kFloat32), and the reference is matmul:bf16's on the same rounded values, so
// only the float32 sums are left to differ: its bf16 baseline (the same product, float32 out)
// is that reference, and a variant is held to 2x its ~1e-7 plus matmul's 1e-4 (the floor).
Case matmul_bf16_memory_case() {
  Case c = matmul_case({.name = "matmul/bf16",
                        .op = "matmul",
                        .what = "out (M, N) float32 = a (M, K) @ b (K, N), a and b bfloat16 in memory",
                        .make = [](Problem& p, Random& r) {
                          const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
                          p.input("a", r.normal(M * K));
                          p.input("b", r.normal(K * N));
                          p.output("out", M * N, Array::kFloat32);
                        },
                        .reference = &matmul_bf16_reference,
                        .call = call(op::matmul_on_bf16, &call_matmul_bf16_memory, op::matmul_on_bf16,
                                     &call_matmul_bf16_memory)});
  c.chapter = "18";
  c.peak_op = "matmul:bf16";  // % of the best bf16 GEMM's FLOP/s (cuBLAS's on a GPU)
  c.shapes = {{1, 1, 1}, {67, 45, 33}, {17, 130, 66}};
  // In float32 bytes, as every case counts them: the lab scales a and b to their 2 bytes.
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[2] * d[1] + d[0] * d[1]); };
  return c;
}

Case matmul_bf16_case() {
  // float32 data only: the same descriptor twice makes the call "one dtype" (lab/kernel_lab.h).
  Case c = matmul_case({.name = "matmul:bf16",
                        .what = "out (M, N) = bf16(a) (M, K) @ bf16(b) (K, N), float32 in memory and in the sums",
                        .make = [](Problem& p, Random& r) {
                          const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
                          p.input("a", r.normal(M * K));
                          p.input("b", r.normal(K * N));
                          p.output("out", M * N);
                        },
                        .reference = &matmul_bf16_reference,
                        .call = call(op::matmul<float>.autocast(), &call_matmul_bf16, op::matmul<float>.autocast(),
                                     &call_matmul_bf16)});
  c.chapter = "18";
  c.peak_op = "matmul:bf16";  // % of the best bf16 GEMM's FLOP/s, not of float32's
  c.cpu_size = {2048, 2048, 2048};
  // odd K (the last pair of k padded with a zero), ragged tiles in every direction
  c.shapes = {{1, 1, 1}, {67, 45, 33}, {17, 130, 66}};
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[2] * d[1] + d[0] * d[1]); };
  return c;
}

// --- matmul_bias_gelu: a GEMM with bias and GELU in its epilogue (chapter 14, variant 11) ----

// pre (M, N) = a (M, K) @ b (K, N); out = gelu(pre + bias), bias (N) added to every row.
void matmul_bias_gelu_reference(Problem& p) {
  matmul_loop(p, 1, p.dims[0], p.dims[1], p.dims[2], false, false, false, false);
  const std::int64_t M = p.dims[0], N = p.dims[1];
  const std::vector<double>& bias = p.in("bias");
  std::vector<double>&out = p.out("out"), &pre = p.out("pre");
  for (std::int64_t e = 0; e < M * N; ++e) {
    pre[e] = out[e];
    out[e] = gelu(pre[e] + bias[e % N]);
  }
}

template <class T>
void call_matmul_bias_gelu(kernels::matmul_bias_gelu_fn<T> f, const Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  f(a.f<T>("out"), a.f<T>("pre"), a.f<T>("a"), a.f<T>("b"), a.f<T>("bias"), s, a.stream);
}

Case matmul_bias_gelu_case() {
  Case c = matmul_case({.name = "matmul_bias_gelu",
                        .what = "out (M, N) = gelu(a (M, K) @ b (K, N) + bias (N)), pre = a @ b: a GEMM with its "
                                "epilogue fused",
                        .make = [](Problem& p, Random& r) {
                          const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
                          p.input("a", r.normal(M * K));
                          p.input("b", r.normal(K * N, 0.0f, 0.3f));
                          p.input("bias", r.normal(N, 0.0f, 0.5f));
                          p.output("out", M * N);
                          p.output("pre", M * N);
                        },
                        .reference = &matmul_bias_gelu_reference,
                        .call = call(op::matmul_bias_gelu<float>, &call_matmul_bias_gelu<float>,
                                     op::matmul_bias_gelu<double>, &call_matmul_bias_gelu<double>)});
  // Variant 11 is variant 10's tf32 products with the epilogue: its baseline rounds a and b only
  // (the bias is added in float32, after the product).
  c.tf32_variants = {"tf32_epilogue"};
  c.baseline = [](Problem& p, float (*round)(float)) {
    for (const char* name : {"a", "b"})
      for (double& x : p.array(name).values) x = round(static_cast<float>(x));
    matmul_bias_gelu_reference(p);
  };
  // N odd (the epilogue's column pairs end half way), ragged tiles in every direction
  c.shapes = {{1, 1, 1}, {67, 45, 33}, {17, 131, 65}};
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[2] * d[1] + d[1] + 2 * d[0] * d[1]); };
  return c;
}

// --- matmul_bias_gelu/bf16: the fused epilogue on bf16 data (chapter 18; the CUDA matmul's variant 14) ---

void call_matmul_bias_gelu_bf16_memory(kernels::matmul_bias_gelu_on_bf16_fn f, const Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  f(a.f<float>("out"), a.f<float>("pre"), a.f<bf16>("a"), a.f<bf16>("b"), a.f<float>("bias"), s, a.stream);
}

// Run with --dtype bfloat16: a and b bf16 in memory (the lab rounds them, so the reference sees
// the same values), bias, out and pre float32, as matmul/bf16 with matmul_bias_gelu's epilogue.
Case matmul_bias_gelu_bf16_memory_case() {
  Case c = matmul_case({.name = "matmul_bias_gelu/bf16",
                        .op = "matmul_bias_gelu",
                        .what = "out (M, N) float32 = gelu(a (M, K) @ b (K, N) + bias (N)), pre = a @ b, a and b "
                                "bfloat16 in memory",
                        .make = [](Problem& p, Random& r) {
                          const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
                          p.input("a", r.normal(M * K));
                          p.input("b", r.normal(K * N, 0.0f, 0.3f));
                          p.input("bias", r.normal(N, 0.0f, 0.5f), Array::kFloat32);
                          p.output("out", M * N, Array::kFloat32);
                          p.output("pre", M * N, Array::kFloat32);
                        },
                        .reference = &matmul_bias_gelu_reference,
                        .call = call(op::matmul_bias_gelu_on_bf16, &call_matmul_bias_gelu_bf16_memory,
                                     op::matmul_bias_gelu_on_bf16, &call_matmul_bias_gelu_bf16_memory)});
  c.chapter = "18";
  c.peak_op = "matmul:bf16";  // % of the best bf16 GEMM's FLOP/s (cuBLAS's on a GPU)
  c.shapes = {{1, 1, 1}, {67, 45, 33}, {17, 131, 66}};  // N odd: the epilogue's column pairs end half way
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[2] * d[1] + d[1] + 2 * d[0] * d[1]); };
  return c;
}

// --- matmul_epilogue/bf16: the bf16 step's linear layer as one op (chapter 18, section 11) ---

// pre (M, N) = a (M, K) @ b^T + bias, b stored (N, K) as nn::Linear's weight; out = gelu(pre).
void matmul_epilogue_reference(Problem& p) {
  const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
  matmul_loop(p, 1, M, N, K, false, true, false, false);
  const std::vector<double>& bias = p.in("bias");
  std::vector<double>&out = p.out("out"), &pre = p.out("pre");
  for (std::int64_t e = 0; e < M * N; ++e) {
    pre[e] = out[e] + bias[e % N];
    out[e] = gelu(pre[e]);
  }
}

void call_matmul_epilogue_bf16(kernels::matmul_epilogue_on_bf16_fn f, const Args& a) {
  kernels::MatmulShape s;
  s.M = a.dims[0], s.N = a.dims[1], s.K = a.dims[2];
  s.trans_b = true;
  f(a.f<bf16>("out"), a.f<bf16>("pre"), a.f<bf16>("a"), a.f<bf16>("b"), a.f<bf16>("bias"), true, s, a.stream);
}

// Run with --dtype bfloat16: every array bf16 in memory, as the step's (the lab rounds the
// inputs, so the reference sees the same values, and judges out and pre against its bf16
// baseline: the float64 result rounded to bf16 once, which is the best a bf16 output can be).
Case matmul_epilogue_bf16_case() {
  Case c = matmul_case({.name = "matmul_epilogue/bf16",
                        .op = "matmul_epilogue",
                        .what = "out (M, N) = gelu(a (M, K) @ b (N, K)^T + bias (N)), pre = the sum before GELU: "
                                "the bf16 step's c_fc, bfloat16 in memory",
                        .make = [](Problem& p, Random& r) {
                          const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
                          p.input("a", r.normal(M * K));
                          p.input("b", r.normal(N * K, 0.0f, 0.3f));
                          p.input("bias", r.normal(N, 0.0f, 0.5f));
                          p.output("out", M * N);
                          p.output("pre", M * N);
                        },
                        .reference = &matmul_epilogue_reference,
                        .call = call(op::matmul_epilogue_on_bf16, &call_matmul_epilogue_bf16,
                                     op::matmul_epilogue_on_bf16, &call_matmul_epilogue_bf16)});
  c.chapter = "18";
  c.peak_op = "matmul:bf16";  // % of the best bf16 GEMM's FLOP/s (cuBLAS's on a GPU)
  // GPT-2's c_fc at batch 16, T 1024 on a GPU
  c.gpu_size = {16384, 3072, 768}, c.emulator_size = {64, 96, 64}, c.cpu_size = {2048, 3072, 768};
  // N odd and not a multiple of 8 (cuBLASLt's GELU input wants multiples of 8: the fallback)
  c.shapes = {{1, 1, 1}, {67, 45, 33}, {17, 136, 66}};
  // read a, b and the bias, write out and pre: in float32 bytes, as every case counts them (the
  // lab scales bf16 arrays to their 2 bytes)
  c.bytes = [](const Dims& d) { return 4.0 * (d[0] * d[2] + d[2] * d[1] + d[1] + 2 * d[0] * d[1]); };
  return c;
}

// --- linear_gelu: gelu(x @ weight^T + bias), variants built from ops -------------------------

// x (N, in), weight (out, in), bias (out): as nn::Linear stores them.
void linear_gelu_reference(Problem& p) {
  const std::int64_t N = p.dims[0], in = p.dims[1], out_features = p.dims[2];
  const std::vector<double>&x = p.in("x"), &w = p.in("weight"), &bias = p.in("bias");
  std::vector<double>& out = p.out("out");
  parallel_rows(N, [&](std::int64_t n) {
    for (std::int64_t o = 0; o < out_features; ++o) {
      double s = bias[o];
      for (std::int64_t i = 0; i < in; ++i) s += x[n * in + i] * w[o * in + i];
      out[n * out_features + o] = gelu(s);
    }
  });
}

void call_linear_gelu(ops::variants::linear_gelu_fn f, const Args& a) {
  const std::int64_t N = a.dims[0], in = a.dims[1], out = a.dims[2];
  a.store("out", f(a.tensor("x", {N, in}, a.dtype), a.tensor("weight", {out, in}, a.dtype),
                   a.tensor("bias", {out}, a.dtype)));
}

// grad mode: brrr::gradcheck through autograd, on the variant alone, in float64.
GradcheckResult linear_gelu_gradcheck(const std::string& variant, Device device) {
  const auto fn = kernels::lookup_variant(ops::variants::linear_gelu<double>, device.type, variant);
  BRRR_CHECK(fn != nullptr, "kernel-lab linear_gelu: no variant '", variant, "'");
  Generator gen(7);
  const TensorOptions options = TensorOptions().dtype(kFloat64).device(device).requires_grad(true);
  const std::vector<Tensor> inputs = {randn({3, 5}, gen, options), randn({4, 5}, gen, options),
                                      randn({4}, gen, options)};
  return gradcheck([fn](const std::vector<Tensor>& x) { return fn(x[0], x[1], x[2]); }, inputs);
}

}  // namespace

std::vector<Case> matmul_cases() {
  return {
      matmul_case({.name = "matmul", .what = "out (M, N) = a (M, K) @ b (K, N), row-major",
                   .make = [](Problem& p, Random& r) {
                     const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
                     p.input("a", r.normal(M * K));
                     p.input("b", r.normal(K * N));
                     p.output("out", M * N);
                   },
                   .reference = [](Problem& p) {
                     matmul_loop(p, 1, p.dims[0], p.dims[1], p.dims[2], false, false, false, false);
                   },
                   .call = call(op::matmul<float>, &call_matmul<float>, op::matmul<double>, &call_matmul<double>)}),
      matmul_case({.name = "matmul/transposed", .op = "matmul",
                   .what = "out (M, N) += a^T @ b^T, a stored (K, M), b stored (N, K) (weight gradients)",
                   .make = [](Problem& p, Random& r) {
                     const std::int64_t M = p.dims[0], N = p.dims[1], K = p.dims[2];
                     p.input("a", r.normal(K * M));
                     p.input("b", r.normal(N * K));
                     p.inout("out", r.normal(M * N));  // accumulate: what was there is added to
                   },
                   .reference = [](Problem& p) {
                     matmul_loop(p, 1, p.dims[0], p.dims[1], p.dims[2], true, true, false, true);
                   },
                   .call = call(op::matmul<float>, &call_matmul_transposed<float>, op::matmul<double>,
                                &call_matmul_transposed<double>)}),
      matmul_batched_case(),
      matmul_bf16_case(),
      matmul_bf16_memory_case(),
      matmul_bias_gelu_case(),
      matmul_bias_gelu_bf16_memory_case(),
      matmul_epilogue_bf16_case(),
      Case{.name = "linear_gelu",
           .what = "out (N, out) = gelu(x (N, in) @ weight (out, in)^T + bias (out)), variants built from ops",
           .chapter = "14",
           .dim_names = {"N", "in", "out"},
           .gpu_size = {8192, 768, 3072}, .emulator_size = {64, 96, 384}, .cpu_size = {2048, 768, 3072},
           .shapes = {{1, 1, 1}, {7, 33, 45}},
           .tolerance = 1e-4,
           .report_flops = true,
           .bytes = [](const Dims& d) { return 4.0 * (d[0] * d[1] + d[2] * d[1] + d[2] + d[0] * d[2]); },
           .flops = [](const Dims& d) { return 2.0 * d[0] * d[1] * d[2]; },
           .make = [](Problem& p, Random& r) {
             const std::int64_t N = p.dims[0], in = p.dims[1], out = p.dims[2];
             p.input("x", r.normal(N * in));
             p.input("weight", r.normal(out * in, 0.0f, 0.3f));
             p.input("bias", r.normal(out, 0.0f, 0.5f));
             p.output("out", N * out);
           },
           .reference = &linear_gelu_reference,
           .call = call(ops::variants::linear_gelu<float>, &call_linear_gelu, ops::variants::linear_gelu<double>,
                        &call_linear_gelu),
           .gradcheck = &linear_gelu_gradcheck},
      // Chapter 14's memory section and exercise ex14.2: the copy whose loads and stores cannot
      // both be coalesced without shared memory.
      Case{.name = "transpose",
           .what = "out (N, M) = in (M, N)^T, both row-major",
           .chapter = "14",
           .dim_names = {"M", "N"},
           .gpu_size = {8192, 8192}, .emulator_size = {256, 256}, .cpu_size = {4096, 4096},
           // one element, one row, one column; sizes that are no multiple of a 32 x 32 tile
           .shapes = {{1, 1}, {1, 45}, {45, 1}, {67, 45}, {33, 130}},
           .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1]; },  // in read once, out written once
           .make = [](Problem& p, Random& r) {
             p.input("in", r.normal(p.dims[0] * p.dims[1]));
             p.output("out", p.dims[0] * p.dims[1]);
           },
           .reference = [](Problem& p) {
             const std::int64_t M = p.dims[0], N = p.dims[1];
             const std::vector<double>& in = p.in("in");
             std::vector<double>& out = p.out("out");
             for (std::int64_t i = 0; i < M; ++i)
               for (std::int64_t j = 0; j < N; ++j) out[j * M + i] = in[i * N + j];
           },
           .call = call(op::transpose<float>, &call_transpose<float>, op::transpose<double>, &call_transpose<double>)},
  };
}

}  // namespace brrr::lab
