// brrr/kernels.h: the kernel registry, seen from outside.
// Chapter 04 (matmul and the CPU backend). Read next: kernels/signatures.h (the signatures).
//
// Every op has one C-style signature over raw pointers and sizes (llm.c's shape). Kernels
// register in a slot, (op, device, dtype, products), under a variant name unique in that slot.
// The default variant is the one registered with the highest priority (the fastest correct
// one); select() or the environment variable
//   BRRR_KERNELS=layernorm_forward=student,matmul=naive,matmul:bf16=plain
// picks another at run time, so a student's kernel runs inside the real model. Precision lives
// in the slot, not in the op's name: "matmul" is every exact slot of the op (float32, float64,
// and bfloat16 data), "matmul:bf16" its slot of products of operands rounded to bfloat16
// (float32 data, what Autocast(kBFloat16) calls, chapter 18).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "brrr/dtype.h"

namespace brrr::kernels {

// What a registration says about its variant besides its function: read by the kernel lab
// (which tolerance to check it against, whether to round the reference's inputs) and by
// `brrr kernels` (what it is for). Defaults suit a float32 kernel checked at the op's tolerance.
struct VariantMeta {
  double tolerance = 0;      // the largest relative error the lab allows it; 0: the op's own
  bool bf16_inputs = false;  // rounds its float inputs to bfloat16 first: checked against the
                             // reference on inputs rounded the same way (the dtype's rounding
                             // is the caller's choice, not the kernel's error). The registry
                             // sets it from the slot: true in a bf16-products slot, else false.
  bool gpu_only = false;     // needs a real GPU (instructions the SIMT emulator does not run)
  std::string about;         // one line: what the variant is, or what it teaches
  // Its eligibility rule: the calls it can run (see Call below). The registry passes over a
  // variant whose rule a call breaks, and `brrr kernels` says which rule (why_not below).
  std::int64_t max_head_size = 0;  // attention: the largest head size its tiles hold (0: any)
  bool dropout = false;            // attention: it can drop out the attention weights
};

// What one call asks of a variant beyond its op, device and dtype: the facts the eligibility
// rules read. A lookup that gives none asks for what every variant did before rules: full
// precision, no dropout, any head size.
struct Call {
  std::int64_t head_size = 0;  // attention: hs (0: not stated)
  double dropout = 0;          // attention: the probability of dropping each weight
  bool bf16_compute = false;   // products of operands rounded to bfloat16 (Autocast, chapter 18):
                               // the call goes to the op's bf16-products slot ("matmul:bf16")
};
inline bool operator==(const Call& a, const Call& b) {  // by hand: the CUDA files are C++17
  return a.head_size == b.head_size && a.dropout == b.dropout && a.bf16_compute == b.bf16_compute;
}
// Why a variant with this metadata cannot run `call`, in a few words ("head size 160 > 128"):
// "" when it can. The one eligibility test; the registry and `brrr kernels` both call it.
std::string why_not(const VariantMeta& meta, const Call& call);
// The rule as `brrr kernels` prints it: "head size <= 128, no dropout, float32 products".
std::string rule_text(const VariantMeta& meta);

// An op's descriptor: its name in the registry, the dtype of its data and whether its products
// are exact or of operands rounded to bfloat16, with the signature every kernel of that op has
// as its type parameter. kernels/signatures.h declares one per op: kernels::op::matmul<float>
// is an Op<matmul_fn<float>>{"matmul", kFloat32}, and op::matmul<float>.autocast() the same
// op's slot of bf16 products, the one Autocast(kBFloat16) calls. Registering a kernel and looking one up go through a
// descriptor (kernels/registry.h), so a function whose type is not the op's does not compile,
// where a name alone would let it through to a call with the wrong arguments.
template <class Fn>
struct Op {
  const char* name;
  DType dtype;
  bool bf16_products = false;  // of operands rounded to bfloat16, float32 sums (chapter 18)
  // The same op and data, with bf16 products: the slot Autocast(kBFloat16) calls.
  constexpr Op autocast() const { return {name, dtype, true}; }
};
// The suffix of a bf16-products slot's name where a name is written out: "matmul:bf16"
// (BRRR_KERNELS, brrr kernels, the kernel lab's rows).
inline constexpr const char* kBf16Suffix = ":bf16";

struct VariantInfo {
  std::string op;  // its slot's name: "matmul", or "matmul:bf16" for bf16 products
  std::string variant;
  Device device;
  DType dtype;
  int priority;
  bool selected;  // what a plain call of its precision runs (chosen() for Call{})
  VariantMeta meta;
};

// Use `variant` for `op` on every device that has it (op "*": every op that has it, as in
// "*=composed"). `op` names the exact slots ("matmul": float32, float64, bf16 data) or, with
// ":bf16", the bf16-products ones ("matmul:bf16"). Throws brrr::Error naming the op and the
// variants when either is unknown.
void select(const std::string& op, const std::string& variant);
// Use `variant` for `op` on one device type only.
void select(const std::string& op, const std::string& variant, DeviceType device);
// Go back to the defaults (highest priority) for every op.
void reset_selection();
// Apply a spec such as "layernorm_forward=student,matmul:bf16=plain,*=composed" (BRRR_KERNELS's).
void select_from_spec(const std::string& spec);

// Every slot name with a kernel, sorted: "matmul" and "matmul:bf16" are two.
std::vector<std::string> ops();
std::vector<VariantInfo> variants(const std::string& op);  // every registration of op's slots
// The variant that runs `call` of op on device in dtype, the one decision every lookup makes
// (the slot: op's bf16-products one when op ends in ":bf16" or call.bf16_compute asks for it):
// the selected variant (select, BRRR_KERNELS) when one is selected for the call's precision,
// and an error naming the rule it breaks if the call is not one it can run; otherwise the
// highest-priority variant whose rule the call keeps; an error listing every variant's reason
// when none can.
std::string chosen(const std::string& op, DeviceType device, DType dtype, const Call& call);
// The decision for `call` of op on every device and dtype it has variants for, one line each:
// which variant runs and why each other one was passed over (`brrr kernels OP --head-size N`):
//   cuda float32: naive runs; passed over: flash (head size 160 > 128, the most its tiles hold), ...
std::string explain(const std::string& op, const Call& call);
// chosen() for a plain call: no dropout, any head size ("matmul:bf16": bf16 products).
std::string selected(const std::string& op, DeviceType device, DType dtype);

}  // namespace brrr::kernels
