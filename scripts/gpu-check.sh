#!/usr/bin/env bash
# gpu-check.sh: one command to check ACCL on a machine with a GPU (docs/gpu.md).
#   scripts/gpu-check.sh [build-dir]        (default build-gpu)
# 1. Builds (Release, ninja, only the present GPU's arch).
# 2. Runs the GPU tests (ctest -L gpu).
# 3. Runs our all_reduce_perf and all_gather_perf on device buffers (--device) with 1, 2 and 4
#    ranks on the GPU, as threads of one process (-g N) and as processes (accl-run -np N): a
#    checked sweep up to 16 MiB, then the speed run (8 B and 1 GiB, unchecked) with the issue 10
#    targets for 2 and 4 ranks as threads; and a checked all_reduce sweep in CUDA-graph mode
#    (-G 10) with 1 and 2 ranks.
# 4. With NCCL_TESTS_DIR (a checkout of NVIDIA's nccl-tests): builds it against NVIDIA's nccl.h
#    (MPI=1 when mpirun exists) and runs all_reduce, all_gather, reduce_scatter, broadcast,
#    reduce, alltoall and sendrecv on our library (LD_PRELOAD) with 1 rank, and with 2 and 4
#    processes on GPU 0 (mpirun, NCCL_TESTS_DEVICE=0); all_reduce -g 1 also on NVIDIA's NCCL, the
#    reference for the 1-rank speed targets.
# 5. The PyTorch checks of scripts/gpu-check-torch.sh (sourced; it gets BUILD and gpu_check_row).
# Prints one summary table; exits non-zero when a row failed. Without a GPU only the build,
# the backend row and small host-buffer perf runs happen; every GPU row says SKIP and why.
# Env: NCCL_TESTS_DIR, NVIDIA_NCCL_HOME (NVIDIA's include/nccl.h + lib/libnccl.so.2; default:
# the pip package nvidia-nccl), MPI_HOME (default /usr/lib/x86_64-linux-gnu/openmpi),
# GTEST_PREFIX (a prefix holding GTest's CMake config, e.g. a dpkg -x'd libgtest-dev),
# GPU_CHECK_SPEED_BYTES (the large size of the speed runs in bytes, a multiple of 8; default
# 1073741824: the targets are for 1 GiB).
# A GPU is what libcuda.so.1 reports (cuDeviceGetCount), so a fake driver on LD_LIBRARY_PATH
# counts as one; nvidia-smi, when present, names it.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-gpu}
mpi_home=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
jobs=$(nproc)
start=$(date +%s)
logs=$build/gpu-check  # every log of this script (inside the build dir: the checkout stays clean)
mkdir -p "$logs" || exit 1
declare -A seconds=()  # time spent per part, for the time row
declare -a rows=()
failed=0

