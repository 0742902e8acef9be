#!/usr/bin/env bash
# bench/encode_stream.sh: a corpus larger than memory (chapter 06, "A corpus larger than memory").
#
# Makes a text of SIZE_MB megabytes (tinyshakespeare over and over, in $WORK, never committed),
# trains a 4096-token BPE on tinyshakespeare, and
#   1. streams the whole text into shards with `brrr tokenizer encode --shards` under
#      /usr/bin/time -v, at SIZE_MB and at a quarter of it: the peak memory must stay under
#      1 GB and not grow with the text;
#   2. times brrr and tiktoken (the same ranks, exported by brrr, and the same GPT-2 pattern)
#      encoding the same SLICE_MB-megabyte slice, on 1 thread and on all cores, and prints MB/s;
#      (the two token counts printed must agree: tests/tokenizer/test_tiktoken.cpp checks the ids).
# With OLD_BRRR=path/to/an/older/brrr it also measures that program's (in-memory) encode of the
# quarter-size text, for the before and after.
#
#   bench/encode_stream.sh [BUILD_DIR]                 default build; brrr must be built there
#   SIZE_MB=1200 SLICE_MB=50 WORK=/tmp/brrr-stream bench/encode_stream.sh build
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
size_mb=${SIZE_MB:-1200}
slice_mb=${SLICE_MB:-50}
work=${WORK:-/tmp/brrr-stream-bench}
threads=$(nproc)
python=.venv/bin/python3
[[ -x $python ]] || python=python3
brrr=$build/brrr
[[ -x $brrr ]] || { echo "encode_stream.sh: $brrr is not built" >&2; exit 1; }
mkdir -p "$work"

# The texts: SIZE_MB, a quarter of it, and the slice.
shakespeare=../shared/data/tinyshakespeare.txt
make_text() {  # make_text MB PATH
  local copies=$(( ($1 * 1000000 + 1115393) / 1115394 ))
  [[ -s $2 && $(stat -c %s "$2") -ge $(( $1 * 1000000 )) ]] && return
  for _ in $(seq "$copies"); do cat "$shakespeare"; done | head -c $(( $1 * 1000000 )) >"$2"
}
big=$work/big.txt
quarter=$work/quarter.txt
slice=$work/slice.txt
make_text "$size_mb" "$big"
make_text $(( size_mb / 4 )) "$quarter"
make_text "$slice_mb" "$slice"

"$brrr" tokenizer train --input "$shakespeare" --vocab-size 4096 --out "$work/tok.txt" \
  --tiktoken "$work/tok.tiktoken" >/dev/null

peak() {  # peak MB TEXT OUT: streams TEXT into shards; prints the encode line and the peak RSS
  rm -rf "$3"
  /usr/bin/time -v "$brrr" tokenizer encode --tokenizer "$work/tok.txt" --input "$2" --out "$3" --shards \
    2>"$work/time.txt" | sed -n 's/^encoded/  encoded/p'
  echo "  peak RSS $(awk '/Maximum resident/ {printf "%.0f MB", $6 / 1024}' "$work/time.txt")" \
       "($(awk '/Elapsed/ {print $8}' "$work/time.txt") elapsed)"
}
echo "== memory: brrr tokenizer encode --shards, $threads threads"
/usr/bin/time -v "$brrr" --help >/dev/null 2>"$work/time.txt"
echo "the program alone (brrr --help): peak RSS $(awk '/Maximum resident/ {printf "%.0f MB", $6 / 1024}' "$work/time.txt")"
echo "$size_mb MB:"
peak "$size_mb" "$big" "$work/shards-big"
echo "$(( size_mb / 4 )) MB:"
peak $(( size_mb / 4 )) "$quarter" "$work/shards-quarter"
if [[ -n ${OLD_BRRR:-} ]]; then
  echo "$(( size_mb / 4 )) MB, $OLD_BRRR (reads the whole text, holds every id):"
  /usr/bin/time -v "$OLD_BRRR" tokenizer encode --tokenizer "$work/tok.txt" --input "$quarter" \
    --out "$work/old.bin" 2>"$work/time.txt" | sed -n 's/^encoded/  encoded/p'
  echo "  peak RSS $(awk '/Maximum resident/ {printf "%.0f MB", $6 / 1024}' "$work/time.txt")"
  rm -f "$work/old.bin"
fi

echo "== speed on the same $slice_mb MB: brrr (streaming) against tiktoken, brrr's ranks, GPT-2 pattern"
for t in 1 $threads; do
  line=$("$brrr" tokenizer encode --tokenizer "$work/tok.txt" --input "$slice" --out "$work/slice.bin" --threads "$t")
  echo "brrr, $t threads: $(echo "$line" | sed -n 's/^encoded .* into \([0-9]*\) tokens in \([0-9.]* s\): \([0-9.]* MB\/s\).*/\3 (\2; \1 tokens)/p')"
  "$python" bench/tokenizer_peers.py encode-tiktoken --corpus "$slice" --threads "$t" --repeat 1 \
    --ranks "$work/tok.tiktoken" | awk -F'|' '{printf "%s, %s threads: %s MB/s (%s; %s)\n", $3, $5, $7, $6, $8}'
done

echo
echo "$(lscpu | sed -n 's/^Model name: *//p'), $threads cores; $(date -u +%Y-%m-%d)"
