#!/bin/bash
# netns_test.sh <build dir>: multi-host behaviour on one machine. Two pods, each with eth0 and
# hpn0; for each NCCL_SOCKET_IFNAME setting (1 and 2 ranks per pod) checks which interface
# carried the bulk of an all-reduce, that a missing name fails at once and clearly, and that
# taking hpn0 down mid-run makes every rank fail within 10 s naming the interface and peer.
# Exit 77 (skipped) where namespaces cannot be created.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: netns_test.sh <build dir>}" && pwd)
PERF="$BUILD/perf/all_reduce_perf"
. "$HERE/pods.sh"
. "$HERE/run_world.sh"

why=$(pods_unavailable)
if [ -n "$why" ]; then
  echo "SKIP: $why"
  exit 77
fi
[ -x "$PERF" ] || { echo "FAIL: $PERF not built"; exit 1; }
LOGS=$(mktemp -d /tmp/accl-netns.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 || { echo "FAIL: could not build the pods"; exit 1; }

FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
show_logs() { tail -n 5 "$1"/rank*.log | sed 's/^/    /'; }

tx_total() {  # tx bytes of interface $1 summed over the pods
  local i sum=0
  for i in $(seq 0 $((POD_COUNT - 1))); do sum=$((sum + $(pod_tx_bytes "$i" "$1"))); done
  echo $sum
}

printf '%-22s %-9s %10s %10s  %-8s %-8s %s\n' "NCCL_SOCKET_IFNAME" "rank/pod" "eth0 MB" "hpn0 MB" "carrier" "expected" "result"
# traffic_case <label> <ifname value or UNSET> <ranks per pod> <expected interface>
traffic_case() {
  local label=$1 value=$2 per_pod=$3 want=$4
  local dir="$LOGS/$label.$per_pod" envs=()
  [ "$value" != UNSET ] && envs=(NCCL_SOCKET_IFNAME="$value")
  local eth0=$(tx_total eth0) hpn0=$(tx_total hpn0)
  run_world "$per_pod" "$dir" 30 "${envs[@]}" -- "$PERF" -b 8M -e 8M -n 2 -w 1 -c 1
  if ! wait_world; then
    fail "$label, $per_pod rank(s)/pod: the all-reduce failed"
    show_logs "$dir"
    return
  fi
  eth0=$(( ($(tx_total eth0) - eth0) / 1000000 ))
  hpn0=$(( ($(tx_total hpn0) - hpn0) / 1000000 ))
  local carrier=eth0
  [ $hpn0 -gt $eth0 ] && carrier=hpn0
  local result=PASS
  if [ "$carrier" != "$want" ] || [ $((eth0 + hpn0)) -lt 20 ]; then
    result=FAIL
    fail "$label, $per_pod rank(s)/pod: bulk went over $carrier (eth0 $eth0 MB, hpn0 $hpn0 MB), expected $want"
  fi
  printf '%-22s %-9s %10s %10s  %-8s %-8s %s\n' "$label" "$per_pod" "$eth0" "$hpn0" "$carrier" "$want" "$result"
}

for per_pod in 1 2; do
  traffic_case "unset" UNSET "$per_pod" hpn0
  traffic_case "=eth0" "=eth0" "$per_pod" eth0
  # "^hpn" alone also admits lo, which getifaddrs lists first and NCCL takes; ACCL skips it
  # because the rendezvous (rank 0's eth0) is not loopback, so the job spans hosts.
  traffic_case "^hpn,lo" "^hpn,lo" "$per_pod" eth0
  traffic_case "^hpn" "^hpn" "$per_pod" eth0
  traffic_case "eth" "eth" "$per_pod" eth0
done

# A name that matches nothing: every rank fails at once, and says what exists.
dir="$LOGS/missing"
start=$(date +%s)
run_world 1 "$dir" 30 NCCL_SOCKET_IFNAME==ib9 -- "$PERF" -b 1M -e 1M -n 1 -w 0
if wait_world; then
  fail "NCCL_SOCKET_IFNAME==ib9 did not fail"
fi
took=$(($(date +%s) - start))
for log in "$dir"/rank*.log; do
  grep -q "NCCL_SOCKET_IFNAME==ib9 matches no usable interface; interfaces present: .*eth0.*hpn0" "$log" ||
    { fail "missing-name error not clear in $log:"; sed 's/^/    /' "$log" | head -n 8; }
done
[ "$took" -le 10 ] || fail "missing-name error took ${took}s (want immediate)"
printf '%-22s %-9s %10s %10s  %-8s %-8s %s\n' "=ib9 (missing)" "1" "-" "-" "-" "error" \
  "error after ${took}s: $(grep -ho 'NCCL_SOCKET_IFNAME.*' "$dir/rank0.log" | head -n 1)"

# hpn0 taken down in pod 1 while an all-reduce loop runs: every rank errors within 10 s.
dir="$LOGS/linkdown"
run_world 1 "$dir" 30 NCCL_DEBUG=WARN -- "$PERF" -b 64M -e 64M -n 100000 -w 1 -c 0
sleep 4
ip -n "$(pod 1)" link set hpn0 down
down=$(date +%s)
if wait_world; then fail "hpn0 down: the run did not fail"; fi
took=$(($(date +%s) - down))
[ "$took" -le 10 ] || fail "hpn0 down: ranks took ${took}s to fail (want <= 10)"
for log in "$dir"/rank*.log; do
  grep -q "rank [0-9]* (host pod[0-9], [0-9.:]*, interface hpn0)" "$log" ||
    { fail "hpn0 down: $log does not name the peer and interface:"; sed 's/^/    /' "$log" | tail -n 8; }
done
echo "hpn0 down in pod1: all ranks failed after ${took}s:"
grep -h "socket connection to rank" "$dir"/rank*.log | sed 's/^/    /' | head -n 4

[ $FAILURES -eq 0 ] && echo "PASS" || echo "$FAILURES failure(s)"
[ $FAILURES -eq 0 ]
