// tests/signatures/descriptor_mismatch.cpp: compiled, never run, by the tests in this
// folder's CMakeLists.txt. As written it registers a GELU kernel under gelu_forward's
// descriptor and binds a kernel-lab call to it: it must compile. With -DBRRR_WRONG_KERNEL it
// registers a kernel of another signature (a binary op's) under that descriptor, and with
// -DBRRR_WRONG_CALL it binds a lab call written for another op: each must fail to compile.
#include "kernels/registry.h"
#include "lab/kernel_lab.h"

using namespace brrr;

namespace {

void gelu(float*, const float*, std::int64_t, kernels::Stream) {}
void add(float*, const float*, const float*, const kernels::Loop&, kernels::Stream) {}

template <class T>
void call_unary(kernels::unary_fn<T> f, const lab::Args& a) {
  f(a.f<T>("out"), a.f<T>("x"), a.dims[0], a.stream);
}
template <class T>
void call_binary(kernels::binary_fn<T> f, const lab::Args& a) {
  f(a.f<T>("out"), a.f<T>("a"), a.f<T>("b"), kernels::Loop{}, a.stream);
}

}  // namespace

void register_and_bind() {
#ifdef BRRR_WRONG_KERNEL
  kernels::add(kernels::op::gelu_forward<float>, DeviceType::CPU, "wrong", &add, 0);
#else
  kernels::add(kernels::op::gelu_forward<float>, DeviceType::CPU, "right", &gelu, 0);
#endif
#ifdef BRRR_WRONG_CALL
  lab::call(kernels::op::gelu_forward<float>, &call_binary<float>, kernels::op::gelu_forward<double>,
            &call_binary<double>);
#else
  lab::call(kernels::op::gelu_forward<float>, &call_unary<float>, kernels::op::gelu_forward<double>,
            &call_unary<double>);
#endif
}
