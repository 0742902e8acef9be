#!/usr/bin/env bash
# scripts/setup.sh: install what brrr needs on Debian 12, and nothing when all is there.
#
# Debian packages: the compiler and build tools, the C++ libraries brrr builds on (Boost's
# Beast and Asio: brrr serve's HTTP server; cpp-httplib: the HTTP client of its tests),
# Doxygen and Chromium (the docs test renders every page of the course headless, as a reader
# sees it; chromium-driver lets Selenium drive it for brrr serve's page test),
# OpenMPI (mpirun and the MPI library, for data-parallel training, chapter 19), the peers
# the tests and benchmarks compare against (NumPy on OpenBLAS, PyTorch), and the
# handwritten digits of the CNN chapter (python3-sklearn ships them; zlib reads the .csv.gz).
# Python packages that Debian does not ship (tiktoken, HF tokenizers and transformers, sentencepiece) go into
# a virtual environment at .venv that also sees Debian's numpy and torch.
# Run as root, or as a user who may sudo. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev doctest-dev libstb-dev libcli11-dev nlohmann-json3-dev libpcre2-dev
  doxygen libjs-mathjax chromium chromium-driver
  libboost-dev libcpp-httplib-dev
  clang libclang-rt-14-dev
  python3 python3-venv python3-pip python3-numpy libopenblas0-openmp python3-torch
  bible-kjv sentencepiece
  python3-sklearn zlib1g-dev
  libopenmpi-dev openmpi-bin
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

# PyPI peers for the tokenizer tests and benchmarks. A failure here (no network) is fatal, for
# scripts/test.sh requires the tests that need them; BRRR_SETUP_NO_PYPI=1 goes on without them
# (those tests then say Skipped, and scripts/test.sh fails on them).
venv=.venv
pip_failed() {
  if [[ ${BRRR_SETUP_NO_PYPI:-0} == 1 ]]; then
    echo "setup: could not install $1 (BRRR_SETUP_NO_PYPI=1: going on; the tests that need them say Skipped)"
  else
    echo "setup: could not install $1 into $venv; the tests need them (BRRR_SETUP_NO_PYPI=1 goes on without)" >&2
    exit 1
  fi
}
# transformers 4.46.3 installs beside Debian 12's PyTorch (1.13) and runs GPT-2 on it (checked
# 2026-11-26); the pretrained-model tests (chapter 08) make their Hugging Face folders with it.
pip_packages=(tiktoken tokenizers sentencepiece transformers==4.46.3)
if [[ ! -x $venv/bin/python3 ]]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
if ! "$venv/bin/python3" -c "import tiktoken, tokenizers, sentencepiece, transformers" 2>/dev/null; then
  echo "setup: installing ${pip_packages[*]} into $venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${pip_packages[@]}" || pip_failed "${pip_packages[*]}"
fi

# brrr serve's tests (chapter 20): the real OpenAI client, and Selenium driving headless Chromium
# through the page. Fatal too, as above.
serve_packages=(openai selenium)
if ! "$venv/bin/python3" -c "import openai, selenium" 2>/dev/null; then
  echo "setup: installing ${serve_packages[*]} into $venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${serve_packages[@]}" || pip_failed "${serve_packages[*]}"
fi

# The notebooks (notebooks/README.md): cppyy runs brrr's C++ inside a Jupyter kernel, and
# nbclient runs the notebooks headless in the tests. Fatal too, as above.
notebook_packages=(cppyy ipykernel nbclient nbformat)
if ! "$venv/bin/python3" -c "import cppyy, ipykernel, nbclient, nbformat" 2>/dev/null; then
  echo "setup: installing ${notebook_packages[*]} into $venv (the first time takes a few minutes)"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "${notebook_packages[@]}" ||
    pip_failed "${notebook_packages[*]}"
  # cppyy builds its precompiled header on first import if it has none: once, here, rather
  # than in several notebook tests at the same time.
  "$venv/bin/python3" -c "import cppyy" 2>/dev/null || true
fi
