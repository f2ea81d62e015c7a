#!/bin/sh
# ctest torch.OldestTorch: tests/torch/run_oldest.sh <repo root> <path of libnccl.so.2> <build dir> [script args]
# (with [script args]: `python <script args>` instead of the pytest part, e.g. dist_suite.py)
# Builds torch_accl against the OLDEST supported torch (scripts/install-deps.sh TORCH_OLDEST, in
# its shared base environment; ACCL_TORCH_OLDEST_PY overrides the interpreter) into <build dir>
# - never into the source tree, which holds the build for the newest torch - and runs the part
# of the suite that exercises every op (receive from any source too) and DDP. Fails (never skips) when that torch is missing.
set -eu
ROOT=$1
LIB=$2
OUT=$3
PY=${ACCL_TORCH_OLDEST_PY:-${XDG_CACHE_HOME:-$HOME/.cache}/accl/torch-2.5.1/bin/python}
if ! [ -x "$PY" ] || ! "$PY" -c "import torch, pytest" 2>/dev/null; then
  echo "FAIL: $PY with torch and pytest is missing - run 'make deps-torch' (scripts/install-torch.sh)" >&2
  exit 1
fi
echo "building torch_accl against torch $("$PY" -c 'import torch; print(torch.__version__)') into $OUT"
(cd "$ROOT/python" && ACCL_LIB_DIR=$(dirname "$LIB") MAX_JOBS=${MAX_JOBS:-2} "$PY" setup.py -q build \
   --build-base "$OUT" --build-lib "$OUT/lib" >"$OUT.log" 2>&1) || {
  tail -n 40 "$OUT.log" >&2; echo "FAIL: could not build torch_accl against $PY" >&2; exit 1; }
export ACCL_LIBNCCL="$LIB" OMP_NUM_THREADS=1 PYTHONPATH="$OUT/lib"
cd "$ROOT"
[ $# -gt 3 ] && { shift 3; exec "$PY" "$@"; }  # e.g. tests/torch/dist_suite.py ... (torch.DistSuiteOldest)
exec "$PY" -m pytest -q -p no:cacheprovider tests/torch/test_library.py tests/torch/test_ops.py tests/torch/test_any_source.py \
  "tests/torch/test_training.py::test_ddp_accl_matches_gloo" tests/torch/test_cuda.py
