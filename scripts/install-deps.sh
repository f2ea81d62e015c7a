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
# torch from PyPI (~5 GB with its CUDA wheels) is installed once per machine into a shared base
# environment and reached from each checkout's own VENV (default .venv) through a .pth file, so
# a fresh clone (CI) does not download it again; VENV itself holds only torch_accl, which the
# torch ctest builds against build/lib (tests/torch/run_ctest.sh).
TORCH_VERSION=2.5.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${VENV:-$ROOT/.venv}
TORCH_BASE=${ACCL_TORCH_BASE:-${XDG_CACHE_HOME:-$HOME/.cache}/accl/torch-$TORCH_VERSION}
has_torch() {
  [[ -x $1/bin/python ]] &&
    "$1/bin/python" -c "import sys, torch, pytest, numpy; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null
}
purelib() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
if has_torch "$TORCH_BASE"; then
  echo "install-deps: torch $TORCH_VERSION, numpy and pytest present in $TORCH_BASE"
else
  echo "install-deps: installing torch==$TORCH_VERSION, numpy, pytest into $TORCH_BASE (~5 GB with its CUDA wheels)"
  [[ -x $TORCH_BASE/bin/python ]] || /usr/bin/python3 -m venv "$TORCH_BASE"
  "$TORCH_BASE/bin/python" -m pip install -q "torch==$TORCH_VERSION" numpy pytest
fi
[[ -x $VENV/bin/python ]] || /usr/bin/python3 -m venv "$VENV"
purelib "$TORCH_BASE" > "$(purelib "$VENV")/accl-shared-torch.pth"
has_torch "$VENV" || { echo "install-deps: $VENV cannot import torch $TORCH_VERSION" >&2; exit 1; }
