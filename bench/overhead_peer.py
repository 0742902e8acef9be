"""bench/overhead_peer.py: PyTorch's cost of one 8x8 add with autograd, the peer of bench_overhead
(chapter 03)."""

import torch

from timing import median_seconds


def main():
    torch.set_num_threads(1)
    torch.manual_seed(1)
    a = torch.randn(8, 8, requires_grad=True)
    b = torch.randn(8, 8, requires_grad=True)
    calls = 100000

    def loop():
        for _ in range(calls):
            torch.add(a, b)

    print(f"# PyTorch {torch.__version__}")
    print(f"torch add with autograd:    {median_seconds(loop, 7, 1) / calls * 1e6:.3f} us per op")
    with torch.no_grad():
        print(f"torch add without autograd: {median_seconds(loop, 7, 1) / calls * 1e6:.3f} us per op")


if __name__ == "__main__":
    main()
