#!/usr/bin/env bash
# scripts/gpu_bundle.sh: gather, on the development machine (Debian 12), what a bare GPU
# machine lacks, so that scripts/gpu.sh can build brrr there without a network.
#
#   scripts/gpu_bundle.sh [--check [ROOT]]
#
# A lent GPU machine has the CUDA toolkit, CMake, ninja, a C++ compiler and Python with
# PyTorch, but none of Debian's -dev packages and no network. This script puts into
# .gpu-bundle/ (ignored by git: it reaches a lent GPU machine only when the device call carries
# it, carry=[".gpu-bundle"], as scripts/gpu.sh --dry-run prints):
#   debs/     the Debian package files of the libraries brrr builds on (headers, CMake
#             packages, PCRE2's library); scripts/gpu.sh unpacks them into a private prefix
#             (build-gpu/prefix) with dpkg-deb, or ar and tar, and points CMake at it
#   shared/   ../shared's reference file and corpus, which the GPU checks read (the folder
#             beside the checkout does not travel to the GPU machine)
#   llm.c/    karpathy/llm.c's source at the commit pinned below (llmc_commit), the GPT-2 step's
#             peer (bench/llmc_step.sh builds and runs it on the GPU machine; issue 55). Taken
#             with `git archive` from LLMC_GIT (a clone or a bare mirror; default: GitHub). It
#             never enters the repository: .gpu-bundle is ignored.
#   MANIFEST  what is in it, with versions and sha256 sums
# --check [ROOT]: prove that the bundle alone builds brrr. ROOT is a minimal Debian 12 made with
# debootstrap (--variant=minbase plus a compiler, CMake, ninja and Python: what a lent GPU
# machine has, and no -dev package at all; made the first time, a few minutes; default
# ../gpu-bundle-root). Inside it (chroot, so as root), with the checkout mounted at /brrr, the
# bundle is unpacked and brrr configured and built (CUDA off: the toolkit comes with the GPU
# machine) the way scripts/gpu.sh does, and the core and tokenizer tests run. A header the bundle
# lacks cannot be found elsewhere there, as it could on this machine. docs/measurements.md
# records the proof.
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=.gpu-bundle
# What the build finds with find_package/find_path (CMakeLists.txt): each -dev package, and
# the runtime libraries that the PCRE2 and zlib -dev packages link to.
packages=(libeigen3-dev libcli11-dev nlohmann-json3-dev doctest-dev libstb-dev libpcre2-dev libpcre2-8-0 zlib1g-dev
  zlib1g)
shared_files=(reference/gpt2_tiny.safetensors reference/make_reference.py data/tinyshakespeare.txt)

