#!/usr/bin/env bash
# bench/decode.sh [BUILD_DIR] [SHAPES] [DTYPES]: brrr's generation on the CPU beside transformers',
# same machine, same shapes, 2 threads, one after the other in one run (chapter 08, issue 30).
# For each shape (default "gpt-12m gpt2") and weight dtype (default "float32 bf16"): the peer
# (bench/decode_peer.py in .venv-bench), then bench_decode; then the ratios brrr / transformers
# of decode tokens/s and of prefill speed, and brrr's share of the bandwidth floor. New tokens:
# 250 at gpt-12m, 100 at gpt2 (NEW_TOKENS overrides both); prefill: 512 tokens. THREADS (default 2)
# sets OMP_NUM_THREADS for both.
# Run from the repo root after building bench_decode; bench/setup_bench_venv.sh makes .venv-bench.
set -euo pipefail
build=${1:-build}
shapes=${2:-gpt-12m gpt2}
dtypes=${3:-float32 bf16}
python=${PEER_PYTHON:-.venv-bench/bin/python}
[[ -x $build/bench/bench_decode ]] || { echo "decode.sh: $build/bench/bench_decode not built" >&2; exit 1; }
"$python" -c 'import torch, transformers' 2>/dev/null || { echo "decode.sh: $python cannot import torch and transformers (bench/setup_bench_venv.sh)" >&2; exit 1; }
export OMP_NUM_THREADS=${THREADS:-2}
echo "# bench/decode.sh, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for shape in $shapes; do
  tokens=${NEW_TOKENS:-$([[ $shape == gpt2 ]] && echo 100 || echo 250)}
  for dtype in $dtypes; do
    peer=$(cd bench && "../$python" decode_peer.py "$shape" "$tokens" 512 "$dtype" 2>/dev/null)
    ours=$("$build/bench/bench_decode" "$shape" "$tokens" 512 "$dtype")
    echo "$peer"
    echo "$ours"
    field() { awk -v k="$1" '$1 == k { print $'"$2"' }' <<<"$3"; }
    # The ratios, and what a prefill 1.5x transformers' would take: its FLOPs in two thirds of
    # the peer's time, against the FMA peak.
    awk -v pd="$(field decode 4 "$peer")" -v od="$(field decode 4 "$ours")" \
        -v pp="$(field prefill 4 "$peer")" -v op="$(field prefill 4 "$ours")" -v s="$shape" -v d="$dtype" \
        -v gflop="$(field peak 11 "$ours")" -v peak="$(field peak 2 "$ours")" \
        'BEGIN { printf "ratio   %s %-7s decode %.2fx transformers, prefill %.2fx\n", s, d, od / pd, pp / op
                 need = gflop / (pp / 1.5)
                 printf "needs   %s %-7s prefill at 1.5x transformers: %.0f GFLOP/s, %.0f%% of the FMA peak\n", s, d, need, 100 * need / peak }'
  done
done
