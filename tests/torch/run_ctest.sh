#!/bin/sh
# ctest entry for the PyTorch suite: tests/torch/run_ctest.sh <repo root> <path of libnccl.so.2> [script args]
# Without [script args] it runs the pytest suite; with them, `python <script args>` (dist_suite.py).
# Fails (never skips) when the virtual environment with torch is missing: `make deps-torch` makes it.
# (Re)builds the torch_accl extension into the venv when it is absent or older than its source.
set -eu
ROOT=$1
LIB=$2
shift 2
VENV=${VENV:-$ROOT/.venv}
PY=$VENV/bin/python
if ! [ -x "$PY" ] || ! "$PY" -c "import torch, pytest" 2>/dev/null; then
  echo "FAIL: $VENV with torch and pytest is missing - run 'make deps-torch' (scripts/install-torch.sh)" >&2
  exit 1
fi
SO=$(ls "$ROOT"/python/torch_accl/_C*.so 2>/dev/null | head -n1 || true)
if [ -z "$SO" ] || [ -n "$(find "$ROOT/python/torch_accl/csrc" "$ROOT/python/setup.py" -newer "$SO" | head -n1)" ] ||
   ! "$PY" -c "import torch_accl" 2>/dev/null; then
  echo "building torch_accl against $(dirname "$LIB")"
  (cd "$ROOT" && ACCL_LIB_DIR=$(dirname "$LIB") "$PY" -m pip install -q --no-build-isolation -e python/) || {
    echo "FAIL: could not build the torch_accl extension" >&2; exit 1; }
fi
export ACCL_LIBNCCL="$LIB" OMP_NUM_THREADS=1
cd "$ROOT"
"$PY" -c 'import torch; print("torch", torch.__version__)'
[ $# -gt 0 ] && exec "$PY" "$@"
exec "$PY" -m pytest tests/torch -q -p no:cacheprovider
