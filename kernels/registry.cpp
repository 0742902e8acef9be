// kernels/registry.cpp: the kernel registry (see brrr/kernels.h and kernels/registry.h).
// Chapter 04 (matmul and the CPU backend).
//
// A table from (op, device, dtype) to the registered variants. The first lookup registers
// every backend's kernels (explicit calls, not static initialisers, so nothing depends on
// the linker keeping an object file) and applies BRRR_KERNELS from the environment.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "brrr/strings.h"
#include "brrr/kernels.h"
#include "kernels/backend.h"
#include "kernels/registry.h"

namespace brrr::kernels {
namespace {

struct Registration {
  std::string variant;
  AnyFn fn;
  int priority;
  VariantMeta meta;
};

struct Slot {
  std::vector<Registration> variants;  // highest priority first
  int selected = 0;                    // index into variants
  std::string signature;               // typeid(Fn).name() of the op's function type
};

using Key = std::tuple<std::string, DeviceType, DType>;

struct Registry {
  std::map<Key, Slot> slots;
  std::atomic<std::uint64_t> generation{1};
};

// Registration while the registry is being built must not recurse into initialisation.
Registry& table() {
  static Registry registry;
  return registry;
}

std::once_flag init_flag;
void select_impl(const std::string& op, const std::string& variant);
void select_from_spec_impl(const std::string& spec);

std::mutex provider_mutex;
std::vector<Provider>& providers() {
  static std::vector<Provider> list;
  return list;
}
std::atomic<bool> cpu_registered{false};  // the CPU's kernels (and providers) are in

void initialise() {
  std::call_once(init_flag, [] {
    register_cpu_kernels();
    run_providers(DeviceType::CPU, false);
    cpu_registered = true;
    register_gpu_kernels();
  });
  // A bad BRRR_KERNELS throws here, and again on every later use, so nothing runs with a
  // selection other than the one asked for.
  static std::once_flag env_flag;
  std::call_once(env_flag, [] {
    if (const char* spec = std::getenv("BRRR_KERNELS"); spec && *spec) select_from_spec_impl(spec);
  });
}

std::string variant_names(const std::string& op) {
  std::vector<std::string> names;
  for (const auto& [key, slot] : table().slots)
    if (std::get<0>(key) == op)
      for (const auto& r : slot.variants)
        if (std::find(names.begin(), names.end(), r.variant) == names.end()) names.push_back(r.variant);
  return join(names);
}

const char* device_name(DeviceType d) { return d == DeviceType::CPU ? "cpu" : "cuda"; }

}  // namespace

namespace detail {

void add_any(const char* op, DeviceType device, DType dtype, const std::string& variant, AnyFn fn,
             const char* signature, int priority, const VariantMeta& meta) {
  Slot& slot = table().slots[{op, device, dtype}];
  if (slot.variants.empty()) slot.signature = signature;
  BRRR_CHECK(slot.signature == signature, "kernel registry: ", op, " variant '", variant, "' for ",
             device_name(device), " ", dtype_name(dtype), " has another signature than the variants before it (",
             signature, ", not ", slot.signature, "): two descriptors of one op disagree");
  for (const auto& r : slot.variants)
    BRRR_CHECK(r.variant != variant, "kernel registry: ", op, " variant '", variant, "' registered twice for ",
               device_name(device), " ", dtype_name(dtype));
  slot.variants.push_back({variant, fn, priority, meta});
  std::stable_sort(slot.variants.begin(), slot.variants.end(),
                   [](const Registration& a, const Registration& b) { return a.priority > b.priority; });
  slot.selected = 0;
  table().generation++;
}

AnyFn lookup_any(const char* op, DeviceType device, DType dtype, const char* signature) {
  initialise();
  auto it = table().slots.find({op, device, dtype});
  BRRR_CHECK(it != table().slots.end() && !it->second.variants.empty(), op, ": no kernel for ",
             device_name(device), " ", dtype_name(dtype));
  BRRR_CHECK(it->second.signature == signature, op, ": looked up as ", signature, " but registered as ",
             it->second.signature, " (", device_name(device), " ", dtype_name(dtype), ")");
  return it->second.variants[it->second.selected].fn;
}

AnyFn lookup_variant_any(const char* op, DeviceType device, DType dtype, const std::string& variant,
                         const char* signature) {
  initialise();
  auto it = table().slots.find({op, device, dtype});
  if (it == table().slots.end()) return nullptr;
  BRRR_CHECK(it->second.signature == signature, op, ": looked up as ", signature, " but registered as ",
             it->second.signature, " (", device_name(device), " ", dtype_name(dtype), ")");
  for (const auto& r : it->second.variants)
    if (r.variant == variant) return r.fn;
  return nullptr;
}

}  // namespace detail

void add_provider(Provider provider) {
  {
    std::lock_guard<std::mutex> lock(provider_mutex);
    for (Provider p : providers())
      if (p == provider) return;
    providers().push_back(provider);
  }
  // Too late for the runs it would have had: run it now for what is installed.
  if (cpu_registered) provider(DeviceType::CPU, false);
  if (cuda_backend_chosen() && cuda_backend() != CudaBackend::None)
    provider(DeviceType::CUDA, cuda_backend() == CudaBackend::Emulator);
}

void run_providers(DeviceType device, bool emulated) {
  std::vector<Provider> list;
  {
    std::lock_guard<std::mutex> lock(provider_mutex);
    list = providers();
  }
  for (Provider p : list) p(device, emulated);
}

void remove_device(DeviceType device) {
  for (auto it = table().slots.begin(); it != table().slots.end();)
    it = std::get<1>(it->first) == device ? table().slots.erase(it) : std::next(it);
  table().generation++;
}

std::uint64_t generation() { return table().generation.load(std::memory_order_relaxed); }

void select(const std::string& op, const std::string& variant) {
  initialise();
  select_impl(op, variant);
}

namespace {
// op "*" selects `variant` for every op that has a variant of that name ("*=composed").
void select_impl(const std::string& op, const std::string& variant) {
  bool op_known = false, found = false;
  const bool every_op = op == "*";
  for (auto& [key, slot] : table().slots) {
    if (std::get<0>(key) != op && !every_op) continue;
    op_known = true;
    for (std::size_t i = 0; i < slot.variants.size(); ++i)
      if (slot.variants[i].variant == variant) {
        slot.selected = static_cast<int>(i);
        found = true;
      }
  }
  BRRR_CHECK(!every_op || found, "kernels::select: no op has a variant '", variant, "'");
  BRRR_CHECK(op_known, "kernels::select: unknown op '", op, "'");
  BRRR_CHECK(found, "kernels::select: op '", op, "' has no variant '", variant, "' (variants: ",
             variant_names(op), ")");
  table().generation++;
}

void select_from_spec_impl(const std::string& spec) {
  std::size_t start = 0;
  while (start <= spec.size()) {
    std::size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(start, end - start);
    if (!item.empty()) {
      const std::size_t eq = item.find('=');
      BRRR_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size(), "kernel selection '", item,
                 "' is not of the form op=variant (as in BRRR_KERNELS=layernorm_forward=student)");
      select_impl(item.substr(0, eq), item.substr(eq + 1));
    }
    start = end + 1;
  }
}
}  // namespace

