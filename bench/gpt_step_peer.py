"""bench/gpt_step_peer.py PRESET BATCH [STEPS] [--device cuda] [--sdpa] [--compile] [--dtype bf16]: PyTorch's
GPT training step (chapters 08 and 17).

The peer of bench_gpt_step: the GPT of ../shared/reference/make_reference.py (nanoGPT's
architecture) in float32, AdamW with the same decay groups, random tokens drawn on the host
and copied to the device each step, and the thread count from OMP_NUM_THREADS (set by
bench/gpt_step.sh). On the GPU: --sdpa uses F.scaled_dot_product_attention (flash attention,
as nanoGPT does when it can), --compile wraps the model in torch.compile. TF32 stays off, as
in brrr. --dtype bf16: the forward under torch.autocast(device, torch.bfloat16) (mixed precision,
chapter 18; the backward follows the forward's dtypes), float32 weights and AdamW as brrr's.
Prints ms/step like brrr's program.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from timing import median_seconds

PRESETS = {  # vocab, block, layers, heads, embd, dropout
    "cpu-tiny": (65, 64, 4, 4, 128, 0.0),
    "shakespeare-char": (65, 256, 6, 6, 384, 0.2),
    "gpt-12m": (4096, 256, 6, 6, 384, 0.0),
    "gpt2-124m": (50304, 1024, 12, 12, 768, 0.0),  # GPT-2 124M, vocabulary padded as llm.c does
}


class Block(nn.Module):
    def __init__(s, C, H, p):
        super().__init__()
        s.H, s.p = H, p
        s.ln_1, s.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        s.c_attn, s.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        s.c_fc, s.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        s.drop = nn.Dropout(p)

    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.c_attn(s.ln_1(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, s.H, C // s.H).transpose(1, 2) for t in (q, k, v)]
        if SDPA:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=s.p if s.training else 0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // s.H)
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
            att = F.dropout(att.masked_fill(~mask, float("-inf")).softmax(-1), s.p, s.training)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        x = x + s.drop(s.attn_proj(y))
        return x + s.drop(s.mlp_proj(F.gelu(s.c_fc(s.ln_2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(s, V, Tmax, L, H, C, p):
        super().__init__()
        s.wte, s.wpe = nn.Embedding(V, C), nn.Embedding(Tmax, C)
        s.h = nn.ModuleList([Block(C, H, p) for _ in range(L)])
        s.ln_f, s.drop = nn.LayerNorm(C), nn.Dropout(p)
        # nanoGPT's GPT-2 initialisation: weights N(0, 0.02), residual projections
        # N(0, 0.02 / sqrt(2 L)), biases 0 (LayerNorm stays 1 and 0).
        for name, q in s.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(q, 0.0, 0.02 / math.sqrt(2 * L))
            elif name.endswith(".weight") and q.dim() == 2:
                nn.init.normal_(q, 0.0, 0.02)
            elif name.endswith(".bias") and "ln_" not in name:
                nn.init.zeros_(q)

    def forward(s, idx, targets):
        T = idx.shape[1]
        x = s.drop(s.wte(idx) + s.wpe(torch.arange(T, device=idx.device)))
        for b in s.h:
            x = b(x)
        logits = s.ln_f(x) @ s.wte.weight.T
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


SDPA = False


def main():
    global SDPA
    parser = argparse.ArgumentParser(description="PyTorch's GPT training step, the peer of bench_gpt_step")
    parser.add_argument("preset", choices=sorted(PRESETS))
    parser.add_argument("batch", type=int)
    parser.add_argument("steps", type=int, nargs="?", default=10)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--dtype", choices=["float32", "bf16"], default="float32", help="bf16: torch.autocast")
    a = parser.parse_args()
    preset, B, steps, device, compile_ = a.preset, a.batch, a.steps, a.device, a.compile
    SDPA = a.sdpa
    if SDPA and not hasattr(F, "scaled_dot_product_attention"):
        parser.error(f"--sdpa: torch {torch.__version__} has no F.scaled_dot_product_attention (PyTorch 2.0 or later)")
    V, T, L, H, C, p = PRESETS[preset]
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1337)
    m = GPT(V, T, L, H, C, p).to(device)
    fwd = torch.compile(m) if compile_ else m
    decay = [q for q in m.parameters() if q.dim() >= 2]
    nodecay = [q for q in m.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))

    def step():
        idx, tgt = torch.randint(0, V, (B, T)).to(device), torch.randint(0, V, (B, T)).to(device)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            loss = fwd(idx, tgt)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()

    s = median_seconds(step, steps, warmup=3 if compile_ else 2)
    where = torch.cuda.get_device_name() if device == "cuda" else f"threads={torch.get_num_threads()}"
    mode = ("compile" if compile_ else "eager") + (", sdpa" if SDPA else "") + (", bf16 autocast" if a.dtype == "bf16" else "")
    print(f"torch {torch.__version__} {preset} ({mode}) B={B} T={T} {where}: "
          f"{s * 1e3:.1f} ms/step, {B * T / s:.0f} tokens/s")


if __name__ == "__main__":
    main()
