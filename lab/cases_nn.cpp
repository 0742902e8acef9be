// lab/cases_nn.cpp: the kernel lab's cases for the embedding (chapter 07, the GPT) and for
// check_indices, the device-side index check of chapter 17 (putting it together). Read
// before: cases.h. Read next: cases_attention.cpp.
#include <algorithm>
#include <limits>

#include "lab/cases.h"

namespace brrr::lab {

namespace op = kernels::op;

namespace {

template <class T>
void call_embedding_forward(kernels::embedding_forward_fn<T> f, const Args& a) {
  f(a.f<T>("out"), a.f<T>("weight"), a.idx("idx"), a.dims[0], a.dims[1], a.stream);
}
template <class T>
void call_embedding_backward(kernels::embedding_backward_fn<T> f, const Args& a) {
  f(a.f<T>("dweight"), a.f<T>("dout"), a.idx("idx"), a.dims[0], a.dims[2], a.dims[1], a.stream);
}
constexpr std::int64_t kAllowed = -100;  // an ignore_index, which the check lets through
void call_check_indices(kernels::check_indices_fn f, const Args& a) {
  f(static_cast<std::int32_t*>(a.get("safe")), static_cast<std::int32_t*>(a.get("first_bad")), a.idx("idx"),
    a.dims[0], a.dims[1], kAllowed, a.stream);
}

// out[n, :] = weight[idx[n], :]
void embedding_forward_reference(Problem& p) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  const std::vector<double>&weight = p.in("weight"), &idx = p.in("idx");
  std::vector<double>& out = p.out("out");
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c) out[n * C + c] = weight[static_cast<std::int64_t>(idx[n]) * C + c];
}

// dweight[idx[n], :] += dout[n, :], for every n: a token seen twice gets both rows.
void make_embedding_backward(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], C = p.dims[1], V = p.dims[2];
  p.input("weight", r.normal(V * C));  // not read by the kernel: grad mode's forward
  p.input("dout", r.normal(N * C));
  p.indices("idx", r.integers(N, static_cast<std::int32_t>(V)));
  p.inout("dweight", r.normal(V * C));  // the kernel adds to what is there
}
void embedding_backward_reference(Problem& p) {
  const std::int64_t N = p.dims[0], C = p.dims[1];
  const std::vector<double>&dout = p.in("dout"), &idx = p.in("idx");
  std::vector<double>& dweight = p.out("dweight");
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t c = 0; c < C; ++c) dweight[static_cast<std::int64_t>(idx[n]) * C + c] += dout[n * C + c];
}
double embedding_loss(const Problem& p) {  // sum(dout * weight[idx])
  Problem forward = p;
  forward.output("out", p.dims[0] * p.dims[1]);
  embedding_forward_reference(forward);
  return dot(p.in("dout"), forward.out("out"));
}

// Indices in [0, limit), every 7th the allowed -100, and two bad ones (when there is room):
// limit itself two thirds of the way, and -5 at the end. first_bad starts at INT32_MAX.
void make_check_indices(Problem& p, Random& r) {
  const std::int64_t N = p.dims[0], limit = p.dims[1];
  std::vector<std::int32_t> idx = r.integers(N, static_cast<std::int32_t>(limit));
  for (std::int64_t i = 3; i < N; i += 7) idx[i] = static_cast<std::int32_t>(kAllowed);
  if (N > 2) {
    idx[2 * N / 3] = static_cast<std::int32_t>(limit);
    idx[N - 1] = -5;
  }
  p.indices("idx", idx);
  p.output("safe", N, Array::kInt32);
  p.indices("first_bad", {std::numeric_limits<std::int32_t>::max()});
  p.array("first_bad").role = Array::kInOut;
}
// safe[i] = idx[i] if it is in [0, limit) or allowed, else 0; first_bad = the first bad i.
void check_indices_reference(Problem& p) {
  const std::vector<double>& idx = p.in("idx");
  const double limit = static_cast<double>(p.dims[1]);
  std::vector<double>&safe = p.out("safe"), &first_bad = p.out("first_bad");
  for (std::size_t i = 0; i < idx.size(); ++i) {
    const bool ok = (idx[i] >= 0 && idx[i] < limit) || idx[i] == kAllowed;
    safe[i] = ok ? idx[i] : 0;
    if (!ok) first_bad[0] = std::min(first_bad[0], static_cast<double>(i));
  }
}

Case embedding(Case c) {
  c.chapter = "07";
  c.dim_names = {"N", "C", "V"};
  c.gpu_size = {8192, 768, 50304}, c.emulator_size = {64, 96, 500}, c.cpu_size = {8192, 768, 50304};
  c.shapes = {{1, 1, 1}, {9, 20, 50}, {33, 129, 17}};  // 33 rows of 17 tokens: repeats
  c.grad_shape = {5, 3, 4};
  return c;
}

}  // namespace

std::vector<Case> nn_cases() {
  return {
      embedding({.name = "embedding_forward", .what = "out (N, C) = rows idx (N) of weight (V, C)", .tolerance = 0,
                 .tolerance64 = 0,
                 .bytes = [](const Dims& d) { return 8.0 * d[0] * d[1] + 4.0 * d[0]; },  // the rows read, out, idx
                 .make = [](Problem& p, Random& r) {
                   const std::int64_t N = p.dims[0], C = p.dims[1], V = p.dims[2];
                   p.input("weight", r.normal(V * C));
                   p.indices("idx", r.integers(N, static_cast<std::int32_t>(V)));
                   p.output("out", N * C);
                 },
                 .reference = &embedding_forward_reference,
                 .call = call(op::embedding_forward<float>, &call_embedding_forward<float>,
                              op::embedding_forward<double>, &call_embedding_forward<double>)}),
      embedding({.name = "embedding_backward", .what = "dweight (V, C) += dout (N, C) rows at idx (N)",
                 .tolerance = 1e-5,  // a token's rows may be added in another order
                 // read dout and idx; read and write the rows of dweight touched
                 .bytes = [](const Dims& d) { return 12.0 * d[0] * d[1] + 4.0 * d[0]; },
                 .make = &make_embedding_backward, .reference = &embedding_backward_reference,
                 .call = call(op::embedding_backward<float>, &call_embedding_backward<float>,
                              op::embedding_backward<double>, &call_embedding_backward<double>),
                 .grads = {{.output = "dweight", .input = "weight", .accumulates = true}},
                 .loss = &embedding_loss}),
      Case{.name = "check_indices",
           .what = "safe (N) = idx (N) where in [0, limit) or -100, else 0; first_bad = the first bad position",
           .chapter = "17",
           .dim_names = {"N", "limit"},
           .gpu_size = {1 << 24, 50304}, .emulator_size = {1 << 16, 50304}, .cpu_size = {1 << 24, 50304},
           .shapes = {{1, 10}, {1003, 50}, {4099, 1000}},
           .tolerance = 0, .tolerance64 = 0,
           .bytes = [](const Dims& d) { return 8.0 * d[0]; },  // read idx, write safe
           .make = &make_check_indices, .reference = &check_indices_reference,
           .call = call(op::check_indices, &call_check_indices, op::check_indices, &call_check_indices)},
  };
}

}  // namespace brrr::lab
