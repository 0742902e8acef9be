// framework/src/dispatch.h: how an op reaches its kernel (not installed, not part of the API):
// new outputs, the stream of a device, the loop over broadcast operands, the checks every op
// makes, and the cached registry lookups. Chapter 02 (ops and broadcasting); the functions
// are in dispatch.cpp, and those about the CUDA device in cuda.cpp.
#pragma once
#include <cstdint>

#include "brrr/autograd.h"
#include "brrr/bfloat16.h"
#include "brrr/ops.h"
#include "brrr/tensor.h"
#include "kernels/signatures.h"
#include "kernels/registry.h"

namespace brrr::detail {

// A new, uninitialised, contiguous tensor.
Tensor new_tensor(const Shape& shape, DType dtype, Device device);
inline Tensor new_like(const Tensor& t) { return new_tensor(t.shape(), t.dtype(), t.device()); }

// The stream kernels on `device` run on (nullptr on the CPU).
kernels::Stream stream(Device device);
}  // namespace brrr::detail
namespace brrr::gpu {
class Runtime;
}
namespace brrr::detail {
// The runtime behind Device::cuda(); throws brrr::Error naming `what` when there is none.
gpu::Runtime& cuda_runtime_for(const char* what);
// Puts the caching allocator behind Device::cuda() when the CUDA backend has a runtime
// (storage.cpp asks at the first CUDA allocation).
void install_cuda_allocator();
// Whether a CUDA backend (the GPU or the emulator) was chosen and has a runtime.
bool cuda_in_use();
// Waits for the CUDA device's queued work, if a CUDA backend is in use (never starts one):
// the profiler times ops on a GPU this way, since a launch returns before the kernel ends.
void synchronize_cuda_if_in_use();

// A Loop over `shape` for up to three operands' strides, with size-1 dims dropped and
// adjacent dims merged where every operand allows it (so a contiguous add is one flat loop).
kernels::Loop make_loop(const char* op, const Shape& shape, std::initializer_list<const Shape*> strides);

// BRRR_DEVICE_CHECKS=1: ops check device indices at once, by reading them back (a wait for
// the device each time), instead of on the device (below). For debugging. Read at each check
// (a getenv beside a kernel launch), so a test can turn it on and off again.
bool device_checks();
// Indices idx (int32, contiguous, on the CUDA device) checked on the device against
// [0, limit) or allowed, without a wait (device_checks.cpp): returns them with any bad one
// replaced by 0; a bad one is reported by raise_device_errors().
Tensor checked_on_device(const char* op, const Tensor& idx, std::int64_t limit, std::int64_t allowed);
// Throws brrr::Error for a bad index the device checks found since the last call. Called
// where the host reads from the device anyway (Tensor::to, cuda::synchronize).
void raise_device_errors();
// Around a CUDA graph's capture (cuda.cpp): checks made inside it are the graph's, listed
// until drop_graph_checks, and read at every read back after a replay (device_checks.cpp).
void begin_graph_checks(int graph);
// Random numbers on the device inside a CUDA graph capture throw (cuda.cpp): the generator's
// offset is a kernel argument, which every replay would repeat (the same mask every step).
void refuse_random_in_capture(const char* op, Device device);
void end_graph_checks();
void drop_graph_checks(int graph);

void check_defined(const char* op, const Tensor& t);
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
void check_floating(const char* op, const Tensor& t);
// qkv is the GPT's packed projection (B, T, 3 C), C a multiple of n_head (n_head > 0).
void check_qkv(const char* op, const Tensor& qkv, std::int64_t n_head);

// Strides of `t` seen from a broadcast shape: 0 for dims it is broadcast over.
Shape broadcast_strides(const Tensor& t, const Shape& shape);

// out[...] = a op b for "add", "sub", "mul", "div", with a and b broadcast to out's shape.
// out may alias a (in-place). No autograd.
void binary_into(const char* op, const Tensor& out, const Tensor& a, const Tensor& b);
// out = copy of in (broadcast to out's shape; dtypes must match). No autograd.
void copy_into(const Tensor& out, const Tensor& in);

// A lookup cached per call site for a family of kernels over float and double (and bf16, for
// the ops with kernels on bf16 data: dispatch_floating_or_bf16 below), made from the op's
// float32 descriptor (kernels/signatures.h), never from a name:
//   static KernelFamily<kernels::unary_fn> k(kernels::op::exp<float>);  k.get<T>(device)(...)
// The compiler checks the descriptor against Fn<float>; the float64 and bfloat16 lookups share
// its name, and the registry checks their signatures (Fn<T>) against the registration's.
template <template <class> class Fn>
class KernelFamily {
 public:
  explicit KernelFamily(kernels::Op<Fn<float>> op)
      : f32_(op), f64_({op.name, kFloat64}), bf16_({op.name, kBFloat16}) {}
  // call: the facts the variants' eligibility rules read (head size, precision), if any.
  template <class T>
  Fn<T> get(Device device, const kernels::Call& call = {}) {
    if constexpr (std::is_same_v<T, float>) return f32_(device.type, kFloat32, call);
    else if constexpr (std::is_same_v<T, bf16>) return bf16_(device.type, kBFloat16, call);
    else return f64_(device.type, kFloat64, call);
  }

 private:
  kernels::Kernel<Fn<float>> f32_;
  kernels::Kernel<Fn<double>> f64_;
  kernels::Kernel<Fn<bf16>> bf16_;
};

// The variants of an op built from ops (op_variants.cpp), looked up like kernels and cached
// per call site: static OpVariant v(ops::variants::causal_attention<float>); v(device, dtype)(...)
// (one signature for every dtype: the dtype is the tensors').
template <class Fn>
class OpVariant {
 public:
  explicit OpVariant(kernels::Op<Fn> op) : kernel_(op) {}
  Fn operator()(Device device, DType dtype, const kernels::Call& call = {}) {
    ops::register_op_variants();  // the framework's provider, added once
    return kernel_(device.type, dtype, call);
  }

 private:
  kernels::Kernel<Fn> kernel_;
};

// Calls body.template operator()<T>() with T = float or double for dtype; anything else is
// an error naming the op.
template <class Body>
void dispatch_floating(DType dtype, const char* op, Body&& body) {
  switch (dtype) {
    case DType::Float32: body.template operator()<float>(); return;
    case DType::Float64: body.template operator()<double>(); return;
    default: fail(op, ": expected a floating-point tensor (float32 or float64), got ", dtype_name(dtype));
  }
}

// The same with T = bf16 as well, for the ops that have kernels on bf16 data (chapter 18:
// GELU, bias + GELU, LayerNorm and cross-entropy; bf16 in memory, float32 math inside).
template <class Body>
void dispatch_floating_or_bf16(DType dtype, const char* op, Body&& body) {
  if (dtype == DType::BFloat16) return body.template operator()<bf16>();
  switch (dtype) {
    case DType::Float32: body.template operator()<float>(); return;
    case DType::Float64: body.template operator()<double>(); return;
    default: fail(op, ": expected a floating-point tensor (float32, float64 or bfloat16), got ", dtype_name(dtype));
  }
}

}  // namespace brrr::detail

namespace brrr::ops {
// linear (and linear_gelu, gelu true) on bf16 tensors, one matmul_epilogue op each way
// (ops_matmul.cpp; chapter 18, section 11): the bf16 path of ops::linear and ops::linear_gelu.
Tensor linear_on_bf16(const Tensor& x, const Tensor& weight, const Tensor& bias, bool gelu);
}  // namespace brrr::ops
