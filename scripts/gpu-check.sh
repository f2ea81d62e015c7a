#!/usr/bin/env bash
# gpu-check.sh: one command that checks ACCL on a machine with a GPU, in at most 6 minutes
# (docs/gpu.md, "Checking a GPU machine").
#
#   scripts/gpu-check.sh [--fake] [--build-dir DIR] [--out DIR] [--budget SECONDS] [build-dir]
#
# Order: the machine, the build (only the targets the rows use), correctness (GPU tests; our
# harness with 1, 2, 4 ranks as threads and as processes; NVIDIA's nccl-tests, every collective;
# graph mode), PyTorch (both routes on CUDA tensors, DDP against a CPU reference, a collective in a
# CUDA graph), then speed (every run bounded by seconds, not sizes: --time-budget). Process rows
# run without and, where nvidia-cuda-mps-control exists, with an MPS daemon. Each row is printed
# as it completes with the time so far, so a run cut short still tells what it learnt. The end:
# the summary table and ours against NVIDIA's NCCL from the same run (1 rank, nccl-tests
# all_reduce: 8 B time, 256 MiB algbw, ratios). Every log, the summary included, goes into one
# archive, OUT/gpu-check-logs.tar.gz (--out; default: the build dir), for a remote run to bring back.
# A row that cannot run (no MPI, no GTest, no torch, no nccl-tests, time is up) says SKIP and why.
#
# --fake: the rehearsal on the fake CUDA driver (tests/fake_cuda; ctest gpu_check.Rehearsal runs
# it): every row runs with small sizes and short budgets; our perf binaries stand in for NVIDIA's
# nccl-tests (same command line and table) when NCCL_TESTS_DIR is unset; torch's CUDA runtime
# cannot run on the fake, so its rows say SKIP; figures measure this machine, not a GPU.
# An already configured build dir is reused as it is (no reconfigure): only its targets are built.
#
# Env: NCCL_TESTS_DIR (a checkout of NVIDIA's nccl-tests), NVIDIA_NCCL_HOME (NVIDIA's
# include/nccl.h + lib/libnccl.so.2; default: the pip package nvidia-nccl), MPI_HOME (default
# /usr/lib/x86_64-linux-gnu/openmpi), GTEST_PREFIX (a prefix with GTest's CMake config), PYTHON
# (default python3), GPU_CHECK_SPEED_SECONDS (per speed run; default 6, 1 with --fake).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
fake=0 build="" out_dir="" budget=360
while [ $# -gt 0 ]; do
  case $1 in
    --fake) fake=1 ;;
    --build-dir) build=$2; shift ;;
    --out) out_dir=$2; shift ;;
    --budget) budget=$2; shift ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    -*) echo "gpu-check: unknown option $1" >&2; exit 2 ;;
    *) build=$1 ;;
  esac
  shift
done
[ -n "$build" ] || build=$here/build-gpu
mkdir -p "$build" || exit 1
build=$(cd "$build" && pwd)
[ -n "$out_dir" ] || out_dir=$build
mkdir -p "$out_dir" && out_dir=$(cd "$out_dir" && pwd)
logs=$build/gpu-check
rm -rf "$logs" && mkdir -p "$logs" || exit 1
mpi_home=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
jobs=$(nproc)
start=$(date +%s)
speed_s=${GPU_CHECK_SPEED_SECONDS:-$([ $fake = 1 ] && echo 1 || echo 6)}
declare -a rows=()
failed=0