void select(const std::string& op, const std::string& variant, DeviceType device) {
  initialise();
  bool found = false;
  for (auto& [key, slot] : table().slots) {
    if (std::get<0>(key) != op || std::get<1>(key) != device) continue;
    for (std::size_t i = 0; i < slot.variants.size(); ++i)
      if (slot.variants[i].variant == variant) {
        slot.selected = static_cast<int>(i);
        found = true;
      }
  }
  BRRR_CHECK(found, "kernels::select: op '", op, "' has no variant '", variant, "' on ", device_name(device),
             " (variants: ", variant_names(op), ")");
  table().generation++;
}

void reset_selection() {
  initialise();
  for (auto& [key, slot] : table().slots) slot.selected = 0;
  table().generation++;
}

void select_from_spec(const std::string& spec) {
  initialise();
  select_from_spec_impl(spec);
}

std::vector<std::string> ops() {
  initialise();
  std::vector<std::string> names;
  for (const auto& [key, slot] : table().slots)
    if (names.empty() || names.back() != std::get<0>(key)) names.push_back(std::get<0>(key));
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<VariantInfo> variants(const std::string& op) {
  initialise();
  std::vector<VariantInfo> out;
  for (const auto& [key, slot] : table().slots) {
    if (std::get<0>(key) != op) continue;
    for (std::size_t i = 0; i < slot.variants.size(); ++i)
      out.push_back({op, slot.variants[i].variant, Device{std::get<1>(key), 0}, std::get<2>(key),
                     slot.variants[i].priority, static_cast<int>(i) == slot.selected, slot.variants[i].meta});
  }
  return out;
}

std::string selected(const std::string& op, DeviceType device, DType dtype) {
  initialise();
  auto it = table().slots.find({op, device, dtype});
  BRRR_CHECK(it != table().slots.end(), op, ": no kernel for ", device_name(device), " ", dtype_name(dtype));
  return it->second.variants[it->second.selected].variant;
}

}  // namespace brrr::kernels
