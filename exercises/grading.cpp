// exercises/grading.cpp: what every grader uses: results, the guard that turns a grader's
// failure into a Result and the variant switch. Read before: grading.h.
// Read next: exercises/grader.cpp (the table).
#include "exercises/grading.h"

#include <algorithm>
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

}  // namespace brrr::exercises
