// kernels/cpu/elementwise.cpp: fill, copy, cast, random numbers, unary and binary ops.
// Chapter 02 (ops and broadcasting). Read before: kernels/signatures.h. Read next: reduce.cpp.
//
// Unary kernels see contiguous arrays. Binary kernels see a Loop: the broadcast shape and,
// for each operand, its stride in every dim (0 where it is broadcast). The op has already
// merged dims that can be walked as one, so most calls are a single flat loop.
#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "brrr/bfloat16.h"
#include "brrr/error.h"
#include "brrr/generator.h"
#include "kernels/cpu/bf16_convert.h"
#include "kernels/cpu/cpu.h"

namespace brrr::kernels::cpu {

// ---------------------------------------------------------------------------------------------
// fill, copy, cast

template <class T>
void fill(T* out, T value, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t begin, std::int64_t end) {
    std::fill(out + begin, out + end, value);
  });
}

// Walks a Loop's outer dims (all but the last) for the flat index `outer`, returning each
// operand's offset. The last dim is the kernels' inner loop.
inline void outer_offsets(const Loop& loop, std::int64_t outer, int operands, std::int64_t* offsets) {
  for (int k = 0; k < operands; ++k) offsets[k] = 0;
  for (int d = loop.ndim - 2; d >= 0; --d) {
    const std::int64_t i = outer % loop.size[d];
    outer /= loop.size[d];
    for (int k = 0; k < operands; ++k) offsets[k] += i * loop.stride[k][d];
  }
}

template <class T>
void copy(T* out, const T* in, const Loop& loop, Stream) {
  const std::int64_t inner = loop.ndim ? loop.size[loop.ndim - 1] : 1;
  const std::int64_t so = loop.ndim ? loop.stride[0][loop.ndim - 1] : 1;
  const std::int64_t si = loop.ndim ? loop.stride[1][loop.ndim - 1] : 1;
  const std::int64_t outer = loop.numel() / std::max<std::int64_t>(inner, 1);
  if (outer == 1 && so == 1 && si == 1) {
    parallel_for(inner, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
      std::memcpy(out + b, in + b, (e - b) * sizeof(T));
    });
    return;
  }
  parallel_for(outer, grain(inner, kElementwiseGrain), [&](std::int64_t begin, std::int64_t end) {
    std::int64_t off[2];
    for (std::int64_t o = begin; o < end; ++o) {
      outer_offsets(loop, o, 2, off);
      T* dst = out + off[0];
      const T* src = in + off[1];
      for (std::int64_t i = 0; i < inner; ++i) dst[i * so] = src[i * si];
    }
  });
}

// One element from In to Out. bfloat16 goes through float32: widening is exact, narrowing
// rounds to nearest even (brrr/bfloat16.h); from float64 that is two roundings (to float32,
// then to bf16), which can differ from one rounding in the last bf16 bit, as in PyTorch.
template <class Out, class In>
Out convert(In x) {
  if constexpr (std::is_same_v<Out, bf16>) return bf16(static_cast<float>(x));
  else if constexpr (std::is_same_v<In, bf16>) return static_cast<Out>(static_cast<float>(x));
  else return static_cast<Out>(x);
}

template <class Out, class In>
void cast_typed(Out* out, const In* in, std::int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      if constexpr (std::is_same_v<Out, bf16>) store_rounded(out[i], static_cast<float>(in[i]));  // vectorizes
      else out[i] = convert<Out>(in[i]);
    }
  });
}

template <class Out>
void cast_to(Out* out, const void* in, DType in_dtype, std::int64_t n) {
  switch (in_dtype) {
    case DType::Float32: return cast_typed(out, static_cast<const float*>(in), n);
    case DType::Float64: return cast_typed(out, static_cast<const double*>(in), n);
    case DType::Int32: return cast_typed(out, static_cast<const std::int32_t*>(in), n);
    case DType::Int64: return cast_typed(out, static_cast<const std::int64_t*>(in), n);
    case DType::BFloat16: return cast_typed(out, static_cast<const bf16*>(in), n);
    default: ::brrr::detail::fail("cast: unsupported source dtype ", dtype_name(in_dtype), " on cpu");
  }
}

