"""tests/models/hf_load_export.py DIR TEXT_FILE OUT_JSON

Loads a folder written by `brrr export --format hf` with transformers alone
(GPT2LMHeadModel.from_pretrained, AutoTokenizer.from_pretrained) and writes to OUT_JSON what it
computes on the text: the tokenizer's ids, and the mean next-token loss over consecutive windows
of the context (brrr eval's definition), for tests/models/test_hf.cpp to compare with brrr's.
Chapter 08 (training: "Pretrained models").
"""
import json
import sys

import torch
from transformers import AutoTokenizer, GPT2LMHeadModel


def main():
    folder, text_path, out_path = sys.argv[1:4]
    text = open(text_path, encoding="utf-8", newline="").read()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = GPT2LMHeadModel.from_pretrained(folder)
    model.eval()
    ids = tokenizer(text)["input_ids"]
    n_ctx = model.config.n_positions
    n, total = len(ids) - 1, 0.0
    with torch.no_grad():
        for s in range(0, n, n_ctx):
            w = min(n_ctx, n - s)
            logits = model(torch.tensor([ids[s:s + w]])).logits[0]
            total += float(torch.nn.functional.cross_entropy(logits, torch.tensor(ids[s + 1:s + w + 1]), reduction="sum"))
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"ids": ids, "predicted": n, "loss": total / n, "decoded": tokenizer.decode(ids)}, f)


if __name__ == "__main__":
    main()
