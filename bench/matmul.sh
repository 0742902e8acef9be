#!/usr/bin/env bash
# bench/matmul.sh: brrr's matmul beside NumPy on OpenBLAS, same machine, same thread counts.
# Chapter 04. Run from the repo root after building: bench/matmul.sh [build-dir]
set -euo pipefail
build=${1:-build}
python=/usr/bin/python3
echo "# NumPy $($python -c 'import numpy; print(numpy.__version__)') on $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
printf "%-8s %-8s %-12s %-10s\n" size threads ms GFLOP/s
for t in 1 2; do
  OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t $python bench/matmul_peer.py
done
echo
"$build/bench/bench_matmul"
