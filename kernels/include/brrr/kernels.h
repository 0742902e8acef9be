// brrr/kernels.h: the kernel registry, seen from outside.
// Chapter 04 (matmul and the CPU backend). Read next: kernels/signatures.h (the signatures).
//
// Every op has one C-style signature over raw pointers and sizes (llm.c's shape). Kernels
// register under (op, device, dtype, variant). The default variant is the one registered
// with the highest priority (the fastest correct one); select() or the environment variable
//   BRRR_KERNELS=layernorm_forward=student,matmul=naive
// picks another at run time, so a student's kernel runs inside the real model.
#pragma once
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
                             // is the caller's choice, not the kernel's error)
  bool gpu_only = false;     // needs a real GPU (instructions the SIMT emulator does not run)
  std::string about;         // one line: what the variant is, or what it teaches
};

// An op's descriptor: its name in the registry and the dtype it computes in, with the
// signature every kernel of that op has as its type parameter. kernels/signatures.h declares
// one per op: kernels::op::matmul<float> is an Op<matmul_fn<float>>{"matmul", kFloat32}.
// Registering a kernel and looking one up go through a descriptor (kernels/registry.h), so a
// function whose type is not the op's does not compile, where a name alone would let it
// through to a call with the wrong arguments.
template <class Fn>
struct Op {
  const char* name;
  DType dtype;
};

struct VariantInfo {
  std::string op;
  std::string variant;
  Device device;
  DType dtype;
  int priority;
  bool selected;
  VariantMeta meta;
};

// Use `variant` for `op` on every device that has it (op "*": every op that has it, as in
// "*=composed"). Throws brrr::Error naming the op and the variants when either is unknown.
void select(const std::string& op, const std::string& variant);
// Use `variant` for `op` on one device type only.
void select(const std::string& op, const std::string& variant, DeviceType device);
// Go back to the defaults (highest priority) for every op.
void reset_selection();
// Apply a spec such as "layernorm_forward=student,matmul=naive,*=composed" (BRRR_KERNELS's).
void select_from_spec(const std::string& spec);

std::vector<std::string> ops();                       // every op with a kernel, sorted
std::vector<VariantInfo> variants(const std::string& op);  // every registration of op
std::string selected(const std::string& op, DeviceType device, DType dtype);

}  // namespace brrr::kernels
