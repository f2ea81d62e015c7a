#!/usr/bin/env bash
# Installs everything ACCL needs to build, test and benchmark, from Debian's packages (and
# PyPI into .venv where needed). Idempotent: when everything is present it only checks.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake pkg-config
  googletest libgtest-dev libgmock-dev
  iproute2 iputils-ping procps psmisc
  openmpi-bin libopenmpi-dev
  python3 python3-venv python3-matplotlib
  libhwloc-dev
  libibverbs-dev  # verbs.h types for transports/ib (libibverbs itself is dlopen()ed)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#APT_PACKAGES[@]} Debian packages present"
fi

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
    "$1/bin/python" -c "import sys, torch, pytest, numpy; sys.exit(torch.__version__.split('+')[0] != '$2')" 2>/dev/null
}
install_torch() {  # install_torch <env> <version>
  if has_torch "$1" "$2"; then
    echo "install-deps: torch $2, numpy and pytest present in $1"
  else
    echo "install-deps: installing torch==$2, numpy, pytest into $1 (~5 GB with its CUDA wheels)"
    [[ -x $1/bin/python ]] || /usr/bin/python3 -m venv "$1"
    "$1/bin/python" -m pip install -q "torch==$2" numpy pytest
  fi
}
purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
TORCH_BASE=${ACCL_TORCH_BASE:-$CACHE/torch-$TORCH_NEWEST}
install_torch "$TORCH_BASE" "$TORCH_NEWEST"
install_torch "${ACCL_TORCH_OLDEST_BASE:-$CACHE/torch-$TORCH_OLDEST}" "$TORCH_OLDEST"
[[ -x $VENV/bin/python ]] || /usr/bin/python3 -m venv "$VENV"
purelib "$TORCH_BASE" > "$(purelib "$VENV")/accl-shared-torch.pth"
has_torch "$VENV" "$TORCH_NEWEST" || { echo "install-deps: $VENV cannot import torch $TORCH_NEWEST" >&2; exit 1; }
