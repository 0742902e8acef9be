// kernels/cpu/attention.cpp: causal attention, forward and backward, on the CPU: the reference
// the CUDA flash attention kernels are checked against, and what ops::flash_attention runs
// on the CPU. Chapter 15 (flash attention). Read before: ops_nn.cpp's causal_attention_composed
// (the same math from matmul, mask and softmax). Read next: kernels/cuda/attention/.
//
// For each of the BH = batch * heads independent problems, with q, k, v, out (T, hs):
//
//   s[i, j] = scale * q[i] . k[j]            for j <= i (key j is visible to query i)
//   p[i, j] = exp(s[i, j] - lse[i])          lse[i] = log(sum over j <= i of exp(s[i, j]))
//   out[i]  = sum over j <= i of p[i, j] v[j]
//
// Unlike the composed op this never holds the (T, T) matrix: one row of scores at a time.
// Sums are taken in double whatever T is (only the exponentials of float32 problems are
// float, good to about 1 ulp), so float32 results are within a few ulp of exact: this is the
// reference. The forward saves lse, the one number per row the backward needs to rebuild p
// without another max and sum.
//
// Speed matters too: with GPTConfig::fused the CPU GPT trains through these functions. The
// problems are independent, so threads take whole heads (deterministic: no sum is split
// across threads). Within a head, k and v are first copied in double, zero padded to a
// multiple of 16 (k also transposed to (hs, T)), so that the two inner loops, the scores of
// one query against 16 keys and 16 columns of a weighted sum of rows, vectorize with their
// 16 running sums in registers (helpers below). At cpu-tiny's shapes (12 x 4 heads, T = 64,
// hs = 32, one core) the forward then takes about 0.6 times the composed op's time and the
// backward about twice its time (which runs on Eigen's float32 matmuls).
//
// Mixed precision (chapter 18): attention_forward_bf16 and attention_backward_bf16, the CPU's
// variants of the bf16-products slots (attention_forward:bf16, attention_backward:bf16), are the same
// loops with q, k, v (and dout) rounded to bfloat16 where they are read: at the copies of k
// and v, and of the rows of q and dout. Those copies are made anyway, so rounding costs no extra
// pass over memory, and the bf16 variants take the float32 ones' time. Sums, softmax
// statistics and outputs stay as in float32. On bf16 data (attention_*_on_bf16, the bf16 training
// step's) the same loops read bf16 where they copy (widening is exact), copy and sum in float
// rather than double, as the GPU's bf16 kernels sum (16 lanes of AVX-512 where double has 8),
// and round out to bf16 as they store it.
#include "kernels/cpu/cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "brrr/bfloat16.h"
#include "brrr/error.h"
#include "kernels/cpu/cpu.h"