elapsed() { echo $(( $(date +%s) - start )); }
left() { echo $(( budget - $(elapsed) )); }
# row NAME RESULT DETAIL  (RESULT: PASS, FAIL, SKIP), printed at once with the time so far.
row() {
  rows+=("$1"$'\t'"$2"$'\t'"$3")
  [ "$2" = FAIL ] && failed=1
  printf '== [%4d s] %s: %s %s\n' "$(elapsed)" "$1" "$2" "$3" | tee -a "$logs/rows.log"
}
print_rows() {
  local r name result detail width=5
  for r in "${rows[@]}"; do name=${r%%$'\t'*}; [ ${#name} -gt $width ] && width=${#name}; done
  printf "%-${width}s %-6s %s\n" CHECK RESULT DETAIL
  for r in "${rows[@]}"; do
    IFS=$'\t' read -r name result detail <<<"$r"
    printf "%-${width}s %-6s %s\n" "$name" "$result" "$detail"
  done
}
# fits NAME SECONDS: true when SECONDS still fit in the budget, else a SKIP row for NAME.
fits() {
  if [ "$(left)" -lt "$2" ]; then row "$1" SKIP "out of time: $(left) s left of the $budget s budget"; return 1; fi
}
# bounded SECONDS CMD...: CMD with a time limit that never passes the budget's end.
bounded() {
  local limit=$1; shift
  local l; l=$(left); [ "$l" -lt "$limit" ] && limit=$(( l > 5 ? l : 5 ))
  timeout -k 5 "$limit" "$@"
}
finish() {
  local t; t=$(elapsed)
  if [ $have_gpu = 1 ] && [ $fake = 0 ] && [ "$t" -gt 360 ]; then row "time" FAIL "$t s: over the 6-minute budget"
  else row "time" PASS "$t s$([ $fake = 1 ] && echo ' (this machine on the fake driver, not a GPU)')"; fi
  {
    echo
    echo "ACCL GPU check$([ $fake = 1 ] && echo ' (REHEARSAL on the fake driver)'), $(date -u '+%Y-%m-%d %H:%M UTC'), $t s, ACCL $(git -C "$here" describe --always --dirty 2>/dev/null)"
    print_rows
    if [ -n "${cmp_table:-}" ]; then echo; echo "$cmp_table"; fi
  } | tee "$logs/summary.txt"
  [ -n "${mps_pipe:-}" ] && mps_stop
  tar czf "$out_dir/gpu-check-logs.tar.gz" -C "$build" gpu-check 2>/dev/null &&
    echo "logs: $out_dir/gpu-check-logs.tar.gz"
  exit $failed
}
have_mpirun() { [ -x "$mpi_home/bin/mpirun" ] || command -v mpirun >/dev/null; }
mpirun_bin() { if [ -x "$mpi_home/bin/mpirun" ]; then echo "$mpi_home/bin/mpirun"; else command -v mpirun; fi; }

# ---- the machine --------------------------------------------------------------------------
if [ $fake = 1 ]; then
  fake_dir=$build/tests/fake_cuda
  export LD_LIBRARY_PATH=$fake_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export FAKE_CUDA_DEVICES=${FAKE_CUDA_DEVICES:-1}
fi
driver_probe() {  # "<devices> <major><minor>", or "0 <why>"
  "${PYTHON:-python3}" - <<'EOF' 2>/dev/null || echo "0 python3 cannot ask the driver"
import ctypes
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("0 no CUDA driver (%s)" % e); raise SystemExit
n = ctypes.c_int(0)
if cu.cuInit(0) != 0 or cu.cuDeviceGetCount(ctypes.byref(n)) != 0 or n.value == 0:
    print("0 the CUDA driver sees no device"); raise SystemExit
major, minor = ctypes.c_int(0), ctypes.c_int(0)
cu.cuDeviceGetAttribute(ctypes.byref(major), 75, 0)
cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0)
print(n.value, "%d%d" % (major.value, minor.value))
EOF
}

# ---- build (only what the rows use) -------------------------------------------------------
perf_bins=(all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf sendrecv_perf)
targets=(nccl accl-run "${perf_bins[@]}")
t0=$(date +%s)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
if [ -f "$build/CMakeCache.txt" ]; then
  configured="reused as configured"
else
  cmake_args=(-S "$here" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DACCL_HIP_KERNELS=OFF)
  read -r pre_ndev pre_cap <<<"$(driver_probe)"
  [ $fake = 0 ] && [ "${pre_ndev:-0}" -gt 0 ] 2>/dev/null && cmake_args+=(-DACCL_CUDA_ARCHS="$pre_cap")
  [ -n "${GTEST_PREFIX:-}" ] && cmake_args+=(-DCMAKE_PREFIX_PATH="$GTEST_PREFIX")
  if ! cmake "${cmake_args[@]}" > "$logs/configure.log" 2>&1; then
    tail -30 "$logs/configure.log"
    have_gpu=0; row "build" FAIL "configure failed: see gpu-check/configure.log"; finish
  fi
  configured="Release"
fi
known_targets=$(cmake --build "$build" --target help 2>/dev/null)
have_gtest=0
for t in device_kernels_test cuda_backend_gpu_test kernel_stamps_gpu_test; do
  echo "$known_targets" | grep -Eq "(^|[ /])$t(:|$)" && targets+=("$t") && have_gtest=1
done
[ $fake = 1 ] && targets+=(fake_cuda)
if cmake --build "$build" -j "$jobs" --target "${targets[@]}" > "$logs/build.log" 2>&1; then
  warnings=$(grep -c 'warning:' "$logs/build.log")
  row "build (${configured}, ${#targets[@]} targets)" PASS "$(( $(date +%s) - t0 )) s, $warnings compiler warning(s)"
else
  grep -B2 -A12 -m3 "error" "$logs/build.log" | tail -30
  have_gpu=0; row "build" FAIL "see gpu-check/build.log"; finish
fi
lib=$build/lib/libnccl.so.2
perf=$build/perf

read -r ndev cap_or_why <<<"$(driver_probe)"
if [ "${ndev:-0}" -gt 0 ] 2>/dev/null; then
  have_gpu=1
  name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  row "GPU" PASS "$ndev device(s), sm_$cap_or_why${name:+, $name}$([ $fake = 1 ] && echo ' (the fake driver)')"
else
  have_gpu=0
  no_gpu="no GPU: ${cap_or_why:-driver probe failed}"
  row "GPU" SKIP "$no_gpu; the GPU rows below say SKIP"
fi
mps_ctl=$(command -v nvidia-cuda-mps-control || true)
mps_pipe=""
mps_start() {
  mps_pipe=$logs/mps-pipe
  mkdir -p "$mps_pipe" "$logs/mps-log"
  export CUDA_MPS_PIPE_DIRECTORY=$mps_pipe CUDA_MPS_LOG_DIRECTORY=$logs/mps-log
  "$mps_ctl" -d > "$logs/mps-start.log" 2>&1 && sleep 1
}
mps_stop() {
  echo quit | "$mps_ctl" > /dev/null 2>&1
  sleep 1
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  mps_pipe=""
}

# ---- correctness: GPU tests -----------------------------------------------------------------
if [ $have_gpu = 0 ]; then
  row "GPU tests (ctest -L gpu)" SKIP "$no_gpu"
elif [ $have_gtest = 0 ]; then
  row "GPU tests (ctest -L gpu)" SKIP "no GTest in this build (set GTEST_PREFIX)"
elif fits "GPU tests (ctest -L gpu)" 30; then
  t0=$(date +%s)
  # On the fake the emulated grid is slow: a few tests of each binary show the rows work.
  filter=(); [ $fake = 1 ] && filter=(-R 'MatrixOnOneRank$|MatrixOnTwoThreadRanksOnOneDevice$|CopyMovesEveryByte|gpu\.KernelStamps.*Two')
  bounded 120 ctest --test-dir "$build" -L '^gpu$' "${filter[@]}" -j 4 --timeout 100 --output-on-failure > "$logs/gpu-tests.log" 2>&1
  rc=$?
  # Counted from the per-test lines, so a run cut at its time limit still says what ran.
  passed=$(grep -Ec 'Test +#[0-9]+: .* Passed' "$logs/gpu-tests.log")
  failures=$(grep -Ec 'Test +#[0-9]+: .*(\*\*\*Failed|\*\*\*Timeout|\*\*\*Exception| Failed)' "$logs/gpu-tests.log")
  skipped=$(grep -Ec 'Test +#[0-9]+: .*Skipped' "$logs/gpu-tests.log")
  ran=$(( passed + failures ))
  summary="$passed passed, $failures failed, $skipped skipped$([ $rc = 124 ] && echo ', cut at its time limit'), $(( $(date +%s) - t0 )) s"
  if [ "$ran" -le 0 ]; then row "GPU tests (ctest -L gpu)" FAIL "a GPU is present but 0 GPU tests ran ($summary)"
  elif [ $rc -ne 0 ] && [ "$failures" -gt 0 ]; then row "GPU tests (ctest -L gpu)" FAIL "$summary; see gpu-check/gpu-tests.log"
  else row "GPU tests (ctest -L gpu)" PASS "$summary"; fi
fi

# ---- correctness: our harness, 1/2/4 ranks, threads and processes ---------------------------
first_row() { awk '/^ +[0-9]/ && $1 > 0 {print; exit}'; }  # all-gather's 8 B row is 0 B with n > 1
last_row() { awk '/^ +[0-9]/ {r = $0} END {print r}'; }
if [ $fake = 1 ]; then check_sizes=(-b 8 -e 64K -f 64); else check_sizes=(-b 8 -e 16M -f 16); fi
# perf_check NAME LAUNCH...: a checked sweep; PASS when rc 0, no #wrong and device buffers.
perf_check() {
  local name=$1 out rc wrong kind; shift
  fits "$name" 10 || return 1
  local log; log=$logs/$(echo "$name" | tr -c 'a-zA-Z0-9_\n' _)
  out=$(bounded 60 "$@" --device "${check_sizes[@]}" -c 1 -n 2 -w 1 2>"$log.stderr"); rc=$?
  echo "$out" > "$log.log"
  wrong=$(echo "$out" | awk '/^ +[0-9]/ && ($9 != 0 || $13 != 0) {n++} END {print n+0}')
  kind=$(echo "$out" | sed -n 's/^# Buffers: \([a-z]*\) memory.*/\1/p' | head -1)
  if [ "$rc" -eq 0 ] && [ "$wrong" = 0 ] && [ "$kind" = device ]; then
    row "$name" PASS "device buffers, #wrong 0, $(echo "$out" | awk '/^ +[0-9]/ {n++} END {print n+0}') sizes"
  else
    row "$name" FAIL "rc=$rc, rows with #wrong: $wrong, buffers: ${kind:-?}: $(cat "$log.stderr" - <<<"$out" | grep -E 'WARN|failure|error' | head -1 | cut -c1-150)"
  fi
}
if [ $have_gpu = 1 ]; then
  for coll in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    for n in 1 2 4; do
      case $coll in all_reduce|all_gather) ;; *) [ $n = 2 ] || continue ;; esac
      perf_check "check ${coll}_perf -g $n (threads)" "$perf/${coll}_perf" -g $n
    done
  done
  for n in 2 4; do perf_check "check all_reduce_perf -np $n (processes)" "$perf/accl-run" -np $n "$perf/all_reduce_perf" -g 1; done
  perf_check "check all_gather_perf -np 2 (processes)" "$perf/accl-run" -np 2 "$perf/all_gather_perf" -g 1
  if [ -n "$mps_ctl" ]; then
    if mps_start; then
      for n in 2 4; do perf_check "check all_reduce_perf -np $n (processes, MPS)" "$perf/accl-run" -np $n "$perf/all_reduce_perf" -g 1; done
    else
      row "check all_reduce_perf -np 2/4 (processes, MPS)" FAIL "nvidia-cuda-mps-control -d failed: $(head -c 150 "$logs/mps-start.log")"
    fi
  else
    row "check all_reduce_perf -np 2/4 (processes, MPS)" SKIP "no nvidia-cuda-mps-control on PATH"
  fi
  # CUDA-graph mode: the timed iterations captured once per rank stream and launched 10 times.
  for n in 1 2; do
    name="check all_reduce_perf -g $n -G 10 (CUDA graph)"
    fits "$name" 10 || continue
    out=$(bounded 60 "$perf/all_reduce_perf" --device -g $n "${check_sizes[@]}" -c 1 -n 2 -G 10 2>"$logs/graph-$n.stderr"); rc=$?
    echo "$out" > "$logs/graph-$n.log"
    if echo "$out" | grep -q "graph: 10" && [ $rc = 0 ] && ! echo "$out" | awk '/^ +[0-9]/ && ($9 != 0 || $13 != 0) {bad=1} END {exit !bad}'; then
      row "$name" PASS "graph mode on, #wrong 0"
    else
      row "$name" FAIL "rc=$rc: $(echo "$out" | grep -E 'graph|WARN|failure' | head -1 | cut -c1-150)"
    fi
  done
  [ -n "$mps_pipe" ] && mps_stop
