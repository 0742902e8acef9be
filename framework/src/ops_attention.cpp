// framework/src/ops_attention.cpp: flash_attention, causal self-attention as one fused op with
// a hand-written backward. Chapter 15 (flash attention). Read before: ops_nn.cpp (the composed
// causal_attention_composed computes the same thing from matmul, mask and softmax).
// Read next: kernels/cpu/attention.cpp, kernels/cuda/attention/.
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
//
// flash_attention_qkv is the same op on the GPT's packed projection qkv (B, T, 3 C): it splits
// the heads by copies (which flash_attention makes too, of the transposed views) and its
// backward writes the gradient of qkv as one tensor, where the three views' own backwards
// would fill three zero (B, T, 3 C) tensors for autograd to add. On bf16 data its kernels read
// and write the packed layouts themselves, and there are no copies at all.
#include <type_traits>

#include "brrr/autocast.h"
#include "brrr/ops.h"
#include "brrr/profiler.h"
#include "dispatch.h"

namespace brrr::ops {

using autograd::saved;
using autograd::TensorList;

namespace {

// The registry's attention kernels for the forward and the backward, as one op call sees them:
// float32 or float64, and under Autocast(kBFloat16) the float32 bf16-products slots. `call`
// carries the head size the tiled variants' rules read.
struct FlashKernels {
  DType precision;
  kernels::Call call;
  kernels::AttentionShape shape;
};

FlashKernels flash_kernels(std::int64_t BH, std::int64_t T, std::int64_t hs) {
  FlashKernels f;
  f.precision = autocast_dtype();
  f.call.head_size = hs;  // a tiled kernel holds hs <= 128
  f.shape = kernels::AttentionShape::of(BH, T, hs);  // scale 1 / sqrt(hs)
  return f;
}

// out and lse from contiguous (BH, T, hs) q, k, v.
void flash_forward(const FlashKernels& f, const Tensor& qc, const Tensor& kc, const Tensor& vc, Tensor& out,
                   Tensor& lse) {
  static detail::KernelFamily<kernels::attention_forward_fn> forward(kernels::op::attention_forward<float>);
  static kernels::Kernel<kernels::attention_forward_fn<float>> forward_bf16(
      kernels::op::attention_forward<float>.autocast());
  detail::dispatch_floating(qc.dtype(), "flash_attention", [&]<class F>() {
    auto kernel = forward.get<F>(qc.device(), f.call);
    if constexpr (std::is_same_v<F, float>)
      if (f.precision == kBFloat16) kernel = forward_bf16(qc.device().type, kFloat32, f.call);
    kernel(out.data_ptr<F>(), lse.data_ptr<F>(), qc.data_ptr<F>(), kc.data_ptr<F>(), vc.data_ptr<F>(), f.shape,
           detail::stream(qc.device()));
  });
}

// dq, dk, dv (new, contiguous like qc) from the gradient g of out (contiguous).
TensorList flash_backward(const FlashKernels& f, const Tensor& g, const Tensor& qc, const Tensor& kc,
                          const Tensor& vc, const Tensor& out, const Tensor& lse) {
  static detail::KernelFamily<kernels::attention_backward_fn> backward(kernels::op::attention_backward<float>);
  static kernels::Kernel<kernels::attention_backward_fn<float>> backward_bf16(
      kernels::op::attention_backward<float>.autocast());
  Tensor dq = detail::new_like(qc), dk = detail::new_like(kc), dv = detail::new_like(vc);
  detail::dispatch_floating(g.dtype(), "flash_attention", [&]<class F>() {
    auto kernel = backward.get<F>(g.device(), f.call);
    if constexpr (std::is_same_v<F, float>)
      if (f.precision == kBFloat16)  // as the forward
        kernel = backward_bf16(g.device().type, kFloat32, f.call);
    kernel(dq.data_ptr<F>(), dk.data_ptr<F>(), dv.data_ptr<F>(), g.data_ptr<F>(), qc.data_ptr<F>(),
           kc.data_ptr<F>(), vc.data_ptr<F>(), out.data_ptr<F>(), lse.data_ptr<F>(), f.shape,
           detail::stream(g.device()));
  });
  return TensorList{dq, dk, dv};
}

// flash_attention_qkv on bf16 data (chapter 18, sections 10 and 12: activations bf16 in memory,
// no copies around the attention): the kernels read q, k and v from qkv (B, T, 3 C) where the
// projection left them, write out as (B, T, C), which is what c_proj reads (the (B, H, T, hs)
// tensor returned is a view of it, so the caller's transpose back is a view too), and the
// backward writes dq, dk and dv rounded once into qkv's bf16 gradient, reading dout as (B, T, C),
// the layout c_proj's backward gives. lse float32. Saved: qkv and out (bf16) and lse.
Tensor flash_attention_qkv_on_bf16(const Tensor& qkv, std::int64_t n_head) {
  const std::int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, hs = C / n_head;
  const kernels::AttentionShape shape = kernels::AttentionShape::of(B * n_head, T, hs);
  kernels::Call call;
  call.head_size = hs;
  const Tensor data = qkv.detach().contiguous();
  Tensor out = detail::new_tensor({B, T, C}, kBFloat16, qkv.device());
  Tensor lse = detail::new_tensor({B, n_head, T}, kFloat32, qkv.device());
  static kernels::Kernel<kernels::attention_forward_qkv_on_bf16_fn> forward(kernels::op::attention_forward_qkv_on_bf16);
  forward(qkv.device().type, kBFloat16, call)(out.data_ptr<bf16>(), lse.data_ptr<float>(), data.data_ptr<bf16>(),
                                              shape, n_head, detail::stream(qkv.device()));
  Tensor heads = out.view({B, T, n_head, hs}).transpose(1, 2);  // (B, H, T, hs), no copy
  if (autograd::needs_grad({&qkv}))
    autograd::record("flash_attention_qkv", {qkv}, heads,
                     [data, o = saved(out), lse, shape, call, B, T, C, n_head](const Tensor& g_in) {
                       static kernels::Kernel<kernels::attention_backward_qkv_on_bf16_fn> backward(
                           kernels::op::attention_backward_qkv_on_bf16);
                       // (B, H, T, hs) -> (B, T, C): a view where g_in is the transposed gradient
                       // c_proj's backward made; contiguous() copies only otherwise.
                       const Tensor g = g_in.to(kBFloat16).transpose(1, 2).contiguous();
                       Tensor grad = detail::new_tensor({B, T, 3 * C}, kBFloat16, g.device());
                       backward(g.device().type, kBFloat16, call)(grad.data_ptr<bf16>(), g.data_ptr<bf16>(),
                                                                  data.data_ptr<bf16>(), o.data_ptr<bf16>(),
                                                                  lse.data_ptr<float>(), shape, n_head,
                                                                  detail::stream(g.device()));
                       return TensorList{grad};
                     });
  return heads;
}

}  // namespace

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
  const FlashKernels f = flash_kernels(B * H, T, hs);
  // The kernels take (BH, T, hs) contiguous: the GPT's q, k, v are transposed views.
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  Tensor out = detail::new_like(qc);
  Tensor lse = detail::new_tensor({B, H, T}, q.dtype(), q.device());
  flash_forward(f, qc, kc, vc, out, lse);
  if (autograd::needs_grad({&q, &k, &v}))
    autograd::record("flash_attention", {q, k, v}, out,
                     [qc = saved(qc), kc = saved(kc), vc = saved(vc), o = saved(out), lse, f](const Tensor& g) {
                       return flash_backward(f, g.contiguous(), qc, kc, vc, o, lse);
                     });
  return out;
}

