// lab/device.cpp: the lab's shared helpers (formatting, the clock), the CPU's cache size and
// the variants of an op as the registry lists them. Chapter 11. Read before: device.h.
// Read next: check.cpp.
#include "lab/device.h"

#include <unistd.h>

#include <algorithm>
#include <cstdarg>

#include "brrr/ops.h"
#include "brrr/strings.h"

namespace brrr::lab {

std::string format(const char* fmt, ...) {
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  return text;
}

void say(std::FILE* out, const char* fmt, ...) {
  if (!out) return;
  va_list args;
  va_start(args, fmt);
  std::vfprintf(out, fmt, args);
  va_end(args);
  std::fflush(out);
}

std::string bytes_text(double bytes) {
  if (bytes < (1 << 20)) return format("%.1f KiB", bytes / (1 << 10));
  if (bytes < (1 << 30)) return format("%.1f MiB", bytes / (1 << 20));
  return format("%.2f GiB", bytes / (1 << 30));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::size_t cpu_cache_bytes() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  // Virtual machines report the whole socket's L3 (hundreds of MiB): cap what is flushed.
  return l3 > 0 ? std::min<std::size_t>(static_cast<std::size_t>(l3), std::size_t{64} << 20) : std::size_t{32} << 20;
}

std::vector<Variant> variants_of(const std::string& op, DeviceType device, DType dtype) {
  ops::register_op_variants();  // the framework's ops built from ops join the registry
  std::vector<Variant> found;
  for (const kernels::VariantInfo& info : kernels::variants(op))
    if (info.device.type == device && info.dtype == dtype) found.push_back({info.variant, info.selected, info.meta});
  return found;
}

std::vector<Variant> pick_variants(const std::vector<Variant>& all, const std::string& wanted,
                                   const std::string& case_name, const std::string& where) {
  if (wanted == "all") return all;
  std::vector<std::string> names;
  for (const Variant& v : all) {
    if (v.name == wanted) return {v};
    names.push_back(v.name);
  }
  detail::fail("kernel-lab: ", case_name, " has no variant '", wanted, "' on ", where, " (variants: ", join(names), ")");
}

}  // namespace brrr::lab
