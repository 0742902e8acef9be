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

    def get_lr(it):  # nanoGPT's
        if it < a.warmup_iters:
            return a.learning_rate * (it + 1) / (a.warmup_iters + 1)
        if it > a.lr_decay_iters:
            return a.min_lr
        ratio = (it - a.warmup_iters) / (a.lr_decay_iters - a.warmup_iters)
        return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (a.learning_rate - a.min_lr)

    model = GPT(len(chars), a.block_size, a.n_layer, a.n_head, a.n_embd, a.dropout)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    nodecay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=a.learning_rate, betas=(0.9, 0.99))
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
