#!/usr/bin/env bash
# bench/tensor_cores.sh: the bf16-in-memory tensor-core kernels against their bars, on the GPU:
# matmul variant 12 against cuBLAS's bf16 GEMM at 4096^3 (bar: >= 50%), attention variant 4
# against PyTorch's bf16 SDPA, causal, BH = 96, hs = 64, T = 1024 and 4096 (bars: forward
# <= 1.2x, forward + backward <= 1.3x). Chapters 14 and 15. Run from the repo root after building with CUDA:
#   bench/tensor_cores.sh [build-dir]
set -euo pipefail
build=${1:-build}
python=${PYTHON:-/usr/bin/python3}
"$build/bench/bench_tensor_cores" --gemm 4096 --attention 1024 96 64 --attention 4096 96 64
"$python" bench/tensor_cores_peer.py --gemm 4096 --attention 1024 96 64 --attention 4096 96 64
