#!/usr/bin/env bash
# bench/gpu_step.sh: the 12.3M GPT (6 layers, 6 heads, 384 wide, context 256, vocab 4096,
# batch 64) training step on the GPU: brrr (its kernels), composed, and its kernels replayed as a
# CUDA graph beside PyTorch eager (with and without scaled_dot_product_attention) and
# torch.compile, on the same GPU, float32, TF32 off; then brrr and torch.compile under bf16
# autocast (chapter 18).
# Chapter 17 (putting it together). Run from the repo root after building with CUDA:
#   bench/gpu_step.sh [build-dir] [steps]
set -euo pipefail
build=${1:-build}
steps=${2:-20}
python=${PYTHON:-/usr/bin/python3}
"$build/bench/bench_gpt_step" gpt-12m 64 "$steps" --device cuda
"$build/bench/bench_gpt_step" gpt-12m 64 "$steps" --device cuda --composed
"$build/bench/bench_gpt_step" gpt-12m 64 "$steps" --device cuda --cuda_graph
"$python" bench/gpt_step_peer.py gpt-12m 64 "$steps" --device cuda
"$python" bench/gpt_step_peer.py gpt-12m 64 "$steps" --device cuda --sdpa
"$python" bench/gpt_step_peer.py gpt-12m 64 "$steps" --device cuda --sdpa --compile
"$build/bench/bench_gpt_step" gpt-12m 64 "$steps" --device cuda --dtype bf16
"$python" bench/gpt_step_peer.py gpt-12m 64 "$steps" --device cuda --sdpa --compile --dtype bf16
