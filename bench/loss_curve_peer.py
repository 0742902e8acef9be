"""bench/loss_curve_peer.py: PyTorch trains brrr's run again, from brrr's own first weights and on
brrr's own batches (chapter 18, "Same numerics as the peers"; issue 55 item 6).

bench/loss_curves.sh runs it. What it needs from brrr:
  --init  a checkpoint brrr wrote before its first step (`brrr train ... --max_iters 0`): the
          weights, and the run's settings (its metadata's train_config: shape, schedule, AdamW,
          clipping, batch, seed, evaluation)
  --data  the folder of token shards the brrr runs trained on (`brrr tokenizer encode --shards`)
With these it takes the same steps brrr takes: the same initial weights; the same windows, drawn
as train/data.cpp draws them (Philox 4x32-10 of base/include/brrr/generator.h, seeded seed + 1,
one 64-bit draw per window, start = draw mod (n - T)); evaluation on the batches of a generator
seeded seed * 1000003 + step, as train/trainer.cpp's evaluate(); nanoGPT's warmup and cosine
schedule (optim::CosineSchedule); AdamW with decay on 2-D tensors only; clipping to grad_clip.
--dtype bf16 runs the forward under torch.autocast(bfloat16), PyTorch's mixed precision, on the
CPU or (--device cuda) the GPU.
Writes log.jsonl in brrr's format (events "step" and "eval").

  OMP_NUM_THREADS=2 .venv-bench/bin/python bench/loss_curve_peer.py --init out/lc/init/ckpt-00000000.safetensors \
      --data out/lc/shards --dtype bf16 --max_iters 300 --out out/lc/torch-bf16
"""
import argparse
import glob
import json
import os
import time

import numpy as np
import torch
from safetensors import safe_open

from gpt_step_peer import GPT
from train_peer import adamw, cosine_lr

M32 = 0xFFFFFFFF


def philox4x32(key, counter):
    """base/include/brrr/generator.h's philox4x32: four 32-bit words for (key, counter)."""
    c0, c1, c2, c3 = counter & M32, (counter >> 32) & M32, 0, 0
    k0, k1 = key & M32, (key >> 32) & M32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c3 ^ k1) & M32, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


class Generator:
    """brrr::Generator's next_u64: block `offset` of the seed's stream, its first two words."""

    def __init__(s, seed):
        s.seed, s.offset = seed & 0xFFFFFFFFFFFFFFFF, 0

    def next_u64(s):
        w = philox4x32(s.seed, s.offset)
        s.offset += 1
        return (w[0] << 32) | w[1]


def read_shards(folder):
    """Every brrr token file in the folder, in name order, as one array of ids (train/data.cpp)."""
    ids = []
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        with open(path, "rb") as f:
            head = f.read(64)
        if head[:8] != b"BRRRTOK\0":
            continue
        assert "_val_" not in os.path.basename(path), f"{path}: val shards are not handled here"
        version, id_bytes, count = np.frombuffer(head[8:24], dtype="<u4")[:2].tolist() + [
            int(np.frombuffer(head[16:24], dtype="<u8")[0])]
        offset = 32 if version == 1 else 64
        ids.append(np.fromfile(path, dtype="<u2" if id_bytes == 2 else "<u4", count=count, offset=offset))
    assert ids, f"{folder}: no brrr token files"
    return np.concatenate(ids).astype(np.int64)


def brrr_name(name):
    """gpt_step_peer's parameter name as brrr (and nanoGPT) names it: h.0.attn_proj.weight is
    transformer.h.0.attn.c_proj.weight. The classifier is wte, tied, in both."""
    parts = name.split(".")
    if parts[0] == "h":
        sub = {"c_attn": "attn.c_attn", "attn_proj": "attn.c_proj", "c_fc": "mlp.c_fc", "mlp_proj": "mlp.c_proj"}
        parts[2] = sub.get(parts[2], parts[2])
    return "transformer." + ".".join(parts)


def load_init(path):
    """The model's tensors and the run's settings from a brrr checkpoint."""
    with safe_open(path, framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys() if not k.startswith("optimizer.")}
    assert int(meta["step"]) == 0, f"{path}: written after {meta['step']} steps, not before the first"
    return tensors, json.loads(meta["train_config"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--init", required=True, help="brrr's checkpoint before its first step")
    ap.add_argument("--data", required=True, help="the folder of token shards brrr trained on")
    ap.add_argument("--dtype", choices=["float32", "bf16"], default="bf16")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--max_iters", type=int, required=True, help="the brrr run's (the --init run took 0)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    tensors, c = load_init(a.init)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    os.makedirs(a.out, exist_ok=True)

    V = tensors["transformer.wte.weight"].shape[0]
    B, T, L = c["batch_size"], c["block_size"], c["n_layer"]
    assert c["dropout"] == 0.0 and c["grad_accum"] == 1 and c["bias"], "the peer takes dropout 0, grad_accum 1, biases"
    model = GPT(V, T, L, c["n_head"], c["n_embd"], 0.0)
    state = {k: brrr_name(k) for k in model.state_dict()}
    assert set(state.values()) == set(tensors), f"names differ: {sorted(set(state.values()) ^ set(tensors))}"
    model.load_state_dict({k: tensors[b].to(torch.float32) for k, b in state.items()})
    model.to(a.device)

    ids = read_shards(a.data)
    train_end = int(len(ids) * (1.0 - c["val_fraction"]))
    splits = {"train": (0, train_end), "val": (train_end, len(ids) - train_end)}

    def batch(split, gen):
        begin, n = splits[split]
        starts = [begin + gen.next_u64() % (n - T) for _ in range(B)]
        w = torch.from_numpy(np.stack([ids[s:s + T + 1] for s in starts])).to(a.device)
        return w[:, :-1].contiguous(), w[:, 1:].contiguous()

    def loss_of(x, y):
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
            return model(x, y)

    def lr_at(it):
        return cosine_lr(it, c["learning_rate"], c["min_lr"], c["warmup_iters"], c["lr_decay_iters"])

    opt = adamw(model, c["learning_rate"], (c["beta1"], c["beta2"]), c["weight_decay"])
    log = open(os.path.join(a.out, "log.jsonl"), "w")

    @torch.no_grad()
    def evaluate(step):
        model.eval()
        means = {}
        for split in ("train", "val"):
            gen = Generator(c["seed"] * 1000003 + step)
            means[split] = sum(loss_of(*batch(split, gen)).item() for _ in range(c["eval_iters"])) / c["eval_iters"]
        model.train()
        print(f"step {step}: train loss {means['train']:.4f}, val loss {means['val']:.4f}", flush=True)
        log.write(json.dumps({"event": "eval", "step": step, "train_loss": means["train"],
                              "val_loss": means["val"]}) + "\n")
        log.flush()

    data_gen = Generator(c["seed"] + 1)
    for it in range(a.max_iters):
        if it % c["eval_interval"] == 0:
            evaluate(it)
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(it)
        loss = loss_of(*batch("train", data_gen))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if c["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), c["grad_clip"])
        opt.step()
        if a.device == "cuda":
            torch.cuda.synchronize()  # the step is done when the GPU is done
        ms = (time.perf_counter() - t0) * 1e3
        log.write(json.dumps({"event": "step", "step": it, "loss": loss.item(), "ms": ms}) + "\n")
    evaluate(a.max_iters)


if __name__ == "__main__":
    main()
