#!/usr/bin/env bash
# scripts/gpu_bundle.sh: gather, on the development machine (Debian 12), what a bare GPU
# machine lacks, so that scripts/gpu.sh can build brrr there without a network.
#
#   scripts/gpu_bundle.sh [--check]
#
# A lent GPU machine has the CUDA toolkit, CMake, ninja, a C++ compiler and Python with
# PyTorch, but none of Debian's -dev packages and no network. This script puts into
# .gpu-bundle/ (ignored by git; it travels with the working tree):
#   debs/     the Debian package files of the libraries brrr builds on (headers, CMake
#             packages, PCRE2's library); scripts/gpu.sh unpacks them into a private prefix
#             (build-gpu/prefix) with dpkg-deb, or ar and tar, and points CMake at it
#   shared/   ../shared's reference file and corpus, which the GPU checks read (the folder
#             beside the checkout does not travel to the GPU machine)
#   MANIFEST  what is in it, with versions and sha256 sums
# --check: unpack the bundle into a scratch prefix and configure and build brrr against it
# with the system's copies kept out of CMake's search (what scripts/gpu.sh does on a GPU
# machine), then run the tokenizer and core tests of that build.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=.gpu-bundle
# What the build finds with find_package/find_path (CMakeLists.txt): each -dev package, and
# the runtime library that PCRE2's -dev package links to.
packages=(libeigen3-dev libcli11-dev nlohmann-json3-dev doctest-dev libstb-dev libpcre2-dev libpcre2-8-0)
shared_files=(reference/gpt2_tiny.safetensors reference/make_reference.py data/tinyshakespeare.txt)

check=0
for arg in "$@"; do
  case $arg in
    --check) check=1 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

mkdir -p "$bundle/debs" "$bundle/shared/reference" "$bundle/shared/data"
# apt-get download fetches the candidate version of each package into the current folder; it
# needs the package lists, which scripts/setup.sh has refreshed on this machine.
missing=()
for p in "${packages[@]}"; do
  ls "$bundle/debs/${p}_"*.deb >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "gpu_bundle: downloading ${missing[*]}"
  (cd "$bundle/debs" && apt-get download -q "${missing[@]}" 2>&1 | grep -v "^W: Download is performed unsandboxed") ||
    { echo "gpu_bundle: apt-get download failed (run 'apt-get update' as root first?)" >&2; exit 1; }
fi
for p in "${packages[@]}"; do
  n=$(ls "$bundle/debs/${p}_"*.deb 2>/dev/null | wc -l)
  [[ $n == 1 ]] || { echo "gpu_bundle: expected one file of $p in $bundle/debs, found $n" >&2; exit 1; }
done

for f in "${shared_files[@]}"; do
  [[ -f ../shared/$f ]] || { echo "gpu_bundle: ../shared/$f is missing (the shared folder beside the checkout)" >&2; exit 1; }
  cp -f "../shared/$f" "$bundle/shared/$f"
done

{
  echo "# .gpu-bundle, made by scripts/gpu_bundle.sh on $(hostname) at $(date -u +%FT%TZ)"
  (cd "$bundle" && sha256sum debs/*.deb "${shared_files[@]/#/shared/}")
} > "$bundle/MANIFEST"
echo "gpu_bundle: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/debs" | wc -l) packages, ${#shared_files[@]} shared files)"

if ((check)); then
  # The same unpacking and configuration as scripts/gpu.sh, in a scratch build folder, with
  # the system's prefixes ignored by every find_* call, so that only the bundle can satisfy
  # them. (The compiler still has /usr/include on its own path; -isystem puts the bundle's
  # headers first, and compile_commands.json is checked to name them.)
  dir=build-bundle-check
  rm -rf "$dir"
  BRRR_GPU_SH_SOURCED=1 source scripts/gpu.sh
  unpack_bundle "$bundle" "$dir/prefix"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRRR_CUDA=OFF -DBRRR_BENCH=OFF \
    -DBRRR_SHARED_DIR="$PWD/$bundle/shared" -DCMAKE_PREFIX_PATH="$PWD/$dir/prefix/usr" \
    -DCMAKE_IGNORE_PREFIX_PATH="/usr;/usr/local;/" -DPKG_CONFIG_EXECUTABLE=/nonexistent >/dev/null
  for found in Eigen3_DIR nlohmann_json_DIR CLI11_DIR doctest_DIR PCRE2_INCLUDE_DIR PCRE2_LIBRARY STB_INCLUDE_DIR; do
    value=$(grep "^$found:" "$dir/CMakeCache.txt" | cut -d= -f2-)
    [[ $value == "$PWD/$dir/prefix/"* ]] || { echo "gpu_bundle --check: $found is '$value', not in the bundle" >&2; exit 1; }
    echo "  $found = ${value#"$PWD/"}"
  done
  cmake --build "$dir" -j "$(nproc)" --target test_core test_tokenizer >/dev/null
  grep -q -- "-isystem $PWD/$dir/prefix/usr/include" "$dir/compile_commands.json" ||
    { echo "gpu_bundle --check: the compile commands do not name the bundle's headers" >&2; exit 1; }
  (cd "$dir" && ctest -L "core|tokenizer" -j "$(nproc)" --output-on-failure -Q) &&
    echo "gpu_bundle --check: built against the bundle alone, core and tokenizer tests pass"
fi