void cast(void* out, DType out_dtype, const void* in, DType in_dtype, std::int64_t n, Stream) {
  switch (out_dtype) {
    case DType::Float32: return cast_to(static_cast<float*>(out), in, in_dtype, n);
    case DType::Float64: return cast_to(static_cast<double*>(out), in, in_dtype, n);
    case DType::Int32: return cast_to(static_cast<std::int32_t*>(out), in, in_dtype, n);
    case DType::Int64: return cast_to(static_cast<std::int64_t*>(out), in, in_dtype, n);
    case DType::BFloat16: return cast_to(static_cast<bf16*>(out), in, in_dtype, n);
    default: ::brrr::detail::fail("cast: unsupported target dtype ", dtype_name(out_dtype), " on cpu");
  }
}

// ---------------------------------------------------------------------------------------------
// random numbers: philox(seed, counter + block) gives four 32-bit words per block.
// uniform: float takes one word per element (4 per block), double two (2 per block).
// normal: Box-Muller turns two words into two normals (4 per block, either dtype).

template <class T>
void uniform(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, Stream) {
  constexpr int per_block = sizeof(T) == 4 ? 4 : 2;
  parallel_for((n + per_block - 1) / per_block, 2048, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t block = b; block < e; ++block) {
      const auto w = philox(seed, counter + block);
      for (int k = 0; k < per_block && block * per_block + k < n; ++k) {
        if constexpr (per_block == 4) out[block * 4 + k] = uniform_from_bits(w[k]);
        else out[block * 2 + k] = uniform_double_from_bits(w[2 * k], w[2 * k + 1]);
      }
    }
  });
}

template <class T>
void normal(T* out, std::int64_t n, std::uint64_t seed, std::uint64_t counter, Stream) {
  parallel_for((n + 3) / 4, 2048, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t block = b; block < e; ++block) {
      const auto w = philox(seed, counter + block);
      double z[4];
      for (int pair = 0; pair < 2; ++pair) {
        const double u1 = (static_cast<double>(w[2 * pair]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
        const double u2 = static_cast<double>(w[2 * pair + 1]) * (1.0 / 4294967296.0);      // [0, 1)
        const double r = std::sqrt(-2.0 * std::log(u1));
        z[2 * pair] = r * std::cos(2.0 * M_PI * u2);
        z[2 * pair + 1] = r * std::sin(2.0 * M_PI * u2);
      }
      for (int k = 0; k < 4 && block * 4 + k < n; ++k) out[block * 4 + k] = static_cast<T>(z[k]);
    }
  });
}

