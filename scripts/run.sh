#!/usr/bin/env bash
# scripts/run.sh: the README's main job. Installs what is missing, builds brrr, trains a tiny
# GPT on the default corpus (../shared/data/tinyshakespeare.txt) on the CPU, and prints a
# sample. Extra arguments go to `brrr train` (e.g. --max_iters 500, --data FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target brrr_cli -j "$(nproc)"
build/brrr train --preset cpu-tiny --out_dir out/cpu-tiny "$@"
