"""bench/tensor_cores_peer.py [--gemm N] [--attention T BH HS] [--steps S]: the peers of
bench_tensor_cores in bf16 on the GPU (chapters 14 and 15): torch.matmul (cuBLAS's bf16 GEMM,
float32 accumulation) at N^3, and PyTorch's causal scaled_dot_product_attention (the flash
backend), forward and forward + backward, at (BH, T, HS). bench/tensor_cores.sh runs both programs.
"""
import argparse

import torch
import torch.nn.functional as F

from timing import median_seconds


def main():
    parser = argparse.ArgumentParser(description="cuBLAS bf16 GEMM and bf16 SDPA forward, the peers of bench_tensor_cores")
    parser.add_argument("--gemm", type=int, action="append", default=[])
    parser.add_argument("--attention", type=int, nargs=3, action="append", default=[], metavar=("T", "BH", "HS"))
    parser.add_argument("--steps", type=int, default=20)
    a = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("no CUDA GPU")
    if not a.gemm and not a.attention:
        a.gemm, a.attention = [4096], [[1024, 96, 64], [4096, 96, 64]]
    g = torch.Generator(device="cuda").manual_seed(0)
    name = torch.cuda.get_device_name()
    for n in a.gemm:
        x, y = (torch.randn(n, n, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(2))

        def gemm():
            torch.matmul(x, y)
            torch.cuda.synchronize()

        s = median_seconds(gemm, a.steps, warmup=3)
        print(f"torch {torch.__version__} matmul bf16 {n}^3 {name}: {s * 1e3:.4f} ms, {2 * n ** 3 / s / 1e12:.2f} TFLOP/s")
    for T, BH, hs in a.attention:
        q, k, v = (torch.randn(1, BH, T, hs, device="cuda", generator=g, dtype=torch.bfloat16) for _ in range(3))

        def forward():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)
            torch.cuda.synchronize()

        s = median_seconds(forward, a.steps, warmup=3)
        print(f"torch {torch.__version__} sdpa forward bf16 causal BH={BH} T={T} hs={hs} {name}: {s * 1e3:.4f} ms, "
              f"{2 * BH * T * T * hs / s / 1e12:.2f} TFLOP/s")
        for x in (q, k, v):
            x.requires_grad_()
        dout = torch.randn(1, BH, T, hs, device="cuda", generator=g, dtype=torch.bfloat16)

        def forward_backward():
            for x in (q, k, v):
                x.grad = None
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dout)
            torch.cuda.synchronize()

        s = median_seconds(forward_backward, a.steps, warmup=3)
        print(f"torch {torch.__version__} sdpa forward + backward bf16 causal BH={BH} T={T} hs={hs} {name}: "
              f"{s * 1e3:.4f} ms")


if __name__ == "__main__":
    main()
