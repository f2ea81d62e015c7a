#!/usr/bin/env bash
# gpu-check.sh: one command to check ACCL on a machine with a GPU (docs/gpu.md).
#   scripts/gpu-check.sh [build-dir]        (default build-gpu)
# Builds (Release, ninja, only this GPU's arch), runs the GPU tests, runs our all_reduce_perf
# and all_gather_perf with 1, 2 and 4 ranks, and, when NCCL_TESTS_DIR points at a checkout of
# NVIDIA's nccl-tests, builds it against NVIDIA's nccl.h and runs it on our library (one
# process with -g 1, then MPI mode with NCCL_TESTS_DEVICE=0: every process on GPU 0).
# Prints one summary table; exits non-zero when a row failed.
# Env: NCCL_TESTS_DIR, NVIDIA_NCCL_HOME (NVIDIA's include/nccl.h + lib/libnccl.so.2; default:
# the pip package nvidia-nccl), MPI_HOME (default /usr/lib/x86_64-linux-gnu/openmpi),
# GTEST_PREFIX (a prefix holding GTest's CMake config, e.g. a dpkg -x'd libgtest-dev).
# PyTorch checks live in scripts/gpu-check-torch.sh, sourced when present (BUILD and
# gpu_check_row NAME RESULT DETAIL are set for it).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-gpu}
mpi_home=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
jobs=$(nproc)
start=$(date +%s)
declare -a rows=()
failed=0

# row NAME RESULT DETAIL  (RESULT: PASS, FAIL, SKIP)
row() {
  rows+=("$(printf '%-44s %-5s %s' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && failed=1
  echo "== $1: $2 $3"
}
log() { echo "-- $*"; }

# ---- the machine --------------------------------------------------------------------------
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | head -1)
  cap=$(echo "$gpu" | awk -F', ' '{print $2}' | tr -d .)
  row "GPU" PASS "$gpu"
else
  gpu="" cap=""
  row "GPU" SKIP "nvidia-smi sees no GPU: only the host parts below run"
fi

# ---- build --------------------------------------------------------------------------------
cmake_args=(-S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release)
[ -n "$cap" ] && cmake_args+=(-DACCL_CUDA_ARCHS="$cap")
[ -n "${GTEST_PREFIX:-}" ] && cmake_args+=(-DCMAKE_PREFIX_PATH="$GTEST_PREFIX")
t0=$(date +%s)
if cmake "${cmake_args[@]}" > "$build.configure.log" 2>&1 &&
   ninja -C "$build" -j "$jobs" > "$build.build.log" 2>&1; then
  row "build (Release, ninja)" PASS "$(( $(date +%s) - t0 )) s"
else
  tail -30 "$build.configure.log" "$build.build.log" 2>/dev/null
  row "build (Release, ninja)" FAIL "see $build.build.log (no GTest? set GTEST_PREFIX)"
  printf '%s\n' "${rows[@]}"
  exit 1
fi
lib=$build/lib/libnccl.so.2

# ---- GPU tests (they skip with a reason where no GPU is usable) ------------------------------
if ctest --test-dir "$build" -N -L gpu 2>/dev/null | grep -q "Total Tests: [1-9]"; then
  if ctest --test-dir "$build" -L gpu -j 4 --output-on-failure > "$build.gpu-tests.log" 2>&1; then
    row "GPU tests (ctest -L gpu)" PASS "$(grep -Eo '[0-9]+ tests passed.*' "$build.gpu-tests.log" | head -1)"
  else
    row "GPU tests (ctest -L gpu)" FAIL "see $build.gpu-tests.log"
  fi
else
  row "GPU tests (ctest -L gpu)" SKIP "no GPU tests in this build yet (CUDA backend not landed)"
fi
backend=$(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT "$build/perf/all_reduce_perf" -b 8 -e 8 -n 1 -w 0 2>&1 |
          grep -Eo '(host|CUDA) backend[^"]*' | head -1)
row "backend chosen" PASS "${backend:-unknown}"

# ---- our perf harness ---------------------------------------------------------------------
# Today the harness allocates host buffers (the CUDA backend is not there yet): the figures
# are host-memory figures on this machine, printed so a later run can compare.
for coll in all_reduce all_gather; do
  for np in 1 2 4; do
    out=$("$build/perf/accl-run" -np "$np" "$build/perf/${coll}_perf" -b 8 -e 128M -f 16 2>&1)
    rc=$?
    small=$(echo "$out" | awk '$1 == 8 {print $6 " us"}' | head -1)
    big=$(echo "$out" | awk '$1 == 134217728 {print $8 " GB/s busbw"}' | head -1)
    wrong=$(echo "$out" | awk '/^ +[0-9]/ && ($9 != 0 || $13 != 0) {n++} END {print n+0}')
    if [ $rc -eq 0 ] && [ "$wrong" = 0 ]; then
      row "${coll}_perf -np $np (host buffers)" PASS "8 B: ${small:-?}, 128 MiB: ${big:-?}"
    else
      row "${coll}_perf -np $np (host buffers)" FAIL "rc=$rc, rows with #wrong: $wrong"
    fi
  done
