#!/usr/bin/env bash
# scripts/grade.sh: grade many students' exercises in one command (docs/teaching.md).
#
#   scripts/grade.sh [--work DIR] SUBMISSION...
#
# A SUBMISSION is a student's checkout (a folder) or a patch of it (a .patch or .diff file,
# applied with `patch -p1`). Only the exercise files are taken from it (the list comes from
# `brrr exercises --files`: exercises/student/div_backward.cpp, ...); everything else, the
# graders included, is this checkout's, so a submission cannot change how it is graded.
#
# This checkout is copied once to DIR/src (default: build-grade/) and built once in
# DIR/build. Then, for each submission in turn, its exercise files replace the stubs, the
# build is brought up to date (only those files recompile), and each exercise is graded in a
# process of its own with a time limit (`brrr exercises check exNN`), so one that crashes or
# hangs costs only its own mark. The table goes to stdout and DIR/scores.tsv; each
# submission's full grader output to DIR/results/NAME.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/build-grade
limit=${BRRR_GRADE_TIMEOUT:-300}  # seconds per exercise
# The BPE grader learns from ../shared/data/tinyshakespeare.txt beside this checkout.
export BRRR_SHARED_DIR=${BRRR_SHARED_DIR:-$root/../shared}

if [[ ${1:-} == --work ]]; then
  work=$(mkdir -p "$2" && cd "$2" && pwd)
  shift 2
fi
if (($# == 0)) || [[ $1 == -h || $1 == --help ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit $(($# == 0 ? 2 : 0))
fi
for s in "$@"; do
  [[ -d $s || -f $s ]] || { echo "grade: no such folder or patch: $s" >&2; exit 2; }
done

src=$work/src
build=$work/build
brrr=$build/brrr
mkdir -p "$work/results"

# 1. This checkout, copied (without build folders, outputs or git data) and built once.
echo "grade: copying $root to $src" >&2
mkdir -p "$src"
tar -C "$root" --exclude='./build*' --exclude=./.git --exclude=./.venv --exclude=./out -cf - . | tar -C "$src" -xf -
echo "grade: building $build (the first time takes a few minutes)" >&2
# BRRR_GRADE_CMAKE_ARGS adds options, e.g. -DBRRR_CUDA=OFF where the CUDA exercises are graded
# on the emulator anyway and nvcc's time is better saved.
# shellcheck disable=SC2086
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRRR_BENCH=OFF -DBRRR_TESTS=OFF \
  ${BRRR_GRADE_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" --target brrr_cli -j "$(nproc)" >"$work/build.log" 2>&1 ||
  { echo "grade: the course itself does not build; see $work/build.log" >&2; exit 1; }
mapfile -t files < <("$brrr" exercises --files)
mapfile -t ids < <("$brrr" exercises --tsv | awk -F'\t' 'NR > 1 && $4 != "coming" { print $1 }')

# 2. One submission after another.
printf 'student' >"$work/scores.tsv"
for id in "${ids[@]}"; do printf '\t%s' "$id" >>"$work/scores.tsv"; done
printf '\tscore\n' >>"$work/scores.tsv"

for submission in "$@"; do
  name=$(basename "$submission")
  name=${name%.patch}
  name=${name%.diff}
  log=$work/results/$name.txt
  : >"$log"
  # The stubs first, so a file the submission lacks is graded as not started.
  for f in "${files[@]}"; do cp "$root/$f" "$src/$f"; done
  if [[ -d $submission ]]; then
    for f in "${files[@]}"; do
      if [[ -f $submission/$f ]]; then cp "$submission/$f" "$src/$f"; fi
    done
  else
    # A patch is applied to a scratch copy of the exercise files, and those are taken.
    scratch=$(mktemp -d)
    for f in "${files[@]}"; do mkdir -p "$scratch/$(dirname "$f")" && cp "$root/$f" "$scratch/$f"; done
    if patch -p1 --batch --silent -d "$scratch" <"$submission" >>"$log" 2>&1; then
      for f in "${files[@]}"; do cp "$scratch/$f" "$src/$f"; done
    else
      echo "grade: $submission does not apply to the exercise files" >>"$log"
    fi
    rm -rf "$scratch"
  fi

  row=$name
  score=0
  if ! cmake --build "$build" --target brrr_cli -j "$(nproc)" >>"$log" 2>&1; then
    for id in "${ids[@]}"; do row+=$'\t'"no build"; done
    printf '%s\t%d/%d\n' "$row" 0 "${#ids[@]}" >>"$work/scores.tsv"
    continue
  fi
  for id in "${ids[@]}"; do
    status=0
    out=$(timeout "$limit" "$brrr" exercises check "$id" 2>&1) || status=$?
    printf '%s\n' "$out" >>"$log"
    if ((status == 0)); then
      mark=passing
      score=$((score + 1))
    elif ((status == 124)); then
      mark=timeout
    elif ((status > 128)); then
      mark=crashed
    elif [[ $out == *"not written yet"* ]]; then
      mark="not started"
    else
      mark=failing
    fi
    row+=$'\t'$mark
  done
  printf '%s\t%d/%d\n' "$row" "$score" "${#ids[@]}" >>"$work/scores.tsv"
done
# The stubs go back, so the next run starts from the course as it is.
for f in "${files[@]}"; do cp "$root/$f" "$src/$f"; done

# The table, columns padded to their widest entry.
awk -F'\t' 'NR == FNR { for (i = 1; i <= NF; i++) if (length($i) > w[i]) w[i] = length($i); next }
             { for (i = 1; i <= NF; i++) printf("%-" w[i] "s%s", $i, (i < NF ? "  " : "\n")) }' \
  "$work/scores.tsv" "$work/scores.tsv"
echo "grade: table in $work/scores.tsv, each submission's grader output in $work/results/" >&2
