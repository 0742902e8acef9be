"""tests/core/bf16_in_torch.py DIR: the bfloat16 safetensors files of test_bfloat16_tensor.cpp,
read by PyTorch (chapter 18). DIR/brrr.safetensors was written by brrr: "x" in BF16 and "x32"
(the same numbers before rounding) in F32. PyTorch must read "x" as bfloat16 and find the
bits its own float32 -> bfloat16 conversion gives for "x32". Then this writes DIR/torch.safetensors
(BF16 from torch) for brrr to read. A plain reader and writer (8-byte length, JSON header, raw
data), as tests/models/load_in_torch.py. Exit 0 when PyTorch agrees.
"""
import json
import struct
import sys

import torch

TYPES = {"F32": torch.float32, "BF16": torch.bfloat16}


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        flat = torch.frombuffer(data[a:b], dtype=TYPES[e["dtype"]]) if b > a else torch.empty(0, dtype=TYPES[e["dtype"]])
        out[name] = (e["dtype"], flat.clone().reshape(e["shape"]))
    return out


def write(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    d = sys.argv[1]
    t = read(d + "/brrr.safetensors")
    kind, x = t["x"]
    assert kind == "BF16" and x.dtype == torch.bfloat16, (kind, x.dtype)
    _, x32 = t["x32"]
    mine = x32.to(torch.bfloat16)
    same = (x.view(torch.int16) == mine.view(torch.int16)) | (torch.isnan(x) & torch.isnan(mine))
    bad = (~same).nonzero().flatten().tolist()
    print(f"torch {torch.__version__}: {x.numel()} bf16 values, {len(bad)} differ from torch's own rounding")
    for i in bad[:5]:
        print(f"  [{i}] float32 {x32.flatten()[i].item()!r}: brrr {x.flatten()[i].item()!r}, torch {mine.flatten()[i].item()!r}")
    y = torch.tensor([[1.0, -2.5, 3.140625], [1e-3, 65504.0, -0.0]]).to(torch.bfloat16)
    write(d + "/torch.safetensors", {"y": y})
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