else
  row "our harness on device buffers (1/2/4 ranks, threads, processes, -G)" SKIP "$no_gpu"
fi

# ---- correctness: NVIDIA's nccl-tests on our library ------------------------------------------
nv_home=${NVIDIA_NCCL_HOME:-$("${PYTHON:-python3}" -c 'import nvidia.nccl as n; print(n.__path__[0])' 2>/dev/null)}
nt_bin="" nt_ref="" nt_note=""
if [ $have_gpu = 0 ]; then
  row "nccl-tests (NVIDIA's)" SKIP "$no_gpu"
elif [ -n "${NCCL_TESTS_DIR:-}" ] && [ -n "$nv_home" ] && [ -f "$nv_home/include/nccl.h" ]; then
  nt=$build/nccl-tests
  mkdir -p "$nt/nvhome/lib" && ln -sfn "$nv_home/include" "$nt/nvhome/include" &&
    ln -sf "$nv_home/lib/libnccl.so.2" "$nt/nvhome/lib/libnccl.so"
  mpi_args=(); have_mpirun && mpi_args=(MPI=1 MPI_HOME="$mpi_home")
  t0=$(date +%s)
  if bounded 120 make -C "$NCCL_TESTS_DIR/src" -j "$jobs" "${mpi_args[@]}" NCCL_HOME="$nt/nvhome" BUILDDIR="$nt/bin" \
       NVCC_GENCODE="-gencode=arch=compute_${cap_or_why},code=sm_${cap_or_why}" > "$logs/nccl-tests-build.log" 2>&1; then
    row "nccl-tests build (NVIDIA's header)" PASS "$(( $(date +%s) - t0 )) s$([ ${#mpi_args[@]} -gt 0 ] && echo ', MPI=1')"
    nt_bin=$nt/bin nt_ref=$nv_home/lib
  else
    row "nccl-tests build (NVIDIA's header)" FAIL "see gpu-check/nccl-tests-build.log"
  fi