Tensor qkv_head(const Tensor& qkv, std::int64_t n_head, int which) {
  detail::check_qkv("qkv_head", qkv, n_head);
  BRRR_CHECK(which >= 0 && which < 3, "qkv_head: which must be 0 (q), 1 (k) or 2 (v), got ", which);
  const std::int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3;
  return qkv.narrow(2, which * C, C).view({B, T, n_head, C / n_head}).transpose(1, 2);
}

Tensor flash_attention_qkv(const Tensor& qkv, std::int64_t n_head) {
  BRRR_PROFILE("flash_attention_qkv", qkv);
  detail::check_qkv("flash_attention_qkv", qkv, n_head);
  const std::int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, hs = C / n_head;
  if (qkv.dtype() == kBFloat16) {
    // The kernels on bf16 data where the device has one for this head size (section 10 of
    // chapter 18); otherwise as flash_attention, through float32 copies.
    if (qkv.device().is_cpu() || hs == 64 || hs == 128) return flash_attention_qkv_on_bf16(qkv, n_head);
    const Autocast autocast(kBFloat16);
    return flash_attention_qkv(qkv.to(kFloat32), n_head).to(kBFloat16);
  }
  const FlashKernels f = flash_kernels(B * n_head, T, hs);
  // Split and move the heads next to the batch, (B, T, C) -> (B, H, T, hs), as copies the
  // kernels can read; no autograd node for them (this op's backward writes qkv's gradient).
  const Tensor data = qkv.detach();
  const Tensor qc = qkv_head(data, n_head, 0).contiguous(), kc = qkv_head(data, n_head, 1).contiguous(),
               vc = qkv_head(data, n_head, 2).contiguous();
  Tensor out = detail::new_like(qc);
  Tensor lse = detail::new_tensor({B, n_head, T}, qkv.dtype(), qkv.device());
  flash_forward(f, qc, kc, vc, out, lse);
  if (autograd::needs_grad({&qkv}))
    autograd::record("flash_attention_qkv", {qkv}, out,
                     [qc, kc, vc, o = saved(out), lse, f, B, T, C, n_head](const Tensor& g) {
                       const TensorList d = flash_backward(f, g.contiguous(), qc, kc, vc, o, lse);
                       // dq, dk, dv straight into their slices of one (B, T, 3 C) gradient: every
                       // element written once, where three narrow backwards would each fill a
                       // zero (B, T, 3 C) tensor and autograd would add the three.
                       Tensor grad = detail::new_tensor({B, T, 3 * C}, g.dtype(), g.device());
                       for (int i = 0; i < 3; ++i) qkv_head(grad, n_head, i).copy_(d[i]);
                       return TensorList{grad};
                     });
  return out;
}

}  // namespace brrr::ops
