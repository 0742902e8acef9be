#!/usr/bin/env bash
# bench/setup_bench_venv.sh: makes .venv-bench, the virtual environment of the benchmarks' PyTorch
# peer (PyTorch 2.15.0 from PyPI, every package pinned in bench/requirements-bench.txt).
# bench/conv.sh calls it; run it by hand to make the environment ahead of time.
#
#   bench/setup_bench_venv.sh            # .venv-bench in the repo root (git-ignored)
#   bench/setup_bench_venv.sh DIR        # somewhere else
#
# Run from the repo root. It does nothing when DIR already holds a Python whose torch is 2.15.0
# with oneDNN; otherwise it makes DIR (python3 -m venv, apart from Debian's packages) and
# installs the pinned set with pip from PyPI: about 4 GB of wheels, most of them the CUDA
# libraries that PyPI's torch loads at import (see requirements-bench.txt). Nothing outside
# DIR changes. Exit status 0 when the check at the end passes.
set -euo pipefail
venv=${1:-.venv-bench}
requirements=bench/requirements-bench.txt
[[ -f $requirements ]] || { echo "setup_bench_venv: run it from the repo root ($requirements not found)" >&2; exit 1; }

check='import torch; assert torch.__version__.split("+")[0] == "2.15.0", torch.__version__; assert torch.backends.mkldnn.is_available(), "no oneDNN"; import transformers; assert transformers.__version__ == "5.24.0", "transformers " + transformers.__version__; print("setup_bench_venv:", torch.__version__, "with oneDNN, in", torch.__file__.rsplit("/lib/", 1)[0])'

if [[ -x $venv/bin/python ]] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  exit 0
fi
if [[ ! -x $venv/bin/python ]]; then
  python3 -m venv "$venv"
fi
echo "setup_bench_venv: installing $requirements into $venv (about 4 GB from PyPI; a few minutes)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
"$venv/bin/python" -c "$check"
