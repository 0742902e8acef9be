// kernels/registry.h: registering kernels and looking them up (inside brrr).
// Chapter 04 (matmul and the CPU backend). The public side is brrr/kernels.h.
//
// A registration is (op, device, dtype, products, variant) -> function pointer, with a
// priority and an eligibility rule (VariantMeta): the highest-priority variant whose rule a call
// keeps is the default of its slot, (op, device, dtype, products). Both sides go through an op's typed descriptor
// (kernels/signatures.h), so a kernel and its op cannot disagree on the signature. Lookups
// are cached per call site (Kernel<Fn> below), so dispatch costs a couple of loads once warm;
// select() invalidates every cache.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <typeinfo>

#include "brrr/dtype.h"
#include "brrr/error.h"
#include "brrr/kernels.h"
#include "kernels/signatures.h"

namespace brrr::kernels {

using AnyFn = void (*)();

// What the error of a variant that is not written yet says (an exercise stub, exercises/):
// tools that run every variant (the kernel lab) list such a variant and pass over it.
inline constexpr const char* kNotWrittenYet = "not written yet";

// The untyped table underneath, which the typed functions below fill and read. `signature`
// is the function type's name (typeid), stored with each registration and compared at every
// lookup: two descriptors that share a name but not a signature are an error, not a call
// with the wrong arguments.
namespace detail {
// bf16_products: the op's slot of bf16 products (Op::bf16_products), not its exact one.
void add_any(const char* op, DeviceType device, DType dtype, bool bf16_products, const std::string& variant,
             AnyFn fn, const char* signature, int priority, const VariantMeta& meta);
AnyFn lookup_any(const char* op, DeviceType device, DType dtype, bool bf16_products, const char* signature,
                 const Call& call = {});
AnyFn lookup_variant_any(const char* op, DeviceType device, DType dtype, bool bf16_products,
                         const std::string& variant, const char* signature);
}  // namespace detail

// Registers `fn` as variant `variant` of `op` on `device`, in op's dtype and products:
//   add(op::gelu_forward<float>, DeviceType::CUDA, "float4", &gelu_forward2, 10, about("..."));
//   add(op::matmul<float>.autocast(), DeviceType::CPU, "plain", &matmul_bf16_plain, 0, about("..."));
// fn must have exactly the op's function type (NotDeduced keeps the compiler from deducing it
// from fn, so Fn comes from the descriptor alone): a kernel with another signature does not
// compile.
template <class T>
struct NotDeducedT {  // std::type_identity, which the CUDA files' C++17 lacks
  using type = T;
};
template <class T>
using NotDeduced = typename NotDeducedT<T>::type;

template <class Fn>
void add(Op<Fn> op, DeviceType device, const std::string& variant, NotDeduced<Fn> fn, int priority,
         const VariantMeta& meta = {}) {
  detail::add_any(op.name, device, op.dtype, op.bf16_products, variant, reinterpret_cast<AnyFn>(fn),
                  typeid(Fn).name(), priority, meta);
}
// A registration's metadata that is only its one line of description (brrr kernels shows it).
inline VariantMeta about(const char* text) {
  VariantMeta meta;
  meta.about = text;
  return meta;
}

// The function chosen for `call` of op on device (brrr/kernels.h's chosen()), in the slot of
// bf16 products when the descriptor or the call asks for them; throws brrr::Error when none is
// registered or none can run the call.
template <class Fn>
Fn lookup(Op<Fn> op, DeviceType device, const Call& call = {}) {
  return reinterpret_cast<Fn>(detail::lookup_any(op.name, device, op.dtype, op.bf16_products || call.bf16_compute,
                                                 typeid(Fn).name(), call));
}
// One variant's function, whatever is selected; nullptr when op has no such variant on
// device. For tools that run every variant side by side (the kernel lab).
template <class Fn>
Fn lookup_variant(Op<Fn> op, DeviceType device, const std::string& variant) {
  return reinterpret_cast<Fn>(
      detail::lookup_variant_any(op.name, device, op.dtype, op.bf16_products, variant, typeid(Fn).name()));
}
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

// A call site's cached lookup: static Kernel k(op::exp<float>); k(device)(...). Ops whose
// kernels take untyped pointers register one descriptor per dtype (cast, by its output's
// dtype) and are looked up with the dtype: k(device, dtype), checked against the signature.
// A call with facts for the eligibility rules passes them: k(device, dtype, call), and one
// that asks for bf16 products (call.bf16_compute) is answered from the op's bf16-products
// slot; the cache keeps the last call's answer, so a site that always asks the same thing
// looks up once.
template <class Fn>
class Kernel {
 public:
  explicit Kernel(Op<Fn> op) : op_(op) {}
  Fn operator()(DeviceType device) { return (*this)(device, op_.dtype); }
  Fn operator()(DeviceType device, DType dtype, const Call& call = {}) {
    const int slot = static_cast<int>(device) * 8 + static_cast<int>(dtype);
    const std::uint64_t gen = generation();
    if (cache_gen_[slot] != gen || !(cache_call_[slot] == call)) {
      cache_[slot] = reinterpret_cast<Fn>(detail::lookup_any(op_.name, device, dtype,
                                                             op_.bf16_products || call.bf16_compute,
                                                             typeid(Fn).name(), call));
      cache_gen_[slot] = gen;
      cache_call_[slot] = call;
    }
    return cache_[slot];
  }

 private:
  Op<Fn> op_;
  Fn cache_[16] = {};
  std::uint64_t cache_gen_[16] = {};  // generation() starts at 1, so 0 means "not cached"
  Call cache_call_[16] = {};
};

}  // namespace brrr::kernels
