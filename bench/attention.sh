#!/usr/bin/env bash
# bench/attention.sh: causal attention forward + backward on the GPU, head size 64, B*H = 384,
# T = 256 and 1024: brrr composed and flash, and PyTorch's scaled_dot_product_attention, all
# float32 (chapter 15). Run from the repo root after building with CUDA:
#   bench/attention.sh [build-dir]
set -euo pipefail
build=${1:-build}
python=${PYTHON:-/usr/bin/python3}
for T in 256 1024; do
  "$build/bench/bench_attention" "$T" 384 64 20
  "$python" bench/attention_peer.py "$T" 384 64 20
done
