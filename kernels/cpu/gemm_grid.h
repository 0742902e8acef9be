// kernels/cpu/gemm_grid.h: who computes which tile of C, for the blocked GEMMs.
// Chapter 04 (matmul and the CPU backend). Used by gemm_blocked.cpp (float32) and
// gemm_bf16.cpp (bf16 operands, chapter 18), which differ in how a tile is computed, never in
// how the tiles are shared out.
//
// The grid: column blocks of equal width up to NC; then, until the jobs share evenly among the
// threads (or are so many that the last round hardly matters), cut the longer side of the
// blocks once more. Each job is one block of one matrix of the batch, made of whole MR x NR
// micro-panels, and is computed by one thread alone, so the bits never depend on the grid.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "kernels/signatures.h"

namespace brrr::kernels::cpu {

// 64-byte aligned elements (packing buffers), freed on scope exit.
template <class T>
struct AlignedBuffer {
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data;
  explicit AlignedBuffer(std::int64_t count) {
    const std::size_t bytes = (static_cast<std::size_t>(count) * sizeof(T) + 63) / 64 * 64;
    data.reset(static_cast<T*>(std::aligned_alloc(64, bytes)));
    if (!data) throw std::bad_alloc();
  }
  T* get() const { return data.get(); }
};

// The cases with no products to compute: an empty C, or K = 0 (an empty sum: zero, or nothing
// to add). Returns true when it has handled the call.
inline bool gemm_trivial(float* out, const MatmulShape& s) {
  if (s.M == 0 || s.N == 0 || s.batch == 0) return true;
  if (s.K != 0) return false;
  if (!s.accumulate)
    for (std::int64_t bi = 0; bi < s.batch; ++bi) std::memset(out + bi * s.stride_out, 0, s.M * s.N * sizeof(float));
  return true;
}

// One job's part of C: matrix bi of the batch, rows [m0, m1), columns [n0, n1).
struct GemmTile {
  std::int64_t bi, m0, m1, n0, n1;
};

struct GemmGrid {
  using i64 = std::int64_t;
  i64 M, N, batch, mr, nr;
  i64 m_panels, n_panels;  // MR-row and NR-column micro-panels of one matrix
  i64 mb = 1, nb;          // blocks along M and N
  i64 jobs;
  int team;  // threads that take part: never more than there are jobs

  // mr x nr: the micro-kernel's tile; nc: the widest packed B block.
  GemmGrid(const MatmulShape& s, i64 mr, i64 nr, i64 nc) : M(s.M), N(s.N), batch(s.batch), mr(mr), nr(nr) {
    // Under ~1 MFLOP (a 64^3 matmul is 0.5) waking threads costs more than it saves. Many small
    // matrices (attention's (B*H, T, T) products) are simply many jobs, one matrix each.
    const double flops = 2.0 * M * N * s.K * batch;
    const int nth = flops < 1e6 || omp_in_parallel() ? 1 : omp_get_max_threads();
    m_panels = (M + mr - 1) / mr;
    n_panels = (N + nr - 1) / nr;
    nb = (n_panels + nc / nr - 1) / (nc / nr);
    auto balanced = [&] {
      const i64 j = batch * mb * nb;
      return j % nth == 0 || j >= 8 * nth;
    };
    while (!balanced()) {
      if (M * nb >= N * mb && mb < m_panels) ++mb;
      else if (nb < n_panels) ++nb;
      else break;
    }
    jobs = batch * mb * nb;
    team = static_cast<int>(std::min<i64>(nth, jobs));
  }

  // The widest block's columns, whole micro-panels: what a thread's packed B block must hold.
  i64 block_width() const { return (n_panels + nb - 1) / nb * nr; }

  GemmTile tile(i64 u) const {
    const i64 r = u % mb, q = (u / mb) % nb, bi = u / (mb * nb);
    // Whole micro-panels per block: [first, last) MR-row panels, and as many NR columns.
    return {bi, m_panels * r / mb * mr, std::min(M, m_panels * (r + 1) / mb * mr), n_panels * q / nb * nr,
            std::min(N, n_panels * (q + 1) / nb * nr)};
  }

  // Runs job(tile, thread) for every job. Dynamic: a thread that starts late (woken late, or
  // sharing its core) just takes fewer jobs.
  template <class Job>
  void run(const Job& job) const {
    if (team == 1) {
      for (i64 u = 0; u < jobs; ++u) job(tile(u), 0);
      return;
    }
#pragma omp parallel for schedule(dynamic, 1) num_threads(team)
    for (i64 u = 0; u < jobs; ++u) job(tile(u), omp_get_thread_num());
  }
};

}  // namespace brrr::kernels::cpu