// Philox for kLanes = 16 consecutive counters at once: the same words as philox4x32, bit for
// bit (words[l][k] is word k of philox4x32(key, counter + l)). With AVX-512 the four state
// words of the 16 counters live in four registers. Each round needs the full 64-bit products
// kMul * c of 32-bit lanes; vpmuludq (_mm512_mul_epu32) forms them for the even lanes, so the
// odd lanes are shifted down and multiplied too, and the low and high halves are put back in
// their lanes with two blends. About 1 ns per element against 6 for one counter at a time.
namespace {
constexpr int kLanes = 16;

#if defined(__AVX512F__)
// lo[l], hi[l] = the low and high 32 bits of m * c[l], for 16 lanes.
// (The maskz_ forms with every lane kept: GCC 12's plain forms warn inside its own headers,
// GCC bug 105593, as kernels/cpu/gemm_blocked.cpp explains.)
inline void mul_hi_lo(__m512i c, __m512i m, __m512i& hi, __m512i& lo) {
  constexpr __mmask8 kAll = 0xFF;
  constexpr __mmask16 kOdd = 0xAAAA;
  const __m512i even = _mm512_maskz_mul_epu32(kAll, c, m);                               // lanes 0, 2, ...
  const __m512i odd = _mm512_maskz_mul_epu32(kAll, _mm512_maskz_srli_epi64(kAll, c, 32), m);  // lanes 1, 3, ...
  lo = _mm512_mask_blend_epi32(kOdd, even, _mm512_maskz_slli_epi64(kAll, odd, 32));
  hi = _mm512_mask_blend_epi32(kOdd, _mm512_maskz_srli_epi64(kAll, even, 32), odd);
}
#endif

void philox_lanes(std::uint32_t (&words)[kLanes][4], std::uint64_t key, std::uint64_t counter) {
#if defined(__AVX512F__)
  alignas(64) std::uint32_t lo[kLanes], hi[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    const std::uint64_t c = counter + static_cast<std::uint64_t>(l);
    lo[l] = static_cast<std::uint32_t>(c), hi[l] = static_cast<std::uint32_t>(c >> 32);
  }
  __m512i c0 = _mm512_load_si512(lo), c1 = _mm512_load_si512(hi), c2 = _mm512_setzero_si512(),
          c3 = _mm512_setzero_si512();
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(Philox::kMul0)),
                m1 = _mm512_set1_epi32(static_cast<int>(Philox::kMul1));
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < Philox::kRounds; ++round) {
    __m512i hi0, lo0, hi1, lo1;
    mul_hi_lo(c0, m0, hi0, lo0);
    mul_hi_lo(c2, m1, hi1, lo1);
    c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
    k0 += Philox::kWeyl0;
    k1 += Philox::kWeyl1;
  }
  // (4 words x 16 lanes) -> (16 lanes x 4 words): interleave 32-bit words (c0 c1, c2 c3), then
  // 64-bit pairs, then put the 128-bit quarters in order.
  const __m512i a = _mm512_maskz_unpacklo_epi32(0xFFFF, c0, c1), b = _mm512_maskz_unpackhi_epi32(0xFFFF, c0, c1);
  const __m512i c = _mm512_maskz_unpacklo_epi32(0xFFFF, c2, c3), d = _mm512_maskz_unpackhi_epi32(0xFFFF, c2, c3);
  const __m512i q0 = _mm512_maskz_unpacklo_epi64(0xFF, a, c), q1 = _mm512_maskz_unpackhi_epi64(0xFF, a, c);  // lanes 0,1 / 4,5 ...
  const __m512i q2 = _mm512_maskz_unpacklo_epi64(0xFF, b, d), q3 = _mm512_maskz_unpackhi_epi64(0xFF, b, d);  // lanes 2,3 / 6,7 ...
  // q0 holds lanes 0, 4, 8, 12 (one 128-bit quarter each), q1 lanes 1, 5, 9, 13, q2 2, 6, ...
  alignas(64) std::uint32_t t[4][kLanes];
  _mm512_store_si512(t[0], q0), _mm512_store_si512(t[1], q1), _mm512_store_si512(t[2], q2), _mm512_store_si512(t[3], q3);
  for (int quarter = 0; quarter < 4; ++quarter)
    for (int j = 0; j < 4; ++j)
      std::memcpy(words[4 * quarter + j], &t[j][4 * quarter], 16);
#else
  for (int l = 0; l < kLanes; ++l) {
    const PhiloxWords r = philox4x32(key, counter + static_cast<std::uint64_t>(l));
    for (int k = 0; k < 4; ++k) words[l][k] = r.w[k];
  }
#endif
}
}  // namespace

// mask = 0 with probability p, else 1 / (1 - p): multiplying by it is inverted dropout.
// Element i takes word i % 4 of block i / 4, as uniform's floats do; threads take groups of
// kLanes blocks (64 elements).
template <class T>
void dropout_mask(T* mask, std::int64_t n, T p, std::uint64_t seed, std::uint64_t counter, Stream) {
  const T scale = T(1) / (T(1) - p);
  constexpr std::int64_t kGroup = 4 * kLanes;  // elements per group of blocks
  parallel_for((n + kGroup - 1) / kGroup, 64, [=](std::int64_t b, std::int64_t e) {  // by value: in registers
    std::uint32_t words[kLanes][4];
    for (std::int64_t group = b; group < e; ++group) {
      philox_lanes(words, seed, counter + static_cast<std::uint64_t>(group * kLanes));
      const std::uint32_t* w = &words[0][0];
      T* out = mask + group * kGroup;
      const std::int64_t m = std::min(kGroup, n - group * kGroup);
#pragma omp simd
      for (std::int64_t i = 0; i < m; ++i) out[i] = uniform_from_bits(w[i]) < p ? T(0) : scale;
    }
  });
}

// ---------------------------------------------------------------------------------------------
// unary ops: out[i] = f(x[i])

template <class T, class F>
inline void map_unary(T* out, const T* x, std::int64_t n, F f) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) out[i] = f(x[i]);
  });
}

