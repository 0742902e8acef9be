// lab/timing.cpp: the timer, and the peaks, the roofline's two numbers, measured here rather
// than read from a datasheet. Chapter 11. Read before: steps.h. Read next: report.cpp.
#include <algorithm>
#include <map>
#include <tuple>

#include "brrr/median_timer.h"
#include "lab/steps.h"

namespace brrr::lab {

// The peaks: the roofline's two numbers, measured here rather than read from a datasheet
//
// Bandwidth: copy a buffer much larger than any cache, device to device, and count each byte
// twice (read and written), as the ops' byte counts do. FLOP/s: float32 matmul at a size
// large enough to run at full speed, by cuBLAS when the device has it, else the device's
// default matmul (the registry's default is its fastest variant); for a case in bf16
// arithmetic (Case::peak_op), the same with matmul:bf16, whose products come twice as fast. On the emulator the numbers
// would describe the emulator, so no peak is measured there and no percentage is shown.

// The median and the min of `repeats` timed calls of `work`, after `warmup` untimed ones: brrr's
// one median timer (brrr/median_timer.h) on the target's clock, which waits for the warm-up
// calls, flushes the cache and times the call (CUDA events on a GPU). A slow variant stops
// after three runs past the budget.
Timing time_calls(Target& target, const std::function<void()>& work, int warmup, int repeats,
                  double budget_seconds) {
  const auto target_clock = [&](const std::function<void()>& call) {
    target.synchronize();
    target.flush_cache();
    return target.time_ms(call) * 1e-3;
  };
  const MedianTime t = time_median(work, warmup, repeats, target_clock, budget_seconds);
  Timing timing;
  timing.median_ms = t.median * 1e3;
  timing.min_ms = t.min * 1e3;
  timing.runs = t.runs;
  return timing;
}

namespace {

double bandwidth_peak(Target& target, bool gpu, std::string* how) {
  std::size_t bytes = gpu ? std::size_t{1} << 30 : std::size_t{256} << 20;
  Buffer a(target, bytes), b(target, bytes);
  target.copy_on_device(b.get(), a.get(), bytes);  // touch both: first-touch page faults are not bandwidth
  const Timing t = time_calls(target, [&] { target.copy_on_device(b.get(), a.get(), bytes); }, 2, gpu ? 20 : 10, 0);
  *how = format("%s of %s, read + write", gpu ? "device-to-device copy" : "parallel memcpy", bytes_text(bytes).c_str());
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e-3) / 1e9;
}

double flops_peak(Target& target, bool gpu, const std::string& op, std::string* how) {
  const std::vector<Variant> matmuls = variants_of(op, target.type(), kFloat32);
  if (matmuls.empty()) {
    *how = "no " + op + " on this device";
    return 0;
  }
  const Variant* best = &matmuls.front();  // highest priority
  for (const Variant& v : matmuls)
    if (v.name == "cublas") best = &v;
  const std::int64_t n = gpu ? 4096 : 2048;
  const Case& c = find_case(op);
  Problem p;
  p.dims = {n, n, n};
  Random random(1);
  c.make(p, random);  // random values: zeros would draw less power and run at a higher clock
  DeviceProblem device(target, p, false);
  device.upload(target, p);
  const Bound kernel = c.call.bind(target.type(), kFloat32, best->name);
  const Timing t = time_calls(target, [&] { kernel(device.args); }, 2, gpu ? 20 : 5, 0);
  *how = format("%s '%s', %lld^3%s", op.c_str(), best->name.c_str(), static_cast<long long>(n),
                op == "matmul" ? " float32" : "");
  return c.flops(p.dims) / (t.median_ms * 1e-3) / 1e12;
}

}  // namespace

Peaks measure_peaks(LabDevice device, bool bandwidth, bool flops, const std::string& flops_op) {
  // Measured once per process, device and op: several sizes of one op share them.
  static std::map<std::pair<LabDevice, std::string>, std::pair<double, std::string>> measured;
  Peaks peaks;
  if (device == LabDevice::Emulator) {
    peaks.bandwidth_how = peaks.flops_how = "not measured on the emulator";
    return peaks;
  }
  Target target(device);
  if (target.emulated()) {  // --device cuda, with BRRR_CUDA_EMULATOR=1
    peaks.bandwidth_how = peaks.flops_how = "not measured on the emulator";
    return peaks;
  }
  const bool gpu = device == LabDevice::CUDA;
  if (bandwidth) {
    auto it = measured.find({device, ""});
    if (it == measured.end()) {
      std::string how;
      const double value = bandwidth_peak(target, gpu, &how);
      it = measured.insert({{device, ""}, {value, how}}).first;
    }
    std::tie(peaks.bandwidth_gbs, peaks.bandwidth_how) = it->second;
  }
  if (flops) {
    auto it = measured.find({device, flops_op});
    if (it == measured.end()) {
      std::string how;
      const double value = flops_peak(target, gpu, flops_op, &how);
      it = measured.insert({{device, flops_op}, {value, how}}).first;
    }
    std::tie(peaks.tflops, peaks.flops_how) = it->second;
  }
  return peaks;
}

void time_variant(VariantResult& r, Target& target, const Case& c, double traffic, DeviceProblem& device,
                  const Bound& kernel, const Peaks& peaks, int repeats, double budget_seconds, std::FILE* out) {
  const bool gpu = target.type() == DeviceType::CUDA && !target.emulated();
  const Timing t = time_calls(target, [&] { kernel(device.args); }, gpu ? 2 : 0, repeats, budget_seconds);
  r.timed = true;
  r.median_ms = t.median_ms;
  r.min_ms = t.min_ms;
  const double seconds = t.median_ms * 1e-3;
  r.rate = c.report_flops ? c.flops(device.args.dims) / seconds / 1e12 : traffic / seconds / 1e9;
  const double peak = c.report_flops ? peaks.tflops : peaks.bandwidth_gbs;
  if (peak > 0) r.percent_of_peak = 100.0 * r.rate / peak;
  say(out, "  %.4f ms median, %.4f ms min over %d runs\n", t.median_ms, t.min_ms, t.runs);
}

}  // namespace brrr::lab
