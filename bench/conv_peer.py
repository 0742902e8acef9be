"""bench/conv_peer.py: PyTorch's conv2d forward + backward and the digits CNN's training step,
the peer of bench_conv (chapter 09). The same layers, batch and thread count (torch.set_num_threads
from OMP_NUM_THREADS); float32 on the CPU, where PyTorch runs oneDNN's convolutions.
"""
import os

import torch
import torch.nn.functional as F

from timing import median_seconds

LAYERS = [  # the same list as bench/bench_conv.cpp
    ("resnet 3x3 64->64 56x56", 32, 64, 56, 56, 64, 3, 1),
    ("cnn conv1 1->32 8x8", 32, 1, 8, 8, 32, 3, 1),
    ("cnn conv2 32->64 4x4", 32, 32, 4, 4, 64, 3, 1),
]


class CNN(torch.nn.Module):  # models/include/brrr/models/cnn.h
    def __init__(self, c1=32, c2=64, hidden=128):
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
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    torch.set_num_threads(threads)
    print(f"# PyTorch {torch.__version__} conv2d, {torch.get_num_threads()} thread(s), "
          f"mkldnn {torch.backends.mkldnn.is_available()}")
    print(f"{'layer':<26} {'fwd ms':<10} {'fwd+bwd ms':<10} {'GFLOP/s':<10}")
    torch.manual_seed(1)
    for name, n, cin, h, w, cout, k, pad in LAYERS:
        x = torch.randn(n, cin, h, w, requires_grad=True)
        wt = torch.randn(cout, cin, k, k, requires_grad=True)
        b = torch.randn(cout, requires_grad=True)
        dout = torch.randn(n, cout, h, w)
        big = h >= 32

        def fwd():
            with torch.no_grad():
                F.conv2d(x, wt, b, 1, pad)

        def both():
            x.grad = wt.grad = b.grad = None
            F.conv2d(x, wt, b, 1, pad).backward(dout)

        f = median_seconds(fwd, 5 if big else 50)
        s = median_seconds(both, 5 if big else 50)
        flops = 2.0 * n * cout * h * w * cin * k * k
        print(f"{name:<26} {f * 1e3:<10.3f} {s * 1e3:<10.3f} {3 * flops / s / 1e9:<10.1f}")
    model = CNN()
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    images, labels = torch.rand(32, 1, 8, 8), torch.randint(0, 10, (32,))

    def step():
        loss = F.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    print(f"{'cnn training step (b=32)':<26} {'':<10} {median_seconds(step, 200, 10) * 1e3:<10.3f}")


if __name__ == "__main__":
    main()