elif [ $fake = 1 ]; then
  nt_bin=$perf nt_ref=$build/lib nt_note=" (stand-in: our perf binary)"
  row "nccl-tests (NVIDIA's)" SKIP "--fake without NCCL_TESTS_DIR: our perf binaries (same CLI and table) stand in, to rehearse the rows"
elif [ -z "${NCCL_TESTS_DIR:-}" ]; then
  row "nccl-tests (NVIDIA's)" SKIP "NCCL_TESTS_DIR is not set"
else
  row "nccl-tests (NVIDIA's)" SKIP "NVIDIA's nccl.h not found: set NVIDIA_NCCL_HOME"
fi
# nt_run NAME NPROCS PRELOAD ARGS...: one nccl-tests run; sets nt_small (us at the first size
# that moves data) and nt_big (algbw at the last) for the table.
nt_run() {
  local name=$1 np=$2 preload=$3 out rc; shift 3
  nt_small="" nt_big=""
  fits "$name" 10 || return 1
  local libpath=$nt_ref${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ "$np" = 1 ]; then
    out=$(LD_PRELOAD=$preload LD_LIBRARY_PATH="$libpath" bounded 90 "$@" -g 1 2>"$logs/nt.stderr"); rc=$?
  else
    out=$(NCCL_TESTS_DEVICE=0 bounded 90 "$(mpirun_bin)" --allow-run-as-root --oversubscribe -np "$np" \
            -x LD_PRELOAD="$preload" -x NCCL_TESTS_DEVICE=0 -x LD_LIBRARY_PATH="$libpath" ${FAKE_CUDA_DEVICES:+-x FAKE_CUDA_DEVICES} \
            "$@" -g 1 2>"$logs/nt.stderr"); rc=$?
  fi
  local log; log=$logs/$(echo "$name" | tr -c 'a-zA-Z0-9_\n' _)
  echo "$out" > "$log.log"; mv "$logs/nt.stderr" "$log.stderr"
  if [ $rc -eq 0 ] && echo "$out" | grep -Eq 'Out of bounds values : 0 OK'; then
    nt_small=$(echo "$out" | first_row | awk '{print $6}') nt_big=$(echo "$out" | last_row | awk '{print $7}')
    row "$name" PASS "#wrong 0; $(echo "$out" | first_row | awk '{print $1}') B: $nt_small us, $(echo "$out" | last_row | awk '{print $1}') B: $nt_big GB/s algbw"
  else
    row "$name" FAIL "rc=$rc: $(cat "$log.stderr" - <<<"$out" | grep -E 'WARN|failure|Duplicate|error' | head -1 | cut -c1-150)"
  fi
}
if [ -n "$nt_bin" ]; then
  for t in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    [ -x "$nt_bin/${t}_perf" ] || { row "nccl-tests ${t}_perf" SKIP "not built in $nt_bin"; continue; }
    nt_run "nccl-tests ${t}_perf -g 1$nt_note" 1 "$lib" "$nt_bin/${t}_perf" "${check_sizes[@]}" -c 1 -n 2 -w 1
    if have_mpirun; then nt_run "nccl-tests ${t}_perf mpirun -np 2$nt_note" 2 "$lib" "$nt_bin/${t}_perf" "${check_sizes[@]}" -c 1 -n 2 -w 1
    else row "nccl-tests ${t}_perf mpirun -np 2" SKIP "no mpirun (set MPI_HOME)"; fi
  done
  nt_run "nccl-tests all_reduce_perf -g 1 -G 10 (CUDA graph)$nt_note" 1 "$lib" "$nt_bin/all_reduce_perf" "${check_sizes[@]}" -c 1 -n 2 -G 10
