// exercises/grading.cpp: what every grader uses: results, the guard that turns a grader's
// failure into a Result and the variant switch. Read before: grading.h.
// Read next: exercises/grader.cpp (the table).
#include "exercises/grading.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "exercises/student/student.h"
#include "kernels/registry.h"

namespace brrr::exercises {

Result result(Status status, std::string message) {
  Result r;
  r.status = status;
  r.message = std::move(message);
  return r;
}

Result guarded(const std::string& id, const std::function<Result()>& grader) {
  try {
    return grader();
  } catch (const Failure& f) {
    return result(Status::Failing, f.message);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    const bool stub = what.find(student::kNotWritten) != std::string::npos && what.find(id) != std::string::npos;
    return result(stub ? Status::NotStarted : Status::Failing, what);
  } catch (...) {
    return result(Status::Failing, "threw something that is not a std::exception");
  }
}

void with_kernel_variant(const std::string& op, const std::string& variant, const std::function<void()>& f,
                         DeviceType device) {
  bool has64 = false;  // matmul:bf16 has float32 kernels only
  for (const kernels::VariantInfo& v : kernels::variants(op)) has64 |= v.device.type == device && v.dtype == kFloat64;
  const std::string before32 = kernels::selected(op, device, kFloat32);
  const std::string before64 = has64 ? kernels::selected(op, device, kFloat64) : before32;
  struct Restore {
    const std::string &op, &v32, &v64;
    DeviceType device;
    ~Restore() {
      kernels::select(op, v64, device);
      kernels::select(op, v32, device);  // after: float32-only variants such as "blocked"
    }
  } restore{op, before32, before64, device};
  kernels::select(op, variant, device);
  f();
}

kernels::MatmulShape MatmulProblem::shape() const {
  kernels::MatmulShape s;
  s.batch = batch, s.M = M, s.N = N, s.K = K;
  s.trans_a = trans_a, s.trans_b = trans_b, s.accumulate = accumulate;
  s.stride_a = M * K, s.stride_b = broadcast_b ? 0 : K * N, s.stride_out = M * N;
  return s;
}

Tensor random_matrix(std::int64_t rows, std::int64_t cols, Generator& gen) {
  return rows * cols == 0 ? zeros({rows, cols}, kFloat64) : randn({rows, cols}, gen, kFloat64);
}

void check_matmul_out(const std::vector<float>& got, const std::vector<double>& want, const MatmulProblem& p,
                      const std::string& what, const char* reference) {
  const double tolerance = 1e-5 * std::sqrt(static_cast<double>(std::max<std::int64_t>(p.K, 1)));
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(static_cast<double>(got[i]) - want[i]) <= tolerance * std::max(1.0, std::abs(want[i]))))
      fail(what, *p.why ? " (" : "", p.why, *p.why ? ")" : "", ": batch ", p.batch, ", M ", p.M, ", N ", p.N, ", K ",
           p.K, p.trans_a ? ", trans_a" : "", p.trans_b ? ", trans_b" : "", p.accumulate ? ", accumulate" : "",
           p.broadcast_b ? ", b broadcast (stride 0)" : "", ": out[", i / (p.M * p.N), "][", (i % (p.M * p.N)) / p.N,
           "][", i % p.N, "] is ", got[i], ", ", reference, " ", want[i]);
}

}  // namespace brrr::exercises
