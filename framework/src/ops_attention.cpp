// framework/src/ops_attention.cpp: flash_attention, causal self-attention as one fused op with
// a hand-written backward. Chapter 15 (flash attention). Read before: ops_nn.cpp (the composed
// causal_attention_composed computes the same thing from matmul, mask and softmax).
// Read next: kernels/cpu/attention.cpp, kernels/cuda/attention.cu.
//
// The composed op keeps the (B, H, T, T) attention matrix (and autograd keeps the scores,
// the masked scores and the softmax for the backward): memory grows as T^2. This op keeps
// only out and one log-sum-exp per row, lse (B, H, T); the backward kernel rebuilds the
// attention weights from q, k and lse.
//
// Under brrr::Autocast(kBFloat16) (chapter 18) float32 q, k, v go to the attention ops'
// bf16-products slots instead ("attention_forward:bf16"): inputs rounded to bfloat16, sums and
// softmax statistics in float32, as matmul does (ops_matmul.cpp). The backward closure remembers the scope.
// bf16 tensors go the same way, through float32 copies, the output rounded once.
#include <type_traits>

#include "brrr/autocast.h"
#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::saved;
using autograd::TensorList;

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  BRRR_PROFILE("flash_attention", q, k, v);
  for (const Tensor* t : {&q, &k, &v}) detail::check_defined("flash_attention", *t);
  BRRR_CHECK(q.dim() == 4 && k.shape() == q.shape() && v.shape() == q.shape(),
             "flash_attention: q, k, v must all be (B, H, T, hs), got ", shape_str(q.shape()), ", ",
             shape_str(k.shape()), ", ", shape_str(v.shape()));
  detail::check_same_dtype("flash_attention", q, k);
  detail::check_same_dtype("flash_attention", q, v);
  detail::check_same_device("flash_attention", q, k);
  detail::check_same_device("flash_attention", q, v);
  if (q.dtype() == kBFloat16) {  // as matmul: through float32 copies, under autocast
    const Autocast autocast(kBFloat16);
    return flash_attention(q.to(kFloat32), k.to(kFloat32), v.to(kFloat32)).to(kBFloat16);
  }
  const std::int64_t B = q.size(0), H = q.size(1), T = q.size(2), hs = q.size(3);
  const kernels::AttentionShape shape = kernels::AttentionShape::of(B * H, T, hs);  // scale 1 / sqrt(hs)
  // The kernels take (BH, T, hs) contiguous: the GPT's q, k, v are transposed views.
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  Tensor out = detail::new_like(qc);
  Tensor lse = detail::new_tensor({B, H, T}, q.dtype(), q.device());
  const DType precision = autocast_dtype();
  kernels::Call call;  // what the variants' eligibility rules read: a tiled kernel holds hs <= 128
  call.head_size = hs;
  static detail::KernelFamily<kernels::attention_forward_fn> forward(kernels::op::attention_forward<float>);
  static kernels::Kernel<kernels::attention_forward_fn<float>> forward_bf16(
      kernels::op::attention_forward<float>.autocast());
  detail::dispatch_floating(q.dtype(), "flash_attention", [&]<class F>() {
    auto kernel = forward.get<F>(q.device(), call);
    if constexpr (std::is_same_v<F, float>)
      if (precision == kBFloat16) kernel = forward_bf16(q.device().type, kFloat32, call);
    kernel(out.data_ptr<F>(), lse.data_ptr<F>(), qc.data_ptr<F>(), kc.data_ptr<F>(), vc.data_ptr<F>(), shape,
           detail::stream(q.device()));
  });
  if (autograd::needs_grad({&q, &k, &v}))
    autograd::record("flash_attention", {q, k, v}, out,
                     [qc = saved(qc), kc = saved(kc), vc = saved(vc), o = saved(out), lse, shape, precision,
                      call](const Tensor& g_in) {
                       static detail::KernelFamily<kernels::attention_backward_fn> backward(kernels::op::attention_backward<float>);
                       static kernels::Kernel<kernels::attention_backward_fn<float>> backward_bf16(
                           kernels::op::attention_backward<float>.autocast());
                       const Tensor g = g_in.contiguous();
                       Tensor dq = detail::new_like(qc), dk = detail::new_like(kc), dv = detail::new_like(vc);
                       detail::dispatch_floating(g.dtype(), "flash_attention", [&]<class F>() {
                         auto kernel = backward.get<F>(g.device(), call);
                         if constexpr (std::is_same_v<F, float>)
                           if (precision == kBFloat16)  // as the forward
                             kernel = backward_bf16(g.device().type, kFloat32, call);
                         kernel(dq.data_ptr<F>(), dk.data_ptr<F>(), dv.data_ptr<F>(), g.data_ptr<F>(),
                                qc.data_ptr<F>(), kc.data_ptr<F>(), vc.data_ptr<F>(), o.data_ptr<F>(),
                                lse.data_ptr<F>(), shape, detail::stream(g.device()));
                       });
                       return TensorList{dq, dk, dv};
                     });
  return out;
}

}  // namespace brrr::ops
