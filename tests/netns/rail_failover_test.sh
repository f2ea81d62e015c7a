#!/bin/bash
# rail_failover_test.sh <build dir>: two pods with two rails each (hpn0, hpn1). While an
# all-reduce loop runs (4 MiB, every cycle checked against the expected sums):
#   * linkdown: `ip link set hpn1 down` in pod 1, later up again;
#   * drop: pod 1's hpn1 port taken off its bridge (packets vanish silently, carrier stays up),
#     later put back;
# every rank keeps running, every checked result is exact, a WARN names the rail and the peer,
# the loop goes on after the failure, and once the rail is back it carries traffic again.
#   * bothdown: hpn0 and hpn1 down in pod 1: every rank fails within 10 s naming interface and peer,
#     and the error a program gets (ncclGetLastError) says every rail is lost.
# REPEAT=n (default 1) runs each failover case n times; KEEP_FAILED=<dir> keeps the logs of a
# failed run there. Exit 77 (skipped) without namespaces.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: rail_failover_test.sh <build dir>}" && pwd)
PERF="$BUILD/perf/all_reduce_perf"
HPN_RATE="${HPN_RATE:-2gbit}"
REPEAT="${REPEAT:-1}"
. "$HERE/pods.sh"
. "$HERE/run_world.sh"

why=$(pods_unavailable)
if [ -n "$why" ]; then
  echo "SKIP: $why"
  exit 77