# row NAME RESULT DETAIL  (RESULT: PASS, FAIL, SKIP)
row() {
  rows+=("$1"$'\t'"$2"$'\t'"$3")
  [ "$2" = FAIL ] && failed=1
  echo "== $1: $2 $3"
}
# The summary table, its first column as wide as the longest check name.
print_rows() {
  local r name result detail width=5
  for r in "${rows[@]}"; do
    name=${r%%$'\t'*}
    [ ${#name} -gt $width ] && width=${#name}
  done
  printf "%-${width}s %-6s %s\n" CHECK RESULT DETAIL
  for r in "${rows[@]}"; do
    IFS=$'\t' read -r name result detail <<<"$r"
    printf "%-${width}s %-6s %s\n" "$name" "$result" "$detail"
  done
}
have_mpirun() { [ -x "$mpi_home/bin/mpirun" ] || command -v mpirun >/dev/null; }
mpirun_bin() { if [ -x "$mpi_home/bin/mpirun" ]; then echo "$mpi_home/bin/mpirun"; else command -v mpirun; fi; }

# ---- the machine --------------------------------------------------------------------------
# What the driver says: "<devices> <major><minor>", or "0 <why>".
driver_probe() {
  python3 - <<'EOF' 2>/dev/null || echo "0 python3 cannot ask the driver"
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
read -r ndev cap_or_why <<<"$(driver_probe)"
if [ "${ndev:-0}" -gt 0 ] 2>/dev/null; then
  have_gpu=1 cap=$cap_or_why
  name=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  row "GPU" PASS "$ndev device(s), sm_$cap${name:+, $name}${name:- (no nvidia-smi: a fake or containerised driver?)}"
else
  have_gpu=0 cap=""
  no_gpu="no GPU: ${cap_or_why:-driver probe failed}"
  row "GPU" SKIP "$no_gpu; only the host parts below run"
fi

# ---- build --------------------------------------------------------------------------------
cmake_args=(-S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release)
[ -n "$cap" ] && cmake_args+=(-DACCL_CUDA_ARCHS="$cap")
[ -n "${GTEST_PREFIX:-}" ] && cmake_args+=(-DCMAKE_PREFIX_PATH="$GTEST_PREFIX")
t0=$(date +%s)
if ! cmake "${cmake_args[@]}" > "$logs/configure.log" 2>&1; then
  tail -30 "$logs/configure.log"
  hint=""
  grep -qi "gtest" "$logs/configure.log" && hint=" (no GTest? set GTEST_PREFIX)"
  row "build (Release, ninja)" FAIL "configure failed: see $logs/configure.log$hint"
  print_rows
  exit 1
fi
if ninja -C "$build" -j "$jobs" > "$logs/build.log" 2>&1; then
  row "build (Release, ninja${cap:+, sm_$cap only})" PASS "$(( $(date +%s) - t0 )) s"
else
  grep -A12 -m3 "FAILED:" "$logs/build.log" | tail -30
  row "build (Release, ninja)" FAIL "see $logs/build.log"
  print_rows
  exit 1
fi
seconds[build]=$(( $(date +%s) - t0 ))
lib=$build/lib/libnccl.so.2
perf=$build/perf

# ---- GPU tests ----------------------------------------------------------------------------
if [ $have_gpu = 0 ]; then
  row "GPU tests (ctest -L gpu)" SKIP "$no_gpu (make test runs them; they skip there)"
elif ctest --test-dir "$build" -N -L '^gpu$' 2>/dev/null | grep -q "Total Tests: [1-9]"; then
  t0=$(date +%s)
  if ctest --test-dir "$build" -L '^gpu$' -j 4 --output-on-failure > "$logs/gpu-tests.log" 2>&1; then
    row "GPU tests (ctest -L gpu)" PASS "$(grep -Eo 'tests passed, .*' "$logs/gpu-tests.log" | head -1), $(( $(date +%s) - t0 )) s"
  else
    row "GPU tests (ctest -L gpu)" FAIL "$(grep -Eo 'tests passed, .*' "$logs/gpu-tests.log" | head -1); see $logs/gpu-tests.log"
  fi
  seconds[gpu-tests]=$(( $(date +%s) - t0 ))
else
  row "GPU tests (ctest -L gpu)" FAIL "this build has no GPU tests (CUDA backend not landed?)"
fi
backend=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$perf/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 2>&1 |
          grep -Eo '(host|CUDA) backend[^"]*' | head -1)
row "backend chosen" PASS "${backend:-unknown}"

# ---- our perf harness ---------------------------------------------------------------------
# perf_row NAME LAUNCH... -- ARGS: runs one checked sweep; PASS when rc 0, no #wrong, and (on a
# GPU) the table says device buffers.
first_row() { awk '/^ +[0-9]/ && $1 > 0 {print; exit}'; }  # all-gather's 8 B row is 0 B with n > 1
last_row() { awk '/^ +[0-9]/ {r = $0} END {print r}'; }
perf_check() {  # NAME OUTPUT RC; returns 1 on FAIL
  local name=$1 out=$2 rc=$3 wrong kind buffers small big
  wrong=$(echo "$out" | awk '/^ +[0-9]/ && ($9 != 0 || $13 != 0) {n++} END {print n+0}')
  kind=$(echo "$out" | sed -n 's/^# Buffers: \([a-z]*\) memory.*/\1/p' | head -1)
  if [ -n "$kind" ]; then buffers="$kind buffers"; else buffers="no '# Buffers:' line"; fi
  small=$(echo "$out" | first_row | awk '{print $1 " B: " $6 " us"}')
  big=$(echo "$out" | last_row | awk '{print $1 " B: " $7 "/" $8 " GB/s algbw/busbw"}')
  if [ "$rc" -eq 0 ] && [ "$wrong" = 0 ] && { [ $have_gpu = 0 ] || [ "$kind" = device ]; }; then
    row "$name" PASS "$buffers, #wrong 0; $small, $big"
  else
    row "$name" FAIL "rc=$rc, rows with #wrong: $wrong, $buffers: $(echo "$out" | grep -E 'WARN|failure|honoured' | head -1 | cut -c1-150)"
    return 1
  fi
}
# speed_row NAME OUTPUT RC MAX_SMALL_US MIN_BIG_BUSBW (targets empty: report only)
speed_row() {
  local name=$1 out=$2 rc=$3 small big bigalg verdict=PASS
  small=$(echo "$out" | first_row | awk '{print $6}')
  big=$(echo "$out" | last_row | awk '{print $8}')
  bigalg=$(echo "$out" | last_row | awk '{print $7}')
  if [ "$rc" -ne 0 ] || [ -z "$small" ] || [ -z "$big" ]; then
    row "$name" FAIL "rc=$rc: $(echo "$out" | grep -E 'WARN|failure' | head -1 | cut -c1-150)"
    return
  fi
  local detail
  detail="$(echo "$out" | first_row | awk '{print $1}') B: $small us, $speed_bytes B: $bigalg/$big GB/s algbw/busbw"
  if [ -n "${4:-}" ]; then
    detail+=" (targets: <= $4 us, >= $5 GB/s)"
    awk -v s="$small" -v b="$big" -v ms="$4" -v mb="$5" 'BEGIN {exit !(s <= ms && b >= mb)}' || verdict=FAIL
  fi
  row "$name" $verdict "$detail"
}
if [ $have_gpu = 1 ]; then
  mode=--device check_sizes=(-b 8 -e 16M -f 8) label="device buffers"
else
  mode=--host check_sizes=(-b 8 -e 1M -f 8) label="host buffers"
fi
t0=$(date +%s)
declare -A target_us=([2]=20 [4]=20) target_bw=([2]=535 [4]=400)  # issue 10, ranks as threads
speed_bytes=${GPU_CHECK_SPEED_BYTES:-1073741824}
for coll in all_reduce all_gather; do
  for n in 1 2 4; do
    for how in threads processes; do
      [ "$n" = 1 ] && [ $how = processes ] && continue  # the same run
      if [ $how = threads ]; then launch=("$perf/${coll}_perf") g=$n what="-g $n"
      else launch=("$perf/accl-run" -np "$n" "$perf/${coll}_perf") g=1 what="-np $n"
      fi
      out=$(timeout 300 "${launch[@]}" $mode -g "$g" "${check_sizes[@]}" -c 1 2>&1)
      perf_check "${coll}_perf $what ($label)" "$out" $? || continue  # no speed without correctness
      [ $have_gpu = 0 ] && continue
      # The smallest size that moves data: 8 B for all-reduce, 16 B per rank for all-gather.
      b=8 && [ $coll = all_gather ] && b=$((16 * n))
      out=$(timeout 300 "${launch[@]}" $mode -g "$g" -b $b -e "$speed_bytes" -f $((speed_bytes / b)) -c 0 -w 5 -n 20 2>&1)
      rc=$?
      if [ $coll = all_reduce ] && [ $how = threads ] && [ "$n" -gt 1 ] && [ "$speed_bytes" = 1073741824 ]; then
        speed_row "  speed ${coll} $what" "$out" $rc "${target_us[$n]}" "${target_bw[$n]}"
      else
        speed_row "  speed ${coll} $what" "$out" $rc
      fi
    done
  done
done
[ $have_gpu = 0 ] && row "perf on device buffers (1/2/4 ranks)" SKIP "$no_gpu"
# CUDA-graph mode (-G, as nccl-tests): the timed iterations captured once per rank stream and
# launched 10 times, the checked call launched as a graph too; 1 and 2 ranks as threads.
if [ $have_gpu = 1 ]; then
  for n in 1 2; do
    out=$(timeout 120 "$perf/all_reduce_perf" --device -g "$n" -b 8 -e 16M -f 8 -c 1 -n 10 -G 10 2>&1)
    rc=$?
    if ! echo "$out" | grep -q "graph: 10"; then
      row "all_reduce_perf -g $n -G 10 (CUDA graph)" FAIL "rc=$rc, graph mode not on: $(echo "$out" | grep -E '^# .*-G|failure' | head -1 | cut -c1-150)"
    else
      perf_check "all_reduce_perf -g $n -G 10 (CUDA graph)" "$out" $rc
    fi
  done
else
  row "all_reduce_perf -G (CUDA graph, 1/2 ranks)" SKIP "$no_gpu"
fi
seconds[perf]=$(( $(date +%s) - t0 ))

# ---- NVIDIA's nccl-tests on our library ------------------------------------------------------
t0=$(date +%s)
nv_home=${NVIDIA_NCCL_HOME:-$(python3 -c 'import nvidia.nccl as n; print(n.__path__[0])' 2>/dev/null)}
if [ $have_gpu = 0 ]; then
  row "nccl-tests (NVIDIA's)" SKIP "$no_gpu"
elif [ -z "${NCCL_TESTS_DIR:-}" ]; then
  row "nccl-tests (NVIDIA's)" SKIP "NCCL_TESTS_DIR is not set"
elif [ -z "$nv_home" ] || [ ! -f "$nv_home/include/nccl.h" ]; then
  row "nccl-tests (NVIDIA's)" SKIP "NVIDIA's nccl.h not found: set NVIDIA_NCCL_HOME"
else
  # Built against NVIDIA's header and library (as users have it), run with ours preloaded.
  # One MPI build serves both: without mpirun it runs as a single process.
  nt=$build/nccl-tests
  mkdir -p "$nt/nvhome/lib" && ln -sfn "$nv_home/include" "$nt/nvhome/include" &&
    ln -sf "$nv_home/lib/libnccl.so.2" "$nt/nvhome/lib/libnccl.so"  # the pip package has no libnccl.so
  mpi_args=() mpi_note="without MPI"
  have_mpirun && mpi_args=(MPI=1 MPI_HOME="$mpi_home") mpi_note="MPI=1"
  t0=$(date +%s)
  if make -C "$NCCL_TESTS_DIR/src" -j "$jobs" "${mpi_args[@]}" NCCL_HOME="$nt/nvhome" BUILDDIR="$nt/bin" \
       NVCC_GENCODE="-gencode=arch=compute_${cap},code=sm_${cap}" > "$nt/build.log" 2>&1; then
    row "nccl-tests build (NVIDIA's header, $mpi_note)" PASS "$(( $(date +%s) - t0 )) s"
  else
    row "nccl-tests build (NVIDIA's header, $mpi_note)" FAIL "see $nt/build.log"
  fi
  # NVIDIA's libnccl.so.2 first; the rest of the caller's path stays (the driver may be there).
  nt_libpath=$nv_home/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nt_run() {  # NAME NPROCS BIN [PRELOAD]: one nccl-tests run, -b 8 -e 128M -f 16
    local name=$1 np=$2 bin=$3 preload=${4:-} out rc
    if [ "$np" = 1 ]; then
      out=$(LD_PRELOAD=$preload LD_LIBRARY_PATH="$nt_libpath" timeout 120 "$bin" -b 8 -e 128M -f 16 -g 1 2>&1)
    else
      out=$(NCCL_TESTS_DEVICE=0 timeout 180 "$(mpirun_bin)" --allow-run-as-root --oversubscribe -np "$np" \
              -x LD_PRELOAD="$preload" -x NCCL_TESTS_DEVICE=0 -x LD_LIBRARY_PATH="$nt_libpath" \
              "$bin" -b 8 -e 128M -f 16 -g 1 2>&1)
    fi
    rc=$?
    nt_small=$(echo "$out" | first_row | awk '{print $6}') nt_big=$(echo "$out" | last_row | awk '{print $7}')
    if [ $rc -eq 0 ] && echo "$out" | grep -q 'Out of bounds values : 0 OK'; then
      row "$name" PASS "#wrong 0; $(echo "$out" | first_row | awk '{print $1}') B: $nt_small us, $(echo "$out" | last_row | awk '{print $1}') B: $nt_big GB/s algbw"
    else
      nt_small="" nt_big=""
      row "$name" FAIL "rc=$rc: $(echo "$out" | grep -E 'WARN|failure|Duplicate' | head -1 | cut -c1-150)"
    fi
    echo "$out" > "$nt/$(echo "$name" | tr -c 'a-zA-Z0-9_\n' _).log"
  }
  for t in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    bin=$nt/bin/${t}_perf
    [ -x "$bin" ] || continue
    nt_run "nccl-tests ${t}_perf -g 1" 1 "$bin" "$lib"
    [ $t = all_reduce ] && ours_small=$nt_small ours_big=$nt_big
    if have_mpirun && [ ${#mpi_args[@]} -gt 0 ]; then
      for np in 2 4; do nt_run "nccl-tests ${t}_perf mpirun -np $np, GPU 0" "$np" "$bin" "$lib"; done
    fi
  done
  [ ${#mpi_args[@]} -eq 0 ] && row "nccl-tests, 2 and 4 processes" SKIP "no mpirun (set MPI_HOME)"
  # The reference: NVIDIA's NCCL itself, same binary, same machine, same run.
  if [ -x "$nt/bin/all_reduce_perf" ]; then
    nt_run "  reference: NVIDIA NCCL all_reduce -g 1" 1 "$nt/bin/all_reduce_perf"
    # issue 10, 1 rank: 8 B within 1.5x of NCCL's time, 128 MiB algbw >= 90% of NCCL's.
    if [ -n "${ours_small:-}" ] && [ -n "$nt_small" ]; then
      verdict=$(awk -v os="$ours_small" -v ob="$ours_big" -v ns="$nt_small" -v nb="$nt_big" \
        'BEGIN {printf "%s 8 B: %.2fx NCCL time (target <= 1.5), 128 MiB: %.0f%% of NCCL algbw (target >= 90)", \
                (os <= 1.5 * ns && ob >= 0.9 * nb) ? "PASS" : "FAIL", os / ns, 100 * ob / nb}')
      row "  speed all_reduce 1 rank vs NVIDIA NCCL" "${verdict%% *}" "${verdict#* }"
    else
      row "  speed all_reduce 1 rank vs NVIDIA NCCL" FAIL "a run above failed"
    fi
  fi
fi

seconds[nccl-tests]=$(( $(date +%s) - t0 ))

# ---- PyTorch (torch_accl helper) ----------------------------------------------------------
t0=$(date +%s)
if [ $have_gpu = 0 ]; then
  row "PyTorch checks" SKIP "$no_gpu"
elif ! torch_why=$("${PYTHON:-python3}" -c 'import torch' 2>&1); then
  # A GPU box without PyTorch is not a failed check: say so and go on (set PYTHON to pick one).
  row "PyTorch checks" SKIP "${PYTHON:-python3} cannot import torch ($(echo "$torch_why" | tail -1 | cut -c1-80)); set PYTHON"
elif [ -f "$here/scripts/gpu-check-torch.sh" ]; then
  # Its rows join this table (gpu_check_row); it builds into our build dir (BUILD).
  gpu_check_row() { row "$@"; }
  # shellcheck source=/dev/null
  BUILD=$build . "$here/scripts/gpu-check-torch.sh"
else
  row "PyTorch checks" SKIP "scripts/gpu-check-torch.sh not present"
fi

seconds[torch]=$(( $(date +%s) - t0 ))

elapsed=$(( $(date +%s) - start ))
spent="build ${seconds[build]:-0} s, GPU tests ${seconds[gpu-tests]:-0} s, perf ${seconds[perf]:-0} s, nccl-tests ${seconds[nccl-tests]:-0} s, torch ${seconds[torch]:-0} s"
if [ $have_gpu = 1 ] && [ $elapsed -gt 360 ]; then
  row "time" FAIL "$elapsed s: over the 6-minute budget ($spent)"
else
  row "time" PASS "$elapsed s ($spent)"
fi
echo
echo "ACCL GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), $elapsed s, ACCL $(git -C "$here" describe --always --dirty 2>/dev/null)"
print_rows
exit $failed
