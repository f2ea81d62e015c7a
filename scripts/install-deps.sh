#!/usr/bin/env bash
# Installs the Debian packages ACCL needs to build, run the demo and run its tests
# (`make deps`, and so `make run` and `make test`). PyTorch, which only the torch tests and
# benchmarks use, is scripts/install-torch.sh (`make deps-torch`). Idempotent: when everything
# is present it only checks.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake pkg-config
  ccache  # the Makefile's builds reuse objects across clones (CI)
  googletest libgtest-dev libgmock-dev
  iproute2 iputils-ping procps psmisc
  openmpi-bin libopenmpi-dev
  python3 python3-venv python3-matplotlib
  libhwloc-dev
  libibverbs-dev  # verbs.h types for transports/ib (libibverbs itself is dlopen()ed)
  # The HIP kernels for AMD GPUs (cmake/hip_kernels.cmake): Debian's hipcc 5.2 drives clang 15,
  # which cannot target gfx942 (MI300); clang 19 builds gfx90a and gfx942 with no ROCm at all.
  # lld links the code objects, clang-tools has clang-offload-bundler, llvm has the readers
  # (llvm-readobj, llvm-nm) that tests/hip checks the bundle with.
  clang-19 lld-19 clang-tools-19 llvm-19
  # ROCm's HIP runtime, never linked: the HIP backend's loader test dlopen()s it on a machine
  # without an AMD GPU (no device: the library must fall back to the host backend).
  libamdhip64-5
  gdb  # tests/torch/dist_suite.py prints the native stacks of ranks that hang
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
