#!/usr/bin/env bash
# bench/loss_curves.sh: brrr's bf16 training against PyTorch's autocast, from the same weights on
# the same batches (chapter 18, "Same numerics as the peers"; issue 55 item 6).
#
# A small GPT-2 (4 layers, 256 wide, 4 heads, T 256) on tinyshakespeare with a BPE vocabulary
# brrr trains; 300 steps, evaluated every 50. Three runs, the same init and data order:
#   brrr --dtype float32, brrr --dtype bf16, PyTorch bf16 under torch.autocast
# (bench/loss_curve_peer.py reads brrr's first weights and draws brrr's batches; PEER_FLOAT32=1
# adds PyTorch float32, whose losses match brrr float32's: checked over 4 steps, to 4 decimals,
# 2026-11-29). A finished run is kept, so a rerun takes only what is missing. Then, at every
# evaluation: brrr bf16 against PyTorch bf16 (the bar: within 2%), and against brrr float32
# (within 3%). Run from the repo root after building brrr; bench/setup_bench_venv.sh makes
# .venv-bench.
#
#   bench/loss_curves.sh [build-dir] [out-dir]        (about 30 minutes a run on the loaded 2-core machine)
#
# On a GPU (scripts/gpu.sh, step curves): DEVICE=cuda SIZE=gpt2 STEPS=50 runs the same three at
# GPT-2 124M's body (12 layers, 768 wide, 12 heads, T 1024, batch 16; the BPE vocabulary above),
# evaluated every 10 steps on 5 batches, PyTorch under torch.autocast("cuda").
set -euo pipefail
build=${1:-build}
out=${2:-out/loss-curves}
python=${PEER_PYTHON:-.venv-bench/bin/python}
case $python in /*) ;; */*) python=$PWD/$python ;; esac  # run from bench/ below
steps=${STEPS:-300}
"$python" -c 'import torch, safetensors' 2>/dev/null || { echo "loss_curves.sh: $python cannot import torch and safetensors (bench/setup_bench_venv.sh)" >&2; exit 1; }
brrr=$build/brrr
text=${DATA:-../shared/data/tinyshakespeare.txt}
threads=${THREADS:-2}
device=${DEVICE:-cpu}
size=${SIZE:-small}
mkdir -p "$out"
out=$(realpath "$out")

# The BPE vocabulary and the ids, once, for all four runs.
if [ ! -f "$out/shards/tokenizer.json" ] && [ ! -f "$out/tokenizer.bpe" ]; then
  "$brrr" tokenizer train --input "$text" --vocab-size 4096 --out "$out/tokenizer.bpe"
fi
[ -d "$out/shards" ] || "$brrr" tokenizer encode --tokenizer "$out/tokenizer.bpe" --input "$text" --out "$out/shards" --shards

case $size in
  small) shape=(--n_layer 4 --n_embd 256 --n_head 4 --block_size 256 --batch_size 8 --warmup_iters 30
                --eval_interval 50 --eval_iters 10 --log_interval 50) ;;
  gpt2)  shape=(--n_layer 12 --n_embd 768 --n_head 12 --block_size 1024 --batch_size 16 --warmup_iters 10
                --eval_interval 10 --eval_iters 5 --log_interval 10) ;;
  *) echo "loss_curves.sh: SIZE is small or gpt2, not '$size'" >&2; exit 2 ;;
esac
shape+=(--dropout 0 --learning_rate 1e-3 --min_lr 1e-4 --lr_decay_iters "$steps" --sample_tokens 0 --seed 1337
        --data "$out/shards" --threads "$threads" --device "$device")
rm -rf "$out/init"
"$brrr" train "${shape[@]}" --max_iters 0 --out_dir "$out/init" >/dev/null
init=$(ls "$out"/init/ckpt-*.safetensors | head -1)
# A run whose log ends with its last evaluation is kept: a rerun takes only what is missing.
finished() { [ -f "$1/log.jsonl" ] && grep -Eq "\"step\": ?$steps, ?\"train_loss\"" "$1/log.jsonl"; }
runs=("brrr float32" "brrr bf16" "torch bf16")
[ "${PEER_FLOAT32:-0}" = 1 ] && runs+=("torch float32")  # the same batches' check: 4 steps matched to 4 decimals
for run in "${runs[@]}"; do
  read -r who dtype <<<"$run"
  finished "$out/$who-$dtype" && { echo "== $who $dtype: kept"; continue; }
  echo "== $who $dtype"
  rm -rf "$out/$who-$dtype"
  if [ "$who" = brrr ]; then
    "$brrr" train "${shape[@]}" --max_iters "$steps" --dtype "$dtype" --out_dir "$out/brrr-$dtype" | grep --line-buffered "^step [0-9]*:"
  else
    (cd bench && OMP_NUM_THREADS=$threads "$python" loss_curve_peer.py --init "$init" --data "$out/shards" \
      --dtype "$dtype" --device "$device" --max_iters "$steps" --out "$out/torch-$dtype")
  fi
done
"$python" - "$out" <<'EOF'
import json, sys
out = sys.argv[1]
def evals(run):
    return {e["step"]: e for e in map(json.loads, open(f"{out}/{run}/log.jsonl")) if e.get("event") == "eval"}
def first_loss(run):
    return next(e["loss"] for e in map(json.loads, open(f"{out}/{run}/log.jsonl")) if e.get("event") == "step")
b16, t16, b32 = (evals(r) for r in ("brrr-bf16", "torch-bf16", "brrr-float32"))
# The same weights on the same first batch: the first losses agree to bf16's error.
print(f"first step's loss: brrr bf16 {first_loss('brrr-bf16'):.6f}, PyTorch bf16 {first_loss('torch-bf16'):.6f}, "
      f"brrr float32 {first_loss('brrr-float32'):.6f}")
print("| step | brrr bf16 val | PyTorch bf16 val | brrr float32 val | bf16 / PyTorch bf16 | bf16 / brrr float32 |")
print("|---|---|---|---|---|---|")
worst_peer = worst_f32 = 0.0
for s in sorted(b16):
    r_peer = b16[s]["val_loss"] / t16[s]["val_loss"]
    r_f32 = b16[s]["val_loss"] / b32[s]["val_loss"]
    worst_peer, worst_f32 = max(worst_peer, abs(r_peer - 1)), max(worst_f32, abs(r_f32 - 1))
    print(f"| {s} | {b16[s]['val_loss']:.4f} | {t16[s]['val_loss']:.4f} | {b32[s]['val_loss']:.4f} | "
          f"{r_peer:.4f} | {r_f32:.4f} |")
print(f"largest difference, brrr bf16 against PyTorch bf16: {100 * worst_peer:.2f}% (bar 2%); "
      f"against brrr float32: {100 * worst_f32:.2f}% (bar 3%)")
sys.exit(0 if worst_peer <= 0.02 and worst_f32 <= 0.03 else 1)
EOF
