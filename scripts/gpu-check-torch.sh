#!/usr/bin/env bash
# PyTorch checks on a GPU machine (issue 11): both routes on CUDA tensors, DDP against a CPU
# reference, a collective in a CUDA graph, and the all_reduce benchmark. Uses the machine's own
# torch (PYTHON, default python3); builds torch_accl against it into BUILD/torch-gpu.
#
#   scripts/gpu-check-torch.sh [BUILD]        # alone: builds BUILD/lib/libnccl.so.2 if missing
#   . scripts/gpu-check-torch.sh              # from scripts/gpu-check.sh (BUILD set there)
#
# Every check gives one row: "check | PASS/FAIL/SKIP | detail". When sourced by a script that
# defines gpu_check_row NAME RESULT DETAIL, rows go to it (its summary table); otherwise they
# are printed here as a table at the end. Logs: BUILD/gpu-check-torch/*.log.
_gct_main() {
  local root build py logs
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  build=${BUILD:-${1:-$root/build}}
  py=${PYTHON:-python3}
  logs=$build/gpu-check-torch
  mkdir -p "$logs"
  _gct_rows=()
  _gct_failed=0
  local lib=$build/lib/libnccl.so.2
  if [[ ! -e $lib ]]; then
    echo "gpu-check-torch: building $lib"
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$logs/cmake.log" 2>&1 &&
      cmake --build "$build" --target nccl >>"$logs/cmake.log" 2>&1 || { _gct_row "torch: libnccl.so.2 build" FAIL "$logs/cmake.log"; _gct_print; return 1; }
  fi
  lib=$(realpath "$lib")
  local tv
  if ! tv=$("$py" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' 2>"$logs/torch.log"); then
    _gct_row "torch: import" FAIL "$py cannot import torch ($logs/torch.log)"; _gct_print; return 1
  fi
  echo "gpu-check-torch: $py: torch $tv"
  if (cd "$root/python" && ACCL_LIB_DIR=$(dirname "$lib") MAX_JOBS=$(nproc) timeout 600 "$py" setup.py -q build \
        --build-base "$build/torch-gpu" --build-lib "$build/torch-gpu/lib" >"$logs/build.log" 2>&1) &&
     PYTHONPATH=$build/torch-gpu/lib ACCL_LIBNCCL=$lib "$py" -c 'import torch_accl, sys; sys.exit(not torch_accl._C.built_with_cuda())'; then
    _gct_row "torch_accl build (torch ${tv%% *})" PASS "with CUDA support; $(PYTHONPATH=$build/torch-gpu/lib ACCL_LIBNCCL=$lib "$py" -c 'import torch_accl; print(torch_accl.version())')"
  else
    _gct_row "torch_accl build (torch ${tv%% *})" FAIL "$logs/build.log"; _gct_print; return 1
  fi
  export PYTHONPATH=$build/torch-gpu/lib${PYTHONPATH:+:$PYTHONPATH} ACCL_LIBNCCL=$lib OMP_NUM_THREADS=1
  local run=("$py" -m torch.distributed.run --standalone --nproc-per-node=2)
  # Both routes, every op, two ranks on cuda:0.
  local route pre name
  for route in accl nccl; do
    pre=(); [[ $route == nccl ]] && pre=(env LD_PRELOAD="$lib")
    name="route $([[ $route == accl ]] && echo '2 (accl)' || echo '1 (nccl + LD_PRELOAD)')"
    timeout 600 "${pre[@]}" "${run[@]}" "$root/tests/torch/cuda_ops.py" --backend "$route" >"$logs/ops-$route.log" 2>&1
    local rc=$? got=0 line
    while read -r line; do
      got=1
      local rest=${line#"ROW torch $name "}
      local check=${rest%% *}; rest=${rest#* }
      local result=${rest%% *}; local detail=${rest#* }
      _gct_row "torch $name: $check" "$result" "$detail"
    done < <(grep '^ROW ' "$logs/ops-$route.log")
    ((got)) || _gct_row "torch $name: ops" FAIL "exit $rc, no result rows ($logs/ops-$route.log)"
  done
  # DDP, 20 steps: gloo on CPU (reference) vs each route with both ranks on cuda:0.
  local d=$logs/ddp ok=1
  mkdir -p "$d"
  timeout 300 "${run[@]}" "$root/tests/torch/train.py" --backend gloo --device cpu --out "$d/gloo.pt" >"$d/gloo.log" 2>&1 || ok=0
  for route in accl nccl; do
    pre=(); [[ $route == nccl ]] && pre=(env LD_PRELOAD="$lib")
    name="route $([[ $route == accl ]] && echo 2 || echo 1)"
    if ((ok)) && timeout 300 "${pre[@]}" "${run[@]}" "$root/tests/torch/train.py" --backend "$route" --device cuda \
         --out "$d/$route.pt" >"$d/$route.log" 2>&1; then
      local diff
      diff=$("$py" -c "import torch; a=torch.load('$d/$route.pt'); b=torch.load('$d/gloo.pt'); print(max((a[k]-b[k]).abs().max().item() for k in b))")
      if "$py" -c "import sys; sys.exit(not $diff < 1e-4)"; then
        _gct_row "torch $name: DDP 20 steps vs gloo CPU" PASS "max |param diff| = $diff (tolerance 1e-4)"
      else
        _gct_row "torch $name: DDP 20 steps vs gloo CPU" FAIL "max |param diff| = $diff (tolerance 1e-4)"
      fi
    else
      _gct_row "torch $name: DDP 20 steps vs gloo CPU" FAIL "see $d/$route.log, $d/gloo.log"
    fi
  done
  # Speed: 1 rank (vs NVIDIA's NCCL) and 2 ranks on cuda:0, both routes (left out when
  # gpu-check.sh sources this with GCT_NO_BENCH=1: its 6-minute budget has no room for it).
  if [[ -n ${GCT_NO_BENCH:-} ]]; then
    _gct_row "torch all_reduce bench" SKIP "left out of scripts/gpu-check.sh (time budget); run scripts/gpu-check-torch.sh alone"
  elif timeout 900 "$py" "$root/perf/torch_allreduce_bench.py" --device cuda --ranks 1 2 --min 1K --max 256M \
       --rounds 2 >"$logs/bench.log" 2>&1; then
    _gct_row "torch all_reduce bench (cuda:0, 1 and 2 ranks)" PASS "table: $logs/bench.log"
    cat "$logs/bench.log"
  else
    _gct_row "torch all_reduce bench (cuda:0, 1 and 2 ranks)" FAIL "$logs/bench.log"
  fi
  _gct_print
}
_gct_row() {  # _gct_row NAME PASS|FAIL|SKIP DETAIL
  [[ $2 == FAIL ]] && _gct_failed=1
  if declare -F gpu_check_row >/dev/null; then gpu_check_row "$1" "$2" "$3"; fi
  _gct_rows+=("$(printf '| %-44s | %-6s | %s |' "$1" "$2" "$3")")
}
_gct_print() {
  declare -F gpu_check_row >/dev/null && return 0
  printf '| %-44s | %-6s | %s |\n|%s|%s|%s|\n' check result detail "----------------------------------------------" "--------" "--------"
  printf '%s\n' "${_gct_rows[@]}"
}
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -uo pipefail
  _gct_main "$@"
  exit $_gct_failed
else
  _gct_main
fi
