"""tests/models/load_in_torch.py MODEL IO REFERENCE_DIR

Loads a brrr GPT checkpoint into the PyTorch GPT of ../shared/reference/make_reference.py
(with a plain safetensors reader: 8-byte length, JSON header, raw data) and checks that it
gives the logits brrr computed (stored in IO with the input idx). Exit 0 when they agree.
"""
import json
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, sys.argv[3])
import make_reference  # noqa: E402  (the reference GPT)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    types = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        tensors[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=types[e["dtype"]]).reshape(e["shape"]).copy())
    return tensors, meta


def main():
    params, meta = read_safetensors(sys.argv[1])
    io, _ = read_safetensors(sys.argv[2])
    cfg = json.loads(meta["config"])
    torch.set_default_dtype(torch.float32)
    m = make_reference.GPT(cfg["vocab_size"], cfg["block_size"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"])
    missing, unexpected = m.load_state_dict(params, strict=True), None
    idx = io["idx"].long()
    with torch.no_grad():
        logits, _ = m(idx, torch.zeros_like(idx))
    diff = (logits - io["logits"]).abs().max().item()
    print(f"max abs difference {diff:.3e}")
    sys.exit(0 if diff < 1e-4 else 1)


if __name__ == "__main__":
    main()