fi
[ -x "$PERF" ] || { echo "FAIL: $PERF not built"; exit 1; }
LOGS=$(mktemp -d /tmp/accl-railfo.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 && pods_add_rail || { echo "FAIL: could not build the pods"; exit 1; }

FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
rows() { grep -cE '^ +4194304 ' "$1/rank0.log"; }
# Waits for every rank; CODES: their exit statuses (124: still running when its time was up).
world_status() {
  local pid rc
  CODES=""
  for pid in "${WORLD_PIDS[@]}"; do wait "$pid"; rc=$?; CODES="$CODES $rc"; done
}
# Ends a loop that must still be running: ALIVE lists, per rank, "up" or the exit status it
# already had, then every rank is stopped. Stopping them ourselves, all at the same moment
# after the check, rather than letting each one's time limit end it: the limits of two ranks
# run out a few ms apart, and the second rank could see the first one's out-of-band
# connection close and exit with its own error before its limit came (accl-perf: "lost its
# out-of-band connection", exit 3), which is the end of the test, not a failure.
world_stop() {
  local pid rc
  ALIVE=""
  for pid in "${WORLD_PIDS[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then ALIVE="$ALIVE up"; else wait "$pid"; rc=$?; ALIVE="$ALIVE $rc"; fi
  done
  for pid in "${WORLD_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${WORLD_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
}
# WARNs go to their own files (warn.pod<i>.<pid>), the result rows stay whole in rank<r>.log.
ENV=(NCCL_DEBUG=WARN ACCL_RAIL_TIMEOUT=3000 ACCL_RAIL_RETRY_SEC=2)
LOOP=("$PERF" -b 4M -e 4M -n 1 -w 1 -c 1 -N 0)

# failover_case <name> <break command> <repair command>
failover_case() {
  local name=$1 break_cmd=$2 repair_cmd=$3 dir="$LOGS/$1.$4"
  # The time limit only backs up world_stop (a rank that hangs while being stopped).
  run_world 1 "$dir" 60 "${ENV[@]}" NCCL_DEBUG_FILE="$dir/warn.%h.%p" -- "${LOOP[@]}"
  sleep 3
  eval "$break_cmd"
  sleep 7  # lost within ACCL_RAIL_TIMEOUT (3 s), bytes moved to hpn0
  local during=$(rows "$dir")
  eval "$repair_cmd"
  sleep 6  # back within ACCL_RAIL_RETRY_SEC (2 s) plus a connect
  local h1=$(pod_tx_bytes 0 hpn1)
  sleep 3
  h1=$(( ($(pod_tx_bytes 0 hpn1) - h1) / 1000000 ))
  local after=$(rows "$dir") result=PASS why=""
  world_stop
  [ "$ALIVE" = " up up" ] || why="$why; ranks exited early ($ALIVE)"
  # Every whole row: both #wrong columns 0 (the row cut by the time limit is not whole).
  awk '/^ +4194304/ && NF == 13 && ($9 != 0 || $13 != 0) {bad = 1} END {exit bad}' "$dir/rank0.log" ||
    why="$why; wrong results"
  [ "$after" -ge $((during + 2)) ] || why="$why; the loop stalled after the failure ($during rows, then $after)"
  grep -q "rail hpn1 to rank [0-9] (host pod[01], 10.77.3.[0-9]*:[0-9]*, interface hpn1) lost: " "$dir"/warn.* ||
    why="$why; no WARN names the lost rail and the peer"
  grep -q "now on rail hpn0 (was hpn1)" "$dir"/warn.* || why="$why; nothing moved to hpn0"
  grep -q "now on rail hpn1 (was hpn0): its own rail answers again" "$dir"/warn.* ||
    why="$why; nothing moved back to hpn1"
  [ "$h1" -ge 5 ] || why="$why; hpn1 carried $h1 MB after it came back"
  if [ -n "$why" ]; then
    result=FAIL
    fail "$name run $4${why}"
    [ -n "${KEEP_FAILED:-}" ] && cp -r "$dir" "$KEEP_FAILED/" 2>/dev/null
    cat "$dir"/warn.* | head -n 12 | sed 's/^/    /'
    tail -n 3 "$dir"/rank*.log | sed 's/^/    /'
  fi
  printf '%-9s %4s %6s %6s %10s  %s\n' "$name" "$4" "$during" "$after" "$h1" "$result"
}

printf '%-9s %4s %6s %6s %10s  %s\n' "case" "run" "rows@" "rows" "hpn1 MB" "result"
for run in $(seq "$REPEAT"); do
  failover_case linkdown "ip -n $(pod 1) link set hpn1 down" "ip -n $(pod 1) link set hpn1 up" "$run"
done
for run in $(seq "$REPEAT"); do
  failover_case drop "ip -n $SWITCH_NS link set shpn1x1 nomaster" "ip -n $SWITCH_NS link set shpn1x1 master brhpn1" "$run"
done
cat "$LOGS"/linkdown.1/warn.* | head -n 6 | sed 's/^/    /'

# Both rails down: nowhere to go, every rank fails within 10 s naming the interface and peer.
dir="$LOGS/bothdown"
run_world 1 "$dir" 40 "${ENV[@]}" -- "${LOOP[@]}"
sleep 3
ip -n "$(pod 1)" link set hpn1 down
ip -n "$(pod 1)" link set hpn0 down
down=$(date +%s)
world_status
took=$(($(date +%s) - down))
ip -n "$(pod 1)" link set hpn0 up
ip -n "$(pod 1)" link set hpn1 up
case "$CODES " in *" 124 "*|*" 0 "*) fail "both rails down: ranks did not all fail ($CODES)" ;; esac
[ "$took" -le 10 ] || fail "both rails down: ranks took ${took}s to fail (want <= 10)"
for log in "$dir"/rank*.log; do
  grep -q "rank [0-9]* (host pod[0-9], [0-9.:]*, interface hpn[01])" "$log" ||
    { fail "both rails down: $log does not name the peer and interface:"; tail -n 6 "$log" | sed 's/^/    /'; }
done
# The error the program gets (its failure line: the result code and ncclGetLastError) says why,
# not only the log: the rank that tried every rail says so (issue 43: it was generic).
grep -h "Test .* failure" "$dir"/rank*.log | grep -q "every rail (hpn0, hpn1) is lost" ||
  { fail "both rails down: no rank's error says every rail is lost:"; grep -h "Test .* failure" "$dir"/rank*.log | sed 's/^/    /'; }
echo "both rails down in pod1: all ranks failed after ${took}s:"
grep -h "Test .* failure" "$dir"/rank*.log | sed 's/^/    /'

grep -h "failed: " "$dir"/rank*.log | sed 's/^/    /' | head -n 4

[ $FAILURES -eq 0 ] && echo "PASS" || echo "$FAILURES failure(s)"
[ $FAILURES -eq 0 ]
