#!/bin/bash
# rails_test.sh <build dir>: two pods with two rails each (hpn0 and hpn1 on two bridges, each
# shaped to HPN_RATE). An all-reduce between them stripes its bytes over both rails: each
# carries within 20% of half the bytes, and INFO lists the rails per peer. ACCL_SOCKET_RAILS=1
# keeps everything on one rail (rail_failover_test.sh: losing one). Exit 77 (skipped) where
# namespaces cannot be created.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: rails_test.sh <build dir>}" && pwd)
PERF="$BUILD/perf/all_reduce_perf"
HPN_RATE="${HPN_RATE:-2gbit}"
. "$HERE/pods.sh"
. "$HERE/run_world.sh"

why=$(pods_unavailable)
if [ -n "$why" ]; then
  echo "SKIP: $why"
  exit 77
fi
[ -x "$PERF" ] || { echo "FAIL: $PERF not built"; exit 1; }
LOGS=$(mktemp -d /tmp/accl-rails.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 && pods_add_rail || { echo "FAIL: could not build the pods"; exit 1; }

FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
show_logs() { tail -n 8 "$1"/rank*.log | sed 's/^/    /'; }
tx_total() {  # tx bytes of interface $1 summed over the pods
  local i sum=0
  for i in $(seq 0 $((POD_COUNT - 1))); do sum=$((sum + $(pod_tx_bytes "$i" "$1"))); done
  echo $sum
}

printf '%-24s %-9s %10s %10s  %s\n' "case" "rank/pod" "hpn0 MB" "hpn1 MB" "result"
# rails_case <label> <ranks per pod> <expected rails> <env...>
rails_case() {
  local label=$1 per_pod=$2 want=$3
  shift 3
  local dir="$LOGS/$label.$per_pod"
  local h0=$(tx_total hpn0) h1=$(tx_total hpn1)
  run_world "$per_pod" "$dir" 60 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@" -- "$PERF" -b 32M -e 32M -n 3 -w 1 -c 1
  if ! wait_world; then
    fail "$label, $per_pod rank(s)/pod: the all-reduce failed"
    show_logs "$dir"
    return
  fi
  h0=$(( ($(tx_total hpn0) - h0) / 1000000 ))
  h1=$(( ($(tx_total hpn1) - h1) / 1000000 ))
  local total=$((h0 + h1)) result=PASS
  grep -q "Out of bounds values : 0 OK" "$dir/rank0.log" || { result=FAIL; fail "$label: wrong results"; show_logs "$dir"; }
  if [ "$total" -lt 100 ]; then
    result=FAIL; fail "$label: only $total MB crossed the rails"
  elif [ "$want" = 2 ]; then
    # Each rail within 20% of half the bytes: share in [40%, 60%].
    local share=$((h1 * 100 / total))
    if [ $share -lt 40 ] || [ $share -gt 60 ]; then
      result=FAIL; fail "$label: hpn0 $h0 MB, hpn1 $h1 MB: not an even split"
    fi
    grep -q "NET/Socket: 2 rails to rank [0-9]* (host pod[01]): hpn0 (10.77.2.[0-9]*:[0-9]*) -> 10.77.2.[0-9]*:[0-9]*, hpn1 (10.77.3.[0-9]*:[0-9]*) -> 10.77.3.[0-9]*:[0-9]*" "$dir/rank0.log" ||
      { result=FAIL; fail "$label: rank 0 does not list the rails:"; grep -h "rails\|data interface" "$dir/rank0.log" | sed 's/^/    /'; }
  elif [ "$h1" -gt $((total / 20)) ]; then
    result=FAIL; fail "$label: hpn1 carried $h1 MB with one rail"
  fi
  printf '%-24s %-9s %10s %10s  %s\n' "$label" "$per_pod" "$h0" "$h1" "$result"
}

rails_case "unset (HPN rule)" 1 2
rails_case "NCCL_SOCKET_IFNAME=hpn" 2 2 NCCL_SOCKET_IFNAME=hpn
rails_case "ACCL_SOCKET_RAILS=1" 1 1 ACCL_SOCKET_RAILS=1
grep -h "rails to rank" "$LOGS"/*/rank0.log | head -n 2 | sed 's/^/    /'

[ $FAILURES -eq 0 ] && echo "PASS" || echo "$FAILURES failure(s)"
[ $FAILURES -eq 0 ]
