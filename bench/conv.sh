#!/usr/bin/env bash
# bench/conv.sh: brrr's conv2d (forward + backward) and the digits CNN's training step beside
# PyTorch's, same machine, same thread counts. Chapter 09 (convolutions).
# Run from the repo root after building: bench/conv.sh [build-dir]
# The peer is PyPI's current PyTorch (oneDNN), in its own virtual environment .venv-bench
# (git-ignored), made on the first run; BRRR_BENCH_PYTHON=/usr/bin/python3 uses Debian's instead.
set -euo pipefail
build=${1:-build}
python=${BRRR_BENCH_PYTHON:-.venv-bench/bin/python}
if [[ ! -x $python ]]; then
  python3 -m venv .venv-bench
  .venv-bench/bin/pip install -q torch --index-url https://download.pytorch.org/whl/cpu
fi
for t in 1 2; do
  OMP_NUM_THREADS=$t $python bench/conv_peer.py
  echo
  OMP_NUM_THREADS=$t "$build/bench/bench_conv" --threads $t
  echo
done
