// kernels/cpu/matmul.cpp: matrix multiplication, naive and with Eigen's blocked GEMM.
// Chapter 04 (matmul and the CPU backend). Read before: reduce.cpp.
// Read next: gemm_blocked.cpp (brrr's own blocked GEMM, the default), then nn.cpp.
//
// "naive" is the textbook triple loop (accumulating in double): the reference every other
// variant is checked against.
// "eigen" cuts the output into a fixed grid of tiles and hands the tiles to threads; each
// tile is one single-threaded Eigen GEMM, which packs panels of A and B into cache-sized
// blocks and runs a register-blocked AVX micro-kernel. It is the default for float64 and
// where the CPU lacks AVX-512; elsewhere "blocked" (gemm_blocked.cpp) is about 1.3x faster.
// Every output element is computed by the same sequence of instructions however many
// threads run: results are bitwise identical for 1 or 2 threads (Eigen's own threading
// would change its blocking with the thread count, so it is switched off).
#include "kernels/cpu/cpu_kernels.h"

// Eigen must not thread on its own: the tile grid above is what makes results reproducible.
#define EIGEN_DONT_PARALLELIZE
#include <Eigen/Core>

#include "brrr/bfloat16.h"
#include "brrr/error.h"
#include "kernels/cpu/cpu.h"

namespace brrr::kernels::cpu {

template <class T>
void matmul_naive(T* out, const T* a, const T* b, const MatmulShape& s, Stream) {
  const std::int64_t M = s.M, N = s.N, K = s.K;
  parallel_for(s.batch * M, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bm = begin; bm < end; ++bm) {
      const std::int64_t batch = bm / M, i = bm % M;
      const T* A = a + batch * s.stride_a;
      const T* B = b + batch * s.stride_b;
      T* C = out + batch * s.stride_out;
      for (std::int64_t j = 0; j < N; ++j) {
        double acc = 0.0;
        for (std::int64_t k = 0; k < K; ++k) {
          const T av = s.trans_a ? A[k * M + i] : A[i * K + k];
          const T bv = s.trans_b ? B[j * K + k] : B[k * N + j];
          acc += static_cast<double>(av) * static_cast<double>(bv);
        }
        C[i * N + j] = s.accumulate ? static_cast<T>(C[i * N + j] + acc) : static_cast<T>(acc);
      }
    }
  });
}

template <class T>
void matmul_eigen(T* out, const T* a, const T* b, const MatmulShape& s, Stream) {
  using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ConstMap = Eigen::Map<const Matrix>;
  using Map = Eigen::Map<Matrix, 0, Eigen::OuterStride<>>;
  const std::int64_t M = s.M, N = s.N, K = s.K;
  if (M == 0 || N == 0) return;
  // Tiles of at most 256 x 256 outputs: large enough for Eigen's blocking to run at full
  // speed, small enough to give two threads several tiles each at GPT sizes.
  constexpr std::int64_t kTile = 256;
  const std::int64_t tiles_m = (M + kTile - 1) / kTile, tiles_n = (N + kTile - 1) / kTile;
  const std::int64_t tasks = s.batch * tiles_m * tiles_n;
  parallel_for(tasks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t task = begin; task < end; ++task) {
      const std::int64_t batch = task / (tiles_m * tiles_n);
      const std::int64_t tm = (task / tiles_n) % tiles_m, tn = task % tiles_n;
      const std::int64_t i0 = tm * kTile, j0 = tn * kTile;
      const std::int64_t rows = std::min(kTile, M - i0), cols = std::min(kTile, N - j0);
      Map C(out + batch * s.stride_out + i0 * N + j0, rows, cols, Eigen::OuterStride<>(N));
      if (K == 0) {
        if (!s.accumulate) C.setZero();
        continue;
      }
      const ConstMap A(a + batch * s.stride_a, s.trans_a ? K : M, s.trans_a ? M : K);
      const ConstMap B(b + batch * s.stride_b, s.trans_b ? N : K, s.trans_b ? K : N);
      // Each of the four transpose cases is its own expression, so Eigen sees the layout.
      auto run = [&](const auto& lhs, const auto& rhs) {
        if (s.accumulate) C.noalias() += lhs * rhs;
        else C.noalias() = lhs * rhs;
      };
      if (!s.trans_a && !s.trans_b) run(A.middleRows(i0, rows), B.middleCols(j0, cols));
      else if (!s.trans_a && s.trans_b) run(A.middleRows(i0, rows), B.middleRows(j0, cols).transpose());
      else if (s.trans_a && !s.trans_b) run(A.middleCols(i0, rows).transpose(), B.middleCols(j0, cols));
      else run(A.middleCols(i0, rows).transpose(), B.middleRows(j0, cols).transpose());
    }
  });
}

template void matmul_naive<float>(float*, const float*, const float*, const MatmulShape&, Stream);
template void matmul_naive<double>(double*, const double*, const double*, const MatmulShape&, Stream);
template void matmul_eigen<float>(float*, const float*, const float*, const MatmulShape&, Stream);
template void matmul_eigen<double>(double*, const double*, const double*, const MatmulShape&, Stream);

// gemm_bf16.cpp's GEMM with packing that reads bf16 (declared here, its one caller).
void matmul_bf16_data_plain(float* out, const bf16* a, const bf16* b, const MatmulShape& s, Stream stream);
void matmul_bf16_data_avx512(float* out, const bf16* a, const bf16* b, const MatmulShape& s, Stream stream);

// matmul on bf16 data (chapter 18; the CPU variant of the op of the CUDA matmul's variant 12): a and b
// stored as bf16, multiplied by the bf16 GEMM (gemm_bf16.cpp), whose packing reads them as they
// are (no widened copy; it once widened both to float32 first, a pass over each in memory).
void matmul_bf16_memory(float* out, const bf16* a, const bf16* b, const MatmulShape& s, Stream stream) {
  BRRR_CHECK(s.batch >= 0 && s.M >= 0 && s.N >= 0 && s.K >= 0, "matmul (bf16 data): sizes must not be negative, got ",
             "batch ", s.batch, ", M ", s.M, ", N ", s.N, ", K ", s.K);
  if (cpu_has_avx512_bf16()) matmul_bf16_data_avx512(out, a, b, s, stream);
  else matmul_bf16_data_plain(out, a, b, s, stream);
}

}  // namespace brrr::kernels::cpu