template <class T> void neg(T* out, const T* x, std::int64_t n, Stream) { map_unary(out, x, n, [](T v) { return -v; }); }
template <class T> void exp(T* out, const T* x, std::int64_t n, Stream) { map_unary(out, x, n, [](T v) { return std::exp(v); }); }
template <class T> void log(T* out, const T* x, std::int64_t n, Stream) { map_unary(out, x, n, [](T v) { return std::log(v); }); }
template <class T> void sqrt(T* out, const T* x, std::int64_t n, Stream) { map_unary(out, x, n, [](T v) { return std::sqrt(v); }); }
template <class T> void tanh(T* out, const T* x, std::int64_t n, Stream) { map_unary(out, x, n, [](T v) { return std::tanh(v); }); }
template <class T> void relu(T* out, const T* x, std::int64_t n, Stream) { map_unary(out, x, n, [](T v) { return v > T(0) ? v : T(0); }); }
template <class T> void sigmoid(T* out, const T* x, std::int64_t n, Stream) { map_unary(out, x, n, [](T v) { return T(1) / (T(1) + std::exp(-v)); }); }

template <class T>
void pow_scalar(T* out, const T* x, T exponent, std::int64_t n, Stream) {
  if (exponent == T(2)) return map_unary(out, x, n, [](T v) { return v * v; });
  map_unary(out, x, n, [exponent](T v) { return std::pow(v, exponent); });
}

template <class T>
void relu_backward(T* dx, const T* dout, const T* x, std::int64_t n, Stream) {
  parallel_for(n, kElementwiseGrain, [&](std::int64_t b, std::int64_t e) {
#pragma omp simd
    for (std::int64_t i = b; i < e; ++i) dx[i] = x[i] > T(0) ? dout[i] : T(0);
  });
}

// ---------------------------------------------------------------------------------------------
// binary ops with broadcasting: out = f(a, b) over a Loop

// out = v, in out's type: bf16 rounded once, written as its bits (bf16_convert.h says why).
template <class T, class V>
inline void store(T& out, V v) {
  if constexpr (std::is_same_v<T, bf16>) store_rounded(out, v);
  else out = v;
}

template <class T, class F>
inline void map_binary(T* out, const T* a, const T* b, const Loop& loop, F f) {
  const int last = loop.ndim - 1;
  const std::int64_t inner = loop.ndim ? loop.size[last] : 1;
  const std::int64_t so = loop.ndim ? loop.stride[0][last] : 1;
  const std::int64_t sa = loop.ndim ? loop.stride[1][last] : 0;
  const std::int64_t sb = loop.ndim ? loop.stride[2][last] : 0;
  const std::int64_t outer = inner ? loop.numel() / inner : 0;
  // The common cases get loops the compiler vectorizes: all contiguous, or one side a scalar.
  auto run_inner = [&](T* o, const T* x, const T* y, std::int64_t len) {
    if (so == 1 && sa == 1 && sb == 1) {
#pragma omp simd
      for (std::int64_t i = 0; i < len; ++i) store(o[i], f(x[i], y[i]));
    } else if (so == 1 && sa == 1 && sb == 0) {
      const T yv = *y;
#pragma omp simd
      for (std::int64_t i = 0; i < len; ++i) store(o[i], f(x[i], yv));
    } else if (so == 1 && sa == 0 && sb == 1) {
      const T xv = *x;
#pragma omp simd
      for (std::int64_t i = 0; i < len; ++i) store(o[i], f(xv, y[i]));
    } else {
      for (std::int64_t i = 0; i < len; ++i) store(o[i * so], f(x[i * sa], y[i * sb]));
    }
  };
  if (outer == 1) {
    parallel_for(inner, kElementwiseGrain, [&](std::int64_t begin, std::int64_t end) {
      run_inner(out + begin * so, a + begin * sa, b + begin * sb, end - begin);
    });
    return;
  }
  parallel_for(outer, grain(inner, kElementwiseGrain), [&](std::int64_t begin, std::int64_t end) {
    std::int64_t off[3];
    for (std::int64_t o = begin; o < end; ++o) {
      outer_offsets(loop, o, 3, off);
      run_inner(out + off[0], a + off[1], b + off[2], inner);
    }
  });
}

