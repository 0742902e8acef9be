// exercises/grading.h: what the graders share, and the graders of the table (inside
// brrr::exercises; the public side is grader.h). Read before: grader.h. Read next: the graders,
// one file beside each stub in exercises/student/ (NAME_grader.cpp), in the course's order:
// div_backward (ex03.1), matmul_tiled (ex04.1), bpe_merge (ex06.1), im2col (ex09.1), gelu
// (ex12.1, ex12.2), layernorm (ex13.1, ex13.2), matmul (ex14.1), transpose (ex14.2), attention
// (ex15.1), crossentropy (ex16.1), adamw (ex16.2), bf16_round (ex18.1), tma_ring (ex21.1).
#pragma once
#include <functional>
#include <sstream>
#include <string>

#include "brrr/brrr.h"
#include "exercises/grader.h"
#include "brrr/strings.h"
#include "kernels/signatures.h"
#include "lab/kernel_lab.h"

namespace brrr::exercises {

// A failed check: thrown inside a grader, turned into a Failing result by grade().
struct Failure {
  std::string message;
};

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream m;
  (m << ... << args);
  throw Failure{m.str()};
}

Result result(Status status, std::string message);
// Runs a grader: a Failure is a failing Result, a stub's "not written yet" naming exercise `id`
// a not-started one, any other error a failing one with its message.
Result guarded(const std::string& id, const std::function<Result()>& grader);
// Runs f with `variant` of op selected on `device` (the CPU unless told), then puts back the
// selection that was there before (every dtype's the op has), even if f throws.
void with_kernel_variant(const std::string& op, const std::string& variant, const std::function<void()>& f,
                         DeviceType device = DeviceType::CPU);

// The matmul graders' problems (ex14.1's on float32, ex21.1's on bf16 data): one call's sizes,
// layouts and batch, and why it is there.
struct MatmulProblem {
  std::int64_t batch, M, N, K;
  bool trans_a, trans_b, accumulate, broadcast_b;
  const char* why = "";
  kernels::MatmulShape shape() const;  // contiguous matrices, a batch's b shared when broadcast_b
};
// A (rows, cols) float64 tensor of random normal numbers (of no numbers when rows * cols is 0).
Tensor random_matrix(std::int64_t rows, std::int64_t cols, Generator& gen);
// Fails, naming `what`, the problem and the first element of got (the kernel's out) farther
// than 1e-5 sqrt(K) (relative, at least absolute) from want (`reference`'s): float32 summation's
// error grows with K.
void check_matmul_out(const std::vector<float>& got, const std::vector<double>& want, const MatmulProblem& p,
                      const std::string& what, const char* reference);

// The table's graders (grader.cpp's all()), each given the variant to grade: "student",
// "solution" or, for a kernel exercise, any variant registered under its op.
Result grade_div_backward_variant(const std::string& variant);     // ex03.1, div_backward_grader.cpp
Result grade_matmul_tiled(const std::string& variant);             // ex04.1, matmul_tiled_grader.cpp
Result grade_bpe_merge_variant(const std::string& variant);        // ex06.1, bpe_merge_grader.cpp
Result grade_im2col(const std::string& variant);                   // ex09.1, im2col_grader.cpp
Result grade_gelu_forward(const std::string& variant);             // ex12.1, gelu_grader.cpp
Result grade_gelu_backward(const std::string& variant);            // ex12.2, gelu_grader.cpp
Result grade_layernorm_forward(const std::string& variant);        // ex13.1, layernorm_grader.cpp
Result grade_layernorm_backward(const std::string& variant);       // ex13.2, layernorm_grader.cpp
Result grade_matmul_shared(const std::string& variant);            // ex14.1, matmul_grader.cpp
Result grade_transpose(const std::string& variant);                // ex14.2, transpose_grader.cpp
Result grade_flash_attention_forward(const std::string& variant);  // ex15.1, attention_grader.cpp
Result grade_cross_entropy_fused(const std::string& variant);      // ex16.1, crossentropy_grader.cpp
Result grade_adamw_step(const std::string& variant);               // ex16.2, adamw_grader.cpp
Result grade_bf16_round_variant(const std::string& variant);       // ex18.1, bf16_round_grader.cpp
Result grade_tma_ring_matmul(const std::string& variant);          // ex21.1, tma_ring_grader.cpp

}  // namespace brrr::exercises
