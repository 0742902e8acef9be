#!/usr/bin/env bash
# scripts/compare_training.sh: the same 20 training steps from another build of brrr and from
# this machine's GCC build, and every loss they print compared as text (README.md, "Platforms").
# scripts/check_arm64.sh and scripts/check_clang.sh end with it:
#
#   scripts/compare_training.sh NAME PROGRAM OUT_DIR
#
# NAME names the other build in messages ("arm64"), PROGRAM is its brrr, OUT_DIR a folder this
# script empties and writes the two runs' logs and checkpoints to. The reference is build/brrr,
# scripts/test.sh's Release build, made here when missing. Both runs read the same data and
# seed: the losses they print (4 decimals) must be the same, line for line.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -ne 3 ]]; then
  echo "usage: scripts/compare_training.sh NAME PROGRAM OUT_DIR" >&2
  exit 2
fi
name=$1 program=$2 out=$3
[[ -x $program ]] || { echo "compare_training: $program is not a program" >&2; exit 2; }

if [[ ! -f build/build.ninja ]]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRRR_SHARED=ON -DBRRR_WERROR=ON -DBRRR_SERVE=ON >/dev/null
fi
cmake --build build -j "$(nproc)" --target brrr_cli

rm -rf "$out"
mkdir -p "$out"
losses() {  # every loss a run printed: the evaluations' and each logged step's, not the times
  grep -E '^step +[0-9]+(:| \|)' "$1" | sed -E 's/ *\| *lr .*//; s/ +/ /g'
}
train() {  # train NAME PROGRAM: one run, its log in $out/NAME.log, its time printed
  local start=$SECONDS
  "$2" train --preset cpu-tiny --max_iters 20 --out_dir "$out/$1" >"$out/$1.log" 2>&1 ||
    { cat "$out/$1.log"; echo "compare_training: the $1 run failed" >&2; exit 1; }
  echo "compare_training: $1: brrr train --preset cpu-tiny --max_iters 20 took $((SECONDS - start)) s"
}
echo "== brrr train --preset cpu-tiny --max_iters 20: $name, and the GCC build (build/brrr)"
train "$name" "$program"
train gcc build/brrr
if [[ $(losses "$out/gcc.log" | wc -l) -eq 0 ]]; then
  echo "compare_training: the GCC run printed no loss ($out/gcc.log)" >&2
  exit 1
fi
if ! diff <(losses "$out/gcc.log") <(losses "$out/$name.log"); then
  echo "compare_training: FAILED: the $name run's losses (>) differ from the GCC build's (<)" >&2
  exit 1
fi
losses "$out/$name.log"
echo "compare_training: the same $(losses "$out/$name.log" | wc -l) loss lines from $name and from the GCC build"
