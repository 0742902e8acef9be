#!/usr/bin/env bash
# scripts/check_clang.sh: brrr built by clang 19 with LLVM's C++ library, libc++ (README.md,
# "Platforms"; issue 58): the compiler family of current Apple clang, on this Debian machine.
#
#   1. install what is missing: clang-19, libc++-19-dev, libc++abi-19-dev and libomp-19-dev
#      (Debian 12's; clang 14, Debian 12's default clang, cannot build brrr)
#   2. a Release build in build-clang/ with every warning an error (BRRR_WERROR), as CI's GCC
#      build; CUDA off: CUDA 13.0's nvcc takes clang 19 as its host compiler, but its headers
#      stop a libc++ build on x86-64 (crt/host_defines.h: "libc++ is not supported on x86
#      system"; tried 2026-11-29 with -ccbin clang++-19 -Xcompiler -stdlib=libc++), so the .cu
#      files are left to the GCC build; the emulator's build of the same kernels is compiled
#      by clang here. brrr serve off (Debian's cpp-httplib library, which its tests use, is
#      built against libstdc++)
#   3. the Release tests, but for two labels: `exercise` (the students' stubs, which fail by
#      design: scripts/test.sh leaves it out too) and `notebook` (cppyy compiles the notebooks'
#      C++ against libstdc++, and a libbrrr.so built with libc++ has none of the symbols it
#      would call: std::string is std::__1::basic_string there)
#   4. train --preset cpu-tiny for 20 steps with the clang build and with the GCC build
#      (build/), and compare every loss the two print (scripts/compare_training.sh)
#
# Not part of scripts/test.sh (CI's time is tight): run it before landing a change to the C++
# code or the build files.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

packages=(clang-19 libc++-19-dev libc++abi-19-dev libomp-19-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "check_clang: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

jobs=$(nproc)
# ccache, where installed, makes a second run after a branch switch quick (as in CI's GCC build).
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
echo "== clang 19 + libc++ build (build-clang)"
libcxx=-stdlib=libc++
cmake -S . -B build-clang -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-19 \
  -DCMAKE_CXX_FLAGS=$libcxx -DCMAKE_EXE_LINKER_FLAGS=$libcxx -DCMAKE_SHARED_LINKER_FLAGS=$libcxx \
  -DBRRR_CUDA=OFF -DBRRR_SERVE=OFF -DBRRR_SHARED=ON -DBRRR_WERROR=ON "${launcher[@]}" >/dev/null
cmake --build build-clang -j "$jobs"

echo "== Tests (clang 19 + libc++)"
(cd build-clang && ctest --output-on-failure -j "$jobs" -LE '^(exercise|notebook)$' | tee ctest.log)

echo "== The same training, clang and GCC"
scripts/compare_training.sh clang build-clang/brrr build-clang/check-train
echo "check_clang: passed: the build with warnings as errors, the tests, and the GCC build's losses"
