#!/usr/bin/env bash
# bench/decode_ab.sh REV [C LAYERS THREADS PASSES M ...]: kernels/cpu/decode.cpp as it was at git
# revision REV (build A) against the working tree's (build B), in one process taking turns
# (bench/decode_ab.cpp says why). Defaults: gpt-12m's shape (384 6), 2 threads, 30 passes,
# M = 1 8 16 32. Run it twice with A and B swapped (SWAP=1) before believing a few percent: the
# build that runs second in each pass finds the caches as the first left them.
# Run from the repo root; needs g++ and the sources only (no build directory).
set -euo pipefail
rev=${1:?usage: bench/decode_ab.sh REV [C LAYERS THREADS PASSES M ...]}
shift
args=("$@")
[[ ${#args[@]} -gt 0 ]] || args=(384 6 2 30 1 8 16 32)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git show "$rev:kernels/cpu/decode.cpp" > "$work/a.cpp"
cp kernels/cpu/decode.cpp "$work/b.cpp"
[[ -n ${SWAP:-} ]] && { mv "$work/a.cpp" "$work/t.cpp"; mv "$work/b.cpp" "$work/a.cpp"; mv "$work/t.cpp" "$work/b.cpp"; }
# The flags of the library's Release build (CMakeLists.txt); the includes resolve from the
# repository root, so the copies compile in the scratch folder.
flags=(-O3 -DNDEBUG -fopenmp -fno-math-errno -fno-trapping-math -march=native -std=c++20)
includes=(-I"$PWD" -I"$PWD/kernels/include" -I"$PWD/base/include" -I"$PWD/framework/include")
for build in a b; do
  g++ "${flags[@]}" "${includes[@]}" "-Dcpu=cpu${build^^}" -c "$work/$build.cpp" -o "$work/$build.o"
done
g++ "${flags[@]}" "${includes[@]}" bench/decode_ab.cpp "$work/a.o" "$work/b.o" -o "$work/decode_ab"
echo "# bench/decode_ab.sh $rev: A = $([[ -n ${SWAP:-} ]] && echo "the working tree" || echo "$rev"), B = $([[ -n ${SWAP:-} ]] && echo "$rev" || echo "the working tree"), $(date -u +%Y-%m-%dT%H:%MZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$work/decode_ab" "${args[@]}"
