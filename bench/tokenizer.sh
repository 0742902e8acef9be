#!/usr/bin/env bash
# bench/tokenizer.sh: the tokenizer benchmark of chapter 06 (docs/chapters/06-tokenization.md).
#
# Trains a 4096-token BPE with the GPT-2 split pattern and encodes with it, on
# tinyshakespeare (1.1 MB) and on a corpus of at least 50 MB (the King James Bible from
# Debian's bible-kjv package, 12 times over), with brrr (bench_tokenizer) and, in the same
# run and with the same thread counts, Hugging Face tokenizers, sentencepiece and tiktoken
# (bench/tokenizer_peers.py). tiktoken and HF encode with brrr's own vocabulary, so every
# encoder produces the same tokens. Prints one markdown table; docs/measurements.md has it.
#
#   bench/tokenizer.sh [BUILD_DIR]          default build-bench; corpora go in BUILD_DIR too
#   THREADS=2 REPEAT=3 VOCAB=4096 bench/tokenizer.sh
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build-bench}
threads=${THREADS:-$(nproc)}
repeat=${REPEAT:-3}
vocab=${VOCAB:-4096}
python=.venv/bin/python3
[[ -x $python ]] || python=python3
work=$build/tokenizer-bench
mkdir -p "$work"

echo "tokenizer.sh: building bench_tokenizer in $build" >&2
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRRR_CUDA=OFF >/dev/null
cmake --build "$build" --target bench_tokenizer -j2 >/dev/null

# The corpora. The big one is built here, never committed.
small=../shared/data/tinyshakespeare.txt
big=$work/kjv12.txt
if [[ ! -s $big ]]; then
  if command -v bible >/dev/null; then
    bible "Gen1:1-Rev22:21" >"$work/kjv.txt"
    for _ in $(seq 12); do cat "$work/kjv.txt"; done >"$big"
  else
    echo "tokenizer.sh: no 'bible' command (apt-get install bible-kjv); using tinyshakespeare x46" >&2
    big=$work/shakespeare46.txt
    for _ in $(seq 46); do cat "$small"; done >"$big"
  fi
fi

thread_list="1"
[[ $threads != 1 ]] && thread_list="1 $threads"
rows=$work/rows.txt
: >"$rows"
for corpus in "$small" "$big"; do
  dir=$work/$(basename "$corpus" .txt)
  mkdir -p "$dir"
  naive=""
  [[ $corpus == "$small" ]] && naive=--naive
  echo "tokenizer.sh: $corpus ($(du -h "$corpus" | cut -f1)), threads $thread_list" >&2
  "$build/bench/bench_tokenizer" --corpus "$corpus" --vocab-size "$vocab" --threads "$thread_list" \
    --repeat "$repeat" --out-dir "$dir" $naive | tee -a "$rows"
  for t in $thread_list; do
    for task in train-hf train-spm; do
      "$python" bench/tokenizer_peers.py $task --corpus "$corpus" --vocab-size "$vocab" \
        --threads "$t" --repeat "$repeat" | tee -a "$rows"
    done
    "$python" bench/tokenizer_peers.py encode-tiktoken --corpus "$corpus" --threads "$t" \
      --repeat "$repeat" --ranks "$dir/brrr.tiktoken" | tee -a "$rows"
    "$python" bench/tokenizer_peers.py encode-hf --corpus "$corpus" --threads "$t" \
      --repeat "$repeat" --brrr-tokenizer "$dir/tok.txt" | tee -a "$rows"
  done
done

# One table: training rows first, then encoding, then the rest, each corpus in turn.
echo
echo "$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; median of $repeat runs; vocab $vocab, GPT-2 pattern"
echo
echo "| corpus | tool | task | threads | time | MB/s | note |"
echo "|---|---|---|---:|---:|---:|---|"
for corpus in "$small" "$big"; do
  name=$(basename "$corpus")
  for kind in train encode other; do
    awk -F'|' -v name="$name" -v kind="$kind" '
      $1 == "ROW" && $2 == name {
        k = ($4 == "train") ? "train" : ($4 == "encode") ? "encode" : "other"
        if (k == kind) printf "| %s | %s | %s | %s | %s | %s | %s |\n", $2, $3, $4, $5, $6, $7, $8
      }' "$rows"
  done
done
