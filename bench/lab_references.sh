#!/usr/bin/env bash
# bench/lab_references.sh: what the kernel lab's float64 references cost at the GPU lab list's
# sizes (scripts/gpu.sh's lab and lab_bf16 steps), without a GPU. Chapter 11 (the roofline and
# the kernel lab). Each run is `brrr kernel-lab ... --mode reference`: the inputs at the timed
# size, and the reference(s) at the size perf mode checks (Case::check_size); no kernel runs.
#   bench/lab_references.sh [build-dir] [threads]
# Prints each run's seconds and the total. The issue's bar: the whole list in under 60 s on the
# GPU machine's 16 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
threads=${2:-$(nproc)}
BRRR_GPU_SH_SOURCED=1 source scripts/gpu.sh
total=0
for run in "${lab_runs[@]}" "${lab_bf16_runs[@]}"; do
  # shellcheck disable=SC2086  # the options are words
  seconds=$(OMP_NUM_THREADS=$threads "$build/brrr" kernel-lab $run --mode reference --device cpu |
    sed -n 's/^reference: \([0-9.]*\) s .*/\1/p' | awk '{s += $1} END {printf "%.2f", s}')
  printf '%8.2f s  brrr kernel-lab %s\n' "$seconds" "$run"
  total=$(awk -v a="$total" -v b="$seconds" 'BEGIN {printf "%.2f", a + b}')
done
echo "total: $total s for the references of the GPU lab list, $threads threads, $(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
