// exercises/student/matmul_tiled_grader.cpp: the grader of ex04.1 (chapter 04), the tiled CPU
// matmul against the naive kernel. Read before: the stub beside it, then exercises/grading.h. Read
// next: exercises/student/bpe_merge_grader.cpp (ex06.1).
#include <cmath>

#include "brrr/median_timer.h"
#include "exercises/grading.h"
#include "kernels/registry.h"

namespace brrr::exercises {

namespace {
template <class T>
void check_matmul_cases(const std::string& variant) {
  using Fn = kernels::matmul_fn<T>;
  Fn got_fn = nullptr, ref_fn = nullptr;
  with_kernel_variant("matmul", variant, [&] {
    got_fn = kernels::lookup(kernels::op::matmul<T>, DeviceType::CPU);
  });
  with_kernel_variant("matmul", "naive", [&] {
    ref_fn = kernels::lookup(kernels::op::matmul<T>, DeviceType::CPU);
  });
  struct Case {
    std::int64_t batch, M, N, K;
    bool trans_a, trans_b, accumulate, broadcast_b;
  };
  const std::vector<Case> cases = {
      {1, 1, 1, 1, false, false, false, false},     {1, 7, 5, 3, false, false, false, false},
      {1, 65, 130, 300, false, false, false, false}, {1, 33, 70, 129, true, false, false, false},
      {1, 70, 33, 257, false, true, false, false},  {1, 64, 64, 64, true, true, false, false},
      {1, 20, 30, 40, false, false, true, false},   {3, 17, 9, 11, false, false, false, false},
      {2, 9, 70, 5, false, true, true, true},       {1, 5, 6, 0, false, false, false, false},
      {1, 0, 6, 3, false, false, false, false},
  };
  Generator gen(7);
  for (const Case& c : cases) {
    kernels::MatmulShape s;
    s.batch = c.batch, s.M = c.M, s.N = c.N, s.K = c.K;
    s.trans_a = c.trans_a, s.trans_b = c.trans_b, s.accumulate = c.accumulate;
    s.stride_a = c.M * c.K, s.stride_b = c.broadcast_b ? 0 : c.K * c.N, s.stride_out = c.M * c.N;
    const Tensor a = randn({c.batch, c.M * c.K}, gen, dtype_of<T>());
    const Tensor b = randn({c.broadcast_b ? 1 : c.batch, c.K * c.N}, gen, dtype_of<T>());
    const Tensor init = randn({c.batch, c.M * c.N}, gen, dtype_of<T>());
    Tensor ref = init.clone(), got = init.clone();
    ref_fn(ref.data_ptr<T>(), a.data_ptr<T>(), b.data_ptr<T>(), s, nullptr);
    got_fn(got.data_ptr<T>(), a.data_ptr<T>(), b.data_ptr<T>(), s, nullptr);
    const std::vector<T> r = ref.to_vector<T>(), g = got.to_vector<T>();
    const double tolerance = (sizeof(T) == 4 ? 1e-5 : 1e-12) * std::sqrt(static_cast<double>(std::max<std::int64_t>(c.K, 1)));
    for (std::size_t i = 0; i < r.size(); ++i) {
      const double err = std::abs(static_cast<double>(r[i]) - static_cast<double>(g[i]));
      if (!(err <= tolerance))
        fail(dtype_name(dtype_of<T>()), " batch ", c.batch, ", M ", c.M, ", N ", c.N, ", K ", c.K,
             c.trans_a ? ", trans_a" : "", c.trans_b ? ", trans_b" : "", c.accumulate ? ", accumulate" : "",
             c.broadcast_b ? ", b broadcast (stride 0)" : "", ": out[", i / (c.M * c.N), "][", (i % (c.M * c.N)) / c.N,
             "][", i % c.N, "] is ", g[i], ", naive gives ", r[i]);
    }
  }
}

}  // namespace

Result grade_matmul_tiled(const std::string& variant) {
  check_matmul_cases<float>(variant);
  check_matmul_cases<double>(variant);
  // The same bits for 1 and 2 threads, and the registered variant inside ops::matmul.
  Generator gen(3);
  const Tensor a = randn({150, 270}, gen), b = randn({270, 130}, gen);
  const int threads = get_num_threads();
  std::vector<float> one, two;
  with_kernel_variant("matmul", variant, [&] {
    set_num_threads(1);
    one = ops::matmul(a, b).to_vector<float>();
    set_num_threads(2);
    two = ops::matmul(a, b).to_vector<float>();
  });
  set_num_threads(threads);
  if (one != two) fail("ops::matmul (150, 270) @ (270, 130): 1 and 2 threads give different bits");

  // Time against the default variant on one square problem.
  Result r = result(Status::Passing, "11 cases x float32, float64 agree with naive; same bits for 1 and 2 threads");
  r.reference_variant = kernels::selected("matmul", DeviceType::CPU, kFloat32);
  const Tensor x = randn({384, 384}, gen), w = randn({384, 384}, gen);
  const auto product = [&] { ops::matmul(x, w); };
  with_kernel_variant("matmul", variant, [&] { r.seconds = time_median(product, 1, 5).median; });
  r.reference_seconds = time_median(product, 1, 5).median;
  return r;
}

}  // namespace brrr::exercises
