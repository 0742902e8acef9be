// kernels/registry.cpp: the kernel registry (see brrr/kernels.h and kernels/registry.h).
// Chapter 04 (matmul and the CPU backend).
//
// A table from slots, (op, device, dtype, products), to the registered variants, and the one
// decision of which of them runs a call (choose() below: the selection, the priorities, the
// eligibility rules).
// The first lookup registers every backend's kernels (explicit calls, not static
// initialisers, so nothing depends on the linker keeping an object file) and applies
// BRRR_KERNELS from the environment.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
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

// An op's exact products and its bf16 ones (autocast's, Call::bf16_compute) are two slots, each
// with its variants and its selection: BRRR_KERNELS=matmul=naive changes the float32 products
// and leaves autocast's, matmul:bf16, to their own default.
struct Slot {
  std::vector<Registration> variants;  // highest priority first
  int selected = -1;                   // index into variants, -1: the default
  std::string signature;               // typeid(Fn).name() of the op's function type
};

// (op, device, dtype, bf16 products)
using Key = std::tuple<std::string, DeviceType, DType, bool>;

// A slot's name as users write it: "matmul", "matmul:bf16" (brrr/kernels.h's kBf16Suffix).
struct SlotName {
  std::string op;
  bool bf16 = false;
};
SlotName parse_slot(const std::string& name) {
  const std::string suffix = kBf16Suffix;
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return {name.substr(0, name.size() - suffix.size()), true};
  return {name, false};
}
std::string slot_name(const Key& key) { return std::get<0>(key) + (std::get<3>(key) ? kBf16Suffix : ""); }
bool names(const Key& key, const SlotName& name) {
  return std::get<0>(key) == name.op && std::get<3>(key) == name.bf16;
}

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

std::string variant_names(const SlotName& op) {
  std::vector<std::string> found;
  for (const auto& [key, slot] : table().slots)
    if (names(key, op))
      for (const auto& r : slot.variants)
        if (std::find(found.begin(), found.end(), r.variant) == found.end()) found.push_back(r.variant);
  return join(found);
}

const char* device_name(DeviceType d) { return d == DeviceType::CPU ? "cpu" : "cuda"; }

std::string call_text(const Call& call) {
  std::string text = call.bf16_compute ? "bf16 products" : "float32 products";
  if (call.head_size > 0) text += ", head size " + std::to_string(call.head_size);
  if (call.dropout > 0) {
    std::ostringstream p;
    p << call.dropout;
    text += ", dropout " + p.str();
  }
  return text;
}

// The one decision (brrr/kernels.h's chosen()) in the slot the call's precision picked: the
// selected variant, which must be able to run the call; else the highest-priority one that can.
const Registration& choose(const std::string& op, DeviceType device, DType dtype, const Slot& slot,
                           const Call& call) {
  const int picked = slot.selected;
  if (picked >= 0) {
    const Registration& r = slot.variants[picked];
    const std::string reason = why_not(r.meta, call);
    BRRR_CHECK(reason.empty(), op, ": the selected variant '", r.variant, "' cannot run this call (",
               device_name(device), " ", dtype_name(dtype), ", ", call_text(call), "): ", reason,
               "; select another or go back to the default (brrr kernels ", op, " shows each variant's rule)");
    return r;
  }
  std::string reasons;
  for (const Registration& r : slot.variants) {
    const std::string reason = why_not(r.meta, call);
    if (reason.empty()) return r;
    reasons += (reasons.empty() ? "" : "; ") + r.variant + ": " + reason;
  }
  brrr::detail::fail(op, ": no variant can run this call (", device_name(device), " ", dtype_name(dtype), ", ", call_text(call),
       "): ", reasons);
}

}  // namespace

std::string why_not(const VariantMeta& meta, const Call& call) {
  // (The precision is the slot's: a call for bf16 products never meets an exact variant.)
  if (meta.max_head_size > 0 && call.head_size > meta.max_head_size)
    return "head size " + std::to_string(call.head_size) + " > " + std::to_string(meta.max_head_size) +
           ", the most its tiles hold";
  if (call.dropout > 0 && !meta.dropout) return "no dropout on the attention weights";
  return "";
}

std::string rule_text(const VariantMeta& meta) {
  std::string text = meta.bf16_inputs ? "bf16 products" : "full-precision products";
  if (meta.max_head_size > 0) text += ", head size <= " + std::to_string(meta.max_head_size);
  if (meta.dropout) text += ", dropout";
  return text;
}

