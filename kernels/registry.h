// kernels/registry.h: registering kernels and looking them up (inside brrr).
// Chapter 04 (matmul and the CPU backend). The public side is brrr/kernels.h.
//
// A registration is (op, device, dtype, variant) -> function pointer, with a priority: the
// highest priority is the default. Lookups are cached per call site (Kernel<Fn> below), so
// dispatch costs a couple of loads once warm; select() invalidates every cache.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "brrr/dtype.h"
#include "brrr/error.h"
#include "brrr/kernels.h"

namespace brrr::kernels {

using AnyFn = void (*)();

// What the error of a variant that is not written yet says (an exercise stub, exercises/):
// tools that run every variant (the kernel lab) list such a variant and pass over it.
inline constexpr const char* kNotWrittenYet = "not written yet";

void add(const std::string& op, DeviceType device, DType dtype, const std::string& variant,
         AnyFn fn, int priority, const VariantMeta& meta = {});
template <class Fn>
void add(const std::string& op, DeviceType device, DType dtype, const std::string& variant,
         Fn fn, int priority, const VariantMeta& meta = {}) {
  add(op, device, dtype, variant, reinterpret_cast<AnyFn>(fn), priority, meta);
}

// The selected function for (op, device, dtype); throws brrr::Error when none is registered.
AnyFn lookup(const std::string& op, DeviceType device, DType dtype);
// One variant's function, whatever is selected; nullptr when (op, device, dtype) has no such
// variant. For tools that run every variant side by side (the kernel lab).
AnyFn lookup_variant(const std::string& op, DeviceType device, DType dtype, const std::string& variant);
// Incremented whenever a registration or selection changes what lookup returns.
std::uint64_t generation();

// Registration entry points of each backend, called once when the registry is first used.
void register_cpu_kernels();
void register_gpu_kernels();  // kernels/backend.cpp: chooses the CUDA backend, which registers its kernels
// Forgets every registration for `device` (the CUDA backend switching to the emulator).
void remove_device(DeviceType device);

// Variants from outside this library (the exercises' stubs and solutions, exercises/) join
// through a provider: a function that adds them for one device type, emulated or not. Every
// provider runs for the CPU when the registry is first built, and for the CUDA device each
// time its backend is installed (the GPU's, or the emulator's, which replaces it). A provider
// added later runs at once for what is already installed. Adding the same provider twice
// adds it once.
using Provider = void (*)(DeviceType device, bool emulated);
void add_provider(Provider provider);
void run_providers(DeviceType device, bool emulated);  // kernels/backend.cpp calls it

// A call site's cached lookup: static Kernel<unary_fn<float>> k("exp"); k(device, dtype)(...)
template <class Fn>
class Kernel {
 public:
  explicit Kernel(const char* op) : op_(op) {}
  Fn operator()(DeviceType device, DType dtype) {
    const int slot = static_cast<int>(device) * 8 + static_cast<int>(dtype);
    const std::uint64_t gen = generation();
    if (cache_gen_[slot] != gen) {
      cache_[slot] = reinterpret_cast<Fn>(lookup(op_, device, dtype));
      cache_gen_[slot] = gen;
    }
    return cache_[slot];
  }

 private:
  const char* op_;
  Fn cache_[16] = {};
  std::uint64_t cache_gen_[16] = {};  // generation() starts at 1, so 0 means "not cached"
};

}  // namespace brrr::kernels
