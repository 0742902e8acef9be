// tests/distributed/test_distributed_gpu.cpp: NCCL on a GPU, one rank (chapter 19). With one
// rank brrr never calls NCCL; BRRR_FORCE_COLLECTIVES=1 sends the gradients through it anyway
// (an allreduce over one rank, on the runtime's side stream, overlapping the backward), and
// the run must give the plain GPU run's bits. Label cuda: skipped (exit 77) without a GPU, a
// brrr built with NCCL, or mpirun. test_distributed.cpp runs the same check on the CPU and on
// the emulator, where the forced path is MPI's.
#include <doctest/doctest.h>

#include "brrr/cuda.h"
#include "tests/distributed/distributed_test_util.h"
#include "tests/skip.h"

using namespace brrr;
using namespace brrr::test;

TEST_CASE("one rank forced through NCCL gives the plain GPU run's bits") {
  if (!cuda::gpu_available()) return test::skip("no CUDA GPU");
  if (!train::dist::built_with_nccl()) return test::skip("brrr was built without NCCL");
  if (const std::string why = cannot_run(); !why.empty()) return test::skip(why);
  for (const std::string overlap : {"true", "false"}) {
    CAPTURE(overlap);
    const std::string args = "--device cuda --max_iters 3 --eval_interval 100 --eval_iters 1 --bucket_mb 0.01 "
                             "--overlap_comm " + overlap;
    const auto [plain, forced] = run_plain_and_forced("gpu-nccl-" + overlap, args);
    CHECK(data_parallel_event(forced)["buckets"].get<int>() > 3);
    CHECK(losses(plain) == losses(forced));
    check_same_checkpoints(ckpt(plain, 3), ckpt(forced, 3));
  }
}
