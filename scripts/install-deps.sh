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
