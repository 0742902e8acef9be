"""bench/train_peer.py: the PyTorch side of the training comparison (chapter 08).

nanoGPT's CPU recipe (config/train_shakespeare_char.py with the README's CPU overrides) on
character-level tinyshakespeare: the same vocabulary (the sorted characters), the same split
(the last 10% is validation), the same warmup + cosine schedule, AdamW (betas 0.9/0.99, weight
decay 0.1 on 2-D tensors), gradient clipping at 1.0, and evaluation every eval_interval steps
over eval_iters batches. Writes a JSON-lines log in brrr's format, so bench/plot_curves can
draw both runs on one plot.

  OMP_NUM_THREADS=2 /usr/bin/python3 bench/train_peer.py --out out/torch-cpu-tiny [--max_iters 2000]
"""
import argparse
import json
import math
import os
import time

import torch

from gpt_step_peer import GPT


def cosine_lr(it, lr, min_lr, warmup, decay_iters):
    """nanoGPT's warmup and cosine schedule, as brrr's optim::CosineSchedule computes it."""
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay_iters:
        return min_lr
    ratio = (it - warmup) / (decay_iters - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def adamw(model, lr, betas, weight_decay):
    """AdamW with weight decay on the 2-D tensors only (nanoGPT's groups, and brrr's)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": nodecay, "weight_decay": 0.0}], lr=lr, betas=betas)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "../../shared/data/tinyshakespeare.txt"))
    ap.add_argument("--out", default="out/torch-cpu-tiny")
    ap.add_argument("--max_iters", type=int, default=2000)
    ap.add_argument("--lr_decay_iters", type=int, default=2000)
    ap.add_argument("--eval_interval", type=int, default=250)
    ap.add_argument("--eval_iters", type=int, default=20)
    ap.add_argument("--batch_size", type=int, default=12)
    ap.add_argument("--block_size", type=int, default=64)
    ap.add_argument("--n_layer", type=int, default=4)
    ap.add_argument("--n_head", type=int, default=4)
    ap.add_argument("--n_embd", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--learning_rate", type=float, default=1e-3)
    ap.add_argument("--min_lr", type=float, default=1e-4)
    ap.add_argument("--warmup_iters", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1337)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n = int(len(data) * 0.9)
    splits = {"train": data[:n], "val": data[n:]}

    def batch(split):
        d = splits[split]
        ix = torch.randint(len(d) - a.block_size, (a.batch_size,))
        x = torch.stack([d[i:i + a.block_size] for i in ix])
        y = torch.stack([d[i + 1:i + 1 + a.block_size] for i in ix])
        return x, y

    def get_lr(it):
        return cosine_lr(it, a.learning_rate, a.min_lr, a.warmup_iters, a.lr_decay_iters)

    model = GPT(len(chars), a.block_size, a.n_layer, a.n_head, a.n_embd, a.dropout)
    opt = adamw(model, a.learning_rate, (0.9, 0.99), 0.1)
    log = open(os.path.join(a.out, "log.jsonl"), "w")

    @torch.no_grad()
    def evaluate(step):
        model.eval()
        out = {}
        for split in ("train", "val"):
            out[split] = sum(model(*batch(split)).item() for _ in range(a.eval_iters)) / a.eval_iters
        model.train()
        print(f"step {step}: train loss {out['train']:.4f}, val loss {out['val']:.4f}", flush=True)
        log.write(json.dumps({"event": "eval", "step": step, "train_loss": out["train"], "val_loss": out["val"]}) + "\n")
        log.flush()

    for it in range(a.max_iters):
        if it % a.eval_interval == 0:
            evaluate(it)
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = get_lr(it)
        loss = model(*batch("train"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ms = (time.perf_counter() - t0) * 1e3
        log.write(json.dumps({"event": "step", "step": it, "loss": loss.item(), "ms": ms}) + "\n")
    evaluate(a.max_iters)


if __name__ == "__main__":
    main()
