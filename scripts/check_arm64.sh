#!/usr/bin/env bash
# scripts/check_arm64.sh: brrr on 64-bit ARM Linux, checked on this x86-64 Debian machine
# (README.md, "Platforms"; issue 58).
#
#   1. install what is missing: Debian's cross compiler (g++-aarch64-linux-gnu), qemu-user-static,
#      and the arm64 libraries brrr links, by multiarch (zlib1g-dev:arm64, libpcre2-dev:arm64,
#      and the C++ and OpenMP runtimes qemu loads); scripts/setup.sh installs the rest
#   2. let the kernel start arm64 programs through qemu (binfmt_misc), as the tests that run
#      the brrr program need
#   3. cross-build brrr into build-arm64/ (cmake/toolchain-aarch64-linux-gnu.cmake: no CUDA, no
#      brrr serve, no benchmarks, no -march=native)
#   4. run the CPU tests under qemu with BRRR_SLOW_CPU=1 (tests/slow_cpu.h: the heaviest cases at
#      smaller sizes, every check kept)
#   5. train --preset cpu-tiny for 20 steps under qemu and with the x86-64 GCC build (build/),
#      and compare every loss the two print (scripts/compare_training.sh)
#
# Not part of scripts/test.sh (CI's time is tight): run it before landing a change to the CPU
# kernels or the build files. qemu translates every instruction, so its times say nothing
# about an arm64 CPU's speed; this script measures none.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

# ---- 1. packages
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "check_arm64: adding arm64 as a second Debian architecture (multiarch)"
  $sudo dpkg --add-architecture arm64
  $sudo apt-get update -qq
fi
packages=(g++-aarch64-linux-gnu qemu-user-static
          zlib1g-dev:arm64 libpcre2-dev:arm64 libstdc++6:arm64 libgomp1:arm64)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "check_arm64: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ---- 2. arm64 programs run by name (what qemu-user-static's package sets up where systemd runs)
binfmt=/proc/sys/fs/binfmt_misc
if [[ ! -e $binfmt/qemu-aarch64 ]]; then
  [[ -e $binfmt/register ]] || $sudo mount -t binfmt_misc binfmt_misc $binfmt
  $sudo sh -c "cat /usr/lib/binfmt.d/qemu-aarch64.conf > $binfmt/register"
fi

# ---- 3. the cross build
jobs=$(nproc)
# ccache, where installed, makes a second run after a branch switch quick (as in CI's GCC build).
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
echo "== arm64 build (build-arm64)"
start=$SECONDS
cmake -S . -B build-arm64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake \
  -DBRRR_CUDA=OFF -DBRRR_SERVE=OFF -DBRRR_BENCH=OFF -DBRRR_NATIVE=OFF -DBRRR_WERROR=ON "${launcher[@]}" >/dev/null
# Only the programs the CPU labels below run (and brrr, which the apps tests start): the
# exercises' and the emulator's test programs are not run here (35 of the 272 build steps).
cmake --build build-arm64 -j "$jobs" --target brrr_cli test_core test_models test_models_slow \
  test_train test_train_slow test_tokenizer test_plot test_apps
file build-arm64/brrr | grep -q "ARM aarch64" || { echo "check_arm64: build-arm64/brrr is not an arm64 program" >&2; exit 1; }
echo "check_arm64: the build took $((SECONDS - start)) s"

# ---- 4. the CPU tests under qemu
labels='^(core|models|models-slow|train|train-slow|tokenizer|plot|apps)$'
echo "== CPU tests under qemu-aarch64 (BRRR_SLOW_CPU=1, ctest -L '$labels')"
start=$SECONDS
(cd build-arm64 && BRRR_SLOW_CPU=1 ctest --output-on-failure -j "$jobs" -L "$labels" --timeout 600 | tee ctest.log)
echo "check_arm64: the tests took $((SECONDS - start)) s; the longest:"
grep -E "Test +#" build-arm64/ctest.log | sed -E 's/.*Test +#[0-9]+: (.*) \.+ *(Passed|\*\*\*Failed|Skipped|\*\*\*Timeout).* ([0-9.]+) sec/\3 s  \1/' |
  sort -rn | head -8

# ---- 5. the same training, arm64 (under qemu) and x86-64
scripts/compare_training.sh arm64 build-arm64/brrr build-arm64/check-train
echo "check_arm64: passed: the CPU tests under qemu, and the same losses on arm64 and x86-64"
