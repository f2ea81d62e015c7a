#!/bin/sh
# gpu_check.Rehearsal: scripts/gpu-check.sh --fake on this build, so the GPU check itself is
# tested before a GPU sees it (issue 40). Every row must run (PASS, or SKIP saying why where the
# fake cannot stand in: torch's CUDA runtime), none may FAIL, the summary must end with the
# ours-against-NCCL table, and the logs must come back as one archive.
#   usage: gpu_check_rehearsal.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
PATH=$src/tests/gpu/fake_mps:$PATH GPU_CHECK_SPEED_SECONDS=1 \
  bash "$src/scripts/gpu-check.sh" --fake --build-dir "$build" --out "$out" > "$out/run.log" 2>&1
rc=$?
cat "$out/run.log"
fail() { echo "REHEARSAL FAILED: $*"; exit 1; }
[ $rc -eq 0 ] || fail "gpu-check.sh --fake exited $rc"
for r in "build (" "GPU: PASS" "GPU tests (ctest -L gpu): PASS" \
         "check all_reduce_perf -g 1 (threads): PASS" "check all_reduce_perf -g 4 (threads): PASS" \
         "check sendrecv_perf -g 2 (threads): PASS" "check all_reduce_perf -np 2 (processes): PASS" \
         "check all_reduce_perf -np 2 (processes, MPS): PASS" "check all_reduce_perf -g 2 -G 10 (CUDA graph): PASS" \
         "nccl-tests alltoall_perf -g 1" "nccl-tests all_reduce_perf mpirun -np 2" "torch DDP vs gloo CPU: SKIP" \
         "speed all_reduce -g 8 (threads): PASS" "speed all_reduce -np 4 (processes, MPS): PASS" \
         "one hardware queue vs eight, 1 rank: PASS" "speed all_reduce 1 rank vs NVIDIA NCCL: PASS" "time: PASS"; do
  grep -qF "$r" "$out/run.log" || fail "no row '$r'"
done
grep -q '^== \[ *[0-9]* s\]' "$out/run.log" || fail "rows carry no running time"
grep -q ': FAIL' "$out/run.log" && fail "a row failed"
grep -q '| 8 B time (us) |' "$out/run.log" || fail "no ours-against-NCCL table"
tar tzf "$out/gpu-check-logs.tar.gz" | grep -q 'gpu-check/summary.txt' || fail "no summary in the log archive"
echo "REHEARSAL OK: $(grep -c '^== \[' "$out/run.log") rows, $(sed -n 's/.*, \([0-9]*\) s, ACCL .*/\1/p' "$out/run.log" | head -1) s"