namespace brrr::kernels::cpu {

namespace {

// Sixteen doubles (two AVX-512 registers) is the chunk the inner loops keep in registers.
constexpr std::int64_t kChunk = 16;
inline std::int64_t round_up(std::int64_t n) { return (n + kChunk - 1) / kChunk * kChunk; }

// An input as the loops read it: as it is, or (BF16, the mixed-precision ops) rounded to the
// nearest bfloat16, ties to even. A bf16 input is widened (exactly).
template <bool BF16, class Acc = double, class T>
inline Acc input(T x) {
  if constexpr (std::is_same_v<T, bf16>) return static_cast<Acc>(static_cast<float>(x));
  else if constexpr (BF16) return static_cast<Acc>(round_to_bf16(static_cast<float>(x)));
  else return static_cast<Acc>(x);
}

// An output as the loops store it: in T, a float32 result rounded once more when T is bf16 (so
// a bf16 out is the float32 kernel's out, rounded once).
template <class T, class Acc>
inline T output(Acc x, T*) {
  if constexpr (std::is_same_v<T, bf16>) return bf16(static_cast<float>(x));
  else return static_cast<T>(x);
}

// x (T, hs) -> x_t (hs, round_up(T)) in Acc (double, or float on bf16 data), zero padded.
template <bool BF16, class Acc, class T>
void transpose_padded(std::vector<Acc>& x_t, const T* x, std::int64_t T_len, std::int64_t hs) {
  const std::int64_t ld = round_up(T_len);
  x_t.assign(static_cast<std::size_t>(hs * ld), Acc(0));
  for (std::int64_t j = 0; j < T_len; ++j)
    for (std::int64_t d = 0; d < hs; ++d) x_t[d * ld + j] = input<BF16, Acc>(x[j * hs + d]);
}

// x (T, hs) -> x_p (T, round_up(hs)) in Acc, zero padded.
template <bool BF16, class Acc, class T>
void copy_padded(std::vector<Acc>& x_p, const T* x, std::int64_t T_len, std::int64_t hs) {
  const std::int64_t ld = round_up(hs);
  x_p.assign(static_cast<std::size_t>(T_len * ld), Acc(0));
  for (std::int64_t j = 0; j < T_len; ++j)
    for (std::int64_t d = 0; d < hs; ++d) x_p[j * ld + d] = input<BF16, Acc>(x[j * hs + d]);
}

// s[j] = scale * x . y[j] for j < n, with the rows y[j] stored as the columns of y_t (hs, ld).
// Sixteen scores are summed at a time, in registers, while d runs over the head: one load per
// multiply-add. (The plain loop "for d: for j: s[j] += x[d] y_t[d, j]" vectorizes too, but
// stores and reloads s[j] at every d, and ran at a third of the speed.)
template <class Acc>
void row_scores(Acc* s, const Acc* x, const std::vector<Acc>& y_t, std::int64_t n, std::int64_t ld, std::int64_t hs,
                Acc scale) {
  for (std::int64_t j0 = 0; j0 < n; j0 += kChunk) {
    Acc acc[kChunk] = {};
    for (std::int64_t d = 0; d < hs; ++d) {
      const Acc xd = x[d] * scale;
      const Acc* y = y_t.data() + d * ld + j0;
#pragma omp simd
      for (std::int64_t c = 0; c < kChunk; ++c) acc[c] += xd * y[c];
    }
    for (std::int64_t c = 0; c < kChunk && j0 + c < n; ++c) s[j0 + c] = acc[c];
  }
}

// out (hs) = sum over j < n of w[j] y[j], y (n, ld): sixteen outputs at a time, in registers.
template <class Acc>
void weighted_rows(Acc* out, const Acc* w, const Acc* y, std::int64_t n, std::int64_t ld, std::int64_t hs) {
  for (std::int64_t d0 = 0; d0 < hs; d0 += kChunk) {
    Acc acc[kChunk] = {};
    for (std::int64_t j = 0; j < n; ++j) {
      const Acc* yj = y + j * ld + d0;
#pragma omp simd
      for (std::int64_t c = 0; c < kChunk; ++c) acc[c] += w[j] * yj[c];
    }
    for (std::int64_t c = 0; c < kChunk && d0 + c < hs; ++c) out[d0 + c] = acc[c];
  }
}

// p[j] = exp(s[j] - shift) for j < n. For float the vectorizable exp_vec of cpu.h (about 1 ulp
// of float, below what a float32 result can show, where std::exp is a library call per
// element); for double, std::exp.
template <class T, class Acc>
void exp_shifted(Acc* p, const Acc* s, std::int64_t n, Acc shift) {
  for (std::int64_t j = 0; j < n; ++j) p[j] = exp_vec(static_cast<T>(s[j] - shift));
}

// Heads per parallel block: about 64k multiply-adds or more each (a head is about T^2 hs / 2
// of them per product), so that a tiny problem runs on one thread instead of paying for a
// parallel region. Heads are independent, so the grain changes nothing in the results.
inline std::int64_t heads_per_block(std::int64_t T_len, std::int64_t hs) {
  const std::int64_t per_head = std::max<std::int64_t>(1, T_len * T_len * std::max<std::int64_t>(hs, 1) / 2);
  return std::max<std::int64_t>(1, 65536 / per_head);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// forward: out (BH, T, hs), lse (BH, T)

namespace {

// Query rows taken together by the loops below (scores, add_rows_shares).
constexpr std::int64_t kRowBlock = 4;

// The scores of a block of query rows i0 .. i0 + block - 1 (x, rows at stride hs) against the
// keys each sees, into s (rows at stride s_ld): row_scores row by row, or, for a full block,
// four rows at once: each row's sums are row_scores's (the same multiply-adds in the same
// order, the same bits), but four independent chains hide the multiply-add's latency, which
// bounds row_scores in float (16 floats are one AVX-512 register: one chain), and each y[j] is
// loaded once for four rows.
template <class Acc>
void scores(Acc* s, const Acc* x, const std::vector<Acc>& y_t, std::int64_t i0, std::int64_t block, std::int64_t s_ld,
            std::int64_t ld, std::int64_t hs, Acc scale) {
  if (block != kRowBlock) {
    for (std::int64_t r = 0; r < block; ++r) row_scores(s + r * s_ld, x + r * hs, y_t, i0 + r + 1, ld, hs, scale);
    return;
  }
  for (std::int64_t j0 = 0; j0 < i0 + kRowBlock; j0 += kChunk) {
    Acc a[kRowBlock][kChunk] = {};
    for (std::int64_t d = 0; d < hs; ++d) {
      const Acc x0 = x[d] * scale, x1 = x[hs + d] * scale, x2 = x[2 * hs + d] * scale, x3 = x[3 * hs + d] * scale;
      const Acc* y = y_t.data() + d * ld + j0;
#pragma omp simd
      for (std::int64_t c = 0; c < kChunk; ++c) {
        a[0][c] += x0 * y[c];
        a[1][c] += x1 * y[c];
        a[2][c] += x2 * y[c];
        a[3][c] += x3 * y[c];
      }
    }
    for (std::int64_t r = 0; r < kRowBlock; ++r)
      for (std::int64_t c = 0; c < kChunk && j0 + c <= i0 + r; ++c) s[r * s_ld + j0 + c] = a[r][c];
  }
}

// T: the float type of the results (and of exp_vec); In, Out: the element types in memory; Acc:
// the type of the copies and sums (double; float on bf16 data).
template <bool BF16, class T, class Acc = double, class In = T, class Out = T>
void forward(Out* out, T* lse, const In* q, const In* k, const In* v, std::int64_t BH, std::int64_t T_len,
             std::int64_t hs, T scale) {
  parallel_for(BH, heads_per_block(T_len, hs), [&](std::int64_t begin, std::int64_t end) {
    std::vector<Acc> k_t, v_p, s(static_cast<std::size_t>(kRowBlock * T_len)), p(static_cast<std::size_t>(T_len));
    std::vector<Acc> acc(static_cast<std::size_t>(hs)), q_rows(static_cast<std::size_t>(kRowBlock * hs));
    for (std::int64_t bh = begin; bh < end; ++bh) {
      const std::int64_t base = bh * T_len * hs;
      transpose_padded<BF16>(k_t, k + base, T_len, hs);
      copy_padded<BF16>(v_p, v + base, T_len, hs);
      for (std::int64_t i0 = 0; i0 < T_len; i0 += kRowBlock) {
        const std::int64_t block = std::min(kRowBlock, T_len - i0);
        for (std::int64_t e = 0; e < block * hs; ++e) q_rows[e] = input<BF16, Acc>(q[base + i0 * hs + e]);
        scores(s.data(), q_rows.data(), k_t, i0, block, T_len, round_up(T_len), hs, static_cast<Acc>(scale));
        for (std::int64_t r = 0; r < block; ++r) {
          const std::int64_t i = i0 + r, n = i + 1;  // keys 0..i are visible
          const Acc* sr = s.data() + r * T_len;
          // Numerically stable: exp(s - max) never overflows, and lse = max + log(sum).
          Acc m = sr[0];
          for (std::int64_t j = 1; j < n; ++j) m = std::max(m, sr[j]);
          exp_shifted<T>(p.data(), sr, n, m);
          Acc l = 0;
          for (std::int64_t j = 0; j < n; ++j) l += p[j];
          weighted_rows(acc.data(), p.data(), v_p.data(), n, round_up(hs), hs);  // sum of p[j] v[j]
          Out* o = out + base + i * hs;
          for (std::int64_t d = 0; d < hs; ++d) o[d] = output(acc[d] / l, o);
          lse[bh * T_len + i] = static_cast<T>(static_cast<double>(m) + std::log(static_cast<double>(l)));
        }
      }
    }
  });
}

}  // namespace

template <class T>
void attention_forward(T* out, T* lse, const T* q, const T* k, const T* v, const AttentionShape& s, Stream) {
  forward<false>(out, lse, q, k, v, s.BH, s.T, s.hs, static_cast<T>(s.scale));
}

void attention_forward_bf16(float* out, float* lse, const float* q, const float* k, const float* v,
                            const AttentionShape& s, Stream) {
  forward<true>(out, lse, q, k, v, s.BH, s.T, s.hs, static_cast<float>(s.scale));
}

// ---------------------------------------------------------------------------------------------
// backward: dq, dk, dv (BH, T, hs) from dout (BH, T, hs)
//
// The standard derivation (chapter 15), with p rebuilt from lse:
//   dp[i, j] = dout[i] . v[j]
//   ds[i, j] = p[i, j] (dp[i, j] - D[i]),  D[i] = sum over j of p[i, j] dp[i, j] = dout[i] . out[i]
//   dq[i] = scale * sum over j <= i of ds[i, j] k[j]
//   dk[j] = scale * sum over i >= j of ds[i, j] q[i],   dv[j] = sum over i >= j of p[i, j] dout[i]
// D[i] = dout[i] . out[i] is the softmax backward's row sum, computed from out instead of
// from the whole row of p.
//
// Row by row again: dq[i] is finished with its row; each row adds its share into every dk[j]
// and dv[j] with j <= i (kept in double until the last row). (Taking dk and dv key by key
// instead, with one head's p and ds kept transposed, was a third slower here at T = 64 and 256.)
// In bf16, q, k, v and dout are rounded; out, like lse, is the forward's float32 result and is
// read as it is (rounding it in D = dout . out would move dq and dk by about 1e-2 for nothing).

namespace {

// The rows i0 .. i0 + block - 1's shares of dk[j] and dv[j] (ds[r][j] q[r] and p[r][j] dout[r],
// row r of the block seeing keys j <= i0 + r), added row after row as one row at a time would
// add them (the same bits), but with each dk[j] and dv[j] loaded and stored once per block of
// rows instead of once per row: those loads and stores, not the multiply-adds, bounded the
// loop.

template <class Acc>
void add_rows_shares(Acc* dk_acc, Acc* dv_acc, const Acc* p, const Acc* ds, const Acc* q, const Acc* g, std::int64_t i0,
                     std::int64_t block, std::int64_t T_len, std::int64_t hs) {
  const std::int64_t full = block == kRowBlock ? i0 + 1 : 0;  // keys every row of a full block sees
  for (std::int64_t j = 0; j < full; ++j) {
    Acc* dkj = dk_acc + j * hs;
    Acc* dvj = dv_acc + j * hs;
    const Acc s0 = ds[j], s1 = ds[T_len + j], s2 = ds[2 * T_len + j], s3 = ds[3 * T_len + j];
    const Acc p0 = p[j], p1 = p[T_len + j], p2 = p[2 * T_len + j], p3 = p[3 * T_len + j];
#pragma omp simd
    for (std::int64_t d = 0; d < hs; ++d) {
      Acc a = dkj[d], b = dvj[d];
      a += s0 * q[d];
      a += s1 * q[hs + d];
      a += s2 * q[2 * hs + d];
      a += s3 * q[3 * hs + d];
      b += p0 * g[d];
      b += p1 * g[hs + d];
      b += p2 * g[2 * hs + d];
      b += p3 * g[3 * hs + d];
      dkj[d] = a;
      dvj[d] = b;
    }
  }
  for (std::int64_t r = 0; r < block; ++r)  // the rest, row by row
    for (std::int64_t j = full; j <= i0 + r; ++j) {
      Acc* dkj = dk_acc + j * hs;
      Acc* dvj = dv_acc + j * hs;
      for (std::int64_t d = 0; d < hs; ++d) dkj[d] += ds[r * T_len + j] * q[r * hs + d];
      for (std::int64_t d = 0; d < hs; ++d) dvj[d] += p[r * T_len + j] * g[r * hs + d];
    }
}

template <bool BF16, class T, class Acc = double, class In = T>
void backward(T* dq, T* dk, T* dv, const In* dout, const In* q, const In* k, const In* v, const In* out, const T* lse,
              std::int64_t BH, std::int64_t T_len, std::int64_t hs, T scale) {
  const Acc sc = static_cast<Acc>(scale);
  const std::int64_t ld = round_up(T_len), ld_hs = round_up(hs);
  parallel_for(BH, heads_per_block(T_len, hs), [&](std::int64_t begin, std::int64_t end) {
    const std::size_t row = static_cast<std::size_t>(hs), rows = static_cast<std::size_t>(T_len * hs);
    std::vector<Acc> k_t, v_t, k_p, p(static_cast<std::size_t>(kRowBlock * T_len)), ds(p.size());
    std::vector<Acc> q_row(kRowBlock * row), do_row(kRowBlock * row), dq_row(row), dk_acc(rows), dv_acc(rows);
    for (std::int64_t bh = begin; bh < end; ++bh) {
      const std::int64_t base = bh * T_len * hs;
      transpose_padded<BF16>(k_t, k + base, T_len, hs);
      transpose_padded<BF16>(v_t, v + base, T_len, hs);
      copy_padded<BF16>(k_p, k + base, T_len, hs);
      std::fill(dk_acc.begin(), dk_acc.end(), Acc(0));
      std::fill(dv_acc.begin(), dv_acc.end(), Acc(0));
      for (std::int64_t i0 = 0; i0 < T_len; i0 += kRowBlock) {
        const std::int64_t block = std::min(kRowBlock, T_len - i0);
        Acc D[kRowBlock];
        for (std::int64_t r = 0; r < block; ++r) {  // the rows, and D[i] = dout[i] . out[i]
          const std::int64_t i = i0 + r;
          Acc *qr = q_row.data() + r * hs, *dor = do_row.data() + r * hs;
          const In *qi = q + base + i * hs, *doi = dout + base + i * hs, *oi = out + base + i * hs;
          D[r] = 0;
          for (std::int64_t d = 0; d < hs; ++d) {
            qr[d] = input<BF16, Acc>(qi[d]);
            dor[d] = input<BF16, Acc>(doi[d]);
            D[r] += dor[d] * input<false, Acc>(oi[d]);  // out as it is (never rounded again)
          }
        }
        // p[j] from the saved lse; ds[j] first holds dp[j] = dout[i] . v[j].
        scores(p.data(), q_row.data(), k_t, i0, block, T_len, ld, hs, sc);
        for (std::int64_t r = 0; r < block; ++r)
          exp_shifted<T>(p.data() + r * T_len, p.data() + r * T_len, i0 + r + 1,
                         static_cast<Acc>(lse[bh * T_len + i0 + r]));
        scores(ds.data(), do_row.data(), v_t, i0, block, T_len, ld, hs, Acc(1));
        for (std::int64_t r = 0; r < block; ++r) {  // ds, and row i's dq
          const std::int64_t i = i0 + r, n = i + 1;
          Acc *pr = p.data() + r * T_len, *dsr = ds.data() + r * T_len;
          for (std::int64_t j = 0; j < n; ++j) dsr[j] = pr[j] * (dsr[j] - D[r]);
          weighted_rows(dq_row.data(), dsr, k_p.data(), n, ld_hs, hs);  // sum of ds[j] k[j]
          for (std::int64_t d = 0; d < hs; ++d) dq[base + i * hs + d] = static_cast<T>(sc * dq_row[d]);
        }
        add_rows_shares(dk_acc.data(), dv_acc.data(), p.data(), ds.data(), q_row.data(), do_row.data(), i0, block,
                        T_len, hs);
      }
      for (std::int64_t e = 0; e < T_len * hs; ++e) {
        dk[base + e] = static_cast<T>(sc * dk_acc[e]);
        dv[base + e] = static_cast<T>(dv_acc[e]);
      }
    }
  });
}

}  // namespace

template <class T>
void attention_backward(T* dq, T* dk, T* dv, const T* dout, const T* q, const T* k, const T* v, const T* out,
                        const T* lse, const AttentionShape& s, Stream) {
  backward<false>(dq, dk, dv, dout, q, k, v, out, lse, s.BH, s.T, s.hs, static_cast<T>(s.scale));
}

void attention_backward_bf16(float* dq, float* dk, float* dv, const float* dout, const float* q, const float* k,
                             const float* v, const float* out, const float* lse, const AttentionShape& s, Stream) {
  backward<true>(dq, dk, dv, dout, q, k, v, out, lse, s.BH, s.T, s.hs, static_cast<float>(s.scale));
}

// ---------------------------------------------------------------------------------------------
// On bf16 data (the CPU variants of attention_* in dtype bfloat16, the ops of chapter 15's variant 4):
// the loops above reading bf16 where they copy (exact), with float copies and float32 sums (the
// float32 kernel's are double), out rounded once as it is stored. No widened copy of q, k, v.

namespace {
void check_sizes(const char* op, const AttentionShape& s) {
  BRRR_CHECK(s.BH >= 0 && s.T >= 0 && s.hs >= 0, op, ": sizes must not be negative, got BH = ", s.BH, ", T = ", s.T,
             ", hs = ", s.hs);
}
}  // namespace

void attention_forward_bf16_memory(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                   const AttentionShape& s, Stream) {
  check_sizes("attention_forward (bf16 data)", s);
  forward<false, float, float>(out, lse, q, k, v, s.BH, s.T, s.hs, static_cast<float>(s.scale));
}

void attention_backward_bf16_memory(float* dq, float* dk, float* dv, const bf16* dout, const bf16* q, const bf16* k,
                                    const bf16* v, const bf16* out, const float* lse, const AttentionShape& s, Stream) {
  check_sizes("attention_backward (bf16 data)", s);
  backward<false, float, float>(dq, dk, dv, dout, q, k, v, out, lse, s.BH, s.T, s.hs, static_cast<float>(s.scale));
}

// The packed forms (attention_forward_qkv, attention_backward_qkv on bf16 data): the heads
// copied out of qkv into (BH, T, hs), the two kernels above, the results copied back into the
// packed layouts, dq, dk and dv rounded to bf16 on the way. The copies are exact, so these give
// the bits of the unpacked calls; on the CPU they are O(T) beside the attention's O(T^2)
// arithmetic. The GPU's kernels read and write the packed layouts in place
// (kernels/cuda/attention/mma_sync.cu).
namespace {
void check_packed(const char* op, const AttentionShape& s, std::int64_t heads) {
  check_sizes(op, s);
  BRRR_CHECK(heads >= 1 && s.BH % heads == 0, op, ": heads must be positive and divide BH = ", s.BH, ", got ",
             heads);
}

// n values that the caller writes before reading: new T[n] leaves them as they are (bf16 and
// float are trivial), where a std::vector would first fill them with zeros, a pass for nothing.
template <class T>
std::unique_ptr<T[]> scratch(std::int64_t n) {
  return std::unique_ptr<T[]>(new T[static_cast<std::size_t>(n)]);
}

// Row t of head bh of a (B, T, width) matrix whose heads are hs-wide column blocks from `column`:
// packed[(b T + t) width + column + h hs ..], head = (bh T + t) hs in (BH, T, hs). to_heads
// copies packed -> heads, else heads -> packed (From converted to To: bf16 rounding to nearest).
template <class To, class From>
void copy_heads(To* to, const From* from, const AttentionShape& s, std::int64_t heads, std::int64_t width,
                std::int64_t column, bool to_heads) {
  const std::int64_t T = s.T, hs = s.hs;
  parallel_for(s.BH * T, grain(hs, kElementwiseGrain), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      const std::int64_t bh = row / T, t = row % T, b = bh / heads, h = bh % heads;
      const std::int64_t packed = (b * T + t) * width + column + h * hs, head = row * hs;
      for (std::int64_t d = 0; d < hs; ++d) {
        if (to_heads) to[head + d] = static_cast<To>(from[packed + d]);
        else to[packed + d] = static_cast<To>(from[head + d]);
      }
    }
  });
}
}  // namespace

void attention_forward_qkv_bf16(bf16* out, float* lse, const bf16* qkv, const AttentionShape& s, std::int64_t heads,
                                Stream stream) {
  check_packed("attention_forward_qkv (bf16 data)", s, heads);
  const std::int64_t C = heads * s.hs, n = s.BH * s.T * s.hs;
  const auto q = scratch<bf16>(n), k = scratch<bf16>(n), v = scratch<bf16>(n), o = scratch<bf16>(n);
  bf16* parts[3] = {q.get(), k.get(), v.get()};
  for (int i = 0; i < 3; ++i) copy_heads(parts[i], qkv, s, heads, 3 * C, i * C, true);
  attention_forward_bf16_memory(o.get(), lse, q.get(), k.get(), v.get(), s, stream);
  copy_heads(out, o.get(), s, heads, C, 0, false);
}

void attention_backward_qkv_bf16(bf16* dqkv, const bf16* dout, const bf16* qkv, const bf16* out, const float* lse,
                                 const AttentionShape& s, std::int64_t heads, Stream stream) {
  check_packed("attention_backward_qkv (bf16 data)", s, heads);
  const std::int64_t C = heads * s.hs, n = s.BH * s.T * s.hs;
  const auto q = scratch<bf16>(n), k = scratch<bf16>(n), v = scratch<bf16>(n), o = scratch<bf16>(n),
             g = scratch<bf16>(n);
  bf16* parts[3] = {q.get(), k.get(), v.get()};
  for (int i = 0; i < 3; ++i) copy_heads(parts[i], qkv, s, heads, 3 * C, i * C, true);
  copy_heads(o.get(), out, s, heads, C, 0, true);
  copy_heads(g.get(), dout, s, heads, C, 0, true);
  const auto dq = scratch<float>(n), dk = scratch<float>(n), dv = scratch<float>(n);
  attention_backward_bf16_memory(dq.get(), dk.get(), dv.get(), g.get(), q.get(), k.get(), v.get(), o.get(), lse, s,
                                 stream);
  const float* grads[3] = {dq.get(), dk.get(), dv.get()};
  for (int i = 0; i < 3; ++i) copy_heads(dqkv, grads[i], s, heads, 3 * C, i * C, false);
}

#define BRRR_INSTANTIATE(T)                                                                                         \
  template void attention_forward<T>(T*, T*, const T*, const T*, const T*, const AttentionShape&, Stream);          \
  template void attention_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const T*,        \
                                      const AttentionShape&, Stream);
BRRR_INSTANTIATE(float)
BRRR_INSTANTIATE(double)
#undef BRRR_INSTANTIATE

}  // namespace brrr::kernels::cpu
