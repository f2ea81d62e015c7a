#!/bin/bash
# netns_rails.sh <build dir>: two rails against one on the same pods in one run. Two pods with
# two ranks each and two rails (hpn0, hpn1; tests/netns/pods.sh), every rail shaped to
# HPN_RATE (default 1gbit) so the links, not this machine's CPUs, are the bottleneck. Runs
# all_reduce_perf at 64 MiB with ACCL_SOCKET_RAILS=1 and =2, interleaved ROUNDS times (default
# 3), and prints the busbw of each and the ratio. Target: two rails >= 1.8x one rail.
# Then one run with two rails in which hpn1 goes down in pod 1 after a few rows and stays down
# (ACCL_RAIL_TIMEOUT=FO_TIMEOUT, default 1000 ms): each row is the mean of -n 5 timed
# iterations, so the failover iteration ~ 5 x (that row) - 4 x (a normal row); the rows after
# it run on one rail and compare with the one-rail rate above. Targets: failover iteration
# <= 3x a normal one; after it >= 0.9x the one-rail rate. A benchmark, not a test (needs root).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: netns_rails.sh <build dir>}" && pwd)
HPN_RATE="${HPN_RATE:-1gbit}"
. "$HERE/../tests/netns/pods.sh"
. "$HERE/../tests/netns/run_world.sh"
why=$(pods_unavailable)
[ -z "$why" ] || { echo "cannot run: $why"; exit 77; }
LOGS=$(mktemp -d /tmp/accl-rails-bw.XXXXXX)
trap 'pods_down; rm -rf "$LOGS"' EXIT
trap 'exit 1' INT TERM
pods_up 2 && pods_add_rail || exit 1

busbw() {  # busbw (GB/s) of the 64 MiB row with $1 rails, best of out-of-place and in-place
  local dir="$LOGS/r$1.$2"
  run_world 2 "$dir" 300 ACCL_SOCKET_RAILS="$1" -- "$BUILD/perf/all_reduce_perf" -b 64M -e 64M -n "${ITERS:-4}" -w 1 -c 0
  wait_world || { echo "all-reduce failed" >&2; tail "$dir"/rank*.log >&2; exit 1; }
  awk '/^ +67108864/ {print ($8 > $12 ? $8 : $12)}' "$dir/rank0.log"
}

echo "2 pods x 2 ranks, every rail shaped to $HPN_RATE, all-reduce 64 MiB, busbw GB/s"
printf '| round | 1 rail | 2 rails | 2 rails / 1 rail |\n|---|---|---|---|\n'
ONES=""
for round in $(seq "${ROUNDS:-3}"); do
  one=$(busbw 1 "$round")
  two=$(busbw 2 "$round")
  ONES="$ONES $one"
  printf '| %s | %s | %s | %s |\n' "$round" "$one" "$two" "$(awk -v a="$two" -v b="$one" 'BEGIN {printf "%.2fx", a / b}')"
done
one_rail=$(echo $ONES | awk '{for (i = 1; i <= NF; i++) s += $i; printf "%.3f", s / NF}')

# Failover: hpn1 down in pod 1 after DOWN_AFTER rows, for good.
dir="$LOGS/failover"
run_world 2 "$dir" 400 ACCL_SOCKET_RAILS=2 ACCL_RAIL_TIMEOUT="${FO_TIMEOUT:-1000}" ACCL_RAIL_RETRY_SEC=100000 \
  NCCL_DEBUG=WARN NCCL_DEBUG_FILE="$dir/warn.%h.%p" -- \
  "$BUILD/perf/all_reduce_perf" -b 64M -e 64M -n 5 -w 1 -c 1 -N "${FO_ROWS:-9}"
rows_now() { local n; n=$(grep -cE '^ +67108864' "$dir/rank0.log" 2>/dev/null); echo "${n:-0}"; }
until [ "$(rows_now)" -ge "${DOWN_AFTER:-4}" ]; do sleep 0.2; done
ip -n "$(pod 1)" link set hpn1 down
wait_world || { echo "failover run failed" >&2; tail "$dir"/rank*.log >&2; cat "$dir"/warn.* >&2; exit 1; }
echo
echo "hpn1 down in pod 1 after row ${DOWN_AFTER:-4} (ACCL_RAIL_TIMEOUT=${FO_TIMEOUT:-1000}); per row: mean of 5 iterations (out-of-place), busbw, #wrong"
printf '| row | time (us) | busbw GB/s | #wrong (oop, ip) |\n|---|---|---|---|\n'
awk '/^ +67108864/ {n++; printf "| %d | %s | %s | %s, %s |\n", n, $6, $8, $9, $13}' "$dir/rank0.log"
awk -v one="$one_rail" -v down="${DOWN_AFTER:-4}" '
  /^ +67108864/ {n++; t[n] = $6; b[n] = $8}
  END {
    # A normal iteration: the median of the rows before the failure but the first (warm-up).
    for (i = 2; i <= down; i++) v[++cnt] = t[i]
    for (i = 1; i <= cnt; i++) for (j = i + 1; j <= cnt; j++) if (v[j] < v[i]) { x = v[i]; v[i] = v[j]; v[j] = x }
    normal = cnt % 2 ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2
    worst = down + 1
    for (i = down + 1; i <= n; i++) if (t[i] > t[worst]) worst = i
    fo = 5 * t[worst] - 4 * normal
    for (i = worst + 1; i <= n; i++) { after += b[i]; na++ }
    after /= na
    printf "normal iteration %.0f us; failover iteration ~ %.0f us = %.2fx normal (row %d); after it %.3f GB/s = %.2fx the one-rail rate (%.3f)\n",
           normal, fo, fo / normal, worst, after, after / one, one
  }' "$dir/rank0.log"
grep -h "lost:\|now on rail" "$dir"/warn.* | head -n 4 | sed 's/^/    /'
