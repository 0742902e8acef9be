#!/usr/bin/env bash
# bench/data_parallel.sh: data-parallel training on this machine's CPU (chapter 19): the same
# training steps (the same samples, batch_size x 2 sequences a step) as 2 ranks x 1 thread under
# mpirun, and as 1 rank x 2 threads (the peer: one process with grad_accum 2). Prints each run's
# tokens/s over the steps after the first two, and the share of the steps' time rank 0 spent
# in collectives (and waiting for the other rank, apart). The 2-rank run goes twice: with the
# buckets summed while the backward goes on (--overlap_comm, the default) and after it; the
# share in collectives is then the exposed part, what the backward did not hide. BUCKET_MB
# (default 25, the trainer's) sets the bucket size. Run from the repo root after building:
#   bench/data_parallel.sh [build-dir] [steps] [preset] [batch_size] [block_size]
set -euo pipefail
build=${1:-build}
steps=${2:-12}
preset=${3:-shakespeare-char}
batch=${4:-8}
block=${5:-256}
bucket=${BUCKET_MB:-25}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
root=()
if [[ $(id -u) -eq 0 ]]; then root=(--allow-run-as-root); fi
common=(train --preset "$preset" --batch_size "$batch" --block_size "$block" --max_iters "$steps" --eval_interval 100000 --eval_iters 1
        --log_interval 1 --sample_tokens 0 --checkpoint_interval 100000 --bucket_mb "$bucket")

# tokens/s from log.jsonl: the steps' own times (the "ms" of each step), skipping the first two.
rate() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1] + "/log.jsonl") if '"step"' in l and '"event":"step"' in l]
ms = [s["ms"] for s in steps[2:]]
tokens = int(sys.argv[2])
share = [json.loads(l) for l in open(sys.argv[1] + "/log.jsonl") if '"data_parallel"' in l]
extra = (f", {100 * share[-1]['communication_share']:.2f}% of the step in collectives "
         f"({100 * share[-1]['communication_in_backward_share']:.2f}% inside the backward), "
         f"{100 * share[-1]['waiting_share']:.2f}% waiting for the other rank, "
         f"{share[-1]['buckets_sent_during_backward']} of {share[-1]['buckets']} buckets sent during the backward"
         if share else "")
print(f"{sum(ms) / len(ms):.1f} ms/step, {tokens / (sum(ms) / len(ms) / 1000):.0f} tokens/s{extra}")
PY
}
tokens=$((2 * batch * block))

"$build/brrr" "${common[@]}" --out_dir "$out/one" --grad_accum 2 --threads 2 > "$out/one.txt"
echo "1 rank x 2 threads ($preset, $batch x 2 x $block tokens a step): $(rate "$out/one" $tokens)"
for overlap in true false; do
  mpirun "${root[@]}" -np 2 --bind-to core "$build/brrr" "${common[@]}" --out_dir "$out/two-$overlap" --threads 1 \
    --overlap_comm $overlap > "$out/two-$overlap.txt"
  echo "2 ranks x 1 thread, overlap_comm $overlap ($preset, $batch x 2 x $block tokens a step, $bucket MB buckets): $(rate "$out/two-$overlap" $tokens)"
done
