#!/usr/bin/env bash
# bench/decode.sh [BUILD_DIR] [SHAPES] [DTYPES]: brrr's generation on the CPU beside transformers',
# same machine, same shapes, 2 threads, one after the other in one run (chapter 08, issue 30).
# For each shape (default "gpt-12m gpt2") and weight dtype (default "float32 bf16"): the peer
# (bench/decode_peer.py in .venv-bench), then bench_decode; then the ratios brrr / transformers
# of decode tokens/s and of prefill speed, and brrr's share of the bandwidth floor. New tokens:
# 250 at gpt-12m, 100 at gpt2 (NEW_TOKENS overrides both); prefill: 512 tokens. THREADS (default 2)
# sets OMP_NUM_THREADS for both. ROUNDS (default 1) runs the pair that many times, alternating
# peer and brrr, and ends each shape with the median of the rounds' ratios: on a machine whose
# neighbours move both sides' speed by a third within minutes, one pair is one sample.
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
    decode_ratios=() prefill_ratios=()
    for ((round = 1; round <= ${ROUNDS:-1}; ++round)); do
      peer=$(cd bench && "../$python" decode_peer.py "$shape" "$tokens" 512 "$dtype" 2>/dev/null)
      ours=$("$build/bench/bench_decode" "$shape" "$tokens" 512 "$dtype")
      field() { awk -v k="$1" '$1 == k { print $'"$2"' }' <<<"$3"; }
      pd=$(field decode 4 "$peer") od=$(field decode 4 "$ours") pp=$(field prefill 4 "$peer") op=$(field prefill 4 "$ours")
      decode_ratios+=("$(awk -v a="$od" -v b="$pd" 'BEGIN { printf "%.2f", a / b }')")
      prefill_ratios+=("$(awk -v a="$pp" -v b="$op" 'BEGIN { printf "%.2f", a / b }')")
      if ((round > 1)); then
        printf "round %d  %s %-7s decode %s vs %s tokens/s (%sx), prefill %s vs %s s (%sx)\n" "$round" "$shape" "$dtype" \
          "$od" "$pd" "${decode_ratios[-1]}" "$op" "$pp" "${prefill_ratios[-1]}"
        continue
      fi
      echo "$peer"
      echo "$ours"
      # The ratios, and what a prefill 1.5x transformers' would take: its FLOPs in two thirds of
      # the peer's time, against the FMA peak.
      awk -v pd="$pd" -v od="$od" -v pp="$pp" -v op="$op" -v s="$shape" -v d="$dtype" \
          -v gflop="$(field peak 12 "$ours")" -v peak="$(field peak 2 "$ours")" \
          'BEGIN { printf "ratio   %s %-7s decode %.2fx transformers, prefill %.2fx\n", s, d, od / pd, pp / op
                   need = gflop / (pp / 1.5)
                   printf "needs   %s %-7s prefill at 1.5x transformers: %.0f GFLOP/s, %.0f%% of the FMA peak\n", s, d, need, 100 * need / peak }'
    done
    if ((${ROUNDS:-1} > 1)); then
      median() { printf "%s\n" "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
      printf "median  %s %-7s over %d rounds: decode %sx transformers (%s), prefill %sx (%s)\n" "$shape" "$dtype" "$ROUNDS" \
        "$(median "${decode_ratios[@]}")" "${decode_ratios[*]}" "$(median "${prefill_ratios[@]}")" "${prefill_ratios[*]}"
    fi
  done
done
