// base/src/parallel.cpp: the CPU thread count (OpenMP underneath).
// Chapter 04 (matmul and the CPU backend).
#include "brrr/parallel.h"

#include <omp.h>

#include "brrr/error.h"

namespace brrr {

void set_num_threads(int threads) {
  BRRR_CHECK(threads >= 1, "set_num_threads: need at least 1 thread, got ", threads);
  omp_set_num_threads(threads);
}

int get_num_threads() { return omp_get_max_threads(); }

}  // namespace brrr
