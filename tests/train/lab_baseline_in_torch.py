"""tests/train/lab_baseline_in_torch.py DIR: the kernel lab's bf16 baselines (lab/kernel_lab.h,
Case::baseline; chapter 18) against PyTorch on the same inputs, for test_lab_baseline.cpp.

DIR holds float64 arrays (NAME.f64, raw little-endian) that brrr wrote: the inputs as a bf16
variant sees them and the lab's baseline outputs, for three problems:
  matmul_*     a (M, K), b (K, N), out = the baseline (bf16 operands, float32 or better sums)
  forward_*    q, k, v (BH, T, hs), out: causal attention with P rounded to bf16 for P v
  backward_*   dout, q, k, v, out, lse and dq, dk, dv: P rounded for dv, dS for dq and dk
and dims.txt (M N K, then BH T hs for both attention problems).

Checks, printing each figure:
  1. The careful bf16 path written with PyTorch's own ops, bf16 tensors widened to float32 for
     each product (float32 sums, as cuBLAS's bf16 GEMM and the tensor cores) and the softmax in
     float32, gives the lab's baselines: the GEMM's rounded to bf16 within one bf16 step, the
     attention forward's (P = softmax(S).bfloat16()) within 1e-5 on 99% of the outputs and a
     bf16 step of the output's scale on all (a P at a rounding tie may tip either way).
  2. PyTorch's bf16 matmul on bf16 tensors (whatever this build sums in) is no more accurate
     than the lab's baseline, so 2x the baseline is never more than 2x PyTorch's bf16 error.
     (Debian's torch 1.13 CPU build, BLAS_INFO=generic, measured 11x the float32 sum's error:
     it keeps partial sums in bf16, the loss tests/train/test_lab_baseline.cpp plants.)
  3. The baselines' recipes written with PyTorch's ops in float64 (the roundings through
     bfloat16 as the lab rounds: float64 -> float32 -> bf16) give the lab's outputs to 1e-9.
Exit 0 when every check passes.
"""
import math
import sys

import torch

d = sys.argv[1]


def load(name, shape):
    with open(f"{d}/{name}.f64", "rb") as f:
        data = bytearray(f.read())
    return torch.frombuffer(data, dtype=torch.float64).clone().reshape(shape)


def bf(x):  # the lab's rounding: to float32, then to the nearest bf16 (ties to even)
    return x.float().bfloat16().double()


def rel(got, ref):  # the lab's error: |got - ref| / max(|ref|, mean |ref|), largest
    scale = max(ref.abs().mean().item(), 1e-300)
    return ((got - ref).abs() / ref.abs().clamp(min=scale)).max().item()


failures = []


def check(what, ok, figure):
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {figure}")
    if not ok:
        failures.append(what)


def within_a_step(got16, baseline):  # got16 (bf16) is baseline rounded to bf16, or one step off
    want = bf(baseline)
    step = baseline.abs() * 2.0**-7 + 1e-6 * baseline.abs().mean()
    off = ((got16.double() - want).abs() > step).sum().item()
    exact = (got16.double() == want).double().mean().item()
    return off == 0, f"{100 * exact:.2f}% equal to the baseline rounded to bf16, {off} more than one step off"


dims = [int(x) for x in open(f"{d}/dims.txt").read().split()]
M, N, K, BH, T, hs = dims

# The GEMM.
a, b, out = load("matmul_a", (M, K)), load("matmul_b", (K, N)), load("matmul_out", (M, N))
a16, b16 = a.bfloat16(), b.bfloat16()
reference = a @ b  # a and b are bf16 values already: the float64 reference
check("bf16 operands, float32 sums (torch.matmul on the widened tensors) = the matmul baseline, rounded",
      *within_a_step((a16.float() @ b16.float()).bfloat16(), out))
native = (a16 @ b16).double()
check("torch.matmul on bf16 tensors is no more accurate than the matmul baseline",
      rel(out, reference) <= rel(native, reference),
      f"errors {rel(native, reference):.3e} (PyTorch's bf16 matmul), {rel(out, reference):.3e} (the baseline)")
check("the matmul baseline's recipe in float64", rel(out, bf(a) @ bf(b)) < 1e-9, f"{rel(out, bf(a) @ bf(b)):.2e}")

# The attention forward.
scale = 1.0 / math.sqrt(hs)
mask = torch.ones(T, T, dtype=torch.bool).tril()
q, k, v = (load(f"forward_{n}", (BH, T, hs)) for n in "qkv")
out = load("forward_out", (BH, T, hs))
s = (q @ k.transpose(1, 2) * scale).masked_fill(~mask, -math.inf)
reference = torch.softmax(s, dim=-1) @ v
s32 = (q.float() @ k.float().transpose(1, 2) * scale).masked_fill(~mask, -math.inf)  # bf16 q, k; float32 sums
p16 = torch.softmax(s32, dim=-1).bfloat16()  # PyTorch's float32 softmax, P stored in bf16
careful = (p16.float() @ v.float()).double()
near = ((careful - out).abs() <= 1e-5 * out.abs().mean()).double().mean().item()
far = ((careful - out).abs() > 2.0**-8 * out.abs().mean()).sum().item()
check("PyTorch's careful bf16 attention (bf16 q, k, v, float32 S and softmax, P bf16, float32 sums) = the forward "
      "baseline", near >= 0.99 and far == 0, f"{100 * near:.2f}% within 1e-5, {far} more than 2^-8 of the scale off")
native = torch.matmul(p16, v.bfloat16()).double()
check("... and with PyTorch's bf16 matmul for P v, no more accurate than the forward baseline",
      rel(out, reference) <= rel(native, reference),
      f"errors {rel(native, reference):.3e} (P v by torch.matmul in bf16), {rel(careful, reference):.3e} (float32 "
      f"sums), {rel(out, reference):.3e} (the baseline)")
recipe = bf(torch.softmax(s, dim=-1)) @ v
check("the forward baseline's recipe in float64", rel(out, recipe) < 1e-9, f"{rel(out, recipe):.2e}")
# The attention backward.
names = ["dout", "q", "k", "v", "out"]
dout, q, k, v, out = (load(f"backward_{n}", (BH, T, hs)) for n in names)
lse = load("backward_lse", (BH, T))
dq, dk, dv = (load(f"backward_{n}", (BH, T, hs)) for n in ["dq", "dk", "dv"])
dout, q, k, v, out = (bf(x) for x in (dout, q, k, v, out))
p = torch.exp(q @ k.transpose(1, 2) * scale - lse[:, :, None]).masked_fill(~mask, 0.0)
D = (dout * out).sum(-1, keepdim=True)
ds = p * (dout @ v.transpose(1, 2) - D)
want = {"dv": bf(p).transpose(1, 2) @ dout, "dq": scale * bf(ds) @ k, "dk": scale * bf(ds).transpose(1, 2) @ q}
for name, got in (("dq", dq), ("dk", dk), ("dv", dv)):
    e = rel(got, want[name])
    check(f"the backward baseline's recipe in float64: {name}", e < 1e-9, f"{e:.2e}")

print(f"{len(failures)} checks failed")
sys.exit(1 if failures else 0)
