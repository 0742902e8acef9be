"""bench/matmul_peer.py: NumPy (OpenBLAS) float32 matmul GFLOP/s, the peer of bench_matmul.

Chapter 04. Thread count comes from OPENBLAS_NUM_THREADS/OMP_NUM_THREADS, which must be set
before NumPy loads OpenBLAS, so bench/matmul.sh runs this once per thread count.
"""
import os
import sys

import numpy as np

from timing import median_seconds


def main():
    sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "128,256,512,1024,2048").split(",")]
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "?")
    rng = np.random.default_rng(1)
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        repeats = 50 if n <= 256 else 10 if n <= 1024 else 5
        s = median_seconds(lambda: a @ b, repeats)
        print(f"{n:<8} {threads:<8} {s * 1e3:<12.3f} {2 * n ** 3 / s / 1e9:<10.1f}")


if __name__ == "__main__":
    main()