namespace detail {

void add_any(const char* op, DeviceType device, DType dtype, bool bf16_products, const std::string& variant,
             AnyFn fn, const char* signature, int priority, const VariantMeta& meta) {
  const Key key{op, device, dtype, bf16_products};
  const std::string name = slot_name(key);
  Slot& slot = table().slots[key];
  if (slot.variants.empty()) slot.signature = signature;
  BRRR_CHECK(slot.signature == signature, "kernel registry: ", name, " variant '", variant, "' for ",
             device_name(device), " ", dtype_name(dtype), " has another signature than the variants before it (",
             signature, ", not ", slot.signature, "): two descriptors of one op disagree");
  for (const auto& r : slot.variants)
    BRRR_CHECK(r.variant != variant, "kernel registry: ", name, " variant '", variant, "' registered twice for ",
               device_name(device), " ", dtype_name(dtype));
  Registration r{variant, fn, priority, meta};
  r.meta.bf16_inputs = bf16_products;  // the slot says it (the lab checks it on rounded inputs)
  slot.variants.push_back(r);
  std::stable_sort(slot.variants.begin(), slot.variants.end(),
                   [](const Registration& a, const Registration& b) { return a.priority > b.priority; });
  slot.selected = -1;
  table().generation++;
}

AnyFn lookup_any(const char* op, DeviceType device, DType dtype, bool bf16_products, const char* signature,
                 const Call& call) {
  initialise();
  const Key key{op, device, dtype, bf16_products};
  auto it = table().slots.find(key);
  BRRR_CHECK(it != table().slots.end() && !it->second.variants.empty(), slot_name(key), ": no kernel for ",
             device_name(device), " ", dtype_name(dtype));
  BRRR_CHECK(it->second.signature == signature, slot_name(key), ": looked up as ", signature, " but registered as ",
             it->second.signature, " (", device_name(device), " ", dtype_name(dtype), ")");
  return choose(slot_name(key), device, dtype, it->second, call).fn;
}

AnyFn lookup_variant_any(const char* op, DeviceType device, DType dtype, bool bf16_products,
                         const std::string& variant, const char* signature) {
  initialise();
  auto it = table().slots.find({op, device, dtype, bf16_products});
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
// op "*" selects `variant` for every slot that has a variant of that name ("*=composed").
void select_impl(const std::string& op, const std::string& variant) {
  bool op_known = false, found = false;
  const bool every_op = op == "*";
  const SlotName name = parse_slot(op);
  for (auto& [key, slot] : table().slots) {
    if (!names(key, name) && !every_op) continue;
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
             variant_names(name), ")");
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
                 "' is not of the form op=variant (as in BRRR_KERNELS=layernorm_forward=student or "
                 "matmul:bf16=plain)");
      select_impl(item.substr(0, eq), item.substr(eq + 1));
    }
    start = end + 1;
  }
}
}  // namespace

void select(const std::string& op, const std::string& variant, DeviceType device) {
  initialise();
  bool found = false;
  const SlotName name = parse_slot(op);
  for (auto& [key, slot] : table().slots) {
    if (!names(key, name) || std::get<1>(key) != device) continue;
    for (std::size_t i = 0; i < slot.variants.size(); ++i)
      if (slot.variants[i].variant == variant) {
        slot.selected = static_cast<int>(i);
        found = true;
      }
  }
  BRRR_CHECK(found, "kernels::select: op '", op, "' has no variant '", variant, "' on ", device_name(device),
             " (variants: ", variant_names(name), ")");
  table().generation++;
}

void reset_selection() {
  initialise();
  for (auto& [key, slot] : table().slots) slot.selected = -1;
  table().generation++;
}

void select_from_spec(const std::string& spec) {
  initialise();
  select_from_spec_impl(spec);
}

std::vector<std::string> ops() {
  initialise();
  std::vector<std::string> found;
  for (const auto& [key, slot] : table().slots) found.push_back(slot_name(key));
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

std::vector<VariantInfo> variants(const std::string& op) {
  initialise();
  std::vector<VariantInfo> out;
  const SlotName name = parse_slot(op);
  for (const auto& [key, slot] : table().slots) {
    if (!names(key, name)) continue;
    // What a plain call runs (none, if the selected one cannot run it).
    const Registration* plain = nullptr;
    if (slot.selected >= 0) {
      if (why_not(slot.variants[slot.selected].meta, Call{}).empty()) plain = &slot.variants[slot.selected];
    } else {
      for (const Registration& r : slot.variants)
        if (why_not(r.meta, Call{}).empty()) {
          plain = &r;
          break;
        }
    }
    for (const Registration& r : slot.variants)
      out.push_back({op, r.variant, Device{std::get<1>(key), 0}, std::get<2>(key), r.priority, plain == &r, r.meta});
  }
  return out;
}

std::string chosen(const std::string& op, DeviceType device, DType dtype, const Call& call) {
  initialise();
  const SlotName name = parse_slot(op);
  const Key key{name.op, device, dtype, name.bf16 || call.bf16_compute};
  auto it = table().slots.find(key);
  BRRR_CHECK(it != table().slots.end() && !it->second.variants.empty(), slot_name(key), ": no kernel for ",
             device_name(device), " ", dtype_name(dtype));
  return choose(slot_name(key), device, dtype, it->second, call).variant;
}

std::string explain(const std::string& op, const Call& call) {
  initialise();
  std::string text;
  SlotName name = parse_slot(op);
  name.bf16 = name.bf16 || call.bf16_compute;
  for (const auto& [key, slot] : table().slots) {
    if (!names(key, name)) continue;
    const DeviceType device = std::get<1>(key);
    const DType dtype = std::get<2>(key);
    text += std::string("  ") + device_name(device) + " " + dtype_name(dtype) + ": ";
    const Registration* runs = nullptr;
    try {
      runs = &choose(slot_name(key), device, dtype, slot, call);
      text += runs->variant + " runs";
    } catch (const Error& e) {
      text += std::string("nothing runs: ") + e.what();
    }
    std::vector<std::string> passed;
    for (const Registration& r : slot.variants) {
      if (&r == runs) continue;
      const std::string reason = why_not(r.meta, call);
      const bool picked = slot.selected >= 0;
      passed.push_back(r.variant + " (" +
                       (!reason.empty() ? reason : picked ? "eligible, not the selected one" : "eligible, lower priority") +
                       ")");
    }
    if (!passed.empty()) text += "; passed over: " + join(passed);
    text += "\n";
  }
  const std::string shown = name.op + (name.bf16 ? kBf16Suffix : "");
  BRRR_CHECK(!text.empty(), "kernels: no op '", shown, "'");
  Call asked = call;
  asked.bf16_compute = name.bf16;
  return shown + " for " + call_text(asked) + ":\n" + text;
}

std::string selected(const std::string& op, DeviceType device, DType dtype) {
  return chosen(op, device, dtype, Call{});
}

}  // namespace brrr::kernels
