// kernels/cuda/elementwise.h: the CUDA elementwise kernels of elementwise.cu, callable with raw
// pointers. Chapter 10 (the GPU and the emulator). Read before: kernels/signatures.h.
// Read next: kernels/cuda/elementwise.cu.
//
// elementwise.cu is compiled twice (see simt.h), so each function exists twice with the same
// signature: in brrr::kernels::emu (g++, runs on the emulator, takes host pointers) and in
// brrr::kernels::cuda (nvcc, runs on the GPU, takes device pointers; CUDA builds only). Each
// matches its op's signature in kernels/signatures.h and is registered as variant "simple".
// T is float or double; fill and copy also take std::int32_t and std::int64_t.
#pragma once
#include <cstdint>

#include "kernels/signatures.h"

#define BRRR_CUDA_ELEMENTWISE_KERNELS(NS)                                                                       \
  namespace NS {                                                                                              \
  template <class T> void fill_simple(T* out, T value, std::int64_t n, Stream stream);                       \
  template <class T> void copy_simple(T* out, const T* in, const Loop& loop, Stream stream);                 \
  void cast_simple(void* out, DType out_dtype, const void* in, DType in_dtype, std::int64_t n, Stream stream); \
  template <class T> void uniform_simple(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter,  \
                                         Stream stream);                                                      \
  template <class T> void normal_simple(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter,   \
                                        Stream stream);                                                       \
  template <class T> void dropout_mask_simple(T* mask, std::int64_t n, T p, std::uint64_t seed,              \
                                              std::uint64_t counter, Stream stream);                          \
  template <class T> void neg_simple(T* out, const T* x, std::int64_t n, Stream stream);                     \
  template <class T> void exp_simple(T* out, const T* x, std::int64_t n, Stream stream);                     \
  template <class T> void log_simple(T* out, const T* x, std::int64_t n, Stream stream);                     \
  template <class T> void sqrt_simple(T* out, const T* x, std::int64_t n, Stream stream);                    \
  template <class T> void tanh_simple(T* out, const T* x, std::int64_t n, Stream stream);                    \
  template <class T> void relu_simple(T* out, const T* x, std::int64_t n, Stream stream);                    \
  template <class T> void sigmoid_simple(T* out, const T* x, std::int64_t n, Stream stream);                 \
  template <class T> void pow_scalar_simple(T* out, const T* x, T exponent, std::int64_t n, Stream stream);  \
  template <class T> void relu_backward_simple(T* dx, const T* dout, const T* x, std::int64_t n,             \
                                               Stream stream);                                                \
  template <class T> void add_simple(T* out, const T* a, const T* b, const Loop& loop, Stream stream);       \
  template <class T> void sub_simple(T* out, const T* a, const T* b, const Loop& loop, Stream stream);       \
  template <class T> void mul_simple(T* out, const T* a, const T* b, const Loop& loop, Stream stream);       \
  template <class T> void div_simple(T* out, const T* a, const T* b, const Loop& loop, Stream stream);       \
  template <class T> void masked_fill_simple(T* out, const T* x, const T* mask, T value, const Loop& loop,    \
                                             Stream stream);                                                  \
  }

namespace brrr::kernels {
BRRR_CUDA_ELEMENTWISE_KERNELS(emu)
BRRR_CUDA_ELEMENTWISE_KERNELS(cuda)
}  // namespace brrr::kernels

#undef BRRR_CUDA_ELEMENTWISE_KERNELS
