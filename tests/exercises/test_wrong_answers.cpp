// tests/exercises/test_wrong_answers.cpp: every grader fails a complete but wrong answer, and
// its message says what went wrong where (docs/teaching.md). The answers, one planted mistake
// each, are in wrong/: the kind of slip a student makes, not a stub that throws. A grader that
// passed one of them would let that slip through to a student's "passing".
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "brrr/brrr.h"
#include "exercises/grader.h"
#include "tests/exercises/wrong/wrong_answers.h"
#include "tests/skip.h"
#if BRRR_EXERCISE_SOLUTIONS
#include "exercises/solutions/solutions.h"
#endif

using namespace brrr;

namespace {

// The result must be Failing (not "not started": the answer is complete) with a message that
// contains each of `says`.
void check_rejected(const exercises::Result& r, const std::vector<std::string>& says) {
  INFO("grader said: ", r.message);
  CHECK(r.status == exercises::Status::Failing);
  for (const std::string& s : says) {
    CAPTURE(s);
    CHECK(r.message.find(s) != std::string::npos);
  }
}

exercises::Result grade_variant(const std::string& id, const std::string& variant) {
  wrong::install_wrong_answers();
  return exercises::grade(exercises::find(id), variant);
}

}  // namespace

TEST_CASE("ex03.1: a div backward without the broadcast reduction fails, naming the shapes") {
  check_rejected(exercises::grade_div_backward(&wrong::div_without_sum_to),
                 {"div(a (2, 3), b (2, 1))", "a gradient of shape (2, 3) for an input of shape (2, 1)",
                  "summed back to its own shape: autograd::sum_to"});
}

TEST_CASE("ex04.1: a tiled matmul whose edge tiles stop a column short fails, naming the element") {
  check_rejected(grade_variant("ex04.1", "wrong_tile"), {"M 1, N 1, K 1: out[0][0][0] is ", "naive gives"});
}

TEST_CASE("ex09.1: an im2col that uses stride_h along W passes the lab's square cases but fails the grader") {
  check_rejected(grade_variant("ex09.1", "wrong_stride"),
                 {"stride (2, 1), padding (1, 3), dilation (1, 2): out[", "an option of H used for W"});
}

TEST_CASE("ex18.1: truncating, rounding ties away from zero, and a NaN that becomes infinity all fail") {
  check_rejected(exercises::grade_bf16_round(&wrong::bf16_truncated),
                 {"float_to_bf16(", "the nearest bfloat16 is", "is over halfway, so round up"});
  check_rejected(exercises::grade_bf16_round(&wrong::bf16_ties_away),
                 {"float_to_bf16(", "a tie goes to the value whose last bit is 0"});
  check_rejected(exercises::grade_bf16_round(&wrong::bf16_nan_unguarded), {"not a NaN: a NaN must stay a NaN"});
}

TEST_CASE("ex06.1: a tie to the larger pair, and merging overlapping pairs, both fail") {
#if BRRR_EXERCISE_SOLUTIONS
  check_rejected(exercises::grade_bpe_merge(&wrong::most_frequent_pair_larger_tie, &solution::merge_pair),
                 {"most_frequent_pair(", "expected (1, 2)"});
  check_rejected(exercises::grade_bpe_merge(&solution::most_frequent_pair, &wrong::merge_pair_overlapping),
                 {"merge_pair({97, 97, 97}, 97, 97, 300) gave {300, 300}, expected {300, 97}"});
#else
  test::skip("no reference solutions in this build: a wrong half needs a right other half");
#endif
}

// ex14.2 is graded on its memory counters too (on the emulator): the naive kernel (the op's
// built-in variant) writes a column per warp, a [32][32] tile conflicts on its column reads, and
// a grid rounded down leaves the ragged edges unwritten.
TEST_CASE("ex14.2: an uncoalesced store, bank conflicts and unwritten edge tiles all fail") {
  check_rejected(grade_variant("ex14.2", "naive"),
                 {"transpose variant 'naive'", "the global stores are not coalesced",
                  "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum 6144;", "stores 32.00 (ideal 4.00)"});
  check_rejected(grade_variant("ex14.2", "wrong_unpadded"),
                 {"transpose variant 'wrong_unpadded'",
                  "shared memory has bank conflicts: 5952 on loads and 0 on stores",
                  "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum 5952"});
  check_rejected(grade_variant("ex14.2", "wrong_whole_tiles"),
                 {"transpose variant 'wrong_whole_tiles'", "M=67 N=45", "= nan (reference "});
}

// ex12.1-ex16.2 run on the GPU, or on the emulator without one (slow: every thread a fiber, but the
// graders' sizes are small).
TEST_CASE("ex12.1-ex16.2: each CUDA kernel with one planted mistake fails its grader") {
  struct Wrong {
    const char* id;
    const char* variant;
    std::vector<std::string> says;
  };
  const std::vector<Wrong> answers = {
      {"ex12.1", "wrong_no_cubic", {"gelu_forward", "wrong_no_cubic"}},
      {"ex12.2", "wrong_half_product_rule", {"gelu_backward", "wrong_half_product_rule"}},
      {"ex13.1", "wrong_unbiased_variance", {"layernorm_forward", "wrong_unbiased_variance"}},
      {"ex13.2", "wrong_no_mean_term", {"layernorm_backward", "wrong_no_mean_term"}},
      {"ex14.1", "wrong_tile_short", {"matmul", "wrong_tile_short"}},
      {"ex15.1", "wrong_no_rescale", {"attention_forward", "wrong_no_rescale"}},
      {"ex16.1", "wrong_no_dloss", {"cross_entropy_fused", "wrong_no_dloss"}},
      {"ex16.2", "wrong_no_bias_correction", {"adamw_step", "wrong_no_bias_correction"}},
  };
  for (const Wrong& w : answers) {
    CAPTURE(w.id);
    std::vector<std::string> says = w.says;
    says.push_back("but the reference is");  // the first wrong element, its value and the right one
    check_rejected(grade_variant(w.id, w.variant), says);
  }
}

// ex21.1 is graded on the emulator, whose sanitizer and deadlock report name an ordering mistake
// that on a chip would be a wrong number or a hang.
TEST_CASE("ex21.1: a producer that refills a stage before its release, or waits for the wrong parity, fails") {
  // Without the wait it laps the ring at once: a second arrival on a stage's `full` in one phase.
  check_rejected(grade_variant("ex21.1", "wrong_no_empty_wait"),
                 {"wrong_kernels.cu", "more arrivals than the count it was initialized with"});
  // Waiting for parity 0 on lap 0: the consumers' first release would complete it, and they wait
  // for the producer's first copies; the emulator names the wait and the barrier's state.
  check_rejected(grade_variant("ex21.1", "wrong_parity"),
                 {"variant 'wrong_parity'", "wrong_kernels.cu", "for a phase that never completes",
                  "256 of its 256 arrivals still to come"});
}

