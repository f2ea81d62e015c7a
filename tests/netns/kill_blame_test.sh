#!/bin/bash
# kill_blame_test.sh <build dir>: two pods with two ranks each; while a HierRing all-reduce loop
# runs (4 MiB, 400 calls between the harness's out-of-band exchanges, so the kill lands inside
# the library's calls), rank 3 (pod 1) is killed with SIGKILL. Every survivor must fail (not
# hang), and the error each program gets (its failure line: the result code and
# ncclGetLastError) must blame rank 3 and no other rank: every "lost peer rank N" and "losing
# rank N" in it names 3 (a rank that passed the news on may be named as the messenger) (issue 43
# item 6: a live rank was blamed in 3 of 10 runs). A survivor may end on its out-of-band connection instead (a rank
# that failed first closes it); at least one must end on the NCCL error.
# REPEAT=n (default 3) runs it n times. Exit 77 (skipped) without namespaces.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: kill_blame_test.sh <build dir>}" && pwd)
PERF="$BUILD/perf/all_reduce_perf"
REPEAT="${REPEAT:-3}"
. "$HERE/pods.sh"
. "$HERE/run_world.sh"

why=$(pods_unavailable)
if [ -n "$why" ]; then
  echo "SKIP: $why"
  exit 77
fi
[ -x "$PERF" ] || { echo "FAIL: $PERF not built"; exit 1; }
LOGS=$(mktemp -d /tmp/accl-killblame.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 || { echo "FAIL: could not build the pods"; exit 1; }

VICTIM=3
FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }

# The perf process (not its timeout/netns wrappers) whose environment says RANK=$1.
rank_pid() {
  local p
  for p in $(pgrep -f "$PERF"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$1" && [ "$(cat /proc/$p/comm)" = all_reduce_perf ] &&
      { echo "$p"; return; }
  done
}

for run in $(seq "$REPEAT"); do
  dir="$LOGS/run$run"
  run_world 2 "$dir" 40 NCCL_DEBUG=WARN NCCL_ALGO=HierRing -- "$PERF" -b 4M -e 4M -n 400 -w 1 -c 0 -N 0
  sleep 3
  victim=$(rank_pid $VICTIM)
  [ -n "$victim" ] || { fail "run $run: rank $VICTIM's process not found"; wait; continue; }
  kill -KILL "$victim"
  killed=$(date +%s)
  codes=()
  for pid in "${WORLD_PIDS[@]}"; do wait "$pid"; codes+=($?); done
  took=$(($(date +%s) - killed))
  [ "$took" -le 10 ] || fail "run $run: survivors took ${took}s to end (want <= 10)"
  nccl_lines=0
  for r in 0 1 2; do
    [ "${codes[$r]}" = 124 ] && { fail "run $run: rank $r hung (killed by its time limit)"; continue; }
    [ "${codes[$r]}" = 0 ] && { fail "run $run: rank $r ended without an error"; continue; }
    line=$(grep -hE "Test (NCCL|CUDA) failure .*(remote|error)" "$dir/rank$r.log" | head -n 1)
    [ -n "$line" ] || continue  # ended on the out-of-band connection
    nccl_lines=$((nccl_lines + 1))
    blamed=$(echo "$line" | grep -oE "(lost peer|losing) rank [0-9]+" | awk '{print $NF}' | sort -u | tr '\n' ' ')
    [ "$blamed" = "$VICTIM " ] || fail "run $run: rank $r's error blames rank(s) '${blamed}', want only $VICTIM: $line"
    echo "run $run rank $r: $(echo "$line" | cut -c1-220)"
  done
  [ "$nccl_lines" -ge 1 ] || { fail "run $run: no survivor ended on an NCCL error"; tail -n 4 "$dir"/rank*.log; }
done

[ $FAILURES -eq 0 ] && echo "PASS" || echo "$FAILURES failure(s)"
[ $FAILURES -eq 0 ]
