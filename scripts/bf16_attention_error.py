#!/usr/bin/env python3
"""scripts/bf16_attention_error.py [SEEDS] [BH T HS]: where the bf16 flash attention backward's
error comes from (chapter 18; the kernel lab's bf16 baseline, lab/cases_attention.cpp).

The kernel lab measures attention's variant 3 backward (kernels/cuda/attention/mma_sync.cu) (bf16_mma) at 1.00x its bf16
baseline's error on every seed: it rounds what the baseline rounds, P before dv = P^T dout and
dS before dq = dS k and dk = dS^T q, and nothing else. This takes the baseline apart, in float64
with PyTorch's ops on the lab's kind of problem (q, k, v, dout drawn N(0, 1) and rounded to bf16;
out and lse from the rounded forward, rounded to bf16 as the lab hands them to a bf16 variant),
and prints each gradient's largest error over SEEDS seeds (default 50; sizes default to the
lab's emulator size 4 64 32), measured as the lab does (|got - ref| / max(|ref|, mean |ref|)),
for: both roundings (the kernel's and the baseline's), P's alone, dS's alone, and dS kept as
two bf16 numbers (hi + lo: two tensor-core products where there was one).
"""
import math
import sys

import torch


def bf(x):  # to float32, then to the nearest bf16 (ties to even), as the lab rounds
    return x.float().bfloat16().double()


def rel(got, ref):
    scale = max(ref.abs().mean().item(), 1e-300)
    return ((got - ref).abs() / ref.abs().clamp(min=scale)).max().item()


def main(argv):
    seeds = int(argv[1]) if len(argv) > 1 else 50
    BH, T, hs = (int(x) for x in argv[2:5]) if len(argv) > 4 else (4, 64, 32)
    scale = 1 / math.sqrt(hs)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    ways = {"P and dS rounded (the kernel, the baseline)": (True, "round"), "P rounded only": (True, "keep"),
            "dS rounded only": (False, "round"), "P rounded, dS as bf16 hi + lo": (True, "split")}
    worst = {}
    for seed in range(seeds):
        g = torch.Generator().manual_seed(seed)
        dout, q, k, v = (bf(torch.randn(BH, T, hs, generator=g, dtype=torch.float64)) for _ in range(4))
        s = (q @ k.transpose(1, 2) * scale).masked_fill(~mask, -math.inf)
        lse = bf(torch.logsumexp(s, -1))
        out = bf(torch.softmax(s, -1) @ v)
        p = torch.exp(s - lse[..., None])
        ds = p * (dout @ v.transpose(1, 2) - (dout * out).sum(-1, keepdim=True))
        ref = {"dq": scale * ds @ k, "dk": scale * ds.transpose(1, 2) @ q, "dv": p.transpose(1, 2) @ dout}
        for way, (round_p, how) in ways.items():
            P = bf(p) if round_p else p
            S = {"round": bf(ds), "keep": ds, "split": bf(ds) + bf(ds - bf(ds))}[how]
            got = {"dq": scale * S @ k, "dk": scale * S.transpose(1, 2) @ q, "dv": P.transpose(1, 2) @ dout}
            for name in ref:
                worst[(way, name)] = max(worst.get((way, name), 0.0), rel(got[name], ref[name]))
    print(f"largest error over {seeds} seeds, BH={BH} T={T} hs={hs}:")
    for way in ways:
        print(f"  {way:45s} " + "  ".join(f"{n} {worst[(way, n)]:.2e}" for n in ("dq", "dk", "dv")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
