// brrr/autocast.h: mixed precision's switch, in the manner of torch.autocast.
// Chapter 18 (mixed precision). Read before: ops.h. Read next: framework/src/ops_matmul.cpp.
//
//   {
//     brrr::Autocast autocast(brrr::kBFloat16);
//     Tensor loss = model.forward(x, y);   // matmuls multiply bf16 copies, add in float32
//     loss.backward();                     // ... and so do their backward matmuls
//   }
//
// Inside the scope (per thread, as NoGradGuard), the matmuls of float32 tensors (matmul,
// linear, and the matmuls of their backward, which remember the scope they were recorded in)
// round their operands to bfloat16 and accumulate the products in float32. Everything else
// stays float32: the results, LayerNorm, softmax, cross-entropy, reductions, the optimizer, and
// the parameters and gradients (the "master weights"), so checkpoints do not change.
// Autocast(kFloat32) turns it off inside an outer scope. float64 tensors are never autocast.
#pragma once
#include "brrr/dtype.h"

namespace brrr {

class Autocast {
 public:
  // dtype: kBFloat16 (on) or kFloat32 (off); anything else is an error.
  explicit Autocast(DType dtype);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DType previous_;
};

// The innermost scope's dtype on this thread: kFloat32 outside any scope.
DType autocast_dtype();

}  // namespace brrr
