#!/usr/bin/env bash
# bench/gpt_step.sh: brrr's GPT training step beside PyTorch's, same machine, model, batch
# and threads (chapter 08). Run from the repo root after building: bench/gpt_step.sh [build-dir]
set -euo pipefail
build=${1:-build}
for threads in 2; do
  for run in "cpu-tiny 12 20" "shakespeare-char 16 5"; do
    OMP_NUM_THREADS=$threads /usr/bin/python3 bench/gpt_step_peer.py $run
    OMP_NUM_THREADS=$threads "$build/bench/bench_gpt_step" $run
  done
done