fi

# ---- PyTorch ----------------------------------------------------------------------------------
if [ $have_gpu = 0 ]; then
  row "PyTorch checks" SKIP "$no_gpu"
elif [ $fake = 1 ]; then
  for c in "torch_accl build" "route 2 (accl): ops, CUDA graph" "route 1 (nccl + LD_PRELOAD): ops, CUDA graph" "DDP vs gloo CPU"; do
    row "torch $c" SKIP "--fake: torch's CUDA runtime cannot run on the fake driver (it needs the real driver's entry points)"
  done
elif ! torch_why=$("${PYTHON:-python3}" -c 'import torch' 2>&1); then
  row "PyTorch checks" SKIP "${PYTHON:-python3} cannot import torch ($(echo "$torch_why" | tail -1 | cut -c1-80)); set PYTHON"
elif fits "PyTorch checks" 60; then
  gpu_check_row() { row "$@"; }
  GCT_NO_BENCH=1 BUILD=$build . "$here/scripts/gpu-check-torch.sh"
fi

# ---- speed: every run bounded by seconds ------------------------------------------------------
# speed_run NAME TARGET_US TARGET_BUSBW LAUNCH...: 8 B and up (x4) while --time-budget allows;
# reports the 8 B time and the largest size reached. Targets (issue 41) are checked on a GPU only.
speed_small="" speed_big=""
speed_run() {
  local name=$1 tus=$2 tbw=$3 out rc small big bytes verdict=PASS detail; shift 3
  fits "$name" $(( speed_s + 8 )) || return 1
  local log; log=$logs/$(echo "$name" | tr -c 'a-zA-Z0-9_\n' _)
  out=$(bounded $(( speed_s * 3 + 60 )) "$@" --device -b 8 -e 1G -f 4 -w 2 -n 10 -c 0 --time-budget "$speed_s" 2>"$log.stderr"); rc=$?
  echo "$out" > "$log.log"
  small=$(echo "$out" | first_row | awk '{print $6}')
  bytes=$(echo "$out" | last_row | awk '{print $1}') big=$(echo "$out" | last_row | awk '{print $8}')
  local bigalg; bigalg=$(echo "$out" | last_row | awk '{print $7}')
  speed_small=$small speed_big=$big
  if [ $rc -ne 0 ] || [ -z "$small" ]; then
    row "$name" FAIL "rc=$rc: $(cat "$log.stderr" - <<<"$out" | grep -E 'WARN|failure|error' | head -1 | cut -c1-150)"; return 1
  fi
  detail="8 B: $small us; largest in ${speed_s} s: $bytes B at $bigalg/$big GB/s algbw/busbw"
  if [ -n "$tus" ] && [ $fake = 0 ]; then
    detail+=" (targets: 8 B <= $tus us${tbw:+, busbw >= $tbw GB/s at 1 GiB})"
    awk -v s="$small" -v b="$big" -v ms="$tus" -v mb="${tbw:-0}" -v by="$bytes" \
      'BEGIN {exit !(s <= ms && (mb == 0 || (by >= 1073741824 && b >= mb)))}' || verdict=FAIL
  fi
  row "$name" $verdict "$detail"
}
declare -A tus=([1]="" [2]=15 [4]=20 [8]=30) tbw=([1]="" [2]=600 [4]=450 [8]="")
if [ $have_gpu = 1 ]; then
  for n in 1 2 4 8; do
    speed_run "speed all_reduce -g $n (threads)" "${tus[$n]}" "${tbw[$n]}" "$perf/all_reduce_perf" -g $n
    eval "thr_small_$n=\$speed_small thr_big_$n=\$speed_big"
  done
  speed_run "speed all_gather -g 2 (threads)" "" "" "$perf/all_gather_perf" -g 2
  for n in 2 4; do speed_run "speed all_reduce -np $n (processes)" "" "" "$perf/accl-run" -np $n "$perf/all_reduce_perf" -g 1; done
  if [ -n "$mps_ctl" ] && mps_start; then
    for n in 2 4; do
      speed_run "speed all_reduce -np $n (processes, MPS)" "" "" "$perf/accl-run" -np $n "$perf/all_reduce_perf" -g 1 || continue
      eval "thr=\${thr_small_$n:-}"
      ratio=$(awk -v p="$speed_small" -v t="${thr:-0}" 'BEGIN {printf "%.2f", (t > 0 ? p / t : 0)}')
      verdict=$(awk -v r="$ratio" -v f=$fake 'BEGIN {print (f || (r > 0 && r <= 1.3)) ? "PASS" : "FAIL"}')
      row "  MPS processes vs threads, $n ranks" "$verdict" "8 B: $speed_small us against ${thr:-?} us, ${ratio}x (target <= 1.3x)"
    done
    mps_stop
  else
    row "speed all_reduce -np 2/4 (processes, MPS)" SKIP "${mps_ctl:+nvidia-cuda-mps-control -d failed}${mps_ctl:-no nvidia-cuda-mps-control on PATH}"
  fi
  one_small=${thr_small_1:-}
  CUDA_DEVICE_MAX_CONNECTIONS=1 speed_run "speed all_reduce -g 1, CUDA_DEVICE_MAX_CONNECTIONS=1" "" "" "$perf/all_reduce_perf" -g 1 &&
    row "  one hardware queue vs eight, 1 rank" "$(awk -v a="$speed_small" -v b="${one_small:-0}" -v f=$fake 'BEGIN {print (f || (b > 0 && a <= 1.2 * b)) ? "PASS" : "FAIL"}')" \
        "8 B: $speed_small us against $one_small us (target <= 1.2x)"
  # Ours against NVIDIA's NCCL, same binary, same run: 1 rank, 8 B and 256 MiB, interleaved.
  if [ -n "$nt_bin" ]; then
    sizes=(-b 8 -e 256M -f 33554432 -w 2 -n 10 -c 0)
    [ $fake = 1 ] && sizes=(-b 8 -e 1M -f 131072 -w 1 -n 2 -c 0)
    nt_run "speed nccl-tests all_reduce -g 1, ours$nt_note" 1 "$lib" "$nt_bin/all_reduce_perf" "${sizes[@]}"
    os=$nt_small ob=$nt_big
    nt_run "speed nccl-tests all_reduce -g 1, NVIDIA NCCL$nt_note" 1 "" "$nt_bin/all_reduce_perf" "${sizes[@]}"
    ns=$nt_small nb=$nt_big
    if [ -n "$os" ] && [ -n "$ns" ]; then
      big_label=$([ $fake = 1 ] && echo "1 MiB" || echo "256 MiB")
      cmp_table=$(awk -v os="$os" -v ob="$ob" -v ns="$ns" -v nb="$nb" -v big="$big_label" 'BEGIN {
        printf "| 1 rank, nccl-tests all_reduce | NVIDIA NCCL | ours | ours / NCCL | target |\n|---|--:|--:|--:|--|\n";
        printf "| 8 B time (us) | %s | %s | %.2fx | <= 1.2x |\n", ns, os, os / ns;
        printf "| %s algbw (GB/s) | %s | %s | %.0f%% | >= 90%% |\n", big, nb, ob, (nb > 0 ? 100 * ob / nb : 0) }')
      verdict=$(awk -v os="$os" -v ob="$ob" -v ns="$ns" -v nb="$nb" -v f=$fake 'BEGIN {print (f || (os <= 1.2 * ns && ob >= 0.9 * nb)) ? "PASS" : "FAIL"}')
      row "  speed all_reduce 1 rank vs NVIDIA NCCL" "$verdict" "8 B: $os vs $ns us; big: $ob vs $nb GB/s algbw"
    fi
  fi
else
  row "speed rows" SKIP "$no_gpu"
fi
finish
