#!/usr/bin/env bash
# scripts/setup.sh: install what brrr needs on Debian 12, and nothing when all is there.
#
# Debian packages: the compiler and build tools, the C++ libraries brrr builds on, Doxygen,
# and the peers the tests and benchmarks compare against (NumPy on OpenBLAS, PyTorch).
# Python packages that Debian does not ship (tiktoken, HF tokenizers, sentencepiece) go into
# a virtual environment at .venv that also sees Debian's numpy and torch.
# Run as root, or as a user who may sudo. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev doctest-dev libstb-dev libcli11-dev nlohmann-json3-dev libpcre2-dev
  doxygen libjs-mathjax
  clang libclang-rt-14-dev
  python3 python3-venv python3-pip python3-numpy libopenblas0-openmp python3-torch
  bible-kjv sentencepiece
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# PyPI peers for the tokenizer tests and benchmarks. A failure here (no network) is not
# fatal: the tests that need them skip and say so.
venv=.venv
pip_packages=(tiktoken tokenizers sentencepiece)
if [[ ! -x $venv/bin/python3 ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python3" -c "import tiktoken, tokenizers, sentencepiece" 2>/dev/null; then
  echo "setup: installing ${pip_packages[*]} into $venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${pip_packages[@]}" ||
    echo "setup: could not install ${pip_packages[*]}; tests that need them will be skipped"
fi

# The notebooks (notebooks/README.md): cppyy runs brrr's C++ inside a Jupyter kernel, and
# nbclient runs the notebooks headless in the tests. Not fatal either: the notebook tests skip.
notebook_packages=(cppyy ipykernel nbclient nbformat)
if ! "$venv/bin/python3" -c "import cppyy, ipykernel, nbclient, nbformat" 2>/dev/null; then
  echo "setup: installing ${notebook_packages[*]} into $venv (the first time takes a few minutes)"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${notebook_packages[@]}" ||
    echo "setup: could not install ${notebook_packages[*]}; the notebook tests will be skipped"
  # cppyy builds its precompiled header on first import if it has none: once, here, rather
  # than in several notebook tests at the same time.
  "$venv/bin/python3" -c "import cppyy" 2>/dev/null || true
fi
