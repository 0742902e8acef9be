"""tests/models/cnn_in_torch.py STATE IO

Loads a brrr CNN's state dict (models/include/brrr/models/cnn.h) into the same network
written with torch.nn (Conv2d, MaxPool2d, Linear) in float64, runs brrr's input through it and
checks the logits and the gradients of every parameter and of the input against brrr's (all in
IO). Covers conv2d with padding, max pooling and PyTorch's parameter names and shapes.
Exit 0 when they agree.
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    types = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype=types[e["dtype"]]).reshape(e["shape"]).copy())
    return out


class CNN(torch.nn.Module):
    def __init__(self, c1, c2, hidden):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, c1, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(c1, c2, 3, padding=1)
        self.fc1 = torch.nn.Linear(c2 * 4, hidden)
        self.fc2 = torch.nn.Linear(hidden, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def main():
    state, io = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2])
    m = CNN(state["conv1.weight"].shape[0], state["conv2.weight"].shape[0], state["fc1.weight"].shape[0]).double()
    m.load_state_dict(state, strict=True)
    x = io["x"].clone().requires_grad_(True)
    logits = m(x)
    (logits * io["w"]).sum().backward()
    worst = (logits - io["logits"]).abs().max().item()
    worst = max(worst, (x.grad - io["grad.x"]).abs().max().item())
    for name, p in m.named_parameters():
        worst = max(worst, (p.grad - io["grad." + name]).abs().max().item())
    print(f"max abs difference: {worst:.3g}")
    sys.exit(0 if worst < 1e-10 else 1)


if __name__ == "__main__":
    main()
