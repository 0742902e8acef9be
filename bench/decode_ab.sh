#!/usr/bin/env bash
# bench/decode_ab.sh REV [--bf16] [C LAYERS THREADS PASSES M ...]: the Decoder's kernels
# (kernels/cpu/rows/*) as they were at git revision REV (build A) against the working tree's
# (build B), in one process taking turns
# (bench/decode_ab.cpp says why). Defaults: gpt-12m's shape (384 6), 2 threads, 30 passes,
# M = 1 8 16 32. Run it twice with A and B swapped (SWAP=1) before believing a few percent: the
# build that runs second in each pass finds the caches as the first left them.
# Run from the repo root; needs g++ and the sources only (no build directory).
set -euo pipefail
rev=${1:?usage: bench/decode_ab.sh REV [--bf16] [C LAYERS THREADS PASSES M ...]}
shift
weights=()  # --bf16: the weights as bfloat16 (the FMA path)
if [[ ${1:-} == --bf16 ]]; then weights=(--bf16); shift; fi
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(384 6 2 30 1 8 16 32)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The kernels' files at REV (build A) and in the working tree (build B), each build in its own
# folder so that its .cpp files include its own headers. The files have two layouts: since issue
# 56 the family kernels/cpu/rows/ (rows.h, internal.h, team.cpp, rows.cpp, gemm.cpp, amx.cpp, and
# since issue 57 bf16.cpp);
# before it kernels/cpu/decode*.{h,cpp} (REVs before 2026-11-28 have decode.cpp alone, and before
# d0afc16 no decode_amx.cpp). Whichever a build has is copied.
files=(kernels/cpu/rows/rows.h kernels/cpu/rows/internal.h kernels/cpu/rows/team.cpp kernels/cpu/rows/rows.cpp
       kernels/cpu/rows/gemm.cpp kernels/cpu/rows/amx.cpp kernels/cpu/rows/bf16.cpp
       kernels/cpu/decode.h kernels/cpu/decode_internal.h kernels/cpu/decode.cpp kernels/cpu/decode_gemm.cpp
       kernels/cpu/decode_amx.cpp)
for f in "${files[@]}"; do
  mkdir -p "$work/a/$(dirname "$f")" "$work/b/$(dirname "$f")"
  git cat-file -e "$rev:$f" 2>/dev/null && git show "$rev:$f" > "$work/a/$f"
  [[ -f $f ]] && cp "$f" "$work/b/$f"
done
[[ -n ${SWAP:-} ]] && { mv "$work/a" "$work/t"; mv "$work/b" "$work/a"; mv "$work/t" "$work/b"; }
# The flags of the library's Release build (CMakeLists.txt); the includes resolve from the
# build's folder first, then the repository root.
flags=(-O3 -DNDEBUG -fopenmp -fno-math-errno -fno-trapping-math -march=native -std=c++20)
includes=(-I"$PWD" -I"$PWD/kernels/include" -I"$PWD/base/include" -I"$PWD/framework/include")
objects=()
for build in a b; do
  for f in "$work/$build"/kernels/cpu/*.cpp "$work/$build"/kernels/cpu/rows/*.cpp; do
    [[ -f $f ]] || continue
    g++ "${flags[@]}" -I"$work/$build" "${includes[@]}" "-Dcpu=cpu${build^^}" -c "$f" -o "$f.o"
    objects+=("$f.o")
  done
done
g++ "${flags[@]}" "${includes[@]}" bench/decode_ab.cpp "${objects[@]}" -o "$work/decode_ab"
echo "# bench/decode_ab.sh $rev: A = $([[ -n ${SWAP:-} ]] && echo "the working tree" || echo "$rev"), B = $([[ -n ${SWAP:-} ]] && echo "$rev" || echo "the working tree"), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$work/decode_ab" "${weights[@]}" "${args[@]}"