check=0 root_dir=../gpu-bundle-root
while (($#)); do
  case $1 in
    --check) check=1; if [[ ${2:-} != "" && ${2:-} != -* ]]; then root_dir=$2; shift; fi ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "gpu_bundle.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
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

# llm.c at a pinned commit (2025-05-10, "Merge pull request #801"): its Makefile, train_gpt2.cu and
# llmc/, what train_gpt2cu is built from (its data, dev/ and Python files are not needed).
llmc_commit=f1e2ace651495b74ae22d45d1723443fd00ecd3a
llmc_git=${LLMC_GIT:-https://github.com/karpathy/llm.c.git}
if [[ ! -f $bundle/llm.c/COMMIT || $(cat "$bundle/llm.c/COMMIT") != "$llmc_commit" ]]; then
  tmp=$(mktemp -d)
  if [[ -d $llmc_git ]]; then
    git_dir=$llmc_git
  else
    git clone -q --bare --filter=blob:none "$llmc_git" "$tmp/llm.c.git" ||
      { echo "gpu_bundle: could not clone $llmc_git (set LLMC_GIT to a local clone)" >&2; exit 1; }
    git_dir=$tmp/llm.c.git
  fi
  rm -rf "$bundle/llm.c"
  mkdir -p "$bundle/llm.c"
  git --git-dir="$git_dir" archive "$llmc_commit" Makefile train_gpt2.cu llmc LICENSE | tar -x -C "$bundle/llm.c" ||
    { echo "gpu_bundle: $llmc_git has no commit $llmc_commit" >&2; exit 1; }
  echo "$llmc_commit" >"$bundle/llm.c/COMMIT"
  rm -rf "$tmp"
fi

for f in "${shared_files[@]}"; do
  [[ -f ../shared/$f ]] || { echo "gpu_bundle: ../shared/$f is missing (the shared folder beside the checkout)" >&2; exit 1; }
  cp -f "../shared/$f" "$bundle/shared/$f"
done

{
  echo "# .gpu-bundle, made by scripts/gpu_bundle.sh on $(hostname) at $(date -u +%FT%TZ)"
  (cd "$bundle" && sha256sum debs/*.deb "${shared_files[@]/#/shared/}" && find llm.c -type f | sort | xargs sha256sum)
} > "$bundle/MANIFEST"
echo "gpu_bundle: $(du -sh "$bundle" | cut -f1) in $bundle ($(ls "$bundle/debs" | wc -l) packages, ${#shared_files[@]} shared files, llm.c at ${llmc_commit:0:7})"

if ((check)); then
  [[ $(id -u) == 0 ]] || { echo "gpu_bundle --check: chroot needs root" >&2; exit 1; }
  if [[ ! -x $root_dir/usr/bin/cmake ]]; then
    command -v debootstrap >/dev/null || { echo "gpu_bundle --check: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
    echo "gpu_bundle --check: making a minimal Debian 12 in $root_dir (debootstrap, a few minutes)"
    debootstrap --variant=minbase --include=g++,cmake,ninja-build,python3 bookworm "$root_dir" \
      http://deb.debian.org/debian >"$root_dir.log" 2>&1 || { tail -5 "$root_dir.log" >&2; exit 1; }
  fi
  # The proof means something only if the root has none of what the bundle brings.
  BRRR_GPU_SH_SOURCED=1 source scripts/gpu.sh
  for p in "${!system_has[@]}"; do
    [[ ! -e $root_dir${system_has[$p]} ]] || { echo "gpu_bundle --check: $root_dir has ${system_has[$p]} ($p)" >&2; exit 1; }
  done
  echo "gpu_bundle --check: $root_dir has none of: ${!system_has[*]}"
  mkdir -p "$root_dir/brrr" "$root_dir/proc"
  mountpoint -q "$root_dir/brrr" || mount --bind "$PWD" "$root_dir/brrr"
  mountpoint -q "$root_dir/proc" || mount -t proc proc "$root_dir/proc"
  trap 'umount "$root_dir/brrr" "$root_dir/proc" 2>/dev/null' EXIT
  # What scripts/gpu.sh's build step does, less CUDA: unpack, configure against the prefix, build.
  chroot "$root_dir" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root /bin/bash -c '
    set -euo pipefail
    cd /brrr
    BRRR_GPU_SH_SOURCED=1 source scripts/gpu.sh
    rm -rf /tmp/build && mkdir -p /tmp/build
    unpack_bundle .gpu-bundle /tmp/build/prefix
    cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBRRR_CUDA=OFF -DBRRR_BENCH=OFF \
      -DBRRR_SHARED_DIR=/brrr/.gpu-bundle/shared -DCMAKE_PREFIX_PATH=/tmp/build/prefix/usr >/tmp/configure.log ||
      { tail -20 /tmp/configure.log; exit 1; }
    cmake --build /tmp/build -j "$(nproc)" --target test_core test_tokenizer >/tmp/build.log ||
      { grep -m 20 -B2 -A8 "error" /tmp/build.log; exit 1; }
    cd /tmp/build && ctest -L "core|tokenizer" -j "$(nproc)" --output-on-failure -Q'
  echo "gpu_bundle --check: built in a Debian root with no -dev package, against the bundle alone; core and tokenizer tests pass"
fi