// f as it is in float32 and float64; on bf16 data (chapter 18) in float32, both operands widened
// (exact), the float32 result rounded once as map_binary stores it: the bits of the float32 op
// on widened copies, in one pass (the bf16 step's residual adds and gradient sums).
template <class T, class F>
inline auto in_float32(F f) {
  if constexpr (std::is_same_v<T, bf16>)
    return [f](bf16 x, bf16 y) { return f(static_cast<float>(x), static_cast<float>(y)); };
  else return f;
}

template <class T> void add(T* out, const T* a, const T* b, const Loop& l, Stream) { map_binary(out, a, b, l, in_float32<T>([](auto x, auto y) { return x + y; })); }
template <class T> void sub(T* out, const T* a, const T* b, const Loop& l, Stream) { map_binary(out, a, b, l, in_float32<T>([](auto x, auto y) { return x - y; })); }
template <class T> void mul(T* out, const T* a, const T* b, const Loop& l, Stream) { map_binary(out, a, b, l, in_float32<T>([](auto x, auto y) { return x * y; })); }
template <class T> void div(T* out, const T* a, const T* b, const Loop& l, Stream) { map_binary(out, a, b, l, in_float32<T>([](auto x, auto y) { return x / y; })); }

template <class T>
void masked_fill(T* out, const T* x, const T* mask, T value, const Loop& l, Stream) {
  map_binary(out, x, mask, l, [value](T v, T m) { return m != T(0) ? value : v; });
}

// ---------------------------------------------------------------------------------------------
// instantiations for float and double

#define BRRR_INSTANTIATE(T)                                                               \
  template void fill<T>(T*, T, std::int64_t, Stream);                                    \
  template void copy<T>(T*, const T*, const Loop&, Stream);                              \
  template void uniform<T>(T*, std::int64_t, std::uint64_t, std::uint64_t, Stream);      \
  template void normal<T>(T*, std::int64_t, std::uint64_t, std::uint64_t, Stream);       \
  template void dropout_mask<T>(T*, std::int64_t, T, std::uint64_t, std::uint64_t, Stream); \
  template void neg<T>(T*, const T*, std::int64_t, Stream);                              \
  template void exp<T>(T*, const T*, std::int64_t, Stream);                              \
  template void log<T>(T*, const T*, std::int64_t, Stream);                              \
  template void sqrt<T>(T*, const T*, std::int64_t, Stream);                             \
  template void tanh<T>(T*, const T*, std::int64_t, Stream);                             \
  template void relu<T>(T*, const T*, std::int64_t, Stream);                             \
  template void sigmoid<T>(T*, const T*, std::int64_t, Stream);                          \
  template void pow_scalar<T>(T*, const T*, T, std::int64_t, Stream);                    \
  template void relu_backward<T>(T*, const T*, const T*, std::int64_t, Stream);          \
  template void add<T>(T*, const T*, const T*, const Loop&, Stream);                     \
  template void sub<T>(T*, const T*, const T*, const Loop&, Stream);                     \
  template void mul<T>(T*, const T*, const T*, const Loop&, Stream);                     \
  template void div<T>(T*, const T*, const T*, const Loop&, Stream);                     \
  template void masked_fill<T>(T*, const T*, const T*, T, const Loop&, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
template void fill<std::int32_t>(std::int32_t*, std::int32_t, std::int64_t, Stream);
template void fill<std::int64_t>(std::int64_t*, std::int64_t, std::int64_t, Stream);
template void copy<std::int32_t>(std::int32_t*, const std::int32_t*, const Loop&, Stream);
template void copy<std::int64_t>(std::int64_t*, const std::int64_t*, const Loop&, Stream);
template void fill<bf16>(bf16*, bf16, std::int64_t, Stream);
template void copy<bf16>(bf16*, const bf16*, const Loop&, Stream);
template void add<bf16>(bf16*, const bf16*, const bf16*, const Loop&, Stream);
template void sub<bf16>(bf16*, const bf16*, const bf16*, const Loop&, Stream);
template void mul<bf16>(bf16*, const bf16*, const bf16*, const Loop&, Stream);
template void div<bf16>(bf16*, const bf16*, const bf16*, const Loop&, Stream);
#undef BRRR_INSTANTIATE

}  // namespace brrr::kernels::cpu
