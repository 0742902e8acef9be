#!/usr/bin/env bash
# bench/conv.sh: brrr's conv2d (forward + backward) and the digits CNN's training step beside
# PyTorch's, same machine, same thread counts. Chapter 09 (convolutions).
# Run from the repo root after building: bench/conv.sh [build-dir]
# The peer is PyPI's PyTorch 2.15.0 (oneDNN), in its own virtual environment .venv-bench
# (git-ignored), made by bench/setup_bench_venv.sh on the first run (pinned:
# bench/requirements-bench.txt); BRRR_BENCH_PYTHON=/usr/bin/python3 uses Debian's instead.
set -euo pipefail
build=${1:-build}
if [[ -n ${BRRR_BENCH_PYTHON:-} ]]; then
  python=$BRRR_BENCH_PYTHON
else
  bench/setup_bench_venv.sh .venv-bench
  python=.venv-bench/bin/python
fi
for t in 1 2; do
  OMP_NUM_THREADS=$t $python bench/conv_peer.py
  echo
  OMP_NUM_THREADS=$t "$build/bench/bench_conv" --threads $t
  echo
done
