// brrr/parallel.h: how many CPU threads brrr's kernels use.
// Chapter 04 (matmul and the CPU backend).
//
// Kernels split work with OpenMP. Results never depend on the thread count: reductions are
// cut into fixed-size chunks whose partial results are combined in a fixed order.
#pragma once

namespace brrr {
void set_num_threads(int threads);  // also honours OMP_NUM_THREADS at start-up
int get_num_threads();
}  // namespace brrr
