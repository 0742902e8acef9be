"""bench/attention_peer.py T [BH] [HS] [STEPS]: PyTorch's causal scaled_dot_product_attention,
forward + backward, float32, on the GPU (chapter 15). The peer of bench_attention; both are
run by bench/attention.sh. Prints ms per forward + backward like brrr's program.
"""
import argparse

import torch
import torch.nn.functional as F

from timing import median_seconds


def main():
    parser = argparse.ArgumentParser(description="PyTorch SDPA forward + backward, the peer of bench_attention")
    parser.add_argument("T", type=int)
    parser.add_argument("BH", type=int, nargs="?", default=384)
    parser.add_argument("hs", type=int, nargs="?", default=64)
    parser.add_argument("steps", type=int, nargs="?", default=20)
    a = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("no CUDA GPU")
    if not hasattr(F, "scaled_dot_product_attention"):
        parser.error(f"torch {torch.__version__} has no F.scaled_dot_product_attention (PyTorch 2.0 or later)")
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, a.BH, a.T, a.hs, device="cuda", generator=g, requires_grad=True) for _ in range(3))
    dout = torch.randn(1, a.BH, a.T, a.hs, device="cuda", generator=g)

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(dout)
        torch.cuda.synchronize()

    s = median_seconds(step, a.steps, warmup=3)
    print(f"torch {torch.__version__} sdpa float32 BH={a.BH} T={a.T} hs={a.hs} {torch.cuda.get_device_name()}: "
          f"{s * 1e3:.3f} ms forward+backward")


if __name__ == "__main__":
    main()
