#!/usr/bin/env bash
# scripts/run.sh: the README's main job. Installs what is missing, builds brrr, and trains
# the course's model on the CPU, printing what it learned.
# (Today: the chapter-05 MLP on spirals. Chapter 08 makes this train a tiny GPT.)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target brrr_cli -j "$(nproc)"
mkdir -p out
build/train/brrr mlp --out out "$@"