done

# ---- NVIDIA's nccl-tests on our library ------------------------------------------------------
nv_home=${NVIDIA_NCCL_HOME:-$(python3 -c 'import nvidia.nccl as n; print(n.__path__[0])' 2>/dev/null)}
if [ -z "${NCCL_TESTS_DIR:-}" ]; then
  row "nccl-tests (NVIDIA's)" SKIP "NCCL_TESTS_DIR is not set"
elif [ -z "$nv_home" ] || [ ! -f "$nv_home/include/nccl.h" ]; then
  row "nccl-tests (NVIDIA's)" SKIP "NVIDIA's nccl.h not found: set NVIDIA_NCCL_HOME"
else
  # Built against NVIDIA's header and library (as users have it), run with ours preloaded.
  nt=$build/nccl-tests
  mkdir -p "$nt/nvhome/lib" && ln -sfn "$nv_home/include" "$nt/nvhome/include" &&
    ln -sf "$nv_home/lib/libnccl.so.2" "$nt/nvhome/lib/libnccl.so"  # the pip package has no libnccl.so
  gencode="-gencode=arch=compute_${cap:-90},code=sm_${cap:-90}"
  t0=$(date +%s)
  if make -C "$NCCL_TESTS_DIR/src" -j "$jobs" NCCL_HOME="$nt/nvhome" BUILDDIR="$nt/single" \
       NVCC_GENCODE="$gencode" > "$nt/build.log" 2>&1; then
    row "nccl-tests build (NVIDIA's header)" PASS "$(( $(date +%s) - t0 )) s"
  else
    row "nccl-tests build (NVIDIA's header)" FAIL "see $nt/build.log"
  fi
  for t in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    bin=$nt/single/${t}_perf
    [ -x "$bin" ] || continue
    out=$(LD_PRELOAD=$lib LD_LIBRARY_PATH="$nv_home/lib" timeout 120 "$bin" -b 8 -e 128M -f 16 -g 1 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && echo "$out" | grep -q 'Out of bounds values : 0 OK'; then
      row "nccl-tests ${t}_perf -g 1" PASS "$(echo "$out" | grep 'Avg bus' | tr -s ' ')"
    else
      row "nccl-tests ${t}_perf -g 1" FAIL "rc=$rc: $(echo "$out" | grep -E 'WARN|failure' | head -1 | cut -c1-120)"
    fi
  done
  if [ -x "$mpi_home/bin/mpirun" ] || command -v mpirun >/dev/null; then
    if make -C "$NCCL_TESTS_DIR/src" -j "$jobs" MPI=1 MPI_HOME="$mpi_home" NAME_SUFFIX=_mpi NCCL_HOME="$nt/nvhome" \
         BUILDDIR="$nt/mpi" NVCC_GENCODE="$gencode" > "$nt/build-mpi.log" 2>&1; then
      for np in 2 4; do
        out=$(NCCL_TESTS_DEVICE=0 timeout 180 mpirun --allow-run-as-root --oversubscribe -np "$np" \
                -x LD_PRELOAD="$lib" -x NCCL_TESTS_DEVICE=0 -x LD_LIBRARY_PATH="$nv_home/lib" \
                "$nt/mpi/all_reduce_perf_mpi" -b 8 -e 128M -f 16 -g 1 2>&1)
        rc=$?
        if [ $rc -eq 0 ] && echo "$out" | grep -q 'Out of bounds values : 0 OK'; then
          row "nccl-tests all_reduce MPI -np $np, GPU 0" PASS "$(echo "$out" | grep 'Avg bus' | tr -s ' ')"
        else
          row "nccl-tests all_reduce MPI -np $np, GPU 0" FAIL "rc=$rc: $(echo "$out" | grep -E 'WARN|failure' | head -1 | cut -c1-120)"
        fi
      done
    else
      row "nccl-tests MPI build" FAIL "see $nt/build-mpi.log"
    fi
  else
    row "nccl-tests MPI mode" SKIP "no mpirun (set MPI_HOME)"
  fi
fi

# ---- PyTorch (torch_accl helper) ----------------------------------------------------------
if [ -f "$here/scripts/gpu-check-torch.sh" ]; then
  # Its rows join this table (gpu_check_row); it builds into our build dir (BUILD).
  gpu_check_row() { row "$@"; }
  # shellcheck source=/dev/null
  BUILD=$build . "$here/scripts/gpu-check-torch.sh"
else
  row "PyTorch checks" SKIP "scripts/gpu-check-torch.sh not present"
fi

echo
echo "ACCL GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(( $(date +%s) - start )) s"
printf '%-44s %-5s %s\n' CHECK RESULT DETAIL
printf '%s\n' "${rows[@]}"
exit $failed
