#!/usr/bin/env bash
# Installs PyTorch for the parts of ACCL that use it: the torch_accl backend's tests
# (tests/torch, in `make test`) and the benchmarks that compare with Gloo (`make bench`,
# perf/torch_allreduce_bench.py). `make run` and the build do not need it. Idempotent: when
# everything is present it only checks.
set -euo pipefail

# ---- PyTorch for torch_accl (python/, tests/torch, perf/torch_allreduce_bench.py) ------------
# torch from PyPI (~5 GB each with its CUDA wheels) is installed once per machine into shared
# base environments under ~/.cache/accl and reached from each checkout's own VENV (default
# .venv) through a .pth file, so a fresh clone (CI) does not download it again; VENV itself
# holds only torch_accl, which the torch ctest builds against build/lib (tests/torch/run_ctest.sh).
# Two releases bound the supported range (docs/pytorch.md):
#   TORCH_NEWEST  the newest on PyPI: VENV and `make test` (ctest torch.PytestSuite) use it;
#   TORCH_OLDEST  the oldest supported: ctest torch.OldestTorch builds the extension against it
#                 and runs part of the suite (tests/torch/run_oldest.sh).
TORCH_NEWEST=2.15.0
TORCH_OLDEST=2.5.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/accl
has_torch() {  # has_torch <env> <version>
  [[ -x $1/bin/python ]] &&
    "$1/bin/python" -c "import sys, torch, pytest, numpy, expecttest; sys.exit(torch.__version__.split('+')[0] != '$2')" 2>/dev/null
}
# expecttest: torch.testing._internal imports it (PyTorch's own distributed tests,
# tests/torch/dist_suite.py); pip keeps an installed torch==<version>, so an older cache only
# gains what it lacks.
install_torch() {  # install_torch <env> <version>
  if has_torch "$1" "$2"; then
    echo "install-torch: torch $2, numpy, pytest and expecttest present in $1"
  else
    echo "install-torch: downloading torch==$2, numpy, pytest, expecttest from PyPI into $1 (~5 GB with its CUDA"
    echo "install-torch: wheels, once per machine): the PyTorch backend's tests and benchmarks need them"
    [[ -x $1/bin/python ]] || /usr/bin/python3 -m venv "$1"
    "$1/bin/python" -m pip install -q "torch==$2" numpy pytest expecttest
  fi
}
purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
TORCH_BASE=${ACCL_TORCH_BASE:-$CACHE/torch-$TORCH_NEWEST}
install_torch "$TORCH_BASE" "$TORCH_NEWEST"
install_torch "${ACCL_TORCH_OLDEST_BASE:-$CACHE/torch-$TORCH_OLDEST}" "$TORCH_OLDEST"
[[ -x $VENV/bin/python ]] || /usr/bin/python3 -m venv "$VENV"
purelib "$TORCH_BASE" > "$(purelib "$VENV")/accl-shared-torch.pth"
has_torch "$VENV" "$TORCH_NEWEST" || { echo "install-torch: $VENV cannot import torch $TORCH_NEWEST" >&2; exit 1; }
